//! Per-interval series: the result's `intervals` and `--histogram-log` (HdrHistogram's interval log
//! format 1.3), for produce and e2e against the embedded broker. Read back with the hdrhistogram
//! crate's own interval-log reader, the windows' histograms sum exactly to the run's, and the
//! windows' counts to the run's counts. Read by HdrHistogram_py (PyPI `hdrhistogram`, an
//! implementation that is not kbench's), the log decodes line by line, its intervals' counts add up
//! to the records acknowledged and its percentiles are the result's within one bucket.

use std::time::Duration;

use crate::common::*;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// The log's windows per tag, summed, and how many lines each tag had.
pub(crate) fn read_log(path: &str) -> std::collections::BTreeMap<String, (Histogram<u64>, usize)> {
    let bytes = std::fs::read(path).expect("the log");
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        text.starts_with("#[Histogram log format version 1.3]\n"),
        "{text}"
    );
    assert!(text.contains("#[StartTime: "), "{text}");
    assert!(
        text.contains("\"StartTimestamp\",\"Interval_Length\""),
        "{text}"
    );
    let mut sums = std::collections::BTreeMap::new();
    let mut last_start = -1.0;
    for entry in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(h) = entry.expect("a well-formed log") else {
            continue;
        };
        let tag = h.tag().expect("tagged").as_str().to_string();
        let start = h.start_timestamp().as_secs_f64();
        assert!(start >= last_start - 1e-3, "windows in order");
        last_start = start;
        let raw = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            h.encoded_histogram(),
        )
        .unwrap();
        let w: Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .unwrap();
        let entry = sums
            .entry(tag)
            .or_insert_with(|| (kbench_bench::measure::latency_histogram(), 0));
        entry.0.add(&w).unwrap();
        entry.1 += 1;
    }
    sums
}

/// The log read by HdrHistogram_py (`read_hlog.py`): per tag, its lines and the sum's count, p50,
/// p99 and max.
fn read_with_hdrhistogram_py(path: &str) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../target/tools/python/bin/python");
    assert!(
        python.is_file(),
        "HdrHistogram_py is not installed at {}: run scripts/install-test-tools (scripts/test does)",
        python.display()
    );
    let out = std::process::Command::new(python)
        .arg(root.join("tests/it/read_hlog.py"))
        .arg(path)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "HdrHistogram_py could not read {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// HdrHistogram_py's value at percentile `p` of `h` is kbench's within one bucket, once for the
/// readers' different roundings of the rank (Rust's crate takes ceil(q·n), HdrHistogram_py
/// int(q·n + 0.5)): it lies between the buckets holding the values at one rank below and one above.
fn within_one_bucket(h: &Histogram<u64>, p: f64, theirs: u64) -> bool {
    let n = h.len() as f64;
    let rank = (p / 100.0 * n).ceil();
    let lo = h.value_at_quantile(((rank - 1.0) / n).clamp(0.0, 1.0));
    let hi = h.value_at_quantile(((rank + 1.0) / n).clamp(0.0, 1.0));
    h.lowest_equivalent(lo) <= theirs && theirs <= h.highest_equivalent(hi)
}

fn total(doc: &Value, field: &str) -> Histogram<u64> {
    kbench_bench::measure::decode_histogram(doc[field]["histogram"].as_str().unwrap()).unwrap()
}

fn sum(doc: &Value, field: &str) -> u64 {
    doc["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w[field].as_u64().unwrap())
        .sum()
}

#[test]
fn produce_windows_add_up_to_the_run_and_the_log_round_trips() {
    let broker = TestBroker::start();
    let dir = TempDir::new("timeline-produce");
    let (json, log) = (dir.path().join("run.json"), dir.file("run.hlog"));
    Cmd::on("produce", &broker)
        .topic("timeline-produce")
        .args(&[
            "--num-records",
            "12000",
            "--throughput",
            "4000",
            "--record-size",
            "100",
        ])
        .args(&["--histogram-log", &log, "--timeline-interval", "500ms"])
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(doc["schema_version"], kbench_bench::SCHEMA_VERSION);
    let windows = doc["intervals"].as_array().unwrap();
    // About 3 s at 500 ms windows; how many is the machine's timing, so what is checked is what
    // the run recorded: the windows tile the run without gap or overlap, and each window's rate is
    // its own records over its own length.
    assert!(windows.len() >= 3, "{} windows", windows.len());
    assert_eq!(sum(&doc, "records"), doc["records_acked"].as_u64().unwrap());
    assert_eq!(sum(&doc, "bytes"), doc["bytes_acked"].as_u64().unwrap());
    let f = |w: &Value, k: &str| w[k].as_f64().unwrap_or_else(|| panic!("{k} in {w}"));
    for pair in windows.windows(2) {
        let end = f(&pair[0], "t_s") + f(&pair[0], "duration_s");
        assert!(
            (f(&pair[1], "t_s") - end).abs() < 1e-5,
            "a gap or overlap: {} then {}",
            pair[0],
            pair[1]
        );
    }
    for w in windows {
        let records = f(w, "records");
        let expect = records / f(w, "duration_s").max(1e-9);
        assert!(
            (f(w, "records_per_sec") - expect).abs() <= 1e-6 * expect.max(1.0),
            "{w}"
        );
    }
    let middle = &windows[windows.len() / 2];
    assert!(middle["latency"]["p99"].as_u64().unwrap() > 0, "{middle}");
    let logged = read_log(&log);
    for tag in ["latency", "service_time", "publish_delay"] {
        let (h, lines) = &logged[tag];
        assert_eq!(*lines, windows.len(), "{tag}: one line per window");
        assert_eq!(
            *h,
            total(&doc, tag),
            "{tag}: the windows sum to the run exactly"
        );
    }
    let py = read_with_hdrhistogram_py(&log);
    let acked = doc["records_acked"].as_u64().unwrap();
    for tag in ["latency", "service_time", "publish_delay"] {
        let read = &py[tag];
        assert_eq!(
            read["lines"].as_u64(),
            Some(windows.len() as u64),
            "{tag}: {py}"
        );
        assert_eq!(read["count"].as_u64(), Some(acked), "{tag}: {py}");
        let h = total(&doc, tag);
        for (p, at) in [("p50", 50.0), ("p99", 99.0), ("max", 100.0)] {
            let (ours, theirs) = (doc[tag][p].as_u64().unwrap(), read[p].as_u64().unwrap());
            assert!(
                within_one_bucket(&h, at, theirs),
                "{tag} {p}: the result says {ours} µs, HdrHistogram_py {theirs} µs"
            );
        }
    }
}

#[test]
fn e2e_windows_add_up_to_the_run_and_the_log_round_trips() {
    let broker = TestBroker::start();
    let dir = TempDir::new("timeline-e2e");
    let (json, log) = (dir.path().join("run.json"), dir.file("run.hlog"));
    Cmd::on("e2e", &broker)
        .topic("timeline-e2e")
        .args(&[
            "--producers",
            "2",
            "--batch-interval",
            "10ms",
            "--duration",
            "3s",
        ])
        .args(&["--histogram-log", &log])
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(sum(&doc, "records"), doc["records_acked"].as_u64().unwrap());
    assert_eq!(
        sum(&doc, "consumed"),
        doc["records_consumed"].as_u64().unwrap()
    );
    let logged = read_log(&log);
    for tag in ["producer_request_duration", "publish_delay", "whole_trip"] {
        assert_eq!(logged[tag].0, total(&doc, tag), "{tag}");
    }
    assert!(logged["whole_trip"].0.len() > 100);
}

#[test]
fn consume_windows_add_up_to_the_run_and_the_log_round_trips() {
    let broker = TestBroker::start();
    let dir = TempDir::new("timeline-consume");
    Cmd::on("produce", &broker)
        .topic("timeline-consume")
        .args(&["--num-records", "20000", "--throughput", "10000"])
        .ok(LIMIT);
    let (json, log) = (dir.path().join("run.json"), dir.file("run.hlog"));
    Cmd::on("consume", &broker)
        .topic("timeline-consume")
        .args(&[
            "--messages",
            "20000",
            "--histogram-log",
            &log,
            "--timeline-interval",
            "100ms",
        ])
        .json(&json)
        .ok(LIMIT);
    let doc = result_json(&json);
    assert_eq!(sum(&doc, "consumed"), 20_000);
    assert_eq!(
        sum(&doc, "bytes_consumed"),
        doc["bytes_consumed"].as_u64().unwrap()
    );
    let logged = read_log(&log);
    assert_eq!(logged["fetch_latency"].0, total(&doc, "fetch_latency"));
    assert_eq!(
        logged["fetch_latency"].1,
        doc["intervals"].as_array().unwrap().len()
    );
}
