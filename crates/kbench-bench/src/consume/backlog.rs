//! The producers a consume run uses beside its reading: the fill that gives an empty topic a
//! backlog before the measured read (unmeasured), and the load produced while a backlog drains
//! (`--produce-rate`), with what it did in the result's `backlog` block.

use std::sync::Arc;
use std::time::Duration;

use kbench_client::ClusterConfig;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::BenchError;
use crate::measure::LatencySummary;
use crate::produce::phase::Saturation;
use crate::produce::{ProduceRun, ProduceSpec};
use crate::stop::Stop;

/// Produce `spec` (its `num_records`) to the topic before the read, unmeasured: every record must be
/// acknowledged.
pub async fn fill(
    spec: &ProduceSpec,
    cluster: ClusterConfig,
    embedded: bool,
) -> Result<(), BenchError> {
    let outcome =
        crate::produce::run_job(spec, cluster, embedded, Stop::new(), Arc::new(())).await?;
    if outcome.run.records_failed > 0 {
        return Err(BenchError::Run(format!(
            "{} of {} records failed",
            outcome.run.records_failed, outcome.run.records_sent
        )));
    }
    Ok(())
}

/// Start producing `spec` (throttled, unbounded) beside a drain, on connections of its own, until
/// `finish` (as at the end of a duration) or `stop`. The topic must exist.
pub async fn produce_beside(
    spec: ProduceSpec,
    cluster: ClusterConfig,
    stop: Stop,
    finish: CancellationToken,
) -> Result<JoinHandle<ProduceRun>, BenchError> {
    let bootstrap = cluster.bootstrap.join(",");
    let c = kbench_client::Cluster::connect(cluster)
        .await
        .map_err(|e| BenchError::connect(&bootstrap, e))?;
    let (_, layout) = c
        .metadata(&spec.topic)
        .await
        .map_err(|e| BenchError::topic(&spec.topic, e))?;
    if layout.partitions.is_empty() {
        return Err(BenchError::Run(format!(
            "topic {} does not exist (use --produce-first to make a backlog)",
            spec.topic
        )));
    }
    Ok(tokio::spawn(async move {
        let c = Arc::new(c);
        let run = crate::produce::phase::run_produce_until(
            c.clone(),
            layout,
            &spec,
            stop,
            |_| {},
            finish,
        )
        .await;
        c.close(Duration::from_secs(2)).await;
        run
    }))
}

/// A drained backlog and the load produced beside it (the result's `backlog`).
#[derive(Debug, Clone, Serialize)]
pub struct BacklogReport {
    pub records: u64,
    pub drain_s: f64,
    pub drain_records_per_sec: f64,
    pub produce_rate: f64,
    pub produced: Produced,
}

/// What the producer beside the drain did.
#[derive(Debug, Clone, Serialize)]
pub struct Produced {
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    pub records_per_sec: f64,
    pub latency: LatencySummary,
    pub publish_delay: LatencySummary,
    pub saturation: Saturation,
    pub errors: std::collections::BTreeMap<String, u64>,
}

impl BacklogReport {
    /// `records` read in `drain` while `produced` ran at `rate` records/s.
    pub fn of(records: u64, drain: Duration, rate: f64, produced: &ProduceRun) -> BacklogReport {
        let secs = drain.as_secs_f64().max(1e-9);
        BacklogReport {
            records,
            drain_s: secs,
            drain_records_per_sec: records as f64 / secs,
            produce_rate: rate,
            produced: Produced {
                records_sent: produced.records_sent,
                records_acked: produced.records_acked,
                records_failed: produced.records_failed,
                records_per_sec: produced.records_acked as f64
                    / produced.elapsed.as_secs_f64().max(1e-9),
                latency: LatencySummary::of(&produced.latency),
                publish_delay: LatencySummary::of(&produced.publish_delay),
                saturation: produced.saturation.clone(),
                errors: produced.errors.clone(),
            },
        }
    }

    /// The line the CLI prints.
    pub fn line(&self) -> String {
        let p = &self.produced;
        format!(
            "kbench: backlog of {} records drained in {:.2} s ({:.1} records/s) while producing {} records at {:.1} of {} records/s (p99 {:.2} ms, {} failed)",
            self.records,
            self.drain_s,
            self.drain_records_per_sec,
            p.records_acked,
            p.records_per_sec,
            self.produce_rate,
            p.latency.p99 as f64 / 1000.0,
            p.records_failed
        )
    }
}
