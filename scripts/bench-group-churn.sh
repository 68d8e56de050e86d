#!/usr/bin/env bash
# Group churn, kbench beside librdkafka (docs/PERFORMANCE.md, "Consumer groups that change").
#
# On each broker (librdkafka's mock cluster of 3 brokers, the upstream Tansu binary, kbench's
# embedded Tansu) and for each fault (a member leaves, crashes, or a fourth joins), REPS times: a
# librdkafka writer (confluent-kafka) sends RATE records/s into a 6-partition topic for 27 s; at
# the same time, on the same topic, `kbench consume --consumers 3` and three librdkafka consumers
# (each group its own) read it, both with session.timeout.ms=SESSION_MS, and at 15 s one member of
# each ends as the fault says. Printed per cell: the time from the fault until every partition
# that moved was read again (kbench: its group report's `takeover_ms`; librdkafka: the end of each
# partition's longest pause after the fault, scripts/group-churn-librdkafka.py), records/s in the
# 3 s before the fault and after it, and whether every record written was read — medians, and
# min–max over the repetitions, as a Markdown table.
#
#   scripts/bench-group-churn.sh [REPS] [BROKERS] [FAULTS]
#   scripts/bench-group-churn.sh 3 mock,upstream,embedded leave,crash,join
#
# Needs: a release build (cargo build --release, and the mock cluster example), and
# scripts/install-test-tools (the upstream Tansu binary, confluent-kafka in target/tools/python).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
brokers=${2:-mock,upstream,embedded}
faults=${3:-leave,crash,join}
rate=${RATE:-1000}
session_ms=${SESSION_MS:-10000}
seconds=27
fault_at=15
cargo build --release -q -p kbench --example mock_cluster
kbench=target/release/kbench
py=target/tools/python/bin/python
churn=scripts/group-churn-librdkafka.py
out=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "kept in $out" >&2
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT

port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Start BROKER for a topic `t` of 6 partitions; sets $boot and $broker_pid.
start_broker() {
  case $1 in
    mock)
      coproc MOCK { target/release/examples/mock_cluster --topic t:6 --leaders-as-created; }
      read -r boot <&"${MOCK[0]}"
      broker_pid=$MOCK_PID
      ;;
    upstream)
      local p; p=$(port)
      target/tools/tansu broker --silent --listener-url "tcp://127.0.0.1:$p" \
        --advertised-listener-url "tcp://127.0.0.1:$p" --storage-engine memory://tansu/ \
        </dev/null >/dev/null 2>&1 &
      broker_pid=$!
      boot=127.0.0.1:$p
      ;;
    embedded)
      local p; p=$(port)
      "$kbench" broker --quiet --listen "127.0.0.1:$p" </dev/null >/dev/null 2>&1 &
      broker_pid=$!
      boot=127.0.0.1:$p
      ;;
  esac
  for _ in $(seq 100); do
    "$py" -c "from confluent_kafka.admin import AdminClient as A; A({'bootstrap.servers':'$boot'}).list_topics(timeout=1)" \
      2>/dev/null && break
    sleep 0.2
  done
  if [ "$1" != mock ]; then
    "$py" -c "
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({'bootstrap.servers': '$boot'})
[f.result() for f in a.create_topics([NewTopic('t', 6, 1)]).values()]"
  fi
}

stop_broker() {
  kill "$broker_pid" 2>/dev/null || true
  wait "$broker_pid" 2>/dev/null || true
}

records=$((rate * seconds))
echo "| broker | fault | kbench takeover, ms | librdkafka takeover, ms | kbench records/s before → after | librdkafka records/s before → after | every record read (kbench / librdkafka) |"
echo "|---|---|---|---|---|---|---|"
for broker in ${brokers//,/ }; do
  for fault in ${faults//,/ }; do
    for rep in $(seq "$reps"); do
      cell="$out/$broker-$fault-$rep"
      start_broker "$broker"
      "$py" "$churn" write "$boot" t "$rate" "$seconds" >"$cell.written" 2>/dev/null &
      writer=$!
      "$py" "$churn" group "$boot" t "rd-$rep" 3 "$fault" "$fault_at" 60 "$session_ms" - "$records" \
        >"$cell.rd" 2>/dev/null &
      rd=$!
      case $fault in
        leave) kfault="consumer-leave=1" ;;
        crash) kfault="consumer-crash=1" ;;
        join) kfault="consumer-join=1" ;;
      esac
      "$kbench" consume --bootstrap-server "$boot" --topic t --group "kb-$rep" --consumers 3 \
        --messages "$records" --timeout 40000 -X "session.timeout.ms=$session_ms" \
        --fault "at=${fault_at}s $kfault" --timeline-interval 1s --json "$cell.kb" \
        >"$cell.kbout" 2>&1 || true
      wait "$rd" "$writer" || true
      stop_broker
    done
    "$py" - "$out" "$broker" "$fault" "$reps" "$records" "$fault_at" <<'EOF'
import json, statistics, sys
out, broker, fault, reps, records, fault_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
kt, rt, kb, ka, rb, ra, kall, rall = [], [], [], [], [], [], [], []
for rep in range(1, reps + 1):
    cell = f"{out}/{broker}-{fault}-{rep}"
    try:
        k = json.load(open(cell + ".kb"))
    except Exception:
        k = None
    if k:
        g = k.get("group") or {}
        moved = [r for r in g.get("rebalances", []) if "consumer-" in r.get("cause", "")]
        t = [r["takeover_ms"] for r in moved if r.get("takeover_ms") is not None]
        if t:
            kt.append(max(t))
        ivs = k.get("intervals", [])
        before = [i["consumed"] for i in ivs if fault_at - 3 <= i["t_s"] < fault_at]
        after = [i for i in ivs if i["t_s"] >= fault_at and i["consumed"] > 0]
        kb.append(sum(before) / 3.0)
        if after:
            span = after[-1]["t_s"] + after[-1]["duration_s"] - fault_at
            ka.append(sum(i["consumed"] for i in after) / span)
        kall.append(k.get("records_consumed", 0) >= records and not k.get("unread"))
    try:
        r = json.loads(open(cell + ".rd").read().strip().splitlines()[-1])
    except Exception:
        r = None
    if r:
        if r.get("takeover_ms") is not None:
            rt.append(r["takeover_ms"])
        rb.append(r["records_per_sec_before"])
        ra.append(r["records_per_sec_after"])
        rall.append(r["unique"] >= records)
def med(xs):
    return "—" if not xs else f"{statistics.median(xs):.0f} ({min(xs):.0f}–{max(xs):.0f})"
def rates(b, a):
    return "—" if not b else f"{statistics.median(b):.0f} → {statistics.median(a) if a else 0:.0f}"
ok = lambda xs: f"{sum(xs)}/{len(xs)}"
print(f"| {broker} | {fault} | {med(kt)} | {med(rt)} | {rates(kb, ka)} | {rates(rb, ra)} | {ok(kall)} / {ok(rall)} |")
EOF
  done
done
