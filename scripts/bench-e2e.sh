#!/usr/bin/env bash
# The issue-5 e2e benchmark: 1 000 records/s of 1 KiB (4 producers, one record every 4 ms each), one
# consumer in a fresh group, synchronous commits, against the embedded broker (a fresh one per run).
# Each repetition runs both consume waits (fetch.max.wait.ms 10 ms, the seed's consumeTimeoutMs, and
# 1 ms), alternating, so that drift on a shared machine hits both alike. Prints a Markdown table of
# medians with min–max.
#
#   scripts/bench-e2e.sh [REPS=5] [SECONDS=20] [extra kbench e2e flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
secs=${2:-20}
shift 2 || shift $# || true
cargo build --release --quiet
out=$(mktemp -d)
for rep in $(seq 1 "$reps"); do
  for wait in 10ms 1ms; do
    ./target/release/kbench e2e --producers 4 --batch-interval 4ms --messages-per-batch 1 \
      --payload-size 1024 --consume-wait "$wait" --duration "${secs}s" --reporting-interval 0s \
      --seed "$rep" --json "$out/$wait-$rep.json" "$@" >/dev/null 2>&1
  done
done
python3 - "$out" "$reps" <<'PY'
import json, statistics, sys, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
def cell(xs, f="{:.2f}"):
    return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}–{f.format(max(xs))})"
print("| consume wait | records/s | whole trip p50 ms | whole trip p99 ms | produce request p50 ms | produce request p99 ms | whole trip − produce request at p50, ms | fetch p50 ms | kbench processing per poll p50 µs | lost / duplicated |")
print("|---|---|---|---|---|---|---|---|---|---|")
for wait in ["10ms", "1ms"]:
    docs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{wait}-*.json")))]
    assert len(docs) == reps, f"{wait}: {len(docs)} of {reps} runs wrote a result"
    ms = lambda d, k, q: d[k][q] / 1000
    rps = [d["records_per_sec"] for d in docs]
    t50 = [ms(d, "whole_trip", "p50") for d in docs]
    t99 = [ms(d, "whole_trip", "p99") for d in docs]
    p50 = [ms(d, "producer_request_duration", "p50") for d in docs]
    p99 = [ms(d, "producer_request_duration", "p99") for d in docs]
    over = [a - b for a, b in zip(t50, p50)]
    f50 = [ms(d, "fetch_duration", "p50") for d in docs]
    proc = [d["consumer_processing"]["p50"] for d in docs]
    lost = sum(d["records_lost"] for d in docs)
    dup = sum(d["records_duplicated"] for d in docs)
    print(f"| {wait} | {cell(rps, '{:.0f}')} | {cell(t50)} | {cell(t99)} | {cell(p50, '{:.3f}')} | {cell(p99, '{:.3f}')} | {cell(over)} | {cell(f50)} | {cell(proc, '{:.0f}')} | {lost} / {dup} |")
PY
