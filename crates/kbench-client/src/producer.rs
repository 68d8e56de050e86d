//! The producer engine: every workload that produces drives this one, modelled on franz-go's
//! `sink` and `recBuf` (`pkg/kgo/sink.go`).
//!
//! - The caller's task appends records into an open batch (one per partition when records are
//!   placed by key, else one open batch whose partition is chosen as it opens), with no lock on the
//!   hot path; `batch.size`, `records_per_batch` and `linger.ms` close it.
//! - A closed batch joins its partition's **buffer**, which owns its queued and in-flight batches,
//!   its current leader and its state (waiting for metadata, backing off, holding while a failed
//!   batch's successors answer). At most one closed batch waits unsent per partition, and the
//!   closed batches queued or in flight over every partition stay under `buffer.memory` (Java's
//!   bound, 32 MiB by default): a batch closes only while they are under it (so the bound can be
//!   passed by one batch), and an unkeyed run over a thousand partitions holds about as much batch
//!   memory as one over a single partition. Unlike Java's, the bound leaves out open batches: a
//!   keyed run keeps one open batch per partition, each up to `batch.size`.
//! - A **sink** per broker owns that broker's in-flight limit and drains every ready buffer it
//!   leads into one Produce request, up to `max.request.size`.
//! - When Metadata names a new leader, the buffer **moves to the new leader's sink**: its queued
//!   batches go there, and batches in flight to the old leader come back and follow.
//! - A retriable failure puts the batch back in its buffer, in order (sequence numbers kept), and
//!   asks for **one** metadata refresh, coalesced across partitions and spaced by
//!   `retry.backoff.ms`; the partition waits for that refresh, so a leader change costs each batch
//!   at most one retry.
//!
//! It never measures the workload: it tells the caller what happened to each batch
//! ([`Delivery`]) and keeps what the cluster did ([`ClusterEvents`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kbench_wire::batch::{RecordBatchBuilder, next_sequence, now_ms};
use kbench_wire::compression::Compressor;
use kbench_wire::{ApiKey, BatchProducer, Compression};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, TopicLayout};
use crate::error::{ClientError, ErrorClass};
use crate::events::{ClusterEvents, LeaderChange, STALL, Stall};
use crate::produce::{Acks, ProducerConfig};
use crate::txn::ProducerIdentity;

/// How the engine batches and sends.
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// acks, timeouts, retries, back-off, idempotence.
    pub delivery: ProducerConfig,
    pub compression: Compression,
    /// Upper bound of a batch's uncompressed size (`batch.size`).
    pub batch_size: usize,
    /// Close every batch at exactly this many records (a fixed request shape).
    pub records_per_batch: Option<usize>,
    pub linger: Duration,
    /// Requests in flight per broker (`max.in.flight.requests.per.connection`).
    pub max_in_flight: usize,
    /// The largest Produce request (`max.request.size`).
    pub max_request_size: usize,
    /// One open batch per partition (records placed by key); otherwise one open batch at a time.
    pub per_partition: bool,
    /// A transactional producer's `transactional.id`, named in every Produce request (brokers
    /// count a batch into the producer's open transaction only then).
    pub transactional_id: Option<String>,
}

/// A batch acknowledged by its partition's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// -1 when the broker did not say (acks=0).
    pub base_offset: i64,
    /// An idempotent batch the broker already held (DUPLICATE_SEQUENCE_NUMBER on a retry).
    pub duplicate: bool,
}

/// What became of one batch, once.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: Result<Acked, ClientError>,
    /// When its first attempt went out (`None`: it never left the client).
    pub first_sent: Option<Instant>,
    /// When the outcome was known.
    pub at: Instant,
    pub attempts: u32,
}

/// What the caller is told. Both methods run under the engine's lock: keep them short, and never
/// call the engine from them.
pub trait Delivery<M>: Send + Sync + 'static {
    /// A batch was handed to the engine (closed, or ended open by [`Producer::finish`]): its
    /// records count as sent, and each will be acknowledged or failed.
    fn accepted(&self, batch: &M, records: u32) {
        let _ = (batch, records);
    }
    /// A batch's first attempt goes out at `at`.
    fn sent(&self, batch: &M, records: u32, at: Instant) {
        let _ = (batch, records, at);
    }
    /// A batch's final outcome.
    fn done(&self, batch: M, records: u32, outcome: Outcome);
}

/// When a wait for the engine gives up: a stop, or a deadline.
#[derive(Debug, Clone, Copy)]
pub struct Until<'a> {
    pub cancel: &'a CancellationToken,
    pub deadline: Option<Instant>,
}

impl Until<'_> {
    async fn reached(&self) {
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.cancel.cancelled() => {}
            _ = deadline => {}
        }
    }
}

/// A batch being filled by the caller.
pub struct OpenBatch<M> {
    pub builder: RecordBatchBuilder,
    /// The caller's own per-batch data (intended times, say), handed back with the outcome.
    pub meta: M,
    /// The batch's base timestamp (ms since the epoch) and when it opened.
    pub base_ms: i64,
    pub opened: Instant,
    /// Index into the engine's partitions: where the batch goes when it closes.
    pos: usize,
    generation: u64,
}

impl<M> OpenBatch<M> {
    /// Index into the engine's partitions of the partition this batch goes to.
    pub fn pos(&self) -> usize {
        self.pos
    }
}

/// An open batch's `linger.ms` deadline. Batches open in time order with one `linger.ms`, so
/// deadlines queue in order; an entry whose batch has closed (or reopened) since is stale.
struct Lingering {
    due: Instant,
    slot: usize,
    generation: u64,
}

/// The engine, held by the task that appends records.
pub struct Producer<M: Default + Send + 'static> {
    shared: Arc<Shared<M>>,
    opens: Vec<OpenBatch<M>>,
    compressor: Compressor,
    lingering: VecDeque<Lingering>,
    generation: u64,
    /// The next partition the sticky choice tries.
    sticky: usize,
    /// Idempotent produce: the producer every batch names, and each partition's next sequence.
    identity: Option<(ProducerIdentity, bool)>,
    sequences: Vec<i32>,
    driver: tokio::task::JoinHandle<()>,
}

/// What the appending task, the request tasks, the refreshes and the driver share.
struct Shared<M> {
    cluster: Arc<Cluster>,
    topic: String,
    partitions: Vec<i32>,
    options: ProducerOptions,
    delivery: Arc<dyn Delivery<M>>,
    state: Mutex<State<M>>,
    /// A batch left a queue, or a request ended: waiting closers and flushes look again.
    room: Notify,
    /// Something the driver times changed (a back-off, a refresh wanted).
    wake: Notify,
    /// Bytes of closed batches queued or in flight, against `buffer.memory`.
    buffered: std::sync::atomic::AtomicUsize,
}

struct State<M> {
    topic_id: uuid::Uuid,
    buffers: Vec<Buffer<M>>,
    sinks: BTreeMap<i32, Sink>,
    requests: HashMap<u64, Request<M>>,
    next_request: u64,
    /// Produce requests sent, retries included.
    requests_sent: u64,
    refresh: Refresh,
    events: ClusterEvents,
    /// The last time any broker answered anything.
    last_answer: Instant,
    /// Set when batches expired (`delivery.timeout.ms`) with no broker answering for as long.
    gone_since: Option<Instant>,
}

#[derive(Default)]
struct Refresh {
    wanted: bool,
    running: bool,
    last_started: Option<Instant>,
}

/// One partition's batches.
struct Buffer<M> {
    partition: i32,
    /// The broker leading it, as last learned (-1: none).
    leader: i32,
    /// Closed batches not in flight, oldest first (a retried batch goes back in order).
    queue: VecDeque<Queued<M>>,
    in_flight: u32,
    /// A stale-metadata answer for a batch sent at this time: wait for a refresh begun after it.
    stale_since: Option<Instant>,
    backoff_until: Option<Instant>,
    /// A batch came back while later ones were in flight: send nothing until they have answered,
    /// so that order (and idempotent sequences) hold.
    hold: bool,
    /// The sink whose ready list holds this buffer.
    listed: Option<i32>,
    /// Since the first failed attempt with no success after it.
    unavailable_since: Option<Instant>,
    /// Order of the next batch to close (retries go back by it).
    next_order: u64,
    /// Idempotent: the order of a batch that failed for good after it was sent. Its sequence
    /// numbers are a gap the broker never sees filled, so a later batch answered out of order
    /// fails at once instead of being retried until its delivery timeout; a later batch
    /// acknowledged (under a new producer epoch) clears it.
    gap_after: Option<u64>,
}

struct Queued<M> {
    bytes: Bytes,
    records: u32,
    meta: M,
    order: u64,
    /// When the batch opened: `delivery.timeout.ms` counts from here, as Java's producer counts it.
    created: Instant,
    first_sent: Option<Instant>,
    last_sent: Instant,
    attempts: u32,
}

/// One broker, as a destination of Produce requests.
struct Sink {
    node: i32,
    in_flight: usize,
    /// Buffers with a batch to send, oldest first.
    ready: VecDeque<usize>,
    backoff_until: Option<Instant>,
    /// Consecutive attempts that could not reach it (the back-off doubles with each).
    unreachable: u32,
    /// Since when requests have been outstanding without any answer.
    waiting_since: Option<Instant>,
    last_failure: Option<Instant>,
}

impl Sink {
    fn new(node: i32) -> Sink {
        Sink {
            node,
            in_flight: 0,
            ready: VecDeque::new(),
            backoff_until: None,
            unreachable: 0,
            waiting_since: None,
            last_failure: None,
        }
    }

    fn backing_off(&self, now: Instant) -> bool {
        self.backoff_until.is_some_and(|t| now < t)
    }
}

struct Request<M> {
    node: i32,
    batches: Vec<(usize, Queued<M>)>,
    abort: tokio::task::AbortHandle,
}

/// The longest a broker that cannot be reached is left alone (Java's `reconnect.backoff.max.ms`).
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(1);
/// OUT_OF_ORDER_SEQUENCE_NUMBER: an idempotent batch's sequence is past the next one expected.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// DUPLICATE_SEQUENCE_NUMBER: the broker already holds an idempotent batch with this sequence.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

impl<M: Default + Send + 'static> Producer<M> {
    /// An engine producing to `partitions` of `topic` over `cluster`. Spawns its driver (timers
    /// and metadata refreshes) on the current runtime.
    pub fn new(
        cluster: Arc<Cluster>,
        topic: &TopicLayout,
        partitions: Vec<i32>,
        options: ProducerOptions,
        delivery: Arc<dyn Delivery<M>>,
    ) -> Producer<M> {
        let now = Instant::now();
        let buffers = partitions
            .iter()
            .map(|p| Buffer {
                partition: *p,
                leader: topic.leader(*p).unwrap_or(-1),
                queue: VecDeque::new(),
                in_flight: 0,
                stale_since: None,
                backoff_until: None,
                hold: false,
                listed: None,
                unavailable_since: None,
                next_order: 0,
                gap_after: None,
            })
            .collect();
        let slots = if options.per_partition {
            partitions.len()
        } else {
            1
        };
        let opens = (0..slots)
            .map(|slot| OpenBatch {
                builder: RecordBatchBuilder::new(options.compression),
                meta: M::default(),
                base_ms: 0,
                opened: now,
                pos: if options.per_partition { slot } else { 0 },
                generation: 0,
            })
            .collect();
        let sequences = vec![0; partitions.len()];
        let shared = Arc::new(Shared {
            cluster,
            topic: topic.name.clone(),
            partitions,
            options,
            delivery,
            state: Mutex::new(State {
                topic_id: topic.topic_id,
                buffers,
                sinks: BTreeMap::new(),
                requests: HashMap::new(),
                next_request: 0,
                requests_sent: 0,
                refresh: Refresh::default(),
                events: ClusterEvents::default(),
                last_answer: now,
                gone_since: None,
            }),
            room: Notify::new(),
            wake: Notify::new(),
            buffered: std::sync::atomic::AtomicUsize::new(0),
        });
        let driver = tokio::spawn(drive(shared.clone()));
        Producer {
            shared,
            opens,
            compressor: Compressor::default(),
            lingering: VecDeque::new(),
            generation: 0,
            sticky: 0,
            identity: None,
            sequences,
            driver,
        }
    }

    /// Name a producer in every batch from now on (idempotent or transactional produce), every
    /// partition's sequence from 0 — a new producer id or epoch starts afresh. Call it between
    /// batches, with nothing outstanding (after [`flush`](Self::flush)).
    pub fn set_identity(&mut self, identity: Option<ProducerIdentity>, transactional: bool) {
        self.identity = identity.map(|i| (i, transactional));
        self.sequences.fill(0);
        // A gap in the old epoch's sequences is not one in the new epoch's.
        let mut st = self.shared.state.lock().expect("producer state lock");
        for b in &mut st.buffers {
            b.gap_after = None;
        }
    }

    pub fn identity(&self) -> Option<ProducerIdentity> {
        self.identity.map(|(i, _)| i)
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.shared.cluster
    }

    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    /// The partitions produced to; an open batch's [`pos`](OpenBatch::pos) indexes this.
    pub fn partitions(&self) -> &[i32] {
        &self.shared.partitions
    }

    /// Whether a value of `value_len` bytes no longer fits the open batch of `slot`.
    pub fn is_full(&self, slot: usize, value_len: usize) -> bool {
        let open = &self.opens[slot];
        !open.builder.is_empty()
            && (open.builder.uncompressed_len() + value_len + 16 > self.shared.options.batch_size
                || self
                    .shared
                    .options
                    .records_per_batch
                    .is_some_and(|n| open.builder.record_count() as usize >= n))
    }

    /// The open batch of `slot` (the key's partition when batches are per partition, else 0),
    /// begun at `now` if it is empty: to the partition at index `pos` when given, else (one open
    /// batch) the next partition whose buffer is clear, round-robin — the sticky partitioner, which
    /// passes over a partition that is waiting for its leader.
    pub fn open(&mut self, slot: usize, now: Instant, pos: Option<usize>) -> &mut OpenBatch<M> {
        if self.opens[slot].builder.is_empty() {
            let pos = match pos {
                Some(p) => p,
                None if self.shared.options.per_partition => slot,
                None => self.sticky_choice(now),
            };
            self.generation += 1;
            let linger = self.shared.options.linger;
            let open = &mut self.opens[slot];
            open.pos = pos;
            open.base_ms = now_ms();
            open.builder.start(open.base_ms);
            open.opened = now;
            open.generation = self.generation;
            self.lingering.push_back(Lingering {
                due: now + linger,
                slot,
                generation: self.generation,
            });
        }
        &mut self.opens[slot]
    }

    fn sticky_choice(&mut self, now: Instant) -> usize {
        let n = self.shared.partitions.len();
        if n == 1 {
            return 0;
        }
        let st = self.shared.state.lock().expect("producer state");
        for k in 0..n {
            let pos = (self.sticky + k) % n;
            if st.clear(pos, now) {
                self.sticky = pos + 1;
                return pos;
            }
        }
        // None clear: the partition whose leader answered most recently, so that one broker
        // that stopped answering (its partitions' batches waiting) never holds up the others.
        let age = |pos: usize| {
            let b = &st.buffers[pos];
            match st.sinks.get(&b.leader) {
                _ if b.leader < 0 => Duration::MAX,
                None => Duration::ZERO,
                Some(s) => s
                    .waiting_since
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            }
        };
        let pos = (0..n)
            .map(|k| (self.sticky + k) % n)
            .min_by_key(|&pos| age(pos))
            .unwrap_or(self.sticky % n);
        self.sticky = pos + 1;
        pos
    }

    /// The earliest `linger.ms` deadline of a batch still open.
    pub fn next_linger(&mut self) -> Option<Instant> {
        while let Some(l) = self.lingering.front() {
            let open = &self.opens[l.slot];
            if open.builder.is_empty() || open.generation != l.generation {
                self.lingering.pop_front();
            } else {
                return Some(l.due);
            }
        }
        None
    }

    /// Close every open batch whose `linger.ms` has passed at `now`: whether any closed, or `None`
    /// when `until` was reached while one waited for room.
    pub async fn close_lingered(&mut self, now: Instant, until: &Until<'_>) -> Option<bool> {
        let mut closed = false;
        while let Some(due) = self.next_linger()
            && now >= due
        {
            let l = self.lingering.pop_front().expect("an entry was just seen");
            if !self.close(l.slot, until).await {
                return None;
            }
            closed = true;
        }
        Some(closed)
    }

    /// Close the open batch of `slot` into its partition's buffer, first waiting until that
    /// partition has no closed batch waiting unsent; `false` when `until` came first. An empty
    /// batch is left open.
    pub async fn close(&mut self, slot: usize, until: &Until<'_>) -> bool {
        if self.opens[slot].builder.is_empty() {
            return true;
        }
        let pos = self.opens[slot].pos;
        let limit = self.shared.options.delivery.buffer_memory.max(1);
        let buffered = &self.shared.buffered;
        if !self
            .wait_for(until, |st| {
                st.buffers[pos].queue.is_empty()
                    && buffered.load(std::sync::atomic::Ordering::Relaxed) < limit
            })
            .await
        {
            return false;
        }
        let open = &mut self.opens[slot];
        let records = open.builder.record_count();
        if let Some((identity, transactional)) = self.identity {
            open.builder.set_producer(BatchProducer {
                producer_id: identity.producer_id,
                producer_epoch: identity.producer_epoch,
                base_sequence: self.sequences[pos],
                transactional,
            });
        }
        let batch = open.builder.finish_sharing(&mut self.compressor);
        // A sequence number is used only by a batch that goes: a batch that could not be made
        // leaves the next one expected.
        if self.identity.is_some() && batch.is_ok() {
            self.sequences[pos] = next_sequence(self.sequences[pos], records);
        }
        let meta = std::mem::take(&mut open.meta);
        let created = open.opened;
        self.shared
            .enqueue(pos, batch, records as u32, meta, created);
        true
    }

    /// Send a batch built elsewhere to the partition at index `pos`, without waiting for room.
    pub fn send_built(&mut self, pos: usize, batch: Bytes, records: u32, meta: M) {
        self.shared
            .enqueue(pos, Ok(batch), records, meta, Instant::now());
    }

    /// Wait until `ready` holds of the state; `false` when `until` came first.
    async fn wait_for(&self, until: &Until<'_>, ready: impl Fn(&State<M>) -> bool) -> bool {
        loop {
            let notified = self.shared.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready(&self.shared.state.lock().expect("producer state")) {
                return true;
            }
            tokio::select! {
                _ = notified => {}
                _ = until.reached() => return false,
            }
        }
    }

    /// Close every open batch and wait until every batch has its outcome; `false` when `until`
    /// came first.
    pub async fn flush(&mut self, until: &Until<'_>) -> bool {
        for slot in 0..self.opens.len() {
            if !self.close(slot, until).await {
                return false;
            }
        }
        self.wait_for(until, State::idle).await
    }

    /// Whether nothing is queued or in flight (open batches aside).
    pub fn is_idle(&self) -> bool {
        self.shared.state.lock().expect("producer state").idle()
    }

    /// Whether the open batch of `slot` holds no record.
    pub fn is_empty(&self, slot: usize) -> bool {
        self.opens[slot].builder.is_empty()
    }

    /// When the cluster was last heard from, if batches have since expired (`delivery.timeout.ms`)
    /// with no broker answering for as long: the cluster is gone, and a run should end.
    pub fn gone_since(&self) -> Option<Instant> {
        self.shared.state.lock().expect("producer state").gone_since
    }

    /// Produce requests sent so far, retries included.
    pub fn requests_sent(&self) -> u64 {
        self.shared
            .state
            .lock()
            .expect("producer state")
            .requests_sent
    }

    /// What the cluster did so far.
    pub fn events(&self) -> ClusterEvents {
        let st = self.shared.state.lock().expect("producer state");
        st.events_at(Instant::now(), &self.shared.cluster)
    }

    /// End the engine: every batch without an outcome yet — open, queued or in flight — fails
    /// with `reason`, so that every record handed over is acknowledged or failed. What the cluster
    /// did.
    pub fn finish(mut self, reason: &str) -> ClusterEvents {
        self.driver.abort();
        let now = Instant::now();
        let shared = self.shared.clone();
        let mut st = shared.state.lock().expect("producer state");
        let failed = |attempts: u32, first_sent: Option<Instant>| Outcome {
            result: Err(ClientError::Other(reason.to_string())),
            first_sent,
            at: now,
            attempts,
        };
        for open in &mut self.opens {
            if !open.builder.is_empty() {
                let records = open.builder.record_count() as u32;
                open.builder.start(0);
                shared.delivery.accepted(&open.meta, records);
                shared
                    .delivery
                    .done(std::mem::take(&mut open.meta), records, failed(0, None));
            }
        }
        let requests: Vec<Request<M>> = st.requests.drain().map(|(_, r)| r).collect();
        let mut left: Vec<Queued<M>> = Vec::new();
        for r in requests {
            r.abort.abort();
            left.extend(r.batches.into_iter().map(|(_, b)| b));
        }
        for b in &mut st.buffers {
            left.extend(b.queue.drain(..));
            b.in_flight = 0;
        }
        left.sort_by_key(|b| b.order);
        for b in left {
            shared
                .delivery
                .done(b.meta, b.records, failed(b.attempts, b.first_sent));
        }
        let events = st.events_at(now, &shared.cluster);
        drop(st);
        shared.room.notify_waiters();
        events
    }
}

impl<M: Default + Send + 'static> Drop for Producer<M> {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl<M> State<M> {
    fn idle(&self) -> bool {
        self.requests.is_empty() && self.buffers.iter().all(|b| b.queue.is_empty())
    }

    /// Whether the partition at `pos` can take a new batch now: nothing waiting, a leader known
    /// and reachable.
    fn clear(&self, pos: usize, now: Instant) -> bool {
        let b = &self.buffers[pos];
        b.queue.is_empty()
            && b.leader >= 0
            && b.stale_since.is_none()
            && b.backoff_until.is_none_or(|t| now >= t)
            && !self
                .sinks
                .get(&b.leader)
                .is_some_and(|s| s.backing_off(now))
    }

    /// The events so far, with what is still going on (a stall, a partition without a leader)
    /// counted up to `now`.
    fn events_at(&self, now: Instant, cluster: &Cluster) -> ClusterEvents {
        let mut events = self.events.clone();
        for sink in self.sinks.values() {
            if let Some(since) = sink.waiting_since {
                let ongoing = sink.in_flight > 0
                    || self
                        .buffers
                        .iter()
                        .any(|b| b.leader == sink.node && !b.queue.is_empty());
                let until = if ongoing {
                    now
                } else {
                    sink.last_failure.unwrap_or(now)
                };
                if until.saturating_duration_since(since) >= STALL {
                    events.stalls.push(Stall {
                        broker: sink.node,
                        addr: cluster.broker_addr(sink.node).unwrap_or_default(),
                        from: since,
                        until,
                        ongoing,
                    });
                }
            }
        }
        for b in &self.buffers {
            if let Some(since) = b.unavailable_since {
                *events.unavailable.entry(b.partition).or_default() += now - since;
            }
        }
        events
    }
}

impl<M> Buffer<M> {
    fn sendable(&self, now: Instant, max_in_flight: usize) -> bool {
        !self.queue.is_empty()
            && self.leader >= 0
            && self.stale_since.is_none()
            && self.backoff_until.is_none_or(|t| now >= t)
            && !(self.hold && self.in_flight > 0)
            && (self.in_flight as usize) < max_in_flight
    }
}

impl<M: Send + 'static> Shared<M> {
    fn max_in_flight(&self) -> usize {
        self.options.max_in_flight.max(1)
    }

    /// A closed batch (or the error that kept it from being made) joins its buffer, and the sinks
    /// drain.
    fn enqueue(
        self: &Arc<Self>,
        pos: usize,
        batch: std::io::Result<Bytes>,
        records: u32,
        meta: M,
        created: Instant,
    ) {
        let now = Instant::now();
        let mut st = self.state.lock().expect("producer state");
        self.delivery.accepted(&meta, records);
        let bytes = match batch {
            Ok(b) => b,
            Err(e) => {
                self.delivery.done(
                    meta,
                    records,
                    Outcome {
                        result: Err(ClientError::Other(format!("record batch: {e}"))),
                        first_sent: None,
                        at: now,
                        attempts: 0,
                    },
                );
                return;
            }
        };
        self.buffered
            .fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
        let b = &mut st.buffers[pos];
        let order = b.next_order;
        b.next_order += 1;
        b.queue.push_back(Queued {
            bytes,
            records,
            meta,
            order,
            created,
            first_sent: None,
            last_sent: now,
            attempts: 0,
        });
        let leaderless = b.leader < 0;
        self.list(&mut st, pos, now);
        self.drain(&mut st, now);
        if leaderless {
            // Nothing else would: the driver asks for the leader and times the batch's
            // delivery.timeout.ms.
            drop(st);
            self.wake.notify_one();
        }
    }

    /// Put a sendable buffer on its leader's ready list (once).
    fn list(&self, st: &mut State<M>, idx: usize, now: Instant) {
        let max = self.max_in_flight();
        let b = &mut st.buffers[idx];
        if b.listed.is_none() && b.sendable(now, max) {
            b.listed = Some(b.leader);
            st.sinks
                .entry(b.leader)
                .or_insert_with(|| Sink::new(b.leader))
                .ready
                .push_back(idx);
        }
    }

    /// Every sink sends what it can.
    fn drain(self: &Arc<Self>, st: &mut State<M>, now: Instant) {
        let nodes: Vec<i32> = st
            .sinks
            .values()
            .filter(|s| !s.ready.is_empty())
            .map(|s| s.node)
            .collect();
        for node in nodes {
            self.drain_sink(st, node, now);
        }
    }

    /// Requests to `node` while it has in-flight room: each takes the head batch of every ready
    /// buffer it leads, oldest first, up to `max.request.size` (the first always goes).
    fn drain_sink(self: &Arc<Self>, st: &mut State<M>, node: i32, now: Instant) {
        let max = self.max_in_flight();
        loop {
            let State { sinks, buffers, .. } = &mut *st;
            let sink = sinks.get_mut(&node).expect("a listed sink exists");
            if sink.in_flight >= max || sink.backing_off(now) {
                return;
            }
            let mut batches = Vec::new();
            let mut size = 0;
            let mut again = Vec::new();
            while let Some(idx) = sink.ready.pop_front() {
                let b = &mut buffers[idx];
                if b.listed != Some(node) {
                    continue; // moved to another sink since it was listed here
                }
                b.listed = None;
                if b.leader != node || !b.sendable(now, max) {
                    continue; // listed again when it can send
                }
                let len = b.queue.front().map_or(0, |q| q.bytes.len());
                if !batches.is_empty() && size + len > self.options.max_request_size {
                    b.listed = Some(node);
                    sink.ready.push_front(idx);
                    break;
                }
                let batch = b.queue.pop_front().expect("a sendable buffer has a batch");
                b.in_flight += 1;
                size += len;
                batches.push((idx, batch));
                if b.sendable(now, max) {
                    again.push(idx);
                }
            }
            for idx in again {
                buffers[idx].listed = Some(node);
                sink.ready.push_back(idx);
            }
            if batches.is_empty() {
                return;
            }
            sink.in_flight += 1;
            sink.waiting_since.get_or_insert(now);
            self.send(st, node, batches, now);
        }
    }

    /// Hand one request's batches to a task of its own.
    fn send(
        self: &Arc<Self>,
        st: &mut State<M>,
        node: i32,
        mut batches: Vec<(usize, Queued<M>)>,
        now: Instant,
    ) {
        let id = st.next_request;
        st.next_request += 1;
        st.requests_sent += 1;
        let mut parts = Vec::with_capacity(batches.len());
        for (idx, b) in &mut batches {
            b.attempts += 1;
            b.last_sent = now;
            if b.first_sent.is_none() {
                b.first_sent = Some(now);
                self.delivery.sent(&b.meta, b.records, now);
            }
            st.events.max_attempts = st.events.max_attempts.max(b.attempts);
            parts.push((self.partitions[*idx], b.bytes.clone()));
        }
        let topic_id = st.topic_id;
        let task = tokio::spawn(request(self.clone(), id, node, topic_id, parts));
        st.requests.insert(
            id,
            Request {
                node,
                batches,
                abort: task.abort_handle(),
            },
        );
    }

    /// One Produce request to `node`: the request's own failure, else each batch's answer in order.
    async fn produce_once(
        &self,
        node: i32,
        topic_id: uuid::Uuid,
        batches: &[(i32, Bytes)],
    ) -> Result<Vec<Result<Acked, ClientError>>, ClientError> {
        let config = &self.options.delivery;
        let conn = self.cluster.connection(node).await?;
        let version = self
            .cluster
            .version_for_topic(&conn, ApiKey::Produce, &topic_id)?;
        let topic_ref = if version >= 13 {
            kbench_wire::TopicRef::Id(*topic_id.as_bytes())
        } else {
            kbench_wire::TopicRef::Name(&self.topic)
        };
        let answered = config.acks != Acks::None;
        let response = conn
            .produce(
                crate::connection::ProduceCall {
                    version,
                    acks: config.acks.wire_value(),
                    timeout_ms: config.request_timeout.as_millis().min(i32::MAX as u128) as i32,
                    topic: topic_ref,
                    transactional_id: self.options.transactional_id.as_deref(),
                },
                batches,
                answered,
            )
            .await?;
        let Some(response) = response else {
            let written = Acked {
                base_offset: -1,
                duplicate: false,
            };
            return Ok(batches.iter().map(|_| Ok(written)).collect());
        };
        // Named only when something went wrong: no formatting on the hot path.
        let what = |partition: i32| format!("{}-{partition}", self.topic);
        let answers: Vec<_> = response
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .collect();
        Ok(batches
            .iter()
            .map(|(partition, _)| {
                let p = answers
                    .iter()
                    .find(|p| p.index == *partition)
                    .ok_or_else(|| {
                        ClientError::Other(format!(
                            "Produce response did not mention {}",
                            what(*partition)
                        ))
                    })?;
                if config.idempotent && p.error_code == DUPLICATE_SEQUENCE_NUMBER {
                    return Ok(Acked {
                        base_offset: -1,
                        duplicate: true,
                    });
                }
                if p.error_code != 0 {
                    return Err(ClientError::kafka(
                        "Produce",
                        what(*partition),
                        p.error_code,
                    ));
                }
                Ok(Acked {
                    base_offset: p.base_offset,
                    duplicate: false,
                })
            })
            .collect())
    }

    /// A request ended: each batch acknowledged, failed, or back in its buffer.
    fn complete(
        &self,
        st: &mut State<M>,
        id: u64,
        result: Result<Vec<Result<Acked, ClientError>>, ClientError>,
        now: Instant,
    ) {
        let Some(req) = st.requests.remove(&id) else {
            return; // ended by `finish`
        };
        let node = req.node;
        let reached = !matches!(&result, Err(e) if e.class() == ErrorClass::Unreachable);
        {
            let sink = st.sinks.get_mut(&node).expect("a request's sink exists");
            sink.in_flight -= 1;
            if reached {
                if let Some(since) = sink.waiting_since
                    && now - since >= STALL
                {
                    st.events.stalls.push(Stall {
                        broker: node,
                        addr: self.cluster.broker_addr(node).unwrap_or_default(),
                        from: since,
                        until: now,
                        ongoing: false,
                    });
                }
                sink.waiting_since = (sink.in_flight > 0).then_some(now);
                sink.unreachable = 0;
                st.last_answer = now;
            } else {
                sink.last_failure = Some(now);
            }
        }
        for (i, (idx, batch)) in req.batches.into_iter().enumerate() {
            let answer = match &result {
                Ok(answers) => answers[i].clone(),
                Err(e) => Err(e.clone()),
            };
            st.buffers[idx].in_flight -= 1;
            match answer {
                Ok(acked) => {
                    let b = &mut st.buffers[idx];
                    if b.gap_after.is_some_and(|o| batch.order > o) {
                        b.gap_after = None;
                    }
                    if let Some(since) = b.unavailable_since.take() {
                        *st.events.unavailable.entry(b.partition).or_default() += now - since;
                    }
                    self.release(&batch);
                    self.delivery.done(
                        batch.meta,
                        batch.records,
                        Outcome {
                            result: Ok(acked),
                            first_sent: batch.first_sent,
                            at: now,
                            attempts: batch.attempts,
                        },
                    );
                }
                Err(error) => self.retry_or_fail(st, idx, node, batch, error, now),
            }
            let b = &mut st.buffers[idx];
            if b.in_flight == 0 {
                b.hold = false;
            }
            self.list(st, idx, now);
        }
    }

    /// A failed attempt: back into its buffer (in order, with the buffer waiting for what the
    /// error calls for), or failed for good when it cannot be retried or its time is spent.
    fn retry_or_fail(
        &self,
        st: &mut State<M>,
        idx: usize,
        node: i32,
        batch: Queued<M>,
        error: ClientError,
        now: Instant,
    ) {
        let config = &self.options.delivery;
        let class = error.class();
        // Behind a retried batch, an idempotent batch arrives out of order: Java's sender retries
        // it, and so does the engine (the delivery timeout still bounds it).
        // But not behind a batch that failed for good: the gap it left never fills.
        let out_of_order = config.idempotent && error.code() == Some(OUT_OF_ORDER_SEQUENCE_NUMBER);
        let behind_gap = out_of_order && st.buffers[idx].gap_after.is_some_and(|o| batch.order > o);
        let retriable = (class != ErrorClass::Fatal || out_of_order) && !behind_gap;
        let expired = now + config.retry_backoff >= batch.created + config.delivery_timeout;
        if !retriable || batch.attempts > config.retries || expired {
            if config.idempotent {
                let b = &mut st.buffers[idx];
                b.gap_after = Some(b.gap_after.map_or(batch.order, |o| o.min(batch.order)));
            }
            let error = if behind_gap {
                ClientError::Other(format!(
                    "{error}, behind a batch of this partition that failed: its sequence numbers are a gap the broker never sees filled"
                ))
            } else if retriable && expired {
                self.note_expiry(st, now);
                ClientError::Other(format!(
                    "delivery.timeout.ms ({} ms) passed; the last attempt: {error}",
                    config.delivery_timeout.as_millis()
                ))
            } else {
                error
            };
            self.fail(batch, error, now);
            return;
        }
        tracing::debug!(%error, node, partition = self.partitions[idx], attempts = batch.attempts, "produce retry");
        st.events.retry(error.cause());
        if batch.attempts == 1 {
            st.events.retried_batches += 1;
        }
        let b = &mut st.buffers[idx];
        b.unavailable_since.get_or_insert(now);
        match class {
            // Only if the buffer still looks to the broker that said so: a refresh since may
            // have moved it already.
            ErrorClass::StaleMetadata if b.leader == node => {
                b.stale_since = Some(
                    b.stale_since
                        .map_or(batch.last_sent, |s| s.min(batch.last_sent)),
                );
                st.refresh.wanted = true;
            }
            ErrorClass::StaleMetadata => {}
            ErrorClass::Unreachable => {
                if let Some(sink) = st.sinks.get_mut(&node) {
                    sink.unreachable = sink.unreachable.saturating_add(1);
                    let backoff = config
                        .retry_backoff
                        .saturating_mul(1 << sink.unreachable.min(10).saturating_sub(1))
                        .min(MAX_RECONNECT_BACKOFF.max(config.retry_backoff));
                    let until = now + backoff;
                    sink.backoff_until = Some(sink.backoff_until.map_or(until, |t| t.max(until)));
                }
                // Leadership may have moved away from a broker that went away.
                st.refresh.wanted = true;
            }
            ErrorClass::Retriable | ErrorClass::Fatal => {
                b.backoff_until = Some(now + config.retry_backoff);
            }
        }
        let b = &mut st.buffers[idx];
        b.hold = true;
        let at = b.queue.partition_point(|q| q.order < batch.order);
        b.queue.insert(at, batch);
        self.wake.notify_one();
    }

    /// A batch leaves the engine for good: its bytes no longer count against `buffer.memory`.
    fn release(&self, batch: &Queued<M>) {
        self.buffered
            .fetch_sub(batch.bytes.len(), std::sync::atomic::Ordering::Relaxed);
    }

    fn fail(&self, batch: Queued<M>, error: ClientError, now: Instant) {
        self.release(&batch);
        self.delivery.done(
            batch.meta,
            batch.records,
            Outcome {
                result: Err(error),
                first_sent: batch.first_sent,
                at: now,
                attempts: batch.attempts,
            },
        );
    }

    /// A batch expired: if no broker has answered for the whole delivery timeout, the cluster is
    /// gone.
    fn note_expiry(&self, st: &mut State<M>, now: Instant) {
        if now.saturating_duration_since(st.last_answer) >= self.options.delivery.delivery_timeout
            && st.gone_since.is_none()
        {
            st.gone_since = Some(st.last_answer);
        }
    }

    /// The driver's round: back-offs that ended put their buffers back on the ready lists,
    /// batches that waited past `delivery.timeout.ms` fail, a wanted refresh starts when its
    /// spacing allows; the next time anything needs doing.
    fn housekeep(self: &Arc<Self>, st: &mut State<M>, now: Instant) -> Option<Instant> {
        let config = &self.options.delivery;
        let mut next: Option<Instant> = None;
        let mut soonest = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for sink in st.sinks.values_mut() {
            match sink.backoff_until {
                Some(t) if now >= t => sink.backoff_until = None,
                Some(t) => soonest(t),
                None => {}
            }
        }
        let mut expired = Vec::new();
        for idx in 0..st.buffers.len() {
            let b = &mut st.buffers[idx];
            if b.queue.is_empty() {
                continue;
            }
            match b.backoff_until {
                Some(t) if now >= t => b.backoff_until = None,
                Some(t) => soonest(t),
                None => {}
            }
            while b
                .queue
                .front()
                .is_some_and(|q| now >= q.created + config.delivery_timeout)
            {
                expired.push(b.queue.pop_front().expect("a front batch"));
            }
            if let Some(q) = b.queue.front() {
                soonest(q.created + config.delivery_timeout);
            }
            self.list(st, idx, now);
        }
        if !expired.is_empty() {
            self.note_expiry(st, now);
            let error = ClientError::Other(format!(
                "delivery.timeout.ms ({} ms) passed before the batch could be sent",
                config.delivery_timeout.as_millis()
            ));
            for batch in expired {
                self.fail(batch, error.clone(), now);
            }
        }
        if st
            .buffers
            .iter()
            .any(|b| b.leader < 0 && !b.queue.is_empty())
        {
            st.refresh.wanted = true;
        }
        if st.refresh.wanted && !st.refresh.running {
            let due = st
                .refresh
                .last_started
                .map_or(now, |t| t + config.retry_backoff);
            if now >= due {
                st.refresh.wanted = false;
                st.refresh.running = true;
                st.refresh.last_started = Some(now);
                tokio::spawn(refresh(self.clone(), now));
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        self.drain(st, now);
        next
    }

    /// A Metadata answer: every buffer whose partition has a new leader moves to it; buffers
    /// waiting for a refresh begun after their stale answer go again.
    fn apply(&self, st: &mut State<M>, layout: &TopicLayout, started: Instant, now: Instant) {
        let backoff = self.options.delivery.retry_backoff;
        if !layout.topic_id.is_nil() {
            st.topic_id = layout.topic_id;
        }
        for idx in 0..st.buffers.len() {
            let b = &mut st.buffers[idx];
            let leader = layout.leader(b.partition).unwrap_or(-1);
            let moved = leader != b.leader;
            if moved {
                st.events.leader_changes.push(LeaderChange {
                    at: now,
                    partition: b.partition,
                    from: b.leader,
                    to: leader,
                });
                st.events.batches_rerouted += b.queue.len() as u64 + u64::from(b.in_flight);
                b.leader = leader;
                b.listed = None;
            }
            if b.stale_since.is_some_and(|since| since <= started) {
                b.stale_since = None;
                if !moved {
                    // Metadata still names the broker that said it is not the leader: ask it
                    // again after a back-off.
                    b.backoff_until = Some(now + backoff);
                }
            }
            if b.stale_since.is_some() {
                st.refresh.wanted = true;
            }
            self.list(st, idx, now);
        }
    }
}

/// One Produce request, from its task.
async fn request<M: Send + 'static>(
    shared: Arc<Shared<M>>,
    id: u64,
    node: i32,
    topic_id: uuid::Uuid,
    parts: Vec<(i32, Bytes)>,
) {
    let result = shared.produce_once(node, topic_id, &parts).await;
    drop(parts);
    let now = Instant::now();
    {
        let mut st = shared.state.lock().expect("producer state");
        shared.complete(&mut st, id, result, now);
        shared.drain(&mut st, now);
    }
    shared.room.notify_waiters();
}

/// One Metadata refresh for the engine's topic.
async fn refresh<M: Send + 'static>(shared: Arc<Shared<M>>, started: Instant) {
    let answer = shared.cluster.metadata(&shared.topic).await;
    let now = Instant::now();
    {
        let mut st = shared.state.lock().expect("producer state");
        st.refresh.running = false;
        match answer {
            Ok((_, layout)) => {
                st.events.metadata_refreshes += 1;
                st.last_answer = now;
                shared.apply(&mut st, &layout, started, now);
            }
            Err(e) => {
                tracing::debug!(topic = %shared.topic, "metadata refresh failed: {e}");
                st.events.metadata_refresh_failures += 1;
                st.refresh.wanted = true;
            }
        }
        shared.drain(&mut st, now);
    }
    shared.room.notify_waiters();
    shared.wake.notify_one();
}

/// The engine's driver: times back-offs and delivery time-outs, and starts refreshes.
async fn drive<M: Send + 'static>(shared: Arc<Shared<M>>) {
    loop {
        let notified = shared.wake.notified();
        let next = {
            let mut st = shared.state.lock().expect("producer state");
            shared.housekeep(&mut st, Instant::now())
        };
        shared.room.notify_waiters();
        let sleep = async {
            match next {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = notified => {}
            _ = sleep => {}
        }
    }
}

/// Deliver one batch built elsewhere to `partition` of `topic` with the engine's semantics (the
/// leader followed, retries, the delivery timeout): seeding a topic, forwarding a test double's
/// records.
pub async fn deliver_one(
    cluster: Arc<Cluster>,
    delivery: &ProducerConfig,
    topic: &TopicLayout,
    partition: i32,
    batch: Bytes,
    records: u32,
) -> Result<Acked, ClientError> {
    struct Answer(Mutex<Option<Result<Acked, ClientError>>>);
    impl Delivery<()> for Answer {
        fn done(&self, _: (), _: u32, outcome: Outcome) {
            *self.0.lock().expect("answer") = Some(outcome.result);
        }
    }
    let answer = Arc::new(Answer(Mutex::new(None)));
    let options = ProducerOptions {
        delivery: delivery.clone(),
        compression: Compression::None,
        batch_size: usize::MAX,
        records_per_batch: None,
        linger: Duration::ZERO,
        max_in_flight: 1,
        max_request_size: usize::MAX,
        per_partition: false,
        transactional_id: None,
    };
    let mut producer = Producer::new(cluster, topic, vec![partition], options, answer.clone());
    producer.send_built(0, batch, records, ());
    let cancel = CancellationToken::new();
    producer
        .flush(&Until {
            cancel: &cancel,
            deadline: None,
        })
        .await;
    producer.finish("the producer ended");
    let result = answer.0.lock().expect("answer").take();
    result.unwrap_or_else(|| Err(ClientError::Other("no outcome for the batch".into())))
}
