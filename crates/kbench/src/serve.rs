//! `kbench serve`: the HTTP control API.
//!
//! - `/pub-sub-demo` (POST start, GET status, DELETE stop → stats) takes the seed REST-Proxy perf
//!   service's payloads unchanged and answers in its shape; unknown fields are ignored as it did.
//! - `/v1/runs` (POST, GET, GET/DELETE `/v1/runs/{id}`) runs any kbench workload (e2e, produce);
//!   unknown fields are an error. `/v1/openapi.json` describes it.
//!
//! One run at a time: starting while one is active is 409 (the seed silently killed the running
//! task). Every finished run's result document is written to `--results-dir` before any response
//! reports it finished, and the directory is read back at start, so a restart loses nothing finished.
//! Passwords are never stored in a run's config, a response, a result file or a log line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use hdrhistogram::Histogram;
use kbench_bench::e2e::{CommitMode, E2eLive, E2eMode, E2eSpec, Span, run_e2e};
use kbench_bench::result::{E2eResultDocument, ResultDocument, Target};
use kbench_bench::{Payload, ProduceSpec, run_produce};
use kbench_client::{Acks, Cluster};
use kbench_wire::{Compression, Pins};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::e2e::{
    bootstrap_list, cluster_config, describe_start_error, fresh_id, parse_commit, parse_count_span,
    parse_interval_span, parse_size_span, producer_config, settings_json, write_json,
};
use crate::embedded::EmbeddedBroker;
use crate::iso8601;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback unless told otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Default Kafka bootstrap servers for runs that name none. Without it (and without
    /// kafkaBootstrapServers / bootstrap_servers in a request) kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Require `Authorization: Bearer TOKEN` on every request.
    #[arg(long, env = "KBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Where every finished run's result document is written (and read back at start).
    #[arg(long, default_value = "kbench-results")]
    pub results_dir: PathBuf,
}

/// Which API started a run (and so which shape its answers take).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    PubSub,
    V1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    Stopping,
    Finished,
    Failed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Stopping => "stopping",
            Status::Finished => "finished",
            Status::Failed => "failed",
        }
    }
    fn active(self) -> bool {
        matches!(self, Status::Running | Status::Stopping)
    }
}

/// Live counters of a produce run started through /v1.
#[derive(Default)]
struct ProduceLive {
    acked: AtomicU64,
    failed: AtomicU64,
}

enum Live {
    E2e(Arc<E2eLive>),
    Produce(Arc<ProduceLive>),
    None,
}

struct RunEntry {
    id: String,
    kind: &'static str,
    api: Api,
    /// The request as accepted, secrets removed.
    config: Value,
    status: Status,
    stop: CancellationToken,
    live: Live,
    start_time: SystemTime,
    kill_time: Option<SystemTime>,
    /// The result document once finished.
    result: Option<Value>,
    /// The seed-shaped stats, for /pub-sub-demo runs once finished.
    pub_sub_stats: Option<Value>,
    error: Option<String>,
    done: tokio::sync::watch::Receiver<bool>,
}

struct App {
    runs: Mutex<Vec<RunEntry>>,
    token: Option<String>,
    results_dir: PathBuf,
    default_bootstrap: Option<Vec<String>>,
    embedded: tokio::sync::Mutex<Option<EmbeddedBroker>>,
}

/// An error answer: a status and a message naming the field or thing at fault.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            field: None,
        }
    }
    fn field(field: &str, message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: if message.starts_with(field) {
                message
            } else {
                format!("{field}: {message}")
            },
            field: Some(field.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message, "status": self.status.as_u16() });
        if let Some(f) = self.field {
            body["field"] = Value::String(f);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

type ApiResult = Result<Response, ApiError>;

/// `kbench serve`.
pub async fn run(args: ServeArgs) -> u8 {
    let default_bootstrap = match args.bootstrap_server.as_deref() {
        Some(s) => match bootstrap_list("--bootstrap-server", s) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("kbench: error: {e}");
                return 2;
            }
        },
        None => None,
    };
    if args.token.as_deref().is_some_and(str::is_empty) {
        eprintln!("kbench: error: --token: must not be empty");
        return 2;
    }
    if let Err(e) = std::fs::create_dir_all(&args.results_dir) {
        eprintln!(
            "kbench: error: --results-dir {}: cannot create it: {e}",
            args.results_dir.display()
        );
        return 2;
    }
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("kbench: error: --listen {}: {e}", args.listen);
            return 2;
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    if !addr.ip().is_loopback() && args.token.is_none() {
        eprintln!(
            "kbench serve: warning: listening on {addr}, beyond loopback, without --token: anyone who can reach it can start load"
        );
    }
    let app = Arc::new(App {
        runs: Mutex::new(load_finished(&args.results_dir)),
        token: args.token.clone(),
        results_dir: args.results_dir.clone(),
        default_bootstrap,
        embedded: tokio::sync::Mutex::new(None),
    });
    let router = router(app.clone());
    println!("kbench serve: listening on http://{addr}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let shutdown = async {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = crate::produce::terminate() => {}
        }
    };
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await;
    // Stop whatever runs and let it write its result (bounded), then stop the embedded broker.
    let waiting: Vec<tokio::sync::watch::Receiver<bool>> = app
        .runs
        .lock()
        .expect("runs lock")
        .iter()
        .filter(|r| r.status.active())
        .map(|r| {
            r.stop.cancel();
            r.done.clone()
        })
        .collect();
    for mut done in waiting {
        let _ = tokio::time::timeout(Duration::from_secs(20), done.wait_for(|d| *d)).await;
    }
    if let Some(b) = app.embedded.lock().await.take() {
        b.stop().await;
    }
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kbench serve: error: {e}");
            1
        }
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/pub-sub-demo",
            get(pub_sub_get).post(pub_sub_post).delete(pub_sub_delete),
        )
        .route("/v1/runs", get(v1_list).post(v1_create))
        .route("/v1/runs/{id}", get(v1_get).delete(v1_delete))
        .route("/v1/openapi.json", get(openapi))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

async fn auth(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Authorization: Bearer <token> required",
            )
            .into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(request).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Previously finished runs, from the results directory.
fn load_finished(dir: &std::path::Path) -> Vec<RunEntry> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let Some(id) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let Some(doc) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        let kind = match doc.get("kind").and_then(Value::as_str) {
            Some("e2e") => "e2e",
            Some("produce") => "produce",
            _ => continue,
        };
        let (_tx, done) = tokio::sync::watch::channel(true);
        out.push(RunEntry {
            id,
            kind,
            api: if doc.get("pub_sub_demo").is_some() {
                Api::PubSub
            } else {
                Api::V1
            },
            config: doc.get("settings").cloned().unwrap_or(Value::Null),
            status: Status::Finished,
            stop: CancellationToken::new(),
            live: Live::None,
            start_time: SystemTime::UNIX_EPOCH,
            kill_time: None,
            pub_sub_stats: doc.get("pub_sub_demo").cloned(),
            result: Some(doc),
            error: None,
            done,
        });
    }
    out
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// Deserialize into `T`, naming the field at fault.
fn from_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // A missing or unknown field is named in the message; otherwise the path names it.
        let field = if path == "." || path.is_empty() {
            inner
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| "body".into())
        } else {
            path
        };
        ApiError::field(&field, inner)
    })
}

// ---------------------------------------------------------------------------------------------
// /pub-sub-demo

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum PubSubType {
    KafkaNative,
    KafkaRestProxy,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum PubSubMode {
    Consumer,
    Producers,
    ConsumerAndProducers,
}

/// The seed payload. Unknown fields are ignored, as the seed service did.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PubSubConfig {
    #[serde(rename = "type")]
    kind: PubSubType,
    min_batch_interval_ms: u64,
    max_batch_interval_ms: u64,
    min_message_payload_size_bytes: usize,
    max_message_payload_size_bytes: usize,
    parallel_producers: usize,
    #[serde(default = "yes")]
    gather_latencies: bool,
    // kafkaRestUri, kafkaUserName, kafkaUserPassword and valueSchemaId belong to KAFKA_REST_PROXY:
    // for KAFKA_NATIVE they are accepted and unused. The password is removed from the stored config
    // (see `public_config`) and never formatted.
    #[serde(default)]
    kafka_rest_uri: Option<String>,
    #[serde(default)]
    kafka_user_name: Option<String>,
    #[serde(default)]
    kafka_user_password: Option<String>,
    #[serde(default)]
    value_schema_id: Option<Value>,
    /// kbench's additions for KAFKA_REST_PROXY: embedded format (default avro, as the seed), produce
    /// API (v2, v3, v3-stream; default v2), and a Schema Registry to register the seed schema in.
    #[serde(default)]
    rest_format: Option<String>,
    #[serde(default)]
    rest_api: Option<String>,
    #[serde(default)]
    schema_registry_url: Option<String>,
    kafka_topic: String,
    #[serde(default)]
    kafka_consumer_group: Option<String>,
    #[serde(default)]
    kafka_consumer_id: Option<String>,
    min_messages_per_batch: usize,
    max_messages_per_batch: usize,
    #[serde(default = "default_consume_timeout")]
    consume_timeout_ms: u64,
    #[serde(default = "default_max_bytes")]
    consume_max_bytes_ms: u64,
    #[serde(default)]
    commit_interval: Option<String>,
    #[serde(default)]
    mode: Option<PubSubMode>,
    #[serde(default)]
    run_duration: Option<String>,
    #[serde(default)]
    kafka_bootstrap_servers: Option<String>,
}

fn yes() -> bool {
    true
}
fn default_consume_timeout() -> u64 {
    10
}
fn default_max_bytes() -> u64 {
    52_428_800
}

/// The payload as GET shows it: the password removed (not masked: removed).
fn public_config(raw: &Value) -> Value {
    let mut v = raw.clone();
    if let Some(o) = v.as_object_mut() {
        o.retain(|k, _| !crate::props::is_secret(k));
    }
    v
}

fn check_range<T: PartialOrd + std::fmt::Display>(
    min_name: &str,
    min: T,
    max_name: &str,
    max: T,
) -> Result<(), ApiError> {
    if min > max {
        return Err(ApiError::field(
            min_name,
            format!("{min} is larger than {max_name} ({max})"),
        ));
    }
    Ok(())
}

fn at_least_one(name: &str, v: usize) -> Result<(), ApiError> {
    if v == 0 {
        return Err(ApiError::field(name, "must be at least 1"));
    }
    Ok(())
}

fn pub_sub_spec(c: &PubSubConfig) -> Result<(E2eSpec, Option<Vec<String>>), ApiError> {
    check_range(
        "minBatchIntervalMs",
        c.min_batch_interval_ms,
        "maxBatchIntervalMs",
        c.max_batch_interval_ms,
    )?;
    check_range(
        "minMessagePayloadSizeBytes",
        c.min_message_payload_size_bytes,
        "maxMessagePayloadSizeBytes",
        c.max_message_payload_size_bytes,
    )?;
    check_range(
        "minMessagesPerBatch",
        c.min_messages_per_batch,
        "maxMessagesPerBatch",
        c.max_messages_per_batch,
    )?;
    at_least_one(
        "minMessagePayloadSizeBytes",
        c.min_message_payload_size_bytes,
    )?;
    at_least_one("minMessagesPerBatch", c.min_messages_per_batch)?;
    if c.max_message_payload_size_bytes > 64 * 1024 * 1024 {
        return Err(ApiError::field(
            "maxMessagePayloadSizeBytes",
            "above the 64 MiB limit",
        ));
    }
    if c.max_messages_per_batch > 1_000_000 {
        return Err(ApiError::field("maxMessagesPerBatch", "above 1 000 000"));
    }
    let mode = match c.mode {
        None | Some(PubSubMode::ConsumerAndProducers) => E2eMode::ConsumerAndProducers,
        Some(PubSubMode::Producers) => E2eMode::Producers,
        Some(PubSubMode::Consumer) => E2eMode::Consumer,
    };
    if mode.has_producers() {
        at_least_one("parallelProducers", c.parallel_producers)?;
    }
    if c.parallel_producers > 10_000 {
        return Err(ApiError::field("parallelProducers", "above 10 000"));
    }
    if c.kafka_topic.trim().is_empty() {
        return Err(ApiError::field("kafkaTopic", "must not be empty"));
    }
    let commit = match c.commit_interval.as_deref() {
        None => CommitMode::Sync,
        Some(s) => {
            let d = iso8601::parse_duration(s).map_err(|e| ApiError::field("commitInterval", e))?;
            if d.is_zero() {
                return Err(ApiError::field(
                    "commitInterval",
                    "must be above zero, or null for synchronous commits",
                ));
            }
            CommitMode::Interval(d)
        }
    };
    let duration = match c.run_duration.as_deref() {
        None => None,
        Some(s) => {
            let d = iso8601::parse_duration(s).map_err(|e| ApiError::field("runDuration", e))?;
            if d.is_zero() {
                return Err(ApiError::field("runDuration", "must be above zero"));
            }
            Some(d)
        }
    };
    let bootstrap = match c.kafka_bootstrap_servers.as_deref() {
        Some(s) => Some(bootstrap_list("kafkaBootstrapServers", s).map_err(|e| {
            ApiError::field(
                "kafkaBootstrapServers",
                e.trim_start_matches("kafkaBootstrapServers")
                    .trim_start_matches(':')
                    .trim(),
            )
        })?),
        None => None,
    };
    let max_bytes = i32::try_from(c.consume_max_bytes_ms)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| ApiError::field("consumeMaxBytesMs", "must be between 1 and 2147483647"))?;
    let spec = E2eSpec {
        topic: c.kafka_topic.clone(),
        partitions: 1,
        replication_factor: 1,
        mode,
        producers: c.parallel_producers,
        batch_interval_ms: Span {
            min: c.min_batch_interval_ms,
            max: c.max_batch_interval_ms,
        },
        payload_size: Span {
            min: c.min_message_payload_size_bytes,
            max: c.max_message_payload_size_bytes,
        },
        messages_per_batch: Span {
            min: c.min_messages_per_batch,
            max: c.max_messages_per_batch,
        },
        compression: Compression::None,
        producer: producer_config(Acks::All),
        max_in_flight: 5,
        group_id: c
            .kafka_consumer_group
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| fresh_id("kbench-e2e")),
        consumer_id: c
            .kafka_consumer_id
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| fresh_id("kbench-consumer")),
        commit,
        consume_wait: Duration::from_millis(c.consume_timeout_ms.min(i32::MAX as u64)),
        consume_max_bytes: max_bytes,
        session_timeout: Duration::from_secs(45),
        heartbeat_interval: Duration::from_secs(3),
        duration,
        drain: Duration::from_secs(10),
        gather_latencies: c.gather_latencies,
        seed: crate::cli::random_seed(),
        rest: None,
    };
    Ok((spec, bootstrap))
}

async fn pub_sub_post(State(app): State<Arc<App>>, body: Bytes) -> ApiResult {
    let raw: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON: {e}")))?;
    if !raw.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        ));
    }
    let config: PubSubConfig = from_value(raw.clone())?;
    let (mut spec, bootstrap) = pub_sub_spec(&config)?;
    if config.kind == PubSubType::KafkaRestProxy {
        spec.rest = Some(pub_sub_rest(&config)?);
    }
    let id = start_e2e(&app, Api::PubSub, public_config(&raw), spec, bootstrap).await?;
    let body = json!({ "id": id, "status": "running", "config": public_config(&raw) });
    Ok(json_response(StatusCode::OK, body))
}

/// The REST Proxy driver's settings from a KAFKA_REST_PROXY payload; an error names the field.
fn pub_sub_rest(c: &PubSubConfig) -> Result<kbench_bench::rest_e2e::RestSpec, ApiError> {
    let url = c
        .kafka_rest_uri
        .clone()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| {
            ApiError::field(
                "kafkaRestUri",
                "missing: KAFKA_REST_PROXY needs the proxy's URL",
            )
        })?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ApiError::field(
            "kafkaRestUri",
            "must start with http:// or https://",
        ));
    }
    let value_schema_id =
        match &c.value_schema_id {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                n.as_i64()
                    .ok_or_else(|| ApiError::field("valueSchemaId", "not a whole number"))?,
            ),
            Some(Value::String(s)) => Some(s.trim().parse::<i64>().map_err(|_| {
                ApiError::field("valueSchemaId", format!("{s:?} is not a schema id"))
            })?),
            Some(_) => {
                return Err(ApiError::field(
                    "valueSchemaId",
                    "must be a number or a string of digits",
                ));
            }
        };
    let format = match &c.rest_format {
        None => kbench_client::rest::RestFormat::Avro,
        Some(f) => named("restFormat", f.parse())?,
    };
    let api = match &c.rest_api {
        None => kbench_bench::rest_e2e::RestApi::V2,
        Some(a) => named("restApi", a.parse())?,
    };
    let basic_auth = c
        .kafka_user_name
        .clone()
        .filter(|u| !u.is_empty())
        .map(|u| (u, c.kafka_user_password.clone().unwrap_or_default()));
    Ok(kbench_bench::rest_e2e::RestSpec {
        proxy: kbench_client::rest::RestConfig {
            url,
            basic_auth,
            timeout: Duration::from_secs(60),
            ca_cert_pem: None,
        },
        format,
        api,
        value_schema_id,
        schema_registry: c.schema_registry_url.clone(),
        throttle_backoff: Duration::from_millis(100),
    })
}

/// The most recent /pub-sub-demo run.
fn latest_pub_sub(runs: &[RunEntry]) -> Option<&RunEntry> {
    runs.iter().rev().find(|r| r.api == Api::PubSub)
}

async fn pub_sub_get(State(app): State<Arc<App>>) -> ApiResult {
    let runs = app.runs.lock().expect("runs lock");
    let r = latest_pub_sub(&runs).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no pub-sub-demo run has been started",
        )
    })?;
    let stats = match (&r.pub_sub_stats, &r.live) {
        (Some(s), _) => s.clone(),
        (None, Live::E2e(live)) => pub_sub_stats_live(live, r.start_time, None),
        _ => Value::Null,
    };
    Ok(json_response(
        StatusCode::OK,
        json!({ "id": r.id, "status": r.status.name(), "config": r.config, "stats": stats, "error": r.error }),
    ))
}

async fn pub_sub_delete(State(app): State<Arc<App>>) -> ApiResult {
    let id = {
        let runs = app.runs.lock().expect("runs lock");
        latest_pub_sub(&runs).map(|r| r.id.clone()).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no pub-sub-demo run has been started",
            )
        })?
    };
    stop_and_wait(&app, &id).await?;
    let runs = app.runs.lock().expect("runs lock");
    let r = runs
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("run {id} vanished")))?;
    match (&r.pub_sub_stats, &r.error) {
        (Some(stats), _) => Ok(json_response(StatusCode::OK, stats.clone())),
        (None, Some(e)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("run {id} failed: {e}"),
        )),
        (None, None) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("run {id} has no result"),
        )),
    }
}

fn ms3(us: f64) -> Value {
    json!((us / 1000.0 * 1000.0).round() / 1000.0)
}

/// The seed's stats object, from a histogram in µs: values in ms with µs precision; null fields and
/// `{}` when there are no samples.
fn seed_stats(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({
            "totalLatenciesGathered": 0,
            "minRequestDurationMs": null,
            "maxRequestDurationMs": null,
            "avgRequestDurationMs": null,
            "medianRequestTimeMs": null,
            "percentilesMs": {},
        });
    }
    let q = |p: f64| ms3(h.value_at_quantile(p) as f64);
    json!({
        "totalLatenciesGathered": h.len(),
        "minRequestDurationMs": ms3(h.min() as f64),
        "maxRequestDurationMs": ms3(h.max() as f64),
        "avgRequestDurationMs": ms3(h.mean()),
        "medianRequestTimeMs": q(0.5),
        "percentilesMs": {
            "50.0": q(0.50),
            "80.0": q(0.80),
            "90.0": q(0.90),
            "95.0": q(0.95),
            "98.0": q(0.98),
            "99.0": q(0.99),
        },
    })
}

#[allow(clippy::too_many_arguments)]
fn pub_sub_stats(
    produced: u64,
    consumed: u64,
    failed: u64,
    producer: &Histogram<u64>,
    whole_trip: &Histogram<u64>,
    start: SystemTime,
    kill: Option<SystemTime>,
) -> Value {
    let duration = kill
        .unwrap_or_else(SystemTime::now)
        .duration_since(start)
        .unwrap_or_default();
    json!({
        "totalProducedMessages": produced,
        "totalConsumedMessages": consumed,
        "totalFailedMessages": failed,
        "producerStats": seed_stats(producer),
        "wholeTripStats": seed_stats(whole_trip),
        "taskStartTime": iso8601::format_instant(start),
        "taskKillTime": kill.map(iso8601::format_instant),
        "taskDuration": iso8601::format_duration(duration),
    })
}

fn pub_sub_stats_live(live: &E2eLive, start: SystemTime, kill: Option<SystemTime>) -> Value {
    let s = live.snapshot();
    pub_sub_stats(
        s.produced,
        s.consumed,
        s.failed,
        &s.producer_latency,
        &s.whole_trip,
        start,
        kill,
    )
}

// ---------------------------------------------------------------------------------------------
// Running

/// The bootstrap list for a run: the request's, the server's, or the embedded broker (started once).
async fn resolve_bootstrap(
    app: &App,
    requested: Option<Vec<String>>,
) -> Result<(Vec<String>, bool), ApiError> {
    if let Some(b) = requested.or_else(|| app.default_bootstrap.clone()) {
        return Ok((b, false));
    }
    let mut embedded = app.embedded.lock().await;
    if embedded.is_none() {
        let broker = EmbeddedBroker::start()
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
        eprintln!(
            "kbench serve: started an embedded Tansu broker (in-memory) on {}",
            broker.addr()
        );
        *embedded = Some(broker);
    }
    let addr = embedded
        .as_ref()
        .map(|b| b.addr().to_string())
        .unwrap_or_default();
    Ok((vec![addr], true))
}

/// Refuse to start when a run is active.
fn ensure_idle(app: &App) -> Result<(), ApiError> {
    let runs = app.runs.lock().expect("runs lock");
    if let Some(r) = runs.iter().find(|r| r.status.active()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "run {} ({}) is still {}: stop it first (DELETE)",
                r.id,
                r.kind,
                r.status.name()
            ),
        ));
    }
    Ok(())
}

fn new_run_id() -> String {
    let stamp = iso8601::format_instant(SystemTime::now())
        .replace([':', '.'], "-")
        .trim_end_matches('Z')
        .to_string();
    format!("{stamp}-{:04x}", crate::cli::random_seed() & 0xffff)
}

async fn start_e2e(
    app: &Arc<App>,
    api: Api,
    config: Value,
    spec: E2eSpec,
    bootstrap: Option<Vec<String>>,
) -> Result<String, ApiError> {
    ensure_idle(app)?;
    let (servers, embedded) = match &spec.rest {
        // The proxy reaches Kafka; kbench needs no broker of its own.
        Some(rest) => (vec![rest.proxy.url.clone()], false),
        None => resolve_bootstrap(app, bootstrap).await?,
    };
    let bootstrap = servers.join(",");
    let cluster = cluster_config(servers, "kbench-serve", Pins::default());
    let live = Arc::new(E2eLive::default());
    let start_time = SystemTime::now();
    let (id, stop, done_tx) =
        register_run(app, "e2e", api, config, Live::E2e(live.clone()), start_time)?;
    let task_app = app.clone();
    let run_id = id.clone();
    tokio::spawn(async move {
        let outcome = run_e2e(&spec, &cluster, live.clone(), stop.clone()).await;
        let (result, stats, error) = match outcome {
            Ok(run) => {
                let kill = {
                    let runs = task_app.runs.lock().expect("runs lock");
                    runs.iter()
                        .find(|r| r.id == run_id)
                        .and_then(|r| r.kill_time)
                        .unwrap_or(run.ended_at)
                };
                let stats = pub_sub_stats(
                    run.produced,
                    run.consumed,
                    run.failed,
                    &run.producer_latency,
                    &run.whole_trip,
                    start_time,
                    Some(kill),
                );
                let doc = E2eResultDocument::of(
                    &run,
                    Target {
                        bootstrap_servers: bootstrap.clone(),
                        embedded_broker: embedded,
                    },
                    settings_json(&spec),
                    spec.seed,
                );
                let mut doc = serde_json::to_value(&doc).unwrap_or(Value::Null);
                if api == Api::PubSub {
                    doc["pub_sub_demo"] = stats.clone();
                }
                (Some(doc), (api == Api::PubSub).then_some(stats), None)
            }
            Err(e) => (
                None,
                None,
                Some(describe_start_error("bootstrap", &bootstrap, e)),
            ),
        };
        finish(&task_app, &run_id, result, stats, error);
        let _ = done_tx.send(true);
    });
    // Answer once the run is under way (group joined, producers started) or has failed to start, so
    // that an unreachable broker is an error to this request, not a failed run found later.
    let mut done = app
        .runs
        .lock()
        .expect("runs lock")
        .iter()
        .find(|r| r.id == id)
        .map(|r| r.done.clone());
    loop {
        if live_e2e_phase(app, &id) != Some("starting") {
            break;
        }
        if let Some(d) = done.as_mut() {
            tokio::select! {
                _ = d.wait_for(|d| *d) => {}
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
    }
    let runs = app.runs.lock().expect("runs lock");
    if let Some(r) = runs.iter().find(|r| r.id == id)
        && r.status == Status::Failed
    {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "run {id} could not start: {}",
                r.error.as_deref().unwrap_or("unknown error")
            ),
        ));
    }
    Ok(id)
}

/// The phase of an e2e run's live counters; None once it is over or unknown.
fn live_e2e_phase(app: &App, id: &str) -> Option<&'static str> {
    let runs = app.runs.lock().expect("runs lock");
    let r = runs.iter().find(|r| r.id == id)?;
    if !r.status.active() {
        return None;
    }
    match &r.live {
        Live::E2e(live) => Some(live.phase()),
        _ => None,
    }
}

/// Enter a new running run, unless one is active (409): its id, its stop token, and the sender that
/// says it is done.
fn register_run(
    app: &App,
    kind: &'static str,
    api: Api,
    config: Value,
    live: Live,
    start_time: SystemTime,
) -> Result<(String, CancellationToken, tokio::sync::watch::Sender<bool>), ApiError> {
    let stop = CancellationToken::new();
    let (done_tx, done) = tokio::sync::watch::channel(false);
    let id = new_run_id();
    let mut runs = app.runs.lock().expect("runs lock");
    if let Some(r) = runs.iter().find(|r| r.status.active()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("run {} is still {}", r.id, r.status.name()),
        ));
    }
    runs.push(RunEntry {
        id: id.clone(),
        kind,
        api,
        config,
        status: Status::Running,
        stop: stop.clone(),
        live,
        start_time,
        kill_time: None,
        result: None,
        pub_sub_stats: None,
        error: None,
        done,
    });
    Ok((id, stop, done_tx))
}

/// Record a run's end: write its result document first, then mark it finished.
fn finish(
    app: &App,
    id: &str,
    result: Option<Value>,
    stats: Option<Value>,
    mut error: Option<String>,
) {
    if let Some(doc) = &result {
        let path = app.results_dir.join(format!("{id}.json"));
        if let Err(e) = write_json(&path, doc) {
            error = Some(format!("the result could not be written: {e}"));
            tracing::error!(%id, "result not written: {e}");
        }
    }
    let mut runs = app.runs.lock().expect("runs lock");
    if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
        r.status = if error.is_some() && result.is_none() {
            Status::Failed
        } else {
            Status::Finished
        };
        r.kill_time.get_or_insert_with(SystemTime::now);
        r.result = result;
        r.pub_sub_stats = stats;
        r.error = error;
    }
}

/// Ask a run to stop and wait until its result is written.
async fn stop_and_wait(app: &App, id: &str) -> Result<(), ApiError> {
    let mut done = {
        let mut runs = app.runs.lock().expect("runs lock");
        let r = runs.iter_mut().find(|r| r.id == id).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, format!("no run with id {id:?}"))
        })?;
        if r.status == Status::Running {
            r.status = Status::Stopping;
            r.kill_time = Some(SystemTime::now());
            r.stop.cancel();
        }
        r.done.clone()
    };
    let _ = done.wait_for(|d| *d).await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// /v1

/// An e2e run through /v1: kbench's own names, the CLI's value syntax. Unknown fields are an error;
/// absent ones take the CLI's defaults.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct V1E2e {
    bootstrap_servers: Option<String>,
    topic: String,
    partitions: i32,
    producers: usize,
    batch_interval: String,
    payload_size: String,
    messages_per_batch: String,
    commit: String,
    consume_wait: String,
    consume_max_bytes: i32,
    duration: Option<String>,
    drain: String,
    acks: String,
    compression: String,
    group: Option<String>,
    consumer_id: Option<String>,
    mode: Option<String>,
    seed: Option<u64>,
    gather_latencies: bool,
}

impl Default for V1E2e {
    fn default() -> Self {
        V1E2e {
            bootstrap_servers: None,
            topic: "kbench-e2e".into(),
            partitions: 1,
            producers: 1,
            batch_interval: "100..100ms".into(),
            payload_size: "1024".into(),
            messages_per_batch: "1".into(),
            commit: "sync".into(),
            consume_wait: "10ms".into(),
            consume_max_bytes: 52_428_800,
            duration: None,
            drain: "10s".into(),
            acks: "all".into(),
            compression: "none".into(),
            group: None,
            consumer_id: None,
            mode: None,
            seed: None,
            gather_latencies: true,
        }
    }
}

/// Parse an optional field with `parse`, naming the field on error.
fn optional<T>(
    field: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ApiError> {
    value.map(|v| named(field, parse(v))).transpose()
}

fn named<T>(field: &str, r: Result<T, String>) -> Result<T, ApiError> {
    r.map_err(|e| ApiError::field(field, e))
}

fn v1_e2e_spec(c: &V1E2e) -> Result<(E2eSpec, Option<Vec<String>>), ApiError> {
    let mode = match c
        .mode
        .as_deref()
        .map(|m| m.to_ascii_lowercase().replace('_', "-"))
    {
        None => E2eMode::ConsumerAndProducers,
        Some(m) if m == "consumer-and-producers" => E2eMode::ConsumerAndProducers,
        Some(m) if m == "producers" => E2eMode::Producers,
        Some(m) if m == "consumer" => E2eMode::Consumer,
        Some(m) => {
            return Err(ApiError::field(
                "mode",
                format!("unknown mode {m:?} (consumer-and-producers, producers, consumer)"),
            ));
        }
    };
    if c.partitions < 1 {
        return Err(ApiError::field("partitions", "must be at least 1"));
    }
    if mode.has_producers() {
        at_least_one("producers", c.producers)?;
    }
    if c.consume_max_bytes < 1 {
        return Err(ApiError::field("consume_max_bytes", "must be at least 1"));
    }
    let duration = optional(
        "duration",
        c.duration.as_deref(),
        crate::cli::parse_duration,
    )?;
    let bootstrap = optional("bootstrap_servers", c.bootstrap_servers.as_deref(), |b| {
        bootstrap_list("bootstrap_servers", b)
    })?;
    let spec = E2eSpec {
        topic: c.topic.clone(),
        partitions: c.partitions,
        replication_factor: 1,
        mode,
        producers: c.producers,
        batch_interval_ms: named("batch_interval", parse_interval_span(&c.batch_interval))?,
        payload_size: named("payload_size", parse_size_span(&c.payload_size))?,
        messages_per_batch: named(
            "messages_per_batch",
            parse_count_span(&c.messages_per_batch),
        )?,
        compression: named(
            "compression",
            c.compression
                .parse::<Compression>()
                .map_err(|e| e.to_string()),
        )?,
        producer: producer_config(named("acks", c.acks.parse::<Acks>())?),
        max_in_flight: 5,
        group_id: c.group.clone().unwrap_or_else(|| fresh_id("kbench-e2e")),
        consumer_id: c
            .consumer_id
            .clone()
            .unwrap_or_else(|| fresh_id("kbench-consumer")),
        commit: named("commit", parse_commit(&c.commit))?,
        consume_wait: named("consume_wait", crate::cli::parse_duration(&c.consume_wait))?,
        consume_max_bytes: c.consume_max_bytes,
        session_timeout: Duration::from_secs(45),
        heartbeat_interval: Duration::from_secs(3),
        duration,
        drain: named("drain", crate::cli::parse_duration(&c.drain))?,
        gather_latencies: c.gather_latencies,
        seed: c.seed.unwrap_or_else(crate::cli::random_seed),
        rest: None,
    };
    Ok((spec, bootstrap))
}

/// A produce run through /v1, in kafka-producer-perf-test's terms. Unknown fields are an error;
/// absent ones take `kbench produce`'s defaults.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct V1Produce {
    bootstrap_servers: Option<String>,
    topic: String,
    num_records: u64,
    record_size: usize,
    throughput: f64,
    duration: Option<String>,
    acks: String,
    compression: String,
    batch_size: usize,
    linger_ms: u64,
    partitions: i32,
    seed: Option<u64>,
}

impl Default for V1Produce {
    fn default() -> Self {
        V1Produce {
            bootstrap_servers: None,
            topic: "kbench-perf".into(),
            num_records: 1_000_000,
            record_size: 100,
            throughput: -1.0,
            duration: None,
            acks: "all".into(),
            compression: "none".into(),
            batch_size: 16_384,
            linger_ms: 5,
            partitions: 1,
            seed: None,
        }
    }
}

async fn v1_create(State(app): State<Arc<App>>, body: Bytes) -> ApiResult {
    let mut raw: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON: {e}")))?;
    let Some(obj) = raw.as_object_mut() else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        ));
    };
    let kind = match obj.remove("workload") {
        None => {
            return Err(ApiError::field(
                "workload",
                "missing field `workload` (e2e or produce)",
            ));
        }
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(ApiError::field(
                "workload",
                "must be a string: e2e or produce",
            ));
        }
    };
    let config = raw.clone();
    match kind.as_str() {
        "e2e" => {
            let c: V1E2e = from_value(raw)?;
            let (spec, bootstrap) = v1_e2e_spec(&c)?;
            let id = start_e2e(&app, Api::V1, config, spec, bootstrap).await?;
            Ok(json_response(
                StatusCode::CREATED,
                json!({ "id": id, "workload": "e2e", "status": "running" }),
            ))
        }
        "produce" => {
            let c: V1Produce = from_value(raw)?;
            let id = start_produce(&app, config, c).await?;
            Ok(json_response(
                StatusCode::CREATED,
                json!({ "id": id, "workload": "produce", "status": "running" }),
            ))
        }
        other => Err(ApiError::field(
            "workload",
            format!("unknown workload {other:?} (e2e or produce)"),
        )),
    }
}

async fn start_produce(app: &Arc<App>, config: Value, c: V1Produce) -> Result<String, ApiError> {
    if c.num_records == 0 {
        return Err(ApiError::field("num_records", "must be at least 1"));
    }
    at_least_one("record_size", c.record_size)?;
    at_least_one("batch_size", c.batch_size)?;
    if c.partitions < 1 {
        return Err(ApiError::field("partitions", "must be at least 1"));
    }
    if !(c.throughput > 0.0 || c.throughput == -1.0) {
        return Err(ApiError::field(
            "throughput",
            "must be above 0, or -1 for unthrottled",
        ));
    }
    let acks = named("acks", c.acks.parse::<Acks>())?;
    let compression = named(
        "compression",
        c.compression
            .parse::<Compression>()
            .map_err(|e| e.to_string()),
    )?;
    let duration = optional(
        "duration",
        c.duration.as_deref(),
        crate::cli::parse_duration,
    )?;
    let requested = optional("bootstrap_servers", c.bootstrap_servers.as_deref(), |b| {
        bootstrap_list("bootstrap_servers", b)
    })?;
    ensure_idle(app)?;
    let (servers, embedded) = resolve_bootstrap(app, requested).await?;
    let bootstrap = servers.join(",");
    let seed = c.seed.unwrap_or_else(crate::cli::random_seed);
    let spec = ProduceSpec {
        num_records: c.num_records,
        duration,
        payload: Payload::Random {
            size: c.record_size,
        },
        throughput: (c.throughput > 0.0).then_some(c.throughput),
        compression,
        batch_size: c.batch_size,
        linger: Duration::from_millis(c.linger_ms),
        partition: None,
        reporting_interval: Duration::from_secs(1),
        producer: producer_config(acks),
        max_in_flight: 5,
        records_per_batch: None,
        seed,
    };
    let cluster_cfg = cluster_config(servers, "kbench-serve", Pins::default());
    let live = Arc::new(ProduceLive::default());
    let (id, stop, done_tx) = register_run(
        app,
        "produce",
        Api::V1,
        config,
        Live::Produce(live.clone()),
        SystemTime::now(),
    )?;
    let app = app.clone();
    let run_id = id.clone();
    tokio::spawn(async move {
        let outcome = async {
            let cluster = Arc::new(
                Cluster::connect(cluster_cfg)
                    .await
                    .map_err(|e| describe_start_error("bootstrap_servers", &bootstrap, e))?,
            );
            let layout = cluster
                .ensure_topic(&c.topic, c.partitions, 1)
                .await
                .map_err(|e| format!("topic {}: {e}", c.topic))?;
            let counters = live.clone();
            let run = run_produce(
                cluster.clone(),
                layout,
                &spec,
                stop.clone(),
                Arc::new(Mutex::new(None)),
                move |w| {
                    counters.acked.fetch_add(w.records, Ordering::Relaxed);
                    counters.failed.fetch_add(w.failed, Ordering::Relaxed);
                },
            )
            .await;
            cluster.close(Duration::from_secs(5)).await;
            let negotiated = cluster.negotiated().named().collect();
            let doc = ResultDocument::produce(
                &run,
                std::slice::from_ref(&run),
                Target {
                    bootstrap_servers: bootstrap.clone(),
                    embedded_broker: embedded,
                },
                json!({
                    "topic": c.topic, "num_records": c.num_records, "record_size": c.record_size,
                    "throughput": c.throughput, "acks": acks.name(), "compression": compression.name(),
                    "batch_size": c.batch_size, "linger_ms": c.linger_ms, "partitions": c.partitions,
                    "duration_s": duration.map(|d| d.as_secs_f64()),
                }),
                negotiated,
                BTreeMap::new(),
                seed,
            );
            Ok::<Value, String>(serde_json::to_value(&doc).unwrap_or(Value::Null))
        }
        .await;
        match outcome {
            Ok(doc) => finish(&app, &run_id, Some(doc), None, None),
            Err(e) => finish(&app, &run_id, None, None, Some(e)),
        }
        let _ = done_tx.send(true);
    });
    Ok(id)
}

fn live_json(r: &RunEntry) -> Value {
    match &r.live {
        Live::E2e(live) => {
            let s = live.snapshot();
            let q = |h: &Histogram<u64>, p: f64| {
                if h.is_empty() {
                    None
                } else {
                    Some(h.value_at_quantile(p))
                }
            };
            json!({
                "phase": s.phase,
                "elapsed_s": s.elapsed.as_secs_f64(),
                "records_produced": s.produced,
                "records_acked": s.acked,
                "records_failed": s.failed,
                "records_consumed": s.consumed,
                "records_duplicated": s.duplicates,
                "records_foreign": s.foreign,
                "commits": s.commits,
                "producer_request_duration_p50_us": q(&s.producer_latency, 0.5),
                "producer_request_duration_p99_us": q(&s.producer_latency, 0.99),
                "whole_trip_p50_us": q(&s.whole_trip, 0.5),
                "whole_trip_p99_us": q(&s.whole_trip, 0.99),
            })
        }
        Live::Produce(live) => json!({
            "records_acked": live.acked.load(Ordering::Relaxed),
            "records_failed": live.failed.load(Ordering::Relaxed),
        }),
        Live::None => Value::Null,
    }
}

fn run_json(r: &RunEntry, with_result: bool) -> Value {
    let mut v = json!({
        "id": r.id,
        "workload": r.kind,
        "api": match r.api { Api::PubSub => "pub-sub-demo", Api::V1 => "v1" },
        "status": r.status.name(),
        "config": r.config,
        "live": live_json(r),
        "error": r.error,
    });
    if with_result {
        v["result"] = r.result.clone().unwrap_or(Value::Null);
    }
    v
}

async fn v1_list(State(app): State<Arc<App>>) -> ApiResult {
    let runs = app.runs.lock().expect("runs lock");
    let list: Vec<Value> = runs.iter().map(|r| run_json(r, false)).collect();
    Ok(json_response(StatusCode::OK, json!({ "runs": list })))
}

async fn v1_get(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    let runs = app.runs.lock().expect("runs lock");
    let r = runs
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no run with id {id:?}")))?;
    Ok(json_response(StatusCode::OK, run_json(r, true)))
}

async fn v1_delete(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    stop_and_wait(&app, &id).await?;
    let runs = app.runs.lock().expect("runs lock");
    let r = runs
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no run with id {id:?}")))?;
    Ok(json_response(StatusCode::OK, run_json(r, true)))
}

async fn openapi() -> Response {
    json_response(StatusCode::OK, openapi_document())
}

/// The OpenAPI 3.0 description of this server (src/openapi.json), with this build's version.
fn openapi_document() -> Value {
    let mut doc: Value = serde_json::from_str(include_str!("openapi.json"))
        .unwrap_or_else(|e| json!({ "error": e.to_string() }));
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_payload() -> Value {
        json!({
            "type": "KAFKA_NATIVE",
            "minBatchIntervalMs": 100, "maxBatchIntervalMs": 100,
            "minMessagePayloadSizeBytes": 180000, "maxMessagePayloadSizeBytes": 180000,
            "parallelProducers": 4, "gatherLatencies": true,
            "kafkaRestUri": "XXX", "kafkaUserName": "XXX", "kafkaUserPassword": "XXX",
            "kafkaTopic": "latency-test-topic-1", "valueSchemaId": "7",
            "kafkaConsumerGroup": "g", "kafkaConsumerId": "c",
            "minMessagesPerBatch": 4, "maxMessagesPerBatch": 4,
            "consumeTimeoutMs": 10, "consumeMaxBytesMs": 5000000, "commitInterval": "PT10S",
            "someFieldFromTheFuture": 1
        })
    }

    #[test]
    fn the_seed_payload_parses_and_maps() {
        let c: PubSubConfig = from_value(seed_payload()).unwrap();
        let (spec, bootstrap) = pub_sub_spec(&c).unwrap();
        assert!(bootstrap.is_none());
        assert_eq!(spec.producers, 4);
        assert_eq!(spec.payload_size, Span::fixed(180_000));
        assert_eq!(spec.commit, CommitMode::Interval(Duration::from_secs(10)));
        assert_eq!(spec.group_id, "g");
        assert_eq!(spec.consume_wait, Duration::from_millis(10));
        assert!(
            public_config(&seed_payload())
                .get("kafkaUserPassword")
                .is_none()
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let mut p = seed_payload();
        p.as_object_mut().unwrap().remove("kafkaTopic");
        let e = from_value::<PubSubConfig>(p).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("kafkaTopic"));
        let mut p = seed_payload();
        p["parallelProducers"] = json!(-1);
        assert_eq!(
            from_value::<PubSubConfig>(p)
                .err()
                .unwrap()
                .field
                .as_deref(),
            Some("parallelProducers")
        );
        let mut p = seed_payload();
        p["minBatchIntervalMs"] = json!(500);
        let c: PubSubConfig = from_value(p).unwrap();
        assert_eq!(
            pub_sub_spec(&c).err().unwrap().field.as_deref(),
            Some("minBatchIntervalMs")
        );
        let e = from_value::<V1E2e>(json!({"producerz": 1})).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("producerz"));
    }

    #[test]
    fn the_openapi_document_parses_and_names_every_route() {
        let doc = openapi_document();
        assert_eq!(doc["openapi"], "3.0.3");
        for path in [
            "/v1/runs",
            "/v1/runs/{id}",
            "/pub-sub-demo",
            "/v1/openapi.json",
        ] {
            assert!(doc["paths"][path].is_object(), "{path}");
        }
    }

    #[test]
    fn empty_stats_have_nulls_and_no_percentiles() {
        let h = kbench_bench::measure::latency_histogram();
        let s = seed_stats(&h);
        assert_eq!(s["totalLatenciesGathered"], 0);
        assert!(s["minRequestDurationMs"].is_null());
        assert_eq!(s["percentilesMs"], json!({}));
    }
}
