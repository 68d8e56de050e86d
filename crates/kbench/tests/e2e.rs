//! `kbench e2e` against a real broker: producers and a consumer group, exact counts, whole trip.

mod common;

use std::time::Duration;

use common::{TestBroker, result_json, run, runtime, text};

fn count(doc: &serde_json::Value, field: &str) -> u64 {
    doc[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing"))
}

#[test]
fn four_producers_for_five_seconds_lose_and_duplicate_nothing() {
    let broker = TestBroker::start();
    let dir = std::env::temp_dir().join(format!("kbench-e2e-{}", std::process::id()));
    let json = dir.join("e2e.json");
    let out = run(
        &[
            "e2e",
            "--bootstrap-server",
            &broker.addr,
            "--topic",
            "e2e-four",
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
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(90),
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("records produced"), "{stdout}");
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "e2e");
    let produced = count(&doc, "records_produced");
    let acked = count(&doc, "records_acked");
    let failed = count(&doc, "records_failed");
    assert!(produced > 500, "only {produced} records in 5 s");
    assert_eq!(produced, acked + failed);
    assert_eq!(failed, 0);
    assert_eq!(count(&doc, "records_consumed"), acked);
    assert_eq!(count(&doc, "records_lost"), 0);
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
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn asynchronous_commits_against_the_embedded_broker() {
    let dir = std::env::temp_dir().join(format!("kbench-e2e-async-{}", std::process::id()));
    let json = dir.join("e2e.json");
    let out = run(
        &[
            "e2e",
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
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(90),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["group_id"], "kbench-test-group");
    assert_eq!(doc["settings"]["commit"], "async every 500 ms");
    assert!(count(&doc, "commits") >= 2, "{}", doc["commits"]);
    assert_eq!(count(&doc, "commit_failures"), 0);
    assert_eq!(count(&doc, "records_lost"), 0);
    assert_eq!(doc["target"]["embedded_broker"], true);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn producers_only_mode_has_no_consumer_and_no_whole_trip() {
    let broker = TestBroker::start();
    let dir = std::env::temp_dir().join(format!("kbench-e2e-prod-{}", std::process::id()));
    let json = dir.join("e2e.json");
    let out = run(
        &[
            "e2e",
            "--bootstrap-server",
            &broker.addr,
            "--mode",
            "producers",
            "--duration",
            "1s",
            "--batch-interval",
            "10ms",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert!(count(&doc, "records_acked") > 0);
    assert_eq!(count(&doc, "records_consumed"), 0);
    assert_eq!(count(&doc, "records_lost"), 0);
    assert_eq!(doc["whole_trip"]["count"], 0);
    assert!(doc["member_id"].is_null());
    let _ = std::fs::remove_dir_all(dir);
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
    let out = run(
        &[
            "e2e",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--duration",
            "1s",
        ],
        Duration::from_secs(60),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
