//! The command line, in the vocabulary of kafka-producer-perf-test and librdkafka. Values are checked
//! here, where the flag's name is at hand for the error.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kbench_wire::Compression;

#[derive(Debug, Parser)]
#[command(
    name = "kbench",
    version,
    about = "Kafka load testing and protocol benchmarking",
    long_about = "Kafka load testing and protocol benchmarking.\n\nWith no --bootstrap-server, kbench starts an embedded Kafka-compatible broker (Tansu, in-memory) in a child process."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Produce records and report throughput and latency, like kafka-producer-perf-test.
    Produce(Box<ProduceArgs>),
    /// Embedded broker, a topic, a 10-second produce of 100-byte records, and a summary.
    Quickstart(QuickstartArgs),
    /// Run the embedded Tansu broker (in-memory storage) in the foreground.
    Broker(BrokerArgs),
    /// Tier 0: time every Produce and Fetch codec version with no broker.
    Codec(Box<crate::codec::CodecArgs>),
    /// Tier 1: every shared Produce and Fetch version, pinned cell by cell against one broker.
    Sweep(Box<crate::sweep::SweepArgs>),
    /// The protocol-version load test in order: tier 0, tier 1 Produce, tier 1 Fetch, tier 2.
    Suite(crate::suite::SuiteArgs),
    /// End-to-end latency: N producers and one consumer in a fresh consumer group.
    E2e(Box<crate::e2e::E2eArgs>),
    /// The HTTP control API: POST /pub-sub-demo (seed-compatible) and /v1/runs.
    Serve(Box<crate::serve::ServeArgs>),
    /// Compare two sets of results (files or folders): ratio, 95 % CI and verdict per cell and metric.
    Compare(crate::compare::CompareArgs),
}

#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Address to listen on (and advertise).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// Print nothing at start-up.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// How long to produce.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Where to write the result document (default: kbench-results/quickstart-<time>.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic to produce to; created when missing.
    #[arg(long, default_value = "kbench-perf")]
    pub topic: String,

    /// Number of records to produce.
    #[arg(long, default_value = "1000000", allow_negative_numbers = true, value_parser = positive_u64)]
    pub num_records: u64,

    /// Size of each record's value in bytes.
    #[arg(long, conflicts_with = "payload_file", allow_negative_numbers = true, value_parser = positive_usize)]
    pub record_size: Option<usize>,

    /// File whose lines (split by --payload-delimiter) are the record values, chosen at random.
    #[arg(long)]
    pub payload_file: Option<PathBuf>,

    /// Delimiter between payloads in --payload-file.
    #[arg(long, default_value = "\\n")]
    pub payload_delimiter: String,

    /// Throttle to about this many records/s; -1 means unthrottled.
    #[arg(long, default_value = "-1", allow_negative_numbers = true, value_parser = parse_throughput)]
    pub throughput: f64,

    /// Stop after this long even if --num-records were not all sent (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// acks: 0, 1 or all (-1). Default: all, as Kafka's producer.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_acks)]
    pub acks: Option<kbench_client::Acks>,

    /// Compression: none, gzip, snappy, lz4 or zstd.
    #[arg(long, value_parser = parse_compression)]
    pub compression: Option<Compression>,

    /// Upper bound of a record batch in bytes (batch.size). Default 16384.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub batch_size: Option<usize>,

    /// How long a batch may wait for more records, in ms (linger.ms). Default 5.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative_u64)]
    pub linger_ms: Option<u64>,

    /// Requests in flight per broker connection. Default 5.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub max_in_flight: Option<usize>,

    /// Partitions when the topic is created.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = positive_i32)]
    pub partitions: i32,

    /// Replication factor when the topic is created.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = positive_i16)]
    pub replication_factor: i16,

    /// Produce to this partition only (default: round-robin per batch over all partitions).
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative_i32)]
    pub partition: Option<i32>,

    /// Pin API versions, e.g. produce=7,fetch=12 (Kafka API names, case-insensitive).
    #[arg(long, value_name = "API=VERSION[,…]")]
    pub pin: Vec<String>,

    /// Client property, Java or librdkafka name (repeatable): -X linger.ms=10
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub property: Vec<String>,

    /// Producer properties, as kafka-producer-perf-test takes them: --producer-props acks=1 linger.ms=5
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE")]
    pub producer_props: Vec<String>,

    /// Progress line interval in ms (kafka-producer-perf-test's unit); "5s" also works.
    #[arg(long, default_value = "5000", value_parser = parse_interval_ms)]
    pub reporting_interval: Duration,

    /// Write the result document (docs/results.md) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Seed for the payload generator (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Run the measured phase this many times (same topic, same connections); the result keeps each
    /// repetition's figures for `kbench compare`.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = positive_usize)]
    pub repetitions: usize,
}

/// A seed for a run when the user gave none: the clock and the process id. It is printed and stored.
pub fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

/// A whole number of at least `MIN` (e.g. repetitions, where medians need enough samples).
pub fn at_least<const MIN: usize>(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= MIN as i64 => Ok(n as usize),
        _ => Err(format!("must be a whole number of at least {MIN}")),
    }
}

fn positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n > 0 && n <= u64::MAX as i128 => Ok(n as u64),
        Ok(_) => Err("must be a positive whole number".into()),
        Err(_) => Err("expected a whole number".into()),
    }
}

pub fn positive_usize(s: &str) -> Result<usize, String> {
    positive_u64(s).map(|n| n as usize)
}

fn non_negative_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if (0..=u64::MAX as i128).contains(&n) => Ok(n as u64),
        Ok(_) => Err("must not be negative".into()),
        Err(_) => Err("expected a whole number".into()),
    }
}

pub fn positive_i32(s: &str) -> Result<i32, String> {
    positive_u64(s).and_then(|n| i32::try_from(n).map_err(|_| "too large".to_string()))
}

fn positive_i16(s: &str) -> Result<i16, String> {
    positive_u64(s).and_then(|n| i16::try_from(n).map_err(|_| "too large".to_string()))
}

fn non_negative_i32(s: &str) -> Result<i32, String> {
    non_negative_u64(s).and_then(|n| i32::try_from(n).map_err(|_| "too large".to_string()))
}

fn parse_throughput(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of records/s, or -1".to_string())?;
    if !v.is_finite() || v == 0.0 {
        return Err("must be a positive number of records/s, or -1 for unthrottled".into());
    }
    Ok(v)
}

fn parse_acks(s: &str) -> Result<kbench_client::Acks, String> {
    s.parse()
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    s.parse()
}

/// A duration such as `10s`, `500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime_like(s)
}

fn parse_interval_ms(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<u64>() {
        Ok(ms) => Duration::from_millis(ms),
        Err(_) => humantime_like(s)?,
    };
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

fn humantime_like(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("expected a duration such as 10s, 500ms or 2m ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_interval_ms("5000").unwrap(), Duration::from_secs(5));
    }

    #[test]
    fn counts_reject_negatives() {
        assert!(positive_u64("-5").unwrap_err().contains("positive"));
        assert!(parse_throughput("0").is_err());
        assert_eq!(parse_throughput("-1").unwrap(), -1.0);
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_parses_into_its_type() {
        // clap checks a derived field's type against its parser only when the flag is used.
        let lines: [&[&str]; 5] = [
            &[
                "kbench",
                "produce",
                "--bootstrap-server",
                "h:1",
                "--topic",
                "t",
                "--num-records",
                "5",
                "--record-size",
                "10",
                "--throughput",
                "-1",
                "--duration",
                "1s",
                "--acks",
                "all",
                "--compression",
                "lz4",
                "--batch-size",
                "100",
                "--linger-ms",
                "0",
                "--max-in-flight",
                "2",
                "--partitions",
                "2",
                "--replication-factor",
                "1",
                "--partition",
                "0",
                "--pin",
                "produce=7",
                "-X",
                "linger.ms=1",
                "--producer-props",
                "acks=1",
                "--reporting-interval",
                "5s",
                "--json",
                "x.json",
                "--seed",
                "1",
                "--repetitions",
                "3",
            ],
            &[
                "kbench",
                "sweep",
                "--bootstrap-server",
                "h:1",
                "--repetitions",
                "3",
                "--seed",
                "1",
                "--quick",
                "--produce-versions",
                "3-11",
                "--fetch-versions",
                "4,17",
                "--stall-timeout",
                "5s",
                "--noise-threshold",
                "0.1",
                "--json",
                "s.json",
                "--markdown",
                "s.md",
            ],
            &[
                "kbench",
                "codec",
                "--quick",
                "--scaling",
                "--records",
                "1,10",
                "--shape",
                "small,1k",
                "--compression",
                "none,zstd",
                "--api",
                "produce",
                "--repetitions",
                "9",
                "--warmup",
                "1",
                "--block-records",
                "100",
                "--seed",
                "1",
                "--isolate",
                "--noise-threshold",
                "0.1",
                "--tolerance",
                "0.05",
                "--json",
                "c.json",
            ],
            &[
                "kbench",
                "compare",
                "a",
                "b",
                "--threshold",
                "0.1",
                "--seed",
                "2",
                "--markdown",
                "m.md",
            ],
            &[
                "kbench",
                "suite",
                "--out",
                "d",
                "--quick",
                "--seed",
                "1",
                "--bootstrap-server",
                "h:1",
                "--legacy-bootstrap-server",
                "h:2",
            ],
        ];
        for line in lines {
            if let Err(e) = Cli::try_parse_from(line) {
                panic!("{line:?}: {e}");
            }
        }
    }
}
