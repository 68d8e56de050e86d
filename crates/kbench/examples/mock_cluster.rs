//! librdkafka's mock cluster as a process of its own, for trying kbench against by hand: three
//! brokers (or `--brokers N`), topics created with `--topic NAME:PARTITIONS` (leaders spread),
//! its bootstrap address printed on the first line, then commands read from stdin, one per line:
//! `move TOPIC PARTITIONS` (every leader to the next broker), `down ID`, `up ID`,
//! `rtt ID MS`, `quit`. `--kafka 1.1` narrows every API's versions to Apache Kafka 1.1.0's (the
//! legacy broker of `kbench suite --legacy-bootstrap-server`, tier 2) and prints the address of
//! the proxies that mend the mock's Produce v5 answers (`tests/it/common/kafka_1_1.rs`).
//!
//! ```text
//! cargo run --release --example mock_cluster -- --topic t:6
//! cargo run --release --example mock_cluster -- --brokers 1 --kafka 1.1
//! ```

use std::io::BufRead;
use std::time::Duration;

use rdkafka::mocking::MockCluster;

#[path = "../tests/it/common/kafka_1_1.rs"]
mod kafka_1_1;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let brokers: i32 = args
        .iter()
        .position(|a| a == "--brokers")
        .and_then(|i| args.get(i + 1))
        .map_or(3, |v| v.parse().expect("--brokers N"));
    let mock = MockCluster::new(brokers).expect("mock cluster");
    let mut bootstrap = mock.bootstrap_servers();
    if let Some(i) = args.iter().position(|a| a == "--kafka") {
        match args.get(i + 1).map(String::as_str) {
            Some("1.1") => {
                kafka_1_1::narrow(&mock).expect("narrow to Kafka 1.1");
                bootstrap = kafka_1_1::mend(&bootstrap);
            }
            other => {
                eprintln!("--kafka: only 1.1 is known, got {other:?}");
                std::process::exit(2);
            }
        }
    }
    let mut moves = std::collections::HashMap::new();
    for (i, a) in args.iter().enumerate() {
        if a == "--topic" {
            let (name, n) = args[i + 1]
                .split_once(':')
                .expect("--topic NAME:PARTITIONS");
            let n: i32 = n.parse().expect("partitions");
            mock.create_topic(name, n, brokers).expect("topic");
            // `--leaders-as-created`: keep the mock's own placement (setting each partition's
            // leader one by one stalls this process for topics of more than a few partitions).
            if !args.iter().any(|a| a == "--leaders-as-created") {
                for p in 0..n {
                    mock.partition_leader(name, p, Some(1 + p % brokers))
                        .expect("leader");
                }
            }
            moves.insert(name.to_string(), 0);
        }
    }
    println!("{bootstrap}");
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["move", topic, n] => {
                let n: i32 = n.parse().expect("partitions");
                let m = moves.entry(topic.to_string()).or_insert(0);
                *m += 1;
                for p in 0..n {
                    mock.partition_leader(topic, p, Some(1 + (p + *m) % brokers))
                        .expect("leader");
                }
            }
            ["down", id] => mock.broker_down(id.parse().expect("id")).expect("down"),
            ["up", id] => mock.broker_up(id.parse().expect("id")).expect("up"),
            ["rtt", id, ms] => mock
                .broker_round_trip_time(
                    id.parse().expect("id"),
                    Duration::from_millis(ms.parse().expect("ms")),
                )
                .expect("rtt"),
            ["quit"] => break,
            _ => eprintln!("? {line}"),
        }
        println!("ok {line}");
    }
}
