//! Prometheus metrics: `--metrics-listen` on a produce run and `/metrics` on `kbench serve`, scraped
//! while the run goes and parsed with an independent exposition-format parser (prometheus-parse):
//! counters only go up, and end equal to the result document's counts.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::*;
use prometheus_parse::{Scrape, Value};

const LIMIT: Duration = Duration::from_secs(120);

pub fn scrape(url: &str) -> Option<Scrape> {
    let body = runtime().block_on(async {
        let r = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4"),
            "the text exposition format"
        );
        r.text().await.ok()
    })?;
    Some(Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("a valid exposition"))
}

pub fn counter(s: &Scrape, name: &str) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == name)
        .map(|x| match x.value {
            Value::Counter(v) | Value::Untyped(v) | Value::Gauge(v) => v,
            _ => panic!("{name} is not a counter"),
        })
}

/// A produce run's last scrape against its result: records sent and bytes acknowledged, and the
/// latency histogram — labelled with the workload and `topic`, cumulative, its count the
/// result's. The series' `run_id`.
pub fn produce_scrape_ends_at(last: &Scrape, doc: &serde_json::Value, topic: &str) -> String {
    assert_eq!(
        counter(last, "kbench_records_sent_total"),
        doc["records_sent"].as_f64()
    );
    assert_eq!(
        counter(last, "kbench_bytes_acked_total"),
        doc["bytes_acked"].as_f64()
    );
    let latency = last
        .samples
        .iter()
        .find(|x| x.metric == "kbench_produce_latency_seconds")
        .expect("the latency histogram");
    assert_eq!(latency.labels.get("workload"), Some("produce"));
    assert_eq!(latency.labels.get("topic"), Some(topic));
    let Value::Histogram(buckets) = &latency.value else {
        panic!("a histogram");
    };
    let inf = buckets.iter().find(|b| b.less_than.is_infinite()).unwrap();
    assert_eq!(inf.count, doc["latency"]["count"].as_f64().unwrap());
    assert!(
        buckets.windows(2).all(|w| w[1].count >= w[0].count),
        "cumulative buckets"
    );
    latency.labels.get("run_id").unwrap_or_default().to_string()
}

#[test]
fn produce_metrics_only_go_up_and_end_at_the_results_counts() {
    let broker = TestBroker::start();
    let dir = TempDir::new("metrics-produce");
    let json = dir.path().join("run.json");
    let port = free_port();
    let cmd = Cmd::on("produce", &broker)
        .topic("metrics-produce")
        .args(&[
            "--num-records",
            "9000",
            "--throughput",
            "3000",
            "--record-size",
            "100",
        ])
        .args(&[
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-hold",
            "5s",
        ])
        // Windows of 250 ms: a dozen updates over the 3 s run, so a scrape every 200 ms sees the
        // counts move even on a loaded machine.
        .args(&["--timeline-interval", "250ms"])
        .json(&json);
    let run = std::thread::spawn(move || cmd.ok(LIMIT));
    let url = format!("http://127.0.0.1:{port}/metrics");
    let started = Instant::now();
    let mut seen: Vec<(f64, f64)> = Vec::new();
    // Scrape while the run goes, until its result is written (the endpoint is held after it).
    while !json.exists() {
        assert!(started.elapsed() < LIMIT, "the run did not finish");
        if let Some(s) = scrape(&url)
            && let (Some(acked), Some(sent)) = (
                counter(&s, "kbench_records_acked_total"),
                counter(&s, "kbench_records_sent_total"),
            )
        {
            seen.push((acked, sent));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let doc = result_json(&json);
    // The endpoint is held after the run (--metrics-hold): wait for its last update, not a guess.
    let ends_at_result = |s: &Scrape| {
        counter(s, "kbench_records_acked_total") == doc["records_acked"].as_f64()
            && counter(s, "kbench_records_sent_total") == doc["records_sent"].as_f64()
    };
    wait_until("the endpoint holds the result's counts", LIMIT, || {
        scrape(&url).is_some_and(|s| ends_at_result(&s))
    });
    let last = scrape(&url).expect("served after the run (--metrics-hold)");
    for w in seen.windows(2) {
        assert!(
            w[1].0 >= w[0].0 && w[1].1 >= w[0].1,
            "counters only go up: {seen:?}"
        );
    }
    let total = doc["records_acked"].as_f64().unwrap();
    assert!(
        seen.iter().any(|(acked, _)| *acked > 0.0 && *acked < total),
        "some scrape saw the run under way (between 0 and {total}): {seen:?}"
    );
    assert_eq!(
        counter(&last, "kbench_records_acked_total"),
        doc["records_acked"].as_f64()
    );
    assert_eq!(counter(&last, "kbench_records_failed_total"), Some(0.0));
    produce_scrape_ends_at(&last, &doc, "metrics-produce");
    let out = run.join().unwrap();
    assert!(
        text(&out.stderr).contains("/metrics"),
        "the address is printed"
    );
}

#[test]
fn serve_exposes_the_latest_runs_metrics() {
    let broker = TestBroker::start();
    let dir = TempDir::new("metrics-serve");
    let results = dir.path();
    let (mut server, base) = common::start_serve(
        &[
            "--bootstrap-server",
            &broker.addr,
            "--results-dir",
            results.to_str().unwrap(),
        ],
        &[],
    );
    let before = scrape(&format!("{base}/metrics")).unwrap();
    assert!(before.samples.is_empty(), "no run yet");
    let rt = runtime();
    let created: serde_json::Value = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{base}/v1/runs"))
            .header("content-type", "application/json")
            .body(r#"{"workload": "produce", "num_records": 5000, "topic": "metrics-serve"}"#)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let url = format!("{base}/v1/runs/{}", created["id"].as_str().unwrap());
    let run = loop {
        let r: serde_json::Value =
            rt.block_on(async { reqwest::get(&url).await.unwrap().json().await.unwrap() });
        if r["status"] == "finished" {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = scrape(&format!("{base}/metrics")).unwrap();
    assert_eq!(counter(&after, "kbench_records_acked_total"), Some(5000.0));
    assert_eq!(run["result"]["records_acked"], 5000);
    let acked = after
        .samples
        .iter()
        .find(|x| x.metric == "kbench_records_acked_total")
        .unwrap();
    assert_eq!(acked.labels.get("run_id"), run["id"].as_str());
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn an_omb_run_exposes_its_producers_and_consumers() {
    let broker = TestBroker::start();
    let dir = TempDir::new("metrics-omb");
    let (json, omb) = (dir.path().join("run.json"), dir.path().join("omb.json"));
    let port = free_port();
    let workload = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/omb");
    let cmd = Cmd::on("omb", &broker)
        .arg(
            workload
                .join("1-topic-4-partitions-100b.yaml")
                .to_str()
                .unwrap(),
        )
        .args(&[
            "--driver",
            workload.join("kafka-test-driver.yaml").to_str().unwrap(),
        ])
        .args(&[
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-hold",
            "5s",
        ])
        .args(&["-o", omb.to_str().unwrap()])
        .json(&json);
    let run = std::thread::spawn(move || cmd.ok(LIMIT));
    let url = format!("http://127.0.0.1:{port}/metrics");
    let started = Instant::now();
    while !json.exists() {
        assert!(started.elapsed() < LIMIT, "the run did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    let doc = result_json(&json);
    let warmup = doc["warmup"]["records_acked"].as_f64().unwrap_or(0.0);
    let everything = doc["records_acked"].as_f64().unwrap() + warmup;
    wait_until("the endpoint holds the result's counts", LIMIT, || {
        scrape(&url).is_some_and(|s| counter(&s, "kbench_records_acked_total") == Some(everything))
    });
    let last = scrape(&url).expect("served after the run");
    assert_eq!(
        counter(&last, "kbench_records_acked_total"),
        Some(doc["records_acked"].as_f64().unwrap() + warmup),
        "the measured phase and the warm-up"
    );
    let consumed = counter(&last, "kbench_records_consumed_total").expect("the consumers' counter");
    assert!(consumed > 0.0 && consumed <= doc["records_acked"].as_f64().unwrap() + warmup);
    let labels = &last.samples[0].labels;
    assert_eq!(labels.get("workload"), Some("omb"));
    run.join().unwrap();
}
