//! Idempotent and transactional produce (`enable.idempotence=true`, `--transactional-id`): against
//! both Tansu brokers (which validate sequence numbers; the embedded one, the `tansu-broker` 0.6
//! crate, answers InitProducerId and AddPartitionsToTxn but not EndTxn, the upstream binary the
//! whole transactional conversation), and against librdkafka's mock cluster (an independent broker
//! implementation that answers the whole transactional conversation).

use crate::common;
use crate::librdkafka;

use std::time::Duration;

use crate::common::{BROKERS, BrokerKind, Cmd, TempDir, TestBroker, n, result_json, text};

const LIMIT: Duration = Duration::from_secs(120);

/// Idempotent runs on both brokers: every batch carries the producer id InitProducerId gave and
/// per-partition sequence numbers the broker checks (a wrong one is OUT_OF_ORDER_SEQUENCE_NUMBER,
/// and the run would fail); read back, every record is there once.
#[test]
fn idempotent_produce_is_accepted_and_read_back_once_on_both_brokers() {
    for kind in BROKERS {
        idempotent_on(kind);
    }
}

fn idempotent_on(kind: BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = TempDir::new("idempotent");
    let topic = "idempotent";
    let mut ids = Vec::new();
    for (name, extra) in [
        ("unkeyed", &["--record-size", "64..512"][..]),
        (
            "keyed",
            &["--keys", "random:40", "-X", "compression.type=lz4"][..],
        ),
    ] {
        let json = dir.path().join(format!("{name}.json"));
        Cmd::on("produce", &broker)
            .topic(topic)
            .args(&[
                "--partitions",
                "3",
                "--num-records",
                "20000",
                "--throughput",
                "-1",
                "-X",
                "enable.idempotence=true",
                "-X",
                "linger.ms=1",
                "--verify",
            ])
            .args(extra)
            .json(&json)
            .ok(LIMIT);
        let doc = result_json(&json);
        assert_eq!(n(&doc, "records_acked"), 20_000, "{kind:?} {name}: {doc}");
        assert_eq!(n(&doc, "records_failed"), 0, "{kind:?} {name}");
        assert_eq!(doc["settings"]["enable_idempotence"], true);
        let v = &doc["verification"];
        assert_eq!(v["ok"], true, "{kind:?} {name}: {v}");
        assert_eq!(n(v, "duplicated"), 0, "{kind:?} {name}: {v}");
        let producer = &doc["producer"];
        let id = producer["identities"][0]["producer_id"]
            .as_i64()
            .unwrap_or_else(|| panic!("{kind:?} {name}: {producer}"));
        assert!(id >= 0, "{kind:?}: {producer}");
        assert_eq!(n(producer, "duplicate_batches"), 0, "{kind:?}: {producer}");
        // No batch was sent twice: every request went out in the order its sequence numbers
        // were given (two requests racing to open the broker's connection once overtook each
        // other, and the broker answered OUT_OF_ORDER_SEQUENCE_NUMBER until the retries lined
        // up). The frames beyond the Produce requests are the few metadata and setup requests.
        let extra = n(&doc, "frames_written") - n(&doc, "produce_requests");
        assert!(
            extra < 10,
            "{kind:?} {name}: {extra} frames besides the Produce requests: {doc}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "{kind:?}: each run is a new producer");
    // librdkafka reads the idempotent batches: all 40 000 records, once each.
    let read = librdkafka::read(
        &broker.addr,
        topic,
        3,
        40_000,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len(), 40_000, "{kind:?}");
    // kbench's consumer, read committed (Fetch isolation level 1): every record, each verified.
    let consumed = dir.path().join("consume.json");
    let out = Cmd::on("consume", &broker)
        .topic(topic)
        .args(&[
            "--messages",
            "40000",
            "--verify",
            "--timeout",
            "20000",
            "-X",
            "isolation.level=read_committed",
        ])
        .json(&consumed)
        .ok(LIMIT);
    assert!(
        text(&out.stdout).contains("Verification OK: 40000 records read, 40000 verified"),
        "{kind:?}: {}",
        text(&out.stdout)
    );
    let doc = result_json(&consumed);
    assert_eq!(doc["settings"]["isolation_level"], "read_committed");
    assert_eq!(n(&doc["verification"], "duplicated"), 0);
}

/// The first requests of a run, all asking for the broker's connection before it is open, are
/// written in the order they asked: an idempotent producer's batches reach the broker in sequence,
/// and none is sent twice. (Racing connects once let a later request overtake an earlier one, about
/// one run in four at this size: the broker answered OUT_OF_ORDER_SEQUENCE_NUMBER and the batches
/// were retried. Eight runs miss that bug with a chance of about 0.1, so the name says what is checked:
/// eight runs, each with no request sent twice.)
#[test]
fn the_first_requests_on_a_new_connection_are_never_retried_in_eight_runs() {
    let dir = TempDir::new("in-order");
    for run in 0..8 {
        let json = dir.path().join(format!("run-{run}.json"));
        Cmd::new("produce")
            .topic("in-order")
            .args(&[
                "--partitions",
                "3",
                "--num-records",
                "100000",
                "--throughput",
                "-1",
                "-X",
                "enable.idempotence=true",
            ])
            .json(&json)
            .ok(LIMIT);
        let doc = result_json(&json);
        let extra = n(&doc, "frames_written") - n(&doc, "produce_requests");
        assert!(
            extra < 10,
            "run {run}: {extra} frames besides the Produce requests: {doc}"
        );
        assert_eq!(n(&doc, "records_acked"), 100_000);
    }
}

/// A request answered too late: the client gives up on it and sends the batch again, while the
/// broker has written the first copy. Without idempotence the record is there twice (--verify
/// says so); with it, the broker answers DUPLICATE_SEQUENCE_NUMBER, the batch counts as
/// acknowledged once, and nothing is duplicated.
#[test]
fn a_batch_sent_again_after_a_timeout_is_written_once_only_with_idempotence() {
    let dir = TempDir::new("idempotent-retry");
    let run = |idempotent: bool| {
        let json = dir.path().join(format!("run-{idempotent}.json"));
        let out = Cmd::new("produce")
            .topic("retried")
            .args(&[
                "--duration",
                "5s",
                "--throughput",
                "2000",
                "--record-size",
                "100",
                "--fault",
                "at=1s delay=700ms for=2s",
                "-X",
                "request.timeout.ms=300",
                "-X",
                "retry.backoff.ms=50",
                "-X",
                &format!("enable.idempotence={idempotent}"),
                "--verify",
            ])
            .json(&json)
            .run(LIMIT);
        let doc = result_json(&json);
        (out, doc)
    };
    let (plain, plain_doc) = run(false);
    let v = &plain_doc["verification"];
    assert!(
        n(v, "duplicated") > 0,
        "the delay must make retries write records twice without idempotence, or this test \
         proves nothing: {v}\n{}",
        text(&plain.stderr)
    );
    let (idem, doc) = run(true);
    assert!(
        idem.status.success(),
        "{}\n{}",
        text(&idem.stdout),
        text(&idem.stderr)
    );
    let v = &doc["verification"];
    assert_eq!(n(v, "duplicated"), 0, "{v}");
    assert_eq!(n(v, "lost"), 0, "{v}");
    assert_eq!(
        n(&doc, "records_sent"),
        n(&doc, "records_acked") + n(&doc, "records_failed")
    );
    assert!(
        n(&doc["producer"], "duplicate_batches") > 0,
        "the broker must have answered DUPLICATE_SEQUENCE_NUMBER: {}",
        doc["producer"]
    );
}

/// Transactions against librdkafka's mock cluster, a broker implementation that is not Tansu and
/// answers FindCoordinator, InitProducerId, AddPartitionsToTxn and EndTxn: transactions are
/// committed as each one's duration ends, every record is acknowledged, and librdkafka reading
/// `read_committed` finds them all.
#[test]
fn transactions_commit_against_librdkafka_mock_cluster() {
    let mock = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    mock.create_topic("txn", 3, 1).expect("mock topic");
    let bootstrap = mock.bootstrap_servers();
    let dir = TempDir::new("txn");
    let json = dir.path().join("txn.json");
    let out = transactional(&bootstrap, &json, &[]).ok(LIMIT);
    let doc = result_json(&json);
    let producer = &doc["producer"];
    assert_eq!(producer["transactional_id"], "kbench-txn-test");
    assert!(
        n(producer, "transactions_committed") >= 4,
        "2 s of 300 ms transactions: {producer}\n{}",
        text(&out.stderr)
    );
    assert_eq!(n(producer, "transactions_aborted"), 0, "{producer}");
    assert_eq!(doc["settings"]["transaction_duration_ms"], 300);
    let acked = n(&doc, "records_acked");
    assert_eq!(n(&doc, "records_sent"), acked);
    assert!(acked >= 5_000, "{doc}");
    let read = librdkafka::read_with(
        &[("isolation.level", "read_committed")],
        &bootstrap,
        "txn",
        3,
        acked as usize,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len() as u64, acked);
    // And kbench's own consumer, read committed, from the same independent broker: each partition
    // assigned (the mock cluster's group coordinator is not what is under test), until the
    // records stop coming.
    let mut consumed_total = 0;
    for partition in 0..3 {
        let consumed = dir.path().join(format!("consume-{partition}.json"));
        let out = Cmd::new("consume")
            .args(&["--bootstrap-server", &bootstrap])
            .topic("txn")
            .args(&[
                "--pin",
                "metadata=8,fetch=12",
                "--partition",
                &partition.to_string(),
                "--offset",
                "0",
                "--messages",
                &acked.to_string(),
                "--timeout",
                "3000",
                "-X",
                "isolation.level=read_committed",
            ])
            .json(&consumed)
            .ok(LIMIT);
        let doc = result_json(&consumed);
        assert_eq!(doc["settings"]["isolation_level"], "read_committed");
        assert!(
            doc["errors"].as_object().is_none_or(|e| e.is_empty()),
            "{doc}\n{}",
            text(&out.stderr)
        );
        consumed_total += n(&doc, "records_consumed");
    }
    assert_eq!(consumed_total, acked);
}

/// A batch the broker refuses (the mock answers the first Produce with INVALID_RECORD): its records
/// count as failed, its transaction is aborted rather than committed (with its acknowledged records
/// counted), and the producer starts again under InitProducerId, its later transactions committed.
#[test]
fn a_failed_batch_aborts_its_transaction_and_the_run_goes_on() {
    let mock = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    mock.create_topic("txn", 3, 1).expect("mock topic");
    mock.request_errors(
        rdkafka::types::RDKafkaApiKey::Produce,
        &[rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD],
    );
    let dir = TempDir::new("txn-abort");
    let json = dir.path().join("txn.json");
    let out = transactional(
        &mock.bootstrap_servers(),
        &json,
        &["-X", "delivery.timeout.ms=3000"],
    )
    .run(LIMIT);
    let doc = result_json(&json);
    let producer = &doc["producer"];
    let (sent, acked, failed) = (
        n(&doc, "records_sent"),
        n(&doc, "records_acked"),
        n(&doc, "records_failed"),
    );
    assert!(failed > 0, "{doc}\n{}", text(&out.stderr));
    assert_eq!(sent, acked + failed, "{doc}");
    assert_eq!(n(producer, "transactions_aborted"), 1, "{producer}");
    assert!(
        n(producer, "transactions_committed") >= 2,
        "{producer}\n{}\n{}",
        doc["errors"],
        text(&out.stderr)
    );
    assert_eq!(
        producer["identities"].as_array().map(Vec::len),
        Some(2),
        "a new producer epoch after the abort: {producer}"
    );
    assert!(doc["errors"].to_string().contains("InvalidRecord"), "{doc}");
}

/// `kbench produce` in 300 ms transactions for 2 s against `bootstrap`. The mock cluster's
/// flexible Metadata answers (v9 and later) carry one byte more than their fields, which kbench's
/// strict decoder refuses: Metadata is pinned to v8 (v10's topic ids are not needed here).
fn transactional(bootstrap: &str, json: &std::path::Path, extra: &[&str]) -> Cmd {
    Cmd::new("produce")
        .args(&["--bootstrap-server", bootstrap])
        .topic("txn")
        .args(&[
            "--pin",
            "metadata=8",
            "--partitions",
            "3",
            "--duration",
            "2s",
            "--throughput",
            "5000",
            "--record-size",
            "100",
            "--transactional-id",
            "kbench-txn-test",
            "--transaction-duration-ms",
            "300",
        ])
        .args(extra)
        .json(json)
}

/// The upstream Tansu binary (0.6.0, commit 510f3e2) serves EndTxn, unlike the `tansu-broker` crate
/// kbench embeds: transactions commit as each one's duration ends, and librdkafka reading
/// `read_committed` finds every acknowledged record.
#[test]
fn transactions_commit_against_the_upstream_tansu_binary() {
    let broker = TestBroker::standalone();
    let dir = TempDir::new("txn-upstream");
    let json = dir.path().join("txn.json");
    let out = transactional(&broker.addr, &json, &[]).ok(LIMIT);
    let doc = result_json(&json);
    let producer = &doc["producer"];
    assert!(
        n(producer, "transactions_committed") >= 4,
        "2 s of 300 ms transactions: {producer}\n{}",
        text(&out.stderr)
    );
    assert_eq!(n(producer, "transactions_aborted"), 0, "{producer}");
    let acked = n(&doc, "records_acked");
    assert_eq!(n(&doc, "records_sent"), acked);
    assert!(acked > 0, "{doc}");
    let read = librdkafka::read_with(
        &[("isolation.level", "read_committed")],
        &broker.addr,
        "txn",
        3,
        acked as usize,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len() as u64, acked);
}

/// Transactions aborted on purpose (`--transaction-abort-rate 0.3`, 3 s of 200 ms transactions)
/// on the upstream Tansu binary, which serves EndTxn. What a `read_committed` reader must see is
/// the broker's to serve (the aborted transactions it lists in each Fetch answer): kbench's
/// read-back (`--verify`), kbench's consumer and librdkafka's, all read committed, must agree
/// about it — and Tansu 0.6 lists none, so all three see the aborted records, and kbench's
/// verification fails naming them.
#[test]
fn aborted_transactions_read_committed_kbench_and_librdkafka_agree_on_the_upstream_tansu_binary() {
    let broker = TestBroker::standalone();
    aborts_on(&broker.addr, "", |topic| {
        Cmd::new("produce")
            .args(&["--bootstrap-server", &broker.addr])
            .topic(topic)
            .args(&["--num-records", "1"])
            .ok(LIMIT);
    });
}

/// The same on librdkafka's mock cluster, three brokers: a second implementation, which does not
/// list aborted transactions either.
#[test]
fn aborted_transactions_read_committed_kbench_and_librdkafka_agree_on_librdkafka_mock_cluster() {
    let mock = rdkafka::mocking::MockCluster::new(3).expect("mock cluster");
    mock.create_topic("txn-abort", 3, 1).expect("mock topic");
    aborts_on(&mock.bootstrap_servers(), ",fetch=12", |topic| {
        mock.create_topic(topic, 1, 1).expect("mock topic");
    });
}

/// `kbench produce --transaction-abort-rate 0.3 --verify` into `txn-abort` (3 partitions) at
/// `bootstrap`, then the records read back by librdkafka and by `kbench consume`, read committed
/// and not. Whether the broker hides aborted transactions is learnt from librdkafka's own: three
/// transactions of 10 records (committed, aborted, committed) into a topic `create` makes.
/// `fetch_pin` is added to the consumer's `--pin metadata=8`.
fn aborts_on(bootstrap: &str, fetch_pin: &str, create: impl FnOnce(&str)) {
    let peer_topic = "txn-abort-librdkafka";
    create(peer_topic);
    librdkafka::produce_transactions(bootstrap, peer_topic, 10, &[true, false, true]);
    let peer_read = librdkafka::read_with(
        &[("isolation.level", "read_committed")],
        bootstrap,
        peer_topic,
        1,
        20,
        Duration::from_secs(1),
        LIMIT,
    );
    let peer_values = peer_read.iter().filter(|r| {
        r.value
            .as_ref()
            .is_some_and(|v| v.starts_with(b"librdkafka-txn"))
    });
    let isolates = match peer_values.count() {
        20 => true,
        30 => false,
        n => panic!("librdkafka read {n} of its 30 transactional records (20 committed)"),
    };

    let topic = "txn-abort";
    let dir = TempDir::new("txn-abort-rate");
    let json = dir.path().join("produce.json");
    let out = Cmd::new("produce")
        .args(&["--bootstrap-server", bootstrap])
        .topic(topic)
        .args(&[
            "--pin",
            "metadata=8",
            "--partitions",
            "3",
            "--duration",
            "3s",
            "--throughput",
            "3000",
            "--record-size",
            "100",
            "--transactional-id",
            "kbench-abort-test",
            "--transaction-duration-ms",
            "200",
            "--transaction-abort-rate",
            "0.3",
            "--seed",
            "7",
            "--verify",
        ])
        .json(&json)
        .run(LIMIT);
    let doc = result_json(&json);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    let producer = &doc["producer"];
    let (committed, aborted) = (
        n(producer, "transactions_committed"),
        n(producer, "transactions_aborted"),
    );
    assert!(committed >= 3 && aborted >= 1, "{producer}\n{err}");
    assert_eq!(
        n(producer, "transactions_aborted_on_purpose"),
        aborted,
        "no record failed, so every abort was on purpose: {producer}"
    );
    assert_eq!(doc["settings"]["transaction_abort_rate"], 0.3);
    let acked = n(&doc, "records_acked");
    let in_aborted = n(producer, "records_in_aborted_transactions");
    assert_eq!(n(&doc, "records_sent"), acked);
    assert!(in_aborted > 0 && in_aborted < acked, "{producer}");
    let v = &doc["verification"];
    assert_eq!(n(v, "records_aborted"), in_aborted, "{v}");
    assert_eq!((n(v, "lost"), n(v, "unexpected")), (0, 0), "{v}");
    assert!(stdout.contains("aborted records read"), "{stdout}");
    // What kbench's read-back saw of the aborted transactions is what librdkafka saw of its own.
    let visible = if isolates {
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(
            (n(v, "aborted_read"), n(v, "aborted_skipped")),
            (0, in_aborted)
        );
        acked - in_aborted
    } else {
        assert_eq!(
            out.status.code(),
            Some(5),
            "a failed verification: {stdout}\n{err}"
        );
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(
            (n(v, "aborted_read"), n(v, "aborted_skipped")),
            (in_aborted, 0)
        );
        assert!(stdout.contains("lists no aborted transaction"), "{stdout}");
        acked
    };

    // librdkafka, read committed: the records kbench's read-back saw, each once.
    let read = librdkafka::read_with(
        &[("isolation.level", "read_committed")],
        bootstrap,
        topic,
        3,
        visible as usize,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(read.len() as u64, visible);
    // A stamp's sequence is its partition's.
    let stamps: std::collections::HashSet<(i32, Vec<u8>)> = read
        .iter()
        .filter_map(|r| {
            r.headers
                .iter()
                .find(|(k, _)| k == "kbench-verify")
                .and_then(|(_, v)| v.clone())
                .map(|v| (r.partition, v))
        })
        .collect();
    assert_eq!(stamps.len() as u64, visible, "one stamp per record");

    // kbench's own consumer, read committed and verifying, partition by partition.
    let (mut consumed, mut passed) = (0, 0);
    for partition in 0..3 {
        let json = dir.path().join(format!("consume-{partition}.json"));
        let out = Cmd::new("consume")
            .args(&["--bootstrap-server", bootstrap])
            .topic(topic)
            .args(&[
                "--pin",
                &format!("metadata=8{fetch_pin}"),
                "--partition",
                &partition.to_string(),
                "--offset",
                "0",
                "--messages",
                &acked.to_string(),
                "--timeout",
                "3000",
                "--verify",
                "-X",
                "isolation.level=read_committed",
            ])
            .json(&json)
            .ok(LIMIT);
        let doc = result_json(&json);
        let v = &doc["verification"];
        assert_eq!(v["ok"], true, "{v}\n{}", text(&out.stderr));
        assert_eq!((n(v, "lost"), n(v, "sequence_gaps")), (0, 0), "{v}");
        consumed += n(&doc, "records_consumed");
        passed += n(v, "aborted_skipped");
    }
    assert_eq!(consumed, visible);
    assert_eq!(passed, acked - visible);
}

/// The embedded Tansu answers InitProducerId for a transactional id, FindCoordinator for its coordinator and
/// AddPartitionsToTxn, but not EndTxn: a transactional run is refused before any load, naming the
/// missing API; the conversation Tansu does answer works from kbench's client.
#[test]
fn tansu_answers_the_transaction_apis_it_has_and_the_missing_one_is_named() {
    let broker = TestBroker::start();
    let out = Cmd::on("produce", &broker)
        .topic("txn-tansu")
        .args(&["--num-records", "10", "--transactional-id", "t1"])
        .run(LIMIT);
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("EndTxn"), "{err}");
    assert!(err.contains("--transactional-id"), "{err}");
    common::runtime().block_on(async {
        let cluster = broker.connect_with(Default::default()).await.unwrap();
        let layout = cluster.ensure_topic("txn-tansu", 2, 1).await.unwrap();
        let txns = cluster
            .init_transactions("t1", Duration::from_secs(60))
            .await
            .expect("InitProducerId with a transactional id");
        assert!(txns.identity().producer_id >= 0);
        txns.add_partitions(&cluster, &layout.name, &[0, 1])
            .await
            .expect("AddPartitionsToTxn");
        // And an idempotent producer's id is another one.
        let plain = cluster.init_producer_id().await.expect("InitProducerId");
        assert_ne!(plain.producer_id, txns.identity().producer_id);
    });
}

#[test]
fn idempotence_settings_that_cannot_work_are_refused() {
    Cmd::new("produce")
        .args(&["-X", "enable.idempotence=true", "--acks", "1"])
        .refused("acks");
    Cmd::new("produce")
        .args(&[
            "-X",
            "enable.idempotence=true",
            "-X",
            "max.in.flight.requests.per.connection=6",
        ])
        .refused("max.in.flight.requests.per.connection");
    Cmd::new("produce")
        .args(&["--transactional-id", "t", "-X", "retries=0"])
        .refused("transactional.id");
    Cmd::new("produce")
        .args(&["--transaction-duration-ms", "100"])
        .refused("--transactional-id");
    Cmd::new("produce")
        .args(&["--transaction-abort-rate", "0.2"])
        .refused("--transactional-id");
    for bad in ["1.5", "-0.1", "NaN", "often"] {
        Cmd::new("produce")
            .args(&["--transactional-id", "t", "--transaction-abort-rate", bad])
            .refused("--transaction-abort-rate");
    }
    Cmd::new("produce")
        .args(&["-X", "enable.idempotence=maybe"])
        .refused("enable.idempotence");
    // Every agent would take the same transactional.id and fence the others.
    Cmd::new("produce")
        .args(&["--agents", "http://127.0.0.1:1", "--transactional-id", "t"])
        .refused("--transactional-id");
}
