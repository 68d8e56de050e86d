//! `kbench e2e --reply-topic`: latency through the user's application. The application is a
//! librdkafka service (`common/echo.rs`) in a consumer group of its own; kbench writes requests,
//! reads the replies, and counts requests answered and not, replies that match nothing, and the
//! application group's lag.

use std::time::Duration;

use crate::common::{Cmd, TempDir, TestBroker, n, result_json, text};
use crate::echo::{Echo, EchoSpec, create_topics};
use crate::mock::Mock;

const LIMIT: Duration = Duration::from_secs(180);

/// A service that takes 25 ms a request, fed faster than that: every request answered, the
/// request → reply latency at least the service's time, and the backlog seen as the application
/// group's lag (sampled every 100 ms), not hidden.
#[test]
fn a_slow_service_shows_as_latency_and_as_its_groups_lag() {
    let broker = TestBroker::start();
    create_topics(&broker.addr, &["rr-slow-req", "rr-slow-rep"], 2);
    let mut service = EchoSpec::new("rr-slow-req", "rr-slow-rep", "rr-slow-app");
    service.delay = Duration::from_millis(25);
    let echo = Echo::start(&broker.addr, service);
    let dir = TempDir::new("rr-slow");
    let json = dir.path().join("e2e.json");
    let out = Cmd::on("e2e", &broker)
        .topic("rr-slow-req")
        .args(&[
            "--reply-topic",
            "rr-slow-rep",
            "--app-group",
            "rr-slow-app",
            "--partitions",
            "2",
            "--batch-interval",
            "10ms",
            "--num-records",
            "60",
            "--timeline-interval",
            "100ms",
            "--reporting-interval",
            "0",
        ])
        .json(&json)
        .run(LIMIT);
    let answered_by_service = echo.stop();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", text(&out.stderr));
    let doc = result_json(&json);
    let r = &doc["reply"];
    assert_eq!(n(r, "requests_sent"), 60, "{r}");
    assert_eq!(n(r, "answered"), 60, "{r}");
    assert_eq!(n(r, "unanswered"), 0, "{r}");
    assert_eq!(n(r, "replies_unmatched"), 0, "{r}");
    assert_eq!(n(r, "replies_duplicated"), 0, "{r}");
    assert_eq!(answered_by_service, 60);
    // The service waits 25 ms before each reply: no reply can come sooner.
    let latency = &r["request_reply"];
    assert_eq!(n(latency, "count"), 60, "{latency}");
    assert!(n(latency, "min") >= 25_000, "{latency}");
    // Requests came every 10 ms, answers every 25 ms: a backlog, and the group's lag shows it.
    let lag = &r["app_group"];
    assert_eq!(lag["group"], "rr-slow-app");
    assert!(
        lag["samples"].as_array().is_some_and(|s| s.len() >= 5),
        "{lag}"
    );
    assert!(n(lag, "max_lag") >= 5, "{lag}");
    // Drained: the last sample is below the peak (the service commits every 100 ms, so the very
    // last replies may not be committed yet when sampling stops).
    assert!(n(lag, "last_lag") < n(lag, "max_lag"), "{lag}");
    assert!(said.contains("60 answered"), "{said}");
    assert!(said.contains("request → reply (ms, 60 samples)"), "{said}");
    assert!(said.contains("application group rr-slow-app lag"), "{said}");
    assert_eq!(
        doc["settings"]["reply"]["correlation_header"],
        "kafka_correlationId"
    );
}

/// A service that answers in a JSON field (on a reply topic with more partitions than the request
/// topic), sends one reply to no request of the run, and stops answering after 10 requests: the 20 it never answered are counted (sent = answered +
/// unanswered), the stray reply is unmatched, and the run exits 1.
#[test]
fn unanswered_requests_and_unmatched_replies_are_counted() {
    let broker = TestBroker::start();
    // More reply partitions than request partitions: the reply consumer's group is on the
    // reply topic, and reads every one of its partitions.
    create_topics(&broker.addr, &["rr-stop-req"], 1);
    create_topics(&broker.addr, &["rr-stop-rep"], 3);
    let mut service = EchoSpec::new("rr-stop-req", "rr-stop-rep", "rr-stop-app");
    service.header = "x-request-id".into();
    service.json_field = Some("correlationId".into());
    service.answer_at_most = Some(10);
    service.junk_after = Some(5);
    let echo = Echo::start(&broker.addr, service);
    let dir = TempDir::new("rr-stop");
    let json = dir.path().join("e2e.json");
    let out = Cmd::on("e2e", &broker)
        .topic("rr-stop-req")
        .args(&[
            "--reply-topic",
            "rr-stop-rep",
            "--correlation-header",
            "x-request-id",
            "--reply-correlation",
            "json:correlationId",
            "--batch-interval",
            "5ms",
            "--num-records",
            "30",
            "--drain",
            "2s",
            "--reporting-interval",
            "0",
        ])
        .json(&json)
        .run(LIMIT);
    drop(echo);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}\n{}", text(&out.stderr));
    let doc = result_json(&json);
    let r = &doc["reply"];
    assert_eq!(n(r, "requests_sent"), 30, "{r}");
    assert_eq!(n(r, "answered"), 10, "{r}");
    assert_eq!(n(r, "unanswered"), 20, "{r}");
    assert_eq!(n(r, "replies_unmatched"), 1, "{r}");
    assert_eq!(r["reply_correlation"], "json:correlationId");
    assert!(
        said.contains("20 unanswered; 1 replies unmatched"),
        "{said}"
    );
}

/// On librdkafka's mock cluster (another Kafka implementation), with every partition's leader
/// moving mid-run: kbench's producers and reply consumer follow, the service keeps answering, and
/// every request is answered once.
#[test]
fn request_reply_follows_leaders_that_move() {
    let mock = Mock::new(3);
    mock.topic("rr-moves-req", 3);
    mock.topic("rr-moves-rep", 3);
    let echo = Echo::start(
        &mock.bootstrap,
        EchoSpec::new("rr-moves-req", "rr-moves-rep", "rr-moves-app"),
    );
    let dir = TempDir::new("rr-moves");
    let json = dir.path().join("e2e.json");
    let mut lines = 0;
    let out = Cmd::new("e2e")
        .args(&["--bootstrap-server", &mock.bootstrap])
        .topic("rr-moves-req")
        .args(&[
            "--reply-topic",
            "rr-moves-rep",
            "--app-group",
            "rr-moves-app",
            "--producers",
            "2",
            "--batch-interval",
            "50ms",
            "--duration",
            "6s",
            "--reporting-interval",
            "1s",
        ])
        .json(&json)
        .run_watching(LIMIT, |line| {
            if line.contains("acked") {
                lines += 1;
                if lines == 2 {
                    mock.move_leaders("rr-moves-req", 3, 1);
                    mock.move_leaders("rr-moves-rep", 3, 1);
                }
            }
        });
    drop(echo);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", text(&out.stderr));
    let doc = result_json(&json);
    let r = &doc["reply"];
    let sent = n(r, "requests_sent");
    assert!(sent > 100, "{r}");
    assert_eq!(n(r, "requests_failed"), 0, "{r}");
    assert_eq!(n(r, "answered"), sent, "{r}");
    assert_eq!(n(r, "unanswered"), 0, "{r}");
    assert_eq!(n(r, "replies_duplicated"), 0, "{r}");
    assert!(
        doc["cluster"]["leader_changes"]
            .as_array()
            .is_some_and(|l| !l.is_empty()),
        "{}",
        doc["cluster"]
    );
    assert!(
        r["app_group"]["samples"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{r}"
    );
}

/// Bad request-reply flags: one error each, naming the flag, before any load.
#[test]
fn bad_request_reply_flags_name_the_flag() {
    Cmd::new("e2e")
        .args(&["--app-group", "g"])
        .refused("--app-group: only with a reply topic");
    Cmd::new("e2e")
        .args(&["--topic", "same", "--reply-topic", "same"])
        .refused("--reply-topic: must differ from the request topic");
    Cmd::new("e2e")
        .args(&["--reply-topic", "r", "--reply-correlation", "body:x"])
        .refused("--reply-correlation");
    Cmd::new("e2e")
        .args(&["--reply-topic", "r", "--verify"])
        .refused("--reply-topic: not with verify");
    Cmd::new("e2e")
        .args(&["--reply-topic", "r", "--mode", "producers"])
        .refused("--reply-topic: needs the consumer and the producers in one process");
    Cmd::new("e2e")
        .args(&["--mode", "consumer", "--num-records", "5"])
        .refused("--num-records: nothing is sent in consumer-only mode");
}
