#!/usr/bin/env bash
# What enable.idempotence=true costs the producer: 1 000 000 × 100-byte records over 3 partitions,
# acks=all (idempotence needs it, so the plain runs use it too), unthrottled, against the embedded
# broker (a fresh one per run), REPS runs each way, alternating so that drift on a shared machine
# hits both alike. Prints a Markdown table of medians with min–max, and the ratio of the medians.
#
#   scripts/bench-idempotence.sh [REPS=5] [extra kbench produce flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
shift || true
cargo build --release --quiet
out=$(mktemp -d)
for rep in $(seq 1 "$reps"); do
  for mode in plain idempotent; do
    idempotent=false
    [ "$mode" = idempotent ] && idempotent=true
    ./target/release/kbench produce --num-records 1000000 --record-size 100 --acks all \
      --partitions 3 --reporting-interval 60000 -X "enable.idempotence=$idempotent" \
      --json "$out/$mode-$rep.json" "$@" >/dev/null 2>&1
  done
done
python3 - "$out" "$reps" <<'PY'
import json, statistics, sys, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
print("| run | records/s (median, min–max) | client CPU µs/record (median, min–max) |")
print("|---|---|---|")
med = {}
for mode in ["plain", "idempotent"]:
    docs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{mode}-*.json")))]
    assert len(docs) == reps and all(d["records_failed"] == 0 for d in docs)
    if mode == "idempotent":
        assert all(d["producer"]["identities"] for d in docs), "no producer id"
    rps = [d["records_per_sec"] for d in docs]
    cpu = [d["client_cpu_us_per_record"] for d in docs]
    med[mode] = (statistics.median(rps), statistics.median(cpu))
    print(f"| {'enable.idempotence=true' if mode == 'idempotent' else 'false'} | {statistics.median(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | "
          f"{statistics.median(cpu):.3f} ({min(cpu):.3f}–{max(cpu):.3f}) |")
print(f"\nidempotent / plain: records/s {med['idempotent'][0] / med['plain'][0]:.3f}, CPU per record {med['idempotent'][1] / med['plain'][1]:.3f}")
PY
rm -rf "$out"
