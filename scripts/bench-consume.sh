#!/usr/bin/env bash
# kbench consume against librdkafka's consumer (rdkafka_performance -C), side by side on one standalone
# broker: the topic is filled once per codec, then the two tools alternate reading all of it from the
# earliest offset, 1 MiB per partition per fetch (both tools' default), N repetitions each (issue 13).
#
#   scripts/bench-consume.sh [reps=3] [records=1000000] [broker=tansu|kbench] [codecs="none lz4"]
#   OLD_KBENCH=path/to/kbench scripts/bench-consume.sh …   # also another kbench build, in the same rotation
#
# rdkafka_performance is built by scripts/bench-vs-librdkafka.sh (run it once first). Client CPU is
# user + sys of the client process (getrusage of the child, start-up included) per record. Records/s
# is given twice: over each process's wall time (start to exit, the same clock for both: the ratio
# uses it), and as each tool reports it (kbench's result document: from before the first Fetch;
# rdkafka_performance's summary: from the first record received, so a long first Fetch is not in it).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
records=${2:-1000000}
broker=${3:-tansu}
codecs=${4:-none lz4}
tools=target/tools
perf_bin=$tools/rdkafka_performance
[ -x "$perf_bin" ] || { echo "build $perf_bin first: scripts/bench-vs-librdkafka.sh 1 1000" >&2; exit 2; }
cargo build --release -q -p kbench

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
addr=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
case $broker in
  kbench) target/release/kbench broker --quiet --listen $addr >/dev/null 2>&1 & pids+=($!) ;;
  tansu)
    scripts/install-test-tools >/dev/null
    $tools/tansu broker --silent --listener-url tcp://$addr --advertised-listener-url tcp://$addr \
      --storage-engine memory://tansu/ >/dev/null 2>&1 & pids+=($!) ;;
  *) echo "broker: kbench or tansu" >&2; exit 2 ;;
esac
for _ in $(seq 60); do
  python3 -c "import socket,sys; socket.create_connection(('${addr%:*}', ${addr#*:}), 1)" 2>/dev/null && break
  sleep 0.5
done

python3 - "$reps" "$records" "$addr" "$work" "$perf_bin" "$codecs" "${OLD_KBENCH:-}" <<'PY'
import json, re, resource, statistics, subprocess, sys, time
reps, records, addr, work, perf_bin, codecs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6].split()
old = sys.argv[7]

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    run.wall = wall
    return out, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime

def kbench(topic, binary="target/release/kbench"):
    doc = f"{work}/{topic}.json"
    _, user, sys_ = run([binary, "consume", "--bootstrap-server", addr, "--topic", topic,
                         "--messages", str(records), "--partition", "0", "--offset", "earliest",
                         "--fetch-size", "1048576", "--timeout", "30000", "--json", doc])
    d = json.load(open(doc))
    if d["records_consumed"] != records:
        sys.exit(f"kbench consume read {d['records_consumed']} of {records}")
    return records / run.wall, user, sys_, d["client_cpu_us_per_record"], d["records_per_sec"]

def rdkafka(topic):
    out, user, sys_ = run([perf_bin, "-C", "-t", topic, "-p", "0", "-b", addr, "-c", str(records),
                           "-o", "beginning", "-X", "fetch.message.max.bytes=1048576"])
    text = out.stdout + out.stderr
    m = re.findall(r"(\d+) msgs/s", text)
    got = re.findall(r"(\d+) messages \(\d+ bytes\) consumed", text)
    if not m or not got or int(got[-1]) < records:
        sys.exit("rdkafka_performance did not read every record:\n" + text[-2000:])
    return records / run.wall, user, sys_, None, float(m[-1])

def med(xs):
    return statistics.median(xs), min(xs), max(xs)

print(f"{records} × 100-byte records, 1 partition, read from the earliest offset, 1 MiB per partition per fetch, median of {reps} (min–max)")
print("| codec | kbench records/s: process wall (own figure) | librdkafka records/s: process wall (own figure) | ratio (wall) | kbench µs/record: process (own figure) | librdkafka µs/record |")
print("|---|---|---|---|---|---|")
for codec in codecs:
    topic = f"consume-{codec}"
    run(["target/release/kbench", "produce", "--bootstrap-server", addr, "--topic", topic, "--num-records",
         str(records), "--record-size", "100", "--acks", "1", "--compression", codec, "--reporting-interval", "100000"])
    k, r, o = [], [], []
    for _ in range(reps):
        k.append(kbench(topic))
        r.append(rdkafka(topic))
        if old:
            o.append(kbench(topic, old))
    kr, rr = med([x[0] for x in k]), med([x[0] for x in r])
    kus, rus = med([(u + s) / records * 1e6 for _, u, s, _, _ in k]), med([(u + s) / records * 1e6 for _, u, s, _, _ in r])
    own = statistics.median(x[3] for x in k)
    kown, rown = statistics.median(x[4] for x in k), statistics.median(x[4] for x in r)
    ratios = sorted(a[0] / b[0] for a, b in zip(k, r))
    print(f"| {codec} | {kr[0]/1e3:,.0f} k ({kr[1]/1e3:,.0f}–{kr[2]/1e3:,.0f}) ({kown/1e3:,.0f} k) | {rr[0]/1e3:,.0f} k ({rr[1]/1e3:,.0f}–{rr[2]/1e3:,.0f}) ({rown/1e3:,.0f} k) | "
          f"{statistics.median(ratios):.2f} | {kus[0]:.3f} ({kus[1]:.3f}–{kus[2]:.3f}) ({own:.3f}) | {rus[0]:.3f} ({rus[1]:.3f}–{rus[2]:.3f}) |", flush=True)
    if old:
        orr, ous = med([x[0] for x in o]), med([(u + s) / records * 1e6 for _, u, s, _, _ in o])
        print(f"| {codec}, {old} | {orr[0]/1e3:,.0f} k ({orr[1]/1e3:,.0f}–{orr[2]/1e3:,.0f}) ({statistics.median(x[4] for x in o)/1e3:,.0f} k) | | "
              f"{statistics.median(a[0] / b[0] for a, b in zip(o, r)):.2f} | {ous[0]:.3f} ({ous[1]:.3f}–{ous[2]:.3f}) ({statistics.median(x[3] for x in o):.3f}) | |", flush=True)
PY
