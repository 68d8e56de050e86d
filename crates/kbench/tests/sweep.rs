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
    let dir = std::env::temp_dir().join(format!("kbench-sweep-sa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("sweep.json");
    let out = run(
        &[
            "sweep",
            "--quick",
            "--api",
            "fetch",
            "--bootstrap-server",
            &broker.addr,
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
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
    let _ = std::fs::remove_dir_all(dir);
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
    let dir = std::env::temp_dir().join(format!("kbench-sweep-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let json = dir.join("still.json");
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

    let json = dir.join("moving.json");
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
        &dir.join("x.json"),
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
    let dir = std::env::temp_dir().join(format!("kbench-sweep-nopin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("tier2.json");
    let out = run(
        &[
            "sweep",
            "--quick",
            "--no-pin",
            "--bootstrap-server",
            &broker.addr,
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("Tier 2 sanity run — not comparable"));
    let doc = result_json(&json);
    for c in doc["cells"].as_array().unwrap() {
        let want = if c["cell"]["api"] == "produce" {
            11
        } else {
            17
        };
        assert_eq!(
            c["negotiated"], want,
            "Tansu's own highest versions: {}",
            c["label"]
        );
    }
}

#[test]
fn isolated_cells_run_in_their_own_processes() {
    let broker = TestBroker::start();
    let dir = std::env::temp_dir().join(format!("kbench-sweep-isolate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("isolated.json");
    let out = tiny_sweep(&broker, &["--isolate"], &json);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for c in result_json(&json)["cells"].as_array().unwrap() {
        assert_eq!(c["status"], "completed", "{}", c["label"]);
        // A child's own peak RSS: a few MiB, not the parent's.
        assert!(c["peak_rss_kib"].as_u64().unwrap() > 1024, "{}", c["label"]);
    }
}

#[test]
fn suite_runs_every_tier_in_order_and_writes_a_summary() {
    let legacy = TestBroker::start();
    let dir = std::env::temp_dir().join(format!("kbench-suite-{}", std::process::id()));
    let out = run(
        &[
            "suite",
            "--quick",
            "--seed",
            "5",
            "--out",
            dir.to_str().unwrap(),
            "--legacy-bootstrap-server",
            &legacy.addr,
        ],
        Duration::from_secs(600),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    for f in [
        "codec.json",
        "sweep-produce.json",
        "sweep-fetch.json",
        "sweep-legacy.json",
        "summary.md",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    assert_eq!(result_json(&dir.join("sweep-produce.json"))["seed"], 5);
    let produce = result_json(&dir.join("sweep-produce.json"));
    assert!(
        produce["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cell"]["api"] == "produce")
    );
    let fetch = result_json(&dir.join("sweep-fetch.json"));
    assert!(
        fetch["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cell"]["api"] == "fetch")
    );
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
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
