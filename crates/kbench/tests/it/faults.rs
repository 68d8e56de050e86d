//! `--fault`: faults applied to the embedded broker during a measured run (pause, kill, restart)
//! and to the connection through the fault proxy (delay, loss). Under every fault the accounting is
//! exact (sent = acked + failed), the run ends, the result says which faults were applied when, and
//! `--verify` says what the broker kept.

use crate::common;

use std::time::Duration;

use crate::common::{Cmd, TempDir, n, result_json, text};

const LIMIT: Duration = Duration::from_secs(120);

/// A produce run with `faults`, at 2 000 records/s for `secs`, verified; its exit code and result.
fn faulted(
    name: &str,
    secs: u32,
    faults: &[&str],
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let dir = TempDir::new(name);
    let json = dir.path().join("r.json");
    let mut cmd = Cmd::new("produce")
        .topic(name)
        .args(&[
            "--num-records",
            "100000000",
            "--duration",
            &format!("{secs}s"),
            "--throughput",
            "2000",
            "--record-size",
            "100",
            "--verify",
            "--timeline-interval",
            "250ms",
        ])
        .args(extra)
        .json(&json);
    for f in faults {
        cmd = cmd.arg("--fault").arg(f);
    }
    let out = cmd.run(LIMIT);
    let doc = result_json(&json);
    let sent = n(&doc, "records_sent");
    assert_eq!(
        sent,
        n(&doc, "records_acked") + n(&doc, "records_failed"),
        "{name}: sent = acked + failed: {doc}"
    );
    assert!(sent > 0, "{name}");
    let applied = doc["faults"].as_array().expect("faults in the result");
    assert_eq!(applied.len(), faults.len(), "{name}: {applied:?}");
    (
        out.status.code(),
        doc,
        text(&out.stdout) + &text(&out.stderr),
    )
}

#[test]
fn a_paused_broker_loses_nothing_and_its_window_shows() {
    let (code, doc, out) = faulted("paused", 3, &["at=1s pause-broker=1s"], &[]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(n(&doc, "records_failed"), 0);
    let v = &doc["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!((n(v, "lost"), n(v, "duplicated")), (0, 0), "{v}");
    assert_eq!(n(v, "records_verified"), n(&doc, "records_acked"));
    let f = &doc["faults"][0];
    assert_eq!(f["kind"], "pause-broker");
    let (began, ended) = (
        f["began_s"].as_f64().unwrap(),
        f["ended_s"].as_f64().unwrap(),
    );
    assert!(ended - began >= 0.99, "{f}");
    // The pause is in the timeline: a window whose records waited about the pause.
    let slowest = doc["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .filter_map(|w| w["latency"]["max"].as_u64())
        .max()
        .unwrap_or(0);
    assert!(
        slowest >= 900_000,
        "no window shows the 1 s pause: {slowest} µs"
    );
    assert!(
        out.contains("Fault at=1s pause-broker=1s: from 1.0 s"),
        "{out}"
    );
}

/// The embedded broker keeps records in memory: restarted, it comes back empty. The run goes on
/// (its topic is created again), and verification counts what the restart lost.
#[test]
fn a_restarted_in_memory_broker_loses_what_it_held_and_verify_says_so() {
    let (code, doc, out) = faulted(
        "restarted",
        3,
        &["at=1s restart-broker"],
        &["-X", "delivery.timeout.ms=5000"],
    );
    let v = &doc["verification"];
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["error"].is_null(), "{v}");
    let (lost, acked) = (n(v, "lost"), n(&doc, "records_acked"));
    assert!(lost > 0 && lost < acked, "lost {lost} of {acked}: {v}");
    // Everything acknowledged is either read back or lost.
    assert_eq!(
        n(v, "records_verified") - n(v, "duplicated") - n(v, "unexpected") + lost,
        acked,
        "{v}"
    );
    assert!(code == Some(5) || code == Some(1), "{code:?}: {out}");
    assert!(doc["faults"][0]["error"].is_null(), "{}", doc["faults"]);
}

/// A broker killed for good: the run ends within its duration plus the delivery time-out, writes
/// its partial result and exits 1; every record is acknowledged or failed.
#[test]
fn a_killed_broker_ends_the_run_with_a_partial_result() {
    let (code, doc, out) = faulted(
        "killed",
        2,
        &["at=1s kill-broker"],
        &["-X", "delivery.timeout.ms=3000"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(n(&doc, "records_failed") > 0);
    assert!(n(&doc, "records_acked") > 0);
    let v = &doc["verification"];
    assert!(v["ok"].is_null() && v["error"].is_string(), "{v}");
}

/// Delay and loss through the fault proxy: slower, nothing lost, nothing duplicated.
#[test]
fn delay_and_loss_slow_the_run_and_lose_nothing() {
    let (code, doc, out) = faulted(
        "delayed",
        3,
        &["at=500ms delay=40ms for=1s", "at=1500ms loss=10% for=1s"],
        &[],
    );
    assert_eq!(code, Some(0), "{out}");
    let v = &doc["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(n(v, "records_verified"), n(&doc, "records_acked"));
    assert_eq!(n(&doc, "records_failed"), 0);
    for f in doc["faults"].as_array().unwrap() {
        assert!(
            f["ended_s"].as_f64().unwrap() > f["began_s"].as_f64().unwrap(),
            "{f}"
        );
    }
    // Each request waits for the delay both ways.
    assert!(n(&doc["latency"], "max") >= 80_000, "{}", doc["latency"]);
}

/// An e2e run with `faults`: two producers, a record every 50 ms each, for `secs`; its exit code
/// and result. Every record is accounted for on both sides: produced = acked + failed, and every
/// acknowledged record was consumed (duplicates aside), found late, or is lost.
fn e2e_faulted(name: &str, secs: u32, faults: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let dir = TempDir::new(name);
    let json = dir.path().join("r.json");
    let mut cmd = Cmd::new("e2e")
        .topic(name)
        .args(&[
            "--duration",
            &format!("{secs}s"),
            "--producers",
            "2",
            "--batch-interval",
            "50",
            "--timeline-interval",
            "250ms",
        ])
        .json(&json);
    for f in faults {
        cmd = cmd.arg("--fault").arg(f);
    }
    let out = cmd.run(LIMIT);
    let doc = result_json(&json);
    let produced = n(&doc, "records_produced");
    let acked = n(&doc, "records_acked");
    assert!(produced > 0, "{name}: {doc}");
    assert_eq!(
        produced,
        acked + n(&doc, "records_failed"),
        "{name}: produced = acked + failed"
    );
    assert_eq!(
        n(&doc, "records_consumed") - n(&doc, "records_duplicated")
            + n(&doc, "records_late")
            + n(&doc, "records_lost")
            + n(&doc, "records_unverified"),
        acked,
        "{name}: every acknowledged record consumed, late, lost or unverifiable"
    );
    let applied = doc["faults"].as_array().expect("faults in the result");
    assert_eq!(applied.len(), faults.len(), "{name}: {applied:?}");
    (
        out.status.code(),
        doc,
        text(&out.stdout) + &text(&out.stderr),
    )
}

/// The windows of an e2e result that begin at or after `t` seconds: (records consumed, slowest
/// whole trip in µs) summed and maxed.
fn e2e_after(doc: &serde_json::Value, from: f64, to: f64) -> (u64, u64) {
    let mut consumed = 0;
    let mut slowest = 0;
    for w in doc["intervals"].as_array().expect("intervals") {
        let t = w["t_s"].as_f64().unwrap();
        if t >= from && t < to {
            consumed += w["consumed"].as_u64().unwrap_or(0);
            slowest = slowest.max(w["whole_trip"]["max"].as_u64().unwrap_or(0));
        }
    }
    (consumed, slowest)
}

#[test]
fn e2e_a_paused_broker_loses_nothing_and_the_whole_trip_shows_the_pause() {
    let (code, doc, out) = e2e_faulted("e2e-paused", 4, &["at=1s pause-broker=1s"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(n(&doc, "records_lost"), 0);
    assert_eq!(n(&doc, "records_failed"), 0);
    // Records sent during the pause waited for it, end to end.
    let (_, slowest) = e2e_after(&doc, 1.0, 3.0);
    assert!(
        slowest >= 700_000,
        "no window shows the pause: {slowest} µs"
    );
    assert!(
        out.contains("Fault at=1s pause-broker=1s: from 1.0 s"),
        "{out}"
    );
    // `kbench report` shades the fault's window on the timelines.
    let dir = TempDir::new("e2e-paused-report");
    let json = dir.path().join("r.json");
    std::fs::write(&json, doc.to_string()).unwrap();
    let html = dir.path().join("r.html");
    let out = common::run(
        &[
            "report",
            &json.display().to_string(),
            "-o",
            &html.display().to_string(),
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches(r#"class="fault" data-fault="at=1s pause-broker=1s""#)
            .count(),
        2,
        "the pause shaded on the throughput and whole-trip timelines"
    );
}

/// A broker that restarts empty: the consumer finds its topic again (a new topic id), reads the
/// new log from its start (it ends below the consumer's position), finds the group's coordinator
/// again and rejoins; records after the restart are consumed, not reported lost.
#[test]
fn e2e_the_consumer_goes_on_after_a_broker_restart() {
    let (code, doc, out) = e2e_faulted("e2e-restarted", 5, &["at=1500ms restart-broker"]);
    let ended = doc["faults"][0]["ended_s"]
        .as_f64()
        .expect("the restart ended");
    let (consumed, _) = e2e_after(&doc, ended + 0.5, f64::MAX);
    assert!(consumed > 0, "nothing consumed after the restart: {out}");
    assert!(n(&doc, "rejoins") >= 1, "{out}");
    // Lost is at most what was acknowledged before the restart and not yet read: a handful.
    let lost = n(&doc, "records_lost");
    assert!(lost <= 10, "lost {lost}: {out}");
    assert!(code == Some(0) || code == Some(1), "{code:?}: {out}");
}

/// A broker killed for good: the run ends after its duration plus the producers' 10 s settle,
/// never waits out the delivery time-out for a free slot, writes its result and exits 1.
#[test]
fn e2e_a_killed_broker_ends_the_run_with_a_partial_result() {
    let (code, doc, out) = e2e_faulted("e2e-killed", 3, &["at=1s kill-broker"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(n(&doc, "records_failed") > 0, "{out}");
    assert!(n(&doc, "records_acked") > 0, "{out}");
    // Nothing can be read again from a dead broker: what was not consumed is unverifiable, and
    // never called lost.
    assert_eq!(n(&doc, "records_lost"), 0, "{out}");
    if n(&doc, "records_unverified") > 0 {
        assert!(out.contains(" unverifiable: "), "{out}");
        assert!(doc["unverified_reason"].is_string(), "{doc}");
    }
    // What ended it is recorded: the batches still unsent when the producers stopped failed after
    // their 10 s settle, not at the 120 s delivery time-out a wait for a free slot would have
    // taken (the test's limit of 120 s catches a hang).
    assert!(
        doc["errors"]
            .to_string()
            .contains("still unanswered 10 s later"),
        "{}",
        doc["errors"]
    );
}

/// Delay through the fault proxy: the whole trip of the window grows by the delay both ways;
/// nothing is lost.
#[test]
fn e2e_delay_and_loss_slow_the_trip_and_lose_nothing() {
    let (code, doc, out) = e2e_faulted(
        "e2e-delayed",
        4,
        &["at=1s delay=60ms for=1500ms", "at=2500ms loss=10% for=1s"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(n(&doc, "records_lost"), 0);
    assert_eq!(n(&doc, "records_failed"), 0);
    let (_, slowest) = e2e_after(&doc, 1.25, 2.5);
    assert!(
        slowest >= 120_000,
        "no window shows the delay: {slowest} µs"
    );
}

#[test]
fn bad_faults_are_one_clear_error_before_any_load() {
    // Faults act on the embedded broker kbench controls, on every workload.
    for workload in ["produce", "e2e", "consume"] {
        Cmd::new(workload)
            .args(&[
                "--bootstrap-server",
                "127.0.0.1:1",
                "--fault",
                "at=1s kill-broker",
            ])
            .refused("--fault: applies to the embedded broker");
    }
    for (args, says) in [
        (vec!["--fault", "at=1s"], "--fault \"at=1s\": what?"),
        (vec!["--fault", "at=1s loss=5"], "not a percentage"),
        (
            vec!["--fault", "at=1s kill-broker", "--find-max-rate"],
            "--fault: not with --find-max-rate",
        ),
    ] {
        Cmd::new("produce").args(&args).refused(says);
    }
}

#[test]
fn e2e_faults_are_refused_through_a_rest_proxy() {
    Cmd::new("e2e")
        .args(&[
            "--via",
            "rest-proxy",
            "--rest-url",
            "http://127.0.0.1:1",
            "--value-schema-id",
            "1",
            "--fault",
            "at=1s kill-broker",
        ])
        .refused("--fault: not with --via rest-proxy");
}

/// `consume --fault`: the schedule counts from the measured read (after the fill); a pause shows in
/// the fetch latency and loses nothing; a broker killed for good ends the run at its --timeout with
/// its errors and exit 1.
#[test]
fn consume_under_a_pause_and_a_kill() {
    let dir = TempDir::new("consume-faults");
    let json = dir.path().join("paused.json");
    let out = Cmd::new("consume")
        .topic("consume-paused")
        .args(&[
            "--messages",
            "300000",
            "--fault",
            "at=100ms pause-broker=1s",
        ])
        .json(&json)
        .run(LIMIT);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let doc = result_json(&json);
    assert_eq!(n(&doc, "records_consumed"), 300_000, "{all}");
    assert!(
        n(&doc["fetch_latency"], "max") >= 800_000,
        "the pause is not in the fetch latency: {}",
        doc["fetch_latency"]
    );
    assert_eq!(doc["faults"][0]["kind"], "pause-broker");
    let json = dir.path().join("killed.json");
    let out = Cmd::new("consume")
        .topic("consume-killed")
        .args(&[
            "--messages",
            "300000",
            "--timeout",
            "2000",
            "--fault",
            "at=50ms kill-broker",
        ])
        .json(&json)
        .run(LIMIT);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{all}");
    // Ended by its own --timeout, as kafka-consumer-perf-test words it (the test's limit catches a
    // hang), not by a guess at the wall clock.
    assert!(all.contains("timeout (2000 ms) exceeded"), "{all}");
    let doc = result_json(&json);
    assert!(n(&doc, "records_consumed") < 300_000, "{all}");
    assert!(!doc["errors"].as_object().unwrap().is_empty(), "{all}");
}

/// `omb --fault`: the driver file's servers are set aside for the embedded broker (and said so);
/// a pause loses nothing and shows in the end-to-end latency.
#[test]
fn omb_under_a_pause() {
    let dir = TempDir::new("omb-faults");
    let workload = dir.path().join("w.yaml");
    std::fs::write(
        &workload,
        "name: faulted\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 100\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\nproducerRate: 1000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 0.05\nwarmupDurationMinutes: 0\n",
    )
    .unwrap();
    let driver =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/omb/kafka-test-driver.yaml");
    let json = dir.path().join("r.json");
    let out = Cmd::new("omb")
        .arg(workload.display().to_string())
        .arg("--driver")
        .arg(driver.display().to_string())
        .args(&["--fault", "at=1s pause-broker=1s", "-o"])
        .arg(dir.path().join("omb.json").display().to_string())
        .json(&json)
        .run(LIMIT);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("--fault runs against the embedded broker"),
        "{all}"
    );
    let doc = result_json(&json);
    let sent = n(&doc, "records_sent");
    assert_eq!(sent, n(&doc, "records_acked") + n(&doc, "records_failed"));
    assert_eq!(n(&doc, "records_failed"), 0, "{all}");
    assert!(
        n(&doc["end_to_end"], "max") >= 800_000,
        "the pause is not in the end-to-end latency: {}",
        doc["end_to_end"]
    );
    assert_eq!(doc["faults"][0]["kind"], "pause-broker");
}
