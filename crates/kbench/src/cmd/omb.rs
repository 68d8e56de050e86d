//! `kbench omb WORKLOAD.yaml [--driver DRIVER.yaml]`: an OpenMessaging Benchmark workload file run
//! unmodified, OMB's lines on stdout, OMB's result JSON and kbench's result document.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use kbench_bench::omb::{OmbDriver, OmbSpec, OmbWorkload, report, run_omb};
use kbench_bench::result::Target;
use kbench_wire::Pins;

use crate::args::{EXIT_FAILED, EXIT_INTERRUPTED, parse_duration, spec_error, write_json};
use crate::harness::{CliError, CliResult, Harness};

#[derive(Debug, Args, Default)]
pub struct OmbArgs {
    #[command(flatten)]
    pub fault: crate::faults::FaultArgs,

    /// An OMB workload file (OMB's workloads/*.yaml format, read unmodified).
    pub workload: PathBuf,

    /// An OMB Kafka driver file (driver-kafka/*.yaml): replicationFactor, commonConfig,
    /// producerConfig, consumerConfig; properties kbench does not implement are listed.
    #[arg(long, short = 'd', visible_alias = "drivers")]
    pub driver: Option<PathBuf>,

    /// Kafka bootstrap servers (over the driver's bootstrap.servers). Without either, kbench
    /// starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Override testDurationMinutes (e.g. 30s, 5m).
    #[arg(long, value_parser = parse_duration)]
    pub test_duration: Option<Duration>,

    /// Override warmupDurationMinutes (OMB's default is 1 minute; 0s for none).
    #[arg(long, value_parser = parse_duration)]
    pub warmup_duration: Option<Duration>,

    /// Period of OMB's statistics lines (OMB: 10s).
    #[arg(long, value_parser = parse_duration)]
    pub reporting_interval: Option<Duration>,

    /// How long consumers may catch up after the producers stop (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub drain: Option<Duration>,

    /// producerRate 0: each search step's length (default 5s).
    #[arg(long, value_parser = parse_duration)]
    pub step_duration: Option<Duration>,

    /// consumerBacklogSizeGB > 0: how much longer than the test producers may go on while the
    /// backlog builds and drains (default 30m; OMB waits without a bound).
    #[arg(long, value_parser = parse_duration)]
    pub backlog_timeout: Option<Duration>,

    /// Where OMB's result JSON goes (default: OMB's name, WORKLOAD-DRIVER-DATE.json, here).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,

    /// Write kbench's result document (kind "omb") to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// `--store DB`, `--build-label`, `--target-label`: kbench's result document kept in the
    /// results store.
    #[command(flatten)]
    pub store: crate::store::StoreArgs,

    /// Seed for payloads and topic names (default: random; stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    #[command(flatten)]
    pub slo: crate::args::SloArgs,

    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,

    /// Values generated from this Avro (.avsc), Protobuf (.proto) or JSON Schema file in place of
    /// the workload's payload, as `kbench produce --value-schema` makes them: registered under
    /// each topic's subject in the registry the driver's producerConfig names
    /// (schema.registry.url, basic.auth.user.info, value.subject.name.strategy, … as Confluent's
    /// serializer reads them) or --schema-registry-url, and framed in Confluent's wire format.
    #[arg(long, value_name = "FILE")]
    pub value_schema: Option<PathBuf>,

    #[command(flatten)]
    pub schema: crate::args::SchemaValueArgs,

    /// The Schema Registry for --value-schema (over the driver's schema.registry.url).
    #[arg(long, value_name = "URL", requires = "value_schema")]
    pub schema_registry_url: Option<String>,

    /// `--agents`: the workload's producers and consumers spread over agents (as OMB's workers).
    #[command(flatten)]
    pub distributed: crate::coordinator::DistributedArgs,
}

/// `--value-schema`: the values prepared for the first topic (registered under its subject), and
/// the schema registered under every other topic's subject too (the same schema: the same id, as
/// a registry gives it; a registry that gives another is refused). The workload's payload settings
/// are then listed as not applied.
async fn value_schema(args: &OmbArgs, spec: &mut OmbSpec) -> Result<(), CliError> {
    let Some(path) = &args.value_schema else {
        spec.serializer_not_applied();
        return Ok(());
    };
    let file = path.display().to_string();
    let mut serializer = spec.serializer.clone();
    if let Some(url) = &args.schema_registry_url {
        serializer.insert("schema.registry.url".into(), url.clone());
        // The subscriptions' consumers decode through it too, as through a driver's registry.
        spec.consumer
            .deserializer
            .insert("schema.registry.url".into(), url.clone());
    }
    let first = args
        .schema
        .value_spec(path, &spec.topic(0), serializer, spec.seed)
        .map_err(CliError::usage)?;
    let of_topic = |i: u32| kbench_bench::schema::ValueSchemaSpec {
        topic: spec.topic(i),
        ..first.clone()
    };
    let prepared = crate::cmd::produce::prepare_schema(&of_topic(0), "values").await?;
    for i in 1..spec.workload.topics {
        let id = kbench_bench::schema::schema_id(&of_topic(i))
            .await
            .map_err(CliError::usage)?;
        if id != prepared.schema.schema_id {
            return Err(CliError::usage(format!(
                "schema registry: topic {}'s subject has the schema as id {id}, topic {}'s as id {}: kbench frames every value with one id",
                spec.topic(i),
                spec.topic(0),
                prepared.schema.schema_id
            )));
        }
    }
    let w = &spec.workload;
    let overridden = if let Some(f) = &w.payload_file {
        format!("payloadFile {f}")
    } else if w.message_size_distribution.is_some() {
        "messageSizeDistribution".to_string()
    } else {
        format!("messageSize {}", w.message_size())
    };
    spec.not_applied.push(format!(
        "{overridden}: the values come from --value-schema {file}"
    ));
    if w.use_randomized_payloads {
        spec.not_applied.push(format!(
            "useRandomizedPayloads, randomBytesRatio, randomizedPayloadPoolSize: the values come from --value-schema {file}"
        ));
    }
    spec.payload = kbench_bench::Payload::Lines(prepared.values);
    spec.value_schema = Some(prepared.schema);
    Ok(())
}

fn plan(args: &OmbArgs) -> Result<(OmbSpec, Option<Vec<kbench_bench::slo::Condition>>), String> {
    let workload = OmbWorkload::read(&args.workload)?;
    let driver = match &args.driver {
        Some(p) => OmbDriver::read(p)?,
        None => OmbDriver::default(),
    };
    let seed = args.seed.unwrap_or_else(kbench_bench::spec::random_seed);
    let mut spec = OmbSpec::new(workload, &driver, args.workload.parent(), seed).map_err(|e| {
        match &args.driver {
            Some(d) if !e.starts_with("payloadFile") && !e.starts_with("randomized") => {
                format!("{}: {e}", d.display())
            }
            _ => format!("{}: {e}", args.workload.display()),
        }
    })?;
    if let Some(d) = args.test_duration {
        if d.is_zero() {
            return Err("--test-duration: must be above zero".into());
        }
        spec.test_duration = d;
    }
    if let Some(d) = args.warmup_duration {
        spec.warmup = d;
    }
    if let Some(d) = args.reporting_interval {
        if d < Duration::from_millis(100) {
            return Err("--reporting-interval: must be at least 100ms".into());
        }
        spec.reporting_interval = d;
    }
    if let Some(d) = args.drain {
        spec.drain = d;
    }
    if let Some(d) = args.backlog_timeout {
        spec.backlog_timeout = d;
    }
    if let Some(d) = args.step_duration {
        if d.is_zero() {
            return Err("--step-duration: must be above zero".into());
        }
        spec.search_step = d;
    }
    for (field, d) in [
        ("--test-duration", spec.test_duration),
        ("--warmup-duration", spec.warmup),
        ("--drain", spec.drain),
        ("--backlog-timeout", spec.backlog_timeout),
        ("--reporting-interval", spec.reporting_interval),
    ] {
        kbench_bench::spec::check_duration("", d, kbench_bench::spec::MAX_DURATION)
            .map_err(|e| format!("{field}: {}", e.reason))?;
    }
    checked(&spec, args.distributed.given()).map_err(|e| {
        format!(
            "{}: {}",
            args.workload.display(),
            spec_error(&e).trim_start_matches("--")
        )
    })?;
    let slo = args.slo.conditions("omb")?;
    Ok((spec, slo))
}

/// The spec's checks for where it runs: in this process, everything; over agents, the fields
/// only — each agent checks its own share against its own limits.
fn checked(spec: &OmbSpec, over_agents: bool) -> Result<(), kbench_bench::SpecError> {
    if over_agents {
        spec.validate_fields()
    } else {
        spec.validate()
    }
}

/// `kbench omb`.
pub async fn run(args: OmbArgs) -> CliResult {
    crate::args::check_outputs(&[
        ("--output", args.output.as_deref()),
        ("--json", args.json.as_deref()),
    ])?;
    args.store.check()?;
    let (mut spec, slo) = plan(&args)?;
    let agents = args.distributed.list().await?;
    if let Some(agents) = &agents {
        // Before anything is registered: a refused run leaves nothing behind.
        refuse_over_agents(&args, &spec, agents.urls.len())?;
    }
    let faults = crate::faults::plan(&args.fault, args.bootstrap_server.as_deref())?;
    // Registered once every other input has been checked: a refused run leaves nothing behind.
    value_schema(&args, &mut spec).await?;
    checked(&spec, agents.is_some())
        .map_err(|e| CliError::usage(format!("--value-schema: {}", spec_error(&e))))?;
    for n in &spec.not_applied {
        eprintln!("kbench: not applied: {n}");
    }
    if let Some(agents) = agents {
        return distributed(&args, &spec, slo.as_deref(), agents).await;
    }
    // A fault schedule runs against the embedded broker that kbench controls: the driver file's
    // servers (every OMB driver names some) are set aside, and said so.
    let given = match &spec.producer.connection.bootstrap_servers {
        Some(servers) if !faults.is_empty() && args.bootstrap_server.is_none() => {
            eprintln!(
                "kbench: not applied: driver bootstrap.servers={servers}: --fault runs against the embedded broker"
            );
            None
        }
        driver => args.bootstrap_server.clone().or_else(|| driver.clone()),
    };
    let topic = spec.topic_prefix.clone();
    let endpoint = args
        .metrics
        .attach("omb", &topic, &mut spec.window_sink)
        .await?;
    let mut harness = Harness::start(faults, given.as_deref(), endpoint).await?;
    let result = execute(&args, &spec, slo.as_deref(), &mut harness).await;
    harness.finish().await;
    result
}

/// The workload, OMB's lines and result file, and kbench's own.
async fn execute(
    args: &OmbArgs,
    spec: &OmbSpec,
    slo: Option<&[kbench_bench::slo::Condition]>,
    harness: &mut Harness,
) -> CliResult {
    let cluster = spec
        .producer
        .connection
        .cluster_config(harness.servers.clone(), Pins::default());
    let target = Target::of(&cluster, harness.embedded_broker());
    eprintln!(
        "kbench: workload {:?}: {} topic(s) × {} partition(s), {} producer(s), {} consumer(s), {} rate, warm-up {:?}, test {:?}",
        spec.workload.name,
        spec.workload.topics,
        spec.workload.partitions_per_topic,
        spec.producers(),
        spec.consumers(),
        if spec.workload.producer_rate > 0.0 {
            format!("{} msg/s", spec.workload.producer_rate)
        } else {
            "searched".into()
        },
        spec.warmup,
        spec.test_duration
    );
    let job = run_omb(
        spec,
        cluster,
        harness.stop.clone(),
        Default::default(),
        |p| println!("{}", report::period_line(p)),
        |n| eprintln!("kbench: {n}"),
    );
    // Faults count from the workload's start (topics created, warm-up included). The workload's
    // topics are not created again after a restart: what the broker forgot is an error of the run.
    let outcome = harness.run(job, None).await;
    let interrupted = harness.interrupted();
    let run = outcome.map_err(|e| {
        CliError::with_code(
            if interrupted {
                EXIT_INTERRUPTED
            } else {
                EXIT_FAILED
            },
            e,
        )
    })?;
    for line in report::aggregated_lines(&run) {
        println!("{line}");
    }
    for e in &run.errors {
        eprintln!("kbench: error: {e}");
    }
    if run.producers.saturation.saturated {
        for r in &run.producers.saturation.reasons {
            eprintln!("WARNING: load generator saturated: {r}");
        }
    }
    let p = &run.producers;
    for line in p.cluster.summary(&p.timeline, "latency") {
        println!("Cluster (producers): {line}");
    }
    for line in run.consumer_cluster().summary(&[], "latency") {
        println!("Cluster (consumers): {line}");
    }
    let missing = run.expected_consumed.saturating_sub(run.consumed);
    println!(
        "kbench: {} records sent, {} acked, {} failed (measured); consumers read {} of {} expected{}",
        p.records_sent,
        p.records_acked,
        p.records_failed,
        run.consumed,
        run.expected_consumed,
        if missing > 0 {
            format!(" ({missing} not read by the end of the drain)")
        } else {
            String::new()
        }
    );
    write_omb_result(args, spec, run.started_at, &report::omb_result(spec, &run))?;
    let doc = report::kbench_result(spec, &run, target, &args.workload.display().to_string());
    let (mut doc, slo_met) = crate::args::check_slo(slo, &doc);
    harness.report_faults(&mut doc);
    if let Some(path) = &args.json {
        write_json(path, &doc).map_err(|e| CliError::failed(format!("--json {e}")))?;
    }
    args.store.keep(&doc)?;
    Ok(if interrupted || run.aborted.is_some() {
        EXIT_INTERRUPTED
    } else if p.records_failed > 0 || !run.errors.is_empty() {
        EXIT_FAILED
    } else if !slo_met {
        crate::args::EXIT_SLO
    } else {
        0
    })
}

/// OMB's result JSON to `--output`, or OMB's own name for it (WORKLOAD-DRIVER-DATE.json) here.
fn write_omb_result(
    args: &OmbArgs,
    spec: &OmbSpec,
    started_at: std::time::SystemTime,
    omb: &serde_json::Value,
) -> Result<(), CliError> {
    let output = args.output.clone().unwrap_or_else(|| {
        let date = humantime::format_rfc3339_seconds(started_at)
            .to_string()
            .replace([':', 'T'], "-")
            .trim_end_matches('Z')
            .to_string();
        PathBuf::from(format!(
            "{}-{}-{date}.json",
            spec.workload.name.replace(['/', ' '], "-"),
            spec.driver_name.replace(['/', ' '], "-")
        ))
    });
    write_json(&output, omb).map_err(|e| CliError::failed(format!("--output {e}")))?;
    eprintln!("kbench: OMB result written to {}", output.display());
    Ok(())
}

/// What a run over agents cannot do, refused before any agent, broker or registry is asked: one
/// error naming the flag or the workload's field.
fn refuse_over_agents(args: &OmbArgs, spec: &OmbSpec, agents: usize) -> Result<(), CliError> {
    if !args.fault.faults.is_empty() {
        return Err(CliError::usage(
            "--fault: not with --agents (faults act on the embedded broker of one process)",
        ));
    }
    if args.schema_registry_url.is_some() {
        return Err(CliError::usage(
            "--schema-registry-url: not with omb --agents (give schema.registry.url in the driver's producerConfig and consumerConfig: every agent reads the driver)",
        ));
    }
    // What only the split can judge (a rate search, backlog mode, too few clients).
    kbench_bench::distributed::split_omb(spec, agents).map_err(|e| {
        CliError::usage(format!(
            "{}: {}",
            args.workload.display(),
            spec_error(&e).trim_start_matches("--")
        ))
    })?;
    Ok(())
}

/// `--agents`: the workload's producers and consumers split over the agents (each agent reads
/// the same workload and driver text), its consumers joined before any producer starts, the
/// producers started at one instant, the results merged exactly; OMB's lines and result JSON from
/// the merge.
async fn distributed(
    args: &OmbArgs,
    spec: &OmbSpec,
    slo: Option<&[kbench_bench::slo::Condition]>,
    agents: crate::coordinator::AgentList,
) -> CliResult {
    use crate::coordinator::{cli_connect, cli_error, cli_finish, live_sum, run_omb as over};
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
    };
    let workload = read(&args.workload)?;
    let driver = args.driver.as_deref().map(read).transpose()?;
    let given = args
        .bootstrap_server
        .clone()
        .or_else(|| spec.producer.connection.bootstrap_servers.clone());
    let (bootstrap, coordinator) = cli_connect(given.as_deref(), &agents).await?;
    let endpoint = args
        .metrics
        .start_agents("omb", &spec.topic_prefix, &agents)
        .await
        .map_err(CliError::usage)?;
    let total = agents.urls.len();
    eprintln!(
        "kbench: workload {:?} over {total} agents: {} topic(s) × {} partition(s), {} producer(s), {} consumer(s), {} msg/s, warm-up {:?}, test {:?}; clock offsets within {} µs",
        spec.workload.name,
        spec.workload.topics,
        spec.workload.partitions_per_topic,
        spec.producers(),
        spec.consumers(),
        spec.workload.producer_rate,
        spec.warmup,
        spec.test_duration,
        coordinator.clock_bound_us()
    );
    let target =
        crate::coordinator::Target::of_cli(bootstrap.clone(), &[], "omb", &Pins::default());
    let stop = kbench_bench::Stop::new();
    let started_at = std::time::SystemTime::now();
    let progress = |lives: &[(String, serde_json::Value)]| {
        eprintln!(
            "kbench: {} records acknowledged, {} read over {total} agents",
            live_sum(lives, "records_acked_all"),
            live_sum(lives, "records_consumed")
        );
    };
    let job = over(
        &coordinator,
        spec,
        &workload,
        driver.as_deref(),
        &target,
        stop.token(),
        &progress,
    );
    let (merged, interrupted) = crate::signals::until_stopped(job, &stop, None).await;
    if let Some(endpoint) = &endpoint {
        endpoint.freeze().await;
    }
    let merged = merged.map_err(|e| cli_error(e, interrupted))?;
    for p in &merged.periods {
        println!("{}", report::period_line(p));
    }
    for line in
        report::aggregated_lines_of(&merged.latency, &merged.publish_delay, &merged.end_to_end)
    {
        println!("{line}");
    }
    let mut doc = merged.document;
    doc.settings = report::settings(spec, &args.workload.display().to_string());
    doc.target = Target::of(
        &spec
            .producer
            .connection
            .cluster_config(bootstrap, Pins::default()),
        false,
    );
    for e in &doc.client_errors {
        eprintln!("kbench: error: {e}");
    }
    let expected = doc.consumed["expected_records"].as_u64().unwrap_or(0);
    let read = doc.consumed["records"].as_u64().unwrap_or(0);
    println!(
        "kbench: {} records sent, {} acked, {} failed (measured); consumers read {read} of {expected} expected{}",
        doc.records_sent,
        doc.records_acked,
        doc.records_failed,
        if read < expected {
            format!(" ({} not read by the end of the drain)", expected - read)
        } else {
            String::new()
        }
    );
    write_omb_result(
        args,
        spec,
        started_at,
        &report::omb_result_of(
            spec,
            &merged.periods,
            &merged.latency,
            &merged.publish_delay,
            &merged.end_to_end,
        ),
    )?;
    // Kept with its --slo verdict, as one process keeps it.
    args.store.keep(&crate::args::check_slo(slo, &doc).0)?;
    if let Some(why) = &doc.aborted {
        eprintln!("kbench: the run stopped early: {why}");
    }
    let failed = doc.records_failed > 0 || !doc.client_errors.is_empty();
    // An agent's run stopped early is an interrupted run, as one process's is (exit 130).
    let code = cli_finish(
        &doc,
        doc.distributed.as_ref(),
        slo,
        args.json.as_deref(),
        failed,
        interrupted || doc.aborted.is_some(),
    )?;
    if let Some(endpoint) = endpoint {
        endpoint.finish().await;
    }
    Ok(code)
}
