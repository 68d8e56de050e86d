#!/usr/bin/env python3
# Two kbench builds side by side: produce, alternating, at 16 KiB and 1 MB batches, none and snappy;
# medians and min-max of records/s and client CPU per record (user, sys) from the result documents.
#   python3 scripts/ab-produce.py OLD_KBENCH NEW_KBENCH BROKER_ADDR [reps] [records] [partitions,…] [codec,…]
# Two flag sets of one build instead: AB_OLD_FLAGS / AB_NEW_FLAGS (extra flags of each arm, split on
# spaces) and AB_LABELS=a,b, e.g. AB_NEW_FLAGS="--keys random:10000" AB_LABELS=unkeyed,keyed.
import json, os, subprocess, statistics, sys
if len(sys.argv) < 4:
    sys.exit("usage: ab-produce.py OLD_KBENCH NEW_KBENCH BROKER_ADDR [reps=5] [records=1000000] [partitions=1]")
old, new, addr = sys.argv[1:4]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
records = int(sys.argv[5]) if len(sys.argv) > 5 else 1000000
partition_counts = [int(p) for p in sys.argv[6].split(",")] if len(sys.argv) > 6 else [1]
codecs = sys.argv[7].split(",") if len(sys.argv) > 7 else ["none", "snappy"]
extra = {"before": os.environ.get("AB_OLD_FLAGS", "").split(), "after": os.environ.get("AB_NEW_FLAGS", "").split()}
label = dict(zip(("before", "after"), os.environ.get("AB_LABELS", "before,after").split(",")))
print(f"{records} × 100 B, acks=1, linger 5 ms; {reps} alternating runs each; medians (min–max)")
print("| partitions | batch.size | codec | build | records/s | client CPU µs/record | user | sys |")
print("|---|---|---|---|---|---|---|---|")
for partitions, batch in [(p, b) for p in partition_counts for b in (16384, 1000000)]:
    for codec in codecs:
        res = {"before": [], "after": []}
        for r in range(reps):
            for name, binary in (("before", old), ("after", new)):
                doc = f"/tmp/ab-{name}.json"
                subprocess.run([binary, "produce", "--bootstrap-server", addr, "--topic", f"ab-{name}-{partitions}-{batch}-{codec}-{r}", "--partitions", str(partitions),
                    "--num-records", str(records), "--record-size", "100", "--acks", "1", "--reporting-interval", "100000",
                    "-X", f"batch.size={batch}", "-X", f"compression.type={codec}", "--json", doc] + extra[name],
                    check=True, capture_output=True)
                d = json.load(open(doc))
                res[name].append((d["records_per_sec"], d["client_cpu_us_per_record"],
                                  d["client_cpu_user_s"] / d["records_sent"] * 1e6, d["client_cpu_sys_s"] / d["records_sent"] * 1e6))
        for name in ("before", "after"):
            xs = res[name]
            f = lambda i: (statistics.median(x[i] for x in xs), min(x[i] for x in xs), max(x[i] for x in xs))
            rps, cpu, us, sy = f(0), f(1), f(2), f(3)
            b = "16 KiB" if batch == 16384 else "1 MB"
            print(f"| {partitions} | {b} | {codec} | {label[name]} | {rps[0]/1e3:,.0f} k ({rps[1]/1e3:,.0f}–{rps[2]/1e3:,.0f}) | {cpu[0]:.3f} ({cpu[1]:.3f}–{cpu[2]:.3f}) | {us[0]:.3f} | {sy[0]:.3f} |", flush=True)
