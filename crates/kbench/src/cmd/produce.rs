//! `kbench produce` and `kbench quickstart`: flags and client properties → a [`ProduceSpec`], the
//! target (a cluster, or the embedded broker), the library's produce job, and kafka-producer-perf-
//! test's lines, the final line and the result file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use clap::Args;
use kbench_bench::produce::{IntervalReport, ProduceObserver, ProduceRun, run_job};
use kbench_bench::result::{ResultDocument, rfc3339};
use kbench_bench::shape::{LoadShape, Scenario};
use kbench_bench::spec::{Span, parse_positive_span};
use kbench_bench::{BenchError, Keys, Payload, ProduceSpec, Stop};
use kbench_client::{ConnectionSettings, ProducerProperties};
use kbench_wire::{ApiKey, Compression, Pins};

use crate::args::{
    EXIT_FAILED, EXIT_INTERRUPTED, non_negative_i32, non_negative_u64, parse_acks,
    parse_compression, parse_duration, parse_interval_ms, parse_throughput, positive_i16,
    positive_i32, positive_u64, positive_usize, spec_error, write_json,
};
use crate::harness::{CliError, CliResult, Harness};

#[derive(Debug, Args, Default)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub limits: crate::args::LimitArgs,

    #[command(flatten)]
    pub distributed: crate::coordinator::DistributedArgs,

    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,

    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    #[command(flatten)]
    pub fault: crate::faults::FaultArgs,

    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic to produce to; created when missing (default kbench-perf).
    #[arg(long)]
    pub topic: Option<String>,

    /// Number of records to produce (default 1000000).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u64)]
    pub num_records: Option<u64>,

    /// Size of each record's value in bytes (default 100), or a range MIN..MAX drawn uniformly
    /// for each record (e.g. 100..1000).
    #[arg(long, conflicts_with = "payload_file", allow_negative_numbers = true, value_parser = parse_positive_span)]
    pub record_size: Option<Span<usize>>,

    /// Each record's key: none (the default: unkeyed, batches round-robin over partitions),
    /// round-robin[:COUNT], random[:COUNT] or zipf[:COUNT[:EXPONENT]] over COUNT keys (default
    /// 10000, exponent 1.0). Keyed records go to the partition Kafka's default partitioner picks
    /// (murmur2 of the key).
    #[arg(long, value_parser = Keys::parse)]
    pub keys: Option<Keys>,

    /// File whose lines (split by --payload-delimiter) are the record values, chosen at random.
    #[arg(long)]
    pub payload_file: Option<PathBuf>,

    /// Each record's value is its index in the run in decimal ("0", "1", …), as Kafka 4.x's
    /// kafka-producer-perf-test --payload-monotonic (each repetition counts from 0 again; not with
    /// --agents).
    #[arg(long, conflicts_with_all = ["payload_file", "record_size"])]
    pub payload_monotonic: bool,

    /// Delimiter between payloads in --payload-file (default: a newline).
    #[arg(long)]
    pub payload_delimiter: Option<String>,

    /// Throttle to about this many records/s; -1 (the default) means unthrottled.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_throughput)]
    pub throughput: Option<f64>,

    /// Stop after this long even if --num-records were not all sent (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// A rate ramp, e.g. '0..100000/s over 60s': the rate moves linearly; the run ends with it.
    #[arg(long, value_parser = LoadShape::parse_ramp, conflicts_with_all = ["throughput", "steps", "bursts", "scenario", "find_max_rate"])]
    pub ramp: Option<LoadShape>,

    /// Rate steps, e.g. '1000,5000,10000/s every 30s': each rate held in turn.
    #[arg(long, value_parser = LoadShape::parse_steps, conflicts_with_all = ["throughput", "bursts", "scenario", "find_max_rate"])]
    pub steps: Option<LoadShape>,

    /// Bursts over --throughput for --duration, e.g. '50000/s for 1s every 10s'.
    #[arg(long, requires_all = ["throughput", "duration"], conflicts_with_all = ["scenario", "find_max_rate"])]
    pub bursts: Option<String>,

    /// A scenario file (kbench's YAML): phases, each a duration and a rate or a ramp.
    #[arg(long, conflicts_with_all = ["throughput", "find_max_rate"])]
    pub scenario: Option<PathBuf>,

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

    /// Partitions when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub partitions: Option<i32>,

    /// Replication factor when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i16)]
    pub replication_factor: Option<i16>,

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
    /// (Kafka 4.x's name, KIP-1147: --command-property).
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE", visible_alias = "command-property")]
    pub producer_props: Vec<String>,

    /// A properties file, as the Kafka tools take it (security.protocol, ssl.*, and any producer
    /// property); -X and --producer-props override it. Repeatable.
    #[arg(
        long = "producer.config",
        visible_alias = "command-config",
        value_name = "FILE"
    )]
    pub producer_config: Vec<PathBuf>,

    /// Progress line interval in ms (kafka-producer-perf-test's unit, default 5000); "5s" also works.
    #[arg(long, value_parser = parse_interval_ms)]
    pub reporting_interval: Option<Duration>,

    /// Write the result document (docs/results.md) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// The length of the result's timeline windows (`intervals`, --histogram-log); default 1s.
    #[arg(long, value_parser = parse_duration)]
    pub timeline_interval: Option<Duration>,

    /// Write an HdrHistogram interval log (format 1.3: HistogramLogProcessor and
    /// HistogramLogAnalyzer read it): one line per timeline window and histogram (latency,
    /// service_time, publish_delay; µs).
    #[arg(long, value_name = "FILE")]
    pub histogram_log: Option<PathBuf>,

    /// Stamp every record (producer id, sequence, CRC-32C of the value, in a `kbench-verify`
    /// header) and read the topic back after the run: lost, duplicated, reordered, corrupted and
    /// unexpected records land in the result (`verification`); exit code 5 when any was lost,
    /// reordered or corrupted.
    #[arg(long, conflicts_with = "find_max_rate")]
    pub verify: bool,

    /// Produce in transactions under this `transactional.id` (kafka-producer-perf-test's flag):
    /// InitProducerId at the transaction coordinator, AddPartitionsToTxn, and EndTxn as each
    /// transaction ends. Implies enable.idempotence=true. The broker must offer EndTxn.
    #[arg(long, value_name = "ID")]
    pub transactional_id: Option<String>,

    /// How long each transaction stays open before it is committed, in ms (default 3000, as
    /// kafka-producer-perf-test).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=900_000))]
    pub transaction_duration_ms: Option<u64>,

    /// Seed for the payload generator (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Run the measured phase this many times (same topic, same connections); the result keeps each
    /// repetition's figures for `kbench compare` (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub repetitions: Option<usize>,

    /// Conditions the run must meet, e.g. 'p99<20ms,records_per_sec>=500000,failed==0': a table
    /// after the run, and exit code 3 when one fails.
    #[arg(long, value_name = "CONDITIONS")]
    pub slo: Option<String>,

    /// Search for the highest rate the target sustains: short throttled steps, doubling from
    /// 10000 records/s, then bisecting; each step is reported and the result is the chosen step's.
    #[arg(long, conflicts_with_all = ["throughput", "duration", "repetitions"])]
    pub find_max_rate: bool,

    /// --find-max-rate: each step's length (default 5s).
    #[arg(long, value_parser = parse_duration, requires = "find_max_rate")]
    pub step_duration: Option<Duration>,

    /// --find-max-rate: at most this many steps (default 12).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize, requires = "find_max_rate")]
    pub max_steps: Option<usize>,
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

/// Everything resolved from the command line, before any connection is made.
pub(crate) struct Plan {
    pub(crate) connection: ConnectionSettings,
    pub(crate) pins: Pins,
    pub(crate) spec: ProduceSpec,
    pub(crate) slo: Option<Vec<kbench_bench::slo::Condition>>,
}

/// Flags and properties → the spec: properties first (`-X`, then `--producer-props`), explicit flags
/// over them, everything else the spec's default. An error names the flag or property.
pub(crate) fn plan(args: &ProduceArgs) -> Result<Plan, String> {
    let mut client = ProducerProperties::default();
    let properties = crate::args::client_properties(
        &args.producer_config,
        &[
            ("-X", &args.property),
            ("--producer-props", &args.producer_props),
        ],
        |source, k, v| client.apply(source, k, v),
    )?;
    client.finish().map_err(|e| e.to_string())?;
    if let Some(bs) = &args.bootstrap_server {
        client.connection.bootstrap_servers = Some(bs.clone());
    }
    let producer = &mut client.producer;
    set(&mut producer.acks, args.acks);
    set(&mut producer.compression, args.compression);
    set(&mut producer.batch_size, args.batch_size);
    set(
        &mut producer.linger,
        args.linger_ms.map(Duration::from_millis),
    );
    set(&mut producer.max_in_flight, args.max_in_flight);
    if let Some(id) = &args.transactional_id {
        if id.is_empty() {
            return Err("--transactional-id: must not be empty".into());
        }
        producer.transactional_id = Some(id.clone());
    }
    if args.transaction_duration_ms.is_some() && producer.transactional_id.is_none() {
        return Err(
            "--transaction-duration-ms: only with --transactional-id (or -X transactional.id=…)"
                .into(),
        );
    }
    let mut pins = Pins::default();
    for p in &args.pin {
        pins.extend_from(p).map_err(|e| e.to_string())?;
    }
    pins.only(ProduceSpec::APIS).map_err(|e| e.to_string())?;
    let compression = client.producer.compression;
    if let Some(v) = pins.get(ApiKey::Produce)
        && v < compression.min_produce_version()
    {
        return Err(format!(
            "--pin produce={v} with --compression {}: {} needs Produce v{} or later (KIP-110)",
            compression.name(),
            compression.name(),
            compression.min_produce_version()
        ));
    }
    let mut spec = ProduceSpec {
        properties,
        producer: client.producer.clone(),
        ..ProduceSpec::default()
    };
    if let Some(path) = &args.payload_file {
        let delimiter = args.payload_delimiter.as_deref().unwrap_or("\\n");
        spec.payload = Payload::Lines(read_payloads(path, delimiter)?);
        spec.payload_file = Some(path.display().to_string());
    } else if args.payload_monotonic {
        spec.payload = Payload::Monotonic;
    } else if let Some(size) = args.record_size {
        spec.payload = if size.min == size.max {
            Payload::Random { size: size.min }
        } else {
            Payload::Uniform {
                min: size.min,
                max: size.max,
            }
        };
    }
    set(&mut spec.keys, args.keys);
    set(&mut spec.topic, args.topic.clone());
    set(&mut spec.num_records, args.num_records);
    set(&mut spec.partitions, args.partitions);
    set(&mut spec.replication_factor, args.replication_factor);
    set(&mut spec.reporting_interval, args.reporting_interval);
    set(&mut spec.timeline_interval, args.timeline_interval);
    set(&mut spec.repetitions, args.repetitions);
    set(&mut spec.seed, args.seed);
    spec.verify = args.verify;
    set(
        &mut spec.transaction_duration,
        args.transaction_duration_ms.map(Duration::from_millis),
    );
    spec.duration = args.duration;
    spec.partition = args.partition;
    spec.throughput = args.throughput.filter(|t| *t > 0.0);
    spec.shape = match (&args.ramp, &args.steps, &args.bursts, &args.scenario) {
        (Some(s), ..) | (_, Some(s), ..) => Some(s.clone()),
        (_, _, Some(b), _) => {
            let base = spec.throughput.take().unwrap_or(0.0);
            let total = args.duration.unwrap_or_default();
            Some(LoadShape::parse_bursts(b, base, total).map_err(|e| format!("--bursts {e}"))?)
        }
        (_, _, _, Some(path)) => Some(Scenario::read(path).map_err(|e| format!("--scenario {e}"))?),
        _ => None,
    };
    // A shape ends the run; the record count only bounds it when given.
    if spec.shape.is_some() && args.num_records.is_none() {
        spec.num_records = u64::MAX;
    }
    spec.limits = args.limits.limits();
    spec.validate().map_err(|e| spec_error(&e))?;
    let slo = crate::args::parse_slo(args.slo.as_deref(), "produce")?;
    Ok(Plan {
        connection: client.connection,
        pins,
        spec,
        slo,
    })
}

/// Overwrite `field` when the flag was given.
fn set<T>(field: &mut T, given: Option<T>) {
    if let Some(v) = given {
        *field = v;
    }
}

fn read_payloads(path: &Path, delimiter: &str) -> Result<Vec<Bytes>, String> {
    let text = kbench_client::input::read(path, kbench_client::input::PAYLOAD)
        .map_err(|e| format!("--payload-file {}: {e}", path.display()))?;
    let delimiter = delimiter.replace("\\n", "\n").replace("\\t", "\t");
    if delimiter.is_empty() {
        return Err("--payload-delimiter: must not be empty".into());
    }
    let text = String::from_utf8(text)
        .map_err(|_| format!("--payload-file {}: not UTF-8 text", path.display()))?;
    let lines: Vec<Bytes> = text
        .split(delimiter.as_str())
        .filter(|l| !l.is_empty())
        .map(|l| Bytes::copy_from_slice(l.as_bytes()))
        .collect();
    if lines.is_empty() {
        return Err(format!(
            "--payload-file {}: no payloads in it",
            path.display()
        ));
    }
    Ok(lines)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Quickstart,
}

/// `kbench produce`.
pub async fn run(args: ProduceArgs, mode: Mode) -> CliResult {
    let mut plan = plan(&args)?;
    crate::args::check_outputs(&[
        ("--json", args.json.as_deref()),
        ("--histogram-log", args.histogram_log.as_deref()),
    ])?;
    let faults = crate::faults::plan(&args.fault, plan.connection.bootstrap_servers.as_deref())?;
    if !faults.is_empty() && (args.find_max_rate || args.distributed.given()) {
        return Err(CliError::usage(
            "--fault: not with --find-max-rate or --agents (one run, one embedded broker)",
        ));
    }
    if let Some(agents) = args.distributed.list().await? {
        return distributed(&args, &plan, agents).await;
    }
    if args.find_max_rate {
        search_settings(&args)?;
    }
    let topic = plan.spec.topic.clone();
    let endpoint = args
        .metrics
        .attach("produce", &topic, &mut plan.spec.window_sink)
        .await?;
    // --find-max-rate reports its steps as lines; no bar.
    let bar_args = crate::progress::ProgressArgs {
        no_progress: args.progress.no_progress || args.find_max_rate,
        ..args.progress.clone()
    };
    let progress = crate::progress::Progress::new(
        &bar_args,
        crate::progress::Planned {
            records: Some(
                plan.spec
                    .num_records
                    .saturating_mul(plan.spec.repetitions as u64),
            ),
            duration: plan
                .spec
                .duration
                .or(plan.spec.shape.as_ref().map(|s| s.duration()))
                .filter(|_| plan.spec.repetitions == 1),
        },
    );
    if !args.find_max_rate {
        plan.spec.window_sink = std::mem::take(&mut plan.spec.window_sink).and(progress.sink(
            kbench_bench::produce::phase::TIMELINE_COUNTERS,
            "records",
            "latency",
        ));
    }
    let mut harness = Harness::start(
        faults,
        plan.connection.bootstrap_servers.as_deref(),
        endpoint,
    )
    .await?;
    let result = if args.find_max_rate {
        search(&args, &plan, &mut harness).await
    } else {
        execute(&args, &plan, &mut harness, mode, progress).await
    };
    harness.finish().await;
    result
}

/// kafka-producer-perf-test's lines, as the job goes (above the progress bar on a terminal).
struct Lines(Arc<crate::progress::Progress>);

impl ProduceObserver for Lines {
    fn interval(&self, w: &IntervalReport) {
        self.0.line(&w.line());
        if w.failed > 0 {
            self.0.line(&format!("{} records failed.", w.failed));
        }
    }
    fn repetition(&self, index: usize, of: usize) {
        if of > 1 {
            self.0.line(&format!("Repetition {} of {of}", index + 1));
        }
    }
    fn finished(&self, run: &ProduceRun) {
        self.0.always(&run.final_line());
    }
    fn verifying(&self) {
        eprintln!("kbench: reading the topic back to verify every record");
    }
    fn warning(&self, text: &str) {
        eprintln!("kbench: warning: {text}");
    }
}

/// The run, and what it says: kafka-producer-perf-test's lines, kbench's own, the result file.
async fn execute(
    args: &ProduceArgs,
    plan: &Plan,
    harness: &mut Harness,
    mode: Mode,
    progress: Arc<crate::progress::Progress>,
) -> CliResult {
    let cluster = plan
        .connection
        .cluster_config(harness.servers.clone(), plan.pins.clone());
    let recreate = crate::faults::topic_recreator(
        &plan.connection,
        &plan.pins,
        &plan.spec.topic,
        plan.spec.partitions,
        plan.spec.replication_factor,
    );
    let job = run_job(
        &plan.spec,
        cluster,
        harness.embedded_broker(),
        harness.stop.clone(),
        Arc::new(Lines(progress.clone())),
    );
    let outcome = harness.run(job, Some(recreate)).await;
    progress.finish();
    let interrupted = harness.interrupted();
    let outcome = outcome.map_err(|e| failure(&e, &harness.bootstrap(), interrupted))?;
    let run = &outcome.run;
    let mut code = 0;
    if run.records_failed > 0 {
        println!("{} records failed:", run.records_failed);
        for (error, n) in &run.errors {
            println!("  {n} × {error}");
        }
        code = EXIT_FAILED;
    }
    if run.records_unsent > 0 {
        println!(
            "{} records were due by the end and never sent; each one's wait from its intended time to the end is in the latency figures.",
            run.records_unsent
        );
    }
    for line in run.cluster.summary(&run.timeline, "latency") {
        println!("Cluster: {line}");
    }
    for reason in &run.saturation.reasons {
        println!(
            "WARNING: load generator saturated: {reason}. These figures are not the broker's."
        );
    }
    if let Some(note) = &run.saturation.paced_by_cluster {
        println!("NOTE: {note}.");
    }
    if let Some(why) = &run.aborted {
        eprintln!("kbench: the run stopped early: {why}");
        code = if interrupted {
            EXIT_INTERRUPTED
        } else {
            EXIT_FAILED
        };
    }
    if let Some(v) = &outcome.document.verification {
        println!("{}", v.line());
        if v.ok != Some(true) && code == 0 {
            code = crate::args::EXIT_VERIFY;
        }
    }
    if mode == Mode::Quickstart {
        print_summary(&outcome.document);
    }
    if let Some(path) = &args.histogram_log {
        crate::args::write_histogram_log(path, run.started_at, &run.timeline)
            .map_err(|e| CliError::failed(format!("--histogram-log {e}")))?;
        eprintln!("kbench: wrote {}", path.display());
    }
    let (mut document, slo_met) = crate::args::check_slo(plan.slo.as_deref(), &outcome.document);
    if !slo_met && code == 0 {
        code = crate::args::EXIT_SLO;
    }
    harness.report_faults(&mut document);
    if let Some(path) = &args.json {
        write_json(path, &document).map_err(|e| CliError::failed(format!("--json {e}")))?;
        if mode == Mode::Quickstart {
            println!("Result document: {}", path.display());
        } else {
            eprintln!("kbench: wrote {}", path.display());
        }
    }
    Ok(code)
}

/// `--find-max-rate`: the steps as they end, the chosen rate, and the chosen step's result.
async fn search(args: &ProduceArgs, plan: &Plan, harness: &mut Harness) -> CliResult {
    use kbench_bench::produce::search::find_max_rate;
    let settings = search_settings(args)?;
    let cluster = plan
        .connection
        .cluster_config(harness.servers.clone(), plan.pins.clone());
    let job = find_max_rate(
        &plan.spec,
        cluster,
        harness.embedded_broker(),
        &settings,
        harness.stop.clone(),
        |i, step| {
            println!(
                "Step {}: target {:.0} records/s: sent {:.1}/s, acked {:.1}/s, p99 {:.1} ms, publish delay p99 {:.1} ms: {}",
                i + 1,
                step.target_records_per_sec,
                step.sent_records_per_sec,
                step.acked_records_per_sec,
                step.latency_p99_us as f64 / 1000.0,
                step.publish_delay_p99_us as f64 / 1000.0,
                match &step.why_not {
                    None => "kept up".to_string(),
                    Some(why) => format!("did not keep up ({why})"),
                }
            )
        },
    );
    let found = harness.run(job, None).await;
    let interrupted = harness.interrupted();
    let found = found.map_err(|e| failure(&e, &harness.bootstrap(), interrupted))?;
    let (Some(chosen), Some(best)) = (found.chosen, found.best) else {
        return Err(CliError::failed(format!(
            "--find-max-rate: no step kept up, not even {:.0} records/s",
            found
                .steps
                .iter()
                .map(|s| s.target_records_per_sec)
                .fold(f64::INFINITY, f64::min)
        )));
    };
    if found.limit_found {
        println!(
            "Maximum sustainable rate: {chosen:.0} records/s (the highest target a step kept up with; {} steps of {} s)",
            found.steps.len(),
            settings.step_duration.as_secs_f64()
        );
    } else {
        println!(
            "Maximum sustainable rate: at least {chosen:.0} records/s (every step kept up: the search stopped after {} steps of {} s before finding the limit; raise --max-steps)",
            found.steps.len(),
            settings.step_duration.as_secs_f64()
        );
    }
    println!("{}", best.run.final_line());
    let (mut document, slo_met) = crate::args::check_slo(plan.slo.as_deref(), &best.document);
    if let Some(map) = document.as_object_mut() {
        map.insert(
            "max_rate".into(),
            serde_json::json!({
                "chosen_records_per_sec": chosen,
                "limit_found": found.limit_found,
                "step_duration_s": settings.step_duration.as_secs_f64(),
                "steps": found.steps,
            }),
        );
    }
    if let Some(path) = &args.json {
        write_json(path, &document).map_err(|e| CliError::failed(format!("--json {e}")))?;
        eprintln!("kbench: wrote {}", path.display());
    }
    Ok(if interrupted {
        EXIT_INTERRUPTED
    } else if !slo_met {
        crate::args::EXIT_SLO
    } else {
        0
    })
}

/// `--find-max-rate`'s steps, from the flags.
fn search_settings(
    args: &ProduceArgs,
) -> Result<kbench_bench::produce::search::SearchSettings, CliError> {
    use kbench_bench::produce::search::SearchSettings;
    let settings = SearchSettings {
        step_duration: args
            .step_duration
            .unwrap_or(SearchSettings::default().step_duration),
        max_steps: args
            .max_steps
            .unwrap_or(SearchSettings::default().max_steps),
        ..SearchSettings::default()
    };
    if settings.step_duration < Duration::from_millis(500) {
        return Err(CliError::usage("--step-duration: must be at least 500ms"));
    }
    Ok(settings)
}

/// `--agents`: the run split over the agents, started at one instant, merged exactly.
async fn distributed(
    args: &ProduceArgs,
    plan: &Plan,
    agents: crate::coordinator::AgentList,
) -> CliResult {
    use crate::coordinator::{Target, cli_connect, cli_finish, live_sum, run_produce};
    let refused = if args.find_max_rate {
        Some("--find-max-rate: searches from one machine; not with --agents")
    } else if args.verify {
        Some("--verify: not with --agents yet (verify each agent's topic separately)")
    } else if plan.spec.producer.transactional_id.is_some() {
        Some(
            "--transactional-id: not with --agents (every agent would take the same transactional.id and fence the others)",
        )
    } else if args.payload_monotonic {
        Some(
            "--payload-monotonic: not with --agents (each agent would count from 0, so the values would repeat)",
        )
    } else if !args.pin.is_empty() {
        Some("--pin: not with --agents yet (agents negotiate versions themselves)")
    } else if args.histogram_log.is_some() {
        Some("--histogram-log: not with --agents yet (each agent's windows are in its own result)")
    } else if args.metrics.metrics_listen.is_some() {
        Some("--metrics-listen: with --agents, scrape each agent's /metrics")
    } else {
        None
    };
    if let Some(e) = refused {
        return Err(CliError::usage(e));
    }
    let (bootstrap, coordinator) =
        cli_connect(plan.connection.bootstrap_servers.as_deref(), &agents).await?;
    println!(
        "kbench produce: {} agents, seed {}; clock offsets within {} µs",
        agents.urls.len(),
        plan.spec.seed,
        coordinator.clock_bound_us()
    );
    let target = Target {
        bootstrap,
        // Connection and security properties only: everything else is in the spec.
        properties: plan
            .spec
            .properties
            .iter()
            .filter(|(k, _)| kbench_client::is_connection_property(k) && k != "bootstrap.servers")
            .cloned()
            .collect(),
        run: kbench_bench::spec::fresh_id("kbench-produce"),
    };
    let stop = Stop::new();
    let last = Mutex::new((std::time::Instant::now(), 0u64));
    let total = agents.urls.len();
    let progress = |lives: &[(String, serde_json::Value)]| {
        let acked = live_sum(lives, "records_acked");
        let failed = live_sum(lives, "records_failed");
        let mut last = last.lock().expect("progress lock");
        let secs = last.0.elapsed().as_secs_f64().max(1e-9);
        println!(
            "{acked} records sent, {:.1} records/sec over {total} agents, {failed} failed.",
            acked.saturating_sub(last.1) as f64 / secs
        );
        *last = (std::time::Instant::now(), acked);
    };
    let job = run_produce(&coordinator, &plan.spec, &target, stop.token(), &progress);
    let (merged, interrupted) = crate::signals::until_stopped(job, &stop, None).await;
    let doc = merged.map_err(CliError::failed)?;
    let f = |k: &str| {
        doc.pointer(k)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    };
    let ms = |k: &str| f(&format!("/latency/{k}")) as u64 / 1000;
    // kafka-producer-perf-test's final line, from the merged document.
    println!(
        "{} records sent, {:.6} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
        f("/records_acked") as u64,
        f("/records_per_sec"),
        f("/mb_per_sec"),
        f("/latency/mean") / 1000.0,
        f("/latency/max") / 1000.0,
        ms("p50"),
        ms("p95"),
        ms("p99"),
        ms("p99.9"),
    );
    let failed = f("/records_failed") as u64;
    if failed > 0 {
        println!("{failed} records failed.");
    }
    cli_finish(
        &doc,
        plan.slo.as_deref(),
        args.json.as_deref(),
        failed > 0,
        interrupted,
    )
}

/// A job that could not run, as the command ends: said with the flag a user would change; exit 130
/// when the user stopped it, else 1.
pub(crate) fn failure(e: &BenchError, bootstrap: &str, interrupted: bool) -> CliError {
    let code = if interrupted {
        EXIT_INTERRUPTED
    } else {
        EXIT_FAILED
    };
    CliError::with_code(code, describe(e, bootstrap))
}

/// A job's error, said with the flag a user would change.
pub(crate) fn describe(e: &BenchError, bootstrap: &str) -> String {
    match e {
        BenchError::Spec(s) => spec_error(s),
        BenchError::Connect { reason, .. } => {
            format!("--bootstrap-server {bootstrap}: cannot connect: {reason}")
        }
        BenchError::Topic { topic, source } => format!("--topic {topic}: {source}"),
        other => other.to_string(),
    }
}

/// `kbench quickstart`: 100-byte records, unthrottled, acks=1, for `--duration`, to an embedded
/// broker, then a summary and a result file.
pub async fn quickstart(args: QuickstartArgs) -> CliResult {
    let json = args.json.clone().unwrap_or_else(|| {
        let stamp = rfc3339(SystemTime::now()).replace([':', '.'], "-");
        PathBuf::from("kbench-results").join(format!("quickstart-{stamp}.json"))
    });
    let produce = ProduceArgs {
        topic: Some("kbench-quickstart".into()),
        num_records: Some(u64::MAX),
        duration: Some(args.duration),
        acks: Some(kbench_client::Acks::Leader),
        json: Some(json),
        ..ProduceArgs::default()
    };
    println!(
        "kbench quickstart: producing 100-byte records for {} s, unthrottled, acks=1, to an embedded broker.",
        args.duration.as_secs_f64()
    );
    run(produce, Mode::Quickstart).await
}

fn print_summary(doc: &ResultDocument) {
    let cpu = doc
        .client_cpu_us_per_record
        .map_or_else(|| "n/a".into(), |c| format!("{c:.3} µs"));
    println!();
    println!("Summary");
    println!(
        "  {} records acknowledged ({} failed) in {:.1} s: {:.0} records/s, {:.2} MB/s",
        doc.records_acked, doc.records_failed, doc.duration_s, doc.records_per_sec, doc.mb_per_sec
    );
    println!(
        "  latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (record appended -> acknowledged)",
        doc.latency.p50 as f64 / 1000.0,
        doc.latency.p99 as f64 / 1000.0,
        doc.latency.max as f64 / 1000.0
    );
    println!(
        "  client CPU per record: {cpu} (kbench process only; the broker runs in its own process)"
    );
    let versions: Vec<String> = doc
        .negotiated_versions
        .iter()
        .map(|(k, v)| format!("{k} v{v}"))
        .collect();
    println!("  negotiated: {}", versions.join(", "));
}
