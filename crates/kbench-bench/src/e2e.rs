//! The end-to-end workload: N producers and one consumer in a fresh consumer group, in one process.
//!
//! Each producer, on its own connection, sends a batch of a random number of records (each of a random
//! size) after a random interval, all drawn from a seeded PRNG within inclusive ranges. Every record
//! carries its identity in its key (run tag, producer, sequence: 16 bytes) and its send time in a
//! header (`kbench-sent-us`: µs on this process's monotonic clock since the run's epoch). The consumer
//! joins its group and learns its start offsets (latest) *before* any producer starts, so no record of
//! the run can fall before its position; it reads with Fetch, commits synchronously after every poll
//! or asynchronously every interval, heartbeats, and leaves the group at the end.
//!
//! On stop, producers stop sending and every request in flight resolves (acknowledged or failed);
//! then the consumer drains until it has every acknowledged record or the drain time runs out. Lost
//! records (acknowledged, never consumed) and duplicates (consumed more than once, by record id) are
//! counted, never hidden. Counts are records, not requests: produced = acknowledged + failed.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hdrhistogram::Histogram;
use kbench_client::group::{GroupConfig, GroupMember, Membership, send_commit};
use kbench_client::{
    ClientError, Cluster, ClusterConfig, ProduceOutcome, ProducerConfig, TopicLayout,
};
use kbench_wire::batch::{RecordBatchBuilder, RecordHeader, now_ms};
use kbench_wire::{BatchDecoder, Compression, Negotiated};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::measure::{CpuTime, latency_histogram, peak_rss_kib};

/// The header that carries a record's send time (8 bytes, big-endian µs since the run's epoch).
pub const SENT_HEADER: &[u8] = b"kbench-sent-us";
/// Length of the record id in the key: run tag (u32), producer (u32), sequence (u64), big-endian.
pub const RECORD_ID_LEN: usize = 16;

/// An inclusive range drawn from uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Span<T> {
    pub min: T,
    pub max: T,
}

impl<T: Copy + PartialOrd + rand::distr::uniform::SampleUniform> Span<T> {
    pub fn fixed(v: T) -> Span<T> {
        Span { min: v, max: v }
    }

    pub(crate) fn draw(&self, rng: &mut SmallRng) -> T {
        if self.min >= self.max {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        }
    }
}

/// A producer's rhythm: a wait drawn from the batch-interval range before each batch, a record count
/// and record sizes from theirs, all from one seeded PRNG per producer, and a cap on requests in
/// flight. Falling behind by more than an interval (a slow broker) resets the schedule instead of
/// bursting to catch up.
pub(crate) struct Pacer {
    rng: SmallRng,
    next: tokio::time::Instant,
    interval: Span<u64>,
    count: Span<usize>,
    size: Span<usize>,
    in_flight: Arc<Semaphore>,
}

impl Pacer {
    pub(crate) fn new(spec: &E2eSpec, producer: u32) -> Pacer {
        Pacer {
            rng: SmallRng::seed_from_u64(spec.seed.wrapping_add(u64::from(producer) * 0x9E37_79B9)),
            next: tokio::time::Instant::now(),
            interval: spec.batch_interval_ms,
            count: spec.messages_per_batch,
            size: spec.payload_size,
            in_flight: Arc::new(Semaphore::new(spec.max_in_flight.max(1))),
        }
    }

    /// `len` random uppercase letters (values are slices of it), as kafka-producer-perf-test makes them.
    pub(crate) fn payload(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| self.rng.random_range(b'A'..=b'Z'))
            .collect()
    }

    /// Wait for the next batch's turn and a free in-flight slot; the slot and the record count, or
    /// `None` once stopped.
    pub(crate) async fn next_batch(
        &mut self,
        stop: &CancellationToken,
    ) -> Option<(tokio::sync::OwnedSemaphorePermit, usize)> {
        self.next += Duration::from_millis(self.interval.draw(&mut self.rng));
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep_until(self.next) => {}
        }
        let now = tokio::time::Instant::now();
        if now > self.next + Duration::from_millis(self.interval.max.max(1)) {
            self.next = now;
        }
        let permit = self.in_flight.clone().acquire_owned().await.ok()?;
        Some((permit, self.count.draw(&mut self.rng).max(1)))
    }

    /// The next record's value size.
    pub(crate) fn size(&mut self) -> usize {
        self.size.draw(&mut self.rng)
    }
}

/// When the consumer commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// After every poll that returned records, awaited before the next poll.
    Sync,
    /// Every interval, without waiting for the answer before polling again.
    Interval(Duration),
}

impl CommitMode {
    pub fn describe(&self) -> String {
        match self {
            CommitMode::Sync => "sync".into(),
            CommitMode::Interval(d) => format!("async every {} ms", d.as_millis()),
        }
    }
}

/// Which sides of the pipe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum E2eMode {
    ConsumerAndProducers,
    Producers,
    Consumer,
}

impl E2eMode {
    pub fn has_consumer(self) -> bool {
        self != E2eMode::Producers
    }
    pub fn has_producers(self) -> bool {
        self != E2eMode::Consumer
    }
}

/// An e2e run's settings.
#[derive(Debug, Clone)]
pub struct E2eSpec {
    pub topic: String,
    /// Partitions and replication factor, used when kbench has to create the topic.
    pub partitions: i32,
    pub replication_factor: i16,
    pub mode: E2eMode,
    pub producers: usize,
    /// Wait before each batch, ms.
    pub batch_interval_ms: Span<u64>,
    /// Each record's value size, bytes.
    pub payload_size: Span<usize>,
    /// Records per produce request.
    pub messages_per_batch: Span<usize>,
    pub compression: Compression,
    pub producer: ProducerConfig,
    /// Produce requests in flight per producer.
    pub max_in_flight: usize,
    pub group_id: String,
    /// The consumer's client id (the member id is the coordinator's to give).
    pub consumer_id: String,
    pub commit: CommitMode,
    /// Fetch max wait (how long a poll may wait for data).
    pub consume_wait: Duration,
    /// Fetch max bytes.
    pub consume_max_bytes: i32,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// Load phase length; `None` runs until stopped.
    pub duration: Option<Duration>,
    /// Longest wait, after the producers stop, for the consumer to catch up.
    pub drain: Duration,
    /// Record latency histograms (counts are always kept).
    pub gather_latencies: bool,
    pub seed: u64,
    /// Through a Kafka REST Proxy instead of the Kafka protocol.
    pub rest: Option<crate::rest_e2e::RestSpec>,
}

/// Counters and histograms of a run in progress, readable at any time (progress lines, the HTTP API).
pub struct E2eLive {
    pub produced: AtomicU64,
    pub acked: AtomicU64,
    pub failed: AtomicU64,
    /// Records of this run received by the consumer, duplicates included.
    pub consumed: AtomicU64,
    pub duplicates: AtomicU64,
    /// Records consumed that kbench did not produce in this run (or that carry no kbench id).
    pub foreign: AtomicU64,
    pub produce_requests: AtomicU64,
    pub fetches: AtomicU64,
    pub commits: AtomicU64,
    pub commit_failures: AtomicU64,
    pub heartbeats: AtomicU64,
    pub rejoins: AtomicU64,
    /// Fetch answers whose batches left a hole below later records: the consumer held its position
    /// at the hole and asked again (see [`readable_until`]).
    pub gaps_held: AtomicU64,
    /// Holes that stayed open for the whole hold and were passed over (re-read after the drain).
    pub gaps_skipped: AtomicU64,
    /// Records of this run never consumed in time but found on the broker when the missing offsets
    /// were read again after the drain.
    pub late: AtomicU64,
    pub producer_latency: Mutex<Histogram<u64>>,
    pub whole_trip: Mutex<Histogram<u64>>,
    /// Per Fetch: sent → response in hand (the broker's share of a poll, waiting included).
    pub fetch_duration: Mutex<Histogram<u64>>,
    /// Per poll: response in hand → its records decoded and counted (kbench's own share).
    pub consumer_processing: Mutex<Histogram<u64>>,
    /// REST Proxy driver: 429 / 42901 answers (each backed off and retried).
    pub rest_throttled: AtomicU64,
    /// REST Proxy driver: 40403 answers (instance expired; recreated).
    pub rest_expired: AtomicU64,
    pub rest_instances: AtomicU64,
    /// REST Proxy driver: consumer instance creation (create + subscribe), µs.
    pub rest_instance_creation: Mutex<Histogram<u64>>,
    /// REST Proxy driver: µs from the first instance's creation to the first record (0: none yet).
    pub rest_first_record_us: AtomicU64,
    /// REST Proxy driver: records per GET that returned any.
    pub rest_records_per_get: Mutex<Histogram<u64>>,
    pub rest_empty_gets: AtomicU64,
    pub errors: Mutex<BTreeMap<String, u64>>,
    phase: Mutex<&'static str>,
    started: Mutex<Option<Instant>>,
}

impl Default for E2eLive {
    fn default() -> Self {
        E2eLive {
            produced: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            foreign: AtomicU64::new(0),
            produce_requests: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_failures: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            rejoins: AtomicU64::new(0),
            gaps_held: AtomicU64::new(0),
            gaps_skipped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            producer_latency: Mutex::new(latency_histogram()),
            whole_trip: Mutex::new(latency_histogram()),
            fetch_duration: Mutex::new(latency_histogram()),
            consumer_processing: Mutex::new(latency_histogram()),
            rest_throttled: AtomicU64::new(0),
            rest_expired: AtomicU64::new(0),
            rest_instances: AtomicU64::new(0),
            rest_instance_creation: Mutex::new(latency_histogram()),
            rest_first_record_us: AtomicU64::new(0),
            rest_records_per_get: Mutex::new(latency_histogram()),
            rest_empty_gets: AtomicU64::new(0),
            errors: Mutex::new(BTreeMap::new()),
            phase: Mutex::new("starting"),
            started: Mutex::new(None),
        }
    }
}

pub(crate) fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

pub(crate) fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// A consistent-enough copy of the live figures.
#[derive(Debug, Clone)]
pub struct E2eSnapshot {
    pub phase: &'static str,
    pub elapsed: Duration,
    pub produced: u64,
    pub acked: u64,
    pub failed: u64,
    pub consumed: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub commits: u64,
    pub producer_latency: Histogram<u64>,
    pub whole_trip: Histogram<u64>,
}

impl E2eLive {
    pub fn phase(&self) -> &'static str {
        *self.phase.lock().expect("phase lock")
    }

    pub(crate) fn set_phase(&self, phase: &'static str) {
        *self.phase.lock().expect("phase lock") = phase;
    }

    pub(crate) fn error(&self, message: String, records: u64) {
        *self
            .errors
            .lock()
            .expect("errors lock")
            .entry(message)
            .or_default() += records;
    }

    pub fn snapshot(&self) -> E2eSnapshot {
        E2eSnapshot {
            phase: self.phase(),
            elapsed: self
                .started
                .lock()
                .expect("started lock")
                .map_or(Duration::ZERO, |s| s.elapsed()),
            produced: get(&self.produced),
            acked: get(&self.acked),
            failed: get(&self.failed),
            consumed: get(&self.consumed),
            duplicates: get(&self.duplicates),
            foreign: get(&self.foreign),
            commits: get(&self.commits),
            producer_latency: self.producer_latency.lock().expect("latency lock").clone(),
            whole_trip: self.whole_trip.lock().expect("latency lock").clone(),
        }
    }

    /// The e2e progress line: cumulative counts, the last interval's rate, and percentiles so far.
    pub fn progress_line(&self, previous: Option<&E2eSnapshot>) -> (String, E2eSnapshot) {
        let now = self.snapshot();
        let (d_records, d_time) = match previous {
            Some(p) => (
                now.acked.saturating_sub(p.acked),
                now.elapsed.saturating_sub(p.elapsed),
            ),
            None => (now.acked, now.elapsed),
        };
        let rate = d_records as f64 / d_time.as_secs_f64().max(1e-9);
        let ms = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(q) as f64 / 1000.0
            }
        };
        let line = format!(
            "{} records produced, {} acked, {} failed, {} consumed, {:.1} records/sec, produce p50 {:.2} ms p99 {:.2} ms, whole trip p50 {:.2} ms p99 {:.2} ms.",
            now.produced,
            now.acked,
            now.failed,
            now.consumed,
            rate,
            ms(&now.producer_latency, 0.5),
            ms(&now.producer_latency, 0.99),
            ms(&now.whole_trip, 0.5),
            ms(&now.whole_trip, 0.99),
        );
        (line, now)
    }
}

/// What an e2e run did.
#[derive(Debug, Clone)]
pub struct E2eRun {
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// The load phase (producers running).
    pub elapsed: Duration,
    /// Time spent draining after the producers stopped.
    pub drain_elapsed: Duration,
    /// Whether the consumer caught up with every acknowledged record within the drain time.
    pub drained: bool,
    pub produced: u64,
    pub acked: u64,
    pub failed: u64,
    pub consumed: u64,
    pub duplicates: u64,
    /// Acknowledged and not on the broker: never consumed, and not found when the missing offsets
    /// were read again after the drain.
    pub lost: u64,
    /// Acknowledged and on the broker, but not consumed by the end of the drain (found by reading
    /// the missing offsets again).
    pub late: u64,
    pub gaps_held: u64,
    pub gaps_skipped: u64,
    /// Consumed although their request was reported failed (e.g. acknowledged after a time-out).
    pub unexpected: u64,
    pub foreign: u64,
    pub produce_requests: u64,
    pub fetches: u64,
    pub commits: u64,
    pub commit_failures: u64,
    pub heartbeats: u64,
    pub rejoins: u64,
    pub producer_latency: Histogram<u64>,
    pub whole_trip: Histogram<u64>,
    pub fetch_duration: Histogram<u64>,
    pub consumer_processing: Histogram<u64>,
    /// The REST Proxy driver's own figures (None for the native driver).
    pub rest: Option<RestFigures>,
    /// Which clock whole trip was measured on.
    pub clock: &'static str,
    pub group_id: String,
    pub member_id: Option<String>,
    pub assignment: Vec<i32>,
    pub negotiated: Negotiated,
    pub cpu: CpuTime,
    pub peak_rss_kib: u64,
    pub errors: BTreeMap<String, u64>,
    pub aborted: Option<String>,
}

/// What the REST Proxy driver measured beside the common figures.
#[derive(Debug, Clone)]
pub struct RestFigures {
    pub format: &'static str,
    pub api: &'static str,
    pub value_schema_id: Option<i64>,
    pub throttled: u64,
    pub instances_expired: u64,
    pub instances_created: u64,
    pub instance_creation: Histogram<u64>,
    pub time_to_first_record_us: Option<u64>,
    pub records_per_get: Histogram<u64>,
    pub empty_gets: u64,
}

/// The clock statement for a run.
pub fn clock_for(mode: E2eMode) -> &'static str {
    match mode {
        E2eMode::ConsumerAndProducers => {
            "monotonic: producers and consumer share this process; send time carried in the kbench-sent-us header"
        }
        E2eMode::Producers => "none: no consumer, no whole trip",
        E2eMode::Consumer => {
            "wall: record CreateTime (ms) to receipt on this host's clock; skew between hosts is not corrected"
        }
    }
}

/// Which records of which producers were seen: duplicates are counted by record id.
#[derive(Default)]
pub(crate) struct Seen {
    by_producer: HashMap<(u32, u32), Vec<u64>>,
}

impl Seen {
    /// Mark a record id; true when it was already marked.
    pub(crate) fn mark(&mut self, tag: u32, producer: u32, seq: u64) -> bool {
        let bits = self.by_producer.entry((tag, producer)).or_default();
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= bits.len() {
            bits.resize(word + 1, 0);
        }
        let seen = bits[word] & (1 << bit) != 0;
        bits[word] |= 1 << bit;
        seen
    }
}

fn record_id(key: Option<&[u8]>) -> Option<(u32, u32, u64)> {
    let k = key?;
    if k.len() != RECORD_ID_LEN {
        return None;
    }
    Some((
        u32::from_be_bytes(k[0..4].try_into().ok()?),
        u32::from_be_bytes(k[4..8].try_into().ok()?),
        u64::from_be_bytes(k[8..16].try_into().ok()?),
    ))
}

/// Run the e2e workload until `stop` is cancelled or `spec.duration` passes, then drain. Each
/// producer and the consumer gets its own connections, built from `cluster`; `live` is updated as the
/// run goes. Fails only when the run cannot start (no broker, no group); later errors are counted.
pub async fn run_e2e(
    spec: &E2eSpec,
    cluster: &ClusterConfig,
    live: Arc<E2eLive>,
    stop: CancellationToken,
) -> Result<E2eRun, ClientError> {
    if let Some(rest) = &spec.rest {
        return crate::rest_e2e::run(spec, rest, live, stop)
            .await
            .map_err(|e| ClientError::Other(e.to_string()));
    }
    let epoch = Instant::now();
    let run_tag: u32 = SmallRng::seed_from_u64(spec.seed ^ now_ms() as u64).random();
    let connect = |client_id: String| {
        let mut config = cluster.clone();
        config.client_id = client_id;
        config.max_in_flight = spec.max_in_flight.max(1);
        let topic = spec.topic.clone();
        async move {
            let c = Cluster::connect(config).await?;
            // Learn the brokers' addresses (and check the topic is known) on this connection set.
            c.metadata(&topic).await?;
            Ok::<_, ClientError>(Arc::new(c))
        }
    };
    let admin = connect(cluster.client_id.clone()).await?;
    let layout = admin
        .ensure_topic(&spec.topic, spec.partitions, spec.replication_factor)
        .await?;
    let mut negotiated = admin.negotiated();
    let mut clusters = vec![admin.clone()];

    // The consumer first: it has its partitions and positions before the first record is sent.
    let consume_stop = CancellationToken::new();
    let mut consumer = None;
    if spec.mode.has_consumer() {
        let c = connect(spec.consumer_id.clone()).await?;
        clusters.push(c.clone());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let consuming = consume(
                spec.clone(),
                c,
                layout.clone(),
                live.clone(),
                consume_stop.clone(),
                ready_tx,
                epoch,
                run_tag,
            );
            async move { consuming.await.map_err(|e| e.to_string()) }
        });
        consumer = Some(
            started_consumer(ready_rx, task)
                .await
                .map_err(ClientError::Other)?,
        );
    }

    let produce_stop = CancellationToken::new();
    let mut producers = JoinSet::new();
    if spec.mode.has_producers() {
        for idx in 0..spec.producers {
            let c = connect(format!("{}-producer-{idx}", cluster.client_id)).await?;
            clusters.push(c.clone());
            producers.spawn(produce(
                spec.clone(),
                idx as u32,
                c,
                layout.clone(),
                live.clone(),
                produce_stop.clone(),
                epoch,
                run_tag,
            ));
        }
    }
    let phases = drive(
        spec,
        &live,
        &stop,
        consumer,
        producers,
        produce_stop,
        consume_stop,
    )
    .await;
    for c in &clusters {
        negotiated.merge(&c.negotiated());
        c.close(Duration::from_secs(2)).await;
    }
    Ok(conclude(spec, &live, phases, negotiated))
}

/// A consumer task: what it hands back at the end, or why it failed.
pub(crate) type ConsumerTask = tokio::task::JoinHandle<Result<ConsumerDone, String>>;

/// Wait until a consumer task says it is ready (joined and positioned, before any record is sent);
/// its error when it ended first.
pub(crate) async fn started_consumer(
    ready: tokio::sync::oneshot::Receiver<()>,
    task: ConsumerTask,
) -> Result<ConsumerTask, String> {
    if ready.await.is_ok() {
        return Ok(task);
    }
    Err(match task.await {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => "the consumer stopped before it was ready".into(),
        Err(e) => format!("the consumer task failed: {e}"),
    })
}

/// What the load, drain and stop phases of a run left behind.
pub(crate) struct Phases {
    started_at: SystemTime,
    elapsed: Duration,
    drain_elapsed: Duration,
    drained: bool,
    member_id: Option<String>,
    assignment: Vec<i32>,
    aborted: Option<String>,
    cpu: CpuTime,
}

/// The shared middle of every e2e run, whatever the driver: run the load until the duration or a
/// stop, stop the producers and let every request resolve, drain, stop the consumer.
pub(crate) async fn drive(
    spec: &E2eSpec,
    live: &E2eLive,
    stop: &CancellationToken,
    mut consumer: Option<ConsumerTask>,
    mut producers: JoinSet<()>,
    produce_stop: CancellationToken,
    consume_stop: CancellationToken,
) -> Phases {
    let cpu_before = CpuTime::now();
    let started_at = SystemTime::now();
    let started = Instant::now();
    *live.started.lock().expect("started lock") = Some(started);
    live.set_phase("running");

    let mut aborted = None;
    let until_end = async {
        match spec.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until_end);
    loop {
        tokio::select! {
            _ = &mut until_end => break,
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if consumer.as_ref().is_some_and(|t| t.is_finished()) {
                    aborted = Some("the consumer stopped during the run".to_string());
                    break;
                }
            }
        }
    }
    produce_stop.cancel();
    while producers.join_next().await.is_some() {}
    let elapsed = started.elapsed();

    // Drain: until every acknowledged record was consumed, or the drain time is up.
    live.set_phase("draining");
    let drain_started = Instant::now();
    let mut drained = !spec.mode.has_producers() || !spec.mode.has_consumer();
    if consumer.is_some() && spec.mode.has_producers() {
        loop {
            if missing(live) == 0 {
                drained = true;
                break;
            }
            if drain_started.elapsed() >= spec.drain
                || consumer.as_ref().is_some_and(|t| t.is_finished())
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let drain_elapsed = drain_started.elapsed();
    consume_stop.cancel();
    let mut member_id = None;
    let mut assignment = Vec::new();
    if let Some(task) = consumer.take() {
        match task.await {
            Ok(Ok(done)) => {
                member_id = Some(done.member_id);
                assignment = done.assignment;
            }
            Ok(Err(e)) => aborted = Some(format!("the consumer failed: {e}")),
            Err(e) => aborted = aborted.or(Some(format!("the consumer task failed: {e}"))),
        }
    }
    Phases {
        started_at,
        elapsed,
        drain_elapsed,
        drained,
        member_id,
        assignment,
        aborted,
        cpu: CpuTime::now().since(cpu_before),
    }
}

/// The run's figures, from the live counters and the phases.
pub(crate) fn conclude(
    spec: &E2eSpec,
    live: &E2eLive,
    phases: Phases,
    negotiated: Negotiated,
) -> E2eRun {
    live.set_phase("finished");
    let acked = get(&live.acked);
    let consumed = get(&live.consumed);
    let duplicates = get(&live.duplicates);
    let unique = consumed.saturating_sub(duplicates);
    let late = get(&live.late);
    let (lost, unexpected) = if spec.mode == E2eMode::ConsumerAndProducers {
        (
            acked.saturating_sub(unique).saturating_sub(late),
            unique.saturating_sub(acked),
        )
    } else {
        (0, 0)
    };
    let h = |m: &Mutex<Histogram<u64>>| m.lock().expect("latency lock").clone();
    E2eRun {
        started_at: phases.started_at,
        ended_at: SystemTime::now(),
        elapsed: phases.elapsed,
        drain_elapsed: phases.drain_elapsed,
        drained: phases.drained,
        produced: get(&live.produced),
        acked,
        failed: get(&live.failed),
        consumed,
        duplicates,
        lost,
        late,
        gaps_held: get(&live.gaps_held),
        gaps_skipped: get(&live.gaps_skipped),
        unexpected,
        foreign: get(&live.foreign),
        produce_requests: get(&live.produce_requests),
        fetches: get(&live.fetches),
        commits: get(&live.commits),
        commit_failures: get(&live.commit_failures),
        heartbeats: get(&live.heartbeats),
        rejoins: get(&live.rejoins),
        producer_latency: h(&live.producer_latency),
        whole_trip: h(&live.whole_trip),
        fetch_duration: h(&live.fetch_duration),
        consumer_processing: h(&live.consumer_processing),
        rest: spec.rest.as_ref().map(|r| RestFigures {
            format: r.format.name(),
            api: r.api.name(),
            value_schema_id: r.value_schema_id,
            throttled: get(&live.rest_throttled),
            instances_expired: get(&live.rest_expired),
            instances_created: get(&live.rest_instances),
            instance_creation: h(&live.rest_instance_creation),
            time_to_first_record_us: match get(&live.rest_first_record_us) {
                0 => None,
                us => Some(us),
            },
            records_per_get: h(&live.rest_records_per_get),
            empty_gets: get(&live.rest_empty_gets),
        }),
        clock: if spec.rest.is_some() && spec.mode == E2eMode::ConsumerAndProducers {
            crate::rest_e2e::REST_CLOCK
        } else {
            clock_for(spec.mode)
        },
        group_id: spec.group_id.clone(),
        member_id: phases.member_id,
        assignment: phases.assignment,
        negotiated,
        cpu: phases.cpu,
        peak_rss_kib: peak_rss_kib(),
        errors: live.errors.lock().expect("errors lock").clone(),
        aborted: phases.aborted,
    }
}

/// One producer: batches at random intervals until stopped, then waits for its requests in flight.
#[allow(clippy::too_many_arguments)]
async fn produce(
    spec: E2eSpec,
    idx: u32,
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    epoch: Instant,
    run_tag: u32,
) {
    let mut pacer = Pacer::new(&spec, idx);
    let values = pacer.payload(spec.payload_size.max);
    let mut builder = RecordBatchBuilder::new(spec.compression);
    let mut requests = JoinSet::new();
    let partitions: Vec<i32> = layout.partitions.iter().map(|p| p.partition).collect();
    let layout = Arc::new(layout);
    let mut next_partition = idx as usize;
    let mut seq = 0u64;
    let mut key = [0u8; RECORD_ID_LEN];
    key[0..4].copy_from_slice(&run_tag.to_be_bytes());
    key[4..8].copy_from_slice(&idx.to_be_bytes());
    while let Some((permit, count)) = pacer.next_batch(&stop).await {
        let sent_us = epoch.elapsed().as_micros() as u64;
        let sent = sent_us.to_be_bytes();
        let header = [RecordHeader {
            key: SENT_HEADER,
            value: Some(&sent),
        }];
        builder.start_now();
        let timestamp = now_ms();
        for _ in 0..count {
            let size = pacer.size();
            key[8..16].copy_from_slice(&seq.to_be_bytes());
            seq += 1;
            builder.append(timestamp, Some(&key), Some(&values[..size]), &header);
        }
        let records = count as u64;
        add(&live.produced, records);
        let batch: Bytes = match builder.finish() {
            Ok(b) => b,
            Err(e) => {
                add(&live.failed, records);
                live.error(format!("compression failed: {e}"), records);
                continue;
            }
        };
        let partition = partitions[next_partition % partitions.len()];
        next_partition += 1;
        let cluster = cluster.clone();
        let layout = layout.clone();
        let live = live.clone();
        let config = spec.producer.clone();
        let gather = spec.gather_latencies;
        requests.spawn(async move {
            let t0 = Instant::now();
            let outcome = cluster
                .produce_batch(&config, &layout, partition, batch)
                .await;
            let took = t0.elapsed().as_micros() as u64;
            drop(permit);
            add(&live.produce_requests, 1);
            match outcome {
                ProduceOutcome::Acked { .. } => {
                    add(&live.acked, records);
                    if gather {
                        let _ = live
                            .producer_latency
                            .lock()
                            .expect("latency lock")
                            .record(took.max(1));
                    }
                }
                ProduceOutcome::Failed { error, .. } => {
                    add(&live.failed, records);
                    live.error(error.to_string(), records);
                }
            }
        });
        while requests.try_join_next().is_some() {}
    }
    while requests.join_next().await.is_some() {}
}

/// What the consumer hands back at the end.
pub(crate) struct ConsumerDone {
    pub(crate) member_id: String,
    pub(crate) assignment: Vec<i32>,
}

/// The consumer: join, learn positions, signal ready, then poll/commit/heartbeat until stopped.
#[allow(clippy::too_many_arguments)]
async fn consume(
    spec: E2eSpec,
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
    epoch: Instant,
    run_tag: u32,
) -> Result<ConsumerDone, ClientError> {
    let config = GroupConfig {
        group_id: spec.group_id.clone(),
        topic: spec.topic.clone(),
        session_timeout: spec.session_timeout,
        rebalance_timeout: spec.session_timeout.max(Duration::from_secs(30)),
    };
    let setup = async {
        let member = GroupMember::join(cluster.clone(), config).await?;
        let positions = cluster.latest_offsets(&layout, member.assignment()).await?;
        Ok::<_, ClientError>((member, positions))
    };
    let (mut member, mut positions) = setup.await?;
    let _ = ready.send(());

    let mut decoder = BatchDecoder::new();
    let mut seen = Seen::default();
    let mut gaps: BTreeMap<i32, Gaps> = BTreeMap::new();
    let gap_hold = gap_hold(spec.consume_wait);
    let mut committed = positions.clone();
    let mut last_heartbeat = Instant::now();
    let mut last_commit = Instant::now();
    let mut async_commits: JoinSet<()> = JoinSet::new();
    let wait_ms = spec.consume_wait.as_millis().min(i32::MAX as u128) as i32;
    let wall_clock = spec.mode == E2eMode::Consumer;
    while !stop.is_cancelled() {
        if last_heartbeat.elapsed() >= spec.heartbeat_interval {
            last_heartbeat = Instant::now();
            add(&live.heartbeats, 1);
            match member.heartbeat().await {
                Ok(Membership::Stable) => {}
                Ok(Membership::RejoinNeeded) => {
                    rejoin(&mut member, &cluster, &layout, &mut positions, &live).await?;
                }
                Err(e) => live.error(format!("heartbeat: {e}"), 0),
            }
        }
        let asked: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
        if asked.is_empty() {
            // Nothing assigned (another member has every partition): wait for a rebalance.
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(spec.heartbeat_interval) => continue,
            }
        }
        let fetch_sent = Instant::now();
        let fetched = tokio::select! {
            _ = stop.cancelled() => break,
            r = cluster.fetch_partitions(&layout, &asked, spec.consume_max_bytes, spec.consume_max_bytes, wait_ms) => r,
        };
        add(&live.fetches, 1);
        let fetched = match fetched {
            Ok(f) => f,
            Err(e) => {
                live.error(format!("fetch: {e}"), 0);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Receipt time: when the response was in hand, one reading for the whole response.
        let in_hand = Instant::now();
        let received_us = in_hand.duration_since(epoch).as_micros() as u64;
        let received_wall_ms = now_ms();
        let mut got = 0u64;
        let mut trips: Vec<u64> = Vec::new();
        for (partition, data) in &fetched {
            let Some(position) = positions.get(partition).copied() else {
                continue;
            };
            let gaps = gaps.entry(*partition).or_default();
            let limit = readable_until(&data.records, position, gaps, gap_hold, &live);
            let mut next = position;
            let result = decoder.decode_all(&data.records, |header, record| {
                if header.base_offset >= limit {
                    return; // at or past a hole still held: asked for again next time
                }
                next = next.max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                if record.offset < position || header.is_control() {
                    return;
                }
                got += 1;
                match record_id(record.key) {
                    Some((tag, producer, seq)) if tag == run_tag || wall_clock => {
                        add(&live.consumed, 1);
                        if seen.mark(tag, producer, seq) {
                            add(&live.duplicates, 1);
                            return;
                        }
                        if !spec.gather_latencies {
                            return;
                        }
                        if wall_clock {
                            let trip_ms = received_wall_ms.saturating_sub(record.timestamp);
                            trips.push((trip_ms.max(0) as u64) * 1000);
                        } else if let Some(sent) = record
                            .headers()
                            .find(|(k, _)| *k == SENT_HEADER)
                            .and_then(|(_, v)| v)
                            .and_then(|v| <[u8; 8]>::try_from(v).ok())
                        {
                            trips.push(received_us.saturating_sub(u64::from_be_bytes(sent)));
                        }
                    }
                    _ => add(&live.foreign, 1),
                }
            });
            if let Err(e) = result {
                live.error(format!("decode {}-{partition}: {e}", layout.name), 0);
            }
            if next > position {
                positions.insert(*partition, next);
            }
        }
        if !trips.is_empty() {
            let mut h = live.whole_trip.lock().expect("latency lock");
            for t in trips {
                let _ = h.record(t.max(1));
            }
        }
        if spec.gather_latencies && got > 0 {
            let fetch_us = in_hand.duration_since(fetch_sent).as_micros() as u64;
            let _ = live
                .fetch_duration
                .lock()
                .expect("latency lock")
                .record(fetch_us.max(1));
            let _ = live
                .consumer_processing
                .lock()
                .expect("latency lock")
                .record((in_hand.elapsed().as_micros() as u64).max(1));
        }
        match spec.commit {
            CommitMode::Sync if got > 0 || positions != committed => {
                match member.commit(&layout, &positions).await {
                    Ok(Membership::Stable) => {
                        add(&live.commits, 1);
                        committed = positions.clone();
                    }
                    Ok(Membership::RejoinNeeded) => {
                        add(&live.commit_failures, 1);
                        rejoin(&mut member, &cluster, &layout, &mut positions, &live).await?;
                    }
                    Err(e) => {
                        add(&live.commit_failures, 1);
                        live.error(format!("commit: {e}"), 0);
                    }
                }
            }
            CommitMode::Interval(every)
                if last_commit.elapsed() >= every && positions != committed =>
            {
                last_commit = Instant::now();
                let request = member.commit_request(&layout, &positions)?;
                committed = positions.clone();
                let live = live.clone();
                async_commits.spawn(async move {
                    match send_commit(request).await {
                        Ok(Membership::Stable) => add(&live.commits, 1),
                        Ok(Membership::RejoinNeeded) => add(&live.commit_failures, 1),
                        Err(e) => {
                            add(&live.commit_failures, 1);
                            live.error(format!("commit: {e}"), 0);
                        }
                    }
                });
                while async_commits.try_join_next().is_some() {}
            }
            _ => {}
        }
    }
    while async_commits.join_next().await.is_some() {}
    // A final synchronous commit of what was read, then leave: the group does not wait out a session.
    if positions != committed {
        match member.commit(&layout, &positions).await {
            Ok(Membership::Stable) => add(&live.commits, 1),
            Ok(Membership::RejoinNeeded) => add(&live.commit_failures, 1),
            Err(e) => {
                add(&live.commit_failures, 1);
                live.error(format!("commit: {e}"), 0);
            }
        }
    }
    if let Err(e) = member.leave().await {
        live.error(format!("leave group: {e}"), 0);
    }
    if spec.mode == E2eMode::ConsumerAndProducers && missing(&live) > 0 {
        live.set_phase("verifying");
        let ranges = gaps
            .into_iter()
            .flat_map(|(p, g)| g.skipped.into_iter().map(move |r| (p, r)))
            .chain(positions.iter().map(|(p, o)| (*p, *o..i64::MAX)))
            .collect();
        let deadline = Instant::now() + spec.drain.max(Duration::from_secs(1));
        let reading = Reread {
            cluster: &cluster,
            layout: &layout,
            max_bytes: spec.consume_max_bytes,
            run_tag,
            deadline,
        };
        reading
            .count_late(ranges, &mut decoder, &mut seen, &live)
            .await;
    }
    Ok(ConsumerDone {
        member_id: member.member_id().to_string(),
        assignment: member.assignment().to_vec(),
    })
}

/// Acknowledged records of this run not (yet) consumed.
pub(crate) fn missing(live: &E2eLive) -> u64 {
    let unique = get(&live.consumed).saturating_sub(get(&live.duplicates));
    get(&live.acked)
        .saturating_sub(unique)
        .saturating_sub(get(&live.late))
}

/// How long the consumer holds its position at a hole in a partition's offsets before it passes
/// over it: long enough for a broker that exposes later records before earlier ones to store the
/// earlier ones (Tansu takes well under a millisecond), and at least two fetch waits.
pub(crate) fn gap_hold(consume_wait: Duration) -> Duration {
    (consume_wait * 2).max(Duration::from_millis(500))
}

/// One partition's holes: the one being held (since when), and the ones passed over.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    held: Option<(std::ops::Range<i64>, Instant)>,
    pub(crate) skipped: Vec<std::ops::Range<i64>>,
}

/// How far into a partition's fetched batches the consumer may read, from `position`: up to the
/// first hole it is still holding at, or everything.
///
/// A Fetch that returns a batch beyond the position while the offsets in between are missing means
/// the broker exposed later records before earlier ones were readable (the upstream Tansu broker
/// raises its high watermark before it stores the batch, so a Fetch racing a Produce sees this).
/// Moving the position past the hole would skip those records for good, and report them lost. So
/// the consumer reads only up to the hole and asks again; a hole still open after `hold` (offsets
/// removed by compaction, say) is passed over, counted, and read again after the drain.
pub(crate) fn readable_until(
    records: &[u8],
    position: i64,
    gaps: &mut Gaps,
    hold: Duration,
    live: &E2eLive,
) -> i64 {
    if records.is_empty() {
        return i64::MAX;
    }
    let mut from = position;
    loop {
        let Some(gap) = kbench_wire::first_gap(records, from) else {
            gaps.held = None;
            return i64::MAX;
        };
        match &gaps.held {
            Some((held, since)) if held.start == gap.start => {
                if since.elapsed() < hold {
                    return gap.start;
                }
                add(&live.gaps_skipped, 1);
                gaps.held = None;
                from = gap.end;
                gaps.skipped.push(gap);
            }
            _ => {
                add(&live.gaps_held, 1);
                let start = gap.start;
                gaps.held = Some((gap, Instant::now()));
                return start;
            }
        }
    }
}

/// Reading missing offsets again after the drain, to tell records that were not consumed in time
/// from records that are not on the broker.
struct Reread<'a> {
    cluster: &'a Cluster,
    layout: &'a TopicLayout,
    max_bytes: i32,
    run_tag: u32,
    deadline: Instant,
}

impl Reread<'_> {
    /// Read each `(partition, offsets)` range (an open end means: to the high watermark) and count
    /// this run's records found there that were never consumed into `live.late`. Bounded by the
    /// deadline; what it could not read stays lost, and an error says so.
    async fn count_late(
        &self,
        ranges: Vec<(i32, std::ops::Range<i64>)>,
        decoder: &mut BatchDecoder,
        seen: &mut Seen,
        live: &E2eLive,
    ) {
        for (partition, range) in ranges {
            let mut offset = range.start;
            let mut end = range.end;
            while offset < end {
                if Instant::now() >= self.deadline {
                    live.error(
                        format!(
                            "re-reading {}-{partition} from offset {offset}: out of time",
                            self.layout.name
                        ),
                        0,
                    );
                    return;
                }
                let fetched = match self
                    .cluster
                    .fetch(self.layout, partition, offset, self.max_bytes, 100)
                    .await
                {
                    Ok(f) => f,
                    Err(e) => {
                        live.error(
                            format!("re-reading {}-{partition}: {e}", self.layout.name),
                            0,
                        );
                        return;
                    }
                };
                if fetched.high_watermark >= 0 {
                    end = end.min(fetched.high_watermark);
                }
                let from = offset;
                let decoded = decoder.decode_all(&fetched.records, |header, record| {
                    offset =
                        offset.max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                    if record.offset < from || record.offset >= end || header.is_control() {
                        return;
                    }
                    if let Some((tag, producer, seq)) = record_id(record.key)
                        && tag == self.run_tag
                        && !seen.mark(tag, producer, seq)
                    {
                        add(&live.late, 1);
                    }
                });
                if let Err(e) = decoded {
                    live.error(
                        format!("re-reading {}-{partition}: {e}", self.layout.name),
                        0,
                    );
                    return;
                }
            }
        }
    }
}

/// Rejoin after the coordinator asked for it; keep positions of partitions still ours, start new
/// ones at latest.
async fn rejoin(
    member: &mut GroupMember,
    cluster: &Cluster,
    layout: &TopicLayout,
    positions: &mut BTreeMap<i32, i64>,
    live: &E2eLive,
) -> Result<(), ClientError> {
    add(&live.rejoins, 1);
    member.rejoin().await?;
    let assigned = member.assignment().to_vec();
    positions.retain(|p, _| assigned.contains(p));
    let new: Vec<i32> = assigned
        .into_iter()
        .filter(|p| !positions.contains_key(p))
        .collect();
    if !new.is_empty() {
        positions.extend(cluster.latest_offsets(layout, &new).await?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_counts_repeats_only() {
        let mut s = Seen::default();
        assert!(!s.mark(1, 0, 0));
        assert!(!s.mark(1, 0, 1000));
        assert!(s.mark(1, 0, 0));
        assert!(!s.mark(1, 1, 0));
        assert!(!s.mark(2, 0, 0));
        assert!(s.mark(1, 0, 1000));
    }

    #[test]
    fn record_ids_need_sixteen_bytes() {
        let mut k = [0u8; 16];
        k[3] = 7;
        k[7] = 2;
        k[15] = 9;
        assert_eq!(record_id(Some(&k)), Some((7, 2, 9)));
        assert_eq!(record_id(Some(&k[..15])), None);
        assert_eq!(record_id(None), None);
    }

    #[test]
    fn spans_stay_inside_their_bounds() {
        let mut rng = SmallRng::seed_from_u64(1);
        let s = Span {
            min: 3usize,
            max: 5,
        };
        for _ in 0..1000 {
            let v = s.draw(&mut rng);
            assert!((3..=5).contains(&v));
        }
        assert_eq!(Span::fixed(4u64).draw(&mut rng), 4);
    }

    /// Batches of `n` records at each base offset, one after the other, as a Fetch carries them.
    fn batches_at(offsets: &[(i64, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = RecordBatchBuilder::new(Compression::None);
        for &(base, n) in offsets {
            b.start_now();
            for _ in 0..n {
                b.append(now_ms(), None, Some(b"v"), &[]);
            }
            let mut batch = b.finish().unwrap().to_vec();
            batch[0..8].copy_from_slice(&base.to_be_bytes());
            out.extend_from_slice(&batch);
        }
        out
    }

    #[test]
    fn the_position_is_held_at_a_hole_until_it_fills() {
        let live = E2eLive::default();
        let mut gaps = Gaps::default();
        let hold = Duration::from_secs(3600);
        // 10..14 read, 14..18 not there yet, 18..22 already returned: read up to 14 only.
        let holed = batches_at(&[(10, 4), (18, 4)]);
        assert_eq!(readable_until(&holed, 10, &mut gaps, hold, &live), 14);
        assert_eq!(get(&live.gaps_held), 1);
        // Asked again from 14, the same hole: still held, counted once.
        let later = batches_at(&[(18, 4)]);
        assert_eq!(readable_until(&later, 14, &mut gaps, hold, &live), 14);
        assert_eq!(get(&live.gaps_held), 1);
        // An empty answer changes nothing.
        assert_eq!(readable_until(&[], 14, &mut gaps, hold, &live), i64::MAX);
        assert!(gaps.held.is_some());
        // Filled: everything is readable, and nothing was passed over.
        let filled = batches_at(&[(14, 4), (18, 4)]);
        assert_eq!(
            readable_until(&filled, 14, &mut gaps, hold, &live),
            i64::MAX
        );
        assert!(gaps.held.is_none() && gaps.skipped.is_empty());
        assert_eq!(get(&live.gaps_skipped), 0);
    }

    #[test]
    fn a_hole_that_outlives_the_hold_is_passed_over_and_remembered() {
        let live = E2eLive::default();
        let mut gaps = Gaps::default();
        let holed = batches_at(&[(18, 4), (30, 2)]);
        // Held first; with a zero hold, the next answer passes it over, then holds at the next one.
        assert_eq!(
            readable_until(&holed, 14, &mut gaps, Duration::ZERO, &live),
            14
        );
        assert_eq!(
            readable_until(&holed, 14, &mut gaps, Duration::ZERO, &live),
            22
        );
        assert_eq!(gaps.skipped, vec![14..18]);
        assert_eq!((get(&live.gaps_held), get(&live.gaps_skipped)), (2, 1));
        // The position moved to 22; asked again, the second hole is passed over too.
        assert_eq!(
            readable_until(&holed, 22, &mut gaps, Duration::ZERO, &live),
            i64::MAX
        );
        assert_eq!(gaps.skipped, vec![14..18, 22..30]);
    }

    #[test]
    fn the_gap_hold_covers_two_fetch_waits() {
        assert_eq!(
            gap_hold(Duration::from_millis(10)),
            Duration::from_millis(500)
        );
        assert_eq!(gap_hold(Duration::from_secs(1)), Duration::from_secs(2));
    }
}
