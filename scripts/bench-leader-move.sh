#!/usr/bin/env bash
# The leader-move benchmark (issue 28): on librdkafka's mock cluster (3 brokers, 6 partitions,
# leaders spread), every partition's leader moves once at 4 s while a workload runs; kbench's
# per-second figures beside librdkafka's own producer, paced the same way on the same cluster with
# the same move. N repetitions, each printed as one JSON line, then the medians.
#
#   scripts/bench-leader-move.sh [reps=3] [workloads="produce consume e2e"]
#
# The harness is crates/kbench/examples/leader_move.rs (the mock cluster is librdkafka's, a
# dev-dependency). Goal: kbench's p50 after the move within 1.2x of before, and the window of the
# move no worse than librdkafka's.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
workloads=${2:-produce consume e2e}
cargo build --release -q -p kbench --bin kbench --example leader_move
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for w in $workloads; do
  for i in $(seq "$reps"); do
    target/release/examples/leader_move "$w" > "$work/$w-$i.json" 2>"$work/$w-$i.log" \
      || { cat "$work/$w-$i.log" >&2; exit 1; }
  done
done
python3 - "$work" "$reps" $workloads <<'PY'
import json, statistics, sys
work, reps, workloads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, d=2):
    return "-" if x is None else f"{x:.{d}f}"
for w in workloads:
    docs = [json.load(open(f"{work}/{w}-{i}.json")) for i in range(1, reps + 1)]
    print(f"\n== {w}: every leader moved at {docs[0]['move_at_s']} s, {reps} repetitions (medians, [min..max]) ==")
    tools = [t for t in ("kbench", "librdkafka") if t in docs[0]]
    for t in tools:
        s = [d[t]["summary"] for d in docs]
        def col(k):
            v = [x[k] for x in s if x[k] is not None]
            return f"{fmt(med(v))} [{fmt(min(v)) if v else '-'}..{fmt(max(v)) if v else '-'}]"
        during = [x["window_of_the_move"] for x in s if x["window_of_the_move"]]
        print(f"{t:>10}: p50 before {col('p50_before_ms')} ms, after {col('p50_after_ms')} ms, after/before {col('after_over_before')}; "
              f"window of the move p50 {fmt(med([d['p50_ms'] for d in during]))} ms, p99 {fmt(med([d['p99_ms'] for d in during]))} ms")
    last = docs[-1]
    print("  per second (last repetition): t  " + "  ".join(f"{t} rec/s p50 p99" for t in tools))
    rows = zip(*[last[t]["windows"] for t in tools])
    for r in rows:
        print("   " + f"{r[0]['t_s']:5.1f}  " + "  ".join(f"{x['records_per_sec']:8.0f} {x['p50_ms']:6.2f} {x['p99_ms']:7.2f}" for x in r))
    k = last["kbench"]
    if "cluster" in k:
        c = k["cluster"]
        print(f"  kbench cluster: {len(c['leader_changes'])} leader changes, retries {c['retries']}, max attempts {c['max_attempts']}, refreshes {c['metadata_refreshes']}")
PY
