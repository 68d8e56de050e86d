#!/usr/bin/env bash
# Latency at a fixed, low rate: kbench produce beside librdkafka's rdkafka_performance on one
# upstream Tansu binary (docs/PERFORMANCE.md, "Latency at a fixed rate"). For each rate, REPS
# times, in turn: `kbench produce --throughput RATE --linger-ms 0 --acks 1` and
# `rdkafka_performance -P -r RATE -l -A FILE -X linger.ms=0 -X acks=1`, 100-byte records, 5 s of
# them each, a fresh topic per run. Printed: latency p50 and p99 (kbench: from each record's
# intended time to its acknowledgement, the result's `latency`; rdkafka_performance: from the
# produce() call to the delivery report, its `-A` file), and kbench's publish delay p50 (intended
# time → request sent: the generator's own delay). Medians over the repetitions, min–max after.
#
#   scripts/bench-low-rate-latency.sh [REPS] [RATES]
#   OLD_KBENCH=path/to/kbench scripts/bench-low-rate-latency.sh 3 1000,10000   # another build too
#
# Needs target/tools/rdkafka_performance (scripts/build-rdkafka-performance) and the upstream
# Tansu binary (scripts/install-test-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
rates=${2:-1000,10000}
kbench=${KBENCH:-target/release/kbench}
perf_bin=target/tools/rdkafka_performance
[ -x "$perf_bin" ] || scripts/build-rdkafka-performance
[ -n "${KBENCH:-}" ] || cargo build --release -q -p kbench
out=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
target/tools/tansu broker --silent --listener-url "tcp://$addr" --advertised-listener-url "tcp://$addr" \
  --storage-engine memory://tansu/ </dev/null >/dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null || true; rm -rf "$out"' EXIT
for _ in $(seq 60); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.5
done

builds=("new:$kbench")
[ -n "${OLD_KBENCH:-}" ] && builds+=("old:$OLD_KBENCH")
n=0
for rate in ${rates//,/ }; do
  records=$((rate * 5))
  for rep in $(seq "$reps"); do
    for b in "${builds[@]}"; do
      name=${b%%:*}
      bin=${b#*:}
      n=$((n + 1))
      "$bin" produce --bootstrap-server "$addr" --topic "lat-$n" --partitions 1 \
        --record-size 100 --num-records "$records" --throughput "$rate" --linger-ms 0 --acks 1 \
        --json "$out/$name-$rate-$rep.json" >/dev/null 2>&1
    done
    n=$((n + 1))
    "$perf_bin" -P -t "lat-$n" -s 100 -c "$records" -r "$rate" -l -A "$out/rd-$rate-$rep.txt" \
      -X linger.ms=0 -X acks=1 -b "$addr" >/dev/null 2>&1
  done
done

python3 - "$out" "$reps" "$rates" "${OLD_KBENCH:+old}" <<'EOF'
import json, statistics, sys
out, reps, rates, old = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
def span(xs, f="{:.0f}"):
    return (f + " (" + f + "–" + f + ")").format(statistics.median(xs), min(xs), max(xs))
tools = ["new"] + (["old"] if old else [])
print("| rate | client | latency p50, µs | latency p99, µs | publish delay p50, µs | p50 ÷ librdkafka's |")
print("|---|---|---|---|---|---|")
for rate in rates:
    rd50, rd99 = [], []
    for rep in range(1, reps + 1):
        xs = [int(l) for l in open(f"{out}/rd-{rate}-{rep}.txt") if l.strip()]
        rd50.append(pct(xs, 50)); rd99.append(pct(xs, 99))
    for t in tools:
        p50, p99, pd, ratio = [], [], [], []
        for rep in range(1, reps + 1):
            d = json.load(open(f"{out}/{t}-{rate}-{rep}.json"))
            p50.append(d["latency"]["p50"]); p99.append(d["latency"]["p99"])
            pd.append(d["publish_delay"]["p50"])
            ratio.append(d["latency"]["p50"] / rd50[rep - 1])
        label = "kbench" if t == "new" else "kbench (OLD_KBENCH)"
        print(f"| {rate}/s | {label} | {span(p50)} | {span(p99)} | {span(pd)} | {span(ratio, '{:.2f}')} |")
    print(f"| {rate}/s | rdkafka_performance | {span(rd50)} | {span(rd99)} | — | 1 |")
EOF
