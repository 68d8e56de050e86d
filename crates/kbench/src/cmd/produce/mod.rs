//! `kbench produce` and `kbench quickstart`: flags and client properties → a `ProduceSpec`, the
//! target (a cluster, or the embedded broker), the library's produce job, and kafka-producer-perf-
//! test's lines, the final line and the result file.

mod flags;

pub(crate) use flags::{Plan, plan};
pub use flags::{ProduceArgs, QuickstartArgs};

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kbench_bench::Stop;
use kbench_bench::produce::{IntervalReport, ProduceObserver, ProduceRun, run_job};
use kbench_bench::result::{ResultDocument, rfc3339};

use crate::args::{EXIT_FAILED, EXIT_INTERRUPTED, write_json};
use crate::harness::{CliError, CliResult, Harness, failure};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Quickstart,
}

/// `--value-schema` or `--key-schema` prepared (registered, generated, encoded), and said in one
/// line on stderr.
pub(crate) async fn prepare_schema(
    schema: &kbench_bench::schema::ValueSchemaSpec,
    what: &str,
) -> Result<kbench_bench::schema::Prepared, CliError> {
    let prepared = kbench_bench::schema::prepare(schema).await.map_err(|e| {
        let said = e.to_string();
        CliError::usage(if what == "keys" {
            said.replace("--schema-values", "--keys")
        } else {
            said
        })
    })?;
    let source = match &prepared.schema.template {
        Some(t) => format!("{t} encoded with {}", prepared.schema.file),
        None => prepared.schema.file.clone(),
    };
    eprintln!(
        "kbench: {} {what} from {source} (schema id {}{}), {:.0} ns each to generate and encode",
        prepared.values.len(),
        prepared.schema.schema_id,
        prepared
            .schema
            .subject
            .as_ref()
            .map(|s| format!(", subject {s}, {}", prepared.schema.schema_id_from))
            .unwrap_or_default(),
        prepared.schema.encode_ns_per_value
    );
    Ok(prepared)
}

/// `kbench produce`.
pub async fn run(args: ProduceArgs, mode: Mode) -> CliResult {
    let mut plan = plan(&args)?;
    args.output.check()?;
    if let Some(schema) = plan.key_schema.take() {
        let prepared = prepare_schema(&schema, "keys").await?;
        plan.spec.key_values = Some(prepared.values);
        plan.spec.key_schema = Some(prepared.schema);
        plan.spec
            .validate()
            .map_err(|e| CliError::usage(format!("--key-schema: {e}")))?;
    }
    if let Some(schema) = plan.value_schema.take() {
        let prepared = prepare_schema(&schema, "values").await?;
        plan.spec.payload = kbench_bench::Payload::Lines(prepared.values);
        plan.spec.value_schema = Some(prepared.schema);
        plan.spec
            .validate()
            .map_err(|e| CliError::usage(format!("--value-schema: {e}")))?;
    }
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

/// kafka-producer-perf-test's lines, as the job goes (above the progress bar on a terminal), for
/// a run with this many warm-up records.
struct Lines(Arc<crate::progress::Progress>, u64);

impl ProduceObserver for Lines {
    fn interval(&self, w: &IntervalReport) {
        if w.steady_state_begins {
            self.0.line("In steady state.");
        }
        self.0.line(&crate::perf_test::producer_window(w));
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
        self.0.always(&crate::perf_test::producer_final(run));
        match &run.steady_state {
            Some(steady) => self.0.always(&crate::perf_test::producer_steady_final(
                &kbench_bench::result::SteadyStateSummary::of(steady),
            )),
            None if self.1 > 0 => eprintln!(
                "kbench: the run ended within its warm-up ({} records): no steady-state figures",
                self.1
            ),
            None => {}
        }
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
    if plan.spec.warmup_records > 0 {
        progress.always(&format!(
            "Warmup first {} records. Steady state results will print after the complete test summary.",
            plan.spec.warmup_records
        ));
    }
    let job = run_job(
        &plan.spec,
        cluster,
        harness.embedded_broker(),
        harness.stop.clone(),
        Arc::new(Lines(progress.clone(), plan.spec.warmup_records)),
    );
    let outcome = harness.run(job, Some(recreate)).await;
    progress.finish();
    let interrupted = harness.interrupted();
    let outcome = outcome.map_err(|e| failure(&e, &harness.bootstrap(), interrupted))?;
    let run = &outcome.run;
    if let (Some(path), Some(latest)) = (&args.latest_values, &run.latest) {
        let file = latest.file(&plan.spec.topic);
        write_json(path, &file).map_err(|e| CliError::failed(format!("--latest-values {e}")))?;
        eprintln!(
            "kbench: wrote {} ({} keys, {} deleted, {} uncertain)",
            path.display(),
            file.keys.len(),
            file.keys.values().filter(|v| v.deleted()).count(),
            file.uncertain.len()
        );
    }
    if args.print_metrics {
        let metrics =
            crate::perf_test::producer_metrics(&outcome.document, &plan.connection.client_id);
        println!("{}", crate::perf_test::metrics_table(&metrics));
    }
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
    args.output
        .write_histogram_log(run.started_at, &run.timeline)?;
    let (mut document, slo_met) = crate::args::check_slo(plan.slo.as_deref(), &outcome.document);
    if !slo_met && code == 0 {
        code = crate::args::EXIT_SLO;
    }
    harness.report_faults(&mut document);
    if let Some(path) = &args.output.json {
        write_json(path, &document).map_err(|e| CliError::failed(format!("--json {e}")))?;
        if mode == Mode::Quickstart {
            println!("Result document: {}", path.display());
        } else {
            eprintln!("kbench: wrote {}", path.display());
        }
    }
    args.output.store.keep(&document)?;
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
    println!("{}", crate::perf_test::producer_final(&best.run));
    if args.print_metrics {
        let metrics =
            crate::perf_test::producer_metrics(&best.document, &plan.connection.client_id);
        println!("{}", crate::perf_test::metrics_table(&metrics));
    }
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
    args.output.write_json(&document)?;
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
    } else if args.latest_values.is_some() {
        Some("--latest-values: not with --agents yet (each agent knows only its own writes)")
    } else if plan.spec.producer.transactional_id.is_some() {
        Some(
            "--transactional-id: not with --agents (every agent would take the same transactional.id and fence the others)",
        )
    } else {
        None
    };
    if let Some(e) = refused {
        return Err(CliError::usage(e));
    }
    let (bootstrap, coordinator) =
        cli_connect(plan.connection.bootstrap_servers.as_deref(), &agents).await?;
    // --metrics-listen: the agents' /metrics added up, served here.
    let endpoint = args
        .metrics
        .start_agents("produce", &plan.spec.topic, &agents)
        .await
        .map_err(CliError::usage)?;
    println!(
        "kbench produce: {} agents, seed {}; clock offsets within {} µs",
        agents.urls.len(),
        plan.spec.seed,
        coordinator.clock_bound_us()
    );
    let target = Target::of_cli(bootstrap, &plan.spec.properties, "produce", &plan.pins);
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
    let spec = kbench_bench::ProduceSpec {
        // --histogram-log: each agent keeps its windows' histograms whole, for the merge.
        window_histograms: args.output.histogram_log.is_some(),
        ..plan.spec.clone()
    };
    let job = run_produce(&coordinator, &spec, &target, stop.token(), &progress);
    let (merged, interrupted) = crate::signals::until_stopped(job, &stop, None).await;
    if let Some(endpoint) = &endpoint {
        endpoint.freeze().await;
    }
    let mut doc = merged.map_err(|e| crate::coordinator::cli_error(e, interrupted))?;
    args.output
        .write_merged_histogram_log(&doc.start_time, &mut doc.intervals)?;
    // kafka-producer-perf-test's final line, from the merged document.
    println!("{}", crate::perf_test::producer_final_doc(&doc));
    // --warmup-records: every agent left out its share; the steady state merged.
    match &doc.steady_state {
        Some(steady) => println!("{}", crate::perf_test::producer_steady_final(steady)),
        None if plan.spec.warmup_records > 0 => {
            eprintln!("kbench: every agent's run ended within its warm-up: no steady-state figures")
        }
        None => {}
    }
    if args.print_metrics {
        // The merged document's figures: every agent's records, requests and histograms added.
        let metrics = crate::perf_test::producer_metrics(&doc, &plan.connection.client_id);
        println!("{}", crate::perf_test::metrics_table(&metrics));
    }
    if doc.records_failed > 0 {
        println!("{} records failed.", doc.records_failed);
    }
    // --verify: every agent read the topic back and checked its own records; merged exactly.
    let verified = doc.verification.as_ref().map(|v| {
        println!("{}", v.line());
        v.ok == Some(true)
    });
    let code = cli_finish(
        &doc,
        doc.distributed.as_ref(),
        plan.slo.as_deref(),
        args.output.json.as_deref(),
        doc.records_failed > 0,
        interrupted,
    )?;
    if let Some(endpoint) = endpoint {
        endpoint.finish().await;
    }
    // As one process: a failed verification (5) before an SLO not met (3).
    Ok(
        if (code == 0 || code == crate::args::EXIT_SLO) && verified == Some(false) {
            crate::args::EXIT_VERIFY
        } else {
            code
        },
    )
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
        output: crate::args::OutputArgs {
            json: Some(json),
            ..Default::default()
        },
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
