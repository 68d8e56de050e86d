//! `kbench sweep` against the embedded broker: every shared version's cells complete with their pin
//! held and the guards passing; a cell that cannot be pinned is an error, never a number.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn quick_sweep_completes_every_produce_and_fetch_cell_with_guards_passing() {
    let dir = std::env::temp_dir().join(format!("kbench-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, md) = (dir.join("sweep.json"), dir.join("sweep.md"));
    let out = run(
        &[
            "sweep",
            "--quick",
            "--seed",
            "3",
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("seed 3 — vary it with --seed"));
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "sweep");
    assert_eq!(doc["seed"], 3);
    assert_eq!(doc["guards"]["negotiated_equals_pin"], true);
    assert_eq!(doc["guards"]["records_read_equal_seeded"], true);
    assert_eq!(doc["guards"]["timestamps_from_clock"], true);
    assert_eq!(
        doc["guards"]["conversions"], "not checked",
        "never a silent 0"
    );
    let cells = doc["cells"].as_array().unwrap();
    for (api, versions, per_version) in [("produce", 3..=11, 6), ("fetch", 4..=17, 3)] {
        for v in versions {
            let mine: Vec<_> = cells
                .iter()
                .filter(|c| c["cell"]["api"] == api && c["cell"]["version"] == v)
                .collect();
            assert_eq!(mine.len(), per_version, "{api} v{v}");
            for c in mine {
                assert_eq!(c["status"], "completed", "{}", c["label"]);
                assert_eq!(c["negotiated"], v, "{}", c["label"]);
                assert_eq!(c["reps"].as_array().unwrap().len(), 3, "{}", c["label"]);
                assert!(
                    c["cpu_us_per_msg"].as_f64().unwrap() > 0.0,
                    "{}",
                    c["label"]
                );
            }
        }
    }
    let tables = std::fs::read_to_string(md).unwrap();
    assert!(
        tables.contains("| version | µs/msg | vs newest | msg/s | spread | peak RSS | verdict |")
    );
    assert!(tables.contains("fetch max_bytes=1MiB"));
}

#[test]
fn a_cell_that_cannot_be_pinned_is_an_error_not_a_number() {
    let broker = TestBroker::start();
    let dir = std::env::temp_dir().join(format!("kbench-sweep-pin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("sweep.json");
    // Tansu 0.6 speaks Produce up to v11: v12 cannot be pinned.
    let out = run(
        &[
            "sweep",
            "--quick",
            "--bootstrap-server",
            &broker.addr,
            "--produce-versions",
            "11-12",
            "--fetch-versions",
            "17",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert_eq!(out.status.code(), Some(1), "an incomplete sweep fails");
    let doc = result_json(&json);
    for c in doc["cells"].as_array().unwrap() {
        let v12 = c["cell"]["api"] == "produce" && c["cell"]["version"] == 12;
        if v12 {
            assert!(
                c["status"]["error"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("--pin produce=12"),
                "{c}"
            );
            assert!(
                c["reps"].as_array().unwrap().is_empty(),
                "no figure for an unpinned cell"
            );
            assert_eq!(c["verdict"], "error");
        } else {
            assert_eq!(c["status"], "completed", "{}", c["label"]);
        }
    }
    assert!(text(&out.stdout).contains("| v12 | – | – | – | – | – | error: --pin produce=12"));
}
