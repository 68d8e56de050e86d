//! `kbench sweep` against the embedded broker: every shared version's cells complete with their pin
//! held and the guards passing; a cell that cannot be pinned is an error, never a number.

use std::time::Duration;

use crate::common::*;
use kbench_wire::ApiKey;

#[test]
fn quick_sweep_completes_every_produce_and_fetch_cell_with_guards_passing() {
    let broker = TestBroker::start();
    let produce = broker.shared_versions(ApiKey::Produce);
    let fetch = broker.shared_versions(ApiKey::Fetch);
    let dir = TempDir::new("sweep");
    let (json, md) = (dir.path().join("sweep.json"), dir.path().join("sweep.md"));
    let out = Cmd::new("sweep")
        .args(&[
            "--quick",
            "--seed",
            "3",
            "--bootstrap-server",
            &broker.addr,
            "--markdown",
            md.to_str().unwrap(),
        ])
        .json(&json)
        .run(Duration::from_secs(600));
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
    for (api, versions, per_version) in [("produce", produce, 6), ("fetch", fetch, 3)] {
        for v in versions {
            let mine: Vec<_> = cells
                .iter()
                .filter(|c| c["cell"]["api"] == api && c["cell"]["version"] == v)
                .collect();
            assert_eq!(mine.len(), per_version, "{api} v{v}");
            for c in mine {
                assert_eq!(c["status"], "completed", "{}", c["label"]);
                assert_eq!(c["negotiated"], v, "{}", c["label"]);
                let reps = c["reps"].as_array().unwrap();
                assert_eq!(reps.len(), 3, "{}", c["label"]);
                // The figure is the median of the repetitions, not a constant.
                let mut cpu: Vec<f64> = reps
                    .iter()
                    .map(|r| r["cpu_us_per_msg"].as_f64().unwrap())
                    .collect();
                cpu.sort_by(f64::total_cmp);
                assert_eq!(c["cpu_us_per_msg"].as_f64(), Some(cpu[1]), "{}", c["label"]);
                if api == "fetch" {
                    // kbench's embedded broker answers a 0 ms Fetch: no wait was needed.
                    assert_eq!(c["fetch_max_wait_ms"], 0, "{}", c["label"]);
                }
            }
        }
    }
    let tables = std::fs::read_to_string(md).unwrap();
    assert!(
        tables.contains("| version | µs/msg | vs newest | msg/s | spread | peak RSS | verdict |")
    );
    assert!(tables.contains("fetch max_bytes=1MiB"));
}

/// Against the upstream Tansu binary, which answers a Fetch with max_wait_ms 0 without any topic,
/// every Fetch cell still completes (the cell escalates its wait and says so) and reads every
/// seeded record.
#[test]
fn every_fetch_cell_completes_against_the_standalone_broker() {
    let broker = TestBroker::standalone();
    let dir = TempDir::new("sweep-sa");
    let json = dir.path().join("sweep.json");
    let out = Cmd::new("sweep")
        .args(&[
            "--quick",
            "--api",
            "fetch",
            "--bootstrap-server",
            &broker.addr,
        ])
        .json(&json)
        .run(Duration::from_secs(600));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["guards"]["records_read_equal_seeded"], true);
    let cells = doc["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    for c in cells {
        assert_eq!(c["cell"]["api"], "fetch");
        assert_eq!(c["status"], "completed", "{}: {}", c["label"], c["status"]);
        assert_eq!(c["negotiated"], c["cell"]["version"], "{}", c["label"]);
        assert!(c["fetch_max_wait_ms"].as_i64().unwrap() > 0, "{c}");
    }
}

#[test]
fn a_cell_that_cannot_be_pinned_is_an_error_not_a_number() {
    let broker = TestBroker::start();
    // The broker's newest Produce version, and the one above it, which cannot be pinned.
    let newest = *broker.shared_versions(ApiKey::Produce).end();
    let beyond = newest + 1;
    assert!(
        beyond <= kbench_wire::kbench_range(ApiKey::Produce).max,
        "kbench must speak a Produce version the broker does not"
    );
    let fetch = *broker.shared_versions(ApiKey::Fetch).end();
    let dir = TempDir::new("sweep-pin");
    let json = dir.path().join("sweep.json");
    let out = Cmd::new("sweep")
        .args(&[
            "--quick",
            "--bootstrap-server",
            &broker.addr,
            "--produce-versions",
            &format!("{newest}-{beyond}"),
            "--fetch-versions",
            &fetch.to_string(),
        ])
        .json(&json)
        .run(Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(1), "an incomplete sweep fails");
    let doc = result_json(&json);
    for c in doc["cells"].as_array().unwrap() {
        let unpinnable = c["cell"]["api"] == "produce" && c["cell"]["version"] == beyond;
        if unpinnable {
            assert!(
                c["status"]["error"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("--pin produce={beyond}")),
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
    assert!(text(&out.stdout).contains(&format!(
        "| v{beyond} | – | – | – | – | – | error: --pin produce={beyond}"
    )));
}

/// A Prometheus page served on loopback, as a broker's JMX exporter would; with `moving`, the produce
/// conversion counter grows on every scrape.
fn metrics_server(moving: bool) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for (scrape, stream) in listener.incoming().take(10).enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 2048];
            let _ = stream.read(&mut buf);
            let produce = if moving { scrape * 5 } else { 3 };
            let body = format!(
                "# TYPE kafka_server_brokertopicmetrics_producemessageconversions_total counter\n\
                 kafka_server_brokertopicmetrics_producemessageconversions_total {produce}.0\n\
                 kafka_server_brokertopicmetrics_fetchmessageconversions_total 0.0\n"
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/metrics")
}

fn tiny_sweep(broker: &TestBroker, extra: &[&str], json: &std::path::Path) -> std::process::Output {
    let mut args = vec![
        "sweep",
        "--quick",
        "--bootstrap-server",
        &broker.addr,
        "--produce-versions",
        "11",
        "--fetch-versions",
        "17",
        "--seed",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args, Duration::from_secs(300))
}

#[test]
fn broker_conversions_are_checked_when_a_metrics_page_is_given() {
    let broker = TestBroker::start();
    let dir = TempDir::new("sweep-metrics");

    let json = dir.path().join("still.json");
    let out = tiny_sweep(
        &broker,
        &["--broker-metrics", &metrics_server(false)],
        &json,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let conversions = result_json(&json)["guards"]["conversions"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(conversions.starts_with("0 "), "{conversions}");

    let json = dir.path().join("moving.json");
    let out = tiny_sweep(&broker, &["--broker-metrics", &metrics_server(true)], &json);
    assert_eq!(out.status.code(), Some(1), "conversions fail the guard");
    let conversions = result_json(&json)["guards"]["conversions"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        conversions.starts_with("FAILED: the broker converted 5 produce"),
        "{conversions}"
    );
    assert!(text(&out.stdout).contains("broker conversions: FAILED"));

    let out = tiny_sweep(
        &broker,
        &["--broker-metrics", "http://127.0.0.1:1/metrics"],
        &dir.path().join("x.json"),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--broker-metrics http://127.0.0.1:1/metrics"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn no_pin_is_a_labelled_sanity_run_with_what_was_negotiated() {
    let broker = TestBroker::start();
    let dir = TempDir::new("sweep-nopin");
    let json = dir.path().join("tier2.json");
    let out = Cmd::new("sweep")
        .args(&["--quick", "--no-pin", "--bootstrap-server", &broker.addr])
        .json(&json)
        .run(Duration::from_secs(300));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("Tier 2 sanity run — not comparable"));
    let doc = result_json(&json);
    let produce = *broker.shared_versions(ApiKey::Produce).end();
    let fetch = *broker.shared_versions(ApiKey::Fetch).end();
    for c in doc["cells"].as_array().unwrap() {
        let want = if c["cell"]["api"] == "produce" {
            produce
        } else {
            fetch
        };
        assert_eq!(
            c["negotiated"], want,
            "the highest versions the broker and kbench share: {}",
            c["label"]
        );
    }
}

#[test]
fn isolated_cells_run_in_their_own_processes() {
    let broker = TestBroker::start();
    let dir = TempDir::new("sweep-isolate");
    let json = dir.path().join("isolated.json");
    let out = tiny_sweep(&broker, &["--isolate"], &json);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Each cell measured in a process of its own (so its peak RSS is its own): without --isolate
    // every cell would carry the sweep's one pid.
    let cells = result_json(&json)["cells"].as_array().unwrap().clone();
    let mut pids: Vec<u64> = cells.iter().map(|c| c["pid"].as_u64().unwrap()).collect();
    for c in &cells {
        assert_eq!(c["status"], "completed", "{}", c["label"]);
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), cells.len(), "one process per cell: {pids:?}");
}

#[test]
fn suite_runs_every_tier_in_order_and_writes_a_summary() {
    let legacy = TestBroker::start();
    let dir = TempDir::new("suite");
    let out = Cmd::new("suite")
        .args(&[
            "--quick",
            "--seed",
            "5",
            "--out",
            dir.path().to_str().unwrap(),
            "--legacy-bootstrap-server",
            &legacy.addr,
        ])
        .run(Duration::from_secs(600));
    assert!(out.status.success(), "{}", text(&out.stderr));
    for f in [
        "codec.json",
        "sweep-produce.json",
        "sweep-fetch.json",
        "sweep-legacy.json",
        "summary.md",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    assert_eq!(
        result_json(&dir.path().join("sweep-produce.json"))["seed"],
        5
    );
    let produce = result_json(&dir.path().join("sweep-produce.json"));
    assert!(
        produce["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cell"]["api"] == "produce")
    );
    let fetch = result_json(&dir.path().join("sweep-fetch.json"));
    assert!(
        fetch["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cell"]["api"] == "fetch")
    );
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    let order: Vec<usize> = [
        "## Tier 0",
        "## Tier 1 — Produce",
        "## Tier 1 — Fetch",
        "## Tier 2",
    ]
    .iter()
    .map(|h| {
        summary
            .find(h)
            .unwrap_or_else(|| panic!("{h} missing:\n{summary}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "tiers in order");
    assert!(summary.contains("Tier 2 sanity run — not comparable"));
}
