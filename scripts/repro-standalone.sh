#!/usr/bin/env bash
# Issue 17's reproductions against the upstream Tansu broker binary (not kbench's own), in a loop:
# the seed-shaped e2e run (4 producers × 4 records of 1000 B every 100 ms, commits every 10 s) RUNS
# times, each on a fresh topic, then a quick Fetch sweep. Prints one line per e2e run (acked,
# consumed, lost, late, fetch gaps held/skipped) and the sweep's cell statuses. Before the fix, about
# a third of the e2e runs reported 4–8 records lost that librdkafka then read from the broker, and
# every Fetch cell failed.
#
#   scripts/repro-standalone.sh [RUNS=6] [SECONDS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-6}
secs=${2:-8}
scripts/install-test-tools >/dev/null
cargo build --release --quiet
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="tcp://127.0.0.1:$port"
target/tools/tansu broker --silent --listener-url "$url" --advertised-listener-url "$url" \
  --storage-engine memory://tansu/ >/dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null' EXIT
sleep 1
out=$(mktemp -d)
for i in $(seq 1 "$runs"); do
  ./target/release/kbench e2e --bootstrap-server "127.0.0.1:$port" --topic "e2etest-$i" --producers 4 \
    --batch-interval 100ms --payload-size 1000 --messages-per-batch 4 --duration "${secs}s" \
    --commit 10s --reporting-interval 0s --json "$out/e2e-$i.json" >/dev/null 2>&1 || true
  python3 - "$out/e2e-$i.json" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["fetch_gaps"]
print(f"e2e run {sys.argv[2]}: acked {d['records_acked']}, consumed {d['records_consumed']}, "
      f"lost {d['records_lost']}, late {d['records_late']}, drained {d['drained']}, "
      f"fetch gaps held {g['held']} skipped {g['skipped']}")
PY
done
./target/release/kbench sweep --quick --api fetch --bootstrap-server "127.0.0.1:$port" \
  --json "$out/sweep.json" >/dev/null 2>&1 || true
python3 - "$out/sweep.json" <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
statuses = collections.Counter(json.dumps(c["status"]) for c in d["cells"])
waits = collections.Counter(c.get("fetch_max_wait_ms") for c in d["cells"])
print(f"sweep fetch cells: {dict(statuses)}; fetch max wait used (ms → cells): {dict(waits)}")
PY
rm -rf "$out"
