//! `--include REGEX` matching several topics (kafka-consumer-perf-test's `--include`: one consumer
//! subscribed to a pattern). kbench's consumer engine and its group member read one topic each,
//! so each matched topic is read by members of its own — one, or `--consumers N` — in the run's
//! one group (a group's members may subscribe to different topics; the coordinator, or kbench's
//! leader, gives each its topic's partitions), over connections of their own, all at once. What
//! one consumer shares across its topics, they share: the record target (`--num-records` counts
//! every topic's records), the stop, the progress lines. The run ends when the target is read or
//! when no topic brought a record for `--timeout` (each topic's reading ends when it has been idle
//! that long, the run when every one has). The figures are pooled; each topic's own (its
//! partitions, its members, its verification) are in the document's `topics`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kbench_client::{Cluster, TopicLayout};
use serde::{Deserialize, Serialize};

use super::group::GroupReport;
use super::{ConsumeObserver, ConsumeRun, ConsumeSpec, ConsumeWindow, PartitionSpan};
use crate::error::BenchError;
use crate::stop::Stop;

/// One topic's part of a run over several (`topics` in the result document).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TopicPart {
    pub records_consumed: u64,
    pub bytes_consumed: u64,
    pub offsets_skipped: u64,
    /// No record of this topic came for `--timeout` (its reading ended then).
    pub timed_out: bool,
    pub partitions: BTreeMap<i32, PartitionSpan>,
    /// With `--consumers N`: this topic's members and rebalances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupReport>,
    /// With `--verify`: this topic's records' stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verify::VerifyReport>,
    /// Why this topic read nothing: the run was stopped before its members had joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A topic's reading's observer: counts the bytes read for the run's progress windows (the
/// records are the readings' [`super::SharedCount`]), and passes on to the run's observer all but
/// the progress windows (the run's windows are every topic's, made below).
struct Part<O> {
    inner: Arc<O>,
    bytes: Arc<AtomicU64>,
}

impl<O: ConsumeObserver> ConsumeObserver for Part<O> {
    fn interval(&self, _: &ConsumeWindow) {}

    fn joined(&self) {
        self.inner.joined();
    }

    fn paused(&self) -> bool {
        self.inner.paused()
    }

    fn fetched(&self, records: u64, bytes: u64, end_to_end_us: &[u64]) {
        self.inner.fetched(records, bytes, end_to_end_us);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Read `layouts` (two or more topics) as described above; `first` is the run's cluster (the
/// first topic's readers use it, every other topic's connect their own). The pooled run and each
/// topic's part.
pub(crate) async fn run_topics<O: ConsumeObserver>(
    first: Arc<Cluster>,
    layouts: Vec<TopicLayout>,
    spec: &ConsumeSpec,
    stop: Stop,
    observer: Arc<O>,
) -> Result<(ConsumeRun, BTreeMap<String, TopicPart>), BenchError> {
    if let Some(f) = spec.member_faults.first() {
        return Err(crate::error::SpecError::new(
            "fault",
            format!(
                "{}: group faults act on one topic's members; --include matched {} topics ({}): give --topic",
                f.spec,
                layouts.len(),
                names(&layouts)
            ),
        )
        .into());
    }
    let cpu_start = crate::measure::CpuTime::now();
    let started_wall = std::time::SystemTime::now();
    // Every topic's connections before any reading starts: a failure here leaves nothing running.
    let mut clusters = vec![first.clone()];
    for layout in &layouts[1..] {
        let connected = async {
            let cluster = Cluster::connect(first.config().clone()).await?;
            cluster.metadata(&layout.name).await?;
            Ok::<_, kbench_client::ClientError>(Arc::new(cluster))
        }
        .await;
        match connected {
            Ok(c) => clusters.push(c),
            Err(e) => {
                for c in &clusters[1..] {
                    c.close(std::time::Duration::from_secs(2)).await;
                }
                return Err(BenchError::Run(format!(
                    "--include: topic {}'s connections: {e}",
                    layout.name
                )));
            }
        }
    }
    let count = Arc::new(super::SharedCount::new(
        layouts.len() * spec.consumers as usize,
    ));
    let bytes = Arc::new(AtomicU64::new(0));
    // Every topic's members are in the one group: they leave it leader first.
    let leave_order = super::SharedLeave(Some(Arc::default()));
    // The topics' readings' one stop: the run's (with its reason), or one topic's failure.
    let inner = Stop::new();
    let (outer, linked_inner) = (stop.clone(), inner.clone());
    let linked = tokio::spawn(async move {
        outer.stopped().await;
        linked_inner.stop(outer.reason().unwrap_or_else(|| "stopped".into()));
    });
    let part = Arc::new(Part {
        inner: observer.clone(),
        bytes: bytes.clone(),
    });
    let mut tasks = Vec::new();
    for (layout, cluster) in layouts.iter().cloned().zip(clusters.iter().cloned()) {
        let mut consumer = spec.consumer.clone();
        // One static member per topic: each its own `group.instance.id`.
        if let Some(id) = &consumer.group_instance_id {
            consumer.group_instance_id = Some(format!("{id}-{}", layout.name));
        }
        let topic_spec = ConsumeSpec {
            topic: layout.name.clone(),
            consumer,
            include: None,
            // The target is the run's, counted across topics.
            shared_total: super::SharedTotal(Some(count.clone())),
            leave_order: leave_order.clone(),
            ..spec.clone()
        };
        let (stop, part) = (inner.clone(), part.clone());
        let name = layout.name.clone();
        tasks.push((
            name.clone(),
            tokio::spawn(async move {
                let out = if topic_spec.consumers > 1 {
                    let spec = Arc::new(topic_spec);
                    super::group::run_group(cluster, layout, spec, stop.clone(), part)
                        .await
                        .map(|(run, report)| (run, Some(report)))
                } else {
                    super::phase::run_consume(cluster, layout, &topic_spec, stop.clone(), part)
                        .await
                        .map(|run| (run, None))
                };
                // A failure of its own (not the run's end met while joining) stops the other
                // topics' readings at once.
                let own = out.is_err() && !stop.is_stopped();
                if own {
                    stop.stop(format!("topic {name}'s reading failed"));
                }
                (out, own)
            }),
        ));
    }
    let counted = (count.clone(), bytes.clone());
    let reporter = tokio::spawn(super::group::report_windows(
        move || {
            (
                counted.0.records.load(Ordering::Relaxed),
                counted.1.load(Ordering::Relaxed),
            )
        },
        spec.reporting_interval,
        observer,
    ));
    let mut runs = Vec::new();
    let mut parts = BTreeMap::new();
    let mut failure = None;
    let mut ended_early = None;
    for (name, task) in tasks {
        let (out, own) = match task.await {
            Ok(out) => out,
            Err(e) => {
                inner.stop(format!("topic {name}'s reading failed"));
                (
                    Err(BenchError::Run(format!("topic {name}'s reading: {e}"))),
                    true,
                )
            }
        };
        match out {
            Ok((mut run, group)) => {
                let partitions = std::mem::take(&mut run.partitions);
                parts.insert(
                    name,
                    TopicPart {
                        records_consumed: run.records,
                        bytes_consumed: run.bytes,
                        offsets_skipped: partitions.values().map(|p| p.skipped).sum(),
                        timed_out: run.timed_out,
                        partitions,
                        group,
                        verification: run.verification.take(),
                        error: None,
                    },
                );
                runs.push(run);
            }
            // The run ended while this topic's members were joining: it read nothing.
            Err(e) if !own => {
                parts.insert(
                    name,
                    TopicPart {
                        error: Some(e.to_string()),
                        ..TopicPart::default()
                    },
                );
                if ended_early.is_none() {
                    ended_early = Some(e);
                }
            }
            // One topic's failure is the run's (the others were stopped by it, and awaited).
            Err(e) => {
                if failure.is_none() {
                    failure = Some(e);
                }
            }
        }
    }
    reporter.abort();
    linked.abort();
    for c in &clusters[1..] {
        c.close(std::time::Duration::from_secs(2)).await;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let reached = count.records.load(Ordering::SeqCst) >= spec.messages;
    let every_idle = runs.iter().all(|r| r.timed_out);
    let Some(mut run) = super::group::pooled(runs, started_wall, spec.timeline_interval) else {
        // Stopped before any topic's members had joined: as one topic's run stopped then.
        return Err(ended_early.unwrap_or_else(|| BenchError::Run("no topic was read".into())));
    };
    run.cpu = crate::measure::CpuTime::now().since(cpu_start);
    run.timed_out = !reached && every_idle;
    run.aborted = stop.reason().or(run.aborted);
    let verified: Vec<(&str, &crate::verify::VerifyReport)> = parts
        .iter()
        .filter_map(|(t, p)| p.verification.as_ref().map(|v| (t.as_str(), v)))
        .collect();
    run.verification = crate::verify::VerifyReport::of_topics(&verified);
    Ok((run, parts))
}

/// The topics' names, for an error.
fn names(layouts: &[TopicLayout]) -> String {
    layouts
        .iter()
        .map(|l| l.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
