//! `kbench compare`: verdicts on synthetic result pairs with known differences, a file compared with
//! itself, and the KAFKA-3565 shape end to end (the same produce benchmark, none and snappy, against
//! two targets, compared per compression).

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

/// A codec result document whose cells have the given per-repetition ns/record samples.
fn codec_doc(cells: &[(&str, Vec<f64>)]) -> serde_json::Value {
    serde_json::json!({
        "schema_version": 1,
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
        &serde_json::json!({"kind": "produce", "settings": {}, "repetitions": []}),
    );
    let out = run(
        &["compare", a.to_str().unwrap(), b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot compare codec results with produce results"));
}

#[test]
fn kafka_3565_shape_compares_none_and_snappy_across_two_targets() {
    let dir = std::env::temp_dir().join(format!("kbench-3565-{}", std::process::id()));
    for side in ["a", "b"] {
        let folder = dir.join(side);
        std::fs::create_dir_all(&folder).unwrap();
        // Each run starts its own embedded broker: two targets, the same benchmark.
        for codec in ["none", "snappy"] {
            let json = folder.join(format!("{codec}.json"));
            let out = run(
                &[
                    "produce",
                    "--num-records",
                    "50000",
                    "--record-size",
                    "100",
                    "--acks",
                    "1",
                    "--compression",
                    codec,
                    "--repetitions",
                    "3",
                    "--json",
                    json.to_str().unwrap(),
                ],
                Duration::from_secs(120),
            );
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_eq!(
                text(&out.stdout).matches("ms 99.9th.").count(),
                3,
                "three repetitions"
            );
        }
    }
    let md = dir.join("compare.md");
    let out = run(
        &[
            "compare",
            dir.join("a").to_str().unwrap(),
            dir.join("b").to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    let stdout = text(&out.stdout);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        text(&out.stderr)
    );
    for codec in ["none", "snappy"] {
        let row = stdout
            .lines()
            .find(|l| l.contains(&format!("compression={codec} ")) && l.contains("records_per_sec"))
            .unwrap_or_else(|| panic!("no records/s row for {codec}:\n{stdout}"));
        assert!(
            ["| regression |", "| improvement |", "| inside noise |"]
                .iter()
                .any(|v| row.ends_with(v)),
            "{row}"
        );
    }
    let regressed = stdout.lines().any(|l| l.ends_with("| regression |"));
    assert_eq!(
        out.status.code() == Some(1),
        regressed,
        "exit 1 exactly when something regressed"
    );
    assert_eq!(std::fs::read_to_string(md).unwrap(), stdout);
}
