//! The command line: the subcommands and nothing else. Each subcommand's flags live with it in
//! `cmd/`, in the vocabulary of kafka-producer-perf-test and librdkafka.

use clap::{Parser, Subcommand};

use crate::cmd::broker::BrokerArgs;
use crate::cmd::codec::CodecArgs;
use crate::cmd::compare::CompareArgs;
use crate::cmd::consume::ConsumeArgs;
use crate::cmd::e2e::E2eArgs;
use crate::cmd::e2e_latency::E2eLatencyArgs;
use crate::cmd::history::HistoryArgs;
use crate::cmd::omb::OmbArgs;
use crate::cmd::produce::{ProduceArgs, QuickstartArgs};
use crate::cmd::suite::SuiteArgs;
use crate::cmd::sweep::SweepArgs;
use crate::serve::ServeArgs;

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
    /// Consume records and report throughput, like kafka-consumer-perf-test.
    Consume(Box<ConsumeArgs>),
    /// Run an OpenMessaging Benchmark workload file unmodified (OMB's lines and result JSON).
    Omb(Box<OmbArgs>),
    /// Embedded broker, a topic, a 10-second produce of 100-byte records, and a summary.
    Quickstart(QuickstartArgs),
    /// Run the embedded Tansu broker (in-memory storage) in the foreground.
    Broker(BrokerArgs),
    /// Tier 0: time every Produce and Fetch codec version with no broker.
    Codec(Box<CodecArgs>),
    /// Tier 1: every shared Produce and Fetch version, pinned cell by cell against one broker.
    Sweep(Box<SweepArgs>),
    /// The protocol-version load test in order: tier 0, tier 1 Produce, tier 1 Fetch, tier 2.
    Suite(SuiteArgs),
    /// End-to-end latency: N producers and one consumer in a fresh consumer group.
    E2e(Box<E2eArgs>),
    /// Kafka's kafka-e2e-latency.sh (EndToEndLatency): its 3.x positional or 4.x named arguments,
    /// one record at a time through one producer and one consumer, and its lines.
    E2eLatency(Box<E2eLatencyArgs>),
    /// The HTTP control API: POST /pub-sub-demo (seed-compatible) and /v1/runs.
    Serve(Box<ServeArgs>),
    /// A load-generating agent of distributed runs (--agents): the serve machinery plus /agent/v1.
    Agent(Box<ServeArgs>),
    /// One self-contained HTML page (inline SVG charts) from result documents of any kind.
    Report(crate::report::ReportArgs),
    /// Compare two sets of results (files or folders): ratio, 95 % CI and verdict per cell and metric.
    Compare(CompareArgs),
    /// The results store: import result documents, list benchmarks, show a metric's runs.
    History(HistoryArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        // First prove the check is live in this build (the workspace keeps clap's debug assertions on
        // in release): a command with one long flag twice must be refused.
        let broken = std::panic::catch_unwind(|| {
            clap::Command::new("broken")
                .arg(clap::Arg::new("a").long("same"))
                .arg(clap::Arg::new("b").long("same"))
                .debug_assert();
        });
        assert!(
            broken.is_err(),
            "clap's debug assertions are off: cli_is_well_formed would check nothing"
        );
        Cli::command().debug_assert();
    }

    /// Parses `line`, or fails naming it. clap checks a derived field's type against its parser
    /// only when the flag is used: hence the tests below, each a command line full of flags.
    fn parses(line: &[&str]) {
        if let Err(e) = Cli::try_parse_from(line) {
            panic!("{line:?}: {e}");
        }
    }

    /// `kbench omb`: the workload and driver files, the durations, the outputs, `--slo`.
    #[test]
    fn omb_flags_parse_into_their_types() {
        parses(&[
            "kbench",
            "omb",
            "w.yaml",
            "-d",
            "d.yaml",
            "--bootstrap-server",
            "h:1",
            "--test-duration",
            "5s",
            "--warmup-duration",
            "0s",
            "--reporting-interval",
            "1s",
            "--drain",
            "2s",
            "--step-duration",
            "1s",
            "-o",
            "o.json",
            "--json",
            "k.json",
            "--seed",
            "7",
            "--slo",
            "records_failed==0",
        ]);
    }

    /// `kbench produce`: sizes, keys, throughput, producer settings, pins and properties.
    #[test]
    fn produce_flags_parse_into_their_types() {
        parses(&[
            "kbench",
            "produce",
            "--bootstrap-server",
            "h:1",
            "--topic",
            "t",
            "--num-records",
            "5",
            "--record-size",
            "10..20",
            "--keys",
            "zipf:100:1.1",
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
        ]);
    }

    /// `kbench sweep`: repetitions, version lists, thresholds and outputs.
    #[test]
    fn sweep_flags_parse_into_their_types() {
        parses(&[
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
        ]);
    }

    /// `kbench codec`: the shapes, codecs and APIs, the repetitions and thresholds.
    #[test]
    fn codec_flags_parse_into_their_types() {
        parses(&[
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
        ]);
    }

    /// `kbench compare`: the inputs, the threshold, the seed and the Markdown.
    #[test]
    fn compare_flags_parse_into_their_types() {
        parses(&[
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
        ]);
    }

    /// `kbench suite`: the output folder and both brokers.
    #[test]
    fn suite_flags_parse_into_their_types() {
        parses(&[
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
        ]);
    }
}
