//! The produce workload's measured phase: records batched per partition by `batch.size` and
//! `linger.ms`, spread round-robin per batch, optionally throttled, with latency from each record's
//! intended send time and every record accounted for (sent = acked + failed). Setup and teardown are
//! the job's ([`super::job`]).
//!
//! A closed batch waits for a free in-flight slot (`max.in.flight.requests.per.connection` per
//! leader); while it waits, the next partition's batch fills. When a slot frees, every waiting
//! batch of one leader goes in one Produce request, up to `max.request.size` — Java's sender drains
//! a broker's ready partitions the same way. At most one batch per partition waits, so a run with
//! one partition keeps one batch ahead of its requests, never a queue.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_client::{Cluster, ProduceOutcome, ProducerConfig, TopicLayout};
use kbench_wire::batch::{RecordBatchBuilder, RecordHeader, now_ms};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::measure::{CpuTime, latency_histogram, peak_rss_kib};
use crate::produce::{Keys, Payload, ProduceSpec};
use crate::spec::DURATION_GRACE;

/// One progress line's figures: a window of completed records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntervalReport {
    pub records: u64,
    pub failed: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub latency_sum_us: u64,
    pub latency_max_us: u64,
    /// With `ProduceSpec::interval_histograms`: this window's latency (from the intended time) and
    /// publish delay, exactly.
    pub latency: Option<Histogram<u64>>,
    pub publish_delay: Option<Histogram<u64>>,
}

impl IntervalReport {
    /// Exactly kafka-producer-perf-test's progress line.
    pub fn line(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let avg_ms = if self.records == 0 {
            0.0
        } else {
            self.latency_sum_us as f64 / self.records as f64 / 1000.0
        };
        format!(
            "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
            self.records,
            self.records as f64 / secs,
            self.bytes as f64 / secs / (1024.0 * 1024.0),
            avg_ms,
            self.latency_max_us as f64 / 1000.0
        )
    }
}

/// What a produce run did: counts, timing, CPU and latency.
#[derive(Debug, Clone)]
pub struct ProduceRun {
    /// Records handed to a produce request (first attempt).
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    /// Value bytes of acknowledged records.
    pub bytes_acked: u64,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// Wall time of the measured phase.
    pub elapsed: Duration,
    /// CPU of this process over the measured phase.
    pub cpu: CpuTime,
    pub peak_rss_kib: u64,
    /// Per record, from its intended send time (or its append time when unthrottled) to its ack.
    pub latency: Histogram<u64>,
    /// Per record, from the moment its request was sent to its ack: the broker's service time.
    pub service_time: Histogram<u64>,
    /// Per record, from its intended send time (throttled; unthrottled its append time) to the
    /// moment its request was sent: OMB's publish delay. It grows without bound when the target rate
    /// is not sustained.
    pub publish_delay: Histogram<u64>,
    /// Whether the load generator, not the broker, set the pace, and why.
    pub saturation: Saturation,
    /// Failed records by error.
    pub errors: BTreeMap<String, u64>,
    /// Why the run stopped early, if it did.
    pub aborted: Option<String>,
    /// Produce requests sent (first attempts), and the record batches they carried: several
    /// partitions' batches share a request when they wait for the same broker.
    pub requests: u64,
    pub batches: u64,
    /// Frames written to the brokers over the measured phase, and the socket writes that carried
    /// them (every queued request goes in one vectored write).
    pub frames_written: u64,
    pub socket_writes: u64,
    /// The measured phase window by window ([`crate::timeline`]): counters [`TIMELINE_COUNTERS`],
    /// histograms [`TIMELINE_HISTOGRAMS`].
    pub timeline: Vec<crate::timeline::Window>,
    /// With `--verify`: this run's producer id and the offsets the broker acknowledged.
    pub written: Option<crate::verify::Written>,
    /// With `enable.idempotence` or a `transactional.id`: the producer's identity and what the
    /// broker made of its retries and transactions.
    pub producer: Option<ProducerReport>,
}

/// An idempotent or transactional producer's part of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ProducerReport {
    /// The identity InitProducerId gave each repetition's producer.
    pub identities: Vec<kbench_client::ProducerIdentity>,
    pub transactional_id: Option<String>,
    /// Retried batches the broker already held (DUPLICATE_SEQUENCE_NUMBER): acknowledged once,
    /// written once.
    pub duplicate_batches: u64,
    /// Transactions committed and aborted (EndTxn), and the acknowledged records of the aborted
    /// ones (a `read_committed` reader never sees them).
    pub transactions_committed: u64,
    pub transactions_aborted: u64,
    pub records_in_aborted_transactions: u64,
}

impl ProducerReport {
    fn merge(&mut self, other: &ProducerReport) {
        self.identities.extend(other.identities.iter().copied());
        self.duplicate_batches += other.duplicate_batches;
        self.transactions_committed += other.transactions_committed;
        self.transactions_aborted += other.transactions_aborted;
        self.records_in_aborted_transactions += other.records_in_aborted_transactions;
    }
}

/// A produce timeline's counters (acknowledged records, failed records, acknowledged value bytes,
/// records sent).
pub const TIMELINE_COUNTERS: &[&str] = &["records", "failed", "bytes", "sent"];
/// A produce timeline's histograms.
pub const TIMELINE_HISTOGRAMS: &[&str] = &["latency", "service_time", "publish_delay"];

impl Tally {
    /// The cumulative figures a timeline window is the difference of.
    fn timeline_snapshot(&self) -> ([u64; 4], Vec<Histogram<u64>>) {
        (
            [self.acked, self.failed, self.bytes_acked, self.sent],
            vec![
                self.latency.clone(),
                self.service_time.clone(),
                self.publish_delay.clone(),
            ],
        )
    }
}

impl ProduceRun {
    pub fn records_per_sec(&self) -> f64 {
        self.records_acked as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes_acked as f64 / self.elapsed.as_secs_f64().max(1e-9) / (1024.0 * 1024.0)
    }

    /// Client CPU µs per record sent; `None` when nothing was sent.
    pub fn cpu_us_per_record(&self) -> Option<f64> {
        (self.records_sent > 0).then(|| self.cpu.total_us() as f64 / self.records_sent as f64)
    }

    /// Pool several repetitions into one: counts, times and CPU summed, histograms merged exactly,
    /// errors merged; the first start and the last end; aborted if any was.
    pub fn pooled(runs: &[ProduceRun]) -> Option<ProduceRun> {
        let (first, rest) = runs.split_first()?;
        let mut all = first.clone();
        for r in rest {
            all.records_sent += r.records_sent;
            all.records_acked += r.records_acked;
            all.records_failed += r.records_failed;
            all.bytes_acked += r.bytes_acked;
            all.ended_at = r.ended_at;
            all.elapsed += r.elapsed;
            all.cpu = CpuTime {
                user_us: all.cpu.user_us + r.cpu.user_us,
                sys_us: all.cpu.sys_us + r.cpu.sys_us,
            };
            all.peak_rss_kib = all.peak_rss_kib.max(r.peak_rss_kib);
            all.requests += r.requests;
            all.batches += r.batches;
            all.frames_written += r.frames_written;
            all.socket_writes += r.socket_writes;
            let _ = all.latency.add(&r.latency);
            let _ = all.service_time.add(&r.service_time);
            let _ = all.publish_delay.add(&r.publish_delay);
            all.saturation = all.saturation.or(&r.saturation);
            for (e, n) in &r.errors {
                *all.errors.entry(e.clone()).or_default() += n;
            }
            if all.aborted.is_none() {
                all.aborted = r.aborted.clone();
            }
            all.timeline.extend(r.timeline.iter().cloned());
            if let (Some(mine), Some(theirs)) = (all.written.as_mut(), r.written.as_ref()) {
                mine.merge(theirs);
            }
            if let (Some(mine), Some(theirs)) = (all.producer.as_mut(), r.producer.as_ref()) {
                mine.merge(theirs);
            }
        }
        Some(all)
    }

    /// Exactly kafka-producer-perf-test's final line.
    pub fn final_line(&self) -> String {
        let h = &self.latency;
        let ms = |us: u64| us / 1000;
        let q = |q: f64| {
            if h.is_empty() {
                0
            } else {
                ms(h.value_at_quantile(q))
            }
        };
        format!(
            "{} records sent, {:.6} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
            self.records_acked,
            self.records_per_sec(),
            self.mb_per_sec(),
            if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            h.max() as f64 / 1000.0,
            q(0.50),
            q(0.95),
            q(0.99),
            q(0.999),
        )
    }
}

/// Whether a run's figures are the load generator's limit rather than the target's.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Saturation {
    pub saturated: bool,
    /// The evidence, one sentence each.
    pub reasons: Vec<String>,
    /// The kbench process's CPU over the measured phase, as a share of one core.
    pub cpu_share: f64,
    /// Throttled runs: how far behind its schedule the last request went out, ms.
    pub final_publish_delay_ms: Option<f64>,
}

/// A kbench process above this share of a core is the limit of the run.
const CPU_SATURATED: f64 = 0.9;

impl Saturation {
    /// Throttled, a schedule that ended more than 1 s (or a tenth of the run) behind was not
    /// sustained; any run whose process used more than 90 % of a core (one runtime thread) was
    /// paced by kbench.
    pub fn judge(throttled: bool, last_delay_us: u64, cpu: CpuTime, elapsed: Duration) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let cpu_share = cpu.total_us() as f64 / 1e6 / secs;
        let mut reasons = Vec::new();
        let final_publish_delay_ms = throttled.then(|| last_delay_us as f64 / 1000.0);
        if let Some(ms) = final_publish_delay_ms {
            let allowed_ms = (secs * 100.0).max(1000.0);
            if ms > allowed_ms {
                reasons.push(format!(
                    "the target rate was not sustained: the last request went out {:.1} s behind its schedule (publish delay); records waited in kbench, and latency from the intended time includes the wait",
                    ms / 1000.0
                ));
            }
        }
        if cpu_share > CPU_SATURATED {
            reasons.push(format!(
                "the kbench process used {:.0} % of a core: the client, not the broker, set the pace",
                cpu_share * 100.0
            ));
        }
        Saturation {
            saturated: !reasons.is_empty(),
            reasons,
            cpu_share,
            final_publish_delay_ms,
        }
    }

    /// Pooled repetitions: saturated if any was.
    fn or(&self, other: &Saturation) -> Saturation {
        let mut reasons = self.reasons.clone();
        for r in &other.reasons {
            if !reasons.contains(r) {
                reasons.push(r.clone());
            }
        }
        Saturation {
            saturated: self.saturated || other.saturated,
            reasons,
            cpu_share: self.cpu_share.max(other.cpu_share),
            final_publish_delay_ms: match (
                self.final_publish_delay_ms,
                other.final_publish_delay_ms,
            ) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// Counters shared by the send loop and the per-request tasks, under one lock.
struct Tally {
    sent: u64,
    acked: u64,
    failed: u64,
    /// Records in requests not yet resolved.
    outstanding: u64,
    requests: u64,
    batches: u64,
    bytes_acked: u64,
    latency: Histogram<u64>,
    service_time: Histogram<u64>,
    publish_delay: Histogram<u64>,
    /// The publish delay of the latest request sent (its first record), µs.
    last_publish_delay_us: u64,
    errors: BTreeMap<String, u64>,
    window: IntervalReport,
    window_start: Instant,
    /// With `--verify`: what was acknowledged where.
    written: Option<crate::verify::Written>,
    /// Idempotent batches acknowledged as duplicates of ones the broker held.
    duplicate_batches: u64,
}

impl Tally {
    fn take_window(&mut self, now: Instant) -> IntervalReport {
        let fresh = IntervalReport {
            latency: self.window.latency.as_ref().map(Histogram::new_from),
            publish_delay: self.window.publish_delay.as_ref().map(Histogram::new_from),
            ..IntervalReport::default()
        };
        let mut w = std::mem::replace(&mut self.window, fresh);
        w.elapsed = now - self.window_start;
        self.window_start = now;
        w
    }
}

/// The batch being filled: its records' intended times (µs since the run's start) and value bytes.
struct OpenBatch {
    builder: RecordBatchBuilder,
    /// Which opening of this batch it is (a lingering entry of an earlier one is stale).
    generation: u64,
    intended_us: Vec<u64>,
    value_bytes: u64,
    opened: Instant,
    /// `opened`, in µs since the run's start.
    opened_us: u64,
    /// `opened` + `linger.ms`.
    linger_due: Instant,
    base_ms: i64,
    /// With `--verify`: the sequence number of the batch's first record (the rest follow it).
    first_seq: u64,
}

impl OpenBatch {
    fn new(spec: &ProduceSpec, start: Instant) -> OpenBatch {
        OpenBatch {
            builder: RecordBatchBuilder::new(spec.compression),
            generation: 0,
            intended_us: Vec::new(),
            value_bytes: 0,
            opened: start,
            opened_us: 0,
            linger_due: start,
            base_ms: 0,
            first_seq: 0,
        }
    }
}

/// An open batch's `linger.ms` deadline. Batches open in time order with one `linger.ms`, so their
/// deadlines queue in order; an entry whose batch has closed (or reopened) since is stale.
struct Lingering {
    due: Instant,
    /// Index into the open batches.
    idx: usize,
    generation: u64,
}

/// The earliest deadline of a batch still open, dropping stale entries on the way.
fn earliest_due(
    lingering: &mut std::collections::VecDeque<Lingering>,
    opens: &[OpenBatch],
) -> Option<Instant> {
    while let Some(l) = lingering.front() {
        let open = &opens[l.idx];
        if open.builder.is_empty() || open.generation != l.generation {
            lingering.pop_front();
        } else {
            return Some(l.due);
        }
    }
    None
}

/// Close every open batch, send every waiting batch and wait for every request's answer (a
/// transaction's end); `false` when the run is cancelled, or `deadline` passes, first.
async fn drain(
    sender: &mut Sender,
    opens: &mut [OpenBatch],
    keyed: bool,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
) -> bool {
    for (idx, open) in opens.iter_mut().enumerate() {
        if !open.builder.is_empty()
            && !sender
                .close(keyed.then_some(idx), open, cancel, deadline)
                .await
        {
            return false;
        }
    }
    while !sender.ready.is_empty() {
        if !sender.send_waiting(cancel, deadline).await {
            return false;
        }
    }
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return false,
            joined = sender.requests.join_next() => if joined.is_none() {
                return true;
            },
        }
    }
}

/// A transactional producer's state: the open transaction, when it is due to end, and what the
/// ended ones came to.
struct TxnState {
    txns: kbench_client::Transactions,
    /// The identity of each producer epoch the run used (a new one after each abort).
    identities: Vec<kbench_client::ProducerIdentity>,
    duration: Duration,
    due: Instant,
    /// The run's acknowledged and failed records when the open transaction began.
    acked_at: u64,
    failed_at: u64,
    committed: u64,
    aborted: u64,
    records_aborted: u64,
}

/// How long the coordinator keeps a transaction open without an EndTxn (`transaction.timeout.ms`,
/// Java's default).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// InitProducerId at `transactional_id`'s coordinator, with a timeout that outlasts a transaction.
async fn init_transactions(
    shared: &Shared,
    transactional_id: &str,
    duration: Duration,
) -> Result<kbench_client::Transactions, String> {
    shared
        .cluster
        .init_transactions(transactional_id, TRANSACTION_TIMEOUT.max(duration * 2))
        .await
        .map_err(|e| format!("transactional.id {transactional_id:?}: {e}"))
}

impl TxnState {
    async fn begin_first(
        shared: &Shared,
        spec: &super::TransactionSpec,
    ) -> Result<TxnState, String> {
        let txns = init_transactions(shared, &spec.transactional_id, spec.duration).await?;
        let first = txns.identity();
        let mut state = TxnState {
            txns,
            identities: vec![first],
            duration: spec.duration,
            due: Instant::now(),
            acked_at: 0,
            failed_at: 0,
            committed: 0,
            aborted: 0,
            records_aborted: 0,
        };
        state.begin(shared).await?;
        Ok(state)
    }

    /// A new transaction: every partition of the run joins it (AddPartitionsToTxn).
    async fn begin(&mut self, shared: &Shared) -> Result<(), String> {
        self.txns
            .add_partitions(&shared.cluster, &shared.topic.name, &shared.partitions)
            .await
            .map_err(|e| e.to_string())?;
        let t = shared.tally.lock().expect("tally lock");
        self.acked_at = t.acked;
        self.failed_at = t.failed;
        self.due = Instant::now() + self.duration;
        Ok(())
    }

    /// InitProducerId again after an abort: the same producer id under a new epoch.
    async fn restart(
        &mut self,
        shared: &Shared,
    ) -> Result<kbench_client::ProducerIdentity, String> {
        let id = self.txns.transactional_id().to_string();
        self.txns = init_transactions(shared, &id, self.duration).await?;
        self.identities.push(self.txns.identity());
        Ok(self.txns.identity())
    }

    /// EndTxn: commit when `commit` and no record of the transaction failed, else abort; whether
    /// it committed.
    async fn end(&mut self, shared: &Shared, commit: bool) -> Result<bool, String> {
        let (acked, failed) = {
            let t = shared.tally.lock().expect("tally lock");
            (t.acked, t.failed)
        };
        let commit = commit && failed == self.failed_at;
        self.txns
            .end(&shared.cluster, commit)
            .await
            .map_err(|e| e.to_string())?;
        if commit {
            self.committed += 1;
        } else {
            self.aborted += 1;
            self.records_aborted += acked - self.acked_at;
        }
        Ok(commit)
    }
}

/// Close every open batch whose `linger.ms` has passed at `now`: whether any closed, or `None` when
/// the run was cancelled, or `deadline` passed, while a batch waited for a slot.
async fn close_lingered(
    now: Instant,
    lingering: &mut std::collections::VecDeque<Lingering>,
    opens: &mut [OpenBatch],
    sender: &mut Sender,
    keyed: bool,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
) -> Option<bool> {
    let mut closed = false;
    while let Some(due) = earliest_due(lingering, opens)
        && now >= due
    {
        let l = lingering.pop_front().expect("an entry was just seen");
        if !sender
            .close(keyed.then_some(l.idx), &mut opens[l.idx], cancel, deadline)
            .await
        {
            return None;
        }
        closed = true;
    }
    Some(closed)
}

/// Each record's key and the open batch it goes into: unkeyed, the one open batch (it closes to
/// the next partition, round-robin); keyed, the batch of the partition murmur2 of the key picks.
struct KeyChooser {
    dist: Keys,
    keys: Vec<bytes::Bytes>,
    /// The open batch of each key, by key number.
    batch_of: Vec<usize>,
    zipf: Option<rand_distr::Zipf<f64>>,
    next: u64,
}

impl KeyChooser {
    fn new(dist: Keys, partitions: &[i32], topic_partitions: usize) -> KeyChooser {
        let keys: Vec<bytes::Bytes> = (0..dist.count()).map(Keys::key).collect();
        let batch_of = keys
            .iter()
            .map(|k| {
                if partitions.len() == 1 {
                    return 0;
                }
                let p = kbench_client::partitioner::partition_for_key(k, topic_partitions) as i32;
                partitions.iter().position(|q| *q == p).unwrap_or(0)
            })
            .collect();
        let zipf = match dist {
            Keys::Zipf { count, exponent } => {
                rand_distr::Zipf::new(f64::from(count.max(1)), exponent).ok()
            }
            _ => None,
        };
        KeyChooser {
            dist,
            keys,
            batch_of,
            zipf,
            next: 0,
        }
    }

    /// The next record's key number, if it has a key.
    fn choose(&mut self, rng: &mut SmallRng) -> Option<usize> {
        let n = self.keys.len();
        let i = match self.dist {
            Keys::None => return None,
            Keys::RoundRobin { .. } => {
                let i = (self.next % n as u64) as usize;
                self.next += 1;
                i
            }
            Keys::Random { .. } => rng.random_range(0..n),
            Keys::Zipf { .. } => match &self.zipf {
                // Zipf draws ranks 1..=n; rank 1 is key 0.
                Some(z) => (rng.sample(z) as usize).clamp(1, n) - 1,
                None => rng.random_range(0..n),
            },
        };
        Some(i)
    }
}

/// Unthrottled, the clock is read once per this many records (and at every new batch).
const CLOCK_EVERY: u64 = 32;

/// A closed batch waiting for a request.
struct Ready {
    /// Index into the run's partitions.
    pos: usize,
    batch: std::io::Result<bytes::Bytes>,
    intended: Vec<u64>,
    value_bytes: u64,
    /// With `--verify`: the sequence number of its first record.
    first_seq: u64,
}

/// What every request task shares.
struct Shared {
    cluster: Arc<Cluster>,
    topic: Arc<TopicLayout>,
    producer: ProducerConfig,
    partitions: Vec<i32>,
    tally: Arc<Mutex<Tally>>,
    start: Instant,
}

/// Closed batches, the in-flight slots, and the requests under way.
struct Sender {
    shared: Arc<Shared>,
    /// Each partition's leader (-1: none known), by index into the partitions.
    leaders: Vec<i32>,
    /// Whether a partition has a batch waiting, by index.
    waiting: Vec<bool>,
    ready: std::collections::VecDeque<Ready>,
    /// The partition the next closed batch goes to (round-robin, per batch).
    next: usize,
    in_flight: Arc<Semaphore>,
    max_request_size: usize,
    requests: JoinSet<()>,
    /// One compression context for every open batch.
    compressor: kbench_wire::compression::Compressor,
    /// Idempotent (or transactional) produce: the producer every batch names, and each
    /// partition's next sequence number, by index.
    identity: Option<kbench_client::ProducerIdentity>,
    transactional: bool,
    next_sequence: Vec<i32>,
}

impl Sender {
    /// Close an open batch for its partition (`pos`, keyed) or the next partition (unkeyed,
    /// round-robin); it is sent at once if a slot is free. If that partition has a batch waiting
    /// still, wait for slots until it has gone; `false` when the run is cancelled, or `deadline`
    /// passes, first.
    async fn close(
        &mut self,
        pos: Option<usize>,
        open: &mut OpenBatch,
        cancel: &CancellationToken,
        deadline: Option<Instant>,
    ) -> bool {
        let pos = pos.unwrap_or(self.next % self.waiting.len());
        while self.waiting[pos] {
            if !self.send_waiting(cancel, deadline).await {
                return false;
            }
        }
        self.next += 1;
        self.waiting[pos] = true;
        let records = open.intended_us.len();
        if let Some(identity) = self.identity {
            open.builder.set_producer(kbench_wire::BatchProducer {
                producer_id: identity.producer_id,
                producer_epoch: identity.producer_epoch,
                base_sequence: self.next_sequence[pos],
                transactional: self.transactional,
            });
        }
        let batch = open.builder.finish_sharing(&mut self.compressor);
        // A sequence number is used only by a batch that goes: a batch that could not be made
        // leaves the next one expected.
        if self.identity.is_some() && batch.is_ok() {
            self.next_sequence[pos] =
                kbench_wire::batch::next_sequence(self.next_sequence[pos], records as i32);
        }
        self.ready.push_back(Ready {
            pos,
            batch,
            // The next batch's vector is made as large as this one's was: one allocation per
            // batch, none while it fills.
            intended: std::mem::replace(&mut open.intended_us, Vec::with_capacity(records)),
            value_bytes: std::mem::take(&mut open.value_bytes),
            first_seq: open.first_seq,
        });
        self.send_ready();
        true
    }

    /// Send what is waiting while slots are free.
    fn send_ready(&mut self) {
        while !self.ready.is_empty() {
            match self.in_flight.clone().try_acquire_owned() {
                Ok(permit) => self.send(permit),
                Err(_) => break,
            }
        }
        // Reap finished requests as we go so the set stays small.
        while self.requests.try_join_next().is_some() {}
    }

    /// Wait for a slot and send one request of waiting batches; `false` when the run is
    /// cancelled, or `deadline` passes, first.
    async fn send_waiting(
        &mut self,
        cancel: &CancellationToken,
        deadline: Option<Instant>,
    ) -> bool {
        let until_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let permit = tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = until_deadline => return false,
            p = self.in_flight.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return false,
            },
        };
        self.send(permit);
        true
    }

    /// One request: the oldest waiting batch and every other waiting batch of its leader, up to
    /// `max.request.size` (the first always goes, however large).
    fn send(&mut self, permit: OwnedSemaphorePermit) {
        let Some(first) = self.ready.pop_front() else {
            return;
        };
        let leader = self.leaders[first.pos];
        let mut size = first.batch.as_ref().map_or(0, |b| b.len());
        let mut batches = vec![first];
        let mut i = 0;
        while i < self.ready.len() {
            let r = &self.ready[i];
            let len = r.batch.as_ref().map_or(0, |b| b.len());
            if self.leaders[r.pos] == leader && size + len <= self.max_request_size {
                size += len;
                batches.push(self.ready.remove(i).expect("index in range"));
            } else {
                i += 1;
            }
        }
        let mut records = 0;
        for b in &batches {
            self.waiting[b.pos] = false;
            records += b.intended.len() as u64;
        }
        {
            let mut t = self.shared.tally.lock().expect("tally lock");
            t.sent += records;
            t.outstanding += records;
            t.requests += 1;
            t.batches += batches.len() as u64;
        }
        self.requests
            .spawn(request(self.shared.clone(), batches, permit));
    }
}

/// Send one request's batches, and account for every record in them.
async fn request(shared: Arc<Shared>, batches: Vec<Ready>, permit: OwnedSemaphorePermit) {
    let _permit = permit;
    let sent_at = Instant::now();
    {
        let sent_us = (sent_at - shared.start).as_micros() as u64;
        let mut t = shared.tally.lock().expect("tally lock");
        for b in &batches {
            for run in b.intended.chunk_by(|a, b| a == b) {
                let us = sent_us.saturating_sub(run[0]).max(1);
                let _ = t.publish_delay.record_n(us, run.len() as u64);
                if let Some(h) = t.window.publish_delay.as_mut() {
                    let _ = h.record_n(us, run.len() as u64);
                }
            }
        }
        if let Some(first) = batches.first().and_then(|b| b.intended.first()) {
            t.last_publish_delay_us = sent_us.saturating_sub(*first);
        }
    }
    let mut outcomes: Vec<Option<ProduceOutcome>> = Vec::with_capacity(batches.len());
    let mut to_send = Vec::with_capacity(batches.len());
    for b in &batches {
        match &b.batch {
            Ok(bytes) => {
                to_send.push((shared.partitions[b.pos], bytes.clone()));
                outcomes.push(None);
            }
            Err(e) => outcomes.push(Some(ProduceOutcome::Failed {
                error: kbench_client::ClientError::Other(format!("record batch: {e}")),
                attempts: 0,
            })),
        }
    }
    let mut delivered = if to_send.is_empty() {
        Vec::new()
    } else {
        shared
            .cluster
            .produce_batches(&shared.producer, &shared.topic, to_send)
            .await
    }
    .into_iter();
    let done = Instant::now();
    let done_us = (done - shared.start).as_micros() as u64;
    let service = ((done - sent_at).as_micros() as u64).max(1);
    let mut t = shared.tally.lock().expect("tally lock");
    for (b, outcome) in batches.iter().zip(outcomes) {
        let outcome =
            outcome
                .or_else(|| delivered.next())
                .unwrap_or_else(|| ProduceOutcome::Failed {
                    error: kbench_client::ClientError::Other("no outcome for a batch".into()),
                    attempts: 0,
                });
        let count = b.intended.len() as u64;
        t.outstanding -= count;
        match outcome {
            ProduceOutcome::Acked { duplicate, .. } => {
                t.duplicate_batches += u64::from(duplicate);
                if let Some(w) = t.written.as_mut() {
                    let producer = w.producers[0];
                    w.ack(producer, shared.partitions[b.pos], b.first_seq, count);
                }
                // Records appended between two clock readings share an intended time: one
                // histogram update per run of equal times, not per record.
                for run in b.intended.chunk_by(|a, b| a == b) {
                    let us = done_us.saturating_sub(run[0]).max(1);
                    let n = run.len() as u64;
                    let _ = t.latency.record_n(us, n);
                    if let Some(h) = t.window.latency.as_mut() {
                        let _ = h.record_n(us, n);
                    }
                    t.window.latency_sum_us += us * n;
                    t.window.latency_max_us = t.window.latency_max_us.max(us);
                }
                let _ = t.service_time.record_n(service, count);
                t.acked += count;
                t.bytes_acked += b.value_bytes;
                t.window.records += count;
                t.window.bytes += b.value_bytes;
            }
            ProduceOutcome::Failed { error, .. } => {
                t.failed += count;
                t.window.failed += count;
                *t.errors.entry(error.to_string()).or_default() += count;
            }
        }
    }
}

/// Run the produce workload. Setup (connections, topic) is the caller's; this is the measured phase.
/// `on_interval` receives each progress window. Cancelling `cancel` stops the run at once; records
/// then in flight count as failed with the cancellation's reason.
pub async fn run_produce(
    cluster: Arc<Cluster>,
    topic: TopicLayout,
    spec: &ProduceSpec,
    cancel: CancellationToken,
    abort_reason: Arc<Mutex<Option<String>>>,
    on_interval: impl Fn(&IntervalReport) + Send + Sync + 'static,
) -> ProduceRun {
    run_produce_until(
        cluster,
        topic,
        spec,
        cancel,
        abort_reason,
        on_interval,
        CancellationToken::new(),
    )
    .await
}

/// [`run_produce`], ending when `finish` is cancelled as it ends at its duration: no more records,
/// every batch sent and every request answered (a load that runs beside another measurement).
pub async fn run_produce_until(
    cluster: Arc<Cluster>,
    topic: TopicLayout,
    spec: &ProduceSpec,
    cancel: CancellationToken,
    abort_reason: Arc<Mutex<Option<String>>>,
    on_interval: impl Fn(&IntervalReport) + Send + Sync + 'static,
    finish: CancellationToken,
) -> ProduceRun {
    let partitions: Vec<i32> = match spec.partition {
        Some(p) => vec![p],
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let leader_of: Vec<i32> = partitions
        .iter()
        .map(|p| topic.leader(*p).unwrap_or(-1))
        .collect();
    let leaders = {
        let mut l: Vec<i32> = leader_of.iter().copied().filter(|l| *l >= 0).collect();
        l.sort_unstable();
        l.dedup();
        l.len().max(1)
    };
    let topic = Arc::new(topic);
    let in_flight = Arc::new(Semaphore::new(spec.max_in_flight.max(1) * leaders));
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let values = spec.payload.values(&mut rng);

    // With `--verify`, this run's producer id and each partition's next sequence number.
    let verify_producer = spec.verify.then(crate::verify::new_producer_id);
    let mut sequences = vec![0u64; partitions.len()];
    let writes_before = cluster.write_counts();
    let started_at = SystemTime::now();
    let start = Instant::now();
    let cpu_start = CpuTime::now();
    let tally = Arc::new(Mutex::new(Tally {
        sent: 0,
        acked: 0,
        failed: 0,
        outstanding: 0,
        requests: 0,
        batches: 0,
        bytes_acked: 0,
        latency: latency_histogram(),
        service_time: latency_histogram(),
        publish_delay: latency_histogram(),
        last_publish_delay_us: 0,
        errors: BTreeMap::new(),
        window: IntervalReport {
            latency: spec.interval_histograms.then(latency_histogram),
            publish_delay: spec.interval_histograms.then(latency_histogram),
            ..IntervalReport::default()
        },
        window_start: start,
        written: verify_producer.map(crate::verify::Written::for_producer),
        duplicate_batches: 0,
    }));

    let on_interval = Arc::new(on_interval);
    let reporter = {
        let tally = tally.clone();
        let on_interval = on_interval.clone();
        let every = spec.reporting_interval.max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                let report = tally
                    .lock()
                    .expect("tally lock")
                    .take_window(Instant::now());
                on_interval(&report);
            }
        })
    };

    // The timeline: a snapshot of the cumulative figures every interval (off the hot path).
    let timeline = Arc::new(Mutex::new(
        crate::timeline::Timeline::new(started_at, TIMELINE_COUNTERS, TIMELINE_HISTOGRAMS)
            .with_sink(spec.window_sink.clone()),
    ));
    let timeliner = {
        let tally = tally.clone();
        let timeline = timeline.clone();
        let every = spec.timeline_interval.max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                let (counts, histograms) = tally.lock().expect("tally lock").timeline_snapshot();
                timeline.lock().expect("timeline lock").take(
                    SystemTime::now(),
                    &counts,
                    histograms,
                );
            }
        })
    };

    let keyed = spec.keys != Keys::None;
    let mut opens: Vec<OpenBatch> = (0..if keyed { partitions.len() } else { 1 })
        .map(|_| OpenBatch::new(spec, start))
        .collect();
    let mut lingering = std::collections::VecDeque::new();
    let mut generation = 0u64;
    let mut keys = KeyChooser::new(spec.keys, &partitions, topic.partitions.len());
    let uniform = match spec.payload {
        Payload::Uniform { min, max } => Some((min, max)),
        _ => None,
    };
    let mut sender = Sender {
        shared: Arc::new(Shared {
            cluster,
            topic,
            producer: spec.producer.clone(),
            partitions: partitions.clone(),
            tally: tally.clone(),
            start,
        }),
        waiting: vec![false; partitions.len()],
        leaders: leader_of,
        ready: std::collections::VecDeque::new(),
        next: 0,
        in_flight,
        max_request_size: spec.max_request_size.max(1),
        requests: JoinSet::new(),
        compressor: Default::default(),
        identity: None,
        transactional: false,
        next_sequence: vec![0; partitions.len()],
    };
    // Idempotent produce: this run's producer id, asked for before the first record (a broker
    // that will not give one ends the run before it starts, saying why).
    let mut stop_error = None;
    // Transactional produce: the transaction coordinator gives the producer id, and the first
    // transaction begins.
    let mut txn = None;
    if let Some(t) = &spec.transaction {
        match TxnState::begin_first(&sender.shared, t).await {
            Ok(state) => {
                sender.identity = Some(state.txns.identity());
                sender.transactional = true;
                txn = Some(state);
            }
            Err(e) => stop_error = Some(e),
        }
    } else if spec.producer.idempotent {
        match sender.shared.cluster.init_producer_id().await {
            Ok(identity) => sender.identity = Some(identity),
            Err(e) => stop_error = Some(format!("InitProducerId: {e}")),
        }
    }

    let linger = spec.linger;
    let mut i = 0u64;
    let deadline = spec.duration.map(|d| start + d);
    let throttled = spec.throughput.is_some() || spec.shape.is_some();
    let mut schedule = spec.shape.as_ref().map(|s| s.schedule());
    let mut now = start;
    let mut now_us = 0u64;
    'records: while stop_error.is_none() && i < spec.num_records {
        // The clock, read for every record when throttled, and every CLOCK_EVERY records (and at
        // each new batch) when not: a reading is a record's append time, its CreateTime, and
        // (unthrottled) its intended send time. Unthrottled appends take a fraction of a µs each, so
        // a record's time is at most CLOCK_EVERY appends (a few µs) early; reading the clock for
        // every record cost a fifth of the CPU at 1 MB batches (docs/PERFORMANCE.md).
        if throttled || i.is_multiple_of(CLOCK_EVERY) || opens[0].builder.is_empty() {
            now = Instant::now();
            now_us = (now - start).as_micros() as u64;
            if deadline.is_some_and(|d| now >= d)
                || (i.is_multiple_of(1024) && (cancel.is_cancelled() || finish.is_cancelled()))
            {
                break;
            }
            // A transaction past its duration: every batch of it sent and answered, then
            // committed (aborted when a batch failed), and the next one begun.
            if let Some(state) = txn.as_mut()
                && now >= state.due
            {
                if !drain(&mut sender, &mut opens, keyed, &cancel, deadline).await {
                    break;
                }
                match state.end(&sender.shared, true).await {
                    Ok(true) => {}
                    // Aborted: a batch of it failed, and its partition's sequence has a gap the
                    // broker will not fill. As Java's producer does, the producer starts again
                    // under a new epoch (InitProducerId), every sequence from 0.
                    Ok(false) => match state.restart(&sender.shared).await {
                        Ok(identity) => {
                            sender.identity = Some(identity);
                            sender.next_sequence.fill(0);
                        }
                        Err(e) => {
                            stop_error = Some(e);
                            break;
                        }
                    },
                    Err(e) => {
                        stop_error = Some(e);
                        break;
                    }
                }
                if let Err(e) = state.begin(&sender.shared).await {
                    stop_error = Some(e);
                    break;
                }
                now = Instant::now();
                now_us = (now - start).as_micros() as u64;
            }
        }
        // Throttled, the record's intended time from the run's start (a shape's ends the run when
        // the shape ends); unthrottled, its append time.
        let scheduled = match (&mut schedule, spec.throughput) {
            (Some(s), _) => match s.time_of(i) {
                Some(at) => Some(at),
                None => break,
            },
            (None, Some(rate)) => Some(Duration::from_secs_f64(i as f64 / rate)),
            (None, None) => None,
        };
        let intended = scheduled.map_or(now, |offset| start + offset);
        // Throttled: wait for the record's intended time, closing lingering batches on the way; the
        // run's duration ends the wait (a slow rate must not run past it).
        while now < intended {
            let mut wake =
                earliest_due(&mut lingering, &opens).map_or(intended, |d| d.min(intended));
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            // Batches waiting for a slot go as soon as one frees.
            let slot = sender.in_flight.clone();
            let waiting = !sender.ready.is_empty();
            tokio::select! {
                _ = cancel.cancelled() => break 'records,
                _ = finish.cancelled() => break 'records,
                _ = tokio::time::sleep_until(wake.into()) => {}
                permit = slot.acquire_owned(), if waiting => {
                    if let Ok(permit) = permit {
                        sender.send(permit);
                    }
                }
            }
            now = Instant::now();
            now_us = (now - start).as_micros() as u64;
            if deadline.is_some_and(|d| now >= d) {
                break 'records;
            }
            if close_lingered(
                now,
                &mut lingering,
                &mut opens,
                &mut sender,
                keyed,
                &cancel,
                deadline,
            )
            .await
            .is_none()
            {
                break 'records;
            }
        }
        let key = keys.choose(&mut rng);
        let idx = key.map_or(0, |k| keys.batch_of[k]);
        let value: &[u8] = match uniform {
            Some((min, max)) => &values[0][..rng.random_range(min..=max)],
            None if values.len() == 1 => &values[0],
            None => &values[rng.random_range(0..values.len())],
        };
        // Batches past their linger.ms close, and so does this record's batch when it is full
        // (the check is inline: no future is made per record unless a batch is due).
        let mut closed = false;
        if earliest_due(&mut lingering, &opens).is_some_and(|due| now >= due) {
            match close_lingered(
                now,
                &mut lingering,
                &mut opens,
                &mut sender,
                keyed,
                &cancel,
                deadline,
            )
            .await
            {
                Some(c) => closed = c,
                None => break 'records,
            }
        }
        let open = &mut opens[idx];
        let full = !open.builder.is_empty()
            && (open.builder.uncompressed_len() + value.len() + 16 > spec.batch_size
                || spec
                    .records_per_batch
                    .is_some_and(|n| open.builder.record_count() as usize >= n));
        if full {
            if !sender
                .close(keyed.then_some(idx), open, &cancel, deadline)
                .await
            {
                break 'records;
            }
            closed = true;
        }
        if closed {
            // The new batch's base time is read afresh.
            now = Instant::now();
            now_us = (now - start).as_micros() as u64;
        }
        let open = &mut opens[idx];
        if open.builder.is_empty() {
            open.base_ms = now_ms();
            open.builder.start(open.base_ms);
            open.opened = now;
            open.opened_us = now_us;
            open.linger_due = now + linger;
            generation += 1;
            open.generation = generation;
            lingering.push_back(Lingering {
                due: open.linger_due,
                idx,
                generation,
            });
        }
        let timestamp = open.base_ms + (now_us.saturating_sub(open.opened_us) / 1000) as i64;
        match verify_producer {
            None => {
                open.builder
                    .append(timestamp, key.map(|k| &keys.keys[k][..]), Some(value), &[])
            }
            Some(producer) => {
                // The batch's partition: its key's, or (unkeyed) the one the next close takes —
                // one batch is open then, and nothing else closes before it.
                let pos = if keyed {
                    idx
                } else {
                    sender.next % partitions.len()
                };
                if open.builder.record_count() == 0 {
                    open.first_seq = sequences[pos];
                }
                let stamp = crate::verify::Stamp::encode(producer, sequences[pos], value);
                sequences[pos] += 1;
                open.builder.append(
                    timestamp,
                    key.map(|k| &keys.keys[k][..]),
                    Some(value),
                    &[RecordHeader {
                        key: crate::verify::VERIFY_HEADER,
                        value: Some(&stamp),
                    }],
                );
            }
        }
        open.intended_us
            .push(scheduled.map_or(now_us, |offset| offset.as_micros() as u64));
        open.value_bytes += value.len() as u64;
        i += 1;
    }
    // With a duration, what is still in flight gets a bounded grace, whatever the broker's state
    // (a dead broker would otherwise hold the run until the delivery timeout).
    let grace_end = deadline.map(|d| d.max(Instant::now()) + DURATION_GRACE);
    // A `Sleep` may be polled again after it fired (an async block may not); with no duration, it is
    // a century away.
    let until_grace_end = tokio::time::sleep_until(
        grace_end
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86_400))
            .into(),
    );
    tokio::pin!(until_grace_end);
    let mut grace_expired = false;
    // Every open batch closes, and every waiting batch is sent, within the grace.
    let flushed = async {
        for (idx, open) in opens.iter_mut().enumerate() {
            if !open.builder.is_empty()
                && !sender
                    .close(keyed.then_some(idx), open, &cancel, grace_end)
                    .await
            {
                return;
            }
        }
        while !sender.ready.is_empty() {
            if !sender.send_waiting(&cancel, grace_end).await {
                return;
            }
        }
    };
    tokio::select! {
        _ = flushed => {}
        _ = &mut until_grace_end => grace_expired = true,
    }
    let mut requests = std::mem::take(&mut sender.requests);
    if grace_expired {
        requests.abort_all();
    } else {
        tokio::select! {
            _ = cancel.cancelled() => requests.abort_all(),
            _ = async { while requests.join_next().await.is_some() {} } => {}
            _ = &mut until_grace_end => {
                grace_expired = true;
                requests.abort_all();
            }
        }
    }
    while requests.join_next().await.is_some() {}
    // The last transaction: committed when every batch of it was answered, else aborted.
    if let Some(state) = txn.as_mut()
        && stop_error.is_none()
    {
        let outstanding = tally.lock().expect("tally lock").outstanding;
        let complete = outstanding == 0 && !grace_expired && !cancel.is_cancelled();
        if let Err(e) = state.end(&sender.shared, complete).await {
            stop_error = Some(e);
        }
    }
    reporter.abort();
    timeliner.abort();
    let _ = timeliner.await;
    // With interval histograms, the windows cover the whole run: the last, partial one is reported
    // too (kafka-producer-perf-test's lines, without them, end at the last full window).
    if spec.interval_histograms {
        let _ = reporter.await;
        let last = tally
            .lock()
            .expect("tally lock")
            .take_window(Instant::now());
        on_interval(&last);
    }

    let elapsed = start.elapsed();
    let writes_after = sender.shared.cluster.write_counts();
    let cpu = CpuTime::now().since(cpu_start);
    let aborted = stop_error.clone().or_else(|| {
        cancel.is_cancelled().then(|| {
            abort_reason
                .lock()
                .expect("reason lock")
                .clone()
                .unwrap_or_else(|| "stopped".into())
        })
    });
    let mut t = tally.lock().expect("tally lock");
    // The last, partial window: the windows add up to the run.
    let timeline = {
        let (counts, histograms) = t.timeline_snapshot();
        let mut timeline = std::mem::replace(
            &mut *timeline.lock().expect("timeline lock"),
            crate::timeline::Timeline::new(started_at, &[], &[]),
        );
        timeline.take(SystemTime::now(), &counts, histograms);
        timeline.into_windows()
    };
    let saturation = Saturation::judge(throttled, t.last_publish_delay_us, cpu, elapsed);
    if t.outstanding > 0 {
        let n = t.outstanding;
        t.failed += n;
        t.outstanding = 0;
        let reason = match (&aborted, grace_expired) {
            (Some(why), _) => why.clone(),
            (None, true) => format!(
                "still unanswered {} s after the run's duration ended",
                DURATION_GRACE.as_secs()
            ),
            (None, false) => "stopped".into(),
        };
        *t.errors
            .entry(format!("in flight when the run stopped: {reason}"))
            .or_default() += n;
    }
    ProduceRun {
        records_sent: t.sent,
        records_acked: t.acked,
        records_failed: t.failed,
        bytes_acked: t.bytes_acked,
        started_at,
        ended_at: SystemTime::now(),
        elapsed,
        cpu,
        peak_rss_kib: peak_rss_kib(),
        latency: t.latency.clone(),
        service_time: t.service_time.clone(),
        publish_delay: t.publish_delay.clone(),
        saturation,
        errors: t.errors.clone(),
        aborted,
        requests: t.requests,
        batches: t.batches,
        frames_written: writes_after.0 - writes_before.0,
        socket_writes: writes_after.1 - writes_before.1,
        timeline,
        written: t.written.take(),
        producer: sender.identity.map(|identity| ProducerReport {
            identities: txn
                .as_ref()
                .map_or_else(|| vec![identity], |s| s.identities.clone()),
            duplicate_batches: t.duplicate_batches,
            transactional_id: spec
                .transaction
                .as_ref()
                .map(|t| t.transactional_id.clone()),
            transactions_committed: txn.as_ref().map_or(0, |s| s.committed),
            transactions_aborted: txn.as_ref().map_or(0, |s| s.aborted),
            records_in_aborted_transactions: txn.as_ref().map_or(0, |s| s.records_aborted),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(keys: Keys, draws: usize) -> Vec<usize> {
        let mut chooser = KeyChooser::new(keys, &[0, 1, 2, 3], 4);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut counts = vec![0; keys.count() as usize];
        for _ in 0..draws {
            counts[chooser.choose(&mut rng).expect("keyed")] += 1;
        }
        counts
    }

    #[test]
    fn keys_are_chosen_by_their_distribution() {
        assert_eq!(counts(Keys::RoundRobin { count: 10 }, 1000), vec![100; 10]);
        let random = counts(Keys::Random { count: 10 }, 100_000);
        assert!(
            random.iter().all(|n| (9_000..11_000).contains(n)),
            "{random:?}"
        );
        // Zipf with exponent 1: key k is chosen in proportion to 1/(k+1).
        let zipf = counts(
            Keys::Zipf {
                count: 100,
                exponent: 1.0,
            },
            200_000,
        );
        let ratio = zipf[0] as f64 / zipf[9] as f64;
        assert!((8.0..12.0).contains(&ratio), "key 0 / key 9 = {ratio}");
        assert!(zipf[0] > zipf[1] && zipf[1] > zipf[4] && zipf[4] > zipf[50]);
        // Exponent 0 is uniform.
        let flat = counts(
            Keys::Zipf {
                count: 10,
                exponent: 0.0,
            },
            100_000,
        );
        assert!(flat.iter().all(|n| (9_000..11_000).contains(n)), "{flat:?}");
        let mut none = KeyChooser::new(Keys::None, &[0], 1);
        assert_eq!(none.choose(&mut SmallRng::seed_from_u64(1)), None);
    }

    #[test]
    fn a_key_goes_to_the_batch_of_its_murmur2_partition() {
        // Partitions listed out of order: the batch index is the listed position.
        let chooser = KeyChooser::new(Keys::RoundRobin { count: 50 }, &[2, 0, 1], 3);
        for (k, idx) in chooser.batch_of.iter().enumerate() {
            let p = kbench_client::partitioner::partition_for_key(&Keys::key(k as u32), 3) as i32;
            assert_eq!([2, 0, 1][*idx], p);
        }
        // One partition chosen (--partition): every key goes to it.
        let one = KeyChooser::new(Keys::Random { count: 50 }, &[5], 8);
        assert!(one.batch_of.iter().all(|i| *i == 0));
    }
}
