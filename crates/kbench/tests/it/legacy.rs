//! Tier 2 against a legacy broker: librdkafka's mock cluster narrowed to Apache Kafka 1.1.0's
//! version ranges (`Mock::kafka_1_1`), where a client negotiates Produce v5 and Fetch v7 unaided.
//! The test runs the step `kbench suite --legacy-bootstrap-server` runs for tier 2 (`kbench sweep
//! --no-pin --quick --bootstrap-server …`, see `StepCommand` in `cmd/suite.rs`) on its own: the
//! suite first runs tier 0 and both tier-1 sweeps on embedded brokers, minutes more, and its order
//! is `sweep::suite_runs_every_tier_in_order_and_writes_a_summary`'s to test.

use std::time::Duration;

use crate::common::{Cmd, TempDir, n, result_json, text};
use crate::mock::Mock;

#[test]
fn tier_2_against_kafka_1_1_negotiates_produce_v5_and_fetch_v7_and_records_it() {
    let mock = Mock::new(1).kafka_1_1();
    let dir = TempDir::new("legacy");
    let (json, md) = (dir.path().join("legacy.json"), dir.path().join("legacy.md"));
    let out = Cmd::new("sweep")
        .args(&[
            "--no-pin",
            "--quick",
            "--seed",
            "11",
            "--bootstrap-server",
            &mock.bootstrap,
            "--markdown",
            md.to_str().unwrap(),
        ])
        .json(&json)
        .run(Duration::from_secs(300));
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "sweep");
    // Unpinned, and said so: in the settings and on the tables' first line.
    assert_eq!(doc["settings"]["no_pin"], true);
    let tables = std::fs::read_to_string(&md).unwrap();
    assert!(
        tables.starts_with("Tier 2 sanity run — not comparable"),
        "{tables}"
    );
    // The highest versions Kafka 1.1 and kbench share, chosen unaided.
    assert_eq!(doc["settings"]["produce_versions"], serde_json::json!([5]));
    assert_eq!(doc["settings"]["fetch_versions"], serde_json::json!([7]));
    for guard in [
        "negotiated_equals_pin",
        "records_read_equal_seeded",
        "timestamps_from_clock",
        "no_protocol_anomalies",
    ] {
        assert_eq!(doc["guards"][guard], true, "{guard}: {}", doc["guards"]);
    }
    let cells = doc["cells"].as_array().unwrap();
    let count = |api: &str| cells.iter().filter(|c| c["cell"]["api"] == api).count();
    assert_eq!((count("produce"), count("fetch")), (6, 3), "every cell ran");
    for c in cells {
        let label = &c["label"];
        assert_eq!(c["status"], "completed", "{label}: {}", c["status"]);
        let (api, version) = if c["cell"]["api"] == "produce" {
            ("Produce", 5)
        } else {
            ("Fetch", 7)
        };
        assert_eq!(c["negotiated"], version, "{label}");
        let used = &c["negotiated_versions"];
        assert_eq!(used[api], version, "{label}: {used}");
        // kbench asks ApiVersions v3 first; Kafka 1.1 knows v0–v1, and the fallback lands on v1.
        assert_eq!(used["ApiVersions"], 1, "{label}: {used}");
        let metadata = used["Metadata"].as_i64().expect("Metadata used");
        assert!(metadata <= 5, "{label}: {used}");
        let reps = c["reps"].as_array().unwrap();
        assert_eq!(reps.len(), 3, "{label}");
        assert!(
            reps.iter().all(|r| n(r, "messages") > 0),
            "{label}: {reps:?}"
        );
    }
    assert!(
        tables.contains(
            "Versions negotiated by the cells: Produce v5, Fetch v7, Metadata v5, ApiVersions v1"
        ),
        "{tables}"
    );
}
