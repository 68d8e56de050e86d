//! `kbench e2e`: flags → an [`E2eSpec`] (every default is the spec's), the target (a cluster, the
//! embedded broker, or a REST Proxy), the library's e2e run, progress lines, the summary and the
//! result file.

mod flags;

pub use flags::E2eArgs;
pub(crate) use flags::spec_from;

use std::sync::Arc;
use std::time::Duration;

use kbench_bench::BenchError;
use kbench_bench::e2e::{E2eLive, E2eRun, E2eSpec, run_e2e};
use kbench_bench::result::{E2eResultDocument, Target};
use kbench_wire::Pins;

use crate::args::{EXIT_FAILED, EXIT_INTERRUPTED, spec_error};
use crate::harness::{CliError, CliResult, Harness};

/// `kbench e2e`.
pub async fn run(mut args: E2eArgs) -> CliResult {
    args.output.check()?;
    let serializer = args.connection.take_serializer()?;
    let pins = args.pins.pins(E2eSpec::APIS)?;
    let mut spec = spec_from(&args)?;
    let (faults, member_faults) =
        crate::faults::plan_consume(&args.fault, args.bootstrap_server.as_deref())?;
    if let Some(f) = member_faults.first()
        && args.distributed.given()
    {
        return Err(CliError::usage(format!(
            "--fault {:?}: acts on the run's own consumer group, in this process: not with --agents",
            f.spec
        )));
    }
    spec.member_faults = member_faults;
    spec.validate()
        .map_err(|e| CliError::usage(crate::args::spec_error(&e)))?;
    let value_schema = flags::value_schema(&args, &serializer, &mut spec)?;
    if !spec.deserializer.is_empty() {
        kbench_bench::schema::decode::RegistryReader::new(&spec.deserializer)
            .map_err(CliError::usage)?;
    }
    args.slo.conditions("e2e")?;
    let settings = args.connection.settings()?;
    if !faults.is_empty() && (spec.rest.is_some() || args.distributed.given()) {
        return Err(CliError::usage(
            "--fault: not with --via rest-proxy or --agents (faults apply to the embedded broker this process starts)",
        ));
    }
    match args.distributed.list().await? {
        Some(agents) => return distributed(&args, spec, value_schema, &pins, agents).await,
        None if args.consumer_agent.is_some() => {
            return Err(CliError::usage(
                "--consumer-agent: only with --agents or --agents-dns",
            ));
        }
        None => {}
    }
    // Registered last, once every other input has been checked: a refused run leaves nothing
    // behind in the registry.
    prepare_values(&mut spec, value_schema).await?;
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

/// `--value-schema`: the schema registered (or looked up) and the values' pool generated, once,
/// in this process (over `--agents`, the pool travels to each producer agent).
async fn prepare_values(
    spec: &mut E2eSpec,
    value_schema: Option<kbench_bench::schema::ValueSchemaSpec>,
) -> Result<(), CliError> {
    if let Some(schema) = value_schema {
        let prepared = crate::cmd::produce::prepare_schema(&schema, "values").await?;
        spec.values = Some(prepared.values.into());
        spec.value_schema = Some(prepared.schema);
        spec.validate()
            .map_err(|e| CliError::usage(format!("--value-schema: {e}")))?;
    }
    Ok(())
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
    let payload = match &spec.value_schema {
        Some(s) => format!(
            "values from {} ({:.0} B on average)",
            s.file, s.mean_value_bytes
        ),
        None => format!(
            "payload {}..{} B",
            spec.payload_size.min, spec.payload_size.max
        ),
    };
    println!(
        "kbench e2e: {} producer(s), batch interval {}..{} ms, {payload}, {}..{} records per request, acks={}, commit {}, group {}, seed {}",
        spec.producers,
        spec.batch_interval_ms.min,
        spec.batch_interval_ms.max,
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
            records: spec.records,
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
    let progress = progress_lines(
        live.clone(),
        bar.clone(),
        every,
        spec.group_id.clone(),
        (bootstrap.clone(), config.connect_timeout),
    );
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
    let undecoded = run.value_decoding.as_ref().is_some_and(|d| {
        println!("{}", d.line());
        d.failed() > 0
    });
    args.output
        .write_histogram_log(run.started_at, &run.timeline)?;
    for reason in &run.saturation.reasons {
        println!(
            "WARNING: load generator saturated: {reason}. These figures are not the broker's."
        );
    }
    let slo = args.slo.conditions("e2e").unwrap_or_default();
    let (mut document, slo_met) = crate::args::check_slo(slo.as_deref(), &doc);
    harness.report_faults(&mut document);
    args.output.write_json(&document)?;
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
            || (args.verify && undecoded)
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
    (bootstrap, setup): (String, Duration),
) -> std::convert::Infallible {
    let joining = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        if live.phase() == "starting" && !live.connected.load(std::sync::atomic::Ordering::Relaxed)
        {
            bar.note(&format!(
                "kbench e2e: still connecting to {bootstrap} after 3 s (ApiVersions, then the topic's metadata; each address is given socket.connection.setup.timeout.ms, {} ms)",
                setup.as_millis()
            ));
        } else if live.phase() == "starting" {
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
    mut spec: E2eSpec,
    value_schema: Option<kbench_bench::schema::ValueSchemaSpec>,
    pins: &Pins,
    agents: crate::coordinator::AgentList,
) -> CliResult {
    use crate::coordinator::{Target, cli_connect, cli_finish, live_sum, run_e2e};
    let consumer = consumer_agent(args, &spec, &agents)?;
    let properties = args.connection.pairs()?;
    let (bootstrap, coordinator) = cli_connect(args.bootstrap_server.as_deref(), &agents).await?;
    // Registered once the agents have answered: a refused run leaves nothing in the registry.
    prepare_values(&mut spec, value_schema).await?;
    let spec = &spec;
    let coordinator = coordinator.with_notice(|line| println!("kbench e2e: {line}"));
    // --metrics-listen: the agents' /metrics added up, served here.
    let endpoint = args
        .metrics
        .start_agents("e2e", &spec.topic, &agents)
        .await
        .map_err(CliError::usage)?;
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
        pins: crate::coordinator::pin_names(pins),
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
    // --histogram-log: each agent keeps its windows' histograms whole, for the merge.
    let spec = &E2eSpec {
        window_histograms: args.output.histogram_log.is_some(),
        ..spec.clone()
    };
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
    if let Some(endpoint) = &endpoint {
        endpoint.freeze().await;
    }
    let mut doc = merged.map_err(|e| crate::coordinator::cli_error(e, interrupted))?;
    args.output
        .write_merged_histogram_log(&doc.start_time, &mut doc.intervals)?;
    print_merged(&doc);
    if let Some(v) = &doc.verification {
        println!("{}", v.line());
    }
    // The consumer's agent decoded the values (`--value-schema`, or its schema.registry.url).
    let undecoded = doc.value_decoding.as_ref().is_some_and(|d| {
        println!("{}", d.line());
        d.failed() > 0
    });
    let unverified = doc
        .verification
        .as_ref()
        .is_some_and(|v| v.ok != Some(true))
        || (args.verify && undecoded);
    let slo = args.slo.conditions("e2e").unwrap_or_default();
    let c = doc.consumer.clone().unwrap_or_default();
    let code = cli_finish(
        &doc,
        doc.distributed.as_ref(),
        slo.as_deref(),
        args.output.json.as_deref(),
        doc.records_failed > 0
            || c.records_lost > 0
            || c.records_late > 0
            || c.records_unverified > 0,
        // Ctrl-C is how an open-ended run ends.
        interrupted && args.duration.is_some(),
    )
    // As in one process: a verification that is not OK is exit 5, before an SLO's 3.
    .map(|code| match code {
        0 | crate::args::EXIT_SLO if unverified => crate::args::EXIT_VERIFY,
        code => code,
    });
    if let Some(endpoint) = endpoint {
        endpoint.finish().await;
    }
    code
}

/// The agent that runs the consumer of a distributed run (`--consumer-agent`, else the first),
/// once every flag a distributed e2e run cannot take has been refused.
fn consumer_agent(
    args: &E2eArgs,
    spec: &E2eSpec,
    agents: &crate::coordinator::AgentList,
) -> Result<usize, CliError> {
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
    } else if args.mode.is_some() {
        Some("--mode: a distributed run places the consumer and the producers itself".into())
    } else if spec.consumers > 1 {
        Some(
            "--consumers: a distributed run has one consumer, on its agent; not with --agents"
                .into(),
        )
    } else if spec.reply.is_some() {
        Some("--reply-topic: not with --agents (the reply consumer times requests sent in its own process)".into())
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
    Ok(consumer.unwrap_or(0))
}

/// The summary of a distributed run, from the merged document: the counts, the latencies, the
/// clock.
fn print_merged(doc: &E2eResultDocument) {
    let unknown = || "?".to_string();
    let c = doc.consumer.as_ref();
    let read = |f: fn(&kbench_bench::result::E2eConsumerSide) -> u64| {
        c.map_or_else(unknown, |c| f(c).to_string())
    };
    println!();
    println!(
        "{} records produced, {} acknowledged, {} failed, {} consumed in {:.1} s ({:.1} records/sec); drain {:.2} s",
        doc.records_produced,
        doc.records_acked,
        doc.records_failed,
        read(|c| c.records_consumed),
        doc.duration_s,
        doc.records_per_sec,
        doc.drain_s,
    );
    println!(
        "{} lost, {} unread, {} duplicated, {} unexpected, {} foreign",
        read(|c| c.records_lost),
        read(|c| c.records_late),
        read(|c| c.records_duplicated),
        read(|c| c.records_unexpected),
        read(|c| c.records_foreign),
    );
    let mut summaries = vec![
        ("producer request duration", &doc.producer_request_duration),
        ("publish delay", &doc.publish_delay),
    ];
    if let Some(c) = c {
        summaries.push(("whole trip", &c.whole_trip));
    }
    for (name, l) in summaries {
        let ms = |us: u64| us as f64 / 1000.0;
        println!(
            "{name} (ms, {} samples): p50 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3}",
            l.count,
            ms(l.p50),
            ms(l.p99),
            ms(l.p99_9),
            ms(l.max)
        );
    }
    println!("clock: {}", doc.clock);
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

/// The request-reply lines: requests answered and not, replies that matched nothing, the
/// application group's lag.
fn print_reply(r: &kbench_bench::result::ReplySummary) {
    println!(
        "request-reply through {} (id in request header {}, read from the reply's {}): {} requests sent ({} failed), {} answered ({} late: after the drain, not in the percentiles), {} unanswered; {} replies unmatched, {} duplicated",
        r.reply_topic,
        r.correlation_header,
        r.reply_correlation,
        r.requests_sent,
        r.requests_failed,
        r.answered,
        r.answered_late,
        r.unanswered,
        r.replies_unmatched,
        r.replies_duplicated,
    );
    if let Some(g) = &r.app_group {
        let lag = |l: Option<u64>| l.map_or("unknown (no commits)".to_string(), |l| l.to_string());
        println!(
            "application group {} lag on the request topic: max {}, last {} ({} samples{})",
            g.group,
            lag(g.max_lag),
            lag(g.last_lag),
            g.samples.len(),
            if g.errors.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} not taken: {}",
                    g.errors.values().sum::<u64>(),
                    g.errors.keys().cloned().collect::<Vec<_>>().join("; ")
                )
            }
        );
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
    if !run.members.is_empty() {
        let members: Vec<String> = run
            .members
            .iter()
            .map(|m| format!("{} {:?}", m.member_id, m.assigned_partitions))
            .collect();
        println!(
            "Group: {} members at the end: {}",
            run.members.len(),
            members.join("; ")
        );
    }
    // Its members, rebalances and faults, as `kbench consume` says them.
    if let Some(g) = &run.group {
        let unread = "their acknowledged records since are read again by offset and counted unread, or lost if not found";
        for line in crate::cmd::consume::said_group(g, unread) {
            println!("{line}");
        }
    }
    if let Some(r) = &doc.reply {
        print_reply(r);
    } else if run.late > 0 {
        let parts: Vec<String> = run
            .unread
            .iter()
            .map(|(p, u)| format!("partition {p}: {} ({})", u.records, u.reason))
            .collect();
        println!(
            "{} unread: acknowledged and on the broker (read again by offset after the drain, outside the group), but not read by the group in time; their whole trip is not in the percentiles: {}",
            run.late,
            parts.join("; ")
        );
    }
    if run.lost > 0 && doc.reply.is_none() {
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
    let mut summaries = vec![
        ("producer request duration", &doc.producer_request_duration),
        ("publish delay", &doc.publish_delay),
    ];
    if let Some(c) = &doc.consumer {
        let trip = if doc.reply.is_some() {
            "request → reply"
        } else {
            "whole trip"
        };
        summaries.extend([
            (trip, &c.whole_trip),
            ("fetch duration", &c.fetch_duration),
            ("consumer processing per poll", &c.consumer_processing),
        ]);
    }
    for (name, l) in summaries {
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
