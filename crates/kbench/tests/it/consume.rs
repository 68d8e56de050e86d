//! `kbench consume` against real brokers (the embedded one and the upstream Tansu binary): it reads
//! back exactly what kbench and librdkafka wrote, in group and assign modes and with every codec;
//! its lines are kafka-consumer-perf-test's; a group carries on from its committed offsets; bad input
//! gets one error naming the flag.

use crate::librdkafka;

use std::time::Duration;

use crate::common::*;
use kbench_wire::Pins;

const LIMIT: Duration = Duration::from_secs(120);

/// The final line's columns, by the header's names.
fn columns(stdout: &str, detailed: bool) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut lines = stdout.lines();
    let header = lines.next().expect("a header line");
    let names: Vec<&str> = header.split(", ").collect();
    let first = if detailed { "time" } else { "start.time" };
    assert_eq!(names[0], first, "{stdout}");
    assert_eq!(names.len(), 10, "{header}");
    lines
        .filter(|l| !l.starts_with("kbench:") && !l.starts_with("WARNING"))
        .map(|l| {
            let values: Vec<&str> = l.split(", ").collect();
            assert_eq!(values.len(), names.len(), "{l}");
            names
                .iter()
                .zip(values)
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// Every codec: kbench produces N records of 100 bytes, `kbench consume` reads exactly N, and the
/// tool's columns (MB, records) and the result document agree with what was produced.
#[test]
fn consume_reads_back_what_was_produced_with_every_codec() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let dir = TempDir::new("consume-1");
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let topic = format!("consume-{codec}");
            Cmd::on("produce", &broker)
                .args(&[
                    "--num-records",
                    "30000",
                    "--record-size",
                    "100",
                    "--partitions",
                    "3",
                    "--acks",
                    "1",
                    "--compression",
                    codec,
                ])
                .topic(&topic)
                .ok(LIMIT);
            let json = dir.path().join(format!("{codec}.json"));
            let out = Cmd::on("consume", &broker)
                // Upstream Tansu holds a JoinGroup for half the session timeout: keep it short.
                .args(&["--messages", "30000", "--timeout", "20000"])
                .args(&[
                    "-X",
                    "session.timeout.ms=6000",
                    "-X",
                    "heartbeat.interval.ms=1000",
                ])
                .topic(&topic)
                .json(&json)
                .ok(LIMIT);
            let stdout = text(&out.stdout);
            let rows = columns(&stdout, false);
            assert_eq!(rows.len(), 1, "{kind:?} {codec}: {stdout}");
            let row = &rows[0];
            assert_eq!(row["data.consumed.in.nMsg"], "30000", "{kind:?} {codec}");
            let mb: f64 = row["data.consumed.in.MB"].parse().unwrap();
            assert!(
                (mb - 30000.0 * 100.0 / 1048576.0).abs() < 1e-3,
                "{kind:?} {codec}: {mb} MB"
            );
            for f in ["MB.sec", "nMsg.sec", "fetch.MB.sec", "fetch.nMsg.sec"] {
                let v: f64 = row[f].parse().unwrap();
                assert!(v > 0.0, "{kind:?} {codec}: {f} = {v}");
            }
            let doc = result_json(&json);
            assert_eq!(doc["kind"], "consume");
            assert_eq!(doc["records_consumed"], 30000, "{kind:?} {codec}");
            assert_eq!(doc["bytes_consumed"], 3_000_000, "{kind:?} {codec}");
            assert_eq!(doc["complete"], true);
            assert_eq!(doc["settings"]["mode"], "group");
            let partitions = doc["partitions"].as_object().unwrap();
            assert_eq!(partitions.len(), 3, "{kind:?} {codec}");
            let per_partition: u64 = partitions
                .values()
                .map(|p| p["records"].as_u64().unwrap())
                .sum();
            assert_eq!(per_partition, 30000, "{kind:?} {codec}");
            for p in partitions.values() {
                assert_eq!(
                    p["end_offset"].as_i64().unwrap() - p["start_offset"].as_i64().unwrap(),
                    p["records"].as_i64().unwrap(),
                    "{kind:?} {codec}: offsets are dense"
                );
            }
            assert!(doc["client_cpu_us_per_record"].as_f64().unwrap() > 0.0);
            assert!(doc["fetch_latency"]["count"].as_u64().unwrap() >= 1);
            assert!(
                doc["negotiated_versions"]["Fetch"].as_i64().unwrap() >= 4,
                "{doc}"
            );
            assert!(
                doc["errors"].as_object().unwrap().is_empty(),
                "{kind:?} {codec}: {doc}"
            );
        }
    }
}

/// librdkafka writes (keys, values of varied length, two partitions, each codec), kbench reads:
/// records and bytes (key + value, as kafka-consumer-perf-test counts them) are exactly what was
/// written, in assign mode from the earliest offset, with the detailed lines' columns.
#[test]
fn consume_reads_what_librdkafka_wrote_in_assign_mode() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let rt = runtime();
        let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
        let topic = "consume-from-librdkafka";
        rt.block_on(cluster.ensure_topic(topic, 2, 1)).unwrap();
        let mut expected_bytes = 0u64;
        let mut expected_records = 0u64;
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let records: Vec<(i32, Vec<u8>, Vec<u8>)> = (0..2000u32)
                .map(|i| {
                    let key = format!("k{i}").into_bytes();
                    let value =
                        format!("{codec}-{i}-{}", "v".repeat((i % 50) as usize)).into_bytes();
                    ((i % 2) as i32, key, value)
                })
                .collect();
            expected_bytes += records
                .iter()
                .map(|(_, k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>();
            expected_records += records.len() as u64;
            let (delivered, failed) = librdkafka::produce(&broker.addr, topic, codec, records);
            assert_eq!((delivered, failed), (2000, 0), "{kind:?} {codec}");
        }
        let dir = TempDir::new("consume-2");
        let json = dir.path().join("assign.json");
        let out = Cmd::on("consume", &broker)
            .args(&[
                "--messages",
                &expected_records.to_string(),
                "--partition",
                "0,1",
                "--offset",
                "earliest",
                "--show-detailed-stats",
                "--reporting-interval",
                "1",
                "--timeout",
                "20000",
            ])
            .topic(topic)
            .json(&json)
            .ok(LIMIT);
        let stdout = text(&out.stdout);
        for row in columns(&stdout, true) {
            assert_eq!(row["threadId"], "0", "{stdout}");
        }
        let doc = result_json(&json);
        assert_eq!(doc["records_consumed"], expected_records, "{kind:?}");
        assert_eq!(doc["bytes_consumed"], expected_bytes, "{kind:?}");
        assert_eq!(doc["settings"]["mode"], "assign");
        assert_eq!(doc["rebalance_time_ms"], 0, "no group, no join");
        assert_eq!(doc["commits"], 0);
        assert!(doc.get("member_id").is_none());
    }
}

/// A named group commits where it stopped; the next run in that group carries on from there, and a
/// run that finds nothing more ends at `--timeout` with the tool's warning (exit 0). On the upstream
/// Tansu binary: the embedded broker (Tansu 0.6.0 from crates.io, memory storage) answers a Fetch
/// from an offset inside a batch with a later batch, repeated, or with nothing, so a run resuming
/// mid-batch there reports offsets passed over instead (see the next test).
#[test]
fn a_group_carries_on_from_its_committed_offsets() {
    let broker = TestBroker::standalone();
    let dir = TempDir::new("consume-3");
    Cmd::on("produce", &broker)
        .args(&[
            "--num-records",
            "1000",
            "--record-size",
            "10",
            "--acks",
            "1",
        ])
        .topic("committed")
        .ok(LIMIT);
    // The later members offer Java's round-robin assignor by its class name first, range after
    // it: the group's next generation takes one (upstream Tansu keeps an emptied group's protocol,
    // range, where Kafka would take the first offered), and the one member still reads every
    // partition on from the commit.
    let read = |messages: &str, name: &str, assignor: &str| {
        let json = dir.path().join(name);
        let out = Cmd::on("consume", &broker)
            .args(&["-X", &format!("partition.assignment.strategy={assignor}")])
            .args(&[
                "--messages",
                messages,
                "--group",
                "carry-on",
                "--timeout",
                "1500",
                "-X",
                "session.timeout.ms=6000",
            ])
            .topic("committed")
            .json(&json)
            .ok(LIMIT);
        (text(&out.stdout), result_json(&json))
    };
    let (_, first) = read("600", "first.json", "range");
    assert_eq!(first["records_consumed"], 600);
    assert_eq!(first["partitions"]["0"]["start_offset"], 0);
    assert!(first["commits"].as_u64().unwrap() >= 1);
    let (_, second) = read(
        "400",
        "second.json",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor,range",
    );
    assert_eq!(second["records_consumed"], 400);
    assert_eq!(second["partitions"]["0"]["start_offset"], 600, "{second}");
    let (stdout, third) = read("10", "third.json", "roundrobin,range");
    assert_eq!(third["records_consumed"], 0);
    assert_eq!(third["timed_out"], true);
    assert_eq!(third["complete"], false);
    assert!(
        stdout.contains("WARNING: Exiting before consuming the expected number of messages: timeout (1500 ms) exceeded."),
        "{stdout}"
    );
    // Two members carry on too: the group's next run joins, finds nothing more and ends. Its
    // members leave leader first: this broker keeps a leader that left during the rebalance a
    // follower's leave started as the group's leader for good, and the next run's joins then
    // waited for its assignment until they failed (three runs in five, before the order).
    Cmd::on("produce", &broker)
        .args(&["--num-records", "1000", "--record-size", "10"])
        .args(&["--acks", "1", "--partitions", "2"])
        .topic("committed-two")
        .ok(LIMIT);
    let two = |messages: &str, timeout: &str, name: &str| {
        let json = dir.path().join(name);
        Cmd::on("consume", &broker)
            .args(&["--messages", messages, "--group", "carry-two"])
            .args(&["--consumers", "2", "--timeout", timeout])
            .args(&["-X", "session.timeout.ms=6000"])
            .topic("committed-two")
            .json(&json)
            .ok(LIMIT);
        result_json(&json)
    };
    let first = two("1000", "20000", "two-first.json");
    assert_eq!(first["records_consumed"], 1000, "{first}");
    for name in ["two-second.json", "two-third.json"] {
        let next = two("10", "1500", name);
        assert_eq!(next["records_consumed"], 0, "{next}");
        assert_eq!(next["timed_out"], true, "{next}");
    }
}

/// Reading from inside a batch on the embedded broker: whatever the broker answers, no offset is
/// counted twice and none is passed over silently: records + offsets passed over span exactly
/// the offsets the run moved across.
#[test]
fn offsets_passed_over_are_counted_never_hidden() {
    let broker = TestBroker::start();
    let dir = TempDir::new("consume-mid-batch");
    Cmd::on("produce", &broker)
        .args(&[
            "--num-records",
            "1000",
            "--record-size",
            "10",
            "--acks",
            "1",
        ])
        .topic("mid-batch")
        .ok(LIMIT);
    for offset in ["0", "1", "600", "999"] {
        let json = dir.path().join(format!("from-{offset}.json"));
        Cmd::on("consume", &broker)
            .args(&[
                "--messages",
                "1000",
                "--partition",
                "0",
                "--offset",
                offset,
                "--timeout",
                "1000",
            ])
            .topic("mid-batch")
            .json(&json)
            .ok(LIMIT);
        let doc = result_json(&json);
        let p = &doc["partitions"]["0"];
        let span = p["end_offset"].as_u64().unwrap() - p["start_offset"].as_u64().unwrap();
        assert_eq!(p["start_offset"].as_str(), None);
        assert_eq!(p["start_offset"], offset.parse::<u64>().unwrap(), "{doc}");
        assert_eq!(
            p["records"].as_u64().unwrap() + p["skipped"].as_u64().unwrap(),
            span,
            "from {offset}: {doc}"
        );
        assert!(doc["records_consumed"].as_u64().unwrap() <= 1000 - offset.parse::<u64>().unwrap());
        assert_eq!(doc["offsets_skipped"], p["skipped"]);
    }
}

/// Bad input: one error naming the flag, property or topic, exit 2 (usage) or 1, never a hang, and
/// nothing on stdout (a missing topic once printed the CSV header before its error).
#[test]
fn bad_consume_input_names_what_is_wrong() {
    let broker = TestBroker::start();
    Cmd::on("produce", &broker)
        .args(&["--num-records", "10", "--acks", "1"])
        .topic("exists")
        .ok(LIMIT);
    let cases: [(&[&str], &str, i32); 7] = [
        (&["--topic", "missing"], "--topic missing", 1),
        (&["--topic", "exists", "--partition", "7"], "--partition", 1),
        (&["--topic", "exists", "--offset", "5"], "--partition", 2),
        (&["--topic", "exists", "-X", "linger.ms=5"], "linger.ms", 2),
        (
            &["--topic", "exists", "-X", "fetch.max.bytes=x"],
            "fetch.max.bytes",
            2,
        ),
        (
            &["--topic", "exists", "--date-format", "yyyy E"],
            "--date-format",
            2,
        ),
        (
            &[
                "--topic",
                "exists",
                "-X",
                "partition.assignment.strategy=sticky",
            ],
            "partition.assignment.strategy",
            2,
        ),
    ];
    for (args, named, code) in cases {
        let out = Cmd::on("consume", &broker)
            .args(&["--timeout", "2000"])
            .args(args)
            .run(LIMIT);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.contains("error")).count(),
            1,
            "{args:?}: {err}"
        );
        // The error alone: no CSV header above it with nothing under it.
        let stdout = text(&out.stdout);
        assert!(!stdout.contains("start.time"), "{args:?}: {stdout}");
    }
}

/// With no --bootstrap-server, the embedded broker is started and filled first: `kbench consume`
/// alone works on a fresh machine.
#[test]
fn consume_alone_fills_an_embedded_broker_and_reads_it() {
    let dir = TempDir::new("consume-4");
    let json = dir.path().join("alone.json");
    let out = Cmd::new("consume")
        .args(&["--messages", "5000", "--compression", "zstd"])
        .json(&json)
        .ok(LIMIT);
    assert!(
        text(&out.stderr).contains("filling topic"),
        "{}",
        text(&out.stderr)
    );
    let doc = result_json(&json);
    assert_eq!(doc["records_consumed"], 5000);
    assert_eq!(doc["target"]["embedded_broker"], true);
}

/// Backlog drain: a backlog of 50000 records is read while a producer keeps producing 5000
/// records/s beside it; the consumer reads exactly the backlog, the producer's records are all
/// acknowledged and stop with the drain, and the result carries both.
#[test]
fn a_backlog_drains_while_a_producer_keeps_producing() {
    let broker = TestBroker::start();
    let dir = TempDir::new("consume-backlog");
    let json = dir.path().join("drain.json");
    let out = Cmd::on("consume", &broker)
        .args(&[
            "--produce-first",
            "--messages",
            "50000",
            "--partitions",
            "2",
            "--produce-rate",
            "5000",
        ])
        .topic("backlog-drain")
        .json(&json)
        .ok(LIMIT);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("kbench: backlog of 50000 records drained in"),
        "{stdout}"
    );
    let doc = result_json(&json);
    assert_eq!(doc["records_consumed"], 50_000);
    let b = &doc["backlog"];
    assert_eq!(b["records"], 50_000);
    assert_eq!(b["produce_rate"], 5000.0);
    let produced = &b["produced"];
    assert_eq!(produced["records_failed"], 0, "{b}");
    assert_eq!(produced["records_sent"], produced["records_acked"], "{b}");
    assert!(produced["records_acked"].as_u64().unwrap() > 0, "{b}");
    assert!(b["drain_records_per_sec"].as_f64().unwrap() > 0.0);
    // --produce-rate needs a topic to drain.
    let out = Cmd::on("consume", &broker)
        .args(&["--produce-rate", "100", "--messages", "10"])
        .topic("no-such-backlog")
        .run(LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--produce-rate"));
}

/// Commands copied from Apache Kafka 4.x's tools run as written (KIP-1147's names):
/// `kafka-producer-perf-test --command-property … --command-config FILE` and
/// `kafka-consumer-perf-test --num-records N --command-config FILE` mean what the 3.x names
/// (`--producer-props`, `--producer.config`, `--messages`) mean, with the same lines.
#[test]
fn kafka_4x_flag_names_run_as_the_3x_ones() {
    let broker = TestBroker::start();
    let dir = TempDir::new("kafka-4x");
    let config = dir.path().join("client.properties");
    std::fs::write(&config, "# a Kafka tool's properties file\nlinger.ms=3\n").unwrap();
    let config = config.to_str().unwrap();
    let consumer_config = dir.path().join("consumer.properties");
    std::fs::write(&consumer_config, "fetch.max.wait.ms=100\n").unwrap();
    let consumer_config = consumer_config.to_str().unwrap();
    let mut settings = Vec::new();
    for (topic, props, file) in [
        ("names-3x", "--producer-props", "--producer.config"),
        ("names-4x", "--command-property", "--command-config"),
    ] {
        let json = dir.path().join(format!("{topic}.json"));
        let out = Cmd::on("produce", &broker)
            .topic(topic)
            .args(&["--num-records", "3000", "--throughput", "-1"])
            .args(&["--record-size", "100", file, config])
            .args(&[props, "acks=all", "client.id=four"])
            .json(&json)
            .ok(LIMIT);
        let stdout = text(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.starts_with("3000 records sent, "), "{topic}: {stdout}");
        assert!(last.ends_with(" ms 99.9th."), "{topic}: {stdout}");
        let doc = result_json(&json);
        settings.push((
            doc["settings"]["acks"].clone(),
            doc["settings"]["client_id"].clone(),
            doc["settings"]["linger_ms"].clone(),
        ));
        let (old, new) = ("--messages", "--num-records");
        let mut rows = Vec::new();
        for flag in [old, new] {
            let out = Cmd::on("consume", &broker)
                .topic(topic)
                .args(&[flag, "3000", "--command-config", consumer_config])
                .ok(LIMIT);
            let got = columns(&text(&out.stdout), false);
            assert_eq!(got.len(), 1, "{flag}: {got:?}");
            rows.push(got[0]["data.consumed.in.nMsg"].clone());
        }
        assert_eq!(rows, ["3000", "3000"], "{topic}");
    }
    assert_eq!(
        settings[0], settings[1],
        "the same settings under either name"
    );
    assert_eq!(settings[0].0, "all");
    assert_eq!(settings[0].1, "four");
    assert_eq!(settings[0].2, 3);
}

/// Kafka 4.x's `--print-metrics`: after the final line, ToolsUtils.printMetrics's table (a blank
/// line, `Metric Name   Value`, sorted `group:name:{client-id=…} : value` lines), Java's names only
/// where the figure means the same, kbench's own in a group of their own.
#[test]
fn print_metrics_prints_the_tools_table_with_kbench_s_own_apart() {
    let broker = TestBroker::start();
    let topic = "print-metrics";
    let table = |stdout: &str| -> Vec<(String, String)> {
        let lines: Vec<&str> = stdout.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("Metric Name"))
            .unwrap_or_else(|| panic!("no metrics header:\n{stdout}"));
        assert_eq!(lines[header - 1], "", "a blank line first:\n{stdout}");
        let width = lines[header].find("   Value").expect("the Value column");
        let rows: Vec<(String, String)> = lines[header + 1..]
            .iter()
            .take_while(|l| l.len() > width && l[width..].starts_with(" : "))
            .map(|l| {
                (
                    l[..width].trim_end().to_string(),
                    l[width + 3..].to_string(),
                )
            })
            .collect();
        let names: Vec<&String> = rows.iter().map(|(n, _)| n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "name order");
        rows
    };
    let value = |rows: &[(String, String)], name: &str| -> String {
        rows.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {rows:?}"))
    };
    let out = Cmd::on("produce", &broker)
        .topic(topic)
        .args(&[
            "--num-records",
            "2000",
            "--throughput",
            "-1",
            "--record-size",
            "100",
        ])
        .args(&["--producer-props", "client.id=pm", "--print-metrics"])
        .ok(LIMIT);
    let stdout = text(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("2000 records sent, ")),
        "{stdout}"
    );
    let rows = table(&stdout);
    assert_eq!(
        value(
            &rows,
            "kbench-producer-metrics:records-sent-total:{client-id=pm}"
        ),
        "2000.000"
    );
    assert_eq!(
        value(&rows, "producer-metrics:record-error-total:{client-id=pm}"),
        "0.000"
    );
    assert!(rows.iter().all(|(n, v)| {
        (n.starts_with("producer-metrics:") || n.starts_with("kbench-producer-metrics:"))
            && n.ends_with(":{client-id=pm}")
            && v.parse::<f64>().is_ok_and(|x| x.is_finite() && x >= 0.0)
            && v.split('.').nth(1).is_some_and(|d| d.len() == 3)
    }));
    assert!(
        rows.iter()
            .any(|(n, _)| n.starts_with("kbench-producer-metrics:"))
    );

    let out = Cmd::on("consume", &broker)
        .topic(topic)
        .args(&[
            "--messages",
            "2000",
            "--print-metrics",
            "-X",
            "client.id=pc",
        ])
        .ok(LIMIT);
    let stdout = text(&out.stdout);
    let rows = table(&stdout);
    assert_eq!(
        value(
            &rows,
            "consumer-fetch-manager-metrics:records-consumed-total:{client-id=pc}"
        ),
        "2000.000"
    );
    let fetches: f64 = value(
        &rows,
        "consumer-fetch-manager-metrics:fetch-total:{client-id=pc}",
    )
    .parse()
    .unwrap();
    assert!(fetches >= 1.0, "{rows:?}");
    assert!(
        rows.iter()
            .any(|(n, _)| n.starts_with("kbench-consumer-metrics:"))
    );
}

/// Kafka 4.x's `kafka-consumer-perf-test --include REGEX` on `bootstrap`: `incl-a` (3000 records)
/// and `incl-b` (2000) match `incl-[ab]`, `incl-ab` (500) does not (the whole name must match, as
/// Java's `Pattern.matches`). Every matching record is read once, in one group, counted in one
/// final line, each topic's share in `topics`, `--verify` per topic and added up; the group
/// committed both topics, so a second run in it finds nothing more. The result document.
pub(crate) fn include_reads_every_matching_topic(bootstrap: &str, dir: &TempDir) {
    for (topic, n) in [("incl-a", "3000"), ("incl-b", "2000"), ("incl-ab", "500")] {
        Cmd::new("produce")
            .args(&["--bootstrap-server", bootstrap, "--topic", topic])
            .args(&["--num-records", n, "--record-size", "50", "--acks", "all"])
            .args(&["--throughput", "-1", "--partitions", "2", "--verify"])
            .ok(LIMIT);
    }
    let read = |name: &str, records: &str, timeout: &str, verify: &[&str]| {
        let json = dir.path().join(name);
        let group = if name == "part.json" {
            "incl-part"
        } else {
            "incl"
        };
        let out = Cmd::new("consume")
            .args(&["--bootstrap-server", bootstrap, "--include", "incl-[ab]"])
            .args(&["--num-records", records, "--timeout", timeout])
            .args(verify)
            .args(&["--group", group, "-X", "session.timeout.ms=6000"])
            .args(&["-X", "heartbeat.interval.ms=1000"])
            .json(&json)
            .run(LIMIT);
        (out, result_json(&json))
    };
    let (out, doc) = read("include.json", "5000", "20000", &["--verify"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The header and the final line (the verification's line follows them).
    let lines: Vec<&str> = stdout.lines().take(2).collect();
    let rows = columns(&lines.join("\n"), false);
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(rows[0]["data.consumed.in.nMsg"], "5000", "{stdout}");
    assert_eq!(doc["records_consumed"], 5000, "{doc}");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["settings"]["include"], "incl-[ab]");
    assert_eq!(
        doc["settings"]["topics"],
        serde_json::json!(["incl-a", "incl-b"])
    );
    assert_eq!(doc["topics"]["incl-a"]["records_consumed"], 3000, "{doc}");
    assert_eq!(doc["topics"]["incl-b"]["records_consumed"], 2000, "{doc}");
    assert_eq!(
        doc["partitions"],
        serde_json::json!({}),
        "per topic instead"
    );
    for t in ["incl-a", "incl-b"] {
        let v = &doc["topics"][t]["verification"];
        assert_eq!(v["ok"], true, "{t}: {v}");
    }
    let v = &doc["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["records_verified"], 5000, "{v}");
    assert_eq!(v["duplicated"], 0, "{v}");
    // A target below what the topics hold is read exactly, whichever topic's answers come first.
    let (out, part) = read("part.json", "4321", "20000", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(part["records_consumed"], 4321, "{part}");
    assert_eq!(part["complete"], true);
    let by_topic: u64 = ["incl-a", "incl-b"]
        .iter()
        .map(|t| part["topics"][t]["records_consumed"].as_u64().unwrap())
        .sum();
    assert_eq!(by_topic, 4321, "{part}");
    // Committed: the group's next run starts where this one ended, in both topics (its members
    // found the group formed: they had left it leader first, see `a_group_carries_on_...`). Its
    // time-out outlasts a join round Tansu holds (3 s): a topic's member that idled out while
    // the other's join was still held would leave mid-rebalance, which no order mends there.
    let (out, again) = read("again.json", "10", "6000", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(again["records_consumed"], 0, "{again}");
    assert_eq!(again["timed_out"], true);
    for t in ["incl-a", "incl-b"] {
        for p in ["0", "1"] {
            assert_eq!(
                again["topics"][t]["partitions"][p]["start_offset"],
                doc["topics"][t]["partitions"][p]["end_offset"],
                "{t}-{p}: {again}"
            );
        }
    }
    // What the pattern does not match, and a pattern that is no regex: one error naming the flag.
    for (pattern, code) in [("incl", 1), ("incl-(", 2)] {
        let out = Cmd::new("consume")
            .args(&["--bootstrap-server", bootstrap, "--include", pattern])
            .args(&["--timeout", "1000"])
            .run(LIMIT);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{pattern}: {err}");
        assert!(err.contains("--include"), "{pattern}: {err}");
        assert_eq!(err.lines().count(), 1, "{pattern}: {err}");
    }
}

#[test]
fn include_reads_every_matching_topic_on_tansu() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let dir = TempDir::new("consume-include");
        include_reads_every_matching_topic(&broker.addr, &dir);
    }
}

#[test]
fn include_reads_every_matching_topic_on_librdkafka_mock_cluster() {
    let mock = crate::mock::Mock::new(3);
    for t in ["incl-a", "incl-b", "incl-ab"] {
        mock.topic(t, 2);
    }
    let dir = TempDir::new("consume-include-mock");
    include_reads_every_matching_topic(&mock.bootstrap, &dir);
}
