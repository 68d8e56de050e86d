#!/usr/bin/env python3
# The same total load from 1 agent and from 3 agents on this machine, side by side (alternating):
# produce (records/s, latency p50/p99 from the merged histograms) and e2e (one consumer agent; the
# producers on 1 or 2 agents: whole trip p50/p99), and the coordinator's CPU per merged interval
# (its user+sys CPU over the run, from getrusage of the child, divided by the progress intervals).
#   python3 scripts/bench-distributed.py [KBENCH=target/release/kbench] [reps=3] [rate=60000] [seconds=20]
# and consume (a topic of 6 partitions filled once with rate × seconds records, read whole by 1 or 3
# agents: the partitions assigned and dealt out, and as one group with a member per agent:
# records/s over the run and over the fetch time, Fetch latency p50/p99 from the merged histograms).
# and omb (an OMB workload of 1 topic of 6 partitions, 3 producers and 3 subscriptions of one member,
# at the rate, from 1 and 3 agents: records/s, publish latency and end-to-end p50/p99 from the
# merged histograms; OMB's end-to-end is ms-resolution, as OMB's).
# DIST_PRODUCE_FLAGS: more produce flags (e.g. "--linger-ms 0"); DIST_SKIP_E2E=1: no e2e;
# DIST_ONLY=consume (or produce, e2e, omb): that workload alone.
# Starts its own embedded broker and three agents on loopback; kills them at the end.
import json, os, resource, socket, statistics, subprocess, sys, tempfile, time

kbench = sys.argv[1] if len(sys.argv) > 1 else "target/release/kbench"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
rate = int(sys.argv[3]) if len(sys.argv) > 3 else 60000
seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 20

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def wait_port(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"nothing listens on {port}")

work = tempfile.mkdtemp(prefix="kbench-dist-bench-")
procs = []
try:
    bport = free_port()
    procs.append(subprocess.Popen([kbench, "broker", "--quiet", "--listen", f"127.0.0.1:{bport}"]))
    wait_port(bport)
    agents = []
    for i in range(3):
        p = free_port()
        procs.append(subprocess.Popen([kbench, "agent", "--listen", f"127.0.0.1:{p}", "--results-dir", f"{work}/a{i}"],
                                      stdout=subprocess.DEVNULL))
        wait_port(p)
        agents.append(f"http://127.0.0.1:{p}")

    def run(args, name):
        doc = f"{work}/{name}.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([kbench] + args + ["--bootstrap-server", f"127.0.0.1:{bport}", "--json", doc],
                             check=True, capture_output=True, text=True).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return json.load(open(doc)), out, cpu

    only = os.environ.get("DIST_ONLY")
    rows = {}
    consume_records = rate * seconds
    if only in (None, "consume"):
        # The topic every consume run reads whole (unmeasured fill, from one process).
        subprocess.run([kbench, "produce", "--bootstrap-server", f"127.0.0.1:{bport}", "--topic", "dist-c",
                        "--partitions", "6", "--num-records", str(consume_records), "--throughput", "-1",
                        "--record-size", "100", "--acks", "1"], check=True, capture_output=True)
    workload = f"{work}/omb.yaml"
    with open(workload, "w") as f:
        f.write(f"name: dist bench\ntopics: 1\npartitionsPerTopic: 6\nmessageSize: 100\n"
                f"useRandomizedPayloads: false\nsubscriptionsPerTopic: 3\nconsumerPerSubscription: 1\n"
                f"producersPerTopic: 3\nproducerRate: {rate}\nconsumerBacklogSizeGB: 0\n"
                f"testDurationMinutes: {seconds / 60}\nwarmupDurationMinutes: 0.05\n")
    for r in range(reps):
        for n in (1, 3):
            if only in (None, "omb"):
                d, out, cpu = run(["omb", workload, "--agents", ",".join(agents[:n]), "--reporting-interval", "5s",
                                   "-o", f"{work}/omb-{n}-{r}.json"], f"o{n}-{r}")
                assert d["consumed"]["records"] == d["consumed"]["expected_records"], d["consumed"]
                rows.setdefault(("omb", n), []).append(
                    (d["records_per_sec"], d["latency"]["p50"], d["latency"]["p99"],
                     d["end_to_end"]["p50"], d["end_to_end"]["p99"], cpu))
            if only in (None, "consume"):
                for how, flags in (("assigned", ["--partition", "0,1,2,3,4,5"]),
                                   ("group", ["-X", "session.timeout.ms=10000"])):
                    d, out, cpu = run(["consume", "--agents", ",".join(agents[:n]), "--topic", "dist-c",
                                       "--messages", str(consume_records), "--timeout", "20000",
                                       "--reporting-interval", "1000"] + flags, f"c{how}{n}-{r}")
                    assert d["records_consumed"] >= consume_records, d["records_consumed"]
                    rows.setdefault((f"consume ({how})", n), []).append(
                        (d["records_per_sec"], d["fetch_latency"]["p50"], d["fetch_latency"]["p99"],
                         d["fetch_records_per_sec"], cpu))
            if only not in (None, "produce", "e2e"):
                continue
            d, out, cpu = run(["produce", "--agents", ",".join(agents[:n]), "--topic", f"dist-p-{n}-{r}",
                               "--num-records", str(rate * seconds), "--throughput", str(rate), "--record-size", "100",
                               "--acks", "1", "--reporting-interval", "1000"] + os.environ.get("DIST_PRODUCE_FLAGS", "").split(), f"p{n}-{r}")
            intervals = max(1, sum(1 for l in out.splitlines() if "records/sec over" in l))
            rows.setdefault(("produce", n), []).append((d["records_per_sec"], d["latency"]["p50"], d["latency"]["p99"], cpu * 1e3 / intervals, cpu))
            if os.environ.get("DIST_SKIP_E2E") or only == "produce":
                continue
            # e2e: the consumer on the first agent, producers on the next one or two.
            per_agent_load = "--producers 6 --batch-interval 10ms --messages-per-batch 10".split()
            e_agents = ",".join(agents[: 2 if n == 1 else 3])
            d, out, cpu = run(["e2e", "--agents", e_agents, "--topic", f"dist-e-{n}-{r}", "--duration", f"{seconds}s",
                               "--reporting-interval", "1s"] + per_agent_load, f"e{n}-{r}")
            intervals = max(1, sum(1 for l in out.splitlines() if "consumed over" in l))
            rows.setdefault(("e2e", n), []).append((d["records_per_sec"], d["whole_trip"]["p50"], d["whole_trip"]["p99"], cpu * 1e3 / intervals, cpu))
    print(f"{reps} alternating runs each, {seconds} s; medians (min–max)")
    print("| workload | producer agents | records/s | p50 ms | p99 ms | coordinator CPU ms / interval | coordinator CPU s |")
    print("|---|---|---|---|---|---|---|")
    f = lambda xs, i, s=1.0: f"{statistics.median(x[i] for x in xs) * s:,.2f} ({min(x[i] for x in xs) * s:,.2f}–{max(x[i] for x in xs) * s:,.2f})"
    for (w, n), xs in sorted(rows.items()):
        if w.startswith("consume") or w == "omb":
            continue
        label = f"{n}" if w == "produce" else f"{1 if n == 1 else 2} (+1 consumer agent)"
        print(f"| {w} | {label} | {f(xs, 0)} | {f(xs, 1, 1e-3)} | {f(xs, 2, 1e-3)} | {f(xs, 3)} | {f(xs, 4)} |")
    def table(title, head, picked, first, scales):
        """A table of the rows whose workload `picked` takes: `first` the row's leading cells,
        then each figure by its scale (1e-3: µs to ms)."""
        chosen = sorted((k, xs) for k, xs in rows.items() if picked(k[0]))
        if not chosen:
            return
        print()
        print(title)
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for (w, n), xs in chosen:
            print("| " + " | ".join(first(w, n) + [f(xs, i, s) for i, s in enumerate(scales)]) + " |")
    table(f"consume: {consume_records} records of 100 B in 6 partitions, read whole",
          ["workload", "agents", "records/s (run)", "Fetch p50 ms", "Fetch p99 ms", "records/s (fetch time)",
           "coordinator CPU s"], lambda w: w.startswith("consume"), lambda w, n: [w, str(n)],
          [1.0, 1e-3, 1e-3, 1.0, 1.0])
    table(f"omb: 1 topic × 6 partitions, 3 producers, 3 subscriptions × 1 consumer, {rate} msg/s, {seconds} s",
          ["agents", "records/s", "publish p50 ms", "publish p99 ms", "end-to-end p50 ms", "end-to-end p99 ms",
           "coordinator CPU s"], lambda w: w == "omb", lambda w, n: [str(n)],
          [1.0, 1e-3, 1e-3, 1e-3, 1e-3, 1.0])
finally:
    for p in procs:
        p.kill()
        p.wait()
    import shutil
    shutil.rmtree(work, ignore_errors=True)
