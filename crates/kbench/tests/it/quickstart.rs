//! `kbench quickstart` on a machine with no cluster: embedded broker, topic, produce, summary, and the
//! path of the result document it wrote.

use std::process::Stdio;

use crate::common::*;

#[test]
fn quickstart_runs_against_the_embedded_broker_and_writes_its_result() {
    let dir = TempDir::new("quickstart");
    let out = kbench()
        .current_dir(dir.path())
        .args(["quickstart", "--duration", "2s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("embedded Tansu broker"));
    assert!(stdout.contains("Summary"), "{stdout}");
    assert!(stdout.contains("ms 99.9th."), "{stdout}");
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Result document: "))
        .expect("the summary names the result file");
    assert!(path.starts_with("kbench-results/quickstart-"), "{path}");
    let doc = result_json(&dir.path().join(path));
    assert!(doc["records_acked"].as_u64().unwrap() > 0);
    assert_eq!(doc["records_failed"], 0);
    assert_eq!(doc["records_sent"], doc["records_acked"]);
    assert_eq!(doc["settings"]["duration_s"], 2.0, "the planned duration");
    // The duration ends the run: no record count, rather than u64::MAX.
    assert_eq!(doc["settings"]["num_records"], serde_json::Value::Null);
    assert_eq!(doc["settings"]["acks"], "1");
    assert_eq!(doc["target"]["embedded_broker"], true);
}
