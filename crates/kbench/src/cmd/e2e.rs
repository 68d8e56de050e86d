//! `kbench e2e`: flags → an [`E2eSpec`] (every default is the spec's), the target (a cluster, the
//! embedded broker, or a REST Proxy), the library's e2e run, progress lines, the summary and the
//! result file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kbench_bench::e2e::{
    CommitMode, E2eLive, E2eMode, E2eRun, E2eSpec, RestApi, RestSpec, Span, run_e2e,
};
use kbench_bench::result::{E2eResultDocument, Target};
use kbench_bench::{BenchError, spec::parse_positive_span};
use kbench_client::Acks;
use kbench_wire::{Compression, Pins};

use crate::args::{
    EXIT_FAILED, EXIT_INTERRUPTED, parse_count_span, parse_duration, parse_interval_span,
    positive_i32, positive_usize, spec_error, write_json,
};
use crate::harness::{CliError, CliResult, Harness};

#[derive(Debug, Args, Default)]
pub struct E2eArgs {
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

    /// With --agents: the agent that runs the consumer (default: the first); the producers are
    /// split over the others.
    #[arg(long, value_name = "URL")]
    pub consumer_agent: Option<String>,

    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,

    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic; created when missing (default kbench-e2e).
    #[arg(long)]
    pub topic: Option<String>,

    /// Partitions when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub partitions: Option<i32>,

    /// Parallel producers, each with its own connection (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub producers: Option<usize>,

    /// Wait before each producer's next batch, a range inclusive at both ends: 100..100ms (the
    /// default), 5..50ms, 1s.
    #[arg(long, value_parser = parse_interval_span)]
    pub batch_interval: Option<Span<u64>>,

    /// Each record's value size in bytes, a range: 1024 (the default), 100..2000.
    #[arg(long, value_parser = parse_positive_span)]
    pub payload_size: Option<Span<usize>>,

    /// Records per produce request, a range: 1 (the default), 4, 1..10.
    #[arg(long, value_parser = parse_count_span)]
    pub messages_per_batch: Option<Span<usize>>,

    /// Consumer commits: `sync` (the default: after every poll, awaited) or an interval for
    /// asynchronous commits (10s).
    #[arg(long)]
    pub commit: Option<CommitMode>,

    /// How long a poll (Fetch) may wait for data (fetch.max.wait.ms; default 10ms).
    #[arg(long, value_parser = parse_duration)]
    pub consume_wait: Option<Duration>,

    /// Fetch max bytes per poll (default 52428800).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub consume_max_bytes: Option<i32>,

    /// Load phase length (e.g. 30s); without it, runs until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// After the producers stop, wait at most this long for the consumer to catch up (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub drain: Option<Duration>,

    /// acks: 0, 1 or all (-1; the default).
    #[arg(long, allow_negative_numbers = true)]
    pub acks: Option<Acks>,

    /// Compression: none (the default), gzip, snappy, lz4 or zstd.
    #[arg(long)]
    pub compression: Option<Compression>,

    /// Consumer group id (default: a fresh kbench-e2e-<id> per run).
    #[arg(long)]
    pub group: Option<String>,

    /// Consumer client id (default: a fresh kbench-consumer-<id> per run).
    #[arg(long)]
    pub consumer_id: Option<String>,

    /// Run only part of the pipe: consumer-and-producers (the default), producers, consumer.
    #[arg(long)]
    pub mode: Option<E2eMode>,

    /// Pin API versions, e.g. produce=9,fetch=12.
    #[arg(long, value_name = "API=VERSION[,…]")]
    pub pin: Vec<String>,

    /// Progress line interval, e.g. 5s (the default; 0 for none).
    #[arg(long, value_parser = parse_duration)]
    pub reporting_interval: Option<Duration>,

    /// Write the result document (docs/results.md, kind "e2e") to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// The length of the result's timeline windows (`intervals`, --histogram-log); default 1s.
    #[arg(long, value_parser = parse_duration)]
    pub timeline_interval: Option<Duration>,

    /// Write an HdrHistogram interval log (format 1.3): one line per timeline window and
    /// histogram (producer_request_duration, publish_delay, whole_trip; µs).
    #[arg(long, value_name = "FILE")]
    pub histogram_log: Option<PathBuf>,

    /// Conditions the run must meet, e.g. 'p99<50ms,lost==0' (p99: whole trip): a table after the
    /// run, and exit code 3 when one fails.
    #[arg(long, value_name = "CONDITIONS")]
    pub slo: Option<String>,

    /// Seed for intervals, sizes and counts (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Stamp every record (producer, sequence, CRC-32C of the value, in a `kbench-verify` header)
    /// and check each as the consumer reads it: lost, duplicated, reordered, corrupted and
    /// unexpected records against what the broker acknowledged land in the result
    /// (`verification`); exit code 5 when any was lost, reordered or corrupted.
    #[arg(long)]
    pub verify: bool,

    /// How to reach Kafka: `kafka` (the Kafka protocol; the default) or `rest-proxy` (a Kafka REST
    /// Proxy, --rest-url).
    #[arg(long, value_parser = ["kafka", "rest-proxy"])]
    pub via: Option<String>,

    /// REST Proxy base URL (http:// or https://), with --via rest-proxy.
    #[arg(long)]
    pub rest_url: Option<String>,

    /// Embedded format through the REST Proxy: avro (the seed's schema; the default), json or binary.
    #[arg(long)]
    pub rest_format: Option<kbench_rest::RestFormat>,

    /// REST produce API: v2 (the default), v3 (one request per record) or v3-stream (one chunked
    /// request per batch).
    #[arg(long)]
    pub rest_api: Option<RestApi>,

    /// Value schema id for avro (otherwise --schema-registry registers the seed schema).
    #[arg(long)]
    pub value_schema_id: Option<i64>,

    /// Schema Registry URL: register the seed's Avro schema as <topic>-value and use its id.
    #[arg(long)]
    pub schema_registry: Option<String>,

    /// Trust this CA certificate (PEM) for an https REST Proxy / Schema Registry.
    #[arg(long)]
    pub rest_ca_cert: Option<PathBuf>,

    /// HTTP basic user for the REST Proxy (the password comes from KBENCH_REST_PASSWORD).
    #[arg(long)]
    pub rest_user: Option<String>,

    /// HTTP basic password for the REST Proxy; from the environment only, never echoed.
    #[arg(
        long = "rest-password-from-env",
        env = "KBENCH_REST_PASSWORD",
        hide_env_values = true,
        hide = true
    )]
    pub rest_password: Option<String>,
}

/// Overwrite `field` when the flag was given.
fn set<T>(field: &mut T, given: Option<T>) {
    if let Some(v) = given {
        *field = v;
    }
}

/// Flags → the spec: every flag not given keeps [`E2eSpec::default`]'s value. An error names the flag.
pub(crate) fn spec_from(args: &E2eArgs) -> Result<E2eSpec, String> {
    let mut spec = E2eSpec::default();
    set(&mut spec.topic, args.topic.clone());
    set(&mut spec.partitions, args.partitions);
    set(&mut spec.producers, args.producers);
    set(&mut spec.batch_interval_ms, args.batch_interval);
    spec.verify = args.verify;
    set(&mut spec.payload_size, args.payload_size);
    set(&mut spec.messages_per_batch, args.messages_per_batch);
    set(&mut spec.commit, args.commit);
    set(&mut spec.consumer.fetch_max_wait, args.consume_wait);
    set(
        &mut spec.consumer.fetch_max_bytes,
        args.consume_max_bytes.map(|b| b as usize),
    );
    set(&mut spec.drain, args.drain);
    set(&mut spec.producer.acks, args.acks);
    set(&mut spec.producer.compression, args.compression);
    set(&mut spec.group_id, args.group.clone());
    set(&mut spec.consumer_id, args.consumer_id.clone());
    set(&mut spec.mode, args.mode);
    set(&mut spec.seed, args.seed);
    set(&mut spec.timeline_interval, args.timeline_interval);
    spec.duration = args.duration;
    spec.rest = rest_from(args)?;
    spec.limits = args.limits.limits();
    spec.validate().map_err(|e| spec_error(&e))?;
    Ok(spec)
}

/// The REST Proxy driver's settings from the flags; an error names the flag.
fn rest_from(args: &E2eArgs) -> Result<Option<RestSpec>, String> {
    if args.via.as_deref() != Some("rest-proxy") {
        if args.rest_url.is_some() {
            return Err("--rest-url: only with --via rest-proxy".into());
        }
        return Ok(None);
    }
    let url = args
        .rest_url
        .clone()
        .ok_or("--via rest-proxy needs --rest-url URL")?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "--rest-url {:?}: must start with http:// or https://",
            kbench_rest::redact_url(&url)
        ));
    }
    if args.bootstrap_server.is_some() {
        return Err(
            "--bootstrap-server: not used with --via rest-proxy (the proxy reaches Kafka)".into(),
        );
    }
    let basic_auth = match (&args.rest_user, &args.rest_password) {
        (Some(u), Some(p)) => Some((u.clone(), p.clone())),
        (Some(u), None) => Some((u.clone(), String::new())),
        (None, Some(_)) => return Err("KBENCH_REST_PASSWORD is set but --rest-user is not".into()),
        (None, None) => None,
    };
    let ca_cert_pem = match &args.rest_ca_cert {
        Some(path) => Some(
            kbench_client::input::read(path, kbench_client::input::SECRET_FILE)
                .map_err(|e| format!("--rest-ca-cert {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let mut rest = RestSpec::new(&url);
    if basic_auth.is_some() {
        rest.proxy.basic_auth = basic_auth;
    }
    rest.proxy.ca_cert_pem = ca_cert_pem;
    set(&mut rest.format, args.rest_format);
    set(&mut rest.api, args.rest_api);
    rest.value_schema_id = args.value_schema_id;
    rest.schema_registry = args.schema_registry.clone();
    Ok(Some(rest))
}

/// `kbench e2e`.
pub async fn run(args: E2eArgs) -> CliResult {
    crate::args::check_outputs(&[
        ("--json", args.json.as_deref()),
        ("--histogram-log", args.histogram_log.as_deref()),
    ])?;
    let mut pins = Pins::default();
    args.pin
        .iter()
        .try_for_each(|p| pins.extend_from(p))
        .and_then(|()| pins.only(E2eSpec::APIS))
        .map_err(CliError::usage)?;
    let mut spec = spec_from(&args)?;
    crate::args::parse_slo(args.slo.as_deref(), "e2e")?;
    let settings = args.connection.settings()?;
    let faults = crate::faults::plan(&args.fault, args.bootstrap_server.as_deref())?;
    if !faults.is_empty() && (spec.rest.is_some() || args.distributed.given()) {
        return Err(CliError::usage(
            "--fault: not with --via rest-proxy or --agents (faults apply to the embedded broker this process starts)",
        ));
    }
    match args.distributed.list().await? {
        Some(agents) => return distributed(&args, &spec, agents).await,
        None if args.consumer_agent.is_some() => {
            return Err(CliError::usage(
                "--consumer-agent: only with --agents or --agents-dns",
            ));
        }
        None => {}
    }
    let topic = spec.topic.clone();
    let endpoint = args
        .metrics
        .attach("e2e", &topic, &mut spec.window_sink)
        .await?;
    let mut harness = match &spec.rest {
        // The proxy reaches Kafka; kbench needs no broker of its own.
        Some(rest) => Harness::without_broker(vec![rest.proxy.url.clone()], endpoint),
        None => Harness::start(faults, args.bootstrap_server.as_deref(), endpoint).await?,
    };
    let result = drive(&args, spec, &settings, pins, &mut harness).await;
    harness.finish().await;
    result
}

/// The run, its progress lines, and what it says: the summary, the result file, the exit code.
async fn drive(
    args: &E2eArgs,
    mut spec: E2eSpec,
    settings: &kbench_client::ConnectionSettings,
    pins: Pins,
    harness: &mut Harness,
) -> CliResult {
    let bootstrap = harness.bootstrap();
    let recreate = crate::faults::topic_recreator(
        settings,
        &pins,
        &spec.topic,
        spec.partitions,
        spec.replication_factor,
    );
    let mut config = settings.cluster_config(harness.servers.clone(), pins);
    if config.client_id == kbench_client::ConnectionSettings::default().client_id {
        config.client_id = "kbench-e2e".into();
    }
    println!(
        "kbench e2e: {} producer(s), batch interval {}..{} ms, payload {}..{} B, {}..{} records per request, acks={}, commit {}, group {}, seed {}",
        spec.producers,
        spec.batch_interval_ms.min,
        spec.batch_interval_ms.max,
        spec.payload_size.min,
        spec.payload_size.max,
        spec.messages_per_batch.min,
        spec.messages_per_batch.max,
        spec.producer.acks.name(),
        spec.commit.describe(),
        spec.group_id,
        spec.seed
    );
    let bar = crate::progress::Progress::new(
        &args.progress,
        crate::progress::Planned {
            records: None,
            duration: spec.duration,
        },
    );
    spec.window_sink = std::mem::take(&mut spec.window_sink).and(bar.sink(
        kbench_bench::e2e::live::TIMELINE_COUNTERS,
        "records",
        "whole_trip",
    ));
    let live = Arc::new(E2eLive::default());
    let every = args.reporting_interval.unwrap_or(Duration::from_secs(5));
    let progress = progress_lines(live.clone(), bar.clone(), every, spec.group_id.clone());
    let e2e = run_e2e(&spec, &config, live.clone(), harness.stop.clone());
    let job = async {
        tokio::select! {
            r = e2e => r,
            never = progress => match never {},
        }
    };
    let result = harness.run(job, Some(recreate)).await;
    bar.finish();
    let interrupted = harness.interrupted();
    let mut run = result.map_err(|e| {
        let why = describe(&e, &spec, &bootstrap);
        if interrupted {
            // Interrupted before the load (while the consumer joined its group, say): the user's
            // stop, 130, as consume exits there — not a failure.
            CliError::interrupted(format!("before the load began ({why})"))
        } else if matches!(e, BenchError::Spec(_)) {
            CliError::usage(why)
        } else {
            CliError::failed(why)
        }
    })?;
    // Ctrl-C is how an open-ended run ends; anything else stops a run early.
    if let Some(reason) = harness.stop.reason()
        && (!interrupted || args.duration.is_some())
    {
        run.aborted = Some(reason);
    }
    let doc = E2eResultDocument::of(
        &run,
        Target::of(&config, harness.embedded_broker()),
        spec.settings_json(),
        spec.seed,
    );
    print_summary(&run, &doc);
    if let Some(v) = &run.verification {
        println!("{}", v.line());
    }
    if let Some(path) = &args.histogram_log {
        crate::args::write_histogram_log(path, run.started_at, &run.timeline)
            .map_err(|e| CliError::failed(format!("--histogram-log {e}")))?;
        eprintln!("kbench: wrote {}", path.display());
    }
    for reason in &run.saturation.reasons {
        println!(
            "WARNING: load generator saturated: {reason}. These figures are not the broker's."
        );
    }
    let slo = crate::args::parse_slo(args.slo.as_deref(), "e2e").unwrap_or_default();
    let (mut document, slo_met) = crate::args::check_slo(slo.as_deref(), &doc);
    harness.report_faults(&mut document);
    if let Some(path) = &args.json {
        write_json(path, &document).map_err(CliError::failed)?;
        eprintln!("kbench: wrote {}", path.display());
    }
    Ok(
        if run.failed > 0
            || run.lost > 0
            || run.late > 0
            || run.unverified > 0
            || (run.aborted.is_some() && !interrupted)
        {
            EXIT_FAILED
        } else if interrupted && args.duration.is_some() {
            EXIT_INTERRUPTED
        } else if run
            .verification
            .as_ref()
            .is_some_and(|v| v.ok != Some(true))
        {
            crate::args::EXIT_VERIFY
        } else if !slo_met {
            crate::args::EXIT_SLO
        } else {
            0
        },
    )
}

/// The progress lines, every `every` while the load runs, and a note when the group join takes
/// long (the upstream Tansu holds a JoinGroup for its rebalance delay: 23 s at its defaults).
/// Never ends: it is dropped with the run.
async fn progress_lines(
    live: Arc<E2eLive>,
    bar: Arc<crate::progress::Progress>,
    every: Duration,
    group: String,
) -> std::convert::Infallible {
    let joining = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        if live.phase() == "starting" {
            bar.note(&format!(
                "kbench e2e: the consumer is still joining group {group} after 3 s; the load starts once it is in (a broker may hold a JoinGroup for its rebalance delay)"
            ));
        }
    };
    let periodic = async {
        if every.is_zero() {
            return std::future::pending::<()>().await;
        }
        let mut last = None;
        loop {
            tokio::time::sleep(every).await;
            if live.phase() != "running" {
                continue;
            }
            let (line, snap) = live.progress_line(last.as_ref());
            bar.line(&line);
            last = Some(snap);
        }
    };
    tokio::join!(joining, periodic);
    std::future::pending().await
}

/// `--agents`: the consumer on one agent, the producers split over the others, merged exactly.
async fn distributed(
    args: &E2eArgs,
    spec: &E2eSpec,
    agents: crate::coordinator::AgentList,
) -> CliResult {
    use crate::coordinator::{Target, cli_connect, cli_finish, live_sum, run_e2e};
    let consumer = match &args.consumer_agent {
        None => Ok(0),
        Some(c) => crate::coordinator::parse_agents(c, "--consumer-agent").and_then(|c| {
            agents
                .urls
                .iter()
                .position(|u| *u == c[0])
                .ok_or_else(|| format!("--consumer-agent {}: not one of the agents", c[0]))
        }),
    };
    let refused = if let Err(e) = &consumer {
        Some(e.clone())
    } else if spec.rest.is_some() {
        Some(
            "--via rest-proxy: a distributed run speaks the Kafka protocol; not with --agents"
                .into(),
        )
    } else if !args.pin.is_empty() {
        Some("--pin: not with --agents yet (agents negotiate versions themselves)".into())
    } else if args.histogram_log.is_some() {
        Some(
            "--histogram-log: not with --agents yet (each agent's windows are in its own result)"
                .into(),
        )
    } else if args.metrics.metrics_listen.is_some() {
        Some("--metrics-listen: with --agents, scrape each agent's /metrics".into())
    } else if args.mode.is_some() {
        Some("--mode: a distributed run places the consumer and the producers itself".into())
    } else if args.verify {
        Some(
            "--verify: not with --agents yet (verify each agent's records with produce --verify)"
                .into(),
        )
    } else if agents.urls.len() < 2 {
        Some(
            "--agents: an e2e run needs two agents or more: one consumer, producers on the others"
                .into(),
        )
    } else {
        None
    };
    if let Some(e) = refused {
        return Err(CliError::usage(e));
    }
    let consumer = consumer.unwrap_or(0);
    let properties = args.connection.pairs()?;
    let (bootstrap, coordinator) = cli_connect(args.bootstrap_server.as_deref(), &agents).await?;
    println!(
        "kbench e2e: {} producer(s) over {} agents, the consumer on {}; group {}, seed {}; clock offsets within {} µs",
        spec.producers,
        agents.urls.len() - 1,
        agents.urls[consumer],
        spec.group_id,
        spec.seed,
        coordinator.clock_bound_us()
    );
    let target = Target {
        bootstrap,
        properties,
        run: kbench_bench::spec::fresh_id("kbench-e2e"),
    };
    let every = args
        .reporting_interval
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(5));
    let quiet = args.reporting_interval.is_some_and(|d| d.is_zero());
    let progress = |lives: &[(String, serde_json::Value)]| {
        if !quiet {
            println!(
                "{} records acked, {} failed, {} consumed over {} agents",
                live_sum(lives, "records_acked"),
                live_sum(lives, "records_failed"),
                live_sum(lives, "records_consumed"),
                lives.len()
            );
        }
    };
    let stop = kbench_bench::Stop::new();
    let job = run_e2e(
        &coordinator,
        spec,
        consumer,
        &target,
        every,
        stop.token(),
        &progress,
    );
    let (merged, interrupted) = crate::signals::until_stopped(job, &stop, None).await;
    let doc = merged.map_err(CliError::failed)?;
    let n = |k: &str| doc.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    println!();
    println!(
        "{} records produced, {} acknowledged, {} failed, {} consumed in {:.1} s ({:.1} records/sec); drain {:.2} s",
        n("records_produced"),
        n("records_acked"),
        n("records_failed"),
        n("records_consumed"),
        doc.get("duration_s")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
        doc.get("records_per_sec")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
        doc.get("drain_s")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0),
    );
    println!(
        "{} lost, {} late, {} duplicated, {} unexpected, {} foreign",
        n("records_lost"),
        n("records_late"),
        n("records_duplicated"),
        n("records_unexpected"),
        n("records_foreign")
    );
    for name in ["producer_request_duration", "publish_delay", "whole_trip"] {
        let q = |p: &str| {
            doc.pointer(&format!("/{name}/{p}"))
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0)
                / 1000.0
        };
        println!(
            "{} (ms, {} samples): p50 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3}",
            name.replace('_', " "),
            doc.pointer(&format!("/{name}/count"))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            q("p50"),
            q("p99"),
            q("p99.9"),
            q("max")
        );
    }
    println!(
        "clock: {}",
        doc.get("clock")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
    );
    let slo = crate::args::parse_slo(args.slo.as_deref(), "e2e").unwrap_or_default();
    cli_finish(
        &doc,
        slo.as_deref(),
        args.json.as_deref(),
        n("records_failed") > 0
            || n("records_lost") > 0
            || n("records_late") > 0
            || n("records_unverified") > 0,
        // Ctrl-C is how an open-ended run ends.
        interrupted && args.duration.is_some(),
    )
}

/// A run's start error, said with the flag a user would change.
fn describe(e: &BenchError, spec: &E2eSpec, bootstrap: &str) -> String {
    let field = if spec.rest.is_some() {
        "--rest-url"
    } else {
        "--bootstrap-server"
    };
    match e {
        BenchError::Spec(s) => spec_error(s),
        BenchError::Connect { reason, .. } => {
            format!("{field} {bootstrap}: cannot connect: {reason}")
        }
        other => other.to_string(),
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn print_summary(run: &E2eRun, doc: &E2eResultDocument) {
    println!();
    println!(
        "{} records produced, {} acknowledged, {} failed, {} consumed in {:.1} s ({:.1} records/sec); start-up {:.2} s, drain {:.2} s{}",
        run.produced,
        run.acked,
        run.failed,
        run.consumed,
        doc.duration_s,
        doc.records_per_sec,
        doc.startup_s,
        doc.drain_s,
        if run.drained {
            ""
        } else {
            " (not drained: the consumer did not catch up)"
        }
    );
    println!(
        "{} lost, {} duplicated, {} unexpected, {} foreign; {} commits ({} failed), {} heartbeats, {} rejoins",
        run.lost,
        run.duplicates,
        run.unexpected,
        run.foreign,
        run.commits,
        run.commit_failures,
        run.heartbeats,
        run.rejoins
    );
    if run.late > 0 {
        println!(
            "{} late: acknowledged and on the broker (read again by offset after the drain), but not consumed in time; their whole trip is not in the percentiles",
            run.late
        );
    }
    if run.lost > 0 {
        println!(
            "{} lost: acknowledged, and not on the broker when the missing offsets were read again",
            run.lost
        );
    }
    if run.unverified > 0 {
        println!(
            "{} unverifiable: acknowledged and not consumed, and the missing offsets could not be read again ({}): neither lost nor found",
            run.unverified,
            run.unverified_reason
                .as_deref()
                .unwrap_or("the re-read did not finish")
        );
    }
    if run.gaps_held > 0 {
        println!(
            "the broker returned later records before earlier ones {} times; the consumer held its position until they were readable ({} holes passed over)",
            run.gaps_held, run.gaps_skipped
        );
    }
    for (name, l) in [
        ("producer request duration", &doc.producer_request_duration),
        ("publish delay", &doc.publish_delay),
        ("whole trip", &doc.whole_trip),
        ("fetch duration", &doc.fetch_duration),
        ("consumer processing per poll", &doc.consumer_processing),
    ] {
        if l.count == 0 {
            println!("{name}: no samples");
            continue;
        }
        println!(
            "{name} (ms, {} samples): min {:.3}, mean {:.3}, max {:.3}; p50 {:.3}, p80 {:.3}, p90 {:.3}, p95 {:.3}, p98 {:.3}, p99 {:.3}, p99.9 {:.3}",
            l.count,
            ms(l.min),
            l.mean / 1000.0,
            ms(l.max),
            ms(l.p50),
            ms(l.p80),
            ms(l.p90),
            ms(l.p95),
            ms(l.p98),
            ms(l.p99),
            ms(l.p99_9)
        );
    }
    println!("clock: {}", run.clock);
    if run.cluster_slips > 0 {
        println!(
            "{} batches came more than an interval late because their producer waited for the cluster (a slow broker, a partition without a leader): the cluster's time, not the generator's",
            run.cluster_slips
        );
    }
    for line in run.cluster.summary(&run.timeline, "whole_trip") {
        println!("Cluster (producers): {line}");
    }
    for line in run.consumer_cluster.summary(&run.timeline, "whole_trip") {
        println!("Cluster (consumer): {line}");
    }
    for (error, n) in &run.errors {
        println!("  {n} × {error}");
    }
    if let Some(why) = &run.aborted {
        eprintln!("kbench: the run stopped early: {why}");
    }
}
