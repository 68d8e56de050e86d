//! `kbench produce` against a real embedded broker: what is produced can be read back exactly, pins
//! hold or fail before any load, and the run's result document tells what happened.

use crate::librdkafka;

use std::collections::HashSet;
use std::time::Duration;

use crate::common::*;
use kbench_wire::Pins;

const LIMIT: Duration = Duration::from_secs(120);

/// What kbench wrote is what a reader finds: kafka-protocol's decoder (the oracle) and librdkafka (an
/// independent client) both read every record back, on kbench's embedded broker and on the upstream
/// Tansu binary.
#[test]
fn every_compression_round_trips_100k_records_byte_for_byte() {
    for kind in BROKERS {
        every_compression_round_trips_on(kind);
    }
}

fn every_compression_round_trips_on(kind: BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = tempdir();
    // Distinct payloads of varied length, so that a value read back can only match what was sent.
    let lines: Vec<String> = (0..5000)
        .map(|i| format!("payload-{i:05}-{}", "x".repeat(i % 150)))
        .collect();
    let payload_file = dir.join("payloads.txt");
    std::fs::write(&payload_file, lines.join("\n")).unwrap();
    let sent: HashSet<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("roundtrip-{codec}");
        let json = dir.join(format!("{codec}.json"));
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--num-records",
                "100000",
                "--payload-file",
                payload_file.to_str().unwrap(),
                "--compression",
                codec,
                "--acks",
                "1",
            ])
            .topic(&topic)
            .json(&json)
            .run(LIMIT);
        assert!(
            out.status.success(),
            "{kind:?} {codec}: {}",
            text(&out.stderr)
        );
        let doc = result_json(&json);
        assert_eq!(doc["records_acked"], 100_000, "{kind:?} {codec}");
        assert_eq!(doc["records_failed"], 0, "{kind:?} {codec}");
        let records = rt.block_on(fetch_all(&cluster, &topic, 0));
        assert_eq!(
            records.len(),
            100_000,
            "{kind:?} {codec}: records read back"
        );
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64, "{kind:?} {codec}: offsets are dense");
            let v = r.value.as_deref().expect("value");
            assert!(
                sent.contains(v),
                "{kind:?} {codec}: record {i} is not a payload that was sent"
            );
            let age_ms = kbench_wire::batch::now_ms() - r.timestamp;
            assert!(
                (0..600_000).contains(&age_ms),
                "{kind:?} {codec}: timestamp comes from the clock"
            );
        }
        // librdkafka reads the same records, in the same order, with the same values.
        let peer = librdkafka::read(
            &broker.addr,
            &topic,
            1,
            100_000,
            Duration::from_millis(500),
            LIMIT,
        );
        assert_eq!(
            peer.len(),
            100_000,
            "{kind:?} {codec}: librdkafka read back"
        );
        for (i, (p, r)) in peer.iter().zip(&records).enumerate() {
            assert_eq!(p.offset, r.offset, "{kind:?} {codec}: record {i}");
            assert_eq!(
                p.value.as_deref(),
                r.value.as_deref(),
                "{kind:?} {codec}: record {i}"
            );
        }
    }
}

/// Batches of many partitions share Produce requests (Java's drain per broker), several requests
/// share a socket write, and still every record is where a reader expects it: librdkafka (CRCs
/// checked) and kafka-protocol's decoder read each of 12 partitions back, offsets dense, values
/// only ever ones that were sent, on both brokers.
#[test]
fn many_partitions_share_requests_and_read_back_exactly() {
    for kind in BROKERS {
        many_partitions_share_requests_on(kind);
    }
}

fn many_partitions_share_requests_on(kind: BrokerKind) {
    const PARTITIONS: i32 = 12;
    const RECORDS: usize = 60_000;
    let broker = TestBroker::of(kind);
    let dir = tempdir();
    let lines: Vec<String> = (0..3000)
        .map(|i| format!("multi-{i:04}-{}", "y".repeat(i % 90)))
        .collect();
    let payload_file = dir.join("payloads.txt");
    std::fs::write(&payload_file, lines.join("\n")).unwrap();
    let sent: HashSet<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    for codec in ["none", "zstd"] {
        let topic = format!("multi-{codec}");
        let json = dir.join(format!("{codec}.json"));
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--num-records",
                &RECORDS.to_string(),
                "--payload-file",
                payload_file.to_str().unwrap(),
                "--partitions",
                &PARTITIONS.to_string(),
                "--compression",
                codec,
                "--acks",
                "1",
                "-X",
                "batch.size=4096",
            ])
            .topic(&topic)
            .json(&json)
            .run(LIMIT);
        assert!(
            out.status.success(),
            "{kind:?} {codec}: {}",
            text(&out.stderr)
        );
        let doc = result_json(&json);
        assert_eq!(doc["records_acked"], RECORDS, "{kind:?} {codec}");
        assert_eq!(doc["records_failed"], 0, "{kind:?} {codec}");
        let requests = doc["produce_requests"].as_u64().unwrap();
        let batches = doc["record_batches"].as_u64().unwrap();
        assert!(
            batches > requests,
            "{kind:?} {codec}: {batches} batches in {requests} requests: no request carried several partitions"
        );
        // Whether several requests share a socket write depends on how responses arrive (see
        // `queued_requests_share_one_socket_write` for the writer's gathering itself).
        let frames = doc["frames_written"].as_u64().unwrap();
        let writes = doc["socket_writes"].as_u64().unwrap();
        assert!(
            frames >= requests && (1..=frames).contains(&writes),
            "{kind:?} {codec}: {frames} frames in {writes} writes ({requests} requests)"
        );
        let peer = librdkafka::read_with(
            &[("check.crcs", "true")],
            &broker.addr,
            &topic,
            PARTITIONS,
            RECORDS,
            Duration::from_millis(500),
            LIMIT,
        );
        assert_eq!(
            peer.len(),
            RECORDS,
            "{kind:?} {codec}: librdkafka read back"
        );
        for partition in 0..PARTITIONS {
            let ours = rt.block_on(fetch_all(&cluster, &topic, partition));
            let theirs: Vec<_> = peer.iter().filter(|r| r.partition == partition).collect();
            assert!(
                !ours.is_empty(),
                "{kind:?} {codec}: partition {partition} got nothing"
            );
            assert_eq!(
                ours.len(),
                theirs.len(),
                "{kind:?} {codec}: partition {partition}, kbench's decoder and librdkafka"
            );
            for (i, (r, p)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(
                    r.offset, i as i64,
                    "{kind:?} {codec}: {partition} offsets are dense"
                );
                assert_eq!(p.offset, r.offset, "{kind:?} {codec}: {partition}/{i}");
                let v = r.value.as_deref().expect("value");
                assert!(
                    sent.contains(v),
                    "{kind:?} {codec}: {partition}/{i} was never sent"
                );
                assert_eq!(
                    p.value.as_deref(),
                    Some(v),
                    "{kind:?} {codec}: {partition}/{i}"
                );
            }
        }
    }
}

/// `buffer.memory` bounds the closed batches held queued or in flight: at 1 byte, one batch at a
/// time, so every Produce request carries exactly one batch (where the same run unbounded shares
/// requests between partitions, as the test above shows) and the run still ends with every record
/// acknowledged; 0 is refused naming the key. Counted, not timed.
#[test]
fn buffer_memory_bounds_the_batches_held_at_once() {
    let broker = TestBroker::start();
    let dir = TempDir::new("buffer-memory");
    let json = dir.path().join("bounded.json");
    Cmd::on("produce", &broker)
        .topic("buffer-memory")
        .args(&[
            "--num-records",
            "20000",
            "--partitions",
            "12",
            "--acks",
            "1",
        ])
        .args(&["-X", "batch.size=4096", "-X", "buffer.memory=1"])
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 20_000, "{doc}");
    assert_eq!(doc["records_failed"], 0, "{doc}");
    let (requests, batches) = (n(&doc, "produce_requests"), n(&doc, "record_batches"));
    assert_eq!(batches, requests, "one batch held at a time: {doc}");
    assert!(batches > 12, "{doc}");
    Cmd::on("produce", &broker)
        .topic("buffer-memory")
        .args(&["--num-records", "10", "-X", "buffer.memory=0"])
        .refused("buffer.memory");
}

/// Keyed records land where every other Kafka client puts them: kbench produces round-robin keys
/// with record sizes drawn from a range; librdkafka reads them back (every key in one partition,
/// each key exactly as often as round-robin says, sizes within the range), and librdkafka's own
/// murmur2 partitioner, given the same keys, picks the same partitions. On both brokers.
#[test]
fn keyed_records_go_where_librdkafkas_partitioner_puts_them() {
    for kind in BROKERS {
        keyed_records_on(kind);
    }
}

fn keyed_records_on(kind: BrokerKind) {
    const PARTITIONS: i32 = 7;
    const KEYS: usize = 200;
    const RECORDS: usize = 20_000;
    let broker = TestBroker::of(kind);
    let dir = tempdir();
    let json = dir.join("keyed.json");
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--num-records",
            &RECORDS.to_string(),
            "--record-size",
            "10..300",
            "--keys",
            &format!("round-robin:{KEYS}"),
            "--partitions",
            &PARTITIONS.to_string(),
            "--compression",
            "lz4",
            "-X",
            "batch.size=2048",
        ])
        .topic("keyed")
        .json(&json)
        .run(LIMIT);
    assert!(out.status.success(), "{kind:?}: {}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], RECORDS, "{kind:?}");
    assert_eq!(doc["settings"]["keys"], format!("round-robin:{KEYS}"));
    let read = librdkafka::read(
        &broker.addr,
        "keyed",
        PARTITIONS,
        RECORDS,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len(), RECORDS, "{kind:?}: librdkafka read back");
    let mut placed: std::collections::BTreeMap<Vec<u8>, (i32, usize)> = Default::default();
    let mut sizes = HashSet::new();
    for r in &read {
        let key = r.key.clone().expect("every record has a key");
        let entry = placed.entry(key.clone()).or_insert((r.partition, 0));
        assert_eq!(
            entry.0,
            r.partition,
            "{kind:?}: key {} in two partitions",
            text(&key)
        );
        entry.1 += 1;
        let len = r.value.as_ref().map_or(0, Vec::len);
        assert!((10..=300).contains(&len), "{kind:?}: value of {len} bytes");
        sizes.insert(len);
    }
    assert_eq!(placed.len(), KEYS, "{kind:?}: distinct keys");
    assert!(
        placed.values().all(|(_, n)| *n == RECORDS / KEYS),
        "{kind:?}: round-robin keys are equally frequent"
    );
    assert!(
        sizes.len() > 100,
        "{kind:?}: sizes vary ({} seen)",
        sizes.len()
    );
    let used: HashSet<i32> = placed.values().map(|(p, _)| *p).collect();
    assert_eq!(
        used.len(),
        PARTITIONS as usize,
        "{kind:?}: every partition used"
    );

    // The same keys through librdkafka's murmur2 partitioner.
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    rt.block_on(cluster.ensure_topic("keyed-peer", PARTITIONS, 1))
        .unwrap();
    let keys: Vec<Vec<u8>> = placed.keys().cloned().collect();
    assert_eq!(
        librdkafka::produce_keyed(&broker.addr, "keyed-peer", &keys),
        (KEYS as u64, 0)
    );
    let theirs = librdkafka::read(
        &broker.addr,
        "keyed-peer",
        PARTITIONS,
        KEYS,
        Duration::from_millis(300),
        LIMIT,
    );
    assert_eq!(theirs.len(), KEYS);
    for r in theirs {
        let key = r.key.unwrap();
        assert_eq!(
            placed[&key].0,
            r.partition,
            "{kind:?}: key {}: kbench and librdkafka disagree on its partition",
            text(&key)
        );
    }
}

/// Requests queued on a connection before its writer runs go out in one vectored write, and every
/// one of them is answered: five Metadata requests sent together on one thread.
#[test]
fn queued_requests_share_one_socket_write() {
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    use kbench_wire::ApiKey;
    let broker = TestBroker::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cluster = broker.connect_with(Pins::default()).await.unwrap();
        let conn = cluster.bootstrap_connection();
        let version = conn.version(ApiKey::Metadata, &Pins::default()).unwrap();
        let request = MetadataRequest::default().with_topics(Some(vec![]));
        let (frames, writes) = cluster.write_counts();
        let one = || conn.request_at::<_, MetadataResponse>(ApiKey::Metadata, version, &request);
        let answers = tokio::join!(one(), one(), one(), one(), one());
        for a in [answers.0, answers.1, answers.2, answers.3, answers.4] {
            a.expect("a Metadata answer");
        }
        let (frames_after, writes_after) = cluster.write_counts();
        assert_eq!(frames_after - frames, 5);
        assert!(
            writes_after - writes < 5,
            "5 frames in {} writes",
            writes_after - writes
        );
    });
}

#[test]
fn each_shared_produce_version_pinned_is_the_version_used() {
    let broker = TestBroker::start();
    let versions = broker.shared_versions(kbench_wire::ApiKey::Produce);
    let dir = tempdir();
    for v in versions.clone() {
        let json = dir.join(format!("v{v}.json"));
        let pin = format!("produce={v}");
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--num-records",
                "2000",
                "--record-size",
                "64",
                "--pin",
                &pin,
            ])
            .topic("pinned")
            .json(&json)
            .run(LIMIT);
        assert!(out.status.success(), "v{v}: {}", text(&out.stderr));
        let doc = result_json(&json);
        assert_eq!(doc["negotiated_versions"]["Produce"], v, "v{v}");
        assert_eq!(doc["pinned_versions"]["Produce"], v, "v{v}");
        assert_eq!(doc["records_acked"], 2000, "v{v}");
    }
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    assert_eq!(
        rt.block_on(fetch_all(&cluster, "pinned", 0)).len(),
        versions.len() * 2000
    );
}

#[test]
fn pin_outside_the_brokers_range_fails_before_any_load() {
    let broker = TestBroker::start();
    let api = kbench_wire::ApiKey::Produce;
    let beyond = broker.shared_versions(api).end() + 1;
    let (ours, theirs) = {
        let cluster = runtime()
            .block_on(broker.connect_with(Pins::default()))
            .unwrap();
        (
            kbench_wire::kbench_range(api),
            cluster.bootstrap_ranges().get(api).unwrap(),
        )
    };
    assert!(
        beyond <= ours.max,
        "kbench speaks a version the broker does not"
    );
    let pin = format!("produce={beyond}");
    let out = Cmd::on("produce", &broker)
        .args(&["--topic", "never", "--pin", &pin])
        .run(LIMIT);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("--pin {pin}")), "{err}");
    assert!(
        err.contains(&format!(
            "broker supports Produce v{}..{}",
            theirs.min, theirs.max
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "kbench supports Produce v{}..{}",
            ours.min, ours.max
        )),
        "{err}"
    );
    assert!(
        !text(&out.stdout).contains("records sent"),
        "no load was run"
    );
    // Not even the topic was created.
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    let (code, _) = rt.block_on(cluster.metadata("never")).unwrap();
    assert_eq!(
        code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION: the topic was never created"
    );
}

#[test]
fn result_document_carries_the_method() {
    let broker = TestBroker::start();
    let dir = tempdir();
    let json = dir.join("r.json");
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--num-records",
            "20000",
            "--throughput",
            "10000",
            "--reporting-interval",
            "500",
            "--seed",
            "42",
            "-X",
            "linger.ms=2",
            "--producer-props",
            "acks=1",
            "client.id=rt",
        ])
        .json(&json)
        .run(LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let progress = regex_like_progress(&stdout);
    assert!(progress >= 1, "progress lines every 500 ms:\n{stdout}");
    let last = stdout
        .lines()
        .rfind(|l| l.contains("99.9th"))
        .expect("final line");
    assert!(last.starts_with("20000 records sent, "), "{last}");
    assert!(last.ends_with(" ms 99.9th."), "{last}");
    let doc = result_json(&json);
    assert_eq!(doc["schema_version"], kbench_bench::SCHEMA_VERSION);
    assert_eq!(doc["seed"], 42);
    assert_eq!(doc["settings"]["linger_ms"], 2);
    assert_eq!(doc["settings"]["acks"], "1");
    assert_eq!(doc["settings"]["client_id"], "rt");
    assert_eq!(doc["records_sent"], 20000);
    let sent = doc["records_sent"].as_u64().unwrap();
    let acked = doc["records_acked"].as_u64().unwrap();
    let failed = doc["records_failed"].as_u64().unwrap();
    assert_eq!(sent, acked + failed);
    // Throttled at 10 000/s: 20 000 records take about two seconds, not less.
    assert!(
        doc["duration_s"].as_f64().unwrap() >= 1.9,
        "{}",
        doc["duration_s"]
    );
    for key in ["min", "max", "p50", "p95", "p99", "p99.9"] {
        assert!(doc["latency"][key].is_u64(), "latency.{key}");
        assert!(doc["service_time"][key].is_u64(), "service_time.{key}");
    }
    assert!(doc["latency"]["p50"].as_u64() <= doc["latency"]["p99"].as_u64());
    // Client CPU per record is the measured user + sys time over the records sent, not a constant.
    let cpu_s =
        doc["client_cpu_user_s"].as_f64().unwrap() + doc["client_cpu_sys_s"].as_f64().unwrap();
    let per_record = cpu_s * 1e6 / doc["records_sent"].as_f64().unwrap();
    let reported = doc["client_cpu_us_per_record"].as_f64().unwrap();
    assert!(
        (reported - per_record).abs() <= 1e-6 * per_record.max(1.0),
        "{reported} vs {per_record}"
    );
    assert!(doc["negotiated_versions"]["Produce"].as_i64().unwrap() >= 3);
    assert!(doc["negotiated_versions"]["ApiVersions"].is_i64());
    assert!(doc["environment"]["cores"].as_u64().unwrap() >= 1);
    let reps = doc["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 1);
    assert_eq!(reps[0]["records_acked"], doc["records_acked"]);
}

#[test]
fn batches_spread_round_robin_over_partitions_and_acks_0_and_all_work() {
    let broker = TestBroker::start();
    let rt = runtime();
    let cluster = rt.block_on(broker.connect_with(Pins::default())).unwrap();
    for acks in ["0", "1", "all"] {
        let topic = format!("spread-acks-{acks}");
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--partitions",
                "4",
                "--num-records",
                "40000",
                "--record-size",
                "200",
                "--batch-size",
                "4096",
                "--acks",
                acks,
            ])
            .topic(&topic)
            .run(LIMIT);
        assert!(out.status.success(), "acks={acks}: {}", text(&out.stderr));
        let per_partition: Vec<usize> = (0..4)
            .map(|p| rt.block_on(fetch_all(&cluster, &topic, p)).len())
            .collect();
        assert_eq!(
            per_partition.iter().sum::<usize>(),
            40_000,
            "acks={acks}: {per_partition:?}"
        );
        assert!(
            per_partition.iter().all(|n| *n > 5_000),
            "acks={acks}: {per_partition:?}"
        );
    }
    let before: Vec<usize> = (0..4)
        .map(|p| rt.block_on(fetch_all(&cluster, "spread-acks-1", p)).len())
        .collect();
    let out = Cmd::on("produce", &broker)
        .args(&["--num-records", "1000", "--partition", "2"])
        .topic("spread-acks-1")
        .run(LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after: Vec<usize> = (0..4)
        .map(|p| rt.block_on(fetch_all(&cluster, "spread-acks-1", p)).len())
        .collect();
    assert_eq!(after[2], before[2] + 1000, "--partition 2 gets them all");
    assert_eq!(
        (after[0], after[1], after[3]),
        (before[0], before[1], before[3])
    );
    let out = Cmd::on("produce", &broker)
        .args(&["--partition", "9"])
        .topic("spread-acks-1")
        .run(LIMIT);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--partition: 9 is not a partition of topic spread-acks-1"),
        "{stderr}"
    );
}

/// Count kafka-producer-perf-test progress lines: `N records sent, R records/sec (M MB/sec), A ms avg
/// latency, X ms max latency.`
fn regex_like_progress(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|l| {
            l.contains(" records sent, ")
                && l.contains(" records/sec (")
                && l.contains(" MB/sec), ")
                && l.ends_with(" ms max latency.")
        })
        .count()
}

pub fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kbench-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An existing topic keeps its partitions whatever `--partitions` says: the run warns, and the
/// result records the real count (so `compare` matches runs on what they ran against).
#[test]
fn an_existing_topics_partitions_are_the_ones_recorded() {
    let broker = TestBroker::start();
    let dir = TempDir::new("parts-recorded");
    let json = dir.path().join("p.json");
    let first = Cmd::on("produce", &broker)
        .topic("one-partition")
        .args(&["--num-records", "10"])
        .run(Duration::from_secs(60));
    assert!(first.status.success(), "{}", text(&first.stderr));
    let out = Cmd::on("produce", &broker)
        .topic("one-partition")
        .args(&["--num-records", "10", "--partitions", "12"])
        .json(&json)
        .run(Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "warning: topic one-partition has 1 partition; --partitions 12 applies only to a topic kbench creates"
        ),
        "{}",
        text(&out.stderr)
    );
    let doc = result_json(&json);
    assert_eq!(doc["settings"]["partitions"], 1, "{}", doc["settings"]);
    assert_eq!(doc["settings"]["partitions_requested"], 12);
}

/// `--payload-monotonic` (Kafka 4.x's kafka-producer-perf-test): record i's value is i in
/// decimal. librdkafka reads back exactly "0" … "N-1" over the topic's partitions, and the
/// result says which payload ran.
#[test]
fn payload_monotonic_values_are_the_record_indexes() {
    let broker = TestBroker::start();
    let dir = tempdir();
    let json = dir.join("monotonic.json");
    Cmd::on("produce", &broker)
        .topic("monotonic")
        .args(&[
            "--num-records",
            "2500",
            "--partitions",
            "2",
            "--payload-monotonic",
        ])
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(
        doc["settings"]["payload_monotonic"], true,
        "{}",
        doc["settings"]
    );
    assert_eq!(doc["records_acked"], 2500);
    let read = crate::librdkafka::read(
        &broker.addr,
        "monotonic",
        2,
        2500,
        Duration::from_millis(300),
        LIMIT,
    );
    let mut values: Vec<u64> = read
        .iter()
        .map(|r| {
            let v = r.value.as_deref().expect("a value");
            std::str::from_utf8(v).unwrap().parse().unwrap()
        })
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..2500).collect::<Vec<u64>>());
    Cmd::on("produce", &broker)
        .args(&[
            "--payload-monotonic",
            "--record-size",
            "10",
            "--num-records",
            "1",
        ])
        .refused("--payload-monotonic");
}

/// `--record-size 100:0.7,1000:0.25,10000:0.05`: 30 000 records read back by librdkafka are of
/// those sizes in those shares (each within 4 binomial sigmas), the same seed gives the same
/// sizes in the same order, and the result's settings state the distribution. Bad parts and
/// flags that make no sense with it are refused, naming them.
#[test]
fn record_sizes_follow_a_weighted_distribution() {
    const RECORDS: usize = 30_000;
    let broker = TestBroker::start();
    let dir = TempDir::new("produce-size-distribution");
    let weights = [(100, 0.7), (1000, 0.25), (10_000, 0.05)];
    let mut runs = Vec::new();
    for topic in ["sizes-a", "sizes-b"] {
        let json = dir.path().join(format!("{topic}.json"));
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--num-records",
                &RECORDS.to_string(),
                "--record-size",
                "100:0.7,1000:0.25,10000:0.05",
                "--seed",
                "7",
            ])
            .topic(topic)
            .json(&json)
            .run(LIMIT);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc = result_json(&json);
        assert_eq!(doc["records_acked"], RECORDS as u64);
        let stated = &doc["settings"]["record_size_distribution"];
        assert_eq!(stated[1]["size"], 1000, "{stated}");
        assert!((stated[1]["weight"].as_f64().unwrap() - 0.25).abs() < 1e-9);
        assert_eq!(doc["settings"]["record_size"], serde_json::Value::Null);
        let read = librdkafka::read(
            &broker.addr,
            topic,
            1,
            RECORDS,
            Duration::from_millis(300),
            LIMIT,
        );
        let sizes: Vec<usize> = read
            .iter()
            .map(|r| r.value.as_ref().unwrap().len())
            .collect();
        assert_eq!(sizes.len(), RECORDS);
        assert_sizes_follow(&sizes, &weights);
        runs.push(sizes);
    }
    assert_eq!(runs[0], runs[1], "the same seed draws the same sizes");
    for (bad, says) in [
        (
            "100:0.7,1000:0",
            "part 2 \"1000:0\": the weight must be a number above zero",
        ),
        (
            "100:0.7,0:0.3",
            "part 2 \"0:0.3\": a record size is at least 1 byte",
        ),
        ("100:0.7,1000", "part 2 \"1000\": expected SIZE:WEIGHT"),
    ] {
        Cmd::on("produce", &broker)
            .args(&["--record-size", bad, "--num-records", "1"])
            .refused(says);
        Cmd::on("produce", &broker)
            .args(&["--record-size", bad, "--num-records", "1"])
            .refused("--record-size");
    }
    let payloads = dir.file("payloads.txt");
    std::fs::write(&payloads, "a\nb\n").unwrap();
    let out = Cmd::on("produce", &broker)
        .args(&["--record-size", "100:1,200:1", "--payload-file", &payloads])
        .run(LIMIT);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--record-size") && err.contains("--payload-file"),
        "{err}"
    );
    Cmd::on("produce", &broker)
        .args(&["--record-size", "100:1,200:1", "--payload-monotonic"])
        .refused("--payload-monotonic");
}

/// Kafka 4.x's `--warmup-records N` (KIP-1052), as ProducerPerformance prints it: the warm-up
/// announced first, `In steady state.` before the first window after it, the whole run's final
/// line, then `… steady state records sent, …` over the records after the first N; the result
/// document carries the steady state too. N not below `--num-records` is refused, naming the flag;
/// a negative N is no warm-up.
#[test]
fn warmup_records_leave_the_steady_state_line_and_are_counted_in_the_run_s() {
    let broker = TestBroker::start();
    let dir = TempDir::new("warmup-records");
    let json = dir.path().join("w.json");
    let out = Cmd::on("produce", &broker)
        .topic("warmup")
        .args(&["--num-records", "6000", "--warmup-records", "2000"])
        .args(&["--throughput", "4000", "--reporting-interval", "200"])
        .json(&json)
        .ok(LIMIT);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |what: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .position(|l| what(l))
            .unwrap_or_else(|| panic!("no such line in:\n{stdout}"))
    };
    let announced = at(&|l| {
        l == "Warmup first 2000 records. Steady state results will print after the complete test summary."
    });
    let steady = at(&|l| l == "In steady state.");
    let total = at(&|l| l.starts_with("6000 records sent, "));
    let steady_total = at(&|l| l.starts_with("4000 steady state records sent, "));
    assert!(
        announced < steady && steady < total && total + 1 == steady_total,
        "{stdout}"
    );
    assert_eq!(
        regex_like_progress(lines[steady + 1]),
        1,
        "a window line follows:\n{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| **l == "In steady state.").count(),
        1
    );
    let rest = lines[steady_total]
        .strip_prefix("4000 steady state records sent, ")
        .unwrap();
    let shape = lines[total].strip_prefix("6000 records sent, ").unwrap();
    let words = |l: &str| -> Vec<String> {
        l.split(' ')
            .filter(|w| w.parse::<f64>().is_err() && !w.starts_with('('))
            .map(String::from)
            .collect()
    };
    assert_eq!(words(rest), words(shape), "the final line's format");
    let doc = result_json(&json);
    assert_eq!(n(&doc, "records_acked"), 6000);
    assert_eq!(n(&doc["steady_state"], "records"), 4000);
    assert_eq!(n(&doc["steady_state"], "warmup_records"), 2000);
    assert_eq!(n(&doc["steady_state"]["latency"], "count"), 4000);
    assert_eq!(n(&doc["settings"], "warmup_records"), 2000);

    Cmd::on("produce", &broker)
        .topic("warmup")
        .args(&["--num-records", "6000", "--warmup-records", "6000"])
        .refused("--warmup-records: The value for --warmup-records must be strictly fewer than the number of records in the test, --num-records.");
    let out = Cmd::on("produce", &broker)
        .topic("warmup")
        .args(&["--num-records", "100", "--warmup-records", "-3"])
        .json(&json)
        .ok(LIMIT);
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains("Warmup") && !stdout.contains("steady state"),
        "{stdout}"
    );
    assert!(result_json(&json).get("steady_state").is_none());
}
