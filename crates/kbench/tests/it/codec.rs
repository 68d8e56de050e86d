//! `kbench codec`: the tier-0 matrix runs with no broker, reports every version, and writes a
//! result document with its seed and method.

use std::time::Duration;

use crate::common::*;

#[test]
fn quick_run_covers_every_version() {
    let dir = TempDir::new("codec");
    let json = dir.path().join("codec.json");
    let db = dir.file("history.db");
    let out = Cmd::new("codec")
        .args(&["--quick", "--seed", "11", "--store", &db])
        .json(&json)
        .run(Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Each cell is a benchmark of its own in the results store.
    let list = Cmd::new("history")
        .args(&["list", "--store", &db])
        .ok(Duration::from_secs(30));
    let stored = text(&list.stdout).matches(" codec ").count();
    let stdout = text(&out.stdout);
    assert!(stdout.contains(
        "| version | ns/record | vs newest | spread | allocs/record | wire bytes | verdict |"
    ));
    assert!(text(&out.stderr).contains("seed 11"));
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "codec");
    assert_eq!(doc["seed"], 11);
    assert_eq!(doc["allocations_counted"], true);
    let cells = doc["cells"].as_array().unwrap();
    assert!(
        stored >= 11 + 15,
        "a benchmark per version at least: {}",
        text(&list.stdout)
    );
    for (api, versions) in [("produce", 3..=13), ("fetch", 4..=18)] {
        for v in versions {
            let n = cells
                .iter()
                .filter(|c| c["spec"]["api"] == api && c["spec"]["version"] == v)
                .count();
            assert_eq!(n, 3, "{api} v{v}: one cell per record count");
        }
    }
    for c in cells {
        assert!(c["skipped"].is_null(), "{}", c["label"]);
        assert_eq!(
            c["ns_per_record_reps"].as_array().unwrap().len(),
            9,
            "{}",
            c["label"]
        );
        // The figure is the median of the repetitions, not a constant.
        let mut reps: Vec<f64> = c["ns_per_record_reps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_f64().unwrap())
            .collect();
        reps.sort_by(f64::total_cmp);
        assert_eq!(c["ns_per_record"].as_f64(), Some(reps[4]), "{}", c["label"]);
        assert!(c["allocs_per_record"].is_f64());
    }
    // kbench's batch encoder and decoder allocate nothing per record (nor per batch: at one record
    // per batch, a per-batch allocation would show as 1.0; a one-off in the whole run is ~1e-5).
    for c in cells
        .iter()
        .filter(|c| c["spec"]["subject"] == "kbench_batch")
    {
        assert!(
            c["allocs_per_record"].as_f64().unwrap() < 1e-3,
            "{}",
            c["label"]
        );
    }
}

#[test]
fn isolated_cells_run_in_child_processes_and_zstd_below_its_versions_is_not_applicable() {
    let out = Cmd::new("codec")
        .args(&[
            "--isolate",
            "--api",
            "produce",
            "--records",
            "10",
            "--shape",
            "small",
            "--compression",
            "zstd",
            "--block-records",
            "1000",
        ])
        .run(Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for v in 3..=6 {
        assert!(
            stdout.contains(&format!(
                "| v{v} | – | – | – | – | – | n/a: zstd needs Produce v7+ |"
            )),
            "{stdout}"
        );
    }
    assert!(stdout.contains("| v7 | "), "{stdout}");
    assert!(text(&out.stderr).contains("each cell in its own process"));
}

#[test]
fn codec_flags_are_checked() {
    for (args, names) in [
        (&["codec", "--repetitions", "3"][..], "--repetitions"),
        (&["codec", "--shape", "huge"][..], "--shape"),
        (&["codec", "--api", "metadata"][..], "--api"),
        (&["codec", "--records", "0"][..], "--records"),
    ] {
        let out = run(args, Duration::from_secs(30));
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(names),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
