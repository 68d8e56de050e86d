//! TEST DOUBLE — a stand-in for a Confluent-compatible Kafka REST Proxy (API v2, and v3 produce) with
//! a minimal Schema Registry, written from the published API reference, because no real REST Proxy
//! can run on this machine. It is not part of kbench.
//!
//! It forwards to a real broker (the embedded Tansu started by the test) through kbench-client, so
//! counts are real: a produced record is in the broker, a consumed record came from it. Avro values
//! are encoded with apache-avro in Confluent's framing (magic 0, schema id, datum) and decoded back to
//! JSON for consumers. It can be told to misbehave (see [`Faults`]), including the ways Karapace was
//! seen to differ from the reference.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use kbench_client::{Acks, Cluster, ClusterConfig, ProducerConfig, TopicLayout};
use kbench_wire::batch::{RecordBatchBuilder, now_ms};
use kbench_wire::{BatchDecoder, Compression, Pins};
use serde_json::{Value, json};

/// Misbehaviours the double can be told to show, and the real proxies' awkward timing.
#[derive(Debug, Clone)]
pub struct Faults {
    /// Every Nth produced record (1-based, counted across requests) is not written and gets
    /// `error_code` 50002 in an HTTP 200.
    pub record_error_every: Option<u64>,
    /// Answer the next N produce requests with 429 / 42901.
    pub throttle_next: u32,
    /// Answer the next poll of an instance that has its partitions with 404 / 40403 (and forget the
    /// instance, as an expiry does).
    pub expire_next_poll: bool,
    /// Delay every produce answer by this much.
    pub produce_delay: Duration,
    /// Drop the connection, unanswered, on the next N produce requests (nothing is written).
    pub drop_next: u32,
    /// Behave as Karapace: no `error_code`/`error` on successful offsets, no v3 API (404), empty
    /// commits rejected, every poll held for its full timeout.
    pub karapace: bool,
    /// Lazy group join, as both Confluent REST Proxy and Karapace do it: a subscribed instance joins
    /// its group only on the first poll that starts at least this long after the subscription.
    /// Until then polls answer `[]` (held for their timeout) and `GET …/assignments` is empty, and
    /// `POST …/positions` is refused (409 / 40903: the partitions are not assigned yet). At the join
    /// each partition starts at the group's committed offset, else at the end *as of the join*
    /// (`auto.offset.reset=latest`): records produced meanwhile are skipped.
    pub join_after: Duration,
    /// Require HTTP basic auth with these credentials.
    pub basic_auth: Option<(String, String)>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            record_error_every: None,
            throttle_next: 0,
            expire_next_poll: false,
            produce_delay: Duration::ZERO,
            drop_next: 0,
            karapace: false,
            join_after: Duration::from_secs(1),
            basic_auth: None,
        }
    }
}

/// What the double saw, for tests to check kbench against.
#[derive(Debug, Default)]
pub struct Seen {
    pub produce_requests: AtomicU64,
    pub records_written: AtomicU64,
    pub records_refused: AtomicU64,
    pub throttled: AtomicU64,
    pub dropped: AtomicU64,
    pub instances_created: AtomicU64,
    pub instances_deleted: AtomicU64,
    pub commits: AtomicU64,
    pub empty_commits: AtomicU64,
    pub records_served: AtomicU64,
    /// Polls answered `[]` because the instance had not joined its group yet.
    pub joining_polls: AtomicU64,
    pub seeks: AtomicU64,
    pub v3_requests: AtomicU64,
    pub unauthorized: AtomicU64,
    pub schemas_registered: Mutex<Vec<String>>,
    pub last_commit: Mutex<Vec<(String, i32, i64)>>,
}

struct Instance {
    group: String,
    format: String,
    topic: Option<String>,
    /// Next offset per assigned partition; empty until the instance joined (or was assigned).
    positions: BTreeMap<i32, i64>,
    subscribed_at: Option<Instant>,
    /// Has partitions: joined its group (subscription) or was assigned them explicitly.
    assigned: bool,
}

struct Inner {
    base: String,
    cluster: Arc<Cluster>,
    faults: Mutex<Faults>,
    seen: Arc<Seen>,
    schemas: Mutex<Vec<String>>,
    instances: tokio::sync::Mutex<HashMap<String, Instance>>,
    /// Committed offsets: (group, topic, partition) → next offset.
    committed: Mutex<HashMap<(String, String, i32), i64>>,
    record_counter: AtomicU64,
    next_partition: AtomicU64,
}

/// A running double: `url` is its base URL (REST Proxy and Schema Registry both).
pub struct RestProxyDouble {
    pub url: String,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The seed's value schema, pre-registered under id 7 (the id the seed's payload names).
pub const SEED_SCHEMA_ID: i64 = 7;

impl RestProxyDouble {
    /// Start on a free loopback port, forwarding to `bootstrap`.
    pub fn start(bootstrap: &str, faults: Faults) -> RestProxyDouble {
        Self::start_with(bootstrap, faults, None)
    }

    /// The same over https (`https://localhost:PORT`), with a certificate signed by a fresh private
    /// CA; also returns that CA's certificate (PEM) for the client to trust.
    pub fn start_tls(bootstrap: &str, faults: Faults) -> (RestProxyDouble, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
        use tokio_rustls::rustls;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(leaf.der().to_vec())],
            rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
                leaf_key.serialize_der(),
            )),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        (
            Self::start_with(bootstrap, faults, Some(acceptor)),
            ca.pem(),
        )
    }

    fn start_with(
        bootstrap: &str,
        faults: Faults,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> RestProxyDouble {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let bootstrap = bootstrap.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let cluster = Cluster::connect(ClusterConfig {
                    connect_timeout: Duration::from_secs(5),
                    ..ClusterConfig::new(vec![bootstrap], "rest-proxy-double", Pins::default())
                })
                .await
                .expect("double: connect to the broker");
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = listener.local_addr().unwrap().port();
                let base = match tls {
                    Some(_) => format!("https://localhost:{port}"),
                    None => format!("http://127.0.0.1:{port}"),
                };
                let mut schemas = vec![String::new(); SEED_SCHEMA_ID as usize];
                schemas[SEED_SCHEMA_ID as usize - 1] =
                    kbench_bench::e2e::rest::SEED_VALUE_SCHEMA.to_string();
                let inner = Arc::new(Inner {
                    base: base.clone(),
                    cluster: Arc::new(cluster),
                    faults: Mutex::new(faults),
                    seen: Arc::new(Seen::default()),
                    schemas: Mutex::new(schemas),
                    instances: tokio::sync::Mutex::new(HashMap::new()),
                    committed: Mutex::new(HashMap::new()),
                    record_counter: AtomicU64::new(0),
                    next_partition: AtomicU64::new(0),
                });
                tx.send((base, inner.clone())).unwrap();
                let app = Router::new()
                    .route("/topics", get(list_topics))
                    .route("/topics/{topic}", post(produce_v2))
                    .route("/topics/{topic}/partitions", get(list_partitions))
                    .route(
                        "/topics/{topic}/partitions/{partition}/offsets",
                        get(partition_offsets),
                    )
                    .route("/v3/clusters", get(v3_clusters))
                    .route(
                        "/v3/clusters/{cluster}/topics/{topic}/records",
                        post(produce_v3),
                    )
                    .route("/consumers/{group}", post(create_instance))
                    .route(
                        "/consumers/{group}/instances/{name}",
                        axum::routing::delete(delete_instance),
                    )
                    .route(
                        "/consumers/{group}/instances/{name}/subscription",
                        post(subscribe),
                    )
                    .route(
                        "/consumers/{group}/instances/{name}/assignments",
                        get(assignments).post(assign),
                    )
                    .route("/consumers/{group}/instances/{name}/positions", post(seek))
                    .route("/consumers/{group}/instances/{name}/records", get(poll))
                    .route("/consumers/{group}/instances/{name}/offsets", post(commit))
                    .route("/subjects/{subject}/versions", post(register))
                    .with_state(inner);
                let stopped = async {
                    let _ = stop_rx.await;
                };
                match tls {
                    None => {
                        let _ = axum::serve(listener, app)
                            .with_graceful_shutdown(stopped)
                            .await;
                    }
                    Some(acceptor) => {
                        let listener = TlsListener {
                            tcp: listener,
                            acceptor,
                        };
                        let _ = axum::serve(listener, app)
                            .with_graceful_shutdown(stopped)
                            .await;
                    }
                }
            });
        });
        let (url, inner) = rx.recv().expect("double started");
        RestProxyDouble {
            url,
            inner,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn seen(&self) -> Arc<Seen> {
        self.inner.seen.clone()
    }

    pub fn set_faults(&self, faults: Faults) {
        *self.inner.faults.lock().unwrap() = faults;
    }

    /// Consumer instances alive now.
    pub fn live_instances(&self) -> usize {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { self.inner.instances.lock().await.len() })
    }
}

impl Drop for RestProxyDouble {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// TLS on top of a TCP listener; failed handshakes are skipped.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn rest_error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        [("Content-Type", "application/vnd.kafka.v2+json")],
        json!({ "error_code": code, "message": message }).to_string(),
    )
        .into_response()
}

fn ok_json(status: StatusCode, body: Value) -> Response {
    (
        status,
        [("Content-Type", "application/vnd.kafka.v2+json")],
        body.to_string(),
    )
        .into_response()
}

/// Basic auth check; `Some(response)` when refused.
fn refuse(inner: &Inner, headers: &HeaderMap) -> Option<Response> {
    let want = inner.faults.lock().unwrap().basic_auth.clone()?;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", want.0, want.1))
    );
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if given == expected {
        None
    } else {
        inner.seen.unauthorized.fetch_add(1, Ordering::Relaxed);
        Some(rest_error(StatusCode::UNAUTHORIZED, 40101, "Unauthorized"))
    }
}

async fn list_topics(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    ok_json(StatusCode::OK, json!([]))
}

fn format_of(content_type: &str) -> Option<&'static str> {
    ["avro", "protobuf", "jsonschema", "json", "binary"]
        .into_iter()
        .find(|f| content_type.contains(&format!("vnd.kafka.{f}.v2")))
}

/// A value from the request, as the bytes to store.
fn encode_value(
    inner: &Inner,
    format: &str,
    schema_id: Option<i64>,
    value: &Value,
) -> Result<Vec<u8>, (i64, String)> {
    match format {
        "avro" => {
            let (id, text) = registered(inner, schema_id)?;
            let schema =
                apache_avro::Schema::parse_str(&text).map_err(|e| (42201, e.to_string()))?;
            let v = apache_avro::types::Value::from(value.clone())
                .resolve(&schema)
                .map_err(|e| (42203, format!("value does not match schema {id}: {e}")))?;
            let datum =
                apache_avro::to_avro_datum(&schema, v).map_err(|e| (42203, e.to_string()))?;
            let mut out = vec![0u8];
            out.extend_from_slice(&(id as i32).to_be_bytes());
            out.extend_from_slice(&datum);
            Ok(out)
        }
        "protobuf" | "jsonschema" => {
            let (id, text) = registered(inner, schema_id)?;
            let mut out = vec![0u8];
            out.extend_from_slice(&(id as i32).to_be_bytes());
            if format == "protobuf" {
                // The schema's first message: message indexes [0], written as one 0 byte.
                let message = first_message(&text).map_err(|e| (42201, e))?;
                let m = prost_reflect::DynamicMessage::deserialize(message, value)
                    .map_err(|e| (42203, format!("value does not match schema {id}: {e}")))?;
                out.push(0);
                out.extend_from_slice(&prost::Message::encode_to_vec(&m));
            } else {
                let schema: Value =
                    serde_json::from_str(&text).map_err(|e| (42201, e.to_string()))?;
                let validator =
                    jsonschema::validator_for(&schema).map_err(|e| (42201, e.to_string()))?;
                if let Err(e) = validator.validate(value) {
                    return Err((42203, format!("value does not match schema {id}: {e}")));
                }
                out.extend_from_slice(value.to_string().as_bytes());
            }
            Ok(out)
        }
        "json" => Ok(value.to_string().into_bytes()),
        _ => base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .map_err(|e| (42205, format!("binary value is not base64: {e}"))),
    }
}

/// The schema a produce request names (`value_schema_id`), as the proxy asks its registry: its
/// id and text, or the proxy's error code.
fn registered(inner: &Inner, schema_id: Option<i64>) -> Result<(i64, String), (i64, String)> {
    let id = schema_id.ok_or((42202, "value_schema_id is missing".to_string()))?;
    let text = schema_text(inner, id).ok_or((40403, format!("Schema {id} not found")))?;
    Ok((id, text))
}

/// Schema `id`'s text, when it is registered.
fn schema_text(inner: &Inner, id: i64) -> Option<String> {
    let index = usize::try_from(id).ok()?.checked_sub(1)?;
    inner
        .schemas
        .lock()
        .unwrap()
        .get(index)
        .cloned()
        .filter(|s| !s.is_empty())
}

/// Stored bytes back to the embedded format.
fn decode_value(inner: &Inner, format: &str, bytes: &[u8]) -> Value {
    match format {
        "avro" => {
            if bytes.len() < 5 || bytes[0] != 0 {
                return Value::Null;
            }
            let id = i32::from_be_bytes(bytes[1..5].try_into().unwrap());
            let Some(text) = schema_text(inner, id.into()) else {
                return Value::Null;
            };
            let Ok(schema) = apache_avro::Schema::parse_str(&text) else {
                return Value::Null;
            };
            let mut r = &bytes[5..];
            apache_avro::from_avro_datum(&schema, &mut r, None)
                .ok()
                .and_then(|v| Value::try_from(v).ok())
                .unwrap_or(Value::Null)
        }
        "protobuf" => {
            if bytes.len() < 6 || bytes[0] != 0 || bytes[5] != 0 {
                return Value::Null;
            }
            let id = i32::from_be_bytes(bytes[1..5].try_into().unwrap());
            let Some(Ok(message)) = schema_text(inner, id.into()).map(|t| first_message(&t)) else {
                return Value::Null;
            };
            prost_reflect::DynamicMessage::decode(message, &bytes[6..])
                .ok()
                .and_then(|m| serde_json::to_value(&m).ok())
                .unwrap_or(Value::Null)
        }
        "jsonschema" if bytes.len() >= 5 && bytes[0] == 0 => {
            serde_json::from_slice(&bytes[5..]).unwrap_or(Value::Null)
        }
        "json" => serde_json::from_slice(bytes).unwrap_or(Value::Null),
        "jsonschema" => Value::Null,
        _ => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
    }
}

/// A `.proto` schema's first message (what the proxy encodes a value as), compiled with protox.
fn first_message(text: &str) -> Result<prost_reflect::MessageDescriptor, String> {
    let file = protox::file::File::from_source("value.proto", text).map_err(|e| e.to_string())?;
    let first = file
        .file_descriptor_proto()
        .message_type
        .first()
        .and_then(|m| m.name.clone())
        .ok_or("the schema has no message")?;
    let package = file
        .file_descriptor_proto()
        .package
        .clone()
        .unwrap_or_default();
    let mut compiler = protox::Compiler::with_file_resolver(SingleFile(text.to_string()));
    compiler
        .open_file("value.proto")
        .map_err(|e| e.to_string())?;
    let full = if package.is_empty() {
        first
    } else {
        format!("{package}.{first}")
    };
    compiler
        .descriptor_pool()
        .get_message_by_name(&full)
        .ok_or_else(|| format!("no message {full}"))
}

/// The one `.proto` file a registered schema is.
struct SingleFile(String);

impl protox::file::FileResolver for SingleFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        protox::file::File::from_source(name, &self.0)
    }
}

async fn layout(inner: &Inner, topic: &str) -> Result<TopicLayout, Response> {
    inner
        .cluster
        .ensure_topic(topic, 1, 1)
        .await
        .map_err(|e| rest_error(StatusCode::INTERNAL_SERVER_ERROR, 50002, &e.to_string()))
}

/// Write the values that are not refused; (partition, offset) or (code, message) per value.
async fn write(
    inner: &Inner,
    topic: &str,
    values: Vec<Result<Vec<u8>, (i64, String)>>,
) -> Result<Vec<Result<(i32, i64), (i64, String)>>, Response> {
    let layout = layout(inner, topic).await?;
    let every = inner.faults.lock().unwrap().record_error_every;
    let mut outcomes: Vec<Result<(i32, i64), (i64, String)>> = Vec::with_capacity(values.len());
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.start_now();
    let mut slots = Vec::new();
    for v in values {
        let n = inner.record_counter.fetch_add(1, Ordering::Relaxed) + 1;
        match v {
            Err(e) => outcomes.push(Err(e)),
            Ok(_) if every.is_some_and(|k| n.is_multiple_of(k)) => {
                inner.seen.records_refused.fetch_add(1, Ordering::Relaxed);
                outcomes.push(Err((
                    50002,
                    "Kafka error: injected by the test double".into(),
                )));
            }
            Ok(bytes) => {
                slots.push(outcomes.len());
                outcomes.push(Ok((0, 0)));
                builder.append(now_ms(), None, Some(&bytes), &[]);
            }
        }
    }
    if slots.is_empty() {
        return Ok(outcomes);
    }
    let parts = layout.partitions.len().max(1) as u64;
    let partition = (inner.next_partition.fetch_add(1, Ordering::Relaxed) % parts) as i32;
    let batch = builder.finish().expect("batch");
    let config = ProducerConfig {
        acks: Acks::All,
        request_timeout: Duration::from_secs(30),
        retries: 3,
        retry_backoff: Duration::from_millis(100),
        delivery_timeout: Duration::from_secs(30),
        idempotent: false,
        buffer_memory: kbench_client::produce::BUFFER_MEMORY,
    };
    match kbench_client::producer::deliver_one(
        inner.cluster.clone(),
        &config,
        &layout,
        partition,
        batch,
        slots.len() as u32,
    )
    .await
    {
        Ok(kbench_client::Acked { base_offset, .. }) => {
            inner
                .seen
                .records_written
                .fetch_add(slots.len() as u64, Ordering::Relaxed);
            for (i, slot) in slots.into_iter().enumerate() {
                outcomes[slot] = Ok((partition, base_offset + i as i64));
            }
        }
        Err(error) => {
            for slot in slots {
                outcomes[slot] = Err((50003, error.to_string()));
            }
        }
    }
    Ok(outcomes)
}

/// The shared front of every produce request: auth, drops, throttles, delays.
async fn produce_gate(inner: &Inner, headers: &HeaderMap) -> Option<Response> {
    if let Some(r) = refuse(inner, headers) {
        return Some(r);
    }
    inner.seen.produce_requests.fetch_add(1, Ordering::Relaxed);
    let (drop, throttle, delay) = {
        let mut f = inner.faults.lock().unwrap();
        let drop = f.drop_next > 0;
        if drop {
            f.drop_next -= 1;
        }
        let throttle = !drop && f.throttle_next > 0;
        if throttle {
            f.throttle_next -= 1;
        }
        (drop, throttle, f.produce_delay)
    };
    if drop {
        inner.seen.dropped.fetch_add(1, Ordering::Relaxed);
        // End the connection's task without an answer: the client sees the connection close.
        std::panic::resume_unwind(Box::new("connection dropped by the test double"));
    }
    if throttle {
        inner.seen.throttled.fetch_add(1, Ordering::Relaxed);
        return Some(rest_error(
            StatusCode::TOO_MANY_REQUESTS,
            42901,
            "Request rate limit exceeded",
        ));
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    None
}

async fn produce_v2(
    State(inner): State<Arc<Inner>>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = produce_gate(&inner, &headers).await {
        return r;
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(format) = format_of(content_type) else {
        return rest_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            415,
            "unsupported content type",
        );
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return rest_error(StatusCode::BAD_REQUEST, 400, "malformed JSON");
    };
    let schema_id = body["value_schema_id"].as_i64();
    let Some(records) = body["records"].as_array() else {
        return rest_error(StatusCode::UNPROCESSABLE_ENTITY, 42200, "records missing");
    };
    let values = records
        .iter()
        .map(|r| encode_value(&inner, format, schema_id, &r["value"]))
        .collect();
    let outcomes = match write(&inner, &topic, values).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let karapace = inner.faults.lock().unwrap().karapace;
    let offsets: Vec<Value> = outcomes
        .iter()
        .map(|o| match o {
            Ok((p, off)) if karapace => json!({ "partition": p, "offset": off }),
            Ok((p, off)) => {
                json!({ "partition": p, "offset": off, "error_code": null, "error": null })
            }
            Err((code, msg)) => {
                json!({ "partition": null, "offset": null, "error_code": code, "error": msg })
            }
        })
        .collect();
    ok_json(
        StatusCode::OK,
        json!({ "key_schema_id": null, "value_schema_id": schema_id, "offsets": offsets }),
    )
}

async fn v3_clusters(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    if inner.faults.lock().unwrap().karapace {
        return (StatusCode::NOT_FOUND, "404 Not Found").into_response();
    }
    ok_json(
        StatusCode::OK,
        json!({ "kind": "KafkaClusterList", "data": [{ "kind": "KafkaCluster", "cluster_id": "double-cluster-1" }] }),
    )
}

async fn produce_v3(
    State(inner): State<Arc<Inner>>,
    Path((cluster, topic)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if inner.faults.lock().unwrap().karapace {
        return (StatusCode::NOT_FOUND, "404 Not Found").into_response();
    }
    if let Some(r) = produce_gate(&inner, &headers).await {
        return r;
    }
    inner.seen.v3_requests.fetch_add(1, Ordering::Relaxed);
    // One record, or a stream of concatenated records (streaming mode).
    let mut values = Vec::new();
    for r in serde_json::Deserializer::from_slice(&body).into_iter::<Value>() {
        let Ok(r) = r else {
            return rest_error(StatusCode::BAD_REQUEST, 400, "malformed JSON");
        };
        let v = &r["value"];
        let format = match v["type"].as_str() {
            Some("AVRO") => "avro",
            Some("PROTOBUF") => "protobuf",
            Some("JSONSCHEMA") => "jsonschema",
            Some("JSON") => "json",
            _ => "binary",
        };
        values.push(encode_value(
            &inner,
            format,
            v["schema_id"].as_i64(),
            &v["data"],
        ));
    }
    let outcomes = match write(&inner, &topic, values).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let mut out = String::new();
    for o in outcomes {
        let report = match o {
            Ok((p, off)) => json!({
                "error_code": 200, "cluster_id": cluster, "topic_name": topic,
                "partition_id": p, "offset": off, "timestamp": now_ms(),
            }),
            Err((code, msg)) => json!({ "error_code": code, "message": msg }),
        };
        out.push_str(&report.to_string());
    }
    (StatusCode::OK, [("Content-Type", "application/json")], out).into_response()
}

async fn create_instance(
    State(inner): State<Arc<Inner>>,
    Path(group): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let name = body["name"].as_str().unwrap_or("consumer").to_string();
    let format = body["format"].as_str().unwrap_or("binary").to_string();
    let key = format!("{group}/{name}");
    let mut instances = inner.instances.lock().await;
    if instances.contains_key(&key) {
        return rest_error(
            StatusCode::CONFLICT,
            40902,
            "Consumer instance with the specified name already exists.",
        );
    }
    instances.insert(
        key,
        Instance {
            group: group.clone(),
            format,
            topic: None,
            positions: BTreeMap::new(),
            subscribed_at: None,
            assigned: false,
        },
    );
    inner.seen.instances_created.fetch_add(1, Ordering::Relaxed);
    ok_json(
        StatusCode::OK,
        json!({ "instance_id": name, "base_uri": format!("{}/consumers/{group}/instances/{name}", inner.base) }),
    )
}

async fn delete_instance(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    if inner
        .instances
        .lock()
        .await
        .remove(&format!("{group}/{name}"))
        .is_none()
    {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    }
    inner.seen.instances_deleted.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

async fn subscribe(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(topic) = body["topics"][0].as_str().map(str::to_string) else {
        return rest_error(StatusCode::UNPROCESSABLE_ENTITY, 42200, "topics missing");
    };
    if let Err(r) = layout(&inner, &topic).await {
        return r;
    }
    let mut instances = inner.instances.lock().await;
    let Some(i) = instances.get_mut(&format!("{group}/{name}")) else {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    };
    // Nothing is joined or positioned here: that happens lazily, on a later poll (see `join`).
    i.topic = Some(topic);
    i.positions.clear();
    i.assigned = false;
    i.subscribed_at = Some(Instant::now());
    StatusCode::NO_CONTENT.into_response()
}

/// Where each partition of `topic` starts for `group`: its committed offset, else the end now.
async fn starting_positions(
    inner: &Inner,
    group: &str,
    topic: &str,
) -> Result<BTreeMap<i32, i64>, Response> {
    let layout = layout(inner, topic).await?;
    let parts: Vec<i32> = layout.partitions.iter().map(|p| p.partition).collect();
    let mut positions = inner
        .cluster
        .latest_offsets(&layout, &parts)
        .await
        .map_err(|e| rest_error(StatusCode::INTERNAL_SERVER_ERROR, 50002, &e.to_string()))?;
    let committed = inner.committed.lock().unwrap();
    for (p, o) in positions.iter_mut() {
        if let Some(c) = committed.get(&(group.to_string(), topic.to_string(), *p)) {
            *o = *c;
        }
    }
    Ok(positions)
}

async fn list_partitions(
    State(inner): State<Arc<Inner>>,
    Path(topic): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let layout = match layout(&inner, &topic).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let list: Vec<Value> = layout
        .partitions
        .iter()
        .map(|p| json!({ "partition": p.partition, "leader": p.leader, "replicas": [] }))
        .collect();
    ok_json(StatusCode::OK, Value::Array(list))
}

async fn partition_offsets(
    State(inner): State<Arc<Inner>>,
    Path((topic, partition)): Path<(String, i32)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let layout = match layout(&inner, &topic).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    match inner.cluster.latest_offsets(&layout, &[partition]).await {
        Ok(o) => ok_json(
            StatusCode::OK,
            json!({ "beginning_offset": 0, "end_offset": o[&partition] }),
        ),
        Err(_) => rest_error(StatusCode::NOT_FOUND, 40402, "Partition not found."),
    }
}

async fn assignments(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let instances = inner.instances.lock().await;
    let Some(i) = instances.get(&format!("{group}/{name}")) else {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    };
    let topic = i.topic.clone().unwrap_or_default();
    let list: Vec<Value> = i
        .positions
        .keys()
        .map(|p| json!({ "topic": topic, "partition": p }))
        .collect();
    ok_json(StatusCode::OK, json!({ "partitions": list }))
}

/// Explicit assignment (no group membership): the partitions are the instance's at once, starting
/// at the committed offset or the end.
async fn assign(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let list = body["partitions"].as_array().cloned().unwrap_or_default();
    let Some(topic) = list
        .first()
        .and_then(|p| p["topic"].as_str())
        .map(str::to_string)
    else {
        return rest_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42200,
            "partitions missing",
        );
    };
    let all = match starting_positions(&inner, &group, &topic).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let wanted: Vec<i32> = list
        .iter()
        .filter_map(|p| p["partition"].as_i64())
        .map(|p| p as i32)
        .collect();
    let mut instances = inner.instances.lock().await;
    let Some(i) = instances.get_mut(&format!("{group}/{name}")) else {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    };
    if i.subscribed_at.is_some() {
        return rest_error(
            StatusCode::CONFLICT,
            40903,
            "Subscription to topics, partitions and pattern are mutually exclusive.",
        );
    }
    i.topic = Some(topic);
    i.positions = all
        .into_iter()
        .filter(|(p, _)| wanted.contains(p))
        .collect();
    i.assigned = true;
    StatusCode::NO_CONTENT.into_response()
}

/// `POST …/positions`: seek assigned partitions; an unassigned one is an illegal state (409).
async fn seek(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let offsets = body["offsets"].as_array().cloned().unwrap_or_default();
    let mut instances = inner.instances.lock().await;
    let Some(i) = instances.get_mut(&format!("{group}/{name}")) else {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    };
    for o in &offsets {
        let p = o["partition"].as_i64().unwrap_or(-1) as i32;
        if !i.assigned || !i.positions.contains_key(&p) {
            return rest_error(
                StatusCode::CONFLICT,
                40903,
                &format!("Illegal state: partition {p} is not assigned to this consumer"),
            );
        }
    }
    for o in offsets {
        let p = o["partition"].as_i64().unwrap_or(-1) as i32;
        i.positions.insert(p, o["offset"].as_i64().unwrap_or(0));
    }
    inner.seen.seeks.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

/// Complete a lazy join, if this poll is the one that does it: true when the instance has its
/// partitions (now or before).
async fn join(inner: &Inner, key: &str) -> Result<bool, Response> {
    let join_after = inner.faults.lock().unwrap().join_after;
    let (group, topic) = {
        let instances = inner.instances.lock().await;
        let Some(i) = instances.get(key) else {
            return Err(rest_error(
                StatusCode::NOT_FOUND,
                40403,
                "Consumer instance not found.",
            ));
        };
        if i.assigned {
            return Ok(true);
        }
        let Some(topic) = i.topic.clone() else {
            return Err(rest_error(
                StatusCode::CONFLICT,
                40903,
                "Subscription to topics, partitions and pattern are mutually exclusive.",
            ));
        };
        if i.subscribed_at.is_some_and(|s| s.elapsed() < join_after) {
            return Ok(false);
        }
        (i.group.clone(), topic)
    };
    // The join: auto.offset.reset=latest resolved now, not at subscription.
    let positions = starting_positions(inner, &group, &topic).await?;
    if let Some(i) = inner.instances.lock().await.get_mut(key) {
        i.positions = positions;
        i.assigned = true;
    }
    Ok(true)
}

async fn poll(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let key = format!("{group}/{name}");
    let timeout = Duration::from_millis(
        q.get("timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(1000),
    );
    let max_bytes: i32 = q
        .get("max_bytes")
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(64 * 1024 * 1024)
        .clamp(1, i32::MAX as i64) as i32;
    let karapace = inner.faults.lock().unwrap().karapace;
    let was_reading = inner
        .instances
        .lock()
        .await
        .get(&key)
        .is_some_and(|i| i.assigned);
    match join(&inner, &key).await {
        Ok(true) => {}
        Ok(false) => {
            inner.seen.joining_polls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(timeout).await;
            return ok_json(StatusCode::OK, json!([]));
        }
        Err(r) => return r,
    }
    // An expiry hits an instance that has been reading (its partitions held), mid-run.
    if was_reading && std::mem::take(&mut inner.faults.lock().unwrap().expire_next_poll) {
        inner.instances.lock().await.remove(&key);
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    }
    let (format, topic, positions) = {
        let instances = inner.instances.lock().await;
        let Some(i) = instances.get(&key) else {
            return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
        };
        (
            i.format.clone(),
            i.topic.clone().unwrap_or_default(),
            i.positions.clone(),
        )
    };
    let started = Instant::now();
    let layout = match layout(&inner, &topic).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let asked: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
    let fetched = match inner
        .cluster
        .fetch_partitions(
            &layout,
            &asked,
            max_bytes,
            max_bytes,
            timeout.as_millis() as i32,
        )
        .await
    {
        Ok(f) => f,
        Err(e) => return rest_error(StatusCode::INTERNAL_SERVER_ERROR, 50002, &e.to_string()),
    };
    let mut out = Vec::new();
    let mut next = positions.clone();
    let mut decoder = BatchDecoder::new();
    for (p, data) in &fetched {
        let from = positions.get(p).copied().unwrap_or(0);
        let _ = decoder.decode_all(&data.records, |_, r| {
            if r.offset < from {
                return;
            }
            out.push(json!({
                "topic": topic, "key": null, "partition": p, "offset": r.offset,
                "value": decode_value(&inner, &format, r.value.unwrap_or_default()),
            }));
            let n = next.entry(*p).or_insert(0);
            *n = (*n).max(r.offset + 1);
        });
    }
    inner
        .seen
        .records_served
        .fetch_add(out.len() as u64, Ordering::Relaxed);
    if let Some(i) = inner.instances.lock().await.get_mut(&key) {
        i.positions = next;
    }
    if karapace && out.is_empty() && started.elapsed() < timeout {
        tokio::time::sleep(timeout - started.elapsed()).await;
    }
    ok_json(StatusCode::OK, Value::Array(out))
}

async fn commit(
    State(inner): State<Arc<Inner>>,
    Path((group, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    if !inner
        .instances
        .lock()
        .await
        .contains_key(&format!("{group}/{name}"))
    {
        return rest_error(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let offsets = body["offsets"].as_array().cloned().unwrap_or_default();
    if offsets.is_empty() {
        inner.seen.empty_commits.fetch_add(1, Ordering::Relaxed);
        if inner.faults.lock().unwrap().karapace {
            return rest_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                42200,
                "offsets must not be empty",
            );
        }
    }
    {
        let mut committed = inner.committed.lock().unwrap();
        for o in &offsets {
            committed.insert(
                (
                    group.clone(),
                    o["topic"].as_str().unwrap_or_default().to_string(),
                    o["partition"].as_i64().unwrap_or(-1) as i32,
                ),
                o["offset"].as_i64().unwrap_or(-1),
            );
        }
    }
    *inner.seen.last_commit.lock().unwrap() = offsets
        .iter()
        .map(|o| {
            (
                o["topic"].as_str().unwrap_or_default().to_string(),
                o["partition"].as_i64().unwrap_or(-1) as i32,
                o["offset"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    inner.seen.commits.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

async fn register(
    State(inner): State<Arc<Inner>>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(schema) = body["schema"].as_str() else {
        return rest_error(StatusCode::UNPROCESSABLE_ENTITY, 42201, "Invalid schema");
    };
    let valid = match body["schemaType"].as_str() {
        None | Some("AVRO") => apache_avro::Schema::parse_str(schema).is_ok(),
        Some("PROTOBUF") => first_message(schema).is_ok(),
        Some("JSON") => serde_json::from_str::<Value>(schema)
            .ok()
            .is_some_and(|s| jsonschema::validator_for(&s).is_ok()),
        Some(_) => false,
    };
    if !valid {
        return rest_error(StatusCode::UNPROCESSABLE_ENTITY, 42201, "Invalid schema");
    }
    let mut schemas = inner.schemas.lock().unwrap();
    let id = match schemas.iter().position(|s| s == schema) {
        Some(i) => i + 1,
        None => {
            schemas.push(schema.to_string());
            schemas.len()
        }
    };
    inner.seen.schemas_registered.lock().unwrap().push(subject);
    (
        StatusCode::OK,
        [("Content-Type", "application/vnd.schemaregistry.v1+json")],
        json!({ "id": id }).to_string(),
    )
        .into_response()
}
