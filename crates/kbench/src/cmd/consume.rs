//! `kbench consume`: kafka-consumer-perf-test's flags and lines over the library's consume job,
//! then kbench's own figures (client CPU per record, Fetch latency, versions) and the result file.
//! With no `--bootstrap-server` (or with `--produce-first`) the topic is first filled by the produce
//! workload, unmeasured, so that there is something to read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kbench_bench::consume::{
    ConsumeMode, ConsumeObserver, ConsumeSpec, ConsumeWindow, StartAt, backlog, run_consume_job,
};
use kbench_bench::{ProduceRun, ProduceSpec};
use kbench_client::{ClusterConfig, ConnectionSettings, ConsumerProperties, OffsetReset};
use kbench_wire::{Compression, Pins};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::args::{
    EXIT_FAILED, EXIT_INTERRUPTED, parse_compression, parse_interval_ms, positive_u64,
    positive_usize, set, spec_error,
};
use crate::harness::{CliError, CliResult, Harness};
use crate::perf_test::{DateFormat, consumer_final, consumer_header, consumer_window};

#[derive(Debug, Args, Default)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub fault: crate::faults::FaultArgs,

    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker
    /// and fills the topic first (see --produce-first).
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic to read (default kbench-perf, what `kbench produce` writes).
    #[arg(long)]
    pub topic: Option<String>,

    /// Read every topic whose whole name this regex matches (Kafka 4.x's --include: one
    /// consumer subscribed to the pattern), found as the run starts, internal topics left out;
    /// --num-records and --timeout count every topic's records. Several topics: each is read by
    /// members of its own (--consumers per topic) in the one group; the result's `topics` has
    /// each topic's own figures.
    #[arg(long, value_name = "REGEX", conflicts_with_all = ["topic", "partition", "produce_first", "produce_rate", "latest_values"])]
    pub include: Option<String>,

    /// Number of records to read (default 1000000); Kafka 4.x's name, KIP-1147: --num-records.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u64, visible_alias = "num-records")]
    pub messages: Option<u64>,

    /// Consumer group to read in (default perf-consumer-N, a fresh one, as kafka-consumer-perf-test).
    #[arg(long, conflicts_with = "partition")]
    pub group: Option<String>,

    /// Read these partitions, assigned, with no group (repeatable, or a comma list).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub partition: Vec<i32>,

    /// Assigned partitions only: start at `earliest`, `latest` or this offset (default earliest).
    #[arg(long, requires = "partition")]
    pub offset: Option<String>,

    /// With no committed offset, start at the latest offset instead of the earliest.
    #[arg(long)]
    pub from_latest: bool,

    /// Bytes per partition per fetch (max.partition.fetch.bytes; default 1048576).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub fetch_size: Option<usize>,

    /// End the run when no record arrived for this many ms (default 10000); "10s" also works.
    #[arg(long, value_parser = parse_interval_ms)]
    pub timeout: Option<Duration>,

    /// Progress interval in ms (default 5000; lines only with --show-detailed-stats).
    #[arg(long, value_parser = parse_interval_ms)]
    pub reporting_interval: Option<Duration>,

    /// Print a line per reporting interval instead of one final line.
    #[arg(long)]
    pub show_detailed_stats: bool,

    /// Do not print the header line.
    #[arg(long)]
    pub hide_header: bool,

    /// At the end, print the run's figures as Kafka's tool prints its consumer's metrics
    /// (`Metric Name   Value`): under Java's names (consumer-fetch-manager-metrics,
    /// consumer-coordinator-metrics) where the figure means the same, in kbench-consumer-metrics
    /// where it is kbench's own.
    #[arg(long)]
    pub print_metrics: bool,

    /// Time format of the lines (Java SimpleDateFormat's yyyy MM dd HH mm ss SSS; UTC).
    #[arg(long, default_value = "yyyy-MM-dd HH:mm:ss:SSS")]
    pub date_format: String,

    /// Consumer properties file, as the Kafka tools take it; -X overrides it. Repeatable.
    #[arg(
        long = "consumer.config",
        visible_alias = "command-config",
        value_name = "FILE"
    )]
    pub consumer_config: Vec<PathBuf>,

    /// Client property, Java or librdkafka name (repeatable): -X fetch.max.wait.ms=100
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub property: Vec<String>,

    #[command(flatten)]
    pub pins: crate::args::PinArgs,

    /// Fill the topic with --messages records before reading (unmeasured; always done with the
    /// embedded broker).
    #[arg(long)]
    pub produce_first: bool,

    /// Backlog drain: while the consumer reads the --messages records already there (the
    /// backlog, e.g. from --produce-first), a producer keeps producing this many records/s to
    /// the topic (open loop, its own connections), as OMB's backlog drain; the result gets the
    /// producer's figures under `backlog`.
    #[arg(long, value_parser = crate::args::parse_throughput)]
    pub produce_rate: Option<f64>,

    /// Records' value size when filling the topic (default 100).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub record_size: Option<usize>,

    /// Compression when filling the topic (default none).
    #[arg(long, value_parser = parse_compression)]
    pub compression: Option<Compression>,

    /// Partitions of the topic when filling creates it (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::args::positive_i32)]
    pub partitions: Option<i32>,

    /// Check every record's `kbench-verify` stamp (written by `kbench produce --verify`): order
    /// per producer and partition, duplicates, checksums and sequence gaps land in the result
    /// (`verification`); exit code 5 when a record was missing, reordered or corrupted.
    #[arg(long)]
    pub verify: bool,

    /// Check that every key's last value read is its last write, as FILE says (`kbench produce
    /// --latest-values FILE` wrote it): what a compacted topic must keep (kgo-verifier's
    /// latest-value map). Read the whole topic (the default: from the earliest offset, until
    /// --messages or --timeout); exit code 5 when a key is missing, stale or resurrected.
    #[arg(long, value_name = "FILE", conflicts_with = "produce_first")]
    pub latest_values: Option<PathBuf>,

    /// Members of the group reading together, each with its own connections and member id
    /// (default 1): they share --messages and --timeout, and the result's `group` block has
    /// each member, each rebalance (JoinGroup and SyncGroup times, how long each partition had no
    /// member reading it) and each group fault (--fault 'at=5s consumer-join=1',
    /// 'consumer-leave=1', 'consumer-crash=1', 'consumer-restart=1').
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub consumers: Option<u32>,

    #[command(flatten)]
    pub output: crate::args::OutputArgs,

    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,

    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    #[command(flatten)]
    pub slo: crate::args::SloArgs,

    #[command(flatten)]
    pub distributed: crate::coordinator::DistributedArgs,
}

/// Everything resolved from the command line.
pub(crate) struct Plan {
    pub(crate) connection: ConnectionSettings,
    pub(crate) pins: Pins,
    pub(crate) spec: ConsumeSpec,
    pub(crate) date: DateFormat,
    pub(crate) slo: Option<Vec<kbench_bench::slo::Condition>>,
}

/// Flags and properties → the spec: properties first (files, then -X), flags over them.
pub(crate) fn plan(args: &ConsumeArgs) -> Result<Plan, String> {
    let mut client = ConsumerProperties::default();
    let given = crate::args::client_properties(
        &args.consumer_config,
        &[("-X", &args.property)],
        |source, k, v| client.apply(source, k, v),
    )?;
    client.finish().map_err(|e| e.to_string())?;
    if let Some(bs) = &args.bootstrap_server {
        client.connection.bootstrap_servers = Some(bs.clone());
    }
    let pins = args.pins.pins(ConsumeSpec::APIS)?;
    let mut spec = ConsumeSpec {
        properties: given,
        ..ConsumeSpec::default()
    };
    // kafka-consumer-perf-test starts at the earliest offset (the spec's default) unless
    // --from-latest; an explicit auto.offset.reset property is kept.
    spec.take_properties(&client);
    if args.from_latest {
        spec.start = StartAt::Reset(OffsetReset::Latest);
    }
    spec.verify = args.verify;
    if let Some(n) = args.consumers {
        spec.consumers = n;
    }
    if let Some(path) = &args.latest_values {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--latest-values {}: {e}", path.display()))?;
        let file: kbench_bench::latest::LatestFile = serde_json::from_str(&text)
            .map_err(|e| format!("--latest-values {}: {e}", path.display()))?;
        spec.latest_values = Some(file);
    }
    if !spec.deserializer.is_empty() {
        if !spec.deserializer.contains_key("schema.registry.url") {
            let key = spec.deserializer.keys().next().cloned().unwrap_or_default();
            return Err(format!(
                "{key}: a deserializer property; give -X schema.registry.url=URL to decode the values"
            ));
        }
        kbench_bench::schema::decode::RegistryReader::new(&spec.deserializer)
            .map_err(|e| e.to_string())?;
    }
    set(&mut spec.topic, args.topic.clone());
    if let Some(pattern) = &args.include {
        if client.connection.bootstrap_servers.is_none() {
            return Err(format!(
                "--include {pattern:?} needs --bootstrap-server: the embedded broker holds only the topic kbench fills (give --topic)"
            ));
        }
        spec.include = Some(pattern.clone());
    }
    set(&mut spec.messages, args.messages);
    if let Some(g) = &args.group {
        spec.mode = ConsumeMode::Group {
            group_id: g.clone(),
        };
    }
    if !args.partition.is_empty() {
        spec.mode = ConsumeMode::Assign {
            partitions: args.partition.clone(),
        };
        spec.commit = false;
    }
    if let Some(o) = &args.offset {
        spec.start =
            match o.as_str() {
                "earliest" | "beginning" => StartAt::Reset(OffsetReset::Earliest),
                "latest" | "end" => StartAt::Reset(OffsetReset::Latest),
                n => StartAt::Offset(n.parse::<i64>().map_err(|_| {
                    format!("--offset {n:?}: expected earliest, latest or an offset")
                })?),
            };
    }
    set(
        &mut spec.consumer.max_partition_fetch_bytes,
        args.fetch_size,
    );
    set(&mut spec.timeout, args.timeout);
    set(&mut spec.reporting_interval, args.reporting_interval);
    set(&mut spec.timeline_interval, args.output.timeline_interval);
    spec.validate().map_err(|e| spec_error(&e))?;
    let date = DateFormat::parse(&args.date_format)
        .map_err(|e| format!("--date-format {:?}: {e}", args.date_format))?;
    let slo = args.slo.conditions("consume")?;
    Ok(Plan {
        connection: client.connection,
        pins,
        spec,
        date,
        slo,
    })
}

/// The detailed lines, as the run goes (above the progress bar on a terminal), under the header
/// line, which is printed before the first figure rather than before the run: a run that fails
/// (a missing topic) prints its error alone, not a header with nothing under it.
struct Lines {
    detailed: bool,
    date: DateFormat,
    progress: Arc<crate::progress::Progress>,
    header: Option<String>,
    header_printed: std::sync::atomic::AtomicBool,
}

impl Lines {
    /// The lines of `args`' read, above `progress`; a header only when neither hidden nor quiet.
    fn new(args: &ConsumeArgs, plan: &Plan, progress: Arc<crate::progress::Progress>) -> Lines {
        Lines {
            detailed: args.show_detailed_stats,
            date: plan.date.clone(),
            progress,
            header: (!args.hide_header && !args.progress.quiet)
                .then(|| consumer_header(args.show_detailed_stats).to_string()),
            header_printed: Default::default(),
        }
    }

    fn header(&self) {
        use std::sync::atomic::Ordering;
        if let Some(h) = &self.header
            && !self.header_printed.swap(true, Ordering::Relaxed)
        {
            self.progress.line(h);
        }
    }
}

impl ConsumeObserver for Lines {
    fn interval(&self, w: &ConsumeWindow) {
        if self.detailed {
            self.header();
            self.progress.line(&consumer_window(w, &self.date));
        }
    }
}

/// `kbench consume`.
pub async fn run(args: ConsumeArgs) -> CliResult {
    let mut plan = plan(&args)?;
    args.output.check()?;
    if let Some(agents) = args.distributed.list().await? {
        return distributed(&args, &plan, agents).await;
    }
    let (faults, members) =
        crate::faults::plan_consume(&args.fault, plan.connection.bootstrap_servers.as_deref())?;
    plan.spec.member_faults = members;
    plan.spec
        .validate()
        .map_err(|e| crate::args::spec_error(&e))?;
    let topic = plan
        .spec
        .include
        .clone()
        .unwrap_or_else(|| plan.spec.topic.clone());
    let endpoint = args
        .metrics
        .attach("consume", &topic, &mut plan.spec.window_sink)
        .await?;
    let mut harness = Harness::start(
        faults,
        plan.connection.bootstrap_servers.as_deref(),
        endpoint,
    )
    .await?;
    let result = execute(&args, &plan, &mut harness).await;
    harness.finish().await;
    result
}

/// The fill (on an embedded broker, or with --produce-first), the measured read with any producer
/// beside its drain, and what it says: kafka-consumer-perf-test's lines, kbench's own, the result.
async fn execute(args: &ConsumeArgs, plan: &Plan, harness: &mut Harness) -> CliResult {
    let bootstrap = harness.bootstrap();
    let cluster = plan
        .connection
        .cluster_config(harness.servers.clone(), plan.pins.clone());
    if harness.embedded_broker() || args.produce_first {
        fill(args, plan, &cluster, harness).await?;
    }
    // The bar starts with the measured run (after any fill), fed by its windows.
    let progress = crate::progress::Progress::new(
        &args.progress,
        crate::progress::Planned {
            records: Some(plan.spec.messages),
            duration: None,
        },
    );
    let mut spec = plan.spec.clone();
    spec.window_sink = std::mem::take(&mut spec.window_sink).and(progress.sink(
        kbench_bench::consume::TIMELINE_COUNTERS,
        "consumed",
        "fetch_latency",
    ));
    // The producer beside the drain stops when the drain is over, as at the end of a duration.
    let finish = CancellationToken::new();
    let beside = produce_beside(args, plan, &cluster, harness, &finish).await?;
    let lines = Arc::new(Lines::new(args, plan, progress.clone()));
    let job = run_consume_job(
        &spec,
        cluster,
        harness.embedded_broker(),
        harness.stop.clone(),
        lines.clone(),
    );
    // Faults count from the measured run's start (after the fill). A restarted in-memory broker
    // comes back without the topic: what it held is gone, and the run says so.
    let outcome = harness.run(job, None).await;
    let interrupted = harness.interrupted();
    progress.finish();
    finish.cancel();
    let beside = match beside {
        Some((rate, task)) => Some((
            rate,
            task.await
                .map_err(|e| CliError::failed(format!("the producer beside the drain: {e}")))?,
        )),
        None => None,
    };
    let outcome = outcome.map_err(|e| crate::harness::failure(&e, &bootstrap, interrupted))?;
    // The run has figures: the header goes above them (and above a time-out's warning, as
    // kafka-consumer-perf-test prints it), if no detailed line has put it there already.
    lines.header();
    conclude(args, plan, harness, interrupted, &outcome, beside.as_ref())
}

/// The unmeasured fill, so that the read has records: `--messages` of them (stamped and read
/// back with `--verify`, so that the measured read has something to verify).
async fn fill(
    args: &ConsumeArgs,
    plan: &Plan,
    cluster: &ClusterConfig,
    harness: &Harness,
) -> Result<(), CliError> {
    let spec = producer_spec(args, plan, |s| {
        s.num_records = plan.spec.messages;
        s.verify = plan.spec.verify;
    })?;
    eprintln!(
        "kbench: filling topic {} with {} records of {} (unmeasured)",
        spec.topic,
        spec.num_records,
        spec.payload.describe()
    );
    backlog::fill(&spec, cluster.clone(), harness.embedded_broker())
        .await
        .map_err(|e| {
            let why = crate::harness::describe(&e, &harness.bootstrap());
            CliError::failed(format!("filling the topic: {why}"))
        })
}

/// With `--produce-rate`, the producer beside the drain, started (it runs until `finish` is
/// cancelled or the run stops): its rate and its task.
async fn produce_beside(
    args: &ConsumeArgs,
    plan: &Plan,
    cluster: &ClusterConfig,
    harness: &Harness,
    finish: &CancellationToken,
) -> Result<Option<(f64, JoinHandle<ProduceRun>)>, CliError> {
    let Some(rate) = args.produce_rate.filter(|r| *r > 0.0) else {
        return Ok(None);
    };
    let spec = producer_spec(args, plan, |s| {
        s.num_records = u64::MAX;
        s.throughput = Some(rate);
    })?;
    let task = backlog::produce_beside(spec, cluster.clone(), harness.stop.clone(), finish.clone())
        .await
        .map_err(|e| match e {
            kbench_bench::BenchError::Run(why) => CliError::usage(format!("--produce-rate: {why}")),
            e => CliError::failed(format!("the producer beside the drain: {e}")),
        })?;
    Ok(Some((rate, task)))
}

/// What a finished read says: the histogram log, its lines, its verification and the producer
/// beside its drain; the result file (with any `backlog` block, `--slo` and the faults applied);
/// the exit code (`interrupted` as it was when the read ended).
fn conclude(
    args: &ConsumeArgs,
    plan: &Plan,
    harness: &mut Harness,
    interrupted: bool,
    outcome: &kbench_bench::consume::ConsumeOutcome,
    beside: Option<&(f64, ProduceRun)>,
) -> CliResult {
    let run = &outcome.run;
    let doc = &outcome.document;
    args.output
        .write_histogram_log(run.started_at, &run.timeline)?;
    print_lines(args, plan, outcome);
    let mut code = 0;
    // kafka-consumer-perf-test exits 0 after its time-out warning; a time-out with errors behind it
    // (a broker that went away) is a failed run.
    if run.timed_out && !run.errors.is_empty() {
        code = EXIT_FAILED;
        // The reason for the exit code, in one line (the time-out warning alone reads as exit 0's).
        let mut errors = run.errors.keys();
        let first = errors.next().map(String::as_str).unwrap_or_default();
        let more = match errors.count() {
            0 => String::new(),
            n => format!(" (and {n} more error(s) in the result)"),
        };
        eprintln!("kbench: the run failed: it timed out after errors: {first}{more}");
    }
    if let Some(v) = &run.verification {
        println!("{}", v.line());
        if v.ok != Some(true) {
            code = crate::args::EXIT_VERIFY;
        }
    }
    if let Some(g) = &outcome.document.group {
        for line in group_lines(g) {
            println!("{line}");
        }
    }
    // Records on the broker the run never read: in a group (its members stopped reading them) a
    // failed run, never "lost"; assigned partitions, kafka-consumer-perf-test's time-out, said.
    if let Some(u) = &outcome.document.unread {
        println!("{}", unread_line(u));
        if u.group {
            code = EXIT_FAILED;
        }
    }
    // `--include`'s topics: each topic's members, and a topic whose verification failed (the
    // summed line above then says FAILED), named.
    for (topic, part) in &outcome.document.topics {
        if let Some(v) = part.verification.as_ref().filter(|v| v.ok != Some(true)) {
            println!("Topic {topic}: {}", v.line());
        }
        for line in part.group.iter().flat_map(group_lines) {
            println!("Topic {topic}: {line}");
        }
    }
    if let Some(l) = &run.latest_values {
        println!("{}", l.line());
        if !l.ok {
            code = crate::args::EXIT_VERIFY;
        }
    }
    if let Some(d) = &run.value_decoding {
        println!("{}", d.line());
        if args.verify && d.failed() > 0 {
            code = crate::args::EXIT_VERIFY;
        }
    }
    let mut doc_value = serde_json::to_value(doc).unwrap_or_default();
    if let Some((rate, p)) = beside {
        let (report, failed) = backlog_report(run, *rate, p);
        if failed {
            code = EXIT_FAILED;
        }
        if let Some(map) = doc_value.as_object_mut() {
            map.insert("backlog".into(), report);
        }
    }
    if let Some(why) = &run.aborted {
        eprintln!("kbench: the run stopped early: {why}");
        code = if interrupted {
            EXIT_INTERRUPTED
        } else {
            EXIT_FAILED
        };
    }
    let (mut document, slo_met) = crate::args::check_slo(plan.slo.as_deref(), &doc_value);
    if !slo_met && code == 0 {
        code = crate::args::EXIT_SLO;
    }
    harness.report_faults(&mut document);
    args.output.write_json(&document)?;
    Ok(code)
}

/// What a run that timed out left unread on the broker, said in one line.
fn unread_line(u: &kbench_bench::consume::Unread) -> String {
    let parts: Vec<String> = u
        .partitions
        .iter()
        .map(|(p, part)| {
            format!(
                "{p}: {} at offsets {}..{} ({})",
                part.records, part.from, part.to, part.reason
            )
        })
        .collect();
    if u.group {
        format!(
            "ERROR: {} records on the broker were not read when the run timed out (unread, not lost: the group stopped reading them): {}.",
            u.records,
            parts.join("; ")
        )
    } else {
        format!(
            "WARNING: {} records on the broker were not read when the run timed out (unread, not lost): {}.",
            u.records,
            parts.join("; ")
        )
    }
}

/// A group run, said: its members, each rebalance and each fault that did less than asked.
fn group_lines(g: &kbench_bench::consume::group::GroupReport) -> Vec<String> {
    said_group(g, "what was written to them since is not in these figures")
}

/// A group run's lines, `unread` saying what became of the records of partitions nobody read
/// at the end (consume leaves them out; e2e counts them late or lost).
pub(crate) fn said_group(
    g: &kbench_bench::consume::group::GroupReport,
    unread: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let records: Vec<String> = g
        .members
        .iter()
        .map(|m| {
            let dup = m
                .duplicated
                .map_or_else(String::new, |d| format!(", {d} duplicated"));
            format!("#{} {} records{dup} ({})", m.member, m.records, m.ended)
        })
        .collect();
    out.push(format!(
        "Group: {} members: {}.",
        g.members.len(),
        records.join("; ")
    ));
    for r in &g.rebalances {
        let worst = r
            .partitions_unowned_ms
            .values()
            .fold(0.0f64, |a, b| a.max(*b));
        let takeover = r.takeover_ms.map_or_else(String::new, |ms| {
            format!(
                "; every partition that moved read again {:.0} ms after the fault",
                ms
            )
        });
        out.push(format!(
            "Rebalance at {:.1} s ({}): {:.0} ms; JoinGroup up to {:.0} ms, SyncGroup up to {:.0} ms; {} partitions without a reader, the longest {worst:.0} ms{takeover}.",
            r.began_s,
            r.cause,
            (r.ended_s - r.began_s) * 1e3,
            r.join_group_ms_max,
            r.sync_group_ms_max,
            r.partitions_unowned_ms.len()
        ));
    }
    if !g.partitions_unowned_at_end_ms.is_empty() {
        let list: Vec<String> = g
            .partitions_unowned_at_end_ms
            .iter()
            .map(|(p, ms)| format!("{p} (for {:.1} s)", ms / 1e3))
            .collect();
        out.push(format!(
            "WARNING: partitions without a reader when the run ended: {}. The coordinator never gave them to a live member; {unread}.",
            list.join(", ")
        ));
    }
    for f in &g.faults {
        if let Some(e) = &f.error {
            out.push(format!("Group fault {}: {e}.", f.fault));
        }
    }
    out
}

/// The producer beside the drain, said: its line, its saturation warnings, its errors when records
/// failed; its `backlog` block for the result, and whether any of its records failed.
fn backlog_report(
    run: &kbench_bench::consume::ConsumeRun,
    rate: f64,
    p: &ProduceRun,
) -> (serde_json::Value, bool) {
    let report = backlog::BacklogReport::of(run.records, run.elapsed, rate, p);
    println!("{}", report.line());
    for reason in &p.saturation.reasons {
        println!(
            "WARNING: load generator saturated: {reason}. These figures are not the broker's."
        );
    }
    if p.records_failed > 0 {
        for (e, n) in &p.errors {
            eprintln!("kbench: producer: {n} × {e}");
        }
    }
    (
        serde_json::to_value(&report).unwrap_or_default(),
        p.records_failed > 0,
    )
}

/// kafka-consumer-perf-test's lines after the run, then kbench's own figures.
fn print_lines(args: &ConsumeArgs, plan: &Plan, outcome: &kbench_bench::consume::ConsumeOutcome) {
    let (run, doc) = (&outcome.run, &outcome.document);
    if run.timed_out {
        println!(
            "WARNING: Exiting before consuming the expected number of messages: timeout ({} ms) exceeded. You can use the --timeout option to increase the timeout.",
            plan.spec.timeout.as_millis()
        );
    }
    if !args.show_detailed_stats {
        println!("{}", consumer_final(run, &plan.date));
    }
    if args.print_metrics {
        let metrics = crate::perf_test::consumer_metrics(doc, &plan.connection.client_id);
        println!("{}", crate::perf_test::metrics_table(&metrics));
    }
    let cpu = doc.client_cpu_us_per_record.map_or_else(
        || "n/a".into(),
        |c| {
            format!(
                "{c:.3} µs/record (user {:.3}, sys {:.3})",
                doc.client_cpu_user_s * 1e6 / run.records.max(1) as f64,
                doc.client_cpu_sys_s * 1e6 / run.records.max(1) as f64
            )
        },
    );
    println!(
        "kbench: {} records in {} batches, CRC-checked; client CPU {cpu}",
        run.records, run.batches
    );
    let l = &doc.fetch_latency;
    println!(
        "kbench: fetch latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} fetches ({} empty)",
        l.p50 as f64 / 1000.0,
        l.p99 as f64 / 1000.0,
        l.max as f64 / 1000.0,
        run.fetches,
        run.empty_fetches
    );
    let versions: Vec<String> = doc
        .negotiated_versions
        .iter()
        .map(|(k, v)| {
            let pinned = doc.pinned_versions.get(k).is_some_and(|p| p == v);
            format!("{k} v{v}{}", if pinned { " (pinned)" } else { "" })
        })
        .collect();
    println!("kbench: versions {}", versions.join(", "));
    if doc.offsets_skipped > 0 {
        println!(
            "kbench: {} offsets were passed over (no answer held them: a compacted log, or a broker answering from the wrong place)",
            doc.offsets_skipped
        );
    }
    for line in run.cluster.summary(&run.timeline, "fetch_latency") {
        println!("Cluster: {line}");
    }
    for (error, n) in &run.errors {
        eprintln!("kbench: {n} × {error}");
    }
    if run.commits_refused > 0 {
        eprintln!(
            "kbench: {} commits refused by the coordinator while the group rebalanced (not errors: as Java's consumer, the positions are committed later or by the partitions' next owner)",
            run.commits_refused
        );
    }
}

/// The spec of a producer this command runs (the fill, the load beside a drain): the topic, the
/// fill flags, acks=1, no progress lines; `adjust` sets the rest; checked.
fn producer_spec(
    args: &ConsumeArgs,
    plan: &Plan,
    adjust: impl FnOnce(&mut ProduceSpec),
) -> Result<ProduceSpec, CliError> {
    let mut spec = ProduceSpec {
        topic: plan.spec.topic.clone(),
        partitions: args.partitions.unwrap_or(1),
        reporting_interval: Duration::from_secs(3600),
        ..ProduceSpec::default()
    };
    spec.producer.acks = kbench_client::Acks::Leader;
    spec.producer.compression = args.compression.unwrap_or(Compression::None);
    if let Some(size) = args.record_size {
        spec.payload = kbench_bench::Payload::Random { size };
    }
    adjust(&mut spec);
    spec.validate()
        .map_err(|e| CliError::usage(spec_error(&e)))?;
    Ok(spec)
}

/// `--agents`: the read split over the agents (members in the run's group, or the `--partition`s
/// dealt out), started at one instant, merged exactly.
async fn distributed(
    args: &ConsumeArgs,
    plan: &Plan,
    agents: crate::coordinator::AgentList,
) -> CliResult {
    use crate::coordinator::{Target, cli_connect, cli_finish, live_sum, run_consume};
    let refused = if args.produce_first || args.produce_rate.is_some() {
        Some(
            "--produce-first, --produce-rate: not with --agents (fill the topic first, e.g. with `kbench produce --agents`)",
        )
    } else if !args.fault.faults.is_empty() {
        Some("--fault: not with --agents (group faults act on one process's members)")
    } else if args
        .consumers
        .is_some_and(|n| (n as usize) < agents.urls.len())
    {
        Some("--consumers: fewer members than agents (give at least one per agent)")
    } else if args.show_detailed_stats {
        Some(
            "--show-detailed-stats: not with --agents (the coordinator prints the agents' summed progress every --reporting-interval)",
        )
    } else {
        None
    };
    if let Some(e) = refused {
        return Err(CliError::usage(e));
    }
    // What only the split can judge (--include, --latest-values, --verify in a group, counts
    // that do not split), before any agent is asked.
    kbench_bench::distributed::split_consume(&plan.spec, agents.urls.len())
        .map_err(|e| CliError::usage(spec_error(&e)))?;
    let (bootstrap, coordinator) =
        cli_connect(plan.connection.bootstrap_servers.as_deref(), &agents).await?;
    let endpoint = args
        .metrics
        .start_agents("consume", &plan.spec.topic, &agents)
        .await
        .map_err(CliError::usage)?;
    let how = match &plan.spec.mode {
        ConsumeMode::Group { group_id } => format!("group {group_id}"),
        ConsumeMode::Assign { partitions } => format!(
            "partitions {}",
            partitions
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    eprintln!(
        "kbench consume: {} agents reading topic {} ({how}); clock offsets within {} µs",
        agents.urls.len(),
        plan.spec.topic,
        coordinator.clock_bound_us()
    );
    let target = Target::of_cli(bootstrap, &plan.spec.properties, "consume", &plan.pins);
    let stop = kbench_bench::Stop::new();
    let total = agents.urls.len();
    let quiet = args.progress.quiet;
    let progress = |lives: &[(String, serde_json::Value)]| {
        if !quiet {
            eprintln!(
                "kbench: {} records consumed over {total} agents",
                live_sum(lives, "records_consumed")
            );
        }
    };
    let spec = ConsumeSpec {
        // --histogram-log: each agent keeps its windows' histograms whole, for the merge.
        window_histograms: args.output.histogram_log.is_some(),
        ..plan.spec.clone()
    };
    let job = run_consume(&coordinator, &spec, &target, stop.token(), &progress);
    let (merged, interrupted) = crate::signals::until_stopped(job, &stop, None).await;
    if let Some(endpoint) = &endpoint {
        endpoint.freeze().await;
    }
    let mut doc = merged.map_err(|e| crate::coordinator::cli_error(e, interrupted))?;
    args.output
        .write_merged_histogram_log(&doc.start_time, &mut doc.intervals)?;
    if !args.hide_header && !quiet {
        println!("{}", consumer_header(false));
    }
    if doc.timed_out {
        println!(
            "WARNING: Exiting before consuming the expected number of messages: timeout ({} ms) exceeded. You can use the --timeout option to increase the timeout.",
            plan.spec.timeout.as_millis()
        );
    }
    println!("{}", crate::perf_test::consumer_final_doc(&doc, &plan.date));
    if args.print_metrics {
        // The merged document's figures: every agent's records, fetches and histograms added.
        let metrics = crate::perf_test::consumer_metrics(&doc, &plan.connection.client_id);
        println!("{}", crate::perf_test::metrics_table(&metrics));
    }
    let l = &doc.fetch_latency;
    println!(
        "kbench: {} records in {} batches over {total} agents; fetch latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} fetches ({} empty)",
        doc.records_consumed,
        doc.record_batches,
        l.p50 as f64 / 1000.0,
        l.p99 as f64 / 1000.0,
        l.max as f64 / 1000.0,
        doc.fetches,
        doc.empty_fetches
    );
    for (error, n) in &doc.errors {
        eprintln!("kbench: {n} × {error}");
    }
    let mut verified = doc.verification.as_ref().map(|v| {
        println!("{}", v.line());
        v.ok == Some(true)
    });
    // A schema registry: every agent decoded what it read; the counts added.
    if let Some(d) = &doc.value_decoding {
        println!("{}", d.line());
        if args.verify && d.failed() > 0 {
            verified = Some(false);
        }
    }
    if let Some(why) = &doc.aborted {
        eprintln!("kbench: the run stopped early: {why}");
    }
    // As one process: a time-out with errors behind it, or an abort, is a failed run.
    let failed = (doc.timed_out && !doc.errors.is_empty()) || doc.aborted.is_some();
    let code = cli_finish(
        &doc,
        doc.distributed.as_ref(),
        plan.slo.as_deref(),
        args.output.json.as_deref(),
        failed,
        interrupted,
    )?;
    if let Some(endpoint) = endpoint {
        endpoint.finish().await;
    }
    Ok(
        if (code == 0 || code == crate::args::EXIT_SLO) && verified == Some(false) {
            crate::args::EXIT_VERIFY
        } else {
            code
        },
    )
}
