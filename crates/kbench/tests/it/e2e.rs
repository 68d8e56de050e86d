//! `kbench e2e` against a real broker: producers and a consumer group, exact counts, whole trip.

use crate::common;
use crate::librdkafka;

use std::io::BufRead;
use std::time::{Duration, Instant};

use crate::common::{
    BROKERS, BrokerKind, Cmd, TempDir, TestBroker, kbench, result_json, run, runtime, text,
};

fn count(doc: &serde_json::Value, field: &str) -> u64 {
    doc[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing"))
}

/// On kbench's embedded broker and on the upstream Tansu binary (which, racing a Fetch against a
/// Produce, can return later records before earlier ones are readable: the consumer must not skip
/// them), nothing is lost, duplicated or foreign, and the broker holds exactly what was acknowledged.
#[test]
fn four_producers_for_five_seconds_lose_and_duplicate_nothing() {
    for kind in BROKERS {
        four_producers_lose_and_duplicate_nothing_on(kind);
    }
}

fn four_producers_lose_and_duplicate_nothing_on(kind: BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = TempDir::new("e2e");
    let json = dir.path().join("e2e.json");
    let out = Cmd::on("e2e", &broker)
        .args(&[
            "--partitions",
            "3",
            "--producers",
            "4",
            "--duration",
            "5s",
            "--batch-interval",
            "5..20ms",
            "--messages-per-batch",
            "1..5",
            "--payload-size",
            "100..2000",
            "--reporting-interval",
            "1s",
            "--seed",
            "42",
        ])
        .topic("e2e-four")
        .json(&json)
        .run(Duration::from_secs(90));
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{kind:?}: stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("records produced"), "{stdout}");
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "e2e");
    let produced = count(&doc, "records_produced");
    let acked = count(&doc, "records_acked");
    let failed = count(&doc, "records_failed");
    assert!(produced > 0);
    assert_eq!(produced, acked + failed);
    assert_eq!(failed, 0);
    assert_eq!(count(&doc, "records_consumed"), acked, "{kind:?}: {doc}");
    assert_eq!(count(&doc, "records_lost"), 0);
    assert_eq!(count(&doc, "records_late"), 0);
    assert_eq!(count(&doc, "records_duplicated"), 0);
    assert_eq!(count(&doc, "records_foreign"), 0);
    assert_eq!(doc["drained"], true);
    assert_eq!(doc["assigned_partitions"], serde_json::json!([0, 1, 2]));
    assert!(doc["member_id"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(count(&doc, "commits") > 0);
    assert!(count(&doc, "heartbeats") >= 1);
    // Every record has a whole-trip sample; every request a duration.
    let trip = &doc["whole_trip"];
    assert_eq!(trip["count"].as_u64(), Some(acked));
    assert_eq!(
        doc["producer_request_duration"]["count"].as_u64(),
        Some(count(&doc, "produce_requests"))
    );
    let ladder: Vec<u64> = [
        "min", "p50", "p80", "p90", "p95", "p98", "p99", "p99.9", "max",
    ]
    .iter()
    .map(|k| trip[*k].as_u64().unwrap())
    .collect();
    assert!(ladder.windows(2).all(|w| w[0] <= w[1]), "{ladder:?}");
    assert!(doc["clock"].as_str().unwrap().starts_with("monotonic"));
    for api in [
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "OffsetCommit",
        "LeaveGroup",
        "ListOffsets",
        "Fetch",
        "Produce",
    ] {
        assert!(
            doc["negotiated_versions"].get(api).is_some(),
            "{api} not in {}",
            doc["negotiated_versions"]
        );
    }
    // The broker holds exactly the acknowledged records.
    let rt = runtime();
    let held: usize = rt.block_on(async {
        let cluster = broker.connect_with(Default::default()).await.unwrap();
        let mut n = 0;
        for p in 0..3 {
            n += common::fetch_all(&cluster, "e2e-four", p).await.len();
        }
        n
    });
    assert_eq!(held as u64, acked);
}

/// Records not consumed by the end of the drain are read again by offset: found on the broker, they
/// are *late*, not lost; acknowledged = consumed + late, exactly.
#[test]
fn records_missing_after_the_drain_are_late_when_the_broker_has_them() {
    let broker = TestBroker::start();
    let dir = TempDir::new("e2e-late");
    let json = dir.path().join("e2e.json");
    // No drain, and long fetch waits (Tansu 0.6 holds every Fetch for its full wait): the records of
    // the last second are still unread when the consumer stops.
    let out = Cmd::on("e2e", &broker)
        .args(&[
            "--duration",
            "2s",
            "--batch-interval",
            "10ms",
            "--consume-wait",
            "1500ms",
            "--drain",
            "0s",
        ])
        .topic("e2e-late")
        .json(&json)
        .run(Duration::from_secs(90));
    let stdout = text(&out.stdout);
    let doc = result_json(&json);
    let acked = count(&doc, "records_acked");
    let late = count(&doc, "records_late");
    assert!(late > 0, "{doc}");
    assert_eq!(doc["drained"], false);
    assert_eq!(count(&doc, "records_lost"), 0, "{doc}");
    assert_eq!(
        count(&doc, "records_consumed") - count(&doc, "records_duplicated") + late,
        acked,
        "{doc}"
    );
    assert!(stdout.contains(&format!("{late} unread")), "{stdout}");
    // Late records are not in the whole-trip percentiles: they were not consumed in time.
    assert_eq!(
        doc["whole_trip"]["count"].as_u64(),
        Some(count(&doc, "records_consumed"))
    );
    // Late is not a clean run.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// Records librdkafka produces, compressed with every codec it has, are consumed by kbench's group
/// consumer (`e2e --mode consumer`) with exact counts, on both brokers.
#[test]
fn kbench_consumes_exactly_what_librdkafka_produced_in_every_codec() {
    for kind in BROKERS {
        kbench_consumes_what_librdkafka_produced_on(kind);
    }
}

fn kbench_consumes_what_librdkafka_produced_on(kind: BrokerKind) {
    const PER_CODEC: u64 = 2000;
    const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
    let broker = TestBroker::of(kind);
    let topic = "from-librdkafka";
    let rt = runtime();
    rt.block_on(async {
        let cluster = broker.connect_with(Default::default()).await.unwrap();
        cluster.ensure_topic(topic, 2, 1).await.unwrap();
    });
    let dir = TempDir::new("e2e-rdk");
    let json = dir.path().join("e2e.json");
    let mut child = kbench()
        .args([
            "e2e",
            "--bootstrap-server",
            &broker.addr,
            "--mode",
            "consumer",
            "--topic",
            topic,
            "--reporting-interval",
            "200ms",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // Consumed so far, from the next progress line ("… N consumed, …"); None when none came in time.
    let consumed_by = |deadline: Instant| -> Option<u64> {
        loop {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok()?;
            if let Some(n) = line
                .split(", ")
                .find_map(|f| f.strip_suffix(" consumed"))
                .and_then(|n| n.parse().ok())
            {
                return Some(n);
            }
        }
    };
    // The first progress line: the consumer has joined and taken its positions.
    assert!(
        consumed_by(Instant::now() + Duration::from_secs(60)).is_some(),
        "{kind:?}: kbench's consumer did not start"
    );
    for (producer, codec) in CODECS.iter().enumerate() {
        let records = (0..PER_CODEC).map(|seq| {
            let mut key = Vec::with_capacity(16);
            key.extend_from_slice(&0x6b62_6e63u32.to_be_bytes());
            key.extend_from_slice(&(producer as u32).to_be_bytes());
            key.extend_from_slice(&seq.to_be_bytes());
            (
                (seq % 2) as i32,
                key,
                format!("{codec}-{seq:06}").repeat(4).into_bytes(),
            )
        });
        let (delivered, failed) = librdkafka::produce(&broker.addr, topic, codec, records);
        assert_eq!((delivered, failed), (PER_CODEC, 0), "{kind:?} {codec}");
    }
    // Foreign records whose 16-byte keys parse as ids with huge sequence numbers (random UUIDs):
    // counted, and sized by nothing in the key (a bitmap by sequence number would ask for ~2^64
    // bits here and abort the process).
    const UUIDS: u64 = 500;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let uuid_records = (0..UUIDS).map(|i| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut key = x.to_be_bytes().to_vec();
        key.extend_from_slice(&(x.rotate_left(17) | 1 << 63).to_be_bytes());
        ((i % 2) as i32, key, b"uuid-keyed".to_vec())
    });
    assert_eq!(
        librdkafka::produce(&broker.addr, topic, "none", uuid_records),
        (UUIDS, 0),
        "{kind:?} uuid keys"
    );
    let total = PER_CODEC * CODECS.len() as u64 + UUIDS;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match consumed_by(deadline) {
            Some(n) if n >= total => break,
            Some(_) => {}
            None => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "{kind:?}: kbench did not consume {total} records within 60 s: {}",
                    text(&out.stderr)
                )
            }
        }
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{kind:?}: {}",
        text(&out.stderr)
    );
    let doc = result_json(&json);
    assert_eq!(count(&doc, "records_consumed"), total, "{kind:?}: {doc}");
    assert_eq!(count(&doc, "records_duplicated"), 0, "{kind:?}");
    assert_eq!(count(&doc, "records_foreign"), 0, "{kind:?}");
    assert_eq!(doc["whole_trip"]["count"].as_u64(), Some(total), "{kind:?}");
    let rss_kib = count(&doc, "peak_rss_kib");
    assert!(rss_kib < 512 * 1024, "{kind:?}: peak RSS {rss_kib} KiB");
    assert!(
        doc["errors"].as_object().unwrap().is_empty(),
        "{kind:?}: {doc}"
    );
}

#[test]
fn asynchronous_commits_against_the_embedded_broker() {
    let dir = TempDir::new("e2e-async");
    let json = dir.path().join("e2e.json");
    let out = Cmd::new("e2e")
        .args(&[
            "--producers",
            "2",
            "--duration",
            "3s",
            "--batch-interval",
            "10ms",
            "--commit",
            "500ms",
            "--group",
            "kbench-test-group",
        ])
        .json(&json)
        .run(Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["group_id"], "kbench-test-group");
    assert_eq!(doc["settings"]["commit"], "async every 500 ms");
    assert!(count(&doc, "commits") >= 2, "{}", doc["commits"]);
    assert_eq!(count(&doc, "commit_failures"), 0);
    assert_eq!(count(&doc, "records_lost"), 0);
    assert_eq!(doc["target"]["embedded_broker"], true);
}

#[test]
fn producers_only_mode_has_no_consumer_and_no_whole_trip() {
    let broker = TestBroker::start();
    let dir = TempDir::new("e2e-prod");
    let json = dir.path().join("e2e.json");
    let out = Cmd::on("e2e", &broker)
        .args(&[
            "--mode",
            "producers",
            "--duration",
            "1s",
            "--batch-interval",
            "10ms",
        ])
        .json(&json)
        .run(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert!(count(&doc, "records_acked") > 0);
    assert_eq!(count(&doc, "records_consumed"), 0);
    assert_eq!(count(&doc, "records_lost"), 0);
    assert_eq!(doc["whole_trip"]["count"], 0);
    assert!(doc["member_id"].is_null());
}

#[test]
fn bad_e2e_flags_name_the_flag() {
    for (args, flag) in [
        (vec!["--batch-interval", "200..100ms"], "--batch-interval"),
        (vec!["--payload-size", "0"], "--payload-size"),
        (vec!["--messages-per-batch", "x..3"], "--messages-per-batch"),
        (vec!["--commit", "often"], "--commit"),
        (vec!["--producers", "0"], "--producers"),
        (vec!["--bootstrap-server", "nohost"], "--bootstrap-server"),
        (vec!["--topic", "a b"], "--topic"),
        (vec!["--payload-size", "1..99999999999"], "--payload-size"),
        // Avro through a proxy needs a schema id: said before anything is contacted.
        (
            vec!["--via", "rest-proxy", "--rest-url", "http://127.0.0.1:1"],
            "--value-schema-id",
        ),
    ] {
        let mut all = vec!["e2e"];
        all.extend(args.iter());
        let out = run(&all, Duration::from_secs(30));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(flag), "{all:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn an_unreachable_broker_is_one_clear_error() {
    let out = Cmd::new("e2e")
        .args(&["--bootstrap-server", "127.0.0.1:1", "--duration", "1s"])
        .run(Duration::from_secs(60));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
