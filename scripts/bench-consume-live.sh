#!/usr/bin/env bash
# A consumer keeping up with a live producer on the upstream Tansu binary (fresh, in memory):
# kbench produces RECORDS × 1 KiB at RATE records/s to PARTITIONS partitions while CONSUMER
# (kbench or librdkafka) reads them with fetch.max.wait.ms=10; prints the consumer's 10 s lines.
#   scripts/bench-consume-live.sh kbench|librdkafka [RATE=20000] [RECORDS=1600000] [PARTITIONS=16]
# KBENCH=path picks the kbench build (default target/release/kbench).
set -euo pipefail
cd "$(dirname "$0")/.."
consumer=${1:?kbench or librdkafka}
rate=${2:-20000}
records=${3:-1600000}
partitions=${4:-16}
kbench=${KBENCH:-target/release/kbench}
port=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
target/tools/tansu broker --silent --listener-url "tcp://127.0.0.1:$port" \
  --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ > /dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null' EXIT
sleep 2
topic=live-$consumer-$$
secs=$(( records / rate + 30 ))
"$kbench" produce --bootstrap-server "127.0.0.1:$port" --topic "$topic" --partitions "$partitions" \
  --throughput "$rate" --num-records "$records" --record-size 1024 --acks all -X linger.ms=1 \
  -X batch.size=131072 --reporting-interval 10000 > /tmp/bench-consume-live-producer.txt 2>&1 &
sleep 1
if [ "$consumer" = kbench ]; then
  parts=$(seq -s, 0 $(( partitions - 1 )))
  timeout "$secs" "$kbench" consume --bootstrap-server "127.0.0.1:$port" --topic "$topic" \
    --messages "$records" -X fetch.max.wait.ms=10 --partition "$parts" --show-detailed-stats \
    --reporting-interval 10000 --timeout 15000
else
  timeout "$secs" target/tools/rdkafka_performance -C -G "g$$" -t "$topic" -b "127.0.0.1:$port" \
    -X fetch.wait.max.ms=10 -X auto.offset.reset=earliest -c "$records" -u 2>/dev/null \
    | grep -E '^\|' | awk 'NR % 10 == 2' || true
fi
tail -1 /tmp/bench-consume-live-producer.txt
