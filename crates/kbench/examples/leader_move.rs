//! The leader-move benchmark (`scripts/bench-leader-move.sh`): on librdkafka's mock cluster (three
//! brokers, a topic of six partitions with leaders spread), every partition's leader moves once at
//! `--move-at`, while a workload runs at a fixed rate. kbench's figures come from its result
//! document (per-second timeline windows); librdkafka's own producer, paced the same way on a fresh
//! topic of the same cluster with the same move, is the reference: its latency per record is from
//! the intended send time to the delivery report, as kbench's is, windowed by the second.
//!
//! ```text
//! cargo run --release --example leader_move -- produce [--rate 20000] [--seconds 12] [--move-at 4]
//! cargo run --release --example leader_move -- e2e [--seconds 12] [--move-at 4]
//! cargo run --release --example leader_move -- consume [--rate 20000] [--seconds 12] [--move-at 4]
//! ```
//!
//! It prints one JSON document (per-second windows and the before/after summary) on stdout.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use serde_json::{Value, json};

const PARTITIONS: i32 = 6;
const BROKERS: i32 = 3;

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} {v}: not a number"))
        })
        .unwrap_or(default)
}

fn topic(mock: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>, name: &str) {
    mock.create_topic(name, PARTITIONS, BROKERS)
        .expect("mock topic");
    for p in 0..PARTITIONS {
        mock.partition_leader(name, p, Some(1 + p % BROKERS))
            .expect("leader");
    }
}

fn move_leaders(mock: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>, name: &str) {
    for p in 0..PARTITIONS {
        mock.partition_leader(name, p, Some(1 + (p + 1) % BROKERS))
            .expect("leader");
    }
}

/// Run kbench with `args`, moving `topic`'s leaders `move_at` after it starts; its result document.
fn kbench(
    mock: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>,
    topic: &str,
    move_at: Duration,
    args: &[&str],
) -> Value {
    let bin = std::env::var("KBENCH_BIN").unwrap_or_else(|_| "target/release/kbench".into());
    let json =
        std::env::temp_dir().join(format!("leader-move-{topic}-{}.json", std::process::id()));
    let mut child = std::process::Command::new(&bin)
        .args(args)
        .args(["--bootstrap-server", &mock.bootstrap_servers()])
        .args(["--topic", topic, "--json", json.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    let started = Instant::now();
    std::thread::sleep(move_at);
    move_leaders(mock, topic);
    let moved_after = started.elapsed();
    let status = child.wait().expect("kbench");
    assert!(status.success(), "kbench {args:?}: {status}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("result")).unwrap();
    let _ = std::fs::remove_file(&json);
    eprintln!("kbench: moved {moved_after:?} after the start");
    doc
}

/// kbench's per-second windows: (t, records/s, p50 ms, p99 ms) of the histogram `tag`.
fn kbench_windows(doc: &Value, tag: &str) -> Vec<(f64, f64, f64, f64)> {
    kbench_windows_of(doc, tag, "records_per_sec")
}

/// The same, with the rate read from `rate`.
fn kbench_windows_of(doc: &Value, tag: &str, rate: &str) -> Vec<(f64, f64, f64, f64)> {
    doc["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["duration_s"].as_f64().unwrap_or(0.0) >= 0.5)
        .map(|w| {
            let ms = |q: &str| w[tag][q].as_f64().unwrap_or(0.0) / 1000.0;
            (
                w["t_s"].as_f64().unwrap_or(0.0),
                w[rate].as_f64().unwrap_or(0.0),
                ms("p50"),
                ms("p99"),
            )
        })
        .collect()
}

/// librdkafka's delivery reports, windowed by the second of the report.
struct Windows {
    start: Instant,
    windows: Mutex<Vec<(Histogram<u64>, u64)>>,
}

impl ClientContext for Windows {}

impl ProducerContext for Windows {
    type DeliveryOpaque = Box<Instant>;
    fn delivery(&self, result: &DeliveryResult<'_>, intended: Box<Instant>) {
        if result.is_err() {
            return;
        }
        let now = Instant::now();
        let second = (now - self.start).as_secs() as usize;
        let mut w = self.windows.lock().unwrap();
        while w.len() <= second {
            w.push((Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap(), 0));
        }
        let _ = w[second]
            .0
            .record(((now - *intended).as_micros() as u64).max(1));
        w[second].1 += 1;
    }
}

/// librdkafka's producer at `rate` records/s for `seconds`, open loop (latency from each record's
/// intended time), with kbench's producer settings (acks=all, batch.size 16 KiB, linger 5 ms,
/// 5 in flight), the leaders moved at `move_at`.
fn librdkafka(
    mock: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>,
    topic: &str,
    rate: f64,
    seconds: f64,
    move_at: Duration,
) -> Vec<(f64, f64, f64, f64)> {
    let start = Instant::now();
    let producer: BaseProducer<Windows> = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("batch.size", "16384")
        .set("max.in.flight.requests.per.connection", "5")
        .create_with_context(Windows {
            start,
            windows: Mutex::new(Vec::new()),
        })
        .expect("librdkafka producer");
    let value = vec![b'x'; 100];
    let total = (rate * seconds) as u64;
    let mut moved = false;
    for i in 0..total {
        let intended = start + Duration::from_secs_f64(i as f64 / rate);
        let now = Instant::now();
        if intended > now {
            producer.poll(Duration::ZERO);
            std::thread::sleep(intended - now);
        }
        if !moved && start.elapsed() >= move_at {
            move_leaders(mock, topic);
            moved = true;
        }
        let mut record: BaseRecord<'_, [u8], Vec<u8>, Box<Instant>> =
            BaseRecord::with_opaque_to(topic, Box::new(intended)).payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("librdkafka: {e}"),
            }
        }
        if i % 64 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    let w = producer.context().windows.lock().unwrap();
    w.iter()
        .enumerate()
        .take(seconds as usize)
        .map(|(s, (h, n))| {
            let ms = |q| h.value_at_quantile(q) as f64 / 1000.0;
            (s as f64, *n as f64, ms(0.5), ms(0.99))
        })
        .collect()
}

/// Windows before the move (ending before it) and after it (starting a second after it): the
/// medians of their per-window p50s, and the window holding the move's p99.
fn summary(windows: &[(f64, f64, f64, f64)], move_at: f64) -> Value {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let before = median(
        windows
            .iter()
            .filter(|w| w.0 + 1.0 <= move_at)
            .map(|w| w.2)
            .collect(),
    );
    let after = median(
        windows
            .iter()
            .filter(|w| w.0 >= move_at + 1.0)
            .map(|w| w.2)
            .collect(),
    );
    let during = windows
        .iter()
        .find(|w| w.0 <= move_at && move_at < w.0 + 1.0)
        .map(|w| json!({"p50_ms": w.2, "p99_ms": w.3, "records_per_sec": w.1}));
    json!({
        "p50_before_ms": before,
        "p50_after_ms": after,
        "after_over_before": before.zip(after).map(|(b, a)| a / b),
        "window_of_the_move": during,
    })
}

/// librdkafka's producer writing 100-byte records to `topic` at `rate` records/s for `seconds`,
/// flushed (the consume benchmark's live tail).
fn paced(bootstrap: &str, topic: &str, rate: f64, seconds: f64) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("librdkafka producer");
    let value = vec![b'x'; 100];
    let start = Instant::now();
    for i in 0..(rate * seconds) as u64 {
        let intended = start + Duration::from_secs_f64(i as f64 / rate);
        let now = Instant::now();
        if intended > now {
            producer.poll(Duration::ZERO);
            std::thread::sleep(intended - now);
        }
        let mut record: BaseRecord<'_, [u8], Vec<u8>> = BaseRecord::to(topic).payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("librdkafka: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

fn table(windows: &[(f64, f64, f64, f64)]) -> Value {
    windows
        .iter()
        .map(|w| json!({"t_s": w.0, "records_per_sec": w.1, "p50_ms": w.2, "p99_ms": w.3}))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let workload = args.first().map(String::as_str).unwrap_or("produce");
    let rate = arg(&args, "--rate", 20_000.0);
    let seconds = arg(&args, "--seconds", 12.0);
    let move_at_s = arg(&args, "--move-at", 4.0);
    let move_at = Duration::from_secs_f64(move_at_s);
    let mock = MockCluster::new(BROKERS).expect("mock cluster");
    let out = match workload {
        "produce" => {
            topic(&mock, "kbench-move");
            let rate_s = rate.to_string();
            let duration = format!("{seconds}s");
            let doc = kbench(
                &mock,
                "kbench-move",
                move_at,
                &[
                    "produce",
                    "--throughput",
                    &rate_s,
                    "--acks",
                    "all",
                    "--duration",
                    &duration,
                    "--record-size",
                    "100",
                    "--timeline-interval",
                    "1s",
                ],
            );
            topic(&mock, "librdkafka-move");
            let reference = librdkafka(&mock, "librdkafka-move", rate, seconds, move_at);
            let ours = kbench_windows(&doc, "latency");
            json!({
                "workload": "produce",
                "rate": rate,
                "move_at_s": move_at_s,
                "kbench": {"summary": summary(&ours, move_at_s), "windows": table(&ours),
                           "cluster": doc["cluster"], "records_failed": doc["records_failed"]},
                "librdkafka": {"summary": summary(&reference, move_at_s), "windows": table(&reference)},
            })
        }
        "e2e" => {
            topic(&mock, "kbench-move-e2e");
            let duration = format!("{seconds}s");
            let doc = kbench(
                &mock,
                "kbench-move-e2e",
                move_at,
                &[
                    "e2e",
                    "--producers",
                    "4",
                    "--batch-interval",
                    "10ms",
                    "--duration",
                    &duration,
                    "--timeline-interval",
                    "1s",
                ],
            );
            let ours = kbench_windows(&doc, "whole_trip");
            json!({
                "workload": "e2e",
                "move_at_s": move_at_s,
                "kbench": {"summary": summary(&ours, move_at_s), "windows": table(&ours),
                           "records_acked": doc["records_acked"], "records_lost": doc["records_lost"],
                           "saturation": doc["saturation"], "cluster": doc["cluster"]},
            })
        }
        "consume" => {
            // A live tail: librdkafka's producer writes `rate` records/s for the whole run (from a
            // thread of its own, never moving anything) while kbench reads every partition,
            // assigned; the leaders move at `move_at`. A consumer that follows keeps reading the
            // producer's rate; one that does not reads nothing after the move.
            topic(&mock, "kbench-move-consume");
            let bootstrap = mock.bootstrap_servers();
            let producer = std::thread::spawn(move || {
                paced(&bootstrap, "kbench-move-consume", rate, seconds + 1.0)
            });
            let messages = ((rate * seconds) as u64).to_string();
            let doc = kbench(
                &mock,
                "kbench-move-consume",
                move_at,
                &[
                    "consume",
                    "--messages",
                    &messages,
                    "--partition",
                    "0,1,2,3,4,5",
                    "--offset",
                    "earliest",
                    "--timeout",
                    "20000",
                    "--timeline-interval",
                    "1s",
                ],
            );
            producer.join().expect("producer thread");
            let ours = kbench_windows_of(&doc, "fetch_latency", "consumed_per_sec");
            json!({
                "workload": "consume",
                "rate": rate,
                "move_at_s": move_at_s,
                "kbench": {"summary": summary(&ours, move_at_s), "windows": table(&ours),
                           "records_consumed": doc["records_consumed"], "complete": doc["complete"],
                           "cluster": doc["cluster"]},
            })
        }
        other => panic!("{other}: produce, e2e or consume"),
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
