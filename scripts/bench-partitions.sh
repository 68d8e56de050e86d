#!/usr/bin/env bash
# Cost as the work grows (issue 28): kbench produce beside librdkafka's rdkafka_performance at 1, 16,
# 256 and 1 024 partitions, on the upstream Tansu binary (one broker) and on librdkafka's mock cluster
# (three brokers, leaders where the mock places them; crates/kbench/examples/mock_cluster.rs), the two tools alternating,
# N repetitions per cell. 100-byte records, acks=1, batch.size 1 MB, linger 5 ms; kbench's records
# unkeyed (sticky, a batch per partition in turn), rdkafka_performance's spread by its random
# partitioner. Client CPU is user + sys of the client process (getrusage of the child) per record;
# each tool's topic exists before its run (neither run's CPU includes creating it).
#
#   scripts/bench-partitions.sh [reps=3] [records=1000000] [counts="1 16 256 1024"] [brokers="tansu mock"]
#
# AB_PROPS="key=value …": each repetition also runs kbench with these -X properties, alternating
# with the plain run, and the table gains that variant's µs/record and its growth (an A/B in one
# run: AB_PROPS=buffer.memory=2147483647 is the engine without its memory bound).
#
# Goal: kbench's CPU/record at 1 024 partitions <= 1.25x its 1-partition figure, on one broker and
# on three; records/s >= 1.0x librdkafka's at every count.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
records=${2:-1000000}
counts=${3:-1 16 256 1024}
brokers=${4:-tansu mock}
scripts/build-rdkafka-performance
scripts/install-test-tools >/dev/null
cargo build --release -q -p kbench --bin kbench --example mock_cluster
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for b in $brokers; do
  case $b in
    tansu)
      addr=127.0.0.1:$(free_port)
      target/tools/tansu broker --silent --listener-url tcp://$addr --advertised-listener-url tcp://$addr \
        --storage-engine memory://tansu/ >/dev/null 2>&1 & pids+=($!)
      for _ in $(seq 60); do
        python3 -c "import socket; socket.create_connection(('${addr%:*}', ${addr#*:}), 1)" 2>/dev/null && break
        sleep 0.5
      done ;;
    mock)
      # The mock has no CreateTopics: every topic of the run is made when it starts.
      topics=()
      for n in $counts; do for r in $(seq "$reps"); do topics+=(--topic "k$n-$r:$n" --topic "r$n-$r:$n" --topic "v$n-$r:$n"); done; done
      mkfifo "$work/mock.in"
      target/release/examples/mock_cluster --leaders-as-created "${topics[@]}" < "$work/mock.in" > "$work/mock.out" & pids+=($!)
      exec 3>"$work/mock.in"
      for _ in $(seq 1200); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
      addr=$(head -1 "$work/mock.out") ;;
    *) echo "brokers: tansu and/or mock" >&2; exit 2 ;;
  esac
  python3 - "$b" "$reps" "$records" "$addr" "$work" "$counts" "${AB_PROPS:-}" <<'EOF'
import json, re, resource, statistics, subprocess, sys
broker, reps, records, addr, work, counts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], [int(c) for c in sys.argv[6].split()]
ab = [x for p in sys.argv[7].split() for x in ("-X", p)]

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

settings = ["-X", "batch.size=1000000", "-X", "linger.ms=5"]

def create(topic, n):
    # Both tools find their topic made (the mock's at its start; here by kbench beforehand), so
    # neither run's CPU includes creating it.
    if broker == "tansu":
        run(["target/release/kbench", "produce", "--bootstrap-server", addr, "--topic", topic,
             "--partitions", str(n), "--num-records", "1", "--reporting-interval", "100000"])

def kbench(topic, n, extra=()):
    doc = f"{work}/{topic}.json"
    create(topic, n)
    _, cpu = run(["target/release/kbench", "produce", "--bootstrap-server", addr, "--topic", topic,
                  "--partitions", str(n), "--num-records", str(records), "--record-size", "100",
                  "--acks", "1", "--reporting-interval", "100000", "--json", doc] + settings + list(extra))
    d = json.load(open(doc))
    assert d["settings"]["partitions"] == n, d["settings"]
    return d["records_per_sec"], cpu / records * 1e6

def rdkafka(topic, n):
    create(topic, n)
    out, cpu = run(["target/tools/rdkafka_performance", "-P", "-t", topic, "-b", addr, "-s", "100",
                    "-c", str(records), "-a", "1"] + settings)
    text = out.stdout + out.stderr
    rate = re.findall(r"(\d+) msgs/s and", text)
    delivered = re.findall(r"(\d+) delivered", text)
    if not rate or int(delivered[-1]) != records:
        sys.exit("rdkafka_performance did not deliver every record:\n" + text[-2000:])
    return float(rate[-1]), cpu / records * 1e6

def med(xs):
    return statistics.median(xs), min(xs), max(xs)

print(f"\n{broker}: {records} × 100-byte records, acks=1, batch.size 1 MB, linger 5 ms, median of {reps} (min–max)")
abhead = f" kbench {' '.join(sys.argv[7].split())} µs/record | × 1 partition |" if ab else ""
print("| partitions | kbench records/s | rdkafka_performance records/s | ratio | kbench µs/record | × 1 partition | librdkafka µs/record |" + abhead)
print("|---|---|---|---|---|---|---|" + ("---|---|" if ab else ""))
base = None
abbase = None
for n in counts:
    k, r, v = [], [], []
    for rep in range(1, reps + 1):
        k.append(kbench(f"k{n}-{rep}", n))
        r.append(rdkafka(f"r{n}-{rep}", n))
        if ab:
            v.append(kbench(f"v{n}-{rep}", n, ab))
    kr, rr = med([x[0] for x in k]), med([x[0] for x in r])
    ku, ru = med([x[1] for x in k]), med([x[1] for x in r])
    ratio = statistics.median(a[0] / b[0] for a, b in zip(k, r))
    base = base or ku[0]
    abcol = ""
    if ab:
        vu = med([x[1] for x in v])
        abbase = abbase or vu[0]
        abcol = f" {vu[0]:.3f} ({vu[1]:.3f}–{vu[2]:.3f}) | {vu[0]/abbase:.2f} |"
    print(f"| {n} | {kr[0]/1e3:,.0f} k ({kr[1]/1e3:,.0f}–{kr[2]/1e3:,.0f}) | {rr[0]/1e3:,.0f} k ({rr[1]/1e3:,.0f}–{rr[2]/1e3:,.0f}) | "
          f"{ratio:.2f} | {ku[0]:.3f} ({ku[1]:.3f}–{ku[2]:.3f}) | {ku[0]/base:.2f} | {ru[0]:.3f} ({ru[1]:.3f}–{ru[2]:.3f}) |" + abcol, flush=True)
EOF
  if [ "$b" = mock ]; then echo quit >&3; exec 3>&-; fi
  kill "${pids[@]}" 2>/dev/null || true
  pids=()
done
