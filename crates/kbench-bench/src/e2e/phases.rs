//! The phases every e2e run goes through, whatever the driver (native Kafka or a REST Proxy): the
//! driver interface, the run from start to result ([`run_with`]), the producers' pacing, record
//! identity and duplicate counting, the one commit rule, the drain and the accounting. Drivers import
//! this module; it imports no driver.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_wire::Negotiated;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::e2e::live::{E2eLive, E2eRun, RestFigures, add, get};
use crate::e2e::spec::{CommitMode, E2eMode, E2eSpec, clock_for};
use crate::error::BenchError;
use crate::measure::{CpuTime, peak_rss_kib};
use crate::ranges::RangeSet;
use crate::spec::{DURATION_GRACE, Span};

/// Length of the record id in a key: run tag (u32), producer (u32), sequence (u64), big-endian.
pub const RECORD_ID_LEN: usize = 16;

/// What differs between the ways an e2e run reaches Kafka. A driver is built (connected, topic
/// ensured, proxy checked) before [`run_with`] takes it; then it starts the consumer and the
/// producers, and at the end says which API versions it used.
pub(crate) trait Driver {
    /// The spec as the driver runs it (e.g. with the schema id it registered).
    fn spec(&self) -> &E2eSpec;

    /// Start the consumer task. It sends on `ready` once joined and positioned, before any record
    /// of the run is sent; it stops when `stop` is cancelled.
    async fn start_consumer(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        ready: tokio::sync::oneshot::Sender<()>,
    ) -> Result<ConsumerTask, BenchError>;

    /// Start every producer into `producers`; each stops when `stop` is cancelled, after its requests
    /// in flight resolved. Starting ends early (with the producers started so far) once `run_stop` is
    /// cancelled: a run stopped while it starts thousands of producers stops now.
    async fn start_producers(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        run_stop: &CancellationToken,
        producers: &mut JoinSet<()>,
    ) -> Result<(), BenchError>;

    /// The clock whole trip is measured on, and the driver's own figures.
    fn figures(&self, live: &E2eLive) -> (&'static str, Option<RestFigures>) {
        let _ = live;
        let spec = self.spec();
        let clock = if spec.peers_consumer() {
            crate::e2e::spec::PEERS_CLOCK
        } else {
            clock_for(spec.mode, spec.reply.is_some())
        };
        (clock, None)
    }

    /// Close every connection; the API versions used, and the responses read with bytes after
    /// their body (by kind).
    async fn finish(self) -> (Negotiated, BTreeMap<String, u64>);
}

/// A run from start to result with `driver`: the consumer first (ready before the first record),
/// then the producers, the load, the drain, the accounting.
pub(crate) async fn run_with<D: Driver>(
    mut driver: D,
    live: Arc<E2eLive>,
    stop: CancellationToken,
) -> Result<E2eRun, BenchError> {
    let startup = Instant::now();
    let mode = driver.spec().mode;
    let consume_stop = CancellationToken::new();
    let mut consumer = None;
    if mode.has_consumer() {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = driver
            .start_consumer(live.clone(), consume_stop.clone(), ready_tx)
            .await?;
        let abort = task.abort_handle();
        consumer = Some(tokio::select! {
            started = started_consumer(ready_rx, task) => started?,
            _ = stop.cancelled() => {
                abort.abort();
                return Err(BenchError::Run(
                    "stopped before the consumer had joined its group".into(),
                ));
            }
        });
    }
    let produce_stop = CancellationToken::new();
    let mut producers = JoinSet::new();
    if mode.has_producers() {
        driver
            .start_producers(live.clone(), produce_stop.clone(), &stop, &mut producers)
            .await?;
    }
    let spec = driver.spec().clone();
    let startup = startup.elapsed();
    let mut phases = drive(
        &spec,
        &live,
        &stop,
        consumer,
        producers,
        produce_stop,
        consume_stop,
    )
    .await;
    phases.startup = startup;
    let figures = driver.figures(&live);
    let (negotiated, anomalies) = driver.finish().await;
    let mut run = conclude(&spec, &live, phases, negotiated, figures);
    run.protocol_anomalies = anomalies;
    Ok(run)
}

/// A producer's requests in flight, with the records each carries, so that records never answered
/// within [`DURATION_GRACE`] of the producers' stop are counted failed, with that reason.
pub(crate) struct InFlight {
    requests: JoinSet<()>,
    unanswered: Arc<std::sync::atomic::AtomicU64>,
}

impl InFlight {
    pub(crate) fn new() -> InFlight {
        InFlight {
            requests: JoinSet::new(),
            unanswered: Arc::default(),
        }
    }

    /// Send a request carrying `records`; `request` counts its own outcome before it returns.
    pub(crate) fn spawn(
        &mut self,
        records: u64,
        request: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        use std::sync::atomic::Ordering;
        let unanswered = self.unanswered.clone();
        unanswered.fetch_add(records, Ordering::Relaxed);
        self.requests.spawn(async move {
            request.await;
            // No await between the request's own counting and this: an abort cannot split them.
            unanswered.fetch_sub(records, Ordering::Relaxed);
        });
        while self.requests.try_join_next().is_some() {}
    }

    /// Wait for every request, at most [`DURATION_GRACE`]; the records of those still unanswered
    /// then are counted failed.
    pub(crate) async fn settle(mut self, live: &E2eLive) {
        let all = async { while self.requests.join_next().await.is_some() {} };
        if tokio::time::timeout(DURATION_GRACE, all).await.is_ok() {
            return;
        }
        self.requests.abort_all();
        while self.requests.join_next().await.is_some() {}
        let n = self.unanswered.load(std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            add(&live.failed, n);
            live.error(
                format!(
                    "in flight when the producers stopped: still unanswered {} s later",
                    DURATION_GRACE.as_secs()
                ),
                n,
            );
        }
    }
}

/// The error a closed loop's producer leaves when its record was not consumed in time.
pub const CLOSED_LOOP_TIMEOUT: &str =
    "closed loop: a record acknowledged was not consumed within the wait";

/// A producer's rhythm: a wait drawn from the batch-interval range before each batch, a record count
/// and record sizes from theirs, all from one seeded PRNG per producer, and a cap on requests in
/// flight. Falling behind by more than an interval (a slow broker) resets the schedule instead of
/// bursting to catch up.
pub(crate) struct Pacer {
    live: Arc<E2eLive>,
    rng: SmallRng,
    next: tokio::time::Instant,
    interval: Span<u64>,
    count: Span<usize>,
    size: Span<usize>,
    in_flight: Arc<Semaphore>,
    /// Time spent waiting for the cluster (a free in-flight slot, a partition whose batch had not
    /// gone yet) since the producer was last on schedule: a batch late by no more than this is the
    /// cluster's slip.
    cluster_wait: Duration,
    /// With `records`: this producer's share still to send.
    remaining: Option<u64>,
    /// With `closed_loop`: the longest wait for the pipe to empty before each batch.
    closed_loop: Option<Duration>,
}

impl Pacer {
    pub(crate) fn new(spec: &E2eSpec, producer: u32, live: Arc<E2eLive>) -> Pacer {
        // The records split evenly, the first producers one more each for the remainder.
        let n = spec.producers.max(1) as u64;
        let local = u64::from(producer.saturating_sub(spec.producer_base));
        let remaining = spec.records.map(|r| r / n + u64::from(local < r % n));
        Pacer {
            live,
            rng: SmallRng::seed_from_u64(spec.seed.wrapping_add(u64::from(producer) * 0x9E37_79B9)),
            next: tokio::time::Instant::now(),
            interval: spec.batch_interval_ms,
            count: spec.messages_per_batch,
            size: spec.payload_size,
            in_flight: Arc::new(Semaphore::new(spec.producer.max_in_flight.max(1))),
            cluster_wait: Duration::ZERO,
            remaining,
            closed_loop: spec.closed_loop,
        }
    }

    /// The producer waited `d` for the cluster to take its batch.
    pub(crate) fn waited_for_cluster(&mut self, d: Duration) {
        self.cluster_wait += d;
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
        if self.remaining == Some(0) {
            return None;
        }
        if let Some(bound) = self.closed_loop {
            if !self.await_turn(bound, stop).await {
                return None;
            }
            // The turn is the schedule: a closed loop is never late.
            self.next = tokio::time::Instant::now();
        }
        self.next += Duration::from_millis(self.interval.draw(&mut self.rng));
        // Within tens of µs of the batch's turn (crate::pace), not at tokio's next tick.
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = crate::pace::sleep_until(self.next.into_std()) => {}
        }
        let scheduled = self.next;
        let now = tokio::time::Instant::now();
        let interval = Duration::from_millis(self.interval.max.max(1));
        if now > self.next + interval {
            // Late by more than an interval: the schedule restarts from now. When the producer
            // spent that time waiting for the cluster, the slip is the cluster's; otherwise the
            // generator could not keep up.
            let late = now - self.next;
            let counter = if late <= self.cluster_wait + interval {
                &self.live.cluster_slips
            } else {
                &self.live.schedule_slips
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.next = now;
            self.cluster_wait = Duration::ZERO;
        } else if now <= self.next {
            // On schedule: nothing is owed to anyone.
            self.cluster_wait = Duration::ZERO;
        }
        // Every request in flight may be stuck (a broker that died answers none until the
        // delivery timeout): the stop ends the wait for a free slot too.
        let waiting = tokio::time::Instant::now();
        let permit = tokio::select! {
            _ = stop.cancelled() => return None,
            p = self.in_flight.clone().acquire_owned() => p.ok()?,
        };
        // Waits add up until the schedule is met again or restarts: lateness built over several
        // batches, each waiting a little for the cluster, is the cluster's too.
        self.cluster_wait += waiting.elapsed();
        let mut count = self.count.draw(&mut self.rng).max(1);
        if let Some(left) = &mut self.remaining {
            count = count.min(usize::try_from(*left).unwrap_or(usize::MAX));
            *left -= count as u64;
        }
        // Publish delay: the batch's scheduled time → now, when its request goes out.
        let delay = (tokio::time::Instant::now() - scheduled).as_micros() as u64;
        let _ = self
            .live
            .publish_delay
            .lock()
            .expect("latency lock")
            .record_n(delay.max(1), count as u64);
        Some((permit, count))
    }

    /// A closed loop's turn: wait until nothing is in flight and every record acknowledged was
    /// consumed; false when stopped, or when `bound` passed first (said in the errors).
    async fn await_turn(&self, bound: Duration, stop: &CancellationToken) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let turn = self.live.turn.notified();
            tokio::pin!(turn);
            // Registered before the check: a wake between the check and the wait is not lost.
            turn.as_mut().enable();
            let live = &self.live;
            let resolved = get(&live.acked) + get(&live.failed) >= get(&live.produced);
            if resolved && missing(live) == 0 {
                return true;
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                () = &mut turn => {}
                _ = tokio::time::sleep_until(deadline) => {
                    live.error(format!("{CLOSED_LOOP_TIMEOUT} ({} ms): the producer stopped", bound.as_millis()), 0);
                    return false;
                }
            }
        }
    }

    /// The next record's value size.
    pub(crate) fn size(&mut self) -> usize {
        self.size.draw(&mut self.rng)
    }

    /// One of `n` values (`--value-schema`'s pool), at random from the producer's seeded draw.
    pub(crate) fn pick(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n.max(1))
    }
}

/// Streams (run tag, producer) whose records are tracked for duplicates. A consumer reading foreign
/// records whose 16-byte keys parse as ids (UUIDs, say) would otherwise add a stream per record; past
/// this many, records are counted as untracked (`untracked` in the result) rather than grow memory.
pub(crate) const MAX_TRACKED_STREAMS: usize = 1 << 20;

/// Which records of which producers were seen: duplicates are counted by record id. Memory grows
/// with the gaps in each producer's sequence (a [`RangeSet`]), never with a sequence number's value.
#[derive(Default)]
pub(crate) struct Seen {
    by_producer: HashMap<(u32, u32), RangeSet>,
    /// Where records past [`MAX_TRACKED_STREAMS`] are counted.
    live: Option<Arc<E2eLive>>,
}

impl Seen {
    pub(crate) fn counting_into(live: Arc<E2eLive>) -> Self {
        Seen {
            by_producer: HashMap::new(),
            live: Some(live),
        }
    }

    /// Mark a record id; true when it was already marked.
    pub(crate) fn mark(&mut self, tag: u32, producer: u32, seq: u64) -> bool {
        let full = self.by_producer.len() >= MAX_TRACKED_STREAMS;
        let bits = match self.by_producer.get_mut(&(tag, producer)) {
            Some(bits) => bits,
            None if full => {
                if let Some(live) = &self.live {
                    add(&live.untracked, 1);
                }
                return false;
            }
            None => self.by_producer.entry((tag, producer)).or_default(),
        };
        !bits.insert(seq)
    }
}

pub(crate) fn record_id(key: Option<&[u8]>) -> Option<(u32, u32, u64)> {
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

/// A consumer task: what it hands back at the end, or why it failed.
pub(crate) type ConsumerTask = tokio::task::JoinHandle<Result<ConsumerDone, BenchError>>;

/// Wait until a consumer task says it is ready (joined and positioned, before any record is sent);
/// its error when it ended first.
pub(crate) async fn started_consumer(
    ready: tokio::sync::oneshot::Receiver<()>,
    task: ConsumerTask,
) -> Result<ConsumerTask, BenchError> {
    if ready.await.is_ok() {
        return Ok(task);
    }
    Err(match task.await {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => BenchError::Run("the consumer stopped before it was ready".into()),
        Err(e) => BenchError::Run(format!("the consumer task failed: {e}")),
    })
}

/// What the load, drain and stop phases of a run left behind.
pub(crate) struct Phases {
    /// From the run's start to the load's: the consumer joined and positioned, producers connected.
    startup: Duration,
    started_at: SystemTime,
    elapsed: Duration,
    drain_elapsed: Duration,
    drained: bool,
    member_id: Option<String>,
    members: Vec<crate::result::E2eMemberEnd>,
    group: Option<crate::consume::group::GroupReport>,
    assignment: Vec<i32>,
    aborted: Option<String>,
    cpu: CpuTime,
    timeline: Vec<crate::timeline::Window>,
    /// A member of the group was rebalancing when the drain ended.
    rebalancing_at_end: bool,
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
    // The timeline: a snapshot of the live figures every interval, through the drain.
    let mut timeline = crate::timeline::Timeline::new(
        started_at,
        crate::e2e::live::TIMELINE_COUNTERS,
        crate::e2e::live::TIMELINE_HISTOGRAMS,
    )
    .with_sink(spec.window_sink.clone());
    let every = spec.timeline_interval.max(Duration::from_millis(10));
    let mut next_window = tokio::time::Instant::now() + every;

    let mut aborted = None;
    let until_end = async {
        match spec.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until_end);
    let window = |timeline: &mut crate::timeline::Timeline, next: &mut tokio::time::Instant| {
        if tokio::time::Instant::now() >= *next {
            let (counts, histograms) = live.timeline_snapshot();
            timeline.take(SystemTime::now(), &counts, histograms);
            *next += every;
        }
    };
    // With a record count, the load ends when every producer has sent its share.
    let counted = spec.records.is_some() && !producers.is_empty();
    loop {
        tokio::select! {
            _ = &mut until_end => break,
            _ = stop.cancelled() => break,
            Some(_) = producers.join_next(), if counted => {
                if producers.is_empty() {
                    break;
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(100).min(every)) => {
                window(&mut timeline, &mut next_window);
                if consumer.as_ref().is_some_and(|t| t.is_finished()) {
                    aborted = Some("the consumer stopped during the run".to_string());
                    break;
                }
            }
        }
    }
    produce_stop.cancel();
    {
        let settle = async { while producers.join_next().await.is_some() {} };
        tokio::pin!(settle);
        loop {
            tokio::select! {
                () = &mut settle => break,
                _ = tokio::time::sleep(Duration::from_millis(100).min(every)) => window(&mut timeline, &mut next_window),
            }
        }
    }
    let elapsed = started.elapsed();

    // Drain: until every acknowledged record was consumed, or the drain time is up.
    live.set_phase("draining");
    let drain_started = Instant::now();
    // A distributed run's consumer drains too: the agents' producers ran elsewhere, and the
    // coordinator told it what they acknowledged before stopping it.
    let peers = spec.peers_consumer();
    let mut drained = !peers && (!spec.mode.has_producers() || !spec.mode.has_consumer());
    if consumer.is_some() && (spec.mode.has_producers() || peers) {
        // A group that changes: the drain's time counts from the later of its start and the end
        // of the group's last rebalance (the partitions' new owners read then), and a rebalance
        // under way holds it for as long as the rebalance timeout; never longer in all than the
        // drain and a rebalance timeout.
        let rebalance_timeout = spec.rebalance_timeout();
        let longest = drain_started + spec.drain + rebalance_timeout;
        loop {
            if missing(live) == 0 {
                drained = true;
                break;
            }
            let now = Instant::now();
            let from = live
                .group
                .last_settled()
                .map_or(drain_started, |t| t.max(drain_started));
            let rebalancing = live
                .group
                .rebalancing_since()
                .is_some_and(|since| now < since + rebalance_timeout);
            if (now >= from + spec.drain && !rebalancing)
                || now >= longest
                || consumer.as_ref().is_some_and(|t| t.is_finished())
            {
                break;
            }
            window(&mut timeline, &mut next_window);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let drain_elapsed = drain_started.elapsed();
    let rebalancing_at_end = live.group.rebalancing_since().is_some();
    consume_stop.cancel();
    let mut member_id = None;
    let mut members = Vec::new();
    let mut group = None;
    let mut assignment = Vec::new();
    if let Some(task) = consumer.take() {
        match task.await {
            Ok(Ok(done)) => {
                member_id = Some(done.member_id);
                assignment = done.assignment;
                members = done.members;
                group = done.group;
            }
            Ok(Err(e)) => aborted = Some(format!("the consumer failed: {e}")),
            Err(e) => aborted = aborted.or(Some(format!("the consumer task failed: {e}"))),
        }
    }
    // The last, partial window: the windows add up to the run.
    let (counts, histograms) = live.timeline_snapshot();
    timeline.take(SystemTime::now(), &counts, histograms);
    Phases {
        timeline: timeline.into_windows(),
        startup: Duration::ZERO,
        started_at,
        elapsed,
        drain_elapsed,
        drained,
        member_id,
        members,
        group,
        assignment,
        aborted,
        cpu: CpuTime::now().since(cpu_before),
        rebalancing_at_end,
    }
}

/// Where the unread records are (acknowledged, on the broker, not read by the end of the drain),
/// and why each partition's were not read.
fn unread_partitions(
    live: &E2eLive,
    phases: &Phases,
) -> BTreeMap<i32, crate::e2e::UnreadPartition> {
    live.late_by_partition
        .lock()
        .expect("late lock")
        .iter()
        .map(|(p, records)| {
            let unowned = phases
                .group
                .as_ref()
                .and_then(|g| g.partitions_unowned_at_end_ms.get(p));
            let reason = match unowned {
                Some(ms) => format!("no reader for the last {:.1} s", ms / 1e3),
                None if phases.rebalancing_at_end => {
                    "the group was rebalancing when the drain ended".to_string()
                }
                None => "not read by the end of the drain".to_string(),
            };
            (
                *p,
                crate::e2e::UnreadPartition {
                    records: *records,
                    reason,
                },
            )
        })
        .collect()
}

/// The run's figures, from the live counters and the phases.
pub(crate) fn conclude(
    spec: &E2eSpec,
    live: &E2eLive,
    phases: Phases,
    negotiated: Negotiated,
    (clock, rest): (&'static str, Option<RestFigures>),
) -> E2eRun {
    live.set_phase("finished");
    let acked = get(&live.acked);
    let consumed = get(&live.consumed);
    let duplicates = get(&live.duplicates);
    let unique = consumed.saturating_sub(duplicates);
    let late = get(&live.late);
    let segments = live.segments.lock().expect("segments lock");
    let (mut lost, unexpected) = if spec.mode == E2eMode::ConsumerAndProducers {
        (
            acked.saturating_sub(unique).saturating_sub(late),
            unique.saturating_sub(acked),
        )
    } else {
        // A distributed run's consumer, per producer agent (late records were counted into their
        // agent's segment when re-read); otherwise nothing to compare with.
        segments.missing_and_extra().unwrap_or_default()
    };
    let segment_figures = segments.figures();
    drop(segments);
    // Missing records count as lost only when the broker was read and they were not there.
    let unverified_reason = live.reread_failed.lock().expect("reread lock").clone();
    let unverified = if unverified_reason.is_some() {
        std::mem::take(&mut lost)
    } else {
        0
    };
    // A distributed run's producer part reads nothing: it hands on what it acknowledged (for the
    // consumer's agent to check against); the consumer's part checks against what the producer
    // agents acknowledged, once told (at its drain).
    let (verification, written) = match live.verify.lock().expect("verify lock").as_ref() {
        Some(v) if !spec.mode.has_consumer() => (None, Some(v.written.wire())),
        Some(v) => {
            let told = spec.mode.has_producers() || !v.written.producers.is_empty();
            (Some(v.verifier.report(told.then_some(&v.written))), None)
        }
        None => (None, None),
    };
    let h = |m: &Mutex<Histogram<u64>>| m.lock().expect("latency lock").clone();
    let load_started = live
        .started
        .lock()
        .expect("started lock")
        .unwrap_or_else(Instant::now);
    E2eRun {
        startup: phases.startup,
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
        unread: unread_partitions(live, &phases),
        gaps_held: get(&live.gaps_held),
        gaps_skipped: get(&live.gaps_skipped),
        unexpected,
        foreign: get(&live.foreign),
        untracked: get(&live.untracked),
        produce_requests: get(&live.produce_requests),
        fetches: get(&live.fetches),
        commits: live.group_figures().0,
        commit_failures: live.group_figures().1,
        heartbeats: live.group_figures().2,
        rejoins: live.group_figures().3,
        producer_latency: h(&live.producer_latency),
        publish_delay: h(&live.publish_delay),
        schedule_slips: get(&live.schedule_slips),
        cluster_slips: get(&live.cluster_slips),
        cluster: crate::cluster::ClusterReport::of(
            &live.cluster.lock().expect("cluster lock"),
            load_started,
            phases.started_at,
        ),
        consumer_cluster: crate::cluster::ClusterReport::of(
            &live.consumer_cluster.lock().expect("cluster lock"),
            load_started,
            phases.started_at,
        ),
        saturation: {
            let slips = get(&live.schedule_slips);
            let mut s = crate::produce::phase::Saturation::judge(
                false,
                0,
                Duration::ZERO,
                phases.cpu,
                phases.elapsed,
            );
            if slips > 0 && spec.mode.has_producers() {
                s.saturated = true;
                s.reasons.push(format!(
                    "the producers' batches came more than an interval late {slips} time(s): the schedule restarted each time, so the batches in between were never sent and the rate was not sustained"
                ));
            }
            s
        },
        whole_trip: h(&live.whole_trip),
        fetch_duration: h(&live.fetch_duration),
        consumer_processing: h(&live.consumer_processing),
        rest,
        segments: segment_figures,
        timeline: phases.timeline,
        clock,
        group_id: spec.group_id.clone(),
        member_id: phases.member_id,
        members: phases.members,
        group: phases.group,
        assignment: phases.assignment,
        negotiated,
        protocol_anomalies: BTreeMap::new(),
        unverified,
        unverified_reason,
        cpu: phases.cpu,
        peak_rss_kib: peak_rss_kib(),
        errors: live.errors.lock().expect("errors lock").clone(),
        aborted: phases.aborted,
        verification,
        written,
        reply: spec.reply.clone(),
        app_lag: live.app_lag.lock().expect("lag lock").clone(),
        value_decoding: live.value_decoding.lock().expect("decoding lock").clone(),
    }
}

/// What the consumer hands back at the end.
pub(crate) struct ConsumerDone {
    pub(crate) member_id: String,
    pub(crate) assignment: Vec<i32>,
    /// With several consumers: every member (`member_id` and `assignment` are the first's id
    /// and the group's partitions).
    pub(crate) members: Vec<crate::result::E2eMemberEnd>,
    /// With several members or group faults: the group's members, rebalances and faults.
    pub(crate) group: Option<crate::consume::group::GroupReport>,
}

/// Acknowledged records of this run not (yet) consumed. A distributed run's consumer counts per
/// agent's producers, against what the coordinator said they acknowledged.
pub(crate) fn missing(live: &E2eLive) -> u64 {
    if let Some((missing, _)) = live
        .segments
        .lock()
        .expect("segments lock")
        .missing_and_extra()
    {
        return missing;
    }
    let unique = get(&live.consumed).saturating_sub(get(&live.duplicates));
    get(&live.acked)
        .saturating_sub(unique)
        .saturating_sub(get(&live.late))
}

/// The one commit rule of both drivers: commit only what moved since the last commit; with
/// [`CommitMode::Sync`] after every poll, awaited; with [`CommitMode::Interval`] at most once per
/// interval, sent from a task of its own.
pub(crate) struct Committer {
    mode: CommitMode,
    committed: BTreeMap<i32, i64>,
    last: Instant,
}

/// How a commit ended.
pub(crate) enum Committed {
    Yes,
    Failed(String),
}

impl Committed {
    /// Count this commit's end in `live`: a commit, or a failed commit (with its error).
    pub(crate) fn count(self, live: &E2eLive) -> Committed {
        match &self {
            Committed::Yes => add(&live.commits, 1),
            Committed::Failed(e) => {
                add(&live.commit_failures, 1);
                live.error(format!("commit: {e}"), 0);
            }
        }
        self
    }
}

/// What a commit due now looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitDue {
    /// Send it and await the answer before polling again.
    Awaited,
    /// Send it from a task of its own; polling goes on.
    Background,
}

impl Committer {
    /// Starting from `positions` (nothing to commit yet).
    pub(crate) fn new(mode: CommitMode, positions: &BTreeMap<i32, i64>) -> Committer {
        Committer {
            mode,
            committed: positions.clone(),
            last: Instant::now(),
        }
    }

    /// Whether a commit of `positions` is due after this poll, and how.
    pub(crate) fn due(&self, positions: &BTreeMap<i32, i64>) -> Option<CommitDue> {
        if *positions == self.committed {
            return None;
        }
        match self.mode {
            CommitMode::Sync => Some(CommitDue::Awaited),
            CommitMode::Interval(every) if self.last.elapsed() >= every => {
                Some(CommitDue::Background)
            }
            CommitMode::Interval(_) => None,
        }
    }

    /// A commit of `positions` was sent (background) or answered (awaited).
    pub(crate) fn committed(&mut self, positions: &BTreeMap<i32, i64>) {
        self.committed = positions.clone();
        self.last = Instant::now();
    }

    /// Whether the final commit, at the end, has anything to say.
    pub(crate) fn pending(&self, positions: &BTreeMap<i32, i64>) -> bool {
        *positions != self.committed
    }
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
        // A sequence number from a foreign key costs one range, not a bitmap of its size.
        assert!(!s.mark(9, 9, u64::MAX - 7));
        assert!(s.mark(9, 9, u64::MAX - 7));
    }

    #[test]
    fn seen_stops_tracking_past_its_stream_budget() {
        let live = Arc::new(E2eLive::default());
        let mut s = Seen::counting_into(live.clone());
        for i in 0..MAX_TRACKED_STREAMS as u32 {
            assert!(!s.mark(i, i, 1));
        }
        assert!(s.mark(0, 0, 1));
        assert!(!s.mark(u32::MAX, 1, 1));
        assert!(!s.mark(u32::MAX, 1, 1));
        assert_eq!(get(&live.untracked), 2);
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
}
