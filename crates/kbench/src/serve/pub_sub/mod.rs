//! `/pub-sub-demo`: the seed REST perf service's API, unchanged. Its payload becomes an [`E2eSpec`]
//! (every field it does not carry keeps the spec's default); its answers are the seed's stats shape
//! (`kbench_bench::seed_service`). Unknown payload fields are ignored, as the seed service did.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use kbench_bench::SpecError;
use kbench_bench::e2e::{CommitMode, E2eMode, E2eSpec, RestApi, RestSpec, Span};
use kbench_bench::iso8601;
use kbench_bench::seed_service::pub_sub_stats_live;
use kbench_bench::spec::Limits;
use kbench_rest::RestFormat;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::serve::app::App;
use crate::serve::error::{ApiError, ApiResult, from_value, json_object, json_response, named};
use crate::serve::registry::{Api, Live, RunEntry};
use crate::serve::runs::{Reach, start_e2e};

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

/// The seed payload.
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
    #[serde(default)]
    gather_latencies: Option<bool>,
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
    #[serde(default)]
    consume_timeout_ms: Option<u64>,
    #[serde(default)]
    consume_max_bytes_ms: Option<u64>,
    #[serde(default)]
    commit_interval: Option<String>,
    #[serde(default)]
    mode: Option<PubSubMode>,
    #[serde(default)]
    run_duration: Option<String>,
    #[serde(default)]
    kafka_bootstrap_servers: Option<String>,
    /// kbench's additions for KAFKA_NATIVE: `security.protocol` and `sasl.mechanism`. With SASL,
    /// kafkaUserName / kafkaUserPassword are the SASL credentials.
    #[serde(default)]
    security_protocol: Option<String>,
    #[serde(default)]
    sasl_mechanism: Option<String>,
}

/// The payload as GET shows it: the password removed (not masked: removed), and credentials in any
/// URL (`user:password@`) stripped.
fn public_config(raw: &Value) -> Value {
    let mut v = raw.clone();
    if let Some(o) = v.as_object_mut() {
        o.retain(|k, _| !kbench_client::is_secret(k));
        for value in o.values_mut() {
            if let Some(s) = value.as_str()
                && s.contains('@')
            {
                *value = Value::String(kbench_rest::redact_url(s));
            }
        }
    }
    v
}

/// The payload field a spec field comes from.
fn payload_field(e: &SpecError) -> &'static str {
    match e.field {
        "topic" => "kafkaTopic",
        "producers" => "parallelProducers",
        "batch_interval" => "minBatchIntervalMs",
        "payload_size" => "maxMessagePayloadSizeBytes",
        "messages_per_batch" => "maxMessagesPerBatch",
        "consume_max_bytes" => "consumeMaxBytesMs",
        "commit" => "commitInterval",
        "duration" => "runDuration",
        "group" => "kafkaConsumerGroup",
        "value_schema_id" => "valueSchemaId",
        other => other,
    }
}

fn ordered(min_name: &str, min: u64, max_name: &str, max: u64) -> Result<(), ApiError> {
    if min > max {
        return Err(ApiError::field(
            min_name,
            format!("{min} is larger than {max_name} ({max})"),
        ));
    }
    Ok(())
}

fn iso_duration(field: &str, s: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some(s) = s else { return Ok(None) };
    let d = iso8601::parse_duration(s).map_err(|e| ApiError::field(field, e))?;
    if d.is_zero() {
        return Err(ApiError::field(field, "must be above zero"));
    }
    Ok(Some(d))
}

/// The payload → the spec, and the bootstrap list it names (if any).
fn spec_of(c: &PubSubConfig, limits: Limits) -> Result<(E2eSpec, Option<Vec<String>>), ApiError> {
    ordered(
        "minBatchIntervalMs",
        c.min_batch_interval_ms,
        "maxBatchIntervalMs",
        c.max_batch_interval_ms,
    )?;
    ordered(
        "minMessagePayloadSizeBytes",
        c.min_message_payload_size_bytes as u64,
        "maxMessagePayloadSizeBytes",
        c.max_message_payload_size_bytes as u64,
    )?;
    ordered(
        "minMessagesPerBatch",
        c.min_messages_per_batch as u64,
        "maxMessagesPerBatch",
        c.max_messages_per_batch as u64,
    )?;
    for (field, v) in [
        (
            "minMessagePayloadSizeBytes",
            c.min_message_payload_size_bytes,
        ),
        ("minMessagesPerBatch", c.min_messages_per_batch),
    ] {
        if v == 0 {
            return Err(ApiError::field(field, "must be at least 1"));
        }
    }
    let mut spec = E2eSpec {
        mode: match c.mode {
            None | Some(PubSubMode::ConsumerAndProducers) => E2eMode::ConsumerAndProducers,
            Some(PubSubMode::Producers) => E2eMode::Producers,
            Some(PubSubMode::Consumer) => E2eMode::Consumer,
        },
        topic: c.kafka_topic.clone(),
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
        limits,
        ..E2eSpec::default()
    };
    if let Some(g) = c.kafka_consumer_group.clone().filter(|s| !s.is_empty()) {
        spec.group_id = g;
    }
    if let Some(id) = c.kafka_consumer_id.clone().filter(|s| !s.is_empty()) {
        spec.consumer_id = id;
    }
    // A missing commitInterval (the seed's null) means synchronous commits.
    spec.commit = match iso_duration("commitInterval", c.commit_interval.as_deref())? {
        None => CommitMode::Sync,
        Some(d) => CommitMode::Interval(d),
    };
    if let Some(ms) = c.consume_timeout_ms {
        spec.consumer.fetch_max_wait = Duration::from_millis(ms.min(i32::MAX as u64));
    }
    if let Some(b) = c.consume_max_bytes_ms {
        spec.consumer.fetch_max_bytes = b.min(i32::MAX as u64) as usize;
        if b == 0 || b > i32::MAX as u64 {
            return Err(ApiError::field(
                "consumeMaxBytesMs",
                "must be between 1 and 2147483647",
            ));
        }
    }
    spec.duration = iso_duration("runDuration", c.run_duration.as_deref())?;
    if let Some(g) = c.gather_latencies {
        spec.gather_latencies = g;
    }
    let bootstrap = c
        .kafka_bootstrap_servers
        .as_deref()
        .map(|s| {
            named(
                "kafkaBootstrapServers",
                kbench_bench::spec::bootstrap_list(s),
            )
        })
        .transpose()?;
    // Checked whatever the type: a bad value is refused even where it would not be used.
    let format = c
        .rest_format
        .as_deref()
        .map(|f| named("restFormat", f.parse::<RestFormat>()))
        .transpose()?;
    let api = c
        .rest_api
        .as_deref()
        .map(|a| named("restApi", a.parse::<RestApi>()))
        .transpose()?;
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
    if c.kind == PubSubType::KafkaRestProxy {
        let mut rest = rest_of(c, value_schema_id)?;
        if let Some(f) = format {
            rest.format = f;
        }
        if let Some(a) = api {
            rest.api = a;
        }
        spec.rest = Some(rest);
    }
    spec.validate()
        .map_err(|e| ApiError::field(payload_field(&e), e.reason))?;
    Ok((spec, bootstrap))
}

/// The REST Proxy driver's settings from a KAFKA_REST_PROXY payload; an error names the field.
fn rest_of(c: &PubSubConfig, value_schema_id: Option<i64>) -> Result<RestSpec, ApiError> {
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
    let mut rest = RestSpec::new(&url);
    rest.value_schema_id = value_schema_id;
    if let Some(user) = c.kafka_user_name.clone().filter(|u| !u.is_empty()) {
        rest.proxy.basic_auth = Some((user, c.kafka_user_password.clone().unwrap_or_default()));
    }
    rest.schema_registry = c.schema_registry_url.clone();
    Ok(rest)
}

/// The client settings of a KAFKA_NATIVE run that uses SASL: asked for by the payload
/// (`securityProtocol`, `saslMechanism`), or by the server's own `-X` for its cluster. The
/// payload's kafkaUserName / kafkaUserPassword are then the credentials. `None`: the server's
/// settings (or the defaults) as they are.
fn native_client(
    c: &PubSubConfig,
    server: &kbench_client::ConnectionSettings,
    server_bootstrap: bool,
    own_bootstrap: bool,
) -> Result<Option<kbench_client::ConnectionSettings>, ApiError> {
    if c.kind != PubSubType::KafkaNative {
        for (field, given) in [
            ("securityProtocol", &c.security_protocol),
            ("saslMechanism", &c.sasl_mechanism),
        ] {
            if given.is_some() {
                return Err(ApiError::field(
                    field,
                    "applies to KAFKA_NATIVE; the REST Proxy holds its own Kafka credentials",
                ));
            }
        }
        return Ok(None);
    }
    let asked = c.security_protocol.is_some() || c.sasl_mechanism.is_some();
    let server_sasl = !own_bootstrap && server.security.protocol.uses_sasl();
    if !asked && !server_sasl {
        return Ok(None);
    }
    if asked && !own_bootstrap && !server_bootstrap {
        return Err(ApiError::field(
            if c.security_protocol.is_some() {
                "securityProtocol"
            } else {
                "saslMechanism"
            },
            "the embedded broker is plaintext; give kafkaBootstrapServers (or start kbench serve with --bootstrap-server)",
        ));
    }
    let mut settings = if own_bootstrap {
        kbench_client::ConnectionSettings::default()
    } else {
        server.clone()
    };
    let apply = |s: &mut kbench_client::ConnectionSettings, field: &str, key: &str, value: &str| {
        s.apply(field, key, value).map(|_| ()).map_err(|e| {
            let reason = match e {
                kbench_client::PropertyError::Value { reason, .. } => reason,
                other => other.to_string(),
            };
            ApiError::field(field, reason)
        })
    };
    match &c.security_protocol {
        Some(p) => apply(&mut settings, "securityProtocol", "security.protocol", p)?,
        // A mechanism alone means SASL over what the connection already is.
        None if !settings.security.protocol.uses_sasl() => {
            let p =
                kbench_client::SecurityProtocol::of(settings.security.protocol.uses_tls(), true);
            apply(
                &mut settings,
                "saslMechanism",
                "security.protocol",
                p.name(),
            )?
        }
        None => {}
    }
    if settings.security.protocol.uses_sasl() {
        match &c.sasl_mechanism {
            Some(m) => apply(&mut settings, "saslMechanism", "sasl.mechanism", m)?,
            // PLAIN, as managed services name an API key and secret.
            None if settings.security.sasl.mechanism.is_none()
                && settings.jaas_mechanism.is_none() =>
            {
                apply(&mut settings, "saslMechanism", "sasl.mechanism", "PLAIN")?
            }
            None => {}
        }
        if let Some(user) = c.kafka_user_name.as_deref().filter(|u| !u.is_empty()) {
            apply(&mut settings, "kafkaUserName", "sasl.username", user)?;
            apply(
                &mut settings,
                "kafkaUserPassword",
                "sasl.password",
                c.kafka_user_password.as_deref().unwrap_or(""),
            )?;
        }
    } else if c.sasl_mechanism.is_some() {
        return Err(ApiError::field(
            "saslMechanism",
            format!(
                "securityProtocol is {}; SASL needs SASL_PLAINTEXT or SASL_SSL",
                settings.security.protocol.name()
            ),
        ));
    }
    settings.finish().map_err(|e| match e {
        kbench_client::PropertyError::Setup { key, reason } => {
            let field = match key.as_str() {
                "sasl.username" => "kafkaUserName",
                "sasl.password" => "kafkaUserPassword",
                "sasl.mechanism" => "saslMechanism",
                "security.protocol" => "securityProtocol",
                _ => "config",
            };
            ApiError::field(field, format!("{key}: {reason}"))
        }
        other => ApiError::field("config", other.to_string()),
    })?;
    Ok(Some(settings))
}

/// A `/pub-sub-demo` body read and checked, before anything starts: the run's spec, its cluster
/// (`None`: the server's) and its client settings (`None`: the server's), and the payload as GET
/// will show it.
pub(crate) struct Parsed {
    pub shown: Value,
    pub spec: E2eSpec,
    pub bootstrap: Option<Vec<String>>,
    pub client: Option<kbench_client::ConnectionSettings>,
}

/// Read a `/pub-sub-demo` body against the server's limits, client settings and whether it has a
/// default cluster. Pure: no I/O (what `serve::payloads` fuzzes).
pub(crate) fn parse(
    body: &[u8],
    limits: kbench_bench::spec::Limits,
    server: &kbench_client::ConnectionSettings,
    server_bootstrap: bool,
) -> Result<Parsed, ApiError> {
    let raw = json_object(body)?;
    let config: PubSubConfig = from_value(raw.clone())?;
    let (spec, bootstrap) = spec_of(&config, limits)?;
    let client = native_client(&config, server, server_bootstrap, bootstrap.is_some())?;
    Ok(Parsed {
        shown: public_config(&raw),
        spec,
        bootstrap,
        client,
    })
}

pub async fn post(State(app): State<Arc<App>>, body: Bytes) -> ApiResult {
    let p = parse(
        &body,
        app.limits,
        &app.client,
        app.default_bootstrap.is_some(),
    )?;
    let id = start_e2e(
        &app,
        Api::PubSub,
        p.shown.clone(),
        p.spec,
        Reach {
            bootstrap: p.bootstrap,
            client: p.client,
            ..Reach::default()
        },
        true,
    )
    .await?;
    let body = json!({ "id": id, "status": "running", "config": p.shown });
    Ok(json_response(StatusCode::OK, body))
}

/// The most recent /pub-sub-demo run's id.
fn latest(runs: &[RunEntry]) -> Result<String, ApiError> {
    runs.iter()
        .rev()
        .find(|r| r.api == Api::PubSub)
        .map(|r| r.id.clone())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no pub-sub-demo run has been started",
            )
        })
}

pub async fn get(State(app): State<Arc<App>>) -> ApiResult {
    let id = app.runs.read(latest)?;
    let body = app.runs.read_run(&id, |r| {
        let stats = match (&r.pub_sub_stats, &r.live) {
            (Some(s), _) => s.clone(),
            (None, Live::E2e(live)) => pub_sub_stats_live(live, r.start_time),
            _ => Value::Null,
        };
        json!({ "id": r.id, "status": r.status.name(), "config": r.config, "stats": stats, "error": r.error })
    })?;
    Ok(json_response(StatusCode::OK, body))
}

pub async fn delete(State(app): State<Arc<App>>) -> ApiResult {
    let id = app.runs.read(latest)?;
    app.runs.stop_and_wait(&id).await?;
    app.runs
        .read_run(&id, |r| match (&r.pub_sub_stats, &r.error) {
            (Some(stats), _) => Ok(json_response(StatusCode::OK, stats.clone())),
            (None, Some(e)) => Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("run {id} failed: {e}"),
            )),
            (None, None) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("run {id} has no result"),
            )),
        })?
}

#[cfg(test)]
pub(crate) mod tests;
