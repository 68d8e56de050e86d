#!/usr/bin/env bash
# What --verify costs the producer: 1 000 000 × 100-byte records, acks=1, unthrottled, against the
# embedded broker (a fresh one per run), REPS runs each way, alternating so that drift on a shared
# machine hits both alike. The read-back after the run is not in these figures (it is after the
# measured phase); its time is printed separately. Prints a Markdown table of medians with min–max.
#
#   scripts/bench-verify.sh [REPS=5] [extra kbench produce flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
shift || true
cargo build --release --quiet
out=$(mktemp -d)
for rep in $(seq 1 "$reps"); do
  for mode in plain verify; do
    flag=()
    [ "$mode" = verify ] && flag=(--verify)
    start=$(date +%s.%N)
    ./target/release/kbench produce --num-records 1000000 --record-size 100 --acks 1 \
      --reporting-interval 60000 --json "$out/$mode-$rep.json" "${flag[@]}" "$@" >/dev/null 2>&1
    python3 -c "import sys; print(float(sys.argv[1]) - float(sys.argv[2]))" "$(date +%s.%N)" "$start" > "$out/$mode-$rep.wall"
  done
done
python3 - "$out" "$reps" <<'PY'
import json, statistics, sys, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
print("| run | records/s (median, min–max) | client CPU µs/record (median, min–max) | whole command, s (median) |")
print("|---|---|---|---|")
med = {}
for mode in ["plain", "verify"]:
    docs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{mode}-*.json")))]
    walls = [float(open(p).read()) for p in sorted(glob.glob(os.path.join(out, f"{mode}-*.wall")))]
    assert len(docs) == reps and all(d["records_failed"] == 0 for d in docs)
    if mode == "verify":
        assert all(d["verification"]["ok"] for d in docs), "verification failed"
    rps = [d["records_per_sec"] for d in docs]
    cpu = [d["client_cpu_us_per_record"] for d in docs]
    med[mode] = (statistics.median(rps), statistics.median(cpu))
    print(f"| {'--verify' if mode == 'verify' else 'without'} | {statistics.median(rps):,.0f} ({min(rps):,.0f}–{max(rps):,.0f}) | "
          f"{statistics.median(cpu):.3f} ({min(cpu):.3f}–{max(cpu):.3f}) | {statistics.median(walls):.2f} |")
print()
print(f"--verify / without: records/s × {med['verify'][0] / med['plain'][0]:.2f}, CPU per record × {med['verify'][1] / med['plain'][1]:.2f}")
PY
