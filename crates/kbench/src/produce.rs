//! `kbench produce` and `kbench quickstart`: settings from flags and properties, the target (a
//! cluster, or the embedded broker), the run with progress lines, the final line, the result file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use kbench_bench::result::{ResultDocument, Target, rfc3339};
use kbench_bench::{Payload, ProduceSpec, run_produce};
use kbench_client::{ClientError, Cluster, ClusterConfig, ProducerConfig};
use kbench_wire::{ApiKey, Pins, api_name};
use tokio_util::sync::CancellationToken;

use crate::cli::{ProduceArgs, QuickstartArgs};
use crate::embedded::EmbeddedBroker;
use crate::props::{ProducerSettings, split_property};

/// Exit codes: 0 all acknowledged; 1 records failed or the run failed; 2 bad input; 130 interrupted.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Quickstart,
}

/// Everything resolved from the command line, before any connection is made.
struct Plan {
    settings: ProducerSettings,
    given_properties: Vec<(String, String)>,
    pins: Pins,
    spec: ProduceSpec,
    seed: u64,
}

fn plan(args: &ProduceArgs) -> Result<Plan, String> {
    let mut settings = ProducerSettings::default();
    let mut given = Vec::new();
    for (flag, kvs) in [
        ("-X", &args.property),
        ("--producer-props", &args.producer_props),
    ] {
        for kv in kvs {
            let (k, v) = split_property(flag, kv)?;
            settings.apply(flag, k, v)?;
            given.push((k.to_string(), v.to_string()));
        }
    }
    if let Some(bs) = &args.bootstrap_server {
        settings.bootstrap_servers = Some(bs.clone());
    }
    if let Some(a) = args.acks {
        settings.acks = a;
    }
    if let Some(c) = args.compression {
        settings.compression = c;
    }
    if let Some(b) = args.batch_size {
        settings.batch_size = b;
    }
    if let Some(l) = args.linger_ms {
        settings.linger = Duration::from_millis(l);
    }
    if let Some(m) = args.max_in_flight {
        settings.max_in_flight = m;
    }
    let mut pins = Pins::default();
    for p in &args.pin {
        pins.extend_from(p).map_err(|e| e.to_string())?;
    }
    if let Some(v) = pins.get(ApiKey::Produce)
        && v < settings.compression.min_produce_version()
    {
        return Err(format!(
            "--pin produce={v} with --compression {}: {} needs Produce v{} or later (KIP-110)",
            settings.compression.name(),
            settings.compression.name(),
            settings.compression.min_produce_version()
        ));
    }
    let payload = match (&args.payload_file, args.record_size) {
        (Some(path), _) => Payload::Lines(read_payloads(path, &args.payload_delimiter)?),
        (None, Some(size)) => Payload::Random { size },
        (None, None) => Payload::Random { size: 100 },
    };
    let seed = args.seed.unwrap_or_else(crate::cli::random_seed);
    let spec = ProduceSpec {
        num_records: args.num_records,
        duration: args.duration,
        payload,
        throughput: (args.throughput > 0.0).then_some(args.throughput),
        compression: settings.compression,
        batch_size: settings.batch_size,
        linger: settings.linger,
        partition: args.partition,
        reporting_interval: args.reporting_interval,
        producer: ProducerConfig {
            acks: settings.acks,
            request_timeout: settings.request_timeout,
            retries: settings.retries,
            retry_backoff: settings.retry_backoff,
            delivery_timeout: settings.delivery_timeout,
        },
        max_in_flight: settings.max_in_flight,
        records_per_batch: None,
        seed,
    };
    Ok(Plan {
        settings,
        given_properties: given,
        pins,
        spec,
        seed,
    })
}

fn read_payloads(path: &Path, delimiter: &str) -> Result<Vec<Bytes>, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("--payload-file {}: cannot read it: {e}", path.display()))?;
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

/// `kbench produce`.
pub async fn run(args: ProduceArgs, mode: Mode) -> u8 {
    let plan = match plan(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kbench: error: {e}");
            return EXIT_USAGE;
        }
    };
    let json = args.json.clone();
    match execute(&args, plan, mode, json).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kbench: error: {e}");
            EXIT_FAILED
        }
    }
}

/// `kbench quickstart`.
pub async fn quickstart(args: QuickstartArgs) -> u8 {
    let json = args.json.clone().unwrap_or_else(|| {
        let stamp = rfc3339(SystemTime::now()).replace([':', '.'], "-");
        PathBuf::from("kbench-results").join(format!("quickstart-{stamp}.json"))
    });
    let produce = ProduceArgs {
        bootstrap_server: None,
        topic: "kbench-quickstart".into(),
        num_records: u64::MAX,
        record_size: Some(100),
        payload_file: None,
        payload_delimiter: "\\n".into(),
        throughput: -1.0,
        duration: Some(args.duration),
        acks: Some(kbench_client::Acks::Leader),
        compression: None,
        batch_size: None,
        linger_ms: None,
        max_in_flight: None,
        partitions: 1,
        replication_factor: 1,
        partition: None,
        pin: Vec::new(),
        property: Vec::new(),
        producer_props: Vec::new(),
        reporting_interval: Duration::from_secs(5),
        json: Some(json),
        seed: None,
        repetitions: 1,
    };
    println!(
        "kbench quickstart: producing 100-byte records for {} s, unthrottled, acks=1, to an embedded broker.",
        args.duration.as_secs_f64()
    );
    run(produce, Mode::Quickstart).await
}

async fn execute(
    args: &ProduceArgs,
    plan: Plan,
    mode: Mode,
    json: Option<PathBuf>,
) -> Result<u8, String> {
    let mut embedded = None;
    let bootstrap = match &plan.settings.bootstrap_servers {
        Some(bs) => bs.clone(),
        None => {
            let broker = EmbeddedBroker::start().await?;
            eprintln!(
                "kbench: no --bootstrap-server given; started an embedded Tansu broker (in-memory) on {} as child process {}",
                broker.addr(),
                broker.pid().map_or_else(|| "?".into(), |p| p.to_string())
            );
            let addr = broker.addr().to_string();
            embedded = Some(broker);
            addr
        }
    };
    let result = drive(args, &plan, mode, json, &bootstrap, embedded.as_mut()).await;
    if let Some(broker) = embedded {
        broker.stop().await;
    }
    result
}

async fn drive(
    args: &ProduceArgs,
    plan: &Plan,
    mode: Mode,
    json: Option<PathBuf>,
    bootstrap: &str,
    mut embedded: Option<&mut EmbeddedBroker>,
) -> Result<u8, String> {
    let servers: Vec<String> = bootstrap
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for s in &servers {
        if !s.contains(':') {
            return Err(format!("--bootstrap-server {s:?}: expected host:port"));
        }
    }
    let config = ClusterConfig {
        bootstrap: servers,
        client_id: plan.settings.client_id.clone(),
        connect_timeout: plan.settings.connect_timeout,
        request_timeout: plan.settings.request_timeout,
        max_in_flight: plan.settings.max_in_flight,
        pins: plan.pins.clone(),
    };
    let connect_budget = plan.settings.connect_timeout + Duration::from_secs(2);
    let cluster = tokio::time::timeout(connect_budget, Cluster::connect(config))
        .await
        .map_err(|_| {
            format!(
                "--bootstrap-server {bootstrap}: no answer within {} s",
                connect_budget.as_secs()
            )
        })?
        .map_err(|e| match e {
            ClientError::Connect { reason, .. } => {
                format!("--bootstrap-server {bootstrap}: cannot connect: {reason}")
            }
            ClientError::Version(v) => v.to_string(),
            other => format!("--bootstrap-server {bootstrap}: {other}"),
        })?;
    cluster
        .check_versions(&[ApiKey::Metadata, ApiKey::Produce])
        .map_err(|e| e.to_string())?;
    if let Some(v) = cluster.negotiated().get(ApiKey::Produce)
        && v < plan.spec.compression.min_produce_version()
    {
        return Err(format!(
            "--compression {}: needs Produce v{} or later, but Produce v{v} is in use",
            plan.spec.compression.name(),
            plan.spec.compression.min_produce_version()
        ));
    }
    let topic = cluster
        .ensure_topic(&args.topic, args.partitions, args.replication_factor)
        .await
        .map_err(|e| format!("--topic {}: {e}", args.topic))?;
    if let Some(p) = args.partition
        && !topic.partitions.iter().any(|l| l.partition == p)
    {
        return Err(format!(
            "--partition {p}: topic {} has partitions 0..{}",
            args.topic,
            topic.partitions.len().saturating_sub(1)
        ));
    }
    let cluster = Arc::new(cluster);
    let cancel = CancellationToken::new();
    let reason = Arc::new(Mutex::new(None::<String>));
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let cancel = cancel.clone();
        let reason = reason.clone();
        let interrupted = interrupted.clone();
        async move {
            let why = tokio::select! {
                _ = tokio::signal::ctrl_c() => { interrupted.store(true, std::sync::atomic::Ordering::Relaxed); "interrupted".to_string() }
                _ = terminate() => { interrupted.store(true, std::sync::atomic::Ordering::Relaxed); "terminated".to_string() }
                why = async { match embedded.as_mut() { Some(b) => b.exited().await, None => std::future::pending().await } } => why,
            };
            *reason.lock().expect("reason lock") = Some(why);
            cancel.cancel();
            // The run notices the cancellation and finishes; this future never does.
            std::future::pending::<std::convert::Infallible>().await
        }
    };
    let repetitions = args.repetitions;
    let all_runs = async {
        let mut runs = Vec::with_capacity(repetitions);
        for i in 0..repetitions {
            if repetitions > 1 {
                println!("Repetition {} of {repetitions}", i + 1);
            }
            let run = run_produce(
                cluster.clone(),
                topic.clone(),
                &plan.spec,
                cancel.clone(),
                reason.clone(),
                |w| {
                    println!("{}", w.line());
                    if w.failed > 0 {
                        println!("{} records failed.", w.failed);
                    }
                },
            )
            .await;
            println!("{}", run.final_line());
            let stop = run.aborted.is_some();
            runs.push(run);
            if stop {
                break;
            }
        }
        runs
    };
    let runs = tokio::select! {
        runs = all_runs => runs,
        never = watcher => match never {},
    };
    // Let the broker read everything written (acks=0 requests have no other confirmation).
    cluster.close(Duration::from_secs(5)).await;
    let Some(run) = kbench_bench::ProduceRun::pooled(&runs) else {
        return Err("no repetition ran".into());
    };
    let mut code = 0;
    if run.records_failed > 0 {
        println!("{} records failed:", run.records_failed);
        for (error, n) in &run.errors {
            println!("  {n} × {error}");
        }
        code = EXIT_FAILED;
    }
    if let Some(why) = &run.aborted {
        eprintln!("kbench: the run stopped early: {why}");
        code = if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            EXIT_INTERRUPTED
        } else {
            EXIT_FAILED
        };
    }
    let negotiated: BTreeMap<String, i16> = cluster.negotiated().named().collect();
    let pinned: BTreeMap<String, i16> = plan.pins.iter().map(|(a, v)| (api_name(a), v)).collect();
    let doc = ResultDocument::produce(
        &run,
        &runs,
        Target {
            bootstrap_servers: bootstrap.to_string(),
            embedded_broker: embedded_flag(plan),
        },
        settings_json(args, plan),
        negotiated,
        pinned,
        plan.seed,
    );
    if mode == Mode::Quickstart {
        print_summary(&doc);
    }
    if let Some(path) = json {
        write_json(&path, &doc)?;
        if mode == Mode::Quickstart {
            println!("Result document: {}", path.display());
        } else {
            eprintln!("kbench: wrote {}", path.display());
        }
    }
    Ok(code)
}

fn embedded_flag(plan: &Plan) -> bool {
    plan.settings.bootstrap_servers.is_none()
}

pub(crate) async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

fn settings_json(args: &ProduceArgs, plan: &Plan) -> serde_json::Value {
    let s = &plan.settings;
    serde_json::json!({
        "topic": args.topic,
        "num_records": plan.spec.num_records,
        "duration_s": plan.spec.duration.map(|d| d.as_secs_f64()),
        "record_size": match &plan.spec.payload { Payload::Random { size } => Some(*size), Payload::Lines(_) => None },
        "payload_file": args.payload_file.as_ref().map(|p| p.display().to_string()),
        "throughput": plan.spec.throughput.unwrap_or(-1.0),
        "acks": s.acks.name(),
        "compression": s.compression.name(),
        "batch_size": s.batch_size,
        "linger_ms": s.linger.as_millis() as u64,
        "max_in_flight": s.max_in_flight,
        "partitions": args.partitions,
        "replication_factor": args.replication_factor,
        "partition": args.partition,
        "client_id": s.client_id,
        "request_timeout_ms": s.request_timeout.as_millis() as u64,
        "retries": s.retries,
        "retry_backoff_ms": s.retry_backoff.as_millis() as u64,
        "delivery_timeout_ms": s.delivery_timeout.as_millis() as u64,
        "reporting_interval_ms": plan.spec.reporting_interval.as_millis() as u64,
        "repetitions": args.repetitions,
        "properties": ProducerSettings::redacted(&plan.given_properties),
    })
}

fn write_json(path: &Path, doc: &ResultDocument) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "--json {}: cannot create {}: {e}",
                path.display(),
                dir.display()
            )
        })?;
    }
    let text = serde_json::to_string_pretty(doc).map_err(|e| format!("--json: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("--json {}: {e}", path.display()))
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
