#!/usr/bin/env bash
# kbench produce against librdkafka's rdkafka_performance, side by side on one standalone broker,
# the two tools alternating, N repetitions of every cell (issue 16's table).
#
#   scripts/bench-vs-librdkafka.sh [reps=3] [records=1000000] [broker=kbench|tansu] [codecs="none snappy"]
#
# rdkafka_performance is built once from the librdkafka source bundled in the rdkafka-sys crate (a
# dev-dependency, so cargo has fetched it), into target/tools/. The broker is a separate process:
# `kbench broker` (Tansu 0.6 from crates.io) or the upstream Tansu binary (scripts/install-test-tools).
# Client CPU is user + sys of the client process (getrusage of the child) divided by the records;
# records/s is each tool's own figure (kbench's result document, rdkafka_performance's summary).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
records=${2:-1000000}
broker=${3:-kbench}
codecs=${4:-none snappy}
tools=target/tools
perf_bin=$tools/rdkafka_performance

scripts/build-rdkafka-performance
cargo build --release -q -p kbench

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
# A port the kernel just handed out: a fixed one may be held by a TIME-WAIT socket, which the upstream
# Tansu binary (no SO_REUSEADDR) cannot bind over.
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

python3 - "$reps" "$records" "$addr" "$work" "$perf_bin" "$codecs" <<'EOF'
import json, os, re, resource, statistics, subprocess, sys
reps, records, addr, work, perf_bin, codecs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6].split()

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime

def kbench(topic, batch, codec, defaults):
    doc = f"{work}/{topic}.json"
    cmd = ["target/release/kbench", "produce", "--bootstrap-server", addr, "--topic", topic,
           "--num-records", str(records), "--record-size", "100", "--acks", "1",
           "--reporting-interval", "100000", "--json", doc, "-X", f"compression.type={codec}"]
    if not defaults:
        cmd += ["-X", f"batch.size={batch}", "-X", "linger.ms=5", "-X", "max.in.flight.requests.per.connection=5"]
    _, user, sys_ = run(cmd)
    return json.load(open(doc))["records_per_sec"], user, sys_

def rdkafka(topic, batch, codec, defaults):
    # rdkafka_performance does not create topics, nor does Tansu on demand: one record makes it.
    run(["target/release/kbench", "produce", "--bootstrap-server", addr, "--topic", topic,
         "--num-records", "1", "--reporting-interval", "100000"])
    cmd = [perf_bin, "-P", "-t", topic, "-b", addr, "-s", "100", "-c", str(records), "-a", "1",
           "-z", codec, "-X", "linger.ms=5"]
    if not defaults:
        cmd += ["-X", f"batch.size={batch}", "-X", "max.in.flight=5"]
    out, user, sys_ = run(cmd)
    text = out.stdout + out.stderr
    m = re.findall(r"(\d+) msgs/s and", text)
    delivered = re.findall(r"(\d+) delivered", text)
    if not m or int(delivered[-1]) != records:
        sys.exit("rdkafka_performance did not deliver every record:\n" + text[-2000:])
    return float(m[-1]), user, sys_

def med(xs):
    return statistics.median(xs), min(xs), max(xs)

print(f"{records} × 100-byte records, acks=1, linger 5 ms, 1 partition, median of {reps} (min–max)")
print("| settings | batch.size | codec | kbench records/s | rdkafka_performance records/s | ratio | kbench µs/record (user + sys) | librdkafka µs/record |")
print("|---|---|---|---|---|---|---|---|")
cells = [("matched", b, c) for b in (16384, 1000000) for c in codecs] + [("each tool's defaults", None, c) for c in codecs]
for i, (settings, batch, codec) in enumerate(cells):
    defaults = batch is None
    k, r = [], []
    for rep in range(reps):
        k.append(kbench(f"k{i}-{rep}", batch, codec, defaults))
        r.append(rdkafka(f"r{i}-{rep}", batch, codec, defaults))
    kr, rr = med([x[0] for x in k]), med([x[0] for x in r])
    kus = [(u + s) / records * 1e6 for _, u, s in k]
    kuser = statistics.median([u / records * 1e6 for _, u, _ in k])
    ksys = statistics.median([s / records * 1e6 for _, _, s in k])
    rus = [(u + s) / records * 1e6 for _, u, s in r]
    km, rm = med(kus), med(rus)
    ratios = sorted(a[0] / b[0] for a, b in zip(k, r))
    b = "defaults" if defaults else f"{batch // 1024} KiB" if batch < 1000000 else "1 MB"
    print(f"| {settings} | {b} | {codec} | {kr[0]/1e3:,.0f} k ({kr[1]/1e3:,.0f}–{kr[2]/1e3:,.0f}) | "
          f"{rr[0]/1e3:,.0f} k ({rr[1]/1e3:,.0f}–{rr[2]/1e3:,.0f}) | {statistics.median(ratios):.2f} | "
          f"{km[0]:.3f} ({kuser:.3f} + {ksys:.3f}; {km[1]:.3f}–{km[2]:.3f}) | {rm[0]:.3f} ({rm[1]:.3f}–{rm[2]:.3f}) |", flush=True)
EOF
