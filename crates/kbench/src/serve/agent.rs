//! `/agent/v1`: what `kbench agent` adds to the serve machinery. A coordinator says hello (protocol
//! version), reads the agent's clock several times (offset estimation), hands it a *segment* — the
//! same spec type the CLI builds, serialised, with the cluster to reach and a barrier start time —
//! and polls it; a distributed e2e run's consumer is told what the producers acknowledged before it
//! drains; a consume segment reads its share (its members in the run's group, or its partitions).
//! A segment is a run in the registry: supervised, one at a time, its result written. Every
//! segment holds a lease (`--lease`): the coordinator's polls (`GET` on the segment, and the drain)
//! renew it; one nobody asks about for the lease time is stopped and ends `abandoned`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use kbench_bench::distributed::{AGENT_PROTOCOL, Segment, Work};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::serve::app::App;
use crate::serve::error::{ApiError, ApiResult, from_value, json_object, json_response};
use crate::serve::registry::{Live, run_json};
use crate::serve::runs::{Reach, start_consume, start_e2e, start_omb, start_produce};

pub async fn hello(State(app): State<Arc<App>>) -> ApiResult {
    let busy = app.runs.read(|runs| {
        runs.iter()
            .find(|r| r.status.active())
            .map(|r| r.id.clone())
    });
    Ok(json_response(
        StatusCode::OK,
        json!({
            "protocol": AGENT_PROTOCOL,
            "kbench_version": env!("CARGO_PKG_VERSION"),
            "environment": kbench_bench::Environment::here(),
            "busy_with": busy,
        }),
    ))
}

pub async fn clock() -> ApiResult {
    Ok(json_response(
        StatusCode::OK,
        json!({ "unix_us": kbench_bench::clock::wall_us() }),
    ))
}

pub async fn create(State(app): State<Arc<App>>, body: Bytes) -> ApiResult {
    let raw = json_object(&body)?;
    // The version first, whatever else the body holds: another version's segment may not parse.
    let protocol = raw.get("protocol").and_then(Value::as_u64);
    if protocol != Some(u64::from(AGENT_PROTOCOL)) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "protocol: this agent speaks agent protocol {AGENT_PROTOCOL} (kbench {}), the coordinator {}: run the same kbench version on both",
                env!("CARGO_PKG_VERSION"),
                protocol.map_or_else(|| "none".to_string(), |p| p.to_string())
            ),
        ));
    }
    let segment: Segment = from_value(raw)?;
    let mut props = serde_json::Map::new();
    for (k, v) in &segment.properties {
        props.insert(k.clone(), json!(v));
    }
    let mut pins = kbench_wire::Pins::default();
    for (api, version) in &segment.pins {
        pins.extend_from(&format!("{api}={version}"))
            .map_err(|e| ApiError::field("pins", e.to_string()))?;
    }
    let reach = Reach {
        bootstrap: Some(segment.bootstrap_servers.clone()),
        client: Some(crate::serve::v1::client_from(&props)?),
        pins,
    };
    let masked = kbench_client::redacted(&segment.properties);
    let workload = segment.work.name();
    let id = match segment.work {
        Work::Produce(mut spec) => {
            spec.limits = app.limits;
            spec.validate()
                .map_err(|e| ApiError::field(e.field, e.reason))?;
            let settings = spec.settings_json(&agent_cluster(&segment.bootstrap_servers));
            let config = config(&segment.run, workload, settings, spec.start_at_us, &masked);
            start_produce(&app, config, *spec, reach).await?
        }
        Work::E2e(mut spec) => {
            spec.limits = app.limits;
            spec.values = segment.values.map(Into::into);
            spec.deserializer = registry_checked(segment.deserializer)?;
            spec.validate()
                .map_err(|e| ApiError::field(e.field, e.reason))?;
            let config = config(
                &segment.run,
                workload,
                spec.settings_json(),
                spec.start_at_us,
                &masked,
            );
            // Answered at once, a consumer too: the coordinator polls it until it has joined its
            // group (as long as the join takes), renewing its lease as it does; producers wait
            // for the barrier.
            start_e2e(
                &app,
                crate::serve::registry::Api::V1,
                config,
                *spec,
                reach,
                false,
            )
            .await?
        }
        Work::Consume(mut spec) => {
            spec.deserializer = registry_checked(segment.deserializer)?;
            spec.validate()
                .map_err(|e| ApiError::field(e.field, e.reason))?;
            let settings = spec.settings_json(&agent_cluster(&segment.bootstrap_servers));
            let config = config(&segment.run, workload, settings, spec.start_at_us, &masked);
            start_consume(&app, config, *spec, reach).await?
        }
        Work::Omb(segment_work) => {
            let mut spec = segment_work
                .spec()
                .map_err(|e| ApiError::field("work", e))?;
            // Its share against its own limits: the coordinator checked only the fields.
            spec.limits = app.limits;
            spec.validate()
                .map_err(|e| ApiError::field(e.field, e.reason))?;
            // The driver's connection settings (its security among them), towards the segment's
            // cluster, holding its pins.
            let cluster = spec
                .producer
                .connection
                .cluster_config(segment.bootstrap_servers.clone(), reach.pins);
            let settings = json!({
                "workload": spec.workload.name,
                "topic_prefix": spec.topic_prefix,
                "share": segment_work.share,
                "rate": segment_work.rate,
            });
            let config = config(&segment.run, workload, settings, None, &masked);
            start_omb(&app, config, spec, cluster).await?
        }
    };
    if let Some(lease) = app.lease {
        app.runs.set_lease(&id, lease);
    }
    Ok(json_response(
        StatusCode::CREATED,
        json!({ "id": id, "workload": workload, "status": "running" }),
    ))
}

/// A consumer's deserializer properties, checked (a registry URL that parses, credentials that
/// read) before its segment starts.
fn registry_checked(
    deserializer: std::collections::BTreeMap<String, String>,
) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
    if !deserializer.is_empty() {
        kbench_bench::schema::decode::RegistryReader::new(&deserializer)
            .map_err(|e| ApiError::field("deserializer", e.to_string()))?;
    }
    Ok(deserializer)
}

/// The cluster a segment's settings block names (its client id the agent's).
fn agent_cluster(bootstrap: &[String]) -> kbench_client::ClusterConfig {
    kbench_client::ClusterConfig::new(bootstrap.to_vec(), "kbench-agent", Default::default())
}

/// A segment's run config, as `/v1/runs` shows it: whose segment, its workload and settings, its
/// start instant, its properties masked.
fn config(
    run: &str,
    workload: &str,
    settings: Value,
    start_at_us: Option<u64>,
    masked: &std::collections::BTreeMap<String, String>,
) -> Value {
    json!({
        "segment_of": run, "workload": workload,
        "settings": settings, "start_at_us": start_at_us, "properties": masked,
    })
}

/// A segment as its coordinator polls it; the poll renews its lease.
pub async fn get(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    app.runs.renew(&id);
    let (body, ended) = app
        .runs
        .read_run(&id, |r| (run_json(r, true), !r.status.active()))?;
    if ended && let Some(n) = app.exit_after {
        let mut delivered = app.delivered.lock().expect("delivered lock");
        if delivered.insert(id) && delivered.len() == n {
            let app = app.clone();
            tokio::spawn(async move {
                tokio::time::sleep(EXIT_GRACE).await;
                app.exit.notify_one();
            });
        }
    }
    Ok(json_response(StatusCode::OK, body))
}

/// How long an agent that will exit still answers after its last result was read: the
/// coordinator reads its clock again after the run.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What the producers of a distributed e2e run acknowledged, per producer agent (`null` for one
/// lost); the consumer then drains until it has read them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drain {
    pub acked: Vec<Option<u64>>,
    /// With `--verify`: what each producer agent acknowledged, record by record (a lost one's
    /// left out), for the consumer's check.
    #[serde(default)]
    pub written: Vec<kbench_bench::verify::WrittenWire>,
}

pub async fn drain(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> ApiResult {
    let drain: Drain = from_value(json_object(&body)?)?;
    app.runs.renew(&id);
    let live = app.runs.read_run(&id, |r| match &r.live {
        Live::E2e(live) => Some(live.clone()),
        _ => None,
    })?;
    let Some(live) = live else {
        return Err(ApiError::field(
            "acked",
            format!("segment {id} is not an e2e consumer"),
        ));
    };
    live.segments
        .lock()
        .expect("segments lock")
        .set_acked(drain.acked);
    if let Some(v) = live.verify.lock().expect("verify lock").as_mut() {
        for w in &drain.written {
            v.written.add_wire(w);
        }
    }
    app.runs.stop(&id)?;
    let body = app.runs.read_run(&id, |r| run_json(r, false))?;
    Ok(json_response(StatusCode::ACCEPTED, body))
}

/// A consume segment: the agents together have read the run's `--messages`; an OMB segment: every
/// producer has ended and the agents together have read every record. It ends now, its result
/// kept (its `aborted` says [`kbench_bench::distributed::ENOUGH`] or
/// [`kbench_bench::distributed::DRAINED`], which the merge reads as complete, not stopped).
pub async fn enough(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    app.runs.renew(&id);
    let why = app.runs.read_run(&id, |r| match r.live {
        Live::Consume(_) => Some(kbench_bench::distributed::ENOUGH),
        Live::Omb(_) => Some(kbench_bench::distributed::DRAINED),
        _ => None,
    })?;
    let Some(why) = why else {
        return Err(ApiError::field(
            "id",
            format!("segment {id} is neither a consume nor an OMB segment"),
        ));
    };
    app.runs.stop_because(&id, why)?;
    let body = app.runs.read_run(&id, |r| run_json(r, false))?;
    Ok(json_response(StatusCode::ACCEPTED, body))
}

pub async fn delete(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> ApiResult {
    app.runs.stop_and_wait(&id).await?;
    let body = app.runs.read_run(&id, |r| run_json(r, true))?;
    Ok(json_response(StatusCode::OK, body))
}

/// When an OMB segment's producers start: every agent's consumers have joined.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Go {
    /// The start instant on this agent's clock, µs since the Unix epoch.
    pub start_at_us: u64,
}

/// An OMB segment's producers start at `start_at_us` (the coordinator sends it once every agent's
/// consumers have joined their groups).
pub async fn go(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> ApiResult {
    let go: Go = from_value(json_object(&body)?)?;
    app.runs.renew(&id);
    let live = app.runs.read_run(&id, |r| match &r.live {
        Live::Omb(live) => Some(live.clone()),
        _ => None,
    })?;
    let Some(live) = live else {
        return Err(ApiError::field(
            "start_at_us",
            format!("segment {id} is not an OMB segment"),
        ));
    };
    live.go(go.start_at_us);
    let body = app.runs.read_run(&id, |r| run_json(r, false))?;
    Ok(json_response(StatusCode::ACCEPTED, body))
}
