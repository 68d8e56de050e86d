//! Open loop, honestly: a throttled run measures latency from each record's intended send time, so a
//! broker pause shows in it (and in the publish delay), where a measurement from the actual send
//! (closed loop, `service_time`) hides it; a rate the run cannot sustain is said, and called the
//! generator's saturation only when kbench, not the cluster, set the pace.

use std::time::Duration;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(120);

fn us(doc: &serde_json::Value, summary: &str, q: &str) -> u64 {
    doc[summary][q]
        .as_u64()
        .unwrap_or_else(|| panic!("{summary}.{q} in {doc}"))
}

#[test]
fn a_broker_pause_shows_in_latency_from_the_intended_time_not_in_service_time() {
    let broker = TestBroker::start();
    let dir = TempDir::new("open-loop-pause");
    let json = dir.path().join("paused.json");
    let pid = broker.pid() as i32;
    // The pause begins at the second progress line (the run under way, well before its 8 s end)
    // and lasts 1.5 s, as this thread measured it; the bounds below follow from that pause and the
    // schedule, not from the machine's speed.
    let mut lines = 0;
    let mut pause = Duration::ZERO;
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--throughput",
            "2000",
            "--num-records",
            "16000",
            "--acks",
            "1",
            "--record-size",
            "100",
            "--reporting-interval",
            "1000",
        ])
        .topic("paused")
        .json(&json)
        .run_watching(LIMIT, |line| {
            if line.contains("records sent") {
                lines += 1;
                if lines == 2 {
                    let at = std::time::Instant::now();
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                    std::thread::sleep(Duration::from_millis(1500));
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                    pause = at.elapsed();
                }
            }
        });
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(lines >= 2, "the run printed {lines} progress lines");
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 16000);
    // About 3 000 records (19 % of the schedule) were due during the pause, the first of them
    // waiting it out whole: from their intended time they saw it (the top 10 % waited at least
    // ~0.45 of it), from their request's send they did not.
    let pause_us = pause.as_micros() as u64;
    let latency_p90 = us(&doc, "latency", "p90");
    let delay_p90 = us(&doc, "publish_delay", "p90");
    let service_p90 = us(&doc, "service_time", "p90");
    assert!(
        latency_p90 > pause_us / 4,
        "latency p90 {latency_p90} µs, pause {pause_us} µs: {doc}"
    );
    assert!(
        delay_p90 > pause_us / 5,
        "publish delay p90 {delay_p90} µs, pause {pause_us} µs"
    );
    assert!(
        service_p90 < latency_p90,
        "service time p90 {service_p90} µs vs latency p90 {latency_p90} µs"
    );
    assert!(
        us(&doc, "latency", "max") >= pause_us * 8 / 10,
        "the tail holds the pause ({pause_us} µs): {doc}"
    );
    // The schedule caught up after the pause: not saturated.
    assert_eq!(doc["saturation"]["saturated"], false, "{doc}");
}

#[test]
fn a_rate_beyond_reach_is_said_and_blamed_on_whoever_set_the_pace() {
    let broker = TestBroker::start();
    let dir = TempDir::new("open-loop-saturated");
    let run = |rate: &str, records: &str, name: &str| {
        let json = dir.path().join(name);
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--throughput",
                rate,
                "--num-records",
                records,
                "--acks",
                "1",
            ])
            .topic(name)
            .json(&json)
            .run(LIMIT);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stdout), result_json(&json))
    };
    // Far beyond the broker's reach, the records wait for the broker to answer: the rate is not
    // sustained and the run says so, but the cluster set the pace, not kbench (which has CPU to
    // spare), so it is no saturation of the generator.
    let (stdout, doc) = run("1000000000", "3000000", "beyond");
    // 3 M records due within 3 ms: the last went out about the whole run behind its schedule.
    let final_ms = doc["saturation"]["final_publish_delay_ms"]
        .as_f64()
        .unwrap();
    let run_ms = doc["duration_s"].as_f64().unwrap() * 1000.0;
    assert!(
        final_ms >= run_ms / 2.0,
        "final delay {final_ms} ms of a {run_ms} ms run"
    );
    let cpu_share = doc["saturation"]["cpu_share"].as_f64().unwrap();
    if cpu_share < 0.9 {
        assert_eq!(doc["saturation"]["saturated"], false, "{doc}");
        assert!(
            doc["saturation"]["paced_by_cluster"]
                .as_str()
                .is_some_and(|n| n.contains("not sustained")),
            "{}",
            doc["saturation"]
        );
        assert!(
            stdout.contains("NOTE: the target rate was not sustained"),
            "{stdout}"
        );
    } else {
        // A busy machine can make kbench the limit after all: then it says so.
        assert!(
            stdout.contains("WARNING: load generator saturated"),
            "{stdout}"
        );
    }
    let (stdout, doc) = run("1000", "3000", "within");
    // Within reach: the schedule held, so neither the generator nor the cluster is said to have
    // set the pace.
    assert_eq!(doc["saturation"]["saturated"], false, "{doc}");
    assert!(
        doc["saturation"]["paced_by_cluster"].is_null(),
        "{}",
        doc["saturation"]
    );
    assert!(!stdout.contains("saturated"), "{stdout}");
    assert!(!stdout.contains("not sustained"), "{stdout}");
}

/// `--find-max-rate`: every step is reported, and the chosen rate is the highest target a step kept
/// up with (never one above a step that did not).
#[test]
fn find_max_rate_chooses_the_highest_rate_a_step_kept_up_with() {
    let broker = TestBroker::start();
    let dir = TempDir::new("max-rate");
    let json = dir.path().join("max.json");
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--find-max-rate",
            "--step-duration",
            "1s",
            "--max-steps",
            "5",
            "--acks",
            "1",
        ])
        .topic("max-rate")
        .json(&json)
        .run(LIMIT);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("Step ").count(), 5, "{stdout}");
    assert!(stdout.contains("Maximum sustainable rate: "), "{stdout}");
    let doc = result_json(&json);
    let steps = doc["max_rate"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    let chosen = doc["max_rate"]["chosen_records_per_sec"].as_f64().unwrap();
    let kept: Vec<f64> = steps
        .iter()
        .filter(|s| s["kept_up"] == true)
        .map(|s| s["target_records_per_sec"].as_f64().unwrap())
        .collect();
    let missed: Vec<f64> = steps
        .iter()
        .filter(|s| s["kept_up"] == false)
        .map(|s| s["target_records_per_sec"].as_f64().unwrap())
        .collect();
    assert_eq!(chosen, kept.iter().cloned().fold(0.0, f64::max), "{doc}");
    assert!(missed.iter().all(|m| *m > chosen), "{doc}");
    // Every step kept up: the figure is a lower bound and says so; else it is the limit.
    assert_eq!(doc["max_rate"]["limit_found"], !missed.is_empty(), "{doc}");
    assert_eq!(
        stdout.contains("Maximum sustainable rate: at least "),
        missed.is_empty(),
        "{stdout}"
    );
    assert_eq!(
        doc["settings"]["throughput"].as_f64(),
        Some(chosen),
        "the chosen step's result"
    );
    let out = Cmd::on("produce", &broker)
        .args(&["--find-max-rate", "--throughput", "1000"])
        .run(LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--throughput"),
        "{}",
        text(&out.stderr)
    );
}

/// Load shapes schedule exactly their integral: steps of 2000 then 6000 records/s for 2 s each send
/// 16000 records and the later windows carry more; a scenario with a ramp and a pause sends its
/// integral too; bad shapes get one error naming the flag (and, for a file, the line).
#[test]
fn load_shapes_send_their_schedule() {
    let broker = TestBroker::start();
    let dir = TempDir::new("open-loop-shapes");
    let json = dir.path().join("steps.json");
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--steps",
            "2000,6000/s every 2s",
            "--reporting-interval",
            "1000",
        ])
        .topic("shape-steps")
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 16_000, "{doc}");
    assert_eq!(
        doc["settings"]["shape"]["phases"].as_array().unwrap().len(),
        2
    );
    let windows: Vec<u64> = text(&out.stdout)
        .lines()
        .filter(|l| l.contains("records sent,") && l.ends_with("max latency."))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(windows.len() >= 3, "{windows:?}");
    assert!(
        windows[windows.len() - 1] > windows[0],
        "the 6000/s step's window carries more than the 2000/s one's: {windows:?}"
    );

    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        "phases:\n  - ramp: 0..4000\n    duration: 2s\n  - rate: 0\n    duration: 1s\n  - rate: 1000\n    duration: 1s\n",
    )
    .unwrap();
    let json = dir.path().join("scenario.json");
    Cmd::on("produce", &broker)
        .args(&["--scenario", scenario.to_str().unwrap()])
        .topic("shape-scenario")
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(
        doc["records_acked"], 5_000,
        "4000 on the ramp, 1000 after the pause"
    );
    assert_eq!(doc["saturation"]["saturated"], false);

    std::fs::write(&scenario, "phases:\n  - rate: 100\n    duraton: 1s\n").unwrap();
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--scenario", scenario.to_str().unwrap()],
            &["--scenario", "duraton", "line 3"],
        ),
        (&["--ramp", "0..100/s"], &["--ramp", "over"]),
        (&["--steps", "100,-5/s every 1s"], &["--steps", "-5"]),
        (&["--bursts", "100/s for 1s every 5s"], &["--throughput"]),
    ];
    for (flags, wanted) in cases {
        let out = Cmd::on("produce", &broker).args(flags).run(LIMIT);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        for w in wanted {
            assert!(stderr.contains(w), "{flags:?}: {w:?} not in {stderr}");
        }
    }
}

/// e2e is open loop too: each record's publish delay (its batch's scheduled time → request sent) is
/// reported; a broker paused for 1.5 s makes batches come late (the in-flight slots fill) — the
/// cluster's slip, counted as such and never flagged as the generator's saturation — while an
/// unpaused run has no slip at all.
#[test]
fn e2e_reports_publish_delay_and_a_slip_the_cluster_caused() {
    let broker = TestBroker::start();
    let dir = TempDir::new("open-loop-e2e");
    let run = |name: &str, pause: bool| {
        let json = dir.path().join(format!("{name}.json"));
        let pid = broker.pid() as i32;
        let mut lines = 0;
        // The pause starts at the third progress line (well after the consumer joined, well
        // before the 8 s load ends) and lasts until the fourth.
        let out = Cmd::on("e2e", &broker)
            .args(&[
                "--duration",
                "8s",
                "--batch-interval",
                "50ms",
                "--messages-per-batch",
                "10",
                "--reporting-interval",
                "1s",
            ])
            .topic(&format!("e2e-{name}"))
            .json(&json)
            .run_watching(LIMIT, |line| {
                if pause && line.contains("acked") {
                    lines += 1;
                    match lines {
                        3 => unsafe {
                            libc::kill(pid, libc::SIGSTOP);
                        },
                        4 => std::thread::sleep(Duration::from_millis(500)),
                        _ => {}
                    }
                    if lines == 4 {
                        unsafe { libc::kill(pid, libc::SIGCONT) };
                    }
                }
            });
        unsafe { libc::kill(pid, libc::SIGCONT) };
        assert!(out.status.success(), "{}", text(&out.stderr));
        (result_json(&json), lines)
    };
    let (calm, _) = run("calm", false);
    assert_eq!(
        calm["saturation"]["saturated"], false,
        "{}",
        calm["saturation"]
    );
    assert_eq!(calm["schedule_slips"], 0);
    assert_eq!(calm["cluster_slips"], 0);
    assert_eq!(
        calm["publish_delay"]["count"], calm["records_produced"],
        "a publish delay per record"
    );
    let (paused, lines) = run("paused", true);
    assert!(lines >= 4, "the run printed {lines} progress lines");
    assert_eq!(
        paused["saturation"]["saturated"], false,
        "a paused broker is the cluster's time: {}",
        paused["saturation"]
    );
    assert_eq!(paused["schedule_slips"], 0, "{paused}");
    assert!(paused["cluster_slips"].as_u64().unwrap() >= 1, "{paused}");
    assert!(
        us(&paused, "publish_delay", "max") >= 1_000_000,
        "the pause shows in the publish delay: {}",
        paused["publish_delay"]
    );
}

/// A broker frozen for good mid-run (SIGSTOP, never resumed) never vanishes from an open-loop
/// run's figures: every record the schedule asked for is sent or counted unsent, the unsent ones'
/// waits to the end are in the latency histogram (the tail shows the stall), the run says which
/// broker stopped answering, and it is not called the generator's saturation. On the upstream Tansu
/// binary and the embedded broker.
#[test]
fn a_broker_that_stops_answering_shows_in_the_tail_and_every_scheduled_record_is_counted() {
    for kind in BROKERS {
        let broker = TestBroker::of(kind);
        let dir = TempDir::new("open-loop-stall");
        let json = dir.path().join("stalled.json");
        let pid = broker.pid() as i32;
        let mut lines = 0;
        let out = Cmd::on("produce", &broker)
            .args(&[
                "--throughput",
                "20000",
                "--duration",
                "8s",
                "--record-size",
                "100",
                "--reporting-interval",
                "1s",
            ])
            .topic("stalled")
            .json(&json)
            .run_watching(LIMIT, |line| {
                if line.contains("records sent") {
                    lines += 1;
                    if lines == 3 {
                        unsafe { libc::kill(pid, libc::SIGSTOP) };
                    }
                }
            });
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let doc = result_json(&json);
        let stdout = text(&out.stdout);
        // 8 s at 20 000 records/s: records 0..160 000 were due.
        let (sent, acked, failed, unsent) = (
            n(&doc, "records_sent"),
            n(&doc, "records_acked"),
            n(&doc, "records_failed"),
            n(&doc, "records_unsent"),
        );
        assert_eq!(sent, acked + failed, "{kind:?}: {doc}");
        assert_eq!(
            sent + unsent,
            160_000,
            "{kind:?}: sent {sent} + unsent {unsent}"
        );
        assert!(
            unsent > 50_000,
            "{kind:?}: about 5 s of the schedule: {unsent}"
        );
        // The first records held back waited about 5 s to the end.
        assert!(
            us(&doc, "latency", "max") >= 4_000_000,
            "{kind:?}: the tail shows the stall: {}",
            doc["latency"]
        );
        assert_eq!(
            doc["saturation"]["saturated"], false,
            "{kind:?}: {}",
            doc["saturation"]
        );
        assert!(
            stdout.contains(&format!("no answer from {}", broker.addr))
                || doc["cluster"]["stalls"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s["ongoing"] == true)),
            "{kind:?}: {stdout}\n{}",
            doc["cluster"]
        );
        assert!(stdout.contains("no answer from"), "{kind:?}: {stdout}");
        assert!(stdout.contains("never sent"), "{kind:?}: {stdout}");
    }
}

/// A broker killed under a long run (SIGKILL: every connection refused from then on) ends the run
/// at `delivery.timeout.ms` — records failed with that reason, the rest counted unsent — instead
/// of going on for the whole schedule, and it is never called the generator's saturation.
#[test]
fn a_killed_broker_ends_the_run_at_the_delivery_timeout_without_blaming_the_generator() {
    let mut broker = TestBroker::standalone();
    let dir = TempDir::new("open-loop-killed");
    let json = dir.path().join("killed.json");
    let mut lines = 0;
    let out = Cmd::on("produce", &broker)
        .args(&[
            "--throughput",
            "20000",
            "--num-records",
            "10000000",
            "--record-size",
            "100",
            "--reporting-interval",
            "1s",
            "-X",
            "request.timeout.ms=2000",
            "-X",
            "delivery.timeout.ms=3000",
        ])
        .topic("killed")
        .json(&json)
        .run_watching(LIMIT, |line| {
            if line.contains("records sent") {
                lines += 1;
                if lines == 2 {
                    broker.kill();
                }
            }
        });
    let doc = result_json(&json);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no broker answered"), "{stderr}");
    assert!(
        doc["aborted"]
            .as_str()
            .is_some_and(|a| a.contains("delivery.timeout.ms")),
        "{}",
        doc["aborted"]
    );
    let (sent, acked, failed) = (
        n(&doc, "records_sent"),
        n(&doc, "records_acked"),
        n(&doc, "records_failed"),
    );
    assert_eq!(sent, acked + failed, "{doc}");
    assert!(failed > 0, "{doc}");
    assert!(
        doc["errors"].to_string().contains("delivery.timeout.ms"),
        "{}",
        doc["errors"]
    );
    // The run ended long before its schedule: most records were never due.
    assert!(sent + n(&doc, "records_unsent") < 1_000_000, "{doc}");
    assert_eq!(
        doc["saturation"]["saturated"], false,
        "{}",
        doc["saturation"]
    );
    assert!(!text(&out.stdout).contains("saturated"));
}
