//! `kbench e2e`: N producers and one consumer in a fresh group, whole-trip latency, exact counts.
//! The spec is built here from flags; `kbench serve` builds the same spec from JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kbench_bench::e2e::{CommitMode, E2eLive, E2eMode, E2eRun, E2eSpec, Span, run_e2e};
use kbench_bench::result::{E2eResultDocument, Target};
use kbench_client::{Acks, ClientError, ClusterConfig, ProducerConfig};
use kbench_wire::{Compression, Pins};
use tokio_util::sync::CancellationToken;

use crate::cli::{parse_duration, positive_usize};
use crate::embedded::EmbeddedBroker;
use crate::props::ProducerSettings;

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Args)]
pub struct E2eArgs {
    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic; created when missing.
    #[arg(long, default_value = "kbench-e2e")]
    pub topic: String,

    /// Partitions when the topic is created.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = crate::cli::positive_i32)]
    pub partitions: i32,

    /// Parallel producers, each with its own connection.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = positive_usize)]
    pub producers: usize,

    /// Wait before each producer's next batch, a range inclusive at both ends: 100..100ms, 5..50ms, 1s.
    #[arg(long, default_value = "100..100ms", value_parser = parse_interval_span)]
    pub batch_interval: Span<u64>,

    /// Each record's value size in bytes, a range: 1024, 100..2000.
    #[arg(long, default_value = "1024", value_parser = parse_size_span)]
    pub payload_size: Span<usize>,

    /// Records per produce request, a range: 4, 1..10.
    #[arg(long, default_value = "1", value_parser = parse_count_span)]
    pub messages_per_batch: Span<usize>,

    /// Consumer commits: `sync` (after every poll, awaited) or an interval for asynchronous commits (10s).
    #[arg(long, default_value = "sync", value_parser = parse_commit)]
    pub commit: CommitMode,

    /// How long a poll (Fetch) may wait for data (fetch.max.wait.ms), e.g. 10ms.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub consume_wait: Duration,

    /// Fetch max bytes per poll.
    #[arg(long, default_value = "52428800", allow_negative_numbers = true, value_parser = crate::cli::positive_i32)]
    pub consume_max_bytes: i32,

    /// Load phase length (e.g. 30s); without it, runs until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// After the producers stop, wait at most this long for the consumer to catch up.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain: Duration,

    /// acks: 0, 1 or all (-1).
    #[arg(long, default_value = "all", allow_negative_numbers = true)]
    pub acks: Acks,

    /// Compression: none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub compression: Compression,

    /// Consumer group id (default: a fresh kbench-e2e-<uuid> per run).
    #[arg(long)]
    pub group: Option<String>,

    /// Consumer client id (default: a fresh kbench-consumer-<uuid> per run).
    #[arg(long)]
    pub consumer_id: Option<String>,

    /// Run only part of the pipe: consumer-and-producers (default), producers, consumer.
    #[arg(long, default_value = "consumer-and-producers", value_parser = parse_mode)]
    pub mode: E2eMode,

    /// Pin API versions, e.g. produce=9,fetch=12.
    #[arg(long, value_name = "API=VERSION[,…]")]
    pub pin: Vec<String>,

    /// Progress line interval, e.g. 5s (0 for none).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub reporting_interval: Duration,

    /// Write the result document (docs/results.md, kind "e2e") to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Seed for intervals, sizes and counts (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// How to reach Kafka: `kafka` (the Kafka protocol) or `rest-proxy` (a Kafka REST Proxy, --rest-url).
    #[arg(long, default_value = "kafka", value_parser = ["kafka", "rest-proxy"])]
    pub via: String,

    /// REST Proxy base URL (http:// or https://), with --via rest-proxy.
    #[arg(long)]
    pub rest_url: Option<String>,

    /// Embedded format through the REST Proxy: avro (the seed's schema), json or binary.
    #[arg(long, default_value = "avro")]
    pub rest_format: kbench_client::rest::RestFormat,

    /// REST produce API: v2, v3 (one request per record) or v3-stream (one chunked request per batch).
    #[arg(long, default_value = "v2")]
    pub rest_api: kbench_bench::rest_e2e::RestApi,

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

/// The REST Proxy driver's settings from the flags; an error names the flag.
fn rest_from(args: &E2eArgs) -> Result<Option<kbench_bench::rest_e2e::RestSpec>, String> {
    if args.via != "rest-proxy" {
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
            "--rest-url {url:?}: must start with http:// or https://"
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
            std::fs::read(path)
                .map_err(|e| format!("--rest-ca-cert {}: cannot read it: {e}", path.display()))?,
        ),
        None => None,
    };
    Ok(Some(kbench_bench::rest_e2e::RestSpec {
        proxy: kbench_client::rest::RestConfig {
            url,
            basic_auth,
            timeout: Duration::from_secs(60),
            ca_cert_pem,
        },
        format: args.rest_format,
        api: args.rest_api,
        value_schema_id: args.value_schema_id,
        schema_registry: args.schema_registry.clone(),
        throttle_backoff: Duration::from_millis(100),
    }))
}

fn split_span(s: &str) -> (&str, &str) {
    match s.split_once("..") {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (s.trim(), s.trim()),
    }
}

fn ordered<T: PartialOrd + std::fmt::Display + Copy>(min: T, max: T) -> Result<Span<T>, String> {
    if min > max {
        return Err(format!("minimum {min} is larger than maximum {max}"));
    }
    Ok(Span { min, max })
}

/// `100..200ms`, `1..2s`, `100ms`, `100` (ms).
pub fn parse_interval_span(s: &str) -> Result<Span<u64>, String> {
    let s = s.trim();
    let (unit, body) = if let Some(b) = s.strip_suffix("ms") {
        (1, b)
    } else if let Some(b) = s.strip_suffix('s') {
        (1000, b)
    } else {
        (1, s)
    };
    let (a, b) = split_span(body);
    let num = |x: &str| {
        x.parse::<u64>()
            .map_err(|_| format!("{x:?} is not a whole, non-negative number"))
            .and_then(|v| {
                v.checked_mul(unit)
                    .ok_or_else(|| format!("{x:?} is too large"))
            })
    };
    ordered(num(a)?, num(b)?)
}

fn parse_positive_span(s: &str) -> Result<Span<usize>, String> {
    let (a, b) = split_span(s);
    let num = |x: &str| match x.parse::<usize>() {
        Ok(0) | Err(_) => Err(format!("{x:?} is not a whole number of at least 1")),
        Ok(v) => Ok(v),
    };
    ordered(num(a)?, num(b)?)
}

pub fn parse_size_span(s: &str) -> Result<Span<usize>, String> {
    let span = parse_positive_span(s)?;
    if span.max > 64 * 1024 * 1024 {
        return Err(format!("{} bytes is above the 64 MiB limit", span.max));
    }
    Ok(span)
}

pub fn parse_count_span(s: &str) -> Result<Span<usize>, String> {
    let span = parse_positive_span(s)?;
    if span.max > 1_000_000 {
        return Err(format!("{} records per batch is above 1 000 000", span.max));
    }
    Ok(span)
}

pub fn parse_commit(s: &str) -> Result<CommitMode, String> {
    if s.trim().eq_ignore_ascii_case("sync") {
        return Ok(CommitMode::Sync);
    }
    let d = parse_duration(s)
        .map_err(|_| format!("{s:?}: expected `sync` or an interval such as 10s"))?;
    if d.is_zero() {
        return Err("the commit interval must be above zero (or `sync`)".into());
    }
    Ok(CommitMode::Interval(d))
}

fn parse_mode(s: &str) -> Result<E2eMode, String> {
    match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
        "consumer-and-producers" | "both" => Ok(E2eMode::ConsumerAndProducers),
        "producers" => Ok(E2eMode::Producers),
        "consumer" => Ok(E2eMode::Consumer),
        other => Err(format!(
            "unknown mode {other:?} (expected consumer-and-producers, producers or consumer)"
        )),
    }
}

/// Split a bootstrap list and check each entry is host:port; `field` names the flag or JSON field.
pub fn bootstrap_list(field: &str, s: &str) -> Result<Vec<String>, String> {
    let servers: Vec<String> = s
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if servers.is_empty() {
        return Err(format!("{field}: no address given"));
    }
    for s in &servers {
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => return Err(format!("{field} {s:?}: expected host:port")),
        }
    }
    Ok(servers)
}

/// The cluster settings every e2e connection starts from (Kafka's client defaults).
pub fn cluster_config(bootstrap: Vec<String>, client_id: &str, pins: Pins) -> ClusterConfig {
    let d = ProducerSettings::default();
    ClusterConfig {
        bootstrap,
        client_id: client_id.to_string(),
        connect_timeout: d.connect_timeout,
        request_timeout: d.request_timeout,
        max_in_flight: d.max_in_flight,
        pins,
    }
}

/// Kafka's producer delivery defaults, with `acks`.
pub fn producer_config(acks: Acks) -> ProducerConfig {
    let d = ProducerSettings::default();
    ProducerConfig {
        acks,
        request_timeout: d.request_timeout,
        retries: d.retries,
        retry_backoff: d.retry_backoff,
        delivery_timeout: d.delivery_timeout,
    }
}

/// A fresh id with a prefix, e.g. kbench-e2e-1f0c….
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", crate::cli::random_seed())
}

/// The settings block of the result document: the spec as the user would write it.
pub fn settings_json(spec: &E2eSpec) -> serde_json::Value {
    serde_json::json!({
        "topic": spec.topic,
        "partitions": spec.partitions,
        "mode": spec.mode,
        "producers": spec.producers,
        "batch_interval_ms": spec.batch_interval_ms,
        "payload_size": spec.payload_size,
        "messages_per_batch": spec.messages_per_batch,
        "acks": spec.producer.acks.name(),
        "compression": spec.compression.name(),
        "max_in_flight": spec.max_in_flight,
        "group_id": spec.group_id,
        "consumer_id": spec.consumer_id,
        "commit": spec.commit.describe(),
        "consume_wait_ms": spec.consume_wait.as_millis() as u64,
        "consume_max_bytes": spec.consume_max_bytes,
        "session_timeout_ms": spec.session_timeout.as_millis() as u64,
        "heartbeat_interval_ms": spec.heartbeat_interval.as_millis() as u64,
        "duration_s": spec.duration.map(|d| d.as_secs_f64()),
        "drain_s": spec.drain.as_secs_f64(),
        "gather_latencies": spec.gather_latencies,
        "via": if spec.rest.is_some() { "rest-proxy" } else { "kafka" },
        "rest_proxy": spec.rest.as_ref().map(|r| serde_json::json!({
            "url": r.proxy.url,
            "user": r.proxy.basic_auth.as_ref().map(|(u, _)| u),
            "format": r.format.name(),
            "api": r.api.name(),
            "value_schema_id": r.value_schema_id,
            "schema_registry": r.schema_registry,
        })),
    })
}

/// Connect errors said the way a user can act on them.
pub fn describe_start_error(field: &str, bootstrap: &str, e: ClientError) -> String {
    match e {
        ClientError::Connect { reason, .. } => {
            format!("{field} {bootstrap}: cannot connect: {reason}")
        }
        ClientError::Version(v) => v.to_string(),
        other => format!("{other}"),
    }
}

fn spec_from(args: &E2eArgs) -> E2eSpec {
    E2eSpec {
        topic: args.topic.clone(),
        partitions: args.partitions,
        replication_factor: 1,
        mode: args.mode,
        producers: args.producers,
        batch_interval_ms: args.batch_interval,
        payload_size: args.payload_size,
        messages_per_batch: args.messages_per_batch,
        compression: args.compression,
        producer: producer_config(args.acks),
        max_in_flight: 5,
        group_id: args.group.clone().unwrap_or_else(|| fresh_id("kbench-e2e")),
        consumer_id: args
            .consumer_id
            .clone()
            .unwrap_or_else(|| fresh_id("kbench-consumer")),
        commit: args.commit,
        consume_wait: args.consume_wait,
        consume_max_bytes: args.consume_max_bytes,
        session_timeout: Duration::from_secs(45),
        heartbeat_interval: Duration::from_secs(3),
        duration: args.duration,
        drain: args.drain,
        gather_latencies: true,
        seed: args.seed.unwrap_or_else(crate::cli::random_seed),
        rest: None,
    }
}

/// `kbench e2e`.
pub async fn run(args: E2eArgs) -> u8 {
    let mut pins = Pins::default();
    for p in &args.pin {
        if let Err(e) = pins.extend_from(p) {
            eprintln!("kbench: error: {e}");
            return EXIT_USAGE;
        }
    }
    let servers = match args
        .bootstrap_server
        .as_deref()
        .map(|s| bootstrap_list("--bootstrap-server", s))
    {
        Some(Err(e)) => {
            eprintln!("kbench: error: {e}");
            return EXIT_USAGE;
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let mut spec = spec_from(&args);
    match rest_from(&args) {
        Ok(Some(rest)) => {
            spec.rest = Some(rest);
            let url = spec
                .rest
                .as_ref()
                .map(|r| r.proxy.url.clone())
                .unwrap_or_default();
            return drive(&args, spec, vec![url], Pins::default(), None).await;
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!("kbench: error: {e}");
            return EXIT_USAGE;
        }
    }
    let mut embedded = None;
    let servers = match servers {
        Some(s) => s,
        None => match EmbeddedBroker::start().await {
            Ok(b) => {
                eprintln!(
                    "kbench: no --bootstrap-server given; started an embedded Tansu broker (in-memory) on {} as child process {}",
                    b.addr(),
                    b.pid().map_or_else(|| "?".into(), |p| p.to_string())
                );
                let addr = b.addr().to_string();
                embedded = Some(b);
                vec![addr]
            }
            Err(e) => {
                eprintln!("kbench: error: {e}");
                return EXIT_FAILED;
            }
        },
    };
    let code = drive(&args, spec, servers, pins, embedded.as_mut()).await;
    if let Some(b) = embedded {
        b.stop().await;
    }
    code
}

async fn drive(
    args: &E2eArgs,
    spec: E2eSpec,
    servers: Vec<String>,
    pins: Pins,
    mut embedded: Option<&mut EmbeddedBroker>,
) -> u8 {
    let bootstrap = servers.join(",");
    let embedded_broker = embedded.is_some();
    let config = cluster_config(servers, "kbench-e2e", pins);
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
    let live = Arc::new(E2eLive::default());
    let stop = CancellationToken::new();
    let why = Arc::new(std::sync::Mutex::new(None::<(String, bool)>));
    let watcher = {
        let stop = stop.clone();
        let why = why.clone();
        async move {
            let reason = tokio::select! {
                _ = tokio::signal::ctrl_c() => ("interrupted".to_string(), true),
                _ = crate::produce::terminate() => ("terminated".to_string(), true),
                w = async { match embedded.as_mut() { Some(b) => b.exited().await, None => std::future::pending().await } } => (w, false),
            };
            *why.lock().expect("why lock") = Some(reason);
            stop.cancel();
            std::future::pending::<std::convert::Infallible>().await
        }
    };
    let progress = {
        let live = live.clone();
        let every = args.reporting_interval;
        async move {
            if every.is_zero() {
                return std::future::pending().await;
            }
            let mut last = None;
            loop {
                tokio::time::sleep(every).await;
                if live.phase() != "running" {
                    continue;
                }
                let (line, snap) = live.progress_line(last.as_ref());
                println!("{line}");
                last = Some(snap);
            }
        }
    };
    let result = tokio::select! {
        r = run_e2e(&spec, &config, live.clone(), stop.clone()) => r,
        never = watcher => match never {},
        never = progress => match never {},
    };
    let mut run = match result {
        Ok(r) => r,
        Err(e) => {
            let field = if spec.rest.is_some() {
                "--rest-url"
            } else {
                "--bootstrap-server"
            };
            eprintln!(
                "kbench: error: {}",
                describe_start_error(field, &bootstrap, e)
            );
            return EXIT_FAILED;
        }
    };
    let mut interrupted = false;
    if let Some((reason, by_user)) = why.lock().expect("why lock").clone() {
        interrupted = by_user;
        // Ctrl-C is how an open-ended run ends; anything else stops a run early.
        if !by_user || args.duration.is_some() {
            run.aborted = Some(reason);
        }
    }
    let doc = E2eResultDocument::of(
        &run,
        Target {
            bootstrap_servers: bootstrap.clone(),
            embedded_broker,
        },
        settings_json(&spec),
        spec.seed,
    );
    print_summary(&run, &doc);
    if let Some(path) = &args.json {
        if let Err(e) = write_json(path, &doc) {
            eprintln!("kbench: error: {e}");
            return EXIT_FAILED;
        }
        eprintln!("kbench: wrote {}", path.display());
    }
    if run.failed > 0 || run.lost > 0 || run.late > 0 || (run.aborted.is_some() && !interrupted) {
        EXIT_FAILED
    } else if interrupted && args.duration.is_some() {
        EXIT_INTERRUPTED
    } else {
        0
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn print_summary(run: &E2eRun, doc: &E2eResultDocument) {
    println!();
    println!(
        "{} records produced, {} acknowledged, {} failed, {} consumed in {:.1} s ({:.1} records/sec); drain {:.2} s{}",
        run.produced,
        run.acked,
        run.failed,
        run.consumed,
        doc.duration_s,
        doc.records_per_sec,
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
    if run.gaps_held > 0 {
        println!(
            "the broker returned later records before earlier ones {} times; the consumer held its position until they were readable ({} holes passed over)",
            run.gaps_held, run.gaps_skipped
        );
    }
    for (name, l) in [
        ("producer request duration", &doc.producer_request_duration),
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
    for (error, n) in &run.errors {
        println!("  {n} × {error}");
    }
    if let Some(why) = &run.aborted {
        eprintln!("kbench: the run stopped early: {why}");
    }
}

pub fn write_json<T: serde::Serialize>(path: &Path, doc: &T) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(doc).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse_with_units() {
        assert_eq!(
            parse_interval_span("100..100ms").unwrap(),
            Span { min: 100, max: 100 }
        );
        assert_eq!(
            parse_interval_span("1..2s").unwrap(),
            Span {
                min: 1000,
                max: 2000
            }
        );
        assert_eq!(parse_interval_span("5").unwrap(), Span { min: 5, max: 5 });
        assert!(
            parse_interval_span("200..100ms")
                .unwrap_err()
                .contains("larger")
        );
        assert!(parse_interval_span("-1..5ms").is_err());
        assert_eq!(
            parse_size_span("180000..180000").unwrap(),
            Span::fixed(180_000)
        );
        assert!(parse_size_span("0").is_err());
        assert_eq!(parse_count_span("1..10").unwrap(), Span { min: 1, max: 10 });
    }

    #[test]
    fn commit_and_bootstrap_parse() {
        assert_eq!(parse_commit("sync").unwrap(), CommitMode::Sync);
        assert_eq!(
            parse_commit("10s").unwrap(),
            CommitMode::Interval(Duration::from_secs(10))
        );
        assert!(parse_commit("often").is_err());
        assert!(bootstrap_list("kafkaBootstrapServers", "a:1, b:2").is_ok());
        assert!(
            bootstrap_list("kafkaBootstrapServers", "nohost")
                .unwrap_err()
                .contains("kafkaBootstrapServers")
        );
    }
}
