//! `--slo` as a CI gate: a condition met gives exit 0, one missed exit 3, with a table of each
//! condition and its measured value, and the checks in the result document; a bad condition is an
//! error naming `--slo` (exit 2) before anything runs.

use std::time::Duration;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn slo_conditions_gate_the_exit_code() {
    let broker = TestBroker::start();
    let dir = TempDir::new("slo");
    let produce = |slo: &str, name: &str| {
        let json = dir.path().join(name);
        let out = Cmd::on("produce", &broker)
            .args(&["--num-records", "20000", "--acks", "1", "--slo", slo])
            .topic("slo")
            .json(&json)
            .run(LIMIT);
        (out, result_json(&json))
    };
    let (out, doc) = produce("p99<60s,failed==0,records_per_sec>1", "pass.json");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("p99<60s") && stdout.contains("pass"),
        "{stdout}"
    );
    assert_eq!(doc["slo"]["passed"], true);
    assert_eq!(doc["slo"]["checks"].as_array().unwrap().len(), 3);
    let measured = doc["slo"]["checks"][2]["measured"].as_f64().unwrap();
    assert!(
        (measured - doc["records_per_sec"].as_f64().unwrap()).abs() < 1e-6,
        "{doc}"
    );

    let (out, doc) = produce("records_per_sec>1e12,p50<1us", "fail.json");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("FAIL"));
    assert_eq!(doc["slo"]["passed"], false);
    assert_eq!(doc["records_failed"], 0, "the run itself was fine");

    // Consume: its p99 is the Fetch latency.
    let json = dir.path().join("consume.json");
    let out = Cmd::on("consume", &broker)
        .args(&[
            "--messages",
            "20000",
            "--slo",
            "records_consumed==20000,p99<60s",
        ])
        .topic("slo")
        .json(&json)
        .run(LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["slo"]["checks"][1]["figure"], "fetch_latency.p99");

    for (cmd, slo, said) in [
        ("produce", "p99<20", "unit"),
        ("produce", "lost==0", "not a figure of a produce run"),
        ("consume", "throughput>1", "not a figure of a consume run"),
        ("e2e", "p99<<1ms", "not a duration"),
    ] {
        let out = Cmd::on(cmd, &broker).args(&["--slo", slo]).run(LIMIT);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd} {slo}: {err}");
        assert!(
            err.contains("--slo") && err.contains(said),
            "{cmd} {slo}: {err}"
        );
    }
}
