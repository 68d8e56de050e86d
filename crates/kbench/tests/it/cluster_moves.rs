//! A cluster that changes under load — the normal case: on librdkafka's mock cluster (three
//! brokers, a Kafka implementation that is not Tansu's, at its default versions, nothing pinned),
//! every partition's leader moves mid-run, a broker goes down and comes back, one broker answers
//! slowly, and an error is injected. kbench must follow: every record accounted for, nothing lost
//! or reordered, librdkafka reading back exactly what was acknowledged, and — counted, not timed —
//! at most one retry per batch per leader change, the batches after the refresh going straight to
//! the new leader.

use crate::common;
use crate::librdkafka;

use std::time::Duration;

use crate::common::{Cmd, TempDir, n, result_json, text};
use crate::mock::Mock;

const LIMIT: Duration = Duration::from_secs(120);
const PARTITIONS: i32 = 6;

/// A produce run of 6 s at 20 000 records/s over six partitions, progress every 500 ms.
fn produce(mock: &Mock, topic: &str, json: &std::path::Path, extra: &[&str]) -> Cmd {
    Cmd::new("produce")
        .args(&["--bootstrap-server", &mock.bootstrap])
        .topic(topic)
        .args(&[
            "--throughput",
            "20000",
            "--acks",
            "all",
            "--duration",
            "6s",
            "--record-size",
            "100",
            "--reporting-interval",
            "500ms",
            "--verify",
        ])
        .args(extra)
        .json(json)
}

/// Call `act` once, when the run has printed its `after`-th progress line.
fn at_progress_line(after: usize, mut act: impl FnMut()) -> impl FnMut(&str) {
    let mut seen = 0;
    move |line: &str| {
        if line.contains("records sent") {
            seen += 1;
            if seen == after {
                act();
            }
        }
    }
}

/// What every run on a changing cluster must show: exit 0, every record accounted for and
/// acknowledged, the read-back clean, and librdkafka finding exactly the acknowledged records.
fn assert_whole(mock: &Mock, topic: &str, doc: &serde_json::Value, out: &std::process::Output) {
    assert_whole_with(mock, topic, doc, out, false);
}

/// [`assert_whole`]; with `at_least_once`, a plain (not idempotent) producer whose requests to a
/// broker that went down were retried after `request.timeout.ms` may have written a batch twice
/// (the broker took it, its answer never came), as Java's producer would: duplicates are then
/// allowed only if batches were retried, none lost or reordered, and librdkafka finds the
/// acknowledged records plus exactly those duplicates.
fn assert_whole_with(
    mock: &Mock,
    topic: &str,
    doc: &serde_json::Value,
    out: &std::process::Output,
    at_least_once: bool,
) {
    eprintln!("{topic}: {}\n{}", text(&out.stdout), doc["cluster"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let (sent, acked, failed) = (
        n(doc, "records_sent"),
        n(doc, "records_acked"),
        n(doc, "records_failed"),
    );
    assert_eq!(sent, acked + failed, "{doc}");
    assert_eq!(failed, 0, "{}", doc["errors"]);
    assert!(acked > 50_000, "{acked} acknowledged in 6 s at 20 000/s");
    let v = &doc["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(n(v, "lost"), 0, "{v}");
    assert_eq!(n(v, "reordered"), 0, "{v}");
    let duplicated = n(v, "duplicated");
    if at_least_once && duplicated > 0 {
        assert!(
            n(&doc["cluster"], "retried_batches") > 0,
            "{v}\n{}",
            doc["cluster"]
        );
    } else {
        assert_eq!(duplicated, 0, "{v}");
    }
    let read = librdkafka::read(
        &mock.bootstrap,
        topic,
        PARTITIONS,
        acked as usize,
        Duration::from_millis(500),
        LIMIT,
    );
    assert_eq!(
        read.len() as u64,
        acked + if at_least_once { duplicated } else { 0 },
        "librdkafka read back"
    );
    assert!(
        doc["saturation"]["saturated"] == false,
        "{}",
        doc["saturation"]
    );
}

/// Every leader moved once: six leader changes seen, each batch retried at most once (only those
/// in flight or waiting at the move: at most max.in.flight + 1 per partition), and none after.
fn assert_followed_one_move(doc: &serde_json::Value) {
    let cluster = &doc["cluster"];
    let changes = cluster["leader_changes"]
        .as_array()
        .expect("leader_changes");
    assert_eq!(changes.len(), PARTITIONS as usize, "{cluster}");
    assert!(
        n(cluster, "max_attempts") <= 2,
        "a batch took more than one retry for one leader change: {cluster}"
    );
    let retried = n(cluster, "retried_batches");
    assert!(
        retried <= PARTITIONS as u64 * 6,
        "{retried} batches retried: more than were in flight or waiting at the move: {cluster}"
    );
    let retries: u64 = cluster["retries"]
        .as_object()
        .expect("retries")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    assert_eq!(retries, retried, "one retry each: {cluster}");
    // The frames on the wire say the same: the Produce requests beyond the first attempts are
    // the retries' (a few more frames are Metadata and setup).
    let extra = n(doc, "frames_written") - n(doc, "produce_requests");
    assert!(extra < 20, "{extra} frames besides Produce requests: {doc}");
}

#[test]
fn produce_follows_every_leader_moving_on_librdkafkas_mock_cluster() {
    let mock = Mock::new(3);
    mock.topic("moves", PARTITIONS);
    let dir = TempDir::new("moves");
    let json = dir.path().join("produce.json");
    let out = produce(&mock, "moves", &json, &[]).run_watching(
        LIMIT,
        at_progress_line(4, || mock.move_leaders("moves", PARTITIONS, 1)),
    );
    let doc = result_json(&json);
    assert_whole(&mock, "moves", &doc, &out);
    assert_followed_one_move(&doc);
    // The summary names the move.
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("6 leader changes"), "{said}");
    // `kbench report` shades the move on the timelines, as it shades a fault.
    let html = dir.path().join("r.html");
    let report = common::run(
        &[
            "report",
            &json.display().to_string(),
            "-o",
            &html.display().to_string(),
        ],
        LIMIT,
    );
    assert!(report.status.success(), "{}", text(&report.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(r#"class="fault" data-fault="6 leader changes""#),
        "the leader changes shaded on the timelines"
    );
    // The mock's flexible Metadata answers carry a byte after their body: read as Java reads
    // them, and counted.
    assert!(
        doc["protocol_anomalies"].to_string().contains("Metadata"),
        "{}",
        doc["protocol_anomalies"]
    );
}

#[test]
fn idempotent_produce_follows_a_leader_move_with_sequences_kept() {
    let mock = Mock::new(3);
    mock.topic("moves-idem", PARTITIONS);
    let dir = TempDir::new("moves-idem");
    let json = dir.path().join("produce.json");
    let out = produce(
        &mock,
        "moves-idem",
        &json,
        &["-X", "enable.idempotence=true"],
    )
    .run_watching(
        LIMIT,
        at_progress_line(4, || mock.move_leaders("moves-idem", PARTITIONS, 1)),
    );
    let doc = result_json(&json);
    assert_whole(&mock, "moves-idem", &doc, &out);
    assert_followed_one_move(&doc);
    assert!(
        doc["cluster"]["retries"]
            .get("OUT_OF_ORDER_SEQUENCE_NUMBER")
            .is_none(),
        "the new leader saw every partition's batches in sequence: {}",
        doc["cluster"]
    );
}

#[test]
fn keyed_produce_follows_a_leader_move() {
    let mock = Mock::new(3);
    mock.topic("moves-keyed", PARTITIONS);
    let dir = TempDir::new("moves-keyed");
    let json = dir.path().join("produce.json");
    let out = produce(&mock, "moves-keyed", &json, &["--keys", "random:200"]).run_watching(
        LIMIT,
        at_progress_line(4, || mock.move_leaders("moves-keyed", PARTITIONS, 1)),
    );
    let doc = result_json(&json);
    assert_whole(&mock, "moves-keyed", &doc, &out);
    assert_followed_one_move(&doc);
}

#[test]
fn a_broker_down_and_up_holds_back_only_its_partitions_and_loses_nothing() {
    let mock = Mock::new(3);
    mock.topic("down-up", PARTITIONS);
    let dir = TempDir::new("down-up");
    let json = dir.path().join("produce.json");
    let mut lines = 0;
    // Requests on the broker's connection when it went down may never be answered (the mock
    // keeps some connections open and silent): as Java's client, kbench waits request.timeout.ms
    // for them, then retries — 2 s here, so that happens within the run.
    let out = produce(&mock, "down-up", &json, &["-X", "request.timeout.ms=2000"]).run_watching(
        LIMIT,
        |line| {
            if line.contains("records sent") {
                lines += 1;
                match lines {
                    3 => mock.cluster.broker_down(2).expect("broker down"),
                    7 => mock.cluster.broker_up(2).expect("broker up"),
                    _ => {}
                }
            }
        },
    );
    let doc = result_json(&json);
    assert_whole_with(&mock, "down-up", &doc, &out, true);
    let cluster = &doc["cluster"];
    // Leadership did not move; the broker stopped answering, and the run says so.
    assert_eq!(cluster["leader_changes"].as_array().map(Vec::len), Some(0));
    let stalls = cluster["stalls"].as_array().expect("stalls");
    assert!(
        stalls.iter().any(|s| s["broker"] == 2),
        "broker 2 was down for about 2 s: {cluster}"
    );
    // Only broker 2's partitions waited: the others' records kept being acknowledged.
    assert!(
        cluster["unavailable_ms"]
            .as_object()
            .is_some_and(|u| u.keys().all(|p| mock.leader_of(p.parse().unwrap(), 0) == 2)),
        "{cluster}"
    );
}

#[test]
fn an_injected_not_leader_costs_one_retry_per_batch_and_a_refresh() {
    let mock = Mock::new(3);
    mock.topic("injected", PARTITIONS);
    let dir = TempDir::new("injected");
    let json = dir.path().join("produce.json");
    let out = produce(&mock, "injected", &json, &[]).run_watching(
        LIMIT,
        at_progress_line(3, || {
            mock.cluster.request_errors(
                rdkafka::types::RDKafkaApiKey::Produce,
                &[rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION],
            )
        }),
    );
    let doc = result_json(&json);
    assert_whole(&mock, "injected", &doc, &out);
    let cluster = &doc["cluster"];
    assert_eq!(
        n(&cluster["retries"], "NOT_LEADER_OR_FOLLOWER"),
        n(cluster, "retried_batches"),
        "{cluster}"
    );
    assert!(n(cluster, "retried_batches") >= 1, "{cluster}");
    assert_eq!(n(cluster, "max_attempts"), 2, "{cluster}");
    assert!(n(cluster, "metadata_refreshes") >= 1, "{cluster}");
    assert_eq!(cluster["leader_changes"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_slow_broker_is_no_error() {
    let mock = Mock::new(3);
    mock.topic("slow", PARTITIONS);
    mock.cluster
        .broker_round_trip_time(1, Duration::from_millis(150))
        .expect("rtt");
    let dir = TempDir::new("slow");
    let json = dir.path().join("produce.json");
    let out = produce(&mock, "slow", &json, &[]).run_watching(LIMIT, |_| {});
    let doc = result_json(&json);
    assert_whole(&mock, "slow", &doc, &out);
    let cluster = &doc["cluster"];
    assert!(
        cluster["retries"].as_object().is_some_and(|r| r.is_empty()),
        "{cluster}"
    );
    assert_eq!(cluster["stalls"].as_array().map(Vec::len), Some(0));
}

/// A consume run reading while kbench produces beside it (20 000 records/s for 8 s, a process of
/// its own), every leader moved at the consumer's third progress line.
fn consume_through_a_move(mode: &[&str], topic: &str) -> (serde_json::Value, std::process::Output) {
    let mock = Mock::new(3);
    mock.topic(topic, PARTITIONS);
    consume_through_a_move_on(
        &mock.bootstrap,
        || mock.move_leaders(topic, PARTITIONS, 1),
        mode,
        topic,
    )
}

/// The same on any mock: `move_leaders` moves them.
fn consume_through_a_move_on(
    bootstrap: &str,
    mut move_leaders: impl FnMut(),
    mode: &[&str],
    topic: &str,
) -> (serde_json::Value, std::process::Output) {
    let dir = TempDir::new(topic);
    let json = dir.path().join("consume.json");
    let mut producer = common::kbench()
        .args([
            "produce",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--throughput",
            "20000",
            "--duration",
            "8s",
            "--record-size",
            "100",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("producer");
    let out = Cmd::new("consume")
        .args(&["--bootstrap-server", bootstrap])
        .topic(topic)
        .args(&[
            "--messages",
            "150000",
            "--timeout",
            "20000",
            "--reporting-interval",
            "1000",
            "--show-detailed-stats",
        ])
        .args(mode)
        .json(&json)
        .run_watching(LIMIT, {
            let mut seen = 0;
            move |line: &str| {
                // A detailed-stats line: the time, then the thread id.
                if line.contains(", 0, ") {
                    seen += 1;
                    if seen == 3 {
                        move_leaders();
                    }
                }
            }
        });
    let _ = producer.wait();
    (result_json(&json), out)
}

/// What a consumer on a changing cluster must show: every record asked for read, no error, and the
/// move followed — six leader changes, each partition's Fetch answered NOT_LEADER_OR_FOLLOWER at
/// most once (it waits for the refresh, then asks the new leader), no stall.
fn assert_consumer_followed(doc: &serde_json::Value, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(n(doc, "records_consumed"), 150_000, "{doc}");
    assert!(
        doc["errors"].as_object().is_none_or(|e| e.is_empty()),
        "{}",
        doc["errors"]
    );
    let cluster = &doc["cluster"];
    assert_eq!(
        cluster["leader_changes"].as_array().map(Vec::len),
        Some(PARTITIONS as usize),
        "{cluster}"
    );
    let not_leader = cluster["retries"]["NOT_LEADER_OR_FOLLOWER"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        not_leader <= PARTITIONS as u64,
        "more than one NOT_LEADER_OR_FOLLOWER per partition for one move: {cluster}"
    );
    assert_eq!(
        cluster["stalls"].as_array().map(Vec::len),
        Some(0),
        "{cluster}"
    );
}

#[test]
fn consume_assigned_follows_a_leader_move() {
    let (doc, out) = consume_through_a_move(&["--partition", "0,1,2,3,4,5"], "c-assign");
    assert_consumer_followed(&doc, &out);
}

#[test]
fn consume_in_a_group_follows_a_leader_move_at_the_mocks_default_versions() {
    let (doc, out) = consume_through_a_move(&["--group", "moves-group"], "c-group");
    assert_consumer_followed(&doc, &out);
    // The mock cannot read the flexible JoinGroup and SyncGroup it announces: the join is asked
    // again at the versions it reads, and the result says so.
    let anomalies = doc["protocol_anomalies"].to_string();
    assert!(anomalies.contains("JoinGroup v6"), "{anomalies}");
    assert_eq!(doc["negotiated_versions"]["JoinGroup"], 5, "{doc}");
    assert!(n(&doc, "rebalance_time_ms") < 30_000, "{doc}");
}

/// Two members of a KIP-848 group (`group.protocol=consumer`, the mock's coordinator assigning;
/// its session 6 s, heartbeats every 500 ms) read through every leader moving: each follows its
/// partitions' moves, and the group's membership is not disturbed by them (no member joins again).
#[test]
fn a_consumer_protocol_group_follows_a_leader_move() {
    let mock = crate::mock::Kip848Mock::new(3, 6000, 500);
    mock.topic("c-kip848", PARTITIONS);
    let (doc, out) = consume_through_a_move_on(
        &mock.bootstrap,
        || mock.move_leaders("c-kip848", PARTITIONS, 1),
        &[
            "--group",
            "moves-kip848",
            "--consumers",
            "2",
            "-X",
            "group.protocol=consumer",
        ],
        "c-kip848",
    );
    assert_consumer_followed(&doc, &out);
    // The leaders moved; the group did not: its one rebalance is the start, and every member
    // read.
    let g = &doc["group"];
    let rebalances = g["rebalances"].as_array().unwrap();
    assert_eq!(rebalances.len(), 1, "{g}");
    assert_eq!(rebalances[0]["cause"], "start", "{g}");
    let members = g["members"].as_array().unwrap();
    assert_eq!(members.len(), 2, "{g}");
    assert!(members.iter().all(|m| n(m, "records") > 0), "{g}");
}

/// e2e through a leader move: every acknowledged record consumed, none lost, the producers and the
/// consumer both following the move, and no saturation claimed.
#[test]
fn e2e_follows_every_leader_moving() {
    let mock = Mock::new(3);
    mock.topic("e2e-moves", PARTITIONS);
    let dir = TempDir::new("e2e-moves");
    let json = dir.path().join("e2e.json");
    let mut lines = 0;
    let out = Cmd::new("e2e")
        .args(&["--bootstrap-server", &mock.bootstrap])
        .topic("e2e-moves")
        .args(&[
            "--producers",
            "4",
            // 50 ms, not the issue's 10 ms: a batch more than an interval late is a slip, and on
            // a machine running ten such tests at once the generator can be starved of 10 ms.
            "--batch-interval",
            "50ms",
            "--duration",
            "8s",
            "--reporting-interval",
            "1s",
            "--verify",
        ])
        .json(&json)
        .run_watching(LIMIT, |line| {
            if line.contains("acked") {
                lines += 1;
                if lines == 3 {
                    mock.move_leaders("e2e-moves", PARTITIONS, 1);
                }
            }
        });
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let doc = result_json(&json);
    let acked = n(&doc, "records_acked");
    // 4 producers, one batch each 50 ms, 8 s: 640 scheduled.
    assert!(acked > 400, "{doc}");
    assert_eq!(n(&doc, "records_failed"), 0, "{doc}");
    assert_eq!(n(&doc, "records_lost"), 0, "{doc}");
    assert_eq!(
        n(&doc, "records_consumed") - n(&doc, "records_duplicated"),
        acked,
        "{doc}"
    );
    assert_eq!(doc["verification"]["ok"], true, "{}", doc["verification"]);
    assert_eq!(
        doc["saturation"]["saturated"], false,
        "{}",
        doc["saturation"]
    );
    assert_eq!(n(&doc, "schedule_slips"), 0, "{doc}");
    for side in ["cluster", "consumer_cluster"] {
        let c = &doc[side];
        assert!(
            c["leader_changes"]
                .as_array()
                .is_some_and(|l| !l.is_empty()),
            "{side}: {c}"
        );
    }
    assert!(
        n(&doc["cluster"], "max_attempts") <= 2,
        "a produce batch retried more than once: {}",
        doc["cluster"]
    );
    let said = text(&out.stdout);
    assert!(
        said.contains("Cluster (consumer): 6 leader changes"),
        "{said}"
    );
}

/// An OMB workload (tests/omb, unmodified) through a leader move: the producers and the consumer
/// follow it, nothing fails, the subscription reads every acknowledged record, and the result says
/// what the cluster did.
#[test]
fn omb_follows_a_leader_move() {
    let mock = Mock::new(3);
    let dir = TempDir::new("omb-moves");
    let json = dir.path().join("kbench.json");
    let omb = dir.path().join("omb.json");
    let file = |f: &str| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/omb")
            .join(f)
            .display()
            .to_string()
    };
    // --seed 1: the workload's topic is kbench-omb-00000001-0000, with 4 partitions; the mock
    // has no CreateTopics, so it is made here, leaders spread (kbench uses a topic that exists).
    let topic = "kbench-omb-00000001-0000";
    mock.topic(topic, 4);
    let mut periods = 0;
    let out = Cmd::new("omb")
        .args(&["--bootstrap-server", &mock.bootstrap])
        .arg(file("1-topic-4-partitions-100b.yaml"))
        .args(&["--driver", &file("kafka-test-driver.yaml")])
        .args(&["--seed", "1", "--reporting-interval", "1s"])
        .args(&["-o", omb.to_str().unwrap()])
        .json(&json)
        .run_watching(LIMIT, |line| {
            if line.starts_with("Pub rate ") {
                periods += 1;
                // The fifth period is past the 3 s warm-up: the move lands in the measured phase.
                if periods == 5 {
                    mock.move_leaders(topic, 4, 1);
                }
            }
        });
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(periods >= 5, "{stdout}");
    let doc = result_json(&json);
    assert_eq!(doc["records_failed"], 0, "{doc}");
    let acked = n(&doc, "records_acked");
    assert!(acked > 5_000, "{doc}");
    assert_eq!(
        doc["consumed"]["records"], doc["consumed"]["expected_records"],
        "{}",
        doc["consumed"]
    );
    for side in ["cluster", "consumer_cluster"] {
        assert!(
            doc[side]["leader_changes"]
                .as_array()
                .is_some_and(|l| !l.is_empty()),
            "{side}: {}",
            doc[side]
        );
    }
    assert!(
        doc["cluster"]["max_attempts"].as_u64().unwrap_or(0) <= 2,
        "{}",
        doc["cluster"]
    );
    assert!(stdout.contains("Cluster (producers): "), "{stdout}");
}
