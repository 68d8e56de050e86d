//! `kbench omb`: OpenMessaging Benchmark workload and driver files (written for these tests from
//! OMB's documented format, under tests/omb/) run unmodified against real brokers — the embedded
//! one and the upstream Tansu binary; OMB's result JSON has every field OMB writes; librdkafka
//! reads back what the run's producers wrote; bad files get one error naming the field and line.

use crate::librdkafka;

use std::path::PathBuf;

use serde_json::Value;
use std::time::Duration;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(180);

pub(crate) fn omb_file(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/omb")
        .join(name)
        .display()
        .to_string()
}

/// What one `kbench omb` run left: its output, OMB's result JSON and kbench's document.
struct OmbRun {
    stdout: String,
    stderr: String,
    omb: serde_json::Value,
    doc: serde_json::Value,
}

/// `kbench omb WORKLOAD --driver kafka-test-driver.yaml FLAGS… -o … --json …` against `broker`,
/// required to exit 0.
fn run_omb(broker: &TestBroker, workload: &str, flags: &[&str], dir: &TempDir) -> OmbRun {
    let (omb_path, json) = (dir.file("omb.json"), dir.file("kbench.json"));
    let out = Cmd::on("omb", broker)
        .arg(workload)
        .args(&["--driver", &omb_file("kafka-test-driver.yaml")])
        .args(flags)
        .args(&["-o", &omb_path, "--json", &json])
        .run(LIMIT);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "{:?} {workload}: {stdout}\n{stderr}",
        broker.kind
    );
    OmbRun {
        stdout,
        stderr,
        omb: serde_json::from_str(&std::fs::read_to_string(&omb_path).unwrap()).unwrap(),
        doc: result_json(std::path::Path::new(&json)),
    }
}

/// Every field of OMB's `TestResult`.
const OMB_FIELDS: &[&str] = &[
    "workload",
    "driver",
    "messageSize",
    "topics",
    "partitions",
    "producersPerTopic",
    "consumersPerTopic",
    "publishRate",
    "publishErrorRate",
    "consumeRate",
    "backlog",
    "aggregatedPublishLatencyQuantiles",
    "aggregatedPublishDelayLatencyQuantiles",
    "aggregatedEndToEndLatencyQuantiles",
];
const OMB_PERCENTILES: &[&str] = &[
    "Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "99999pct", "Max",
];

/// OMB's `publishRate` series, one rate per measured period.
pub(crate) fn publish_rates(omb: &Value) -> Vec<f64> {
    omb["publishRate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect()
}

pub(crate) fn check_omb_fields(omb: &serde_json::Value) {
    for f in OMB_FIELDS {
        assert!(omb.get(*f).is_some(), "OMB field {f} missing");
    }
    for prefix in ["publishLatency", "publishDelayLatency", "endToEndLatency"] {
        for p in OMB_PERCENTILES {
            let series = format!("{prefix}{p}");
            assert!(omb[&series].is_array(), "OMB series {series} missing");
            let aggregated = format!(
                "aggregated{}{}{p}",
                prefix[..1].to_uppercase(),
                &prefix[1..]
            );
            assert!(
                omb[&aggregated].is_number(),
                "OMB field {aggregated} missing"
            );
        }
    }
}

/// One topic, 4 partitions, randomized payloads, 2000 msg/s with a warm-up, on both brokers: the
/// run ends by itself, every acknowledged record is read by the subscription, OMB's JSON has every
/// field and its figures agree with kbench's, the rate is held, the driver's unknown property and
/// topic config are listed, and librdkafka reads back exactly the records acknowledged.
#[test]
fn an_omb_workload_runs_end_to_end_on_both_brokers() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let dir = TempDir::new("omb-1");
        let OmbRun {
            stdout,
            stderr,
            omb,
            doc,
        } = run_omb(
            &broker,
            &omb_file("1-topic-4-partitions-100b.yaml"),
            &["--reporting-interval", "2s"],
            &dir,
        );
        assert!(
            stderr.contains("not applied: producerConfig max.block.ms")
                && !stderr.contains("not applied: topicConfig"),
            "{stderr}"
        );
        assert_eq!(doc["settings"]["topic_config"]["min.insync.replicas"], "1");
        assert!(
            stdout.contains("----- Aggregated Pub Latency (ms) avg:"),
            "{stdout}"
        );
        assert!(
            stdout.lines().any(|l| l.starts_with("Pub rate ")),
            "{stdout}"
        );
        check_omb_fields(&omb);
        assert_eq!(doc["kind"], "omb");
        assert_eq!(doc["records_failed"], 0, "{kind:?}");
        let acked = doc["records_acked"].as_u64().unwrap();
        let warm = doc["warmup"]["records_acked"].as_u64().unwrap();
        // 6 s at 2000 msg/s, warm-up 3 s: every record the schedule asked for is sent or counted
        // unsent (none vanish, however slow the machine), and the pacer never runs ahead of the
        // schedule over the phase as recorded.
        let count = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
        for (phase, asked, secs) in [
            (&doc, 12_000, doc["duration_s"].as_f64().unwrap()),
            (&doc["warmup"], 6_000, 3.0),
        ] {
            let scheduled = count(phase, "records_sent") + count(phase, "records_unsent");
            assert!(
                scheduled >= asked,
                "{kind:?}: {scheduled} of {asked}: {phase}"
            );
            if phase == &doc {
                assert!(
                    scheduled as f64 <= 2_000.0 * secs + 10.0,
                    "{kind:?}: {scheduled} scheduled in {secs} s"
                );
            }
            assert_eq!(
                count(phase, "records_sent"),
                count(phase, "records_acked") + count(phase, "records_failed")
            );
        }
        assert_eq!(
            doc["consumed"]["records"], doc["consumed"]["expected_records"],
            "{kind:?}: the subscription read every record"
        );
        assert_eq!(doc["consumed"]["expected_records"], acked + warm);
        // OMB's figures are kbench's, in OMB's units.
        let p50_ms = omb["aggregatedPublishLatency50pct"].as_f64().unwrap();
        let p50_us = doc["latency"]["p50"].as_u64().unwrap();
        assert!(
            (p50_ms * 1000.0 - p50_us as f64).abs() < 1.0,
            "{p50_ms} ms vs {p50_us} µs"
        );
        assert!(p50_ms > 0.0);
        assert!(doc["end_to_end"]["count"].as_u64().unwrap() >= acked);
        let rates = publish_rates(&omb);
        assert!(rates.len() >= 3, "{rates:?}");
        // Every period but the last holds producer windows; the last may be a short tail with none.
        assert!(
            rates[..rates.len() - 1].iter().all(|r| *r > 0.0),
            "{kind:?}: {rates:?}"
        );
        // The measured periods tile the phase: each (stamped at its end) is as long as the time
        // since the one before it.
        let periods: Vec<&Value> = doc["periods"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["warmup"] == false)
            .collect();
        assert!(periods.len() >= 3, "{periods:?}");
        for pair in periods.windows(2) {
            let since = pair[1]["at_s"].as_f64().unwrap() - pair[0]["at_s"].as_f64().unwrap();
            assert!(
                (pair[1]["duration_s"].as_f64().unwrap() - since).abs() < 1e-3,
                "{kind:?}: a gap or overlap: {} then {}",
                pair[0],
                pair[1]
            );
        }
        assert_eq!(omb["workload"], "1 topic / 4 partitions / 100b");
        // librdkafka reads exactly what was acknowledged, each value 100 bytes, half of it zeros.
        let topic = doc["topics"][0].as_str().unwrap();
        let total = (acked + warm) as usize;
        let read = librdkafka::read(
            &broker.addr,
            topic,
            4,
            total,
            Duration::from_millis(500),
            LIMIT,
        );
        assert_eq!(read.len(), total, "{kind:?}: librdkafka read back");
        for r in &read {
            let v = r.value.as_ref().unwrap();
            assert_eq!(v.len(), 100);
            assert!(v[50..].iter().all(|b| *b == 0), "randomBytesRatio 0.5");
        }
    }
}

/// Two topics of two keyed producers each and two subscriptions: both subscriptions read every
/// record, the rate is split over four producers, and keys follow KEY_ROUND_ROBIN (each key in one
/// partition, read back by librdkafka).
#[test]
fn several_topics_producers_and_subscriptions() {
    let broker = TestBroker::start();
    let dir = TempDir::new("omb-2");
    let doc = run_omb(
        &broker,
        &omb_file("2-topics-keyed-2-subscriptions.yaml"),
        &["--reporting-interval", "2s"],
        &dir,
    )
    .doc;
    let acked = doc["records_acked"].as_u64().unwrap();
    assert!(
        (20_000..=24_200).contains(&acked),
        "{acked} acked at 4000 msg/s for 6 s"
    );
    assert!(doc["warmup"].is_null());
    assert_eq!(doc["consumed"]["consumers"], 4);
    assert_eq!(doc["consumed"]["expected_records"], acked * 2);
    assert_eq!(
        doc["consumed"]["records"],
        acked * 2,
        "both subscriptions read everything"
    );
    assert_eq!(doc["settings"]["keys"], "round-robin:10000");
    let topics: Vec<&str> = doc["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(topics.len(), 2);
    let mut total = 0;
    for topic in topics {
        let read = librdkafka::read(&broker.addr, topic, 3, 1, Duration::from_secs(2), LIMIT);
        total += read.len();
        let mut placed = std::collections::HashMap::new();
        for r in &read {
            let key = r.key.clone().expect("keyed");
            assert_eq!(key.len(), 10);
            assert_eq!(*placed.entry(key).or_insert(r.partition), r.partition);
            assert_eq!(r.value.as_ref().unwrap().len(), 256, "payloadFile's bytes");
        }
    }
    assert_eq!(total as u64, acked);
}

/// producerRate 0: a rate search runs first (on a topic of its own), and the workload runs at the
/// rate it chose.
#[test]
fn producer_rate_zero_searches_first() {
    let broker = TestBroker::start();
    let dir = TempDir::new("omb-3");
    let workload = dir.file("max.yaml");
    std::fs::write(
        &workload,
        "name: max rate\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 100\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\nproducerRate: 0\ntestDurationMinutes: 0.05\nwarmupDurationMinutes: 0\n",
    )
    .unwrap();
    let OmbRun { stderr, doc, .. } = run_omb(&broker, &workload, &["--step-duration", "1s"], &dir);
    assert!(stderr.contains("producerRate 0: running at"), "{stderr}");
    let chosen = doc["max_rate"]["chosen"].as_f64().unwrap();
    assert!(chosen >= 10_000.0, "{chosen}");
    assert_eq!(doc["target_records_per_sec"].as_f64().unwrap(), chosen);
    assert!(doc["max_rate"]["steps"].as_array().unwrap().len() >= 2);
    assert!(!doc["topics"][0].as_str().unwrap().ends_with("-search"));
}

/// Bad files and flags: one error naming the file, the field and its line; exit 2; nothing runs.
#[test]
fn bad_workload_and_driver_files_are_named() {
    let dir = TempDir::new("omb-bad");
    let good = std::fs::read_to_string(omb_file("1-topic-4-partitions-100b.yaml")).unwrap();
    let cases: [(&str, String, &[&str]); 5] = [
        (
            "unknown.yaml",
            good.replace("producerRate", "producersRate"),
            &["unknown field `producersRate`", "line 13", "unknown.yaml"],
        ),
        (
            "type.yaml",
            good.replace("partitionsPerTopic: 4", "partitionsPerTopic: four"),
            &["partitionsPerTopic", "line 5", "type.yaml"],
        ),
        (
            "zero.yaml",
            good.replace("topics: 1", "topics: 0"),
            &["topics: must be at least 1", "zero.yaml"],
        ),
        (
            "payload.yaml",
            good.replace("useRandomizedPayloads: true", "payloadFile: missing.data"),
            &["payloadFile", "missing.data"],
        ),
        (
            "keys.yaml",
            format!("{good}keyDistributor: ZIPF\n"),
            &["ZIPF", "line 17"],
        ),
    ];
    for (name, body, wanted) in cases {
        let path = dir.file(name);
        std::fs::write(&path, body).unwrap();
        let out = Cmd::new("omb")
            .args(&["--bootstrap-server", "127.0.0.1:1"])
            .arg(&path)
            .run(LIMIT);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        for w in wanted {
            assert!(stderr.contains(w), "{name}: {w:?} not in {stderr}");
        }
        assert_eq!(stderr.lines().count(), 1, "{name}: one error: {stderr}");
    }
    let driver = dir.file("driver.yaml");
    std::fs::write(
        &driver,
        "name: Kafka\nreplicationFactor: 1\nproducerConfig: |\n  acks=2\n",
    )
    .unwrap();
    let out = Cmd::new("omb")
        .arg(omb_file("1-topic-4-partitions-100b.yaml"))
        .args(&["--driver", &driver, "--bootstrap-server", "127.0.0.1:1"])
        .run(LIMIT);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("driver.yaml") && stderr.contains("acks"),
        "{stderr}"
    );
    std::fs::write(&driver, "name: Kafka\nreplication: 1\n").unwrap();
    let out = Cmd::new("omb")
        .arg(omb_file("1-topic-4-partitions-100b.yaml"))
        .args(&["--driver", &driver, "--bootstrap-server", "127.0.0.1:1"])
        .run(LIMIT);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown field `replication`") && stderr.contains("line 2"),
        "{stderr}"
    );
}

/// OMB's backlog mode: consumers pause until ~10 MiB wait, then drain it while the producer goes
/// on; the run says when the backlog was built and drained, and every record is read in the end.
#[test]
fn a_backlog_is_built_then_drained() {
    let broker = TestBroker::start();
    let dir = TempDir::new("omb-backlog");
    let OmbRun { stderr, doc, .. } = run_omb(
        &broker,
        &omb_file("backlog-1kb.yaml"),
        &["--reporting-interval", "1s"],
        &dir,
    );
    assert!(
        stderr.contains("--- Completed backlog build in"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--- Completed backlog draining in"),
        "{stderr}"
    );
    let b = &doc["backlog"];
    assert_eq!(b["requested_bytes"], 10_737_418);
    // 10 MiB of 1 KiB records at 5000 records/s: about 2 s to build.
    let built = b["built_s"].as_f64().unwrap();
    assert!((1.5..30.0).contains(&built), "{b}");
    assert!(b["drained_s"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["drain_records"].as_u64().unwrap() >= 9_000, "{b}");
    assert_eq!(
        doc["consumed"]["records"],
        doc["consumed"]["expected_records"]
    );
    assert_eq!(doc["records_failed"], 0);
}

/// A driver file like the tests' own, with this `topicConfig` block.
fn driver_with_topic_config(dir: &TempDir, block: &str) -> String {
    let text = std::fs::read_to_string(omb_file("kafka-test-driver.yaml")).unwrap();
    let start = text.find("topicConfig: |\n").unwrap();
    let end = text.find("commonConfig:").unwrap();
    let indented: String = block.lines().map(|l| format!("  {l}\n")).collect();
    let path = dir.file("driver.yaml");
    std::fs::write(
        &path,
        format!(
            "{}topicConfig: |\n{indented}{}",
            &text[..start],
            &text[end..]
        ),
    )
    .unwrap();
    path
}

/// `topicConfig` is applied: the CreateTopics request of each of the workload's topics carries
/// every config, in order, as the broker reads it off the wire (a tap in front of the broker
/// decodes it with kafka-protocol); nothing is listed as not applied. (Tansu 0.6 answers
/// DescribeConfigs with no configs and librdkafka's mock cluster serves neither CreateTopics nor
/// DescribeConfigs, so the request is where the configs are seen.)
#[test]
fn topic_config_is_carried_by_create_topics() {
    let broker = TestBroker::start();
    let tap = crate::create_topics_tap::tap_create_topics(&broker.addr, None);
    let dir = TempDir::new("omb-topic-config");
    let driver = driver_with_topic_config(&dir, "min.insync.replicas=1\nretention.ms=600000");
    let (omb_path, json) = (dir.file("omb.json"), dir.file("kbench.json"));
    let out = Cmd::new("omb")
        .arg(omb_file("2-topics-keyed-2-subscriptions.yaml"))
        .args(&["--bootstrap-server", &tap.addr, "--driver", &driver])
        .args(&["--test-duration", "2s", "--warmup-duration", "0s"])
        .args(&["-o", &omb_path, "--json", &json])
        .run(LIMIT);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("topicConfig"), "{stderr}");
    let doc = result_json(std::path::Path::new(&json));
    let topics: Vec<&str> = doc["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(topics.len(), 2);
    let seen = tap.seen.lock().unwrap();
    for topic in topics {
        let request = seen
            .iter()
            .flat_map(|r| &r.topics)
            .find(|t| t.name.0.as_str() == topic)
            .unwrap_or_else(|| panic!("no CreateTopics for {topic}"));
        let configs: Vec<(String, Option<String>)> = request
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        assert_eq!(
            configs,
            [
                ("min.insync.replicas".to_string(), Some("1".to_string())),
                ("retention.ms".to_string(), Some("600000".to_string()))
            ],
            "{topic}"
        );
    }
}

/// A topic config the broker refuses (INVALID_CONFIG, answered by the tap as Kafka answers it)
/// is one error naming the topic, the configs, the broker's code and its message; nothing runs.
#[test]
fn a_refused_topic_config_is_one_error() {
    const MESSAGE: &str = "Invalid value abc for configuration min.insync.replicas";
    let broker = TestBroker::start();
    let tap = crate::create_topics_tap::tap_create_topics(&broker.addr, Some((40, MESSAGE)));
    let dir = TempDir::new("omb-topic-config-refused");
    let driver = driver_with_topic_config(&dir, "min.insync.replicas=abc");
    let out = Cmd::new("omb")
        .arg(omb_file("1-topic-4-partitions-100b.yaml"))
        .args(&["--bootstrap-server", &tap.addr, "--driver", &driver])
        .args(&["--test-duration", "2s", "--warmup-duration", "0s"])
        .args(&["-o", &dir.file("omb.json")])
        .run(LIMIT);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for says in [
        "CreateTopics",
        "kbench-omb-",
        "min.insync.replicas=abc",
        "code 40",
        MESSAGE,
    ] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
    assert!(!stderr.contains("Pub rate"), "{stderr}");
    assert_eq!(tap.seen.lock().unwrap().len(), 1);
}

/// OMB's messageSizeDistribution: the run's records (read back by librdkafka) are of the buckets'
/// top sizes in their weights' shares (within 4 binomial sigmas), each half random and half zeros
/// (randomBytesRatio 0.5, one payload per bucket); OMB's messageSize is the weighted mean; the
/// unused payloadFile is listed.
#[test]
fn a_message_size_distribution_workload_runs() {
    let broker = TestBroker::start();
    let dir = TempDir::new("omb-size-distribution");
    let OmbRun {
        stderr, omb, doc, ..
    } = run_omb(
        &broker,
        &omb_file("size-distribution.yaml"),
        &["--reporting-interval", "2s"],
        &dir,
    );
    assert!(
        stderr.contains("not applied: payloadFile payload-256b.data"),
        "{stderr}"
    );
    check_omb_fields(&omb);
    assert_eq!(omb["messageSize"], 531, "70 + 256 + 204.8");
    assert_eq!(
        doc["settings"]["workload"]["messageSizeDistribution"][2]["size"],
        4096
    );
    let acked =
        doc["records_acked"].as_u64().unwrap() + doc["warmup"]["records_acked"].as_u64().unwrap();
    assert!(acked >= 10_000, "{acked}");
    let topic = doc["topics"][0].as_str().unwrap();
    let read = librdkafka::read(
        &broker.addr,
        topic,
        2,
        acked as usize,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len() as u64, acked);
    let sizes: Vec<usize> = read
        .iter()
        .map(|r| {
            let v = r.value.as_ref().unwrap();
            assert!(
                v[v.len() / 2..].iter().all(|b| *b == 0),
                "randomBytesRatio 0.5"
            );
            v.len()
        })
        .collect();
    assert_sizes_follow(&sizes, &[(100, 0.7), (1024, 0.25), (4096, 0.05)]);
}
