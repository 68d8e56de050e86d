//! `kbench compare`: verdicts on synthetic result pairs with known differences, a file compared with
//! itself, and the KAFKA-3565 shape end to end (the same produce benchmark, none and snappy, against
//! two targets, compared per compression).

use std::path::Path;
use std::time::Duration;

use crate::common::*;

/// A codec result document whose cells have the given per-repetition ns/record samples.
fn codec_doc(cells: &[(&str, Vec<f64>)]) -> serde_json::Value {
    serde_json::json!({
        "schema_version": kbench_bench::SCHEMA_VERSION,
        "kind": "codec",
        "cells": cells.iter().map(|(label, reps)| serde_json::json!({
            "label": label, "skipped": null, "ns_per_record_reps": reps,
        })).collect::<Vec<_>>(),
    })
}

fn around(center: f64, n: usize, wobble: f64) -> Vec<f64> {
    // A fixed, symmetric spread around the centre.
    (0..n)
        .map(|i| center * (1.0 + wobble * ((i as f64 / (n - 1) as f64) * 2.0 - 1.0)))
        .collect()
}

fn write(path: &Path, doc: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string(doc).unwrap()).unwrap();
}

fn line_for<'a>(stdout: &'a str, cell: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(cell))
        .unwrap_or_else(|| panic!("no row for {cell}:\n{stdout}"))
}

#[test]
fn known_regression_improvement_and_noise_get_their_verdicts() {
    let dir = std::env::temp_dir().join(format!("kbench-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    write(
        &a,
        &codec_doc(&[
            ("regressed", around(100.0, 9, 0.02)),
            ("improved", around(100.0, 9, 0.02)),
            ("noisy", around(100.0, 9, 0.30)),
        ]),
    );
    write(
        &b,
        &codec_doc(&[
            ("regressed", around(120.0, 9, 0.02)),
            ("improved", around(80.0, 9, 0.02)),
            ("noisy", around(104.0, 9, 0.30)),
        ]),
    );
    let out = run(
        &["compare", a.to_str().unwrap(), b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a regression exits 1:\n{stdout}"
    );
    assert!(
        line_for(&stdout, "codec regressed").ends_with("| regression |"),
        "{stdout}"
    );
    assert!(
        line_for(&stdout, "codec improved").ends_with("| improvement |"),
        "{stdout}"
    );
    assert!(
        line_for(&stdout, "codec noisy").ends_with("| inside noise |"),
        "{stdout}"
    );

    let out = run(
        &["compare", a.to_str().unwrap(), a.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for cell in ["regressed", "improved", "noisy"] {
        assert!(
            line_for(&stdout, cell).ends_with("| inside noise |"),
            "{stdout}"
        );
    }
}

#[test]
fn mismatched_or_missing_inputs_are_clear_errors() {
    let out = run(
        &["compare", "/nonexistent/a.json", "/nonexistent/b.json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/a.json"));
    let dir = std::env::temp_dir().join(format!("kbench-compare-kind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    write(&a, &codec_doc(&[("x", around(1.0, 9, 0.1))]));
    write(
        &b,
        &serde_json::json!({"schema_version": 3, "kind": "produce", "settings": {}, "repetitions": []}),
    );
    let out = run(
        &["compare", a.to_str().unwrap(), b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot compare codec results with produce results"));
}

/// The KAFKA-3565 shape end to end: the same produce benchmark, none and snappy, 3 repetitions each,
/// written by kbench itself and compared per compression. Compared with itself every figure is
/// inside the noise (exit 0); against a copy whose records/s were cut tenfold, records/s regressed (exit
/// 1), and nothing else moved.
#[test]
fn kafka_3565_shape_compares_none_and_snappy_across_two_targets() {
    let dir = TempDir::new("3565");
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    for codec in ["none", "snappy"] {
        let json = a.join(format!("{codec}.json"));
        let out = Cmd::new("produce")
            .args(&[
                "--num-records",
                "50000",
                "--record-size",
                "100",
                "--acks",
                "1",
            ])
            .args(&["--compression", codec, "--repetitions", "3"])
            .arg("--json")
            .arg(json.to_str().unwrap())
            .ok(Duration::from_secs(120));
        assert_eq!(
            text(&out.stdout).matches("ms 99.9th.").count(),
            3,
            "three repetitions"
        );
        // B: the same run with a tenth of the records/s in every repetition (a tenfold drop lies
        // outside any spread the three repetitions can have).
        let mut doc = result_json(&json);
        for rep in doc["repetitions"].as_array_mut().unwrap() {
            rep["records_per_sec"] =
                serde_json::json!(rep["records_per_sec"].as_f64().unwrap() / 10.0);
        }
        write(&b.join(format!("{codec}.json")), &doc);
    }
    let compare = |x: &Path, y: &Path| {
        Cmd::new("compare")
            .args(&[x.to_str().unwrap(), y.to_str().unwrap()])
            .run(Duration::from_secs(30))
    };
    let rows = |stdout: &str, metric: &str| -> Vec<String> {
        ["none", "snappy"]
            .iter()
            .map(|codec| {
                stdout
                    .lines()
                    .find(|l| l.contains(&format!("compression={codec} ")) && l.contains(metric))
                    .unwrap_or_else(|| panic!("no {metric} row for {codec}:\n{stdout}"))
                    .to_string()
            })
            .collect()
    };
    let same = compare(&a, &a);
    let stdout = text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{stdout}");
    for row in rows(&stdout, "records_per_sec") {
        assert!(row.ends_with("| inside noise |"), "{row}");
    }
    // No failed record in any repetition on either side: identical, not "too few repetitions".
    for row in rows(&stdout, "records_failed") {
        assert!(row.ends_with("| identical |"), "{row}");
    }
    assert!(!stdout.contains("too few repetitions"), "{stdout}");
    let md = dir.path().join("compare.md");
    let cut = Cmd::new("compare")
        .args(&[a.to_str().unwrap(), b.to_str().unwrap()])
        .args(&["--markdown", md.to_str().unwrap()])
        .run(Duration::from_secs(30));
    let stdout = text(&cut.stdout);
    assert_eq!(
        cut.status.code(),
        Some(1),
        "a regression exits 1:\n{stdout}"
    );
    for row in rows(&stdout, "records_per_sec") {
        assert!(row.ends_with("| regression |"), "{row}");
    }
    for row in rows(&stdout, "client_cpu_us_per_record") {
        assert!(row.ends_with("| inside noise |"), "{row}");
    }
    assert_eq!(std::fs::read_to_string(md).unwrap(), stdout);
}

/// The document gate (`kbench_bench::document`): a records/s of −1e300, an unknown kind, a schema
/// version from the future and a figure that is a string are each refused by `compare` and by
/// `report` with one error naming the file and the field, exit 2 — never compared or rendered.
#[test]
fn documents_that_are_not_runs_are_refused_by_compare_and_report() {
    let dir = TempDir::new("gate");
    let good = dir.path().join("good.json");
    write(&good, &codec_doc(&[("x", around(1.0, 9, 0.1))]));
    let cases: [(&str, serde_json::Value, &str); 5] = [
        (
            "negative.json",
            codec_doc(&[("x", vec![1.0, 1.0, -1e300])]),
            "cells[0].ns_per_record_reps[2]",
        ),
        (
            "nonsense.json",
            serde_json::json!({"schema_version": 3, "kind": "nonsense"}),
            "\"nonsense\"",
        ),
        (
            "older.json",
            serde_json::json!({"schema_version": 2, "kind": "codec", "cells": []}),
            "\"schema_version\" is 2: this kbench reads version 3",
        ),
        (
            "future.json",
            serde_json::json!({"schema_version": 999, "kind": "codec", "cells": []}),
            "999",
        ),
        (
            "fast.json",
            serde_json::json!({"schema_version": 3, "kind": "produce", "settings": {},
                               "repetitions": [{"records_per_sec": "fast"}]}),
            "repetitions[0].records_per_sec",
        ),
    ];
    for (name, doc, field) in cases {
        let bad = dir.path().join(name);
        write(&bad, &doc);
        let html = dir.path().join("r.html");
        let (good, bad, page) = (
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
            html.to_str().unwrap(),
        );
        for args in [
            &["compare", good, bad][..],
            &["report", bad, "-o", page][..],
        ] {
            let out = run(args, Duration::from_secs(30));
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{} {name}: {err}", args[0]);
            assert!(
                err.contains(name) && err.contains(field),
                "{} {name}: {err}",
                args[0]
            );
        }
        assert!(!html.exists(), "report {name} wrote a page");
    }
}
