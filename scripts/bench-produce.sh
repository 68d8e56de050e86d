#!/usr/bin/env bash
# The issue-2 produce benchmark: 1 000 000 × 100-byte records, acks=1, compression none and snappy,
# against the embedded broker (a fresh one per run), REPS runs each, alternating codecs so that drift
# on a shared machine hits both alike. Prints a Markdown table of medians with min–max.
#
#   scripts/bench-produce.sh [REPS=5] [extra kbench produce flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
shift || true
cargo build --release --quiet
out=$(mktemp -d)
for rep in $(seq 1 "$reps"); do
  for codec in none snappy; do
    ./target/release/kbench produce --num-records 1000000 --record-size 100 --acks 1 \
      --compression "$codec" --reporting-interval 60000 --json "$out/$codec-$rep.json" "$@" >/dev/null 2>&1
  done
done
python3 - "$out" "$reps" <<'PY'
import json, statistics, sys, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
print(f"| compression | records/s (median, min–max) | MB/s (median) | client CPU µs/record (median, min–max) |")
print(f"|---|---|---|---|")
for codec in ["none", "snappy"]:
    docs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{codec}-*.json")))]
    assert len(docs) == reps and all(d["records_failed"] == 0 for d in docs)
    rps = [d["records_per_sec"] for d in docs]
    mbs = [d["mb_per_sec"] for d in docs]
    cpu = [d["client_cpu_us_per_record"] for d in docs]
    print(f"| {codec} | {statistics.median(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | "
          f"{statistics.median(mbs):.1f} | {statistics.median(cpu):.3f} ({min(cpu):.3f}–{max(cpu):.3f}) |")
PY
