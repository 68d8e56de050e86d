//! `/v1/runs`: kbench's own API. Bodies use the CLI's flag names in snake_case and its value syntax
//! (`"5..50ms"`), plus `"workload"`; every field is optional and an absent one keeps the spec's
//! default, exactly as an absent flag does. Unknown fields are an error naming them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use kbench_bench::e2e::{CommitMode, E2eMode, E2eSpec};
use kbench_bench::spec::Limits;
use kbench_bench::spec::{
    bootstrap_list, parse_duration, parse_interval_span, parse_positive_span,
};
use kbench_bench::{Payload, ProduceSpec};
use kbench_client::Acks;
use kbench_wire::Compression;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::args::set;
use crate::serve::app::App;
use crate::serve::error::{ApiError, ApiResult, from_value, json_object, json_response, optional};
use crate::serve::registry::{Api, run_json};
use crate::serve::runs::{Reach, start_e2e, start_produce};

/// An e2e run through /v1.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct V1E2e {
    bootstrap_servers: Option<String>,
    topic: Option<String>,
    partitions: Option<i32>,
    producers: Option<usize>,
    batch_interval: Option<String>,
    payload_size: Option<String>,
    messages_per_batch: Option<String>,
    commit: Option<String>,
    consume_wait: Option<String>,
    consume_max_bytes: Option<i32>,
    duration: Option<String>,
    drain: Option<String>,
    acks: Option<String>,
    compression: Option<String>,
    group: Option<String>,
    consumer_id: Option<String>,
    mode: Option<String>,
    seed: Option<u64>,
    gather_latencies: Option<bool>,
    reply_topic: Option<String>,
    correlation_header: Option<String>,
    reply_correlation: Option<String>,
    app_group: Option<String>,
}

/// The `acks` and `compression` fields, which both workloads take.
fn delivery(
    acks: Option<&str>,
    compression: Option<&str>,
    producer: &mut kbench_client::ProducerSettings,
) -> Result<(), ApiError> {
    set(
        &mut producer.acks,
        optional("acks", acks, str::parse::<Acks>)?,
    );
    set(
        &mut producer.compression,
        optional("compression", compression, str::parse::<Compression>)?,
    );
    Ok(())
}

fn spec_field(e: kbench_bench::SpecError) -> ApiError {
    ApiError::field(e.field, e.reason)
}

/// The body → the spec, and the bootstrap list it names (if any).
pub(crate) fn e2e_spec(
    c: &V1E2e,
    limits: Limits,
) -> Result<(E2eSpec, Option<Vec<String>>), ApiError> {
    let mut spec = E2eSpec {
        limits,
        ..E2eSpec::default()
    };
    set(&mut spec.topic, c.topic.clone());
    set(&mut spec.partitions, c.partitions);
    set(&mut spec.producers, c.producers);
    set(
        &mut spec.batch_interval_ms,
        optional(
            "batch_interval",
            c.batch_interval.as_deref(),
            parse_interval_span,
        )?,
    );
    set(
        &mut spec.payload_size,
        optional(
            "payload_size",
            c.payload_size.as_deref(),
            parse_positive_span,
        )?,
    );
    set(
        &mut spec.messages_per_batch,
        optional(
            "messages_per_batch",
            c.messages_per_batch.as_deref(),
            parse_positive_span,
        )?,
    );
    set(
        &mut spec.commit,
        optional("commit", c.commit.as_deref(), str::parse::<CommitMode>)?,
    );
    set(
        &mut spec.consumer.fetch_max_wait,
        optional("consume_wait", c.consume_wait.as_deref(), parse_duration)?,
    );
    set(
        &mut spec.consumer.fetch_max_bytes,
        c.consume_max_bytes.map(|b| b.max(0) as usize),
    );
    spec.duration = optional("duration", c.duration.as_deref(), parse_duration)?;
    set(
        &mut spec.drain,
        optional("drain", c.drain.as_deref(), parse_duration)?,
    );
    delivery(
        c.acks.as_deref(),
        c.compression.as_deref(),
        &mut spec.producer,
    )?;
    set(&mut spec.group_id, c.group.clone());
    set(&mut spec.consumer_id, c.consumer_id.clone());
    set(
        &mut spec.mode,
        optional("mode", c.mode.as_deref(), str::parse::<E2eMode>)?,
    );
    set(&mut spec.seed, c.seed);
    set(&mut spec.gather_latencies, c.gather_latencies);
    spec.reply = kbench_bench::e2e::ReplySpec::of(
        c.reply_topic.as_deref(),
        c.correlation_header.as_deref(),
        optional(
            "reply_correlation",
            c.reply_correlation.as_deref(),
            str::parse::<kbench_bench::e2e::Correlation>,
        )?,
        c.app_group.as_deref(),
    )
    .map_err(spec_field)?;
    let bootstrap = optional(
        "bootstrap_servers",
        c.bootstrap_servers.as_deref(),
        bootstrap_list,
    )?;
    spec.validate().map_err(spec_field)?;
    Ok((spec, bootstrap))
}

/// A produce run through /v1, in kafka-producer-perf-test's terms.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct V1Produce {
    bootstrap_servers: Option<String>,
    topic: Option<String>,
    num_records: Option<u64>,
    record_size: Option<usize>,
    keys: Option<String>,
    throughput: Option<f64>,
    duration: Option<String>,
    acks: Option<String>,
    compression: Option<String>,
    batch_size: Option<usize>,
    linger_ms: Option<u64>,
    partitions: Option<i32>,
    seed: Option<u64>,
}

/// The body → the spec, and the bootstrap list it names (if any).
pub(crate) fn produce_spec(
    c: &V1Produce,
    limits: Limits,
) -> Result<(ProduceSpec, Option<Vec<String>>), ApiError> {
    let mut spec = ProduceSpec {
        // Live counters for GET, every second.
        reporting_interval: Duration::from_secs(1),
        limits,
        ..ProduceSpec::default()
    };
    set(&mut spec.topic, c.topic.clone());
    set(&mut spec.num_records, c.num_records);
    if let Some(size) = c.record_size {
        spec.payload = Payload::Random { size };
    }
    if let Some(keys) = optional("keys", c.keys.as_deref(), kbench_bench::Keys::parse)? {
        spec.keys = keys;
    }
    // Any negative throughput is unthrottled, as kafka-producer-perf-test takes it.
    spec.throughput = c.throughput.filter(|t| t.is_nan() || *t >= 0.0);
    spec.duration = optional("duration", c.duration.as_deref(), parse_duration)?;
    delivery(
        c.acks.as_deref(),
        c.compression.as_deref(),
        &mut spec.producer,
    )?;
    set(&mut spec.producer.batch_size, c.batch_size);
    set(
        &mut spec.producer.linger,
        c.linger_ms.map(Duration::from_millis),
    );
    set(&mut spec.partitions, c.partitions);
    set(&mut spec.seed, c.seed);
    let bootstrap = optional(
        "bootstrap_servers",
        c.bootstrap_servers.as_deref(),
        bootstrap_list,
    )?;
    spec.validate().map_err(spec_field)?;
    Ok((spec, bootstrap))
}

/// A body's `properties` object, as given.
fn body_properties(body: &[u8]) -> Option<serde_json::Map<String, Value>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("properties")?.as_object().cloned()
}

/// Connection and security properties from a body: checked, TLS built; an error names the key.
pub(crate) fn client_from(
    props: &serde_json::Map<String, Value>,
) -> Result<kbench_client::ConnectionSettings, ApiError> {
    let mut settings = kbench_client::ConnectionSettings::default();
    for (k, v) in props {
        let Some(v) = v.as_str() else {
            return Err(ApiError::field(
                "properties",
                format!("{k}: the value must be a string"),
            ));
        };
        let taken = settings
            .apply("properties", k, v)
            .map_err(|e| ApiError::field("properties", e.to_string()))?;
        if !taken {
            return Err(ApiError::field(
                "properties",
                format!("{k}: not a connection or security property; use the body's own field"),
            ));
        }
    }
    settings
        .finish()
        .map_err(|e| ApiError::field("properties", e.to_string()))?;
    Ok(settings)
}

/// What a `/v1/runs` body asks for, read and checked before anything starts.
pub(crate) struct Parsed {
    /// `e2e` or `produce`.
    pub kind: String,
    /// The body as GET will show it (secrets masked).
    pub config: Value,
    pub client: Option<kbench_client::ConnectionSettings>,
    /// The connection properties as given: what a distributed run's agents are sent.
    pub pairs: Option<Vec<(String, String)>>,
    pub spread: Option<crate::serve::distributed::Spread>,
    pub spec: Spec,
}

/// A `/v1/runs` body's workload and its cluster (`None`: the server's).
pub(crate) enum Spec {
    E2e(Box<E2eSpec>, Option<Vec<String>>),
    Produce(Box<ProduceSpec>, Option<Vec<String>>),
}

/// Read a `/v1/runs` body against the server's limits. Pure: no I/O (what `serve::payloads`
/// fuzzes).
pub(crate) fn parse(body: &[u8], limits: Limits) -> Result<Parsed, ApiError> {
    let mut raw = json_object(body)?;
    let obj = raw.as_object_mut().expect("an object");
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
    // A CI gate, checked against the workload's figures before anything starts.
    let slo = match obj.remove("slo") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            if matches!(kind.as_str(), "e2e" | "produce") {
                kbench_bench::slo::parse(&text, &kind).map_err(|e| ApiError::field("slo", e))?;
            }
            Some(text)
        }
        Some(_) => return Err(ApiError::field("slo", "must be a string of conditions")),
    };
    // Spread over agents: checked here, before anything starts.
    let spread = crate::serve::distributed::take(obj)?;
    // Connection and security properties, by the CLI's names: {"security.protocol": "SSL", …}.
    let client = match obj.remove("properties") {
        None | Some(Value::Null) => None,
        Some(Value::Object(props)) => Some(client_from(&props)?),
        Some(_) => {
            return Err(ApiError::field(
                "properties",
                "must be an object of property names to string values",
            ));
        }
    };
    let mut config = raw.clone();
    if let Some(text) = &slo {
        config["slo"] = json!(text);
    }
    if let Some(s) = &spread
        && let (Some(map), Value::Object(shown)) =
            (config.as_object_mut(), crate::serve::distributed::shown(s))
    {
        map.extend(shown);
    }
    // What agents are sent: the properties as given.
    let pairs: Option<Vec<(String, String)>> = body_properties(body).map(|props| {
        props
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
            .collect()
    });
    if let Some(props) = body_properties(body) {
        // Stored and answered with secret values masked.
        config["properties"] = Value::Object(
            props
                .into_iter()
                .map(|(k, v)| {
                    let v = if kbench_client::is_secret(&k) {
                        json!("***")
                    } else {
                        v
                    };
                    (k, v)
                })
                .collect(),
        );
    }
    let spec = match kind.as_str() {
        "e2e" => {
            let (spec, bootstrap) = e2e_spec(&from_value(raw)?, limits)?;
            Spec::E2e(Box::new(spec), bootstrap)
        }
        "produce" if spread.as_ref().is_some_and(|s| s.has_consumer_agent()) => {
            return Err(ApiError::field(
                "consumer_agent",
                "only for e2e runs (a produce run has no consumer)",
            ));
        }
        "produce" => {
            let (spec, bootstrap) = produce_spec(&from_value(raw)?, limits)?;
            Spec::Produce(Box::new(spec), bootstrap)
        }
        other => {
            return Err(ApiError::field(
                "workload",
                format!("unknown workload {other:?} (e2e or produce)"),
            ));
        }
    };
    Ok(Parsed {
        kind,
        config,
        client,
        pairs,
        spread,
        spec,
    })
}

pub async fn create(State(app): State<Arc<App>>, body: Bytes) -> ApiResult {
    use crate::serve::distributed as spread_over;
    let Parsed {
        kind,
        config,
        client,
        pairs,
        spread,
        spec,
    } = parse(&body, app.limits)?;
    let id = match (spec, spread) {
        (Spec::E2e(spec, bootstrap), None) => {
            let reach = Reach {
                bootstrap,
                client,
                ..Reach::default()
            };
            start_e2e(&app, Api::V1, config, *spec, reach, true).await?
        }
        (Spec::E2e(spec, bootstrap), Some(spread)) => {
            spread_over::start_e2e(&app, config, *spec, bootstrap, pairs, spread).await?
        }
        (Spec::Produce(spec, bootstrap), None) => {
            let reach = Reach {
                bootstrap,
                client,
                ..Reach::default()
            };
            start_produce(&app, config, *spec, reach).await?
        }
        (Spec::Produce(spec, bootstrap), Some(spread)) => {
            spread_over::start_produce(&app, config, *spec, bootstrap, pairs, spread).await?
        }
    };
    Ok(json_response(
        StatusCode::CREATED,
        json!({ "id": id, "workload": kind, "status": "running" }),
    ))
}

pub async fn list(State(app): State<Arc<App>>) -> ApiResult {
    let list: Vec<Value> = app
        .runs
        .read(|runs| runs.iter().map(|r| run_json(r, false)).collect());
    Ok(json_response(StatusCode::OK, json!({ "runs": list })))
}

pub async fn get(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    let body = app.runs.read_run(&id, |r| run_json(r, true))?;
    Ok(json_response(StatusCode::OK, body))
}

pub async fn delete(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    app.runs.stop_and_wait(&id).await?;
    let body = app.runs.read_run(&id, |r| run_json(r, true))?;
    Ok(json_response(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_bad_fields_are_named() {
        let e = from_value::<V1E2e>(json!({"producerz": 1})).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("producerz"));
        let c: V1E2e = from_value(json!({"batch_interval": "9..1ms"})).unwrap();
        assert_eq!(
            e2e_spec(&c, Limits::default())
                .err()
                .unwrap()
                .field
                .as_deref(),
            Some("batch_interval")
        );
        // Request-reply: the same gate as the CLI's flags.
        let c: V1E2e = from_value(json!({"app_group": "svc"})).unwrap();
        let e = e2e_spec(&c, Limits::default()).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("app_group"));
        let c: V1E2e =
            from_value(json!({"reply_topic": "r", "reply_correlation": "json:"})).unwrap();
        let e = e2e_spec(&c, Limits::default()).err().unwrap();
        assert_eq!(e.field.as_deref(), Some("reply_correlation"));
        let c: V1E2e = from_value(
            json!({"reply_topic": "r", "correlation_header": "x-id", "app_group": "svc"}),
        )
        .unwrap();
        let reply = e2e_spec(&c, Limits::default()).unwrap().0.reply.unwrap();
        assert_eq!(
            (
                reply.header.as_str(),
                reply.correlation.describe(),
                reply.app_group.as_deref()
            ),
            ("x-id", "header:x-id".to_string(), Some("svc"))
        );
        let c: V1Produce = from_value(json!({"throughput": -5})).unwrap();
        assert_eq!(
            produce_spec(&c, Limits::default()).unwrap().0.throughput,
            None,
            "unthrottled"
        );
        let c: V1Produce = from_value(json!({"record_size": 0})).unwrap();
        assert_eq!(
            produce_spec(&c, Limits::default())
                .err()
                .unwrap()
                .field
                .as_deref(),
            Some("record_size")
        );
    }
}
