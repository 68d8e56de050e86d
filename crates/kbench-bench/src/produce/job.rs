//! A produce run from start to result, for every front end: connect (bounded), check the versions
//! the run needs (and the compression's Produce floor, KIP-110), ensure the topic, run the measured
//! phase `repetitions` times, close gracefully (acks=0 requests have no other confirmation), pool the
//! repetitions and build the result document. Progress goes to a [`ProduceObserver`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kbench_client::{Cluster, ClusterConfig, TopicLayout};
use kbench_wire::{ApiKey, api_name};
use tokio_util::sync::CancellationToken;

use crate::error::{BenchError, SpecError};
use crate::produce::{IntervalReport, ProduceRun, ProduceSpec, run_produce};
use crate::result::{ResultDocument, Target};
use crate::stop::Stop;

/// Told what a produce job does as it goes. Every method has a default that does nothing.
pub trait ProduceObserver: Send + Sync + 'static {
    /// A progress window (kafka-producer-perf-test's periodic line).
    fn interval(&self, window: &IntervalReport) {
        let _ = window;
    }
    /// Repetition `index` (from 0) of `of` starts.
    fn repetition(&self, index: usize, of: usize) {
        let _ = (index, of);
    }
    /// A repetition ended.
    fn finished(&self, run: &ProduceRun) {
        let _ = run;
    }
    /// Every repetition ended; the topic is being read back (`--verify`).
    fn verifying(&self) {}
    /// Something the user should know that changes no figure (a setting the cluster overrode).
    fn warning(&self, text: &str) {
        let _ = text;
    }
}

impl ProduceObserver for () {}

/// What a produce job leaves: each repetition, their pool, and the result document.
#[derive(Debug)]
pub struct ProduceOutcome {
    pub runs: Vec<ProduceRun>,
    pub run: ProduceRun,
    pub document: ResultDocument,
}

/// Connect to `cluster`, or until `cancel`: every job's first step. Each bootstrap address is
/// given its connection setup timeout (`socket.connection.setup.timeout.ms`: TCP, TLS, ApiVersions,
/// SASL) before the next is tried; the whole walk is bounded by that many timeouts, plus 2 s for
/// the answers after the setup.
pub(crate) async fn connect_bounded(
    cluster: ClusterConfig,
    cancel: &CancellationToken,
) -> Result<Cluster, BenchError> {
    let bootstrap = cluster.bootstrap.join(",");
    let addresses = cluster.bootstrap.len().max(1) as u32;
    let setup = cluster.connect_timeout;
    let budget = setup * addresses + Duration::from_secs(2);
    let connected = tokio::select! {
        c = tokio::time::timeout(budget, Cluster::connect(cluster)) => c,
        _ = cancel.cancelled() => return Err(BenchError::Run("stopped before the run began".into())),
    };
    connected
        .map_err(|_| BenchError::Connect {
            bootstrap: bootstrap.clone(),
            reason: format!(
                "no answer within {} ms (socket.connection.setup.timeout.ms {} ms for each of {addresses} address(es))",
                budget.as_millis(),
                setup.as_millis()
            ),
        })?
        .map_err(|e| BenchError::connect(&bootstrap, e))
}

/// Run `spec` against `cluster`. `cancel` stops the measured phase at once (records in flight count
/// failed with `reason`'s text); `embedded` says, in the result, whether kbench started the broker.
pub async fn run_job<O: ProduceObserver>(
    spec: &ProduceSpec,
    cluster: ClusterConfig,
    embedded: bool,
    stop: Stop,
    observer: Arc<O>,
) -> Result<ProduceOutcome, BenchError> {
    let cancel = stop.token().clone();
    spec.validate()?;
    let bootstrap = cluster.bootstrap.join(",");
    let pins = cluster.pins.clone();
    let mut settings = spec.settings_json(&cluster);
    let cluster = connect_bounded(spec.connection(cluster), &cancel).await?;
    check_apis(spec, &cluster)?;
    let topic = ensure_topic(spec, &cluster, observer.as_ref(), &mut settings).await?;
    let cluster = Arc::new(cluster);
    // Where the read-back starts: taken before any agent of a distributed run may write (before
    // the barrier), so that every agent reads every agent's records.
    let verify_from = verify_start(spec, &cluster, &topic).await?;
    // A distributed segment: connected and ready, every agent starts at the one instant.
    if let Some(at) = spec.start_at_us
        && !crate::clock::sleep_until_wall(at, &cancel).await
    {
        cluster.close(Duration::from_secs(1)).await;
        return Err(BenchError::Run("stopped before the barrier start".into()));
    }
    let runs = repetitions(spec, &cluster, &topic, &stop, &observer).await;
    let run =
        ProduceRun::pooled(&runs).ok_or_else(|| BenchError::Run("no repetition ran".into()))?;
    let verification = match (&verify_from, &run.written) {
        (Some(from), Some(written)) => {
            observer.verifying();
            Some(read_back(spec, &cluster, &topic, from, written).await)
        }
        _ => None,
    };
    // Let the broker read everything written (acks=0 requests have no other confirmation).
    cluster.close(Duration::from_secs(5)).await;
    let negotiated: BTreeMap<String, i16> = cluster.negotiated().named().collect();
    let pinned: BTreeMap<String, i16> = pins.iter().map(|(a, v)| (api_name(a), v)).collect();
    let document = ResultDocument::produce(
        &run,
        &runs,
        Target {
            bootstrap_servers: bootstrap,
            ..Target::of(cluster.config(), embedded)
        },
        settings,
        negotiated,
        pinned,
        spec.seed,
    );
    let intervals = if spec.window_histograms {
        crate::timeline::with_histograms(document.intervals, &run.timeline)
    } else {
        document.intervals
    };
    let document = ResultDocument {
        verification,
        intervals,
        ..document
    };
    Ok(ProduceOutcome {
        runs,
        run,
        document,
    })
}

/// Name, before any load, a broker without an API the run needs: Metadata and Produce, the
/// transaction APIs or InitProducerId, and the Produce version the compression needs (KIP-110).
fn check_apis(spec: &ProduceSpec, cluster: &Cluster) -> Result<(), BenchError> {
    cluster.check_versions(&[ApiKey::Metadata, ApiKey::Produce])?;
    if spec.producer.transactional_id.is_some() {
        // transactional.id: a broker without the transaction APIs is named before any load.
        cluster
            .check_versions(&[
                ApiKey::FindCoordinator,
                ApiKey::InitProducerId,
                ApiKey::AddPartitionsToTxn,
                ApiKey::EndTxn,
            ])
            .map_err(|e| SpecError::new("transactional_id", format!("{e}")))?;
    } else if spec.producer.idempotent() {
        // enable.idempotence=true: a broker without InitProducerId is named before any load.
        cluster
            .check_versions(&[ApiKey::InitProducerId])
            .map_err(|e| SpecError::new("enable_idempotence", format!("{e}")))?;
    }
    if let Some(v) = cluster.negotiated().get(ApiKey::Produce)
        && v < spec.producer.compression.min_produce_version()
    {
        return Err(SpecError::new(
            "compression",
            format!(
                "{} needs Produce v{} or later (KIP-110), but Produce v{v} is in use",
                spec.producer.compression.name(),
                spec.producer.compression.min_produce_version()
            ),
        )
        .into());
    }
    Ok(())
}

/// The run's topic, created if it does not exist; `--partition` must be one of its partitions. An
/// existing topic keeps its partitions: the warning says so, and `settings` record the real count.
async fn ensure_topic<O: ProduceObserver>(
    spec: &ProduceSpec,
    cluster: &Cluster,
    observer: &O,
    settings: &mut serde_json::Value,
) -> Result<TopicLayout, BenchError> {
    let topic = cluster
        .ensure_topic_with(
            &spec.topic,
            spec.partitions,
            spec.replication_factor,
            &spec.topic_configs,
        )
        .await
        .map_err(|e| BenchError::topic(&spec.topic, e))?;
    if let Some(p) = spec.partition
        && !topic.partitions.iter().any(|l| l.partition == p)
    {
        return Err(SpecError::new(
            "partition",
            format!(
                "{p} is not a partition of topic {} (it has 0..{})",
                spec.topic,
                topic.partitions.len().saturating_sub(1)
            ),
        )
        .into());
    }
    // An existing topic keeps its partitions: the result records the real count.
    let partitions = topic.partitions.len();
    if partitions != spec.partitions as usize {
        observer.warning(&format!(
            "topic {} has {partitions} partition{}; --partitions {} applies only to a topic kbench creates (the result records {partitions})",
            spec.topic,
            if partitions == 1 { "" } else { "s" },
            spec.partitions
        ));
        if let Some(map) = settings.as_object_mut() {
            map.insert("partitions".into(), serde_json::json!(partitions));
            map.insert(
                "partitions_requested".into(),
                serde_json::json!(spec.partitions),
            );
        }
    }
    tracing::debug!(topic = %spec.topic, partitions, "produce job ready");
    Ok(topic)
}

/// With `--verify`: where the run's records begin, per partition (read back from there).
async fn verify_start(
    spec: &ProduceSpec,
    cluster: &Cluster,
    topic: &TopicLayout,
) -> Result<Option<BTreeMap<i32, i64>>, BenchError> {
    if !spec.verify {
        return Ok(None);
    }
    let partitions: Vec<i32> = match spec.partition {
        Some(p) => vec![p],
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let from = cluster
        .latest_offsets(topic, &partitions)
        .await
        .map_err(|e| BenchError::Run(format!("--verify: reading the start offsets: {e}")))?;
    Ok(Some(from))
}

/// The measured phase `spec.repetitions` times, each told to `observer`; a repetition that was
/// stopped is the last.
async fn repetitions<O: ProduceObserver>(
    spec: &ProduceSpec,
    cluster: &Arc<Cluster>,
    topic: &TopicLayout,
    stop: &Stop,
    observer: &Arc<O>,
) -> Vec<ProduceRun> {
    let mut runs = Vec::with_capacity(spec.repetitions);
    for i in 0..spec.repetitions {
        observer.repetition(i, spec.repetitions);
        let watching = observer.clone();
        let run = run_produce(
            cluster.clone(),
            topic.clone(),
            spec,
            stop.clone(),
            move |w| watching.interval(w),
        )
        .await;
        observer.finished(&run);
        let ended = run.aborted.is_some();
        runs.push(run);
        if ended {
            break;
        }
    }
    runs
}

/// `--verify`: the topic read back from `from`, against what the broker acknowledged.
async fn read_back(
    spec: &ProduceSpec,
    cluster: &Arc<Cluster>,
    topic: &TopicLayout,
    from: &BTreeMap<i32, i64>,
    written: &crate::verify::Written,
) -> crate::verify::VerifyReport {
    // The layout afresh: a broker restarted meanwhile has the topic under a new id.
    let layout = match cluster.metadata(&spec.topic).await {
        Ok((_, layout)) => layout,
        Err(e) => {
            tracing::warn!("--verify: metadata for {}: {e}", spec.topic);
            topic.clone()
        }
    };
    crate::verify::read_back(cluster, &layout, from, written).await
}
