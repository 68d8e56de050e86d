//! `--verify`: every record stamped (producer id, sequence per partition, CRC-32C of the value, in
//! the `kbench-verify` header) and checked on the reading side — against both brokers, with
//! librdkafka reading the stamps kbench wrote and writing stamped records (some of them wrong on
//! purpose) that kbench reads.

use crate::common;
use crate::librdkafka;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{BROKERS, BrokerKind, Cmd, TempDir, TestBroker, n, result_json, text};

const LIMIT: Duration = Duration::from_secs(120);

/// The stamp as docs/results.md describes it, computed here independently of kbench.
fn stamp(producer: u64, seq: u64, value: &[u8]) -> Vec<u8> {
    let mut s = producer.to_be_bytes().to_vec();
    s.extend_from_slice(&seq.to_be_bytes());
    s.extend_from_slice(&crc32c::crc32c(value).to_be_bytes());
    s
}

#[test]
fn produce_verify_reads_back_every_acknowledged_record_on_both_brokers() {
    for kind in BROKERS {
        produce_verify_on(kind);
    }
}

fn produce_verify_on(kind: BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = TempDir::new("verify");
    let topic = "verified";
    // Unkeyed over three partitions (round-robin per batch), then keyed and compressed, into one
    // topic: two producers, each checked against its own acknowledgements.
    let first = dir.path().join("unkeyed.json");
    let out = Cmd::on("produce", &broker)
        .topic(topic)
        .args(&[
            "--partitions",
            "3",
            "--num-records",
            "30000",
            "--record-size",
            "64..512",
            "--throughput",
            "-1",
            "--verify",
        ])
        .json(&first)
        .ok(LIMIT);
    assert!(
        text(&out.stdout).contains("Verification OK: 30000 records read, 30000 verified, 0 lost"),
        "{kind:?}: {}",
        text(&out.stdout)
    );
    let second = dir.path().join("keyed.json");
    Cmd::on("produce", &broker)
        .topic(topic)
        .args(&[
            "--num-records",
            "20000",
            "--record-size",
            "100",
            "--keys",
            "random:50",
            "--throughput",
            "-1",
            "-X",
            "compression.type=zstd",
            "--verify",
        ])
        .json(&second)
        .ok(LIMIT);
    for (path, records) in [(&first, 30_000), (&second, 20_000)] {
        let doc = result_json(path);
        let v = &doc["verification"];
        assert_eq!(v["ok"], true, "{kind:?}: {v}");
        assert_eq!(n(v, "records_acked"), records, "{kind:?}: {v}");
        assert_eq!(n(v, "records_verified"), records, "{kind:?}: {v}");
        assert_eq!(n(&doc, "records_acked"), records, "{kind:?}");
        for f in [
            "lost",
            "duplicated",
            "reordered",
            "corrupted",
            "unexpected",
            "foreign",
        ] {
            assert_eq!(n(v, f), 0, "{kind:?} {f}: {v}");
        }
        assert_eq!(doc["settings"]["verify"], true);
    }
    // librdkafka reads the stamps back: every record carries one, its CRC matches the value, and
    // each producer's sequence runs 0, 1, 2, … in every partition.
    let read = librdkafka::read(
        &broker.addr,
        topic,
        3,
        50_000,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len(), 50_000, "{kind:?}");
    let mut next: BTreeMap<(u64, i32), u64> = BTreeMap::new();
    for r in &read {
        let (_, value) = r
            .headers
            .iter()
            .find(|(k, _)| k == "kbench-verify")
            .unwrap_or_else(|| panic!("{kind:?}: no stamp at {}-{}", r.partition, r.offset));
        let value = value.as_ref().expect("stamp value");
        assert_eq!(value.len(), 20);
        let producer = u64::from_be_bytes(value[0..8].try_into().unwrap());
        let seq = u64::from_be_bytes(value[8..16].try_into().unwrap());
        let crc = u32::from_be_bytes(value[16..20].try_into().unwrap());
        let payload = r.value.as_deref().unwrap_or(&[]);
        assert_eq!(crc, crc32c::crc32c(payload), "{kind:?}");
        let expected = next.entry((producer, r.partition)).or_default();
        assert_eq!(
            seq, *expected,
            "{kind:?}: producer {producer:x} in {}",
            r.partition
        );
        *expected += 1;
    }
    assert_eq!(
        next.keys()
            .map(|(p, _)| *p)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        2,
        "{kind:?}: two producers"
    );
    // kbench's consumer checks the same records: nothing missing, nothing wrong.
    let consumed = dir.path().join("consume.json");
    let out = Cmd::on("consume", &broker)
        .topic(topic)
        .args(&["--messages", "50000", "--verify", "--timeout", "20000"])
        .json(&consumed)
        .ok(LIMIT);
    assert!(
        text(&out.stdout).contains("Verification OK: 50000 records read, 50000 verified"),
        "{kind:?}: {}",
        text(&out.stdout)
    );
    let v = &result_json(&consumed)["verification"];
    assert_eq!((n(v, "lost"), n(v, "duplicated")), (0, 0), "{v}");
    assert_eq!(
        v["unexpected"],
        serde_json::Value::Null,
        "no writer to ask: {v}"
    );
}

/// Records librdkafka writes with stamps that are wrong on purpose: kbench's consumer counts each
/// kind of trouble exactly and exits 5.
#[test]
fn consume_verify_counts_what_is_wrong_in_records_librdkafka_wrote() {
    let broker = TestBroker::start();
    let topic = "tampered";
    common::runtime().block_on(async {
        let cluster = broker.connect_with(Default::default()).await.unwrap();
        cluster.ensure_topic(topic, 1, 1).await.unwrap();
    });
    const P: u64 = 0x00c0_ffee_0000_0042;
    let good = |seq: u64| {
        let value = format!("value-{seq}").into_bytes();
        let s = stamp(P, seq, &value);
        (0, value, vec![("kbench-verify".to_string(), s)])
    };
    let corrupted = {
        let (p, value, _) = good(5);
        let s = stamp(P, 5, &value);
        (
            p,
            b"value-5 changed".to_vec(),
            vec![("kbench-verify".to_string(), s)],
        )
    };
    let records = vec![
        good(0),
        good(1),
        good(2),
        good(4), // 3 is late …
        good(3), // … reordered
        good(4), // a duplicate
        corrupted,
        good(6),
        (0, b"no stamp".to_vec(), vec![]), // foreign
        good(8),                           // 7 never comes: a gap
    ];
    assert_eq!(
        librdkafka::produce_with_headers(&broker.addr, topic, records),
        (10, 0)
    );
    let dir = TempDir::new("tampered");
    let json = dir.path().join("c.json");
    let out = Cmd::on("consume", &broker)
        .topic(topic)
        .args(&["--messages", "10", "--verify", "--timeout", "20000"])
        .json(&json)
        .run(LIMIT);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Verification FAILED: 10 records read, 9 verified, 1 lost, 1 duplicated, 1 reordered, 1 corrupted, unknown unexpected, 1 foreign."),
        "{}",
        text(&out.stdout)
    );
    let v = &result_json(&json)["verification"];
    assert_eq!(v["ok"], false);
    assert_eq!(n(v, "sequence_gaps"), 1);
    assert_eq!(v["lost_from"], "gaps in each producer's sequence");
}

/// `consume --verify` as the README gives it (no broker: the fill stamps what it writes) verifies
/// every record; the same on a topic librdkafka filled without stamps verifies nothing, and says so
/// instead of "OK".
#[test]
fn consume_verify_of_nothing_is_never_ok() {
    let dir = TempDir::new("verify-fill");
    let json = dir.path().join("c.json");
    let out = Cmd::new("consume")
        .topic("orders")
        .args(&["--messages", "2000", "--verify"])
        .json(&json)
        .run(LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = &result_json(&json)["verification"];
    assert_eq!(
        (n(v, "records_verified"), v["ok"].clone()),
        (2000, true.into()),
        "{v}"
    );

    let broker = TestBroker::start();
    let headers: Vec<(String, Vec<u8>)> = Vec::new();
    let records = (0..20).map(move |i| (0, format!("plain-{i}").into_bytes(), headers.clone()));
    common::runtime().block_on(async {
        let cluster = broker.connect_with(Default::default()).await.unwrap();
        cluster.ensure_topic("unstamped", 1, 1).await.unwrap();
    });
    assert_eq!(
        librdkafka::produce_with_headers(&broker.addr, "unstamped", records),
        (20, 0)
    );
    let out = Cmd::on("consume", &broker)
        .topic("unstamped")
        .args(&["--messages", "20", "--verify", "--timeout", "20000"])
        .json(&json)
        .run(LIMIT);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Verification FAILED (nothing verified"),
        "{}",
        text(&out.stdout)
    );
}

/// `e2e --verify`: the consumer checks every record as it reads it, against what the producers'
/// requests had acknowledged — on both brokers; librdkafka then finds the same stamps in the topic.
#[test]
fn e2e_verify_checks_every_record_as_the_consumer_reads_it_on_both_brokers() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let dir = TempDir::new("e2e-verify");
        let json = dir.path().join("e2e.json");
        let topic = "e2e-verified";
        let out = Cmd::on("e2e", &broker)
            .topic(topic)
            .args(&[
                "--partitions",
                "3",
                "--producers",
                "3",
                "--batch-interval",
                "10",
                "--messages-per-batch",
                "1..8",
                "--duration",
                "3s",
                "--verify",
            ])
            .json(&json)
            .ok(LIMIT);
        let doc = result_json(&json);
        let v = &doc["verification"];
        assert_eq!(v["ok"], true, "{kind:?}: {v}\n{}", text(&out.stdout));
        let acked = n(&doc, "records_acked");
        assert!(acked > 0);
        assert_eq!(n(v, "records_acked"), acked, "{kind:?}: {v}");
        assert_eq!(n(v, "records_verified"), acked, "{kind:?}: {v}");
        assert_eq!(n(v, "producers"), 3, "{kind:?}: {v}");
        assert_eq!(doc["settings"]["verify"], true);
        let read = librdkafka::read(
            &broker.addr,
            topic,
            3,
            acked as usize,
            Duration::from_millis(500),
            LIMIT,
        );
        assert_eq!(read.len() as u64, acked, "{kind:?}");
        let mut next: BTreeMap<(u64, i32), u64> = BTreeMap::new();
        for r in &read {
            let value = r
                .headers
                .iter()
                .find(|(k, _)| k == "kbench-verify")
                .and_then(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{kind:?}: no stamp at {}-{}", r.partition, r.offset));
            let producer = u64::from_be_bytes(value[0..8].try_into().unwrap());
            let seq = u64::from_be_bytes(value[8..16].try_into().unwrap());
            let payload = r.value.as_deref().unwrap_or(&[]);
            assert_eq!(value, stamp(producer, seq, payload), "{kind:?}");
            let expected = next.entry((producer, r.partition)).or_default();
            assert_eq!(seq, *expected, "{kind:?}: producer {producer:x}");
            *expected += 1;
        }
    }
}

/// Under a restart of the in-memory broker, `e2e --verify` and e2e's own accounting agree on what
/// was lost, and the verifier sees the log go back.
#[test]
fn e2e_verify_agrees_with_the_run_on_what_a_restart_lost() {
    let dir = TempDir::new("e2e-verify-restart");
    let json = dir.path().join("e2e.json");
    let out = Cmd::new("e2e")
        .topic("e2e-verify-restart")
        .args(&[
            "--producers",
            "2",
            "--batch-interval",
            "20",
            "--duration",
            "4s",
            "--verify",
            "--fault",
            "at=1500ms restart-broker",
        ])
        .json(&json)
        .run(LIMIT);
    let doc = result_json(&json);
    let v = &doc["verification"];
    assert_eq!(n(v, "lost"), n(&doc, "records_lost"), "{v}");
    assert_eq!(n(v, "records_acked"), n(&doc, "records_acked"), "{v}");
    assert_eq!(n(v, "records_verified"), n(&doc, "records_consumed"), "{v}");
    assert!(n(v, "offset_regressions") >= 1, "{v}");
    let code = out.status.code();
    assert!(matches!(code, Some(0 | 1 | 5)), "{code:?}");
}

#[test]
fn e2e_verify_is_refused_where_nothing_can_check() {
    for (args, says) in [
        (
            vec!["--mode", "producers", "--verify"],
            "verify: nothing reads",
        ),
        (
            vec![
                "--via",
                "rest-proxy",
                "--rest-url",
                "http://127.0.0.1:1",
                "--value-schema-id",
                "1",
                "--verify",
            ],
            "verify: not through a REST Proxy",
        ),
    ] {
        Cmd::new("e2e").args(&args).refused(says);
    }
}
