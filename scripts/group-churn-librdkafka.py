#!/usr/bin/env python3
"""librdkafka's side of scripts/bench-group-churn.sh: a writer and a consumer group of librdkafka
clients (confluent-kafka from PyPI), one of whose members ends at a set time, timed as kbench times
its own group.

  write   BOOTSTRAP TOPIC RATE SECONDS        records at RATE per second, partition by partition in
                                             turn; prints {"acked": N, "per_partition": {...}}
  group   BOOTSTRAP TOPIC GROUP MEMBERS FAULT AT SECONDS SESSION_MS [PROTOCOL|-] [EXPECT]
                                             MEMBERS consumers (processes) in GROUP read for SECONDS;
                                             at AT seconds one member ends as FAULT says (leave: it
                                             closes; crash: SIGKILL; join: one more starts); prints
                                             one JSON line: records read, unique, the takeover (from
                                             the fault until every partition read again after its
                                             longest pause), records/s before and after; with
                                             EXPECT, the members close once that many were read

The takeover is measured from the records' read times: in every partition, the longest pause
between two records read that ends after the fault (a partition that did not move has none longer
than the writer's pace); the latest end of those pauses, less the fault's time. kbench's own
figure (`takeover_ms` of the group report) is the fault to the first record read from each
partition that moved: the same instant for a partition that moved.
"""

import json
import multiprocessing as mp
import os
import signal
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: F401


def write(bootstrap, topic, rate, seconds):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    md = p.list_topics(topic, timeout=10).topics[topic]
    partitions = sorted(md.partitions)
    acked = {"n": 0}
    per = {}

    def done(err, msg):
        if err is None:
            acked["n"] += 1
            per[msg.partition()] = per.get(msg.partition(), 0) + 1

    total = int(rate * seconds)
    began = time.monotonic()
    for i in range(total):
        due = began + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        while True:
            try:
                p.produce(topic, value=str(i).encode(), partition=partitions[i % len(partitions)],
                          on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(30)
    print(json.dumps({"acked": acked["n"], "per_partition": per}), flush=True)


def member(bootstrap, topic, group, session_ms, protocol, out, stop_at, zero, done):
    """One consumer: (wall time, partition, offset) of every record read, to `out` when it ends."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 500,
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": min(3000, session_ms // 3),
    }
    if protocol:
        conf["partition.assignment.strategy"] = protocol
    c = Consumer(conf)
    c.subscribe([topic])
    reads = []
    leaving = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: leaving.update(now=True))
    while time.time() < stop_at and not leaving["now"] and not done.is_set():
        msgs = c.consume(num_messages=1000, timeout=0.1)
        now = time.time() - zero
        for m in msgs:
            if m.error() is None:
                reads.append((now, m.partition(), m.offset()))
        # Written as it goes: a member that is killed leaves what it read.
        if msgs:
            with open(out, "a") as f:
                for r in reads:
                    f.write("%.6f %d %d\n" % r)
            reads = []
    c.close()


def unique_read(procs):
    seen = set()
    for _, out in procs:
        with open(out) as f:
            for line in f:
                _, p, o = line.split()
                seen.add((p, o))
    return len(seen)


def group(bootstrap, topic, group_id, members, fault, at, seconds, session_ms, protocol=None,
          expect=None):
    zero = time.time()
    stop_at = zero + seconds
    tmp = "/tmp/kbench-churn-%d-%s" % (os.getpid(), group_id)
    os.makedirs(tmp, exist_ok=True)
    procs = []
    done = mp.Event()

    def start(k):
        out = "%s/member-%d.txt" % (tmp, k)
        open(out, "w").close()
        pr = mp.Process(target=member, args=(bootstrap, topic, group_id, session_ms, protocol, out,
                                             stop_at, zero, done))
        pr.start()
        procs.append((pr, out))

    for k in range(members):
        start(k)
    time.sleep(max(0.0, zero + at - time.time()))
    fault_t = time.time() - zero
    if fault == "leave":
        # A clean close (LeaveGroup): the member's own stop, early.
        pr, _ = procs[-1]
        os.kill(pr.pid, signal.SIGTERM)
    elif fault == "crash":
        pr, _ = procs[-1]
        os.kill(pr.pid, signal.SIGKILL)
    elif fault == "join":
        start(len(procs))
    # Every record read (when told how many): the members close.
    while expect and time.time() < stop_at and not done.is_set():
        if unique_read(procs) >= expect:
            done.set()
        time.sleep(0.5)
    for pr, _ in procs:
        pr.join(seconds + 60)
    reads = []
    for _, out in procs:
        with open(out) as f:
            for line in f:
                t, p, o = line.split()
                reads.append((float(t), int(p), int(o)))
    reads.sort()
    by_partition = {}
    for t, p, o in reads:
        by_partition.setdefault(p, []).append(t)
    resumed = []
    for p, ts in by_partition.items():
        longest, end = 0.0, None
        for a, b in zip(ts, ts[1:]):
            if b >= fault_t and b - a > longest:
                longest, end = b - a, b
        if end is not None:
            resumed.append(end)
    takeover = (max(resumed) - fault_t) if resumed else None
    before = [t for t, _, _ in reads if fault_t - 3 <= t < fault_t]
    after = [t for t, _, _ in reads if t >= fault_t]
    last = reads[-1][0] if reads else 0.0
    print(json.dumps({
        "records": len(reads),
        "unique": len({(p, o) for _, p, o in reads}),
        "fault_s": round(fault_t, 3),
        "takeover_ms": None if takeover is None else round(takeover * 1e3, 1),
        "records_per_sec_before": round(len(before) / 3.0, 1),
        "records_per_sec_after": round(len(after) / max(1e-9, last - fault_t), 1) if after else 0.0,
        "last_read_s": round(last, 3),
    }), flush=True)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "write":
        write(args[0], args[1], float(args[2]), float(args[3]))
    elif cmd == "group":
        group(args[0], args[1], args[2], int(args[3]), args[4], float(args[5]), float(args[6]),
              int(args[7]), args[8] if len(args) > 8 and args[8] != "-" else None,
              int(args[9]) if len(args) > 9 else None)
    else:
        sys.exit("usage: write|group …")
