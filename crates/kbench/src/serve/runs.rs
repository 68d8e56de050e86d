//! Starting runs from the HTTP API: the library's e2e run and produce job, each under the registry's
//! supervision, against the request's cluster, the server's, or the embedded broker the server owns.

use std::sync::Arc;

use axum::http::StatusCode;
use kbench_bench::e2e::{E2eLive, E2eSpec, run_e2e};
use kbench_bench::result::{E2eResultDocument, Target};
use kbench_bench::seed_service::{PubSubFigures, pub_sub_stats};
use kbench_bench::{BenchError, ProduceSpec};
use kbench_client::{ClusterConfig, ConnectionSettings};
use kbench_wire::Pins;
use serde_json::Value;

use crate::serve::app::App;
use crate::serve::error::ApiError;
use crate::serve::registry::{Api, ConsumeLive, Live, Outcome, ProduceLive};

const CLIENT_ID: &str = "kbench-serve";
/// The client id of an agent's segments.
const AGENT_CLIENT_ID: &str = "kbench-agent";

/// Delete a finished run's topic from the embedded broker the server keeps: its in-memory storage
/// would otherwise hold every run's records for the server's life. A failure is logged, not fatal.
async fn forget_topic(cluster: &ClusterConfig, topic: &str) {
    let deleted = async {
        let c = kbench_client::Cluster::connect(cluster.clone()).await?;
        let r = c.delete_topic(topic).await;
        c.close(std::time::Duration::from_secs(1)).await;
        r
    };
    match tokio::time::timeout(std::time::Duration::from_secs(30), deleted).await {
        Ok(Ok(())) => tracing::debug!(%topic, "deleted from the embedded broker"),
        Ok(Err(e)) => tracing::warn!(%topic, "not deleted from the embedded broker: {e}"),
        Err(_) => tracing::warn!(%topic, "not deleted from the embedded broker: no answer"),
    }
}

/// A start error as the API says it: `field` names where the cluster came from.
fn start_error(e: BenchError, field: &str, bootstrap: &str) -> String {
    match e {
        BenchError::Connect { reason, .. } => {
            format!("{field} {bootstrap}: cannot connect: {reason}")
        }
        other => other.to_string(),
    }
}

/// Where a run connects: the request's cluster (else the server's, else the embedded broker), the
/// request's connection settings, and the versions it pins (an agent's segment carries its run's
/// `--pin`s).
#[derive(Debug, Default)]
pub struct Reach {
    pub bootstrap: Option<Vec<String>>,
    pub client: Option<ConnectionSettings>,
    pub pins: Pins,
}

/// The connection settings of a run: the request's properties; else, towards the server's own
/// default cluster, the server's (`-X`, `--command-config`); else (the request's own cluster, or the
/// embedded broker) plaintext with Kafka's defaults.
fn cluster_for(
    app: &App,
    servers: Vec<String>,
    own_bootstrap: bool,
    embedded: bool,
    client: Option<ConnectionSettings>,
    pins: Pins,
) -> ClusterConfig {
    let settings = match client {
        Some(s) => s,
        None if !own_bootstrap && !embedded => app.client.clone(),
        None => ConnectionSettings::default(),
    };
    let mut config = settings.cluster_config(servers, pins);
    config.client_id = if app.agent {
        AGENT_CLIENT_ID
    } else {
        CLIENT_ID
    }
    .into();
    config
}

/// Start an e2e run; with `wait`, answer once it is under way (group joined, producers started) or
/// has failed to start, so that an unreachable broker is an error to this request (502), not a
/// failed run found later. (An agent's producer segment does not wait: it waits for its barrier.)
pub async fn start_e2e(
    app: &Arc<App>,
    api: Api,
    config: Value,
    mut spec: E2eSpec,
    reach: Reach,
    wait: bool,
) -> Result<String, ApiError> {
    app.runs.ensure_idle()?;
    let own = reach.bootstrap.is_some();
    let (servers, embedded) = match &spec.rest {
        // The proxy reaches Kafka; kbench needs no broker of its own.
        Some(rest) => (vec![rest.proxy.url.clone()], false),
        None => app.bootstrap(reach.bootstrap).await?,
    };
    let bootstrap = servers.join(",");
    let cluster = cluster_for(app, servers, own, embedded, reach.client, reach.pins);
    let live = Arc::new(E2eLive::default());
    let run = app
        .runs
        .register("e2e", api, config, Live::E2e(live.clone()))?;
    let id = run.id.clone();
    let (feed, _) = app.runs.feed(&id)?;
    spec.window_sink = app.metrics_for("e2e", &spec.topic, &id).and(feed.sink());
    let stop = run.stop.clone();
    let registry = app.runs.clone();
    let start_time = registry.read_run(&id, |r| r.start_time)?;
    let task_live = live.clone();
    let run_id = id.clone();
    app.runs.spawn(run, async move {
        let outcome = run_e2e(&spec, &cluster, task_live, stop).await;
        if embedded {
            forget_topic(&cluster, &spec.topic).await;
        }
        match outcome {
            Ok(run) => {
                let kill = registry.kill_time(&run_id).unwrap_or(run.ended_at);
                let stats = pub_sub_stats(
                    PubSubFigures {
                        produced: run.produced,
                        consumed: run.consumed,
                        failed: run.failed,
                        producer: &run.producer_latency,
                        whole_trip: &run.whole_trip,
                    },
                    start_time,
                    Some(kill),
                );
                let mut doc = E2eResultDocument::of(
                    &run,
                    Target::of(&cluster, embedded),
                    spec.settings_json(),
                    spec.seed,
                );
                if spec.window_histograms {
                    doc.intervals = kbench_bench::timeline::with_histograms(
                        std::mem::take(&mut doc.intervals),
                        &run.timeline,
                    );
                }
                let mut doc = serde_json::to_value(&doc).unwrap_or(Value::Null);
                if api == Api::PubSub {
                    doc["pub_sub_demo"] = stats.clone();
                }
                Outcome {
                    result: Some(doc),
                    stats: (api == Api::PubSub).then_some(stats),
                    error: None,
                }
            }
            Err(e) => Outcome::failed(start_error(e, "bootstrap", &bootstrap)),
        }
    });
    // Wait until the run leaves its start-up phase, or ends.
    if wait {
        let ended = app.runs.wait_done(&id);
        tokio::pin!(ended);
        loop {
            if live.phase() != "starting" {
                break;
            }
            tokio::select! {
                _ = &mut ended => break,
                _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
            }
        }
    }
    let failed = app.runs.read_run(&id, |r| {
        (r.status == crate::serve::registry::Status::Failed).then(|| r.error.clone())
    })?;
    if let Some(error) = failed {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "run {id} could not start: {}",
                error.as_deref().unwrap_or("unknown error")
            ),
        ));
    }
    Ok(id)
}

/// Start a produce run: the same job as `kbench produce`.
pub async fn start_produce(
    app: &Arc<App>,
    config: Value,
    mut spec: ProduceSpec,
    reach: Reach,
) -> Result<String, ApiError> {
    app.runs.ensure_idle()?;
    let own = reach.bootstrap.is_some();
    let (servers, embedded) = app.bootstrap(reach.bootstrap).await?;
    let bootstrap = servers.join(",");
    let cluster = cluster_for(app, servers, own, embedded, reach.client, reach.pins);
    let live = Arc::new(ProduceLive::default());
    let run = app
        .runs
        .register("produce", Api::V1, config, Live::Produce(live.clone()))?;
    let id = run.id.clone();
    let (feed, _) = app.runs.feed(&id)?;
    spec.window_sink = app
        .metrics_for("produce", &spec.topic, &id)
        .and(feed.sink());
    let stop = run.stop.clone();
    app.runs.spawn(run, async move {
        let job =
            kbench_bench::produce::run_job(&spec, cluster.clone(), embedded, stop, live).await;
        if embedded {
            forget_topic(&cluster, &spec.topic).await;
        }
        match job {
            Ok(outcome) => Outcome {
                result: Some(serde_json::to_value(&outcome.document).unwrap_or(Value::Null)),
                ..Outcome::default()
            },
            Err(e) => Outcome::failed(start_error(e, "bootstrap_servers", &bootstrap)),
        }
    });
    Ok(id)
}

/// Start a consume run (an agent's consume segment): the same job as `kbench consume`. Answered at
/// once; the segment waits for its barrier.
pub async fn start_consume(
    app: &Arc<App>,
    config: Value,
    mut spec: kbench_bench::consume::ConsumeSpec,
    reach: Reach,
) -> Result<String, ApiError> {
    app.runs.ensure_idle()?;
    let own = reach.bootstrap.is_some();
    let (servers, embedded) = app.bootstrap(reach.bootstrap).await?;
    let bootstrap = servers.join(",");
    let cluster = cluster_for(app, servers, own, embedded, reach.client, reach.pins);
    let live = Arc::new(ConsumeLive::default());
    let run = app
        .runs
        .register("consume", Api::V1, config, Live::Consume(live.clone()))?;
    let id = run.id.clone();
    let (feed, _) = app.runs.feed(&id)?;
    spec.window_sink = app
        .metrics_for("consume", &spec.topic, &id)
        .and(feed.sink());
    let stop = run.stop.clone();
    app.runs.spawn(run, async move {
        let job =
            kbench_bench::consume::run_consume_job(&spec, cluster, embedded, stop, live).await;
        match job {
            Ok(outcome) => Outcome {
                result: Some(serde_json::to_value(&outcome.document).unwrap_or(Value::Null)),
                ..Outcome::default()
            },
            Err(e) => Outcome::failed(start_error(e, "bootstrap_servers", &bootstrap)),
        }
    });
    Ok(id)
}

/// Start an agent's share of an OMB workload against `cluster` (the driver's connection settings,
/// the segment's bootstrap and pins). Answered at once: its consumers join, then it waits for the
/// start instant its coordinator gives (`…/go`).
pub async fn start_omb(
    app: &Arc<App>,
    config: Value,
    mut spec: kbench_bench::omb::OmbSpec,
    mut cluster: ClusterConfig,
) -> Result<String, ApiError> {
    app.runs.ensure_idle()?;
    cluster.client_id = AGENT_CLIENT_ID.into();
    let bootstrap = cluster.bootstrap.join(",");
    let live = Arc::new(kbench_bench::omb::OmbLive::default());
    let run = app
        .runs
        .register("omb", Api::V1, config, Live::Omb(live.clone()))?;
    let id = run.id.clone();
    let (feed, _) = app.runs.feed(&id)?;
    spec.window_sink = app
        .metrics_for("omb", &spec.topic_prefix, &id)
        .and(feed.sink());
    let stop = run.stop.clone();
    app.runs.spawn(run, async move {
        let target = Target::of(&cluster, false);
        let job = kbench_bench::omb::run_omb(
            &spec,
            cluster,
            stop,
            live,
            |p| tracing::debug!(at_s = p.at_s, rate = p.publish_rate, "omb period"),
            |n| tracing::info!("omb: {n}"),
        )
        .await;
        match job {
            Ok(run) => {
                let doc = kbench_bench::omb::report::kbench_result(&spec, &run, target, "segment");
                Outcome {
                    result: Some(serde_json::to_value(&doc).unwrap_or(Value::Null)),
                    ..Outcome::default()
                }
            }
            Err(e) => Outcome::failed(start_error(e, "bootstrap_servers", &bootstrap)),
        }
    });
    Ok(id)
}
