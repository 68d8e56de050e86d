//! `kbench e2e-latency`: Kafka's EndToEndLatency command lines (3.x positional, 4.x named) against
//! a real broker, and Kafka's lines back.

use std::time::Duration;

use crate::common::{Cmd, TempDir, TestBroker, n, result_json, text};

/// Kafka's lines from one run's stdout: the progress lines' indices, and the average and
/// percentiles (which must parse). Any other line fails the test.
fn kafkas_lines(stdout: &str, topic_created: Option<&str>) -> Vec<u64> {
    let mut lines = stdout.lines().peekable();
    if let Some(topic) = topic_created {
        assert_eq!(
            lines.next(),
            Some(
                format!(
                    "Topic \"{topic}\" does not exist. Will create topic with 1 partition(s) and replication factor = 1"
                )
                .as_str()
            ),
            "{stdout}"
        );
    }
    let mut progress = Vec::new();
    while let Some(line) = lines.next_if(|l| l.contains('\t')) {
        let (i, ms) = line.split_once('\t').unwrap();
        progress.push(i.parse::<u64>().expect("record index"));
        assert!(ms.contains('.'), "a Java double: {line:?}");
        assert!(ms.parse::<f64>().expect("latency ms") >= 0.0);
    }
    let avg = lines.next().expect("the average line");
    let ms = avg
        .strip_prefix("Avg latency: ")
        .and_then(|r| r.strip_suffix(" ms"))
        .unwrap_or_else(|| panic!("{avg:?}"));
    assert_eq!(ms.split_once('.').map(|(_, f)| f.len()), Some(4), "{avg:?}");
    assert!(ms.parse::<f64>().unwrap() >= 0.0);
    let pct = lines.next().expect("the percentiles line");
    let ranks: Vec<u64> = pct
        .strip_prefix("Percentiles: 50th = ")
        .unwrap_or_else(|| panic!("{pct:?}"))
        .replace(", 99th = ", " ")
        .replace(", 99.9th = ", " ")
        .split(' ')
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{pct:?}")))
        .collect();
    assert!(
        ranks.len() == 3 && ranks[0] <= ranks[1] && ranks[1] <= ranks[2],
        "{pct:?}"
    );
    assert_eq!(lines.next(), None, "{stdout}");
    progress
}

/// One broker, both of Kafka's command lines: the 3.x positional one creates the topic (Kafka's
/// line says so), the 4.x named one finds it; each prints a progress line at every 1000th record,
/// then the average and the percentiles, and every record made the whole trip once.
#[test]
fn kafkas_positional_and_named_lines_run_and_print_kafkas_lines() {
    let broker = TestBroker::start();
    let topic = "e2e-latency";
    let out = Cmd::new("e2e-latency")
        .args(&[&broker.addr, topic, "2500", "1", "100"])
        .ok(Duration::from_secs(120));
    let stdout = text(&out.stdout);
    assert_eq!(kafkas_lines(&stdout, Some(topic)), [0, 1000, 2000]);

    let dir = TempDir::new("e2e-latency");
    let json = dir.path().join("e2e-latency.json");
    let out = Cmd::new("e2e-latency")
        .args(&[
            "--bootstrap-server",
            &broker.addr,
            "--topic",
            topic,
            "--num-records",
            "1200",
            "--producer-acks",
            "all",
            "--record-size",
            "50",
        ])
        .json(&json)
        .ok(Duration::from_secs(120));
    let stdout = text(&out.stdout);
    assert_eq!(kafkas_lines(&stdout, None), [0, 1000]);
    let doc = result_json(&json);
    assert_eq!(doc["kind"], "e2e");
    for field in ["records_produced", "records_acked", "records_consumed"] {
        assert_eq!(n(&doc, field), 1200, "{field}: {doc}");
    }
    for field in [
        "records_failed",
        "records_lost",
        "records_late",
        "records_duplicated",
    ] {
        assert_eq!(n(&doc, field), 0, "{field}: {doc}");
    }
    assert_eq!(doc["settings"]["records"], 1200);
    assert_eq!(doc["settings"]["acks"], "all");
}

/// Bad input is refused before any load, in Kafka's words, naming the argument.
#[test]
fn e2e_latency_refuses_bad_acks_and_counts_in_kafkas_words() {
    Cmd::new("e2e-latency")
        .args(&["127.0.0.1:1", "t", "10", "0", "20"])
        .refused("Invalid value for --producer-acks. Latency testing requires synchronous acknowledgement. Please use '1' or 'all'.");
    Cmd::new("e2e-latency")
        .args(&[
            "--bootstrap-server",
            "127.0.0.1:1",
            "--topic",
            "t",
            "--num-records",
            "ten",
            "--producer-acks",
            "1",
            "--record-size",
            "20",
        ])
        .refused("Cannot parse argument 'ten' of option num-records");
    Cmd::new("e2e-latency")
        .args(&["127.0.0.1:1", "t", "10", "1"])
        .refused("Expected 5 or 6 positional arguments, but got 4.");
}
