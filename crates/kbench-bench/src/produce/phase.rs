//! The produce workload's measured phase: records generated (keys, payloads, `--verify` stamps,
//! each record's intended send time from the rate or shape) and handed to the producer engine
//! ([`kbench_client::Producer`]: batches per partition by `batch.size` and `linger.ms`, a sink per
//! broker, partitions that follow their leaders), with latency from each record's intended send time
//! and every record accounted for: sent = acked + failed, and in a throttled run sent + unsent =
//! scheduled. Setup and teardown are the job's ([`super::job`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_client::{Cluster, TopicLayout, Until};
use kbench_wire::batch::RecordHeader;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::measure::{CpuTime, latency_histogram, peak_rss_kib};
use crate::produce::{Keys, Payload, ProduceSpec};
use crate::spec::DURATION_GRACE;
use crate::stop::Stop;

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
    /// With `ProduceSpec::warmup_records`: this is the first window of the steady state. From the
    /// warm-up's end, windows count steady-state records only (as kafka-producer-perf-test's
    /// steady-state windows do), timed from the moment the first of them was sent.
    pub steady_state_begins: bool,
}

/// With `ProduceSpec::warmup_records` (KIP-1052): the records after the warm-up — those numbered
/// `warmup_records` and on in their repetition — from the moment the first of them was sent to the
/// run's end.
#[derive(Debug, Clone)]
pub struct SteadyState {
    /// The records left out (each repetition's first `warmup_records`).
    pub warmup_records: u64,
    /// Steady-state records acknowledged, and their value bytes.
    pub records: u64,
    pub bytes: u64,
    /// From the first steady-state record's send to the run's end.
    pub elapsed: Duration,
    /// Their latency, as the run's: from the intended send time to the ack.
    pub latency: Histogram<u64>,
}

impl SteadyState {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / (1024.0 * 1024.0)
    }

    /// Repetitions pooled: counts and times summed, histograms merged.
    fn merge(&mut self, other: &SteadyState) {
        self.warmup_records += other.warmup_records;
        self.records += other.records;
        self.bytes += other.bytes;
        self.elapsed += other.elapsed;
        let _ = self.latency.add(&other.latency);
    }
}

/// What a produce run did: counts, timing, CPU and latency.
#[derive(Debug, Clone)]
pub struct ProduceRun {
    /// Records handed to the producer (closed into a batch): each was acknowledged or failed.
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    /// Throttled: records the schedule asked for by the end that were never sent (a broker that
    /// stopped answering held the producer back). Each one's wait from its intended time to the
    /// end is in `latency`.
    pub records_unsent: u64,
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
    /// Throttled: per record that waited for its intended time, how late the wait ended — the
    /// generator's own delay, which is in `latency` and is not the broker's ([`crate::pace`]).
    pub generator_delay: Option<Histogram<u64>>,
    /// Whether the load generator, not the broker, set the pace, and why.
    pub saturation: Saturation,
    /// Failed records by error.
    pub errors: BTreeMap<String, u64>,
    /// Why the run stopped early, if it did.
    pub aborted: Option<String>,
    /// Produce requests sent (retries included), and the record batches they carried (first
    /// attempts): several partitions' batches share a request when they wait for the same broker.
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
    /// With `ProduceSpec::latest_values`: every key's last acknowledged write.
    pub latest: Option<crate::latest::LatestWritten>,
    /// What the cluster did: leader changes, retries by cause, refreshes, stalls.
    pub cluster: crate::cluster::ClusterReport,
    /// Responses read with bytes left after their body, by kind (a protocol anomaly).
    pub protocol_anomalies: BTreeMap<String, u64>,
    /// With `enable.idempotence` or a `transactional.id`: the producer's identity and what the
    /// broker made of its retries and transactions.
    pub producer: Option<ProducerReport>,
    /// With `ProduceSpec::warmup_records`: the figures after the warm-up; `None` without one, or
    /// when the run ended before the warm-up did.
    pub steady_state: Option<SteadyState>,
}

/// An idempotent or transactional producer's part of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Of `transactions_aborted`, those the abort rate (`--transaction-abort-rate`) aborted on
    /// purpose; the rest were aborted because a record of theirs failed.
    #[serde(default)]
    pub transactions_aborted_on_purpose: u64,
}

impl ProducerReport {
    fn merge(&mut self, other: &ProducerReport) {
        self.identities.extend(other.identities.iter().copied());
        self.duplicate_batches += other.duplicate_batches;
        self.transactions_committed += other.transactions_committed;
        self.transactions_aborted += other.transactions_aborted;
        self.records_in_aborted_transactions += other.records_in_aborted_transactions;
        self.transactions_aborted_on_purpose += other.transactions_aborted_on_purpose;
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

    /// A run of no producer at all (an OMB agent that runs only consumers): every count zero, its
    /// start and end `at`.
    pub fn none(at: SystemTime) -> ProduceRun {
        ProduceRun {
            records_sent: 0,
            records_acked: 0,
            records_failed: 0,
            records_unsent: 0,
            bytes_acked: 0,
            started_at: at,
            ended_at: at,
            elapsed: Duration::ZERO,
            cpu: CpuTime::default(),
            peak_rss_kib: peak_rss_kib(),
            latency: crate::measure::latency_histogram(),
            service_time: crate::measure::latency_histogram(),
            publish_delay: crate::measure::latency_histogram(),
            generator_delay: None,
            saturation: Saturation::default(),
            errors: BTreeMap::new(),
            aborted: None,
            requests: 0,
            batches: 0,
            frames_written: 0,
            socket_writes: 0,
            timeline: Vec::new(),
            written: None,
            latest: None,
            cluster: crate::cluster::ClusterReport::default(),
            protocol_anomalies: BTreeMap::new(),
            producer: None,
            steady_state: None,
        }
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
            all.records_unsent += r.records_unsent;
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
            if let (Some(mine), Some(theirs)) = (all.generator_delay.as_mut(), &r.generator_delay) {
                let _ = mine.add(theirs);
            }
            all.saturation = all.saturation.or(&r.saturation);
            for (e, n) in &r.errors {
                *all.errors.entry(e.clone()).or_default() += n;
            }
            if all.aborted.is_none() {
                all.aborted = r.aborted.clone();
            }
            all.timeline.extend(r.timeline.iter().cloned());
            if let (Some(mine), Some(theirs)) = (all.latest.as_mut(), r.latest.as_ref()) {
                mine.merge(theirs);
            }
            if let (Some(mine), Some(theirs)) = (all.written.as_mut(), r.written.as_ref()) {
                mine.merge(theirs);
            }
            if let (Some(mine), Some(theirs)) = (all.producer.as_mut(), r.producer.as_ref()) {
                mine.merge(theirs);
            }
            match (all.steady_state.as_mut(), r.steady_state.as_ref()) {
                (Some(mine), Some(theirs)) => mine.merge(theirs),
                (None, Some(theirs)) => all.steady_state = Some(theirs.clone()),
                _ => {}
            }
            all.cluster.merge(&r.cluster);
            for (k, v) in &r.protocol_anomalies {
                *all.protocol_anomalies.entry(k.clone()).or_default() += v;
            }
        }
        Some(all)
    }
}

/// Whether a run's figures are the load generator's limit rather than the target's.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Saturation {
    pub saturated: bool,
    /// The evidence, one sentence each.
    pub reasons: Vec<String>,
    /// The kbench process's CPU over the measured phase, as a share of one core.
    pub cpu_share: f64,
    /// Throttled runs: how far behind its schedule the last request went out, ms.
    pub final_publish_delay_ms: Option<f64>,
    /// Throttled runs that fell behind their schedule because the records waited for the cluster
    /// (in-flight requests unanswered, a partition without a leader): the target rate was not
    /// sustained, and the cluster — not kbench — set the pace. Said, never flagged as saturation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced_by_cluster: Option<String>,
}

/// The generator's own delay is said to shape the latency when its median is at least this share
/// of the latency's median …
const GENERATOR_SHARE: f64 = 0.25;
/// … and at least this long (µs): below it, no latency a broker gives is shaped by it.
const GENERATOR_FLOOR_US: u64 = 100;

/// A kbench process above this share of a core is the limit of the run.
const CPU_SATURATED: f64 = 0.9;
/// The shortest run whose CPU share is judged: the kernel accounts CPU time in scheduler ticks
/// (milliseconds), so a run of a few milliseconds (`--duration 1ns`) can show "100 % of a core"
/// from one tick of set-up work. Its share is still recorded.
const CPU_JUDGED_FROM: Duration = Duration::from_millis(200);

impl Saturation {
    /// Throttled: when the generator's own delay (`generator`, how late each wait for an intended
    /// time ended) is a large share of the `latency` it reports, the figure is partly kbench's:
    /// said and flagged, even though the schedule was kept.
    pub fn generator_share(&mut self, generator: &Histogram<u64>, latency: &Histogram<u64>) {
        if generator.is_empty() || latency.is_empty() {
            return;
        }
        let (own, all) = (
            generator.value_at_quantile(0.5),
            latency.value_at_quantile(0.5),
        );
        if own >= GENERATOR_FLOOR_US && own as f64 >= GENERATOR_SHARE * all as f64 {
            self.reasons.push(format!(
                "the generator's own delay (each wait for a record's intended time ended {own} µs late at the median) is {:.0} % of the latency's median ({all} µs): that share is kbench's, not the broker's",
                100.0 * own as f64 / all.max(1) as f64
            ));
            self.saturated = true;
        }
    }

    /// Throttled, a schedule that ended more than 1 s (or a tenth of the run) behind was not
    /// sustained — unless the time behind is time the record loop waited for the producer to take
    /// a batch (`waited`: a broker slow to answer, a partition without a leader), which is the
    /// cluster's, not the generator's. Any run of 200 ms or more whose process used more than
    /// 90 % of a core (one runtime thread) was paced by kbench.
    pub fn judge(
        throttled: bool,
        last_delay_us: u64,
        waited: Duration,
        cpu: CpuTime,
        elapsed: Duration,
    ) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let cpu_share = cpu.total_us() as f64 / 1e6 / secs;
        let mut reasons = Vec::new();
        let final_publish_delay_ms = throttled.then(|| last_delay_us as f64 / 1000.0);
        let mut paced_by_cluster = None;
        if let Some(ms) = final_publish_delay_ms {
            let allowed_ms = (secs * 100.0).max(1000.0);
            let waited_ms = waited.as_secs_f64() * 1000.0;
            if ms - waited_ms > allowed_ms {
                reasons.push(format!(
                    "the target rate was not sustained: the last request went out {:.1} s behind its schedule (publish delay); records waited in kbench, and latency from the intended time includes the wait",
                    ms / 1000.0
                ));
            } else if ms > allowed_ms {
                paced_by_cluster = Some(format!(
                    "the target rate was not sustained: the last request went out {:.1} s behind its schedule, after the records had waited {:.1} s in all for the cluster to take them; the cluster set the pace (latency from the intended time includes the wait)",
                    ms / 1000.0,
                    waited_ms / 1000.0
                ));
            }
        }
        if cpu_share > CPU_SATURATED && elapsed >= CPU_JUDGED_FROM {
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
            paced_by_cluster,
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
            paced_by_cluster: self
                .paced_by_cluster
                .clone()
                .or_else(|| other.paced_by_cluster.clone()),
        }
    }
}

/// Counters shared by the record loop and the engine's outcomes, under one lock.
struct Tally {
    /// Records handed to the producer engine (closed into a batch): each is acknowledged or
    /// failed, so `sent = acked + failed` once the engine has finished.
    sent: u64,
    acked: u64,
    failed: u64,
    batches: u64,
    bytes_acked: u64,
    latency: Histogram<u64>,
    service_time: Histogram<u64>,
    publish_delay: Histogram<u64>,
    /// The publish delay of the latest batch sent (its first record), µs.
    last_publish_delay_us: u64,
    errors: BTreeMap<String, u64>,
    window: IntervalReport,
    window_start: Instant,
    /// With `--verify`: what was acknowledged where.
    written: Option<crate::verify::Written>,
    /// With `ProduceSpec::latest_values`: every key's last acknowledged write.
    latest: Option<crate::latest::LatestWritten>,
    /// Idempotent batches acknowledged as duplicates of ones the broker held.
    duplicate_batches: u64,
    /// From the warm-up's end (`ProduceSpec::warmup_records`): the steady state's figures.
    steady: Option<SteadyTally>,
    /// When the progress window restarted out of turn (the warm-up's end), until the reporter
    /// has seen it.
    window_restarted: Option<Instant>,
}

/// The steady state being counted: since `start`, the acknowledged records numbered
/// `warmup_records` and on.
struct SteadyTally {
    start: Instant,
    acked: u64,
    bytes: u64,
    latency: Histogram<u64>,
}

impl Tally {
    /// A fresh tally for a run of `spec` from `start` (with `--verify`, of `verify_producer`).
    fn new(spec: &ProduceSpec, start: Instant, verify_producer: Option<u64>) -> Tally {
        Tally {
            sent: 0,
            acked: 0,
            failed: 0,
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
            latest: spec.latest_values.then(|| {
                crate::latest::LatestWritten::new(match &spec.key_values {
                    Some(keys) => keys.clone(),
                    None => (0..spec.keys.count()).map(Keys::key).collect(),
                })
            }),
            written: verify_producer.map(if spec.transaction().is_some() {
                crate::verify::Written::transactional
            } else {
                crate::verify::Written::for_producer
            }),
            duplicate_batches: 0,
            steady: None,
            window_restarted: None,
        }
    }

    /// The warm-up ends at `now` (its last record was sent): the steady state is counted from
    /// here, and the progress window in hand — warm-up records — is dropped, as
    /// kafka-producer-perf-test drops it; the next window is the steady state's first.
    fn begin_steady(&mut self, now: Instant) {
        self.steady = Some(SteadyTally {
            start: now,
            acked: 0,
            bytes: 0,
            latency: latency_histogram(),
        });
        self.take_window(now);
        self.window.steady_state_begins = true;
        self.window_restarted = Some(now);
    }

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

    /// An acknowledged batch's latencies, each record's from its intended time to `done_us`, into
    /// the run's histogram, the window's (in the steady state, its records only) and the steady
    /// state's.
    fn latencies(&mut self, b: &Batch, done_us: u64) {
        // The warm-up's records acknowledged in the steady state count in the run's figures only.
        let warm = if self.steady.is_some() { b.warmup } else { 0 };
        let (warmup, counted) = b.intended_us.split_at(warm);
        // Records appended between two clock readings share an intended time: one histogram
        // update per run of equal times, not per record.
        for run in warmup.chunk_by(|a, b| a == b) {
            let us = done_us.saturating_sub(run[0]).max(1);
            let _ = self.latency.record_n(us, run.len() as u64);
        }
        for run in counted.chunk_by(|a, b| a == b) {
            let us = done_us.saturating_sub(run[0]).max(1);
            let n = run.len() as u64;
            let _ = self.latency.record_n(us, n);
            if let Some(h) = self.window.latency.as_mut() {
                let _ = h.record_n(us, n);
            }
            self.window.latency_sum_us += us * n;
            self.window.latency_max_us = self.window.latency_max_us.max(us);
            if let Some(s) = self.steady.as_mut() {
                let _ = s.latency.record_n(us, n);
            }
        }
    }

    /// Records handed over and not yet acknowledged or failed.
    fn outstanding(&self) -> u64 {
        self.sent - self.acked - self.failed
    }
}

/// What the run keeps of each batch while the engine has it: its records' intended times (µs since
/// the run's start), value bytes, and (with `--verify`) where its stamps start.
#[derive(Default)]
struct Batch {
    intended_us: Vec<u64>,
    value_bytes: u64,
    /// When the batch opened, µs since the run's start (record timestamps are deltas from it).
    opened_us: u64,
    partition: i32,
    /// With `--verify`: the sequence number of the batch's first record (the rest follow it).
    first_seq: u64,
    /// With a warm-up: how many of the batch's records, and how many of its value bytes, are the
    /// warm-up's (a prefix: records are appended in order).
    warmup: usize,
    warmup_bytes: u64,
    /// With `ProduceSpec::latest_values`: each record's key number and its value's CRC-32C
    /// (`None`: a tombstone), in order.
    latest: Vec<(u32, Option<u32>)>,
}

/// The run's side of the engine: every batch's outcome into the tally.
struct Accounting {
    tally: Arc<Mutex<Tally>>,
    start: Instant,
}

impl kbench_client::Delivery<Batch> for Accounting {
    fn accepted(&self, _: &Batch, records: u32) {
        self.tally.lock().expect("tally lock").sent += u64::from(records);
    }

    fn sent(&self, b: &Batch, _: u32, at: Instant) {
        let sent_us = (at - self.start).as_micros() as u64;
        let mut t = self.tally.lock().expect("tally lock");
        t.batches += 1;
        for run in b.intended_us.chunk_by(|a, b| a == b) {
            let us = sent_us.saturating_sub(run[0]).max(1);
            let _ = t.publish_delay.record_n(us, run.len() as u64);
            if let Some(h) = t.window.publish_delay.as_mut() {
                let _ = h.record_n(us, run.len() as u64);
            }
        }
        if let Some(first) = b.intended_us.first() {
            t.last_publish_delay_us = sent_us.saturating_sub(*first);
        }
    }

    fn done(&self, b: Batch, records: u32, outcome: kbench_client::Outcome) {
        let count = u64::from(records);
        let mut t = self.tally.lock().expect("tally lock");
        match outcome.result {
            Ok(acked) => {
                t.duplicate_batches += u64::from(acked.duplicate);
                if let Some(l) = t.latest.as_mut() {
                    for (i, (key, value)) in b.latest.iter().enumerate() {
                        let offset = if acked.base_offset < 0 {
                            -1
                        } else {
                            acked.base_offset + i as i64
                        };
                        l.acked(*key, b.partition, offset, *value);
                    }
                }
                if let Some(w) = t.written.as_mut() {
                    let producer = w.producers[0];
                    w.ack(producer, b.partition, b.first_seq, count);
                }
                let done_us = (outcome.at - self.start).as_micros() as u64;
                t.latencies(&b, done_us);
                let service = outcome
                    .first_sent
                    .map_or(1, |s| ((outcome.at - s).as_micros() as u64).max(1));
                let _ = t.service_time.record_n(service, count);
                t.acked += count;
                t.bytes_acked += b.value_bytes;
                // In the steady state, its windows count its records only.
                let (warm, warm_bytes) = match t.steady.as_mut() {
                    Some(s) => {
                        s.acked += count - b.warmup as u64;
                        s.bytes += b.value_bytes - b.warmup_bytes;
                        (b.warmup as u64, b.warmup_bytes)
                    }
                    None => (0, 0),
                };
                t.window.records += count - warm;
                t.window.bytes += b.value_bytes - warm_bytes;
            }
            Err(error) => {
                if let Some(l) = t.latest.as_mut() {
                    for (key, _) in &b.latest {
                        l.failed(*key);
                    }
                }
                t.failed += count;
                t.window.failed += count;
                *t.errors.entry(error.to_string()).or_default() += count;
            }
        }
    }
}

/// The producer engine as the produce run drives it.
type Engine = kbench_client::Producer<Batch>;

/// A transactional producer's state: the open transaction, when it is due to end, and what the
/// ended ones came to. The transactional id is the [`kbench_client::Transactions`]' own.
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
    /// The share of transactions aborted on purpose, drawn by `draws` (seeded by the run's seed).
    abort_rate: f64,
    draws: SmallRng,
    /// Transactions aborted on purpose (of `aborted`).
    aborted_on_purpose: u64,
}

/// How long the coordinator keeps a transaction open without an EndTxn (`transaction.timeout.ms`,
/// Java's default).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// InitProducerId at `transactional_id`'s coordinator, with a timeout that outlasts a transaction.
async fn init_transactions(
    cluster: &Cluster,
    transactional_id: &str,
    duration: Duration,
) -> Result<kbench_client::Transactions, String> {
    cluster
        .init_transactions(transactional_id, TRANSACTION_TIMEOUT.max(duration * 2))
        .await
        .map_err(|e| format!("transactional.id {transactional_id:?}: {e}"))
}

impl TxnState {
    async fn begin_first(
        engine: &Engine,
        tally: &Mutex<Tally>,
        spec: &super::TransactionSpec,
        seed: u64,
    ) -> Result<TxnState, String> {
        let txns =
            init_transactions(engine.cluster(), &spec.transactional_id, spec.duration).await?;
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
            abort_rate: spec.abort_rate,
            // Its own stream, so that the abort draws leave the payloads as they were.
            draws: SmallRng::seed_from_u64(seed ^ 0x7478_6e5f_6162_6f72),
            aborted_on_purpose: 0,
        };
        state.begin(engine, tally).await?;
        Ok(state)
    }

    /// A new transaction: every partition of the run joins it (AddPartitionsToTxn).
    async fn begin(&mut self, engine: &Engine, tally: &Mutex<Tally>) -> Result<(), String> {
        let topic = engine.topic().to_string();
        self.txns
            .add_partitions(engine.cluster(), &topic, engine.partitions())
            .await
            .map_err(|e| e.to_string())?;
        let t = tally.lock().expect("tally lock");
        self.acked_at = t.acked;
        self.failed_at = t.failed;
        self.due = Instant::now() + self.duration;
        Ok(())
    }

    /// InitProducerId again after an abort: the same producer id under a new epoch.
    async fn restart(
        &mut self,
        cluster: &Cluster,
    ) -> Result<kbench_client::ProducerIdentity, String> {
        let id = self.txns.transactional_id().to_string();
        self.txns = init_transactions(cluster, &id, self.duration).await?;
        self.identities.push(self.txns.identity());
        Ok(self.txns.identity())
    }

    /// EndTxn: commit when `commit` and no record of the transaction failed, else abort; whether
    /// it committed. With `--verify`, the transaction's acknowledged records are settled as
    /// committed or aborted once the coordinator answered.
    async fn end(
        &mut self,
        cluster: &Cluster,
        tally: &Mutex<Tally>,
        commit: bool,
    ) -> Result<bool, String> {
        let (acked, failed) = {
            let t = tally.lock().expect("tally lock");
            (t.acked, t.failed)
        };
        let commit = commit && failed == self.failed_at;
        self.txns
            .end(cluster, commit)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(w) = tally.lock().expect("tally lock").written.as_mut() {
            w.settle(commit);
        }
        if commit {
            self.committed += 1;
        } else {
            self.aborted += 1;
            self.records_aborted += acked - self.acked_at;
        }
        Ok(commit)
    }

    /// Whether the transaction ending now is one the abort rate aborts on purpose.
    fn draw_abort(&mut self) -> bool {
        self.abort_rate > 0.0 && self.draws.random::<f64>() < self.abort_rate
    }

    /// A transaction past its duration: every batch of it sent and answered, then committed
    /// (aborted when a batch failed), and the next one begun. `Ok(false)` when `until` came
    /// first.
    async fn roll(
        &mut self,
        engine: &mut Engine,
        tally: &Mutex<Tally>,
        until: &Until<'_>,
    ) -> Result<bool, String> {
        if !engine.flush(until).await {
            return Ok(false);
        }
        // Drawn only for a transaction that would commit: one whose record failed aborts anyway.
        let failed = self.failed_at != tally.lock().expect("tally lock").failed;
        let on_purpose = !failed && self.draw_abort();
        let committed = self.end(engine.cluster(), tally, !on_purpose).await?;
        if on_purpose {
            self.aborted_on_purpose += 1;
        }
        if !committed && self.failed_at != tally.lock().expect("tally lock").failed {
            // Aborted: a batch of it failed, and its partition's sequence has a gap the broker
            // will not fill. As Java's producer does, the producer starts again under a new epoch
            // (InitProducerId), every sequence from 0.
            let identity = self.restart(engine.cluster()).await?;
            engine.set_identity(Some(identity), true);
        }
        self.begin(engine, tally).await?;
        Ok(true)
    }
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
    fn new(
        dist: Keys,
        given: Option<&[bytes::Bytes]>,
        partitions: &[i32],
        topic_partitions: usize,
    ) -> KeyChooser {
        let keys: Vec<bytes::Bytes> = match given {
            Some(keys) => keys.to_vec(),
            None => (0..dist.count()).map(Keys::key).collect(),
        };
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

/// Throttled, a record due before the run's end is still appended this long after it: a wait for
/// its intended time can end a little late (tokio's timers have a resolution of 1 ms). Past it, a
/// record not yet appended counts as unsent.
const TIMER_SLACK: Duration = Duration::from_millis(5);

/// Run the produce workload. Setup (connections, topic) is the caller's; this is the measured phase.
/// `on_interval` receives each progress window. A `stop` ends the run at once; records then in
/// flight count as failed with its reason.
pub async fn run_produce(
    cluster: Arc<Cluster>,
    topic: TopicLayout,
    spec: &ProduceSpec,
    stop: Stop,
    on_interval: impl Fn(&IntervalReport) + Send + Sync + 'static,
) -> ProduceRun {
    run_produce_until(
        cluster,
        topic,
        spec,
        stop,
        on_interval,
        CancellationToken::new(),
    )
    .await
}

/// A throttled run's records due before `end` that were never handed to the producer, from record
/// `from` on: how many, each one's wait from its intended time to `end` recorded in `latency` — as
/// a histogram corrected for coordinated omission holds it, so that a stall shows in the tail.
/// At most 10 M recordings: past that, each stands for an equal share of the records.
fn account_unsent(
    spec: &ProduceSpec,
    from: u64,
    end: Duration,
    latency: &mut Histogram<u64>,
) -> u64 {
    let intended = |i: u64| -> Option<Duration> {
        match (&spec.shape, spec.throughput) {
            (Some(s), _) => s.schedule().time_of(i),
            (None, Some(rate)) => Some(Duration::from_secs_f64(i as f64 / rate)),
            (None, None) => None,
        }
    };
    let due = |i: u64| i < spec.num_records && intended(i).is_some_and(|t| t < end);
    if !due(from) {
        return 0;
    }
    // The first record not due, by doubling then bisection (the schedule is monotonic).
    let (mut lo, mut hi) = (from, from + 1);
    while due(hi) {
        lo = hi;
        hi = from + (hi - from) * 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if due(mid) { lo = mid } else { hi = mid }
    }
    let unsent = hi - from;
    let stride = unsent.div_ceil(10_000_000).max(1);
    let mut schedule = spec.shape.as_ref().map(|s| s.schedule());
    let mut i = from;
    while i < hi {
        let n = stride.min(hi - i);
        let at = match (&mut schedule, spec.throughput) {
            (Some(s), _) => s.time_of(i),
            (None, Some(rate)) => Some(Duration::from_secs_f64(i as f64 / rate)),
            (None, None) => None,
        };
        if let Some(at) = at {
            let _ = latency.record_n(end.saturating_sub(at).as_micros().max(1) as u64, n);
        }
        i += n;
    }
    unsent
}

/// [`run_produce`], ending when `finish` is cancelled as it ends at its duration: no more records,
/// every batch sent and every request answered (a load that runs beside another measurement).
pub async fn run_produce_until(
    cluster: Arc<Cluster>,
    topic: TopicLayout,
    spec: &ProduceSpec,
    stop: Stop,
    on_interval: impl Fn(&IntervalReport) + Send + Sync + 'static,
    finish: CancellationToken,
) -> ProduceRun {
    let cancel = stop.token().clone();
    let partitions: Vec<i32> = match spec.partition {
        Some(p) => vec![p],
        None => topic.partitions.iter().map(|p| p.partition).collect(),
    };
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let values = spec.payload.values(&mut rng);
    // With `--verify`, this run's producer id.
    let verify_producer = spec.verify.then(crate::verify::new_producer_id);
    let phase = Phase::start(spec, cluster, verify_producer, on_interval);
    let records = Records::new(spec, rng, values, &partitions, topic.partitions.len());
    let engine: Engine = kbench_client::Producer::new(
        phase.cluster.clone(),
        &topic,
        partitions.clone(),
        spec.engine_options(phase.cluster.config().request_timeout),
        Arc::new(Accounting {
            tally: phase.tally.clone(),
            start: phase.start,
        }),
    );
    let deadline = spec.duration.map(|d| phase.start + d);
    let mut run = RecordLoop {
        spec,
        tally: phase.tally.clone(),
        clock: Clock {
            start: phase.start,
            now: phase.start,
            now_us: 0,
        },
        deadline,
        cancel: &cancel,
        finish: &finish,
        throttled: spec.throughput.is_some() || spec.shape.is_some(),
        schedule: spec.shape.as_ref().map(|s| s.schedule()),
        records,
        feed: Feed {
            sequences: vec![0u64; partitions.len()],
            engine,
            until: Until {
                cancel: &cancel,
                deadline,
            },
            partitions,
            verify_producer,
            waited: Duration::ZERO,
            warmup: spec.warmup_records,
            latest: spec.latest_values,
        },
        txn: None,
        stop_error: None,
        i: 0,
        wake_delay: latency_histogram(),
    };
    run.begin(&phase.cluster).await;
    run.run().await;
    let ending = run.end(&phase.cluster, &stop).await;
    phase.finish(ending).await
}

/// A measured phase's frame: the counters and clocks read at its start, the tally, and the tasks
/// that report its progress windows and cut its timeline while the record loop runs.
struct Phase<'a, F> {
    spec: &'a ProduceSpec,
    cluster: Arc<Cluster>,
    writes_before: (u64, u64),
    anomalies_before: BTreeMap<String, u64>,
    started_at: SystemTime,
    start: Instant,
    cpu_start: CpuTime,
    tally: Arc<Mutex<Tally>>,
    on_interval: Arc<F>,
    reporter: tokio::task::JoinHandle<()>,
    timeline: Arc<Mutex<crate::timeline::Timeline>>,
    timeliner: tokio::task::JoinHandle<()>,
}

impl<'a, F: Fn(&IntervalReport) + Send + Sync + 'static> Phase<'a, F> {
    /// The phase begins: counters and clocks read, the progress and timeline tasks started.
    fn start(
        spec: &'a ProduceSpec,
        cluster: Arc<Cluster>,
        verify_producer: Option<u64>,
        on_interval: F,
    ) -> Self {
        let writes_before = cluster.write_counts();
        let anomalies_before = cluster.protocol_anomalies();
        let started_at = SystemTime::now();
        let start = Instant::now();
        let cpu_start = CpuTime::now();
        let tally = Arc::new(Mutex::new(Tally::new(spec, start, verify_producer)));

        let on_interval = Arc::new(on_interval);
        let reporter = {
            let tally = tally.clone();
            let on_interval = on_interval.clone();
            let every = spec.reporting_interval.max(Duration::from_millis(10));
            tokio::spawn(async move {
                let mut due = Instant::now() + every;
                loop {
                    tokio::time::sleep_until(due.into()).await;
                    let report = {
                        let mut t = tally.lock().expect("tally lock");
                        // The window restarted (the warm-up's end): a whole interval from there.
                        if let Some(at) = t.window_restarted.take() {
                            due = at + every;
                            continue;
                        }
                        t.take_window(Instant::now())
                    };
                    due += every;
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
                    let (counts, histograms) =
                        tally.lock().expect("tally lock").timeline_snapshot();
                    timeline.lock().expect("timeline lock").take(
                        SystemTime::now(),
                        &counts,
                        histograms,
                    );
                }
            })
        };
        Phase {
            spec,
            cluster,
            writes_before,
            anomalies_before,
            started_at,
            start,
            cpu_start,
            tally,
            on_interval,
            reporter,
            timeline,
            timeliner,
        }
    }

    /// The phase ends: the progress and timeline tasks stopped (with interval histograms, the
    /// last, partial window reported), and the run's figures from the tally and `ending`.
    async fn finish(self, ending: Ending) -> ProduceRun {
        let spec = self.spec;
        self.reporter.abort();
        self.timeliner.abort();
        let _ = self.timeliner.await;
        // With interval histograms, the windows cover the whole run: the last, partial one is
        // reported too (kafka-producer-perf-test's lines, without them, end at the last full
        // window).
        if spec.interval_histograms {
            let _ = self.reporter.await;
            let last = self
                .tally
                .lock()
                .expect("tally lock")
                .take_window(Instant::now());
            (self.on_interval)(&last);
        }

        let elapsed = self.start.elapsed();
        let writes_after = self.cluster.write_counts();
        let cpu = CpuTime::now().since(self.cpu_start);
        let mut t = self.tally.lock().expect("tally lock");
        // The last, partial window: the windows add up to the run.
        let timeline = {
            let (counts, histograms) = t.timeline_snapshot();
            let mut timeline = std::mem::replace(
                &mut *self.timeline.lock().expect("timeline lock"),
                crate::timeline::Timeline::new(self.started_at, &[], &[]),
            );
            timeline.take(SystemTime::now(), &counts, histograms);
            timeline.into_windows()
        };
        let unsent = if ending.throttled {
            // Records never sent are all past the warm-up's when the steady state began.
            let mut waits = latency_histogram();
            let unsent = account_unsent(spec, ending.next, ending.loop_end, &mut waits);
            let _ = t.latency.add(&waits);
            if let Some(s) = t.steady.as_mut() {
                let _ = s.latency.add(&waits);
            }
            unsent
        } else {
            0
        };
        let steady_state = t.steady.as_ref().map(|s| SteadyState {
            warmup_records: spec.warmup_records,
            records: s.acked,
            bytes: s.bytes,
            // To the run's own end, not to now (the timeline and the unsent were taken since).
            elapsed: elapsed.saturating_sub(s.start.saturating_duration_since(self.start)),
            latency: s.latency.clone(),
        });
        let mut saturation = Saturation::judge(
            ending.throttled,
            t.last_publish_delay_us,
            ending.waited,
            cpu,
            elapsed,
        );
        let generator_delay = ending.throttled.then_some(ending.wake_delay);
        if let Some(g) = &generator_delay {
            saturation.generator_share(g, &t.latency);
        }
        debug_assert_eq!(
            t.outstanding(),
            0,
            "the engine's finish resolves every batch"
        );
        let anomalies = subtract(self.cluster.protocol_anomalies(), &self.anomalies_before);
        ProduceRun {
            records_sent: t.sent,
            records_acked: t.acked,
            records_failed: t.failed,
            records_unsent: unsent,
            bytes_acked: t.bytes_acked,
            started_at: self.started_at,
            ended_at: SystemTime::now(),
            elapsed,
            cpu,
            peak_rss_kib: peak_rss_kib(),
            latency: t.latency.clone(),
            service_time: t.service_time.clone(),
            publish_delay: t.publish_delay.clone(),
            generator_delay,
            saturation,
            errors: t.errors.clone(),
            aborted: ending.aborted,
            requests: ending.requests,
            batches: t.batches,
            frames_written: writes_after.0 - self.writes_before.0,
            socket_writes: writes_after.1 - self.writes_before.1,
            timeline,
            written: t.written.take(),
            latest: t.latest.take(),
            cluster: crate::cluster::ClusterReport::of(
                &ending.cluster_events,
                self.start,
                self.started_at,
            ),
            protocol_anomalies: anomalies,
            producer: ending.identity.map(|identity| ProducerReport {
                identities: ending
                    .txn
                    .as_ref()
                    .map_or_else(|| vec![identity], |s| s.identities.clone()),
                duplicate_batches: t.duplicate_batches,
                transactional_id: spec.producer.transactional_id.clone(),
                transactions_committed: ending.txn.as_ref().map_or(0, |s| s.committed),
                transactions_aborted: ending.txn.as_ref().map_or(0, |s| s.aborted),
                transactions_aborted_on_purpose: ending
                    .txn
                    .as_ref()
                    .map_or(0, |s| s.aborted_on_purpose),
                records_in_aborted_transactions: ending
                    .txn
                    .as_ref()
                    .map_or(0, |s| s.records_aborted),
            }),
            steady_state,
        }
    }
}

/// What the record loop leaves for the run's figures.
struct Ending {
    /// Why the run stopped early, if it did.
    aborted: Option<String>,
    /// Records due before this (from the run's start) were the run's to send.
    loop_end: Duration,
    /// The first record not appended.
    next: u64,
    throttled: bool,
    /// Time the record loop waited for the engine to take a batch.
    waited: Duration,
    requests: u64,
    identity: Option<kbench_client::ProducerIdentity>,
    cluster_events: kbench_client::ClusterEvents,
    txn: Option<TxnState>,
    /// How late each wait for an intended time ended, µs.
    wake_delay: Histogram<u64>,
}

/// The record loop's clock: the run's start, and the latest reading.
struct Clock {
    start: Instant,
    now: Instant,
    /// `now` in µs since `start`.
    now_us: u64,
}

impl Clock {
    /// Read the clock.
    fn read(&mut self) {
        self.now = Instant::now();
        self.now_us = (self.now - self.start).as_micros() as u64;
    }
}

/// What each record is made of, drawn in order from the run's seed: its key (and so its open
/// batch) and its value.
struct Records {
    rng: SmallRng,
    values: Vec<bytes::Bytes>,
    keys: KeyChooser,
    draw: Draw,
    digits: itoa::Buffer,
    /// `ProduceSpec::tombstones`: the share of keyed records written with a null value.
    tombstones: f64,
}

/// How a record's value is taken from the pooled values: decided once per run, so that a fixed
/// size costs one match on the hot path and a drawn one a single draw.
enum Draw {
    /// The one pooled value, every time (a fixed size, a one-line payload file).
    One,
    /// `Payload::Uniform`: a prefix of the one pooled value, of a length drawn from this range.
    Uniform(usize, usize),
    /// `Payload::Weighted`: the pooled value of the bucket a draw falls in (the buckets'
    /// cumulative shares).
    Weighted(Box<[f64]>),
    /// `Payload::Monotonic`: the record's number (offset + index × stride), in decimal.
    Monotonic { offset: u64, stride: u64 },
    /// A pooled value taken at random (payload file lines).
    Any,
}

/// One record to append: its key, the open batch it goes into, and its value.
struct Record<'a> {
    key: Option<&'a [u8]>,
    /// The key's number (with a key).
    key_no: Option<u32>,
    slot: usize,
    value: &'a [u8],
    /// Written with a null value (`value` unused).
    tombstone: bool,
}

impl Records {
    /// The records of `spec` over `partitions` (of a topic of `topic_partitions`).
    fn new(
        spec: &ProduceSpec,
        rng: SmallRng,
        values: Vec<bytes::Bytes>,
        partitions: &[i32],
        topic_partitions: usize,
    ) -> Records {
        Records {
            rng,
            keys: KeyChooser::new(
                spec.keys,
                spec.key_values.as_deref(),
                partitions,
                topic_partitions,
            ),
            draw: match &spec.payload {
                Payload::Uniform { min, max } => Draw::Uniform(*min, *max),
                Payload::Monotonic => Draw::Monotonic {
                    offset: spec.monotonic_offset,
                    stride: spec.monotonic_stride,
                },
                _ if values.len() == 1 => Draw::One,
                Payload::Weighted { sizes, .. } => Draw::Weighted(sizes.cumulative()),
                _ => Draw::Any,
            },
            values,
            digits: itoa::Buffer::new(),
            tombstones: spec.tombstones,
        }
    }

    /// Record `i`: its key drawn, then its value.
    fn next(&mut self, i: u64) -> Record<'_> {
        let key = self.keys.choose(&mut self.rng);
        let slot = key.map_or(0, |k| self.keys.batch_of[k]);
        let value: &[u8] = match &self.draw {
            Draw::One => &self.values[0],
            Draw::Uniform(min, max) => &self.values[0][..self.rng.random_range(*min..=*max)],
            Draw::Weighted(cumulative) => {
                &self.values[super::sizes::pick(cumulative, self.rng.random())]
            }
            Draw::Monotonic { offset, stride } => self
                .digits
                .format(offset.saturating_add(i.saturating_mul(*stride)))
                .as_bytes(),
            Draw::Any => &self.values[self.rng.random_range(0..self.values.len())],
        };
        let tombstone =
            key.is_some() && self.tombstones > 0.0 && self.rng.random::<f64>() < self.tombstones;
        Record {
            key: key.map(|k| &self.keys.keys[k][..]),
            key_no: key.map(|k| k as u32),
            slot,
            value,
            tombstone,
        }
    }
}

/// Where the records go: the producer engine's open batches, each stamped (with `--verify`) with
/// the partition's next sequence number, and the time the loop waited for the engine to take a
/// batch (the cluster's time, not the generator's: see `Saturation::judge`).
struct Feed<'a> {
    engine: Engine,
    until: Until<'a>,
    partitions: Vec<i32>,
    /// With `--verify`, this run's producer id and each partition's next sequence number.
    verify_producer: Option<u64>,
    sequences: Vec<u64>,
    waited: Duration,
    /// `ProduceSpec::warmup_records`: records numbered below it are the warm-up's.
    warmup: u64,
    /// `ProduceSpec::latest_values`: each record's key and value checksum kept with its batch.
    latest: bool,
}

impl Feed<'_> {
    /// Whether a batch is to close before the next record: one past its linger.ms, or the
    /// record's own, too full for `len` more bytes.
    fn room_due(&mut self, now: Instant, slot: usize, len: usize) -> bool {
        self.engine.next_linger().is_some_and(|due| now >= due) || self.engine.is_full(slot, len)
    }

    /// Close the batches past their linger.ms, then `slot`'s if `len` more bytes do not fit:
    /// whether one closed; `None` when the run ended first.
    async fn make_room(&mut self, now: Instant, slot: usize, len: usize) -> Option<bool> {
        let mut closed = false;
        if self.engine.next_linger().is_some_and(|due| now >= due) {
            closed = self.close_lingered(now).await?;
        }
        if self.engine.is_full(slot, len) {
            let closing = Instant::now();
            let room = self.engine.close(slot, &self.until).await;
            self.waited += closing.elapsed();
            if !room {
                return None;
            }
            closed = true;
        }
        Some(closed)
    }

    /// Close the batches past their linger.ms at `now`, timed: whether one closed; `None` when
    /// the run ended first.
    async fn close_lingered(&mut self, now: Instant) -> Option<bool> {
        let closing = Instant::now();
        let lingered = self.engine.close_lingered(now, &self.until).await;
        self.waited += closing.elapsed();
        lingered
    }

    /// Append `record` to its open batch (a new one opens at the clock's reading) with its
    /// CreateTime, its `--verify` stamp, and its intended send time (µs since the run's start).
    fn append(&mut self, record: &Record<'_>, clock: &Clock, intended_us: u64, i: u64) {
        let open = self.engine.open(record.slot, clock.now, None);
        if open.builder.is_empty() {
            let pos = open.pos();
            open.meta.opened_us = clock.now_us;
            open.meta.partition = self.partitions[pos];
            open.meta.first_seq = self.sequences[pos];
        }
        let timestamp =
            open.base_ms + (clock.now_us.saturating_sub(open.meta.opened_us) / 1000) as i64;
        let value = (!record.tombstone).then_some(record.value);
        match self.verify_producer {
            None => open.builder.append(timestamp, record.key, value, &[]),
            Some(producer_id) => {
                let pos = open.pos();
                let stamp = crate::verify::Stamp::encode(
                    producer_id,
                    self.sequences[pos],
                    value.unwrap_or(&[]),
                );
                self.sequences[pos] += 1;
                open.builder.append(
                    timestamp,
                    record.key,
                    value,
                    &[RecordHeader {
                        key: crate::verify::VERIFY_HEADER,
                        value: Some(&stamp),
                    }],
                );
            }
        }
        if self.latest
            && let Some(key) = record.key_no
        {
            open.meta.latest.push((key, value.map(crc32c::crc32c)));
        }
        let value_len = value.map_or(0, <[u8]>::len) as u64;
        open.meta.intended_us.push(intended_us);
        open.meta.value_bytes += value_len;
        if i < self.warmup {
            open.meta.warmup += 1;
            open.meta.warmup_bytes += value_len;
        }
    }
}

/// The record loop: each record made, timed (throttled, held until its intended time) and
/// appended, until the last, the run's end, a stop, `finish`, or a failure.
struct RecordLoop<'a> {
    spec: &'a ProduceSpec,
    tally: Arc<Mutex<Tally>>,
    clock: Clock,
    deadline: Option<Instant>,
    cancel: &'a CancellationToken,
    finish: &'a CancellationToken,
    /// A rate or a shape sets each record's intended send time.
    throttled: bool,
    schedule: Option<crate::shape::Schedule<'a>>,
    records: Records,
    feed: Feed<'a>,
    /// Transactional produce: the open transaction and the ended ones.
    txn: Option<TxnState>,
    /// Why the run must stop (the cluster gone, a producer id refused, a transaction failed).
    stop_error: Option<String>,
    /// The next record's number.
    i: u64,
    /// How late each wait for an intended time ended, µs.
    wake_delay: Histogram<u64>,
}

impl RecordLoop<'_> {
    /// The producer's identity before the first record: idempotent, this run's producer id (a
    /// broker that will not give one ends the run before it starts, saying why); transactional,
    /// the transaction coordinator's, and the first transaction begun.
    async fn begin(&mut self, cluster: &Cluster) {
        if let Some(t) = &self.spec.transaction() {
            match TxnState::begin_first(&self.feed.engine, &self.tally, t, self.spec.seed).await {
                Ok(state) => {
                    self.feed
                        .engine
                        .set_identity(Some(state.txns.identity()), true);
                    self.txn = Some(state);
                }
                Err(e) => self.stop_error = Some(e),
            }
        } else if self.spec.producer.idempotent() {
            match cluster.init_producer_id().await {
                Ok(identity) => self.feed.engine.set_identity(Some(identity), false),
                Err(e) => self.stop_error = Some(format!("InitProducerId: {e}")),
            }
        }
    }

    /// Every record, in turn, until the loop ends.
    async fn run(&mut self) {
        while self.stop_error.is_none() && self.i < self.spec.num_records {
            // The clock, read for every record when throttled, and every CLOCK_EVERY records (and
            // at each new batch) when not: a reading is a record's append time, its CreateTime,
            // and (unthrottled) its intended send time. Unthrottled appends take a fraction of a
            // µs each, so a record's time is at most CLOCK_EVERY appends (a few µs) early; reading
            // the clock for every record cost a fifth of the CPU at 1 MB batches
            // (docs/PERFORMANCE.md).
            if (self.throttled
                || self.i.is_multiple_of(CLOCK_EVERY)
                || self.feed.engine.is_empty(0))
                && !self.on_clock().await
            {
                break;
            }
            // Throttled, the record's intended time from the run's start (a shape's ends the run
            // when the shape ends); unthrottled, its append time.
            let scheduled = match (&mut self.schedule, self.spec.throughput) {
                (Some(s), _) => match s.time_of(self.i) {
                    Some(at) => Some(at),
                    None => break,
                },
                (None, Some(rate)) => Some(Duration::from_secs_f64(self.i as f64 / rate)),
                (None, None) => None,
            };
            let intended = scheduled.map_or(self.clock.now, |offset| self.clock.start + offset);
            // The run's duration ends the schedule: a record due at or after it is not due.
            if scheduled.is_some() && self.deadline.is_some_and(|d| intended >= d) {
                break;
            }
            // Throttled: wait for the record's intended time, closing lingering batches on the way;
            // how late the wait ended is the generator's own delay.
            if self.clock.now < intended {
                if !self.wait_until(intended).await {
                    break;
                }
                let late = self.clock.now.saturating_duration_since(intended);
                let _ = self.wake_delay.record((late.as_micros() as u64).max(1));
            }
            // The warm-up's last record was sent: the steady state begins with this one.
            if self.i == self.feed.warmup && self.i > 0 {
                self.tally
                    .lock()
                    .expect("tally lock")
                    .begin_steady(Instant::now());
            }
            let record = self.records.next(self.i);
            // Batches past their linger.ms close, and so does this record's batch when it is full
            // (the check is inline: no future is made per record unless a batch is due).
            let (slot, len) = (record.slot, record.value.len());
            if self.feed.room_due(self.clock.now, slot, len) {
                match self.feed.make_room(self.clock.now, slot, len).await {
                    // The new batch's base time is read afresh.
                    Some(true) => self.clock.read(),
                    Some(false) => {}
                    None => break,
                }
            }
            let intended_us = scheduled.map_or(self.clock.now_us, |o| o.as_micros() as u64);
            self.feed.append(&record, &self.clock, intended_us, self.i);
            self.i += 1;
        }
    }

    /// A clock reading, and what is checked on it: the run's end, a stop, the cluster gone, a
    /// transaction due to end. `false` when the loop ends.
    async fn on_clock(&mut self) -> bool {
        self.clock.read();
        let now = self.clock.now;
        // Throttled, the schedule decides what is due before the end (below); a record due
        // before it is still appended just after it, within the timer's resolution.
        let past = if self.throttled {
            self.deadline.is_some_and(|d| now >= d + TIMER_SLACK)
        } else {
            self.deadline.is_some_and(|d| now >= d)
        };
        if past
            || (self.i.is_multiple_of(1024)
                && (self.cancel.is_cancelled() || self.finish.is_cancelled()))
        {
            return false;
        }
        if self.i.is_multiple_of(1024)
            && let Some(since) = self.feed.engine.gone_since()
        {
            self.stop_error = Some(self.gone(since));
            return false;
        }
        // A transaction ends when its time is up, or (as Java's producer's abortable error
        // makes the application abort) as soon as a record of it failed: the records after it
        // could only fail too.
        if let Some(state) = self.txn.as_mut()
            && (now >= state.due
                || (self.i.is_multiple_of(256)
                    && self.tally.lock().expect("tally lock").failed != state.failed_at))
        {
            match state
                .roll(&mut self.feed.engine, &self.tally, &self.feed.until)
                .await
            {
                Ok(true) => {}
                Ok(false) => return false,
                Err(e) => {
                    self.stop_error = Some(e);
                    return false;
                }
            }
            self.clock.read();
        }
        true
    }

    /// Throttled: wait for `intended`, closing lingering batches on the way. `false` when the
    /// loop ends first.
    async fn wait_until(&mut self, intended: Instant) -> bool {
        while self.clock.now < intended {
            let wake = self
                .feed
                .engine
                .next_linger()
                .map_or(intended, |d| d.min(intended));
            // Within tens of µs of the intended time, not at tokio's next millisecond tick: the
            // generator's own delay is not the broker's latency (crate::pace).
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                _ = self.finish.cancelled() => return false,
                _ = crate::pace::sleep_until(wake) => {}
            }
            self.clock.read();
            if let Some(since) = self.feed.engine.gone_since() {
                self.stop_error = Some(self.gone(since));
                return false;
            }
            if self.feed.close_lingered(self.clock.now).await.is_none() {
                return false;
            }
        }
        true
    }

    /// Why the run ended when the cluster stopped answering `since`.
    fn gone(&self, since: Instant) -> String {
        gone(since, self.clock.start, self.spec.producer.delivery_timeout)
    }

    /// The loop's end: what is outstanding flushed (with a duration, within a bounded grace), the
    /// last transaction committed or aborted, and the engine finished.
    async fn end(mut self, cluster: &Cluster, stop: &Stop) -> Ending {
        // Records due before this were the run's to send (the duration ends the schedule).
        let loop_end = self
            .clock
            .start
            .elapsed()
            .min(self.spec.duration.unwrap_or(Duration::MAX));
        // With a duration, what is still outstanding gets a bounded grace, whatever the broker's
        // state (a dead broker would otherwise hold the run until the delivery timeout).
        let grace_end = self
            .deadline
            .map(|d| d.max(Instant::now()) + DURATION_GRACE);
        let flushed = self
            .feed
            .engine
            .flush(&Until {
                cancel: self.cancel,
                deadline: grace_end,
            })
            .await;
        let grace_expired = !flushed && !self.cancel.is_cancelled();
        // The last transaction: committed when every batch of it was answered, else aborted.
        if let Some(state) = self.txn.as_mut()
            && self.stop_error.is_none()
        {
            let complete = flushed && !self.cancel.is_cancelled();
            let failed = state.failed_at != self.tally.lock().expect("tally lock").failed;
            // The last transaction is drawn too, as every other that would commit.
            let on_purpose = complete && !failed && state.draw_abort();
            match state
                .end(cluster, &self.tally, complete && !on_purpose)
                .await
            {
                Ok(_) if on_purpose => state.aborted_on_purpose += 1,
                Ok(_) => {}
                Err(e) => self.stop_error = Some(e),
            }
        }
        let aborted = self.stop_error.clone().or_else(|| stop.reason());
        let reason = match (&aborted, grace_expired) {
            (Some(why), _) => why.clone(),
            (None, true) => format!(
                "still unanswered {} s after the run's duration ended",
                DURATION_GRACE.as_secs()
            ),
            (None, false) => "stopped".into(),
        };
        let requests = self.feed.engine.requests_sent();
        let identity = self.feed.engine.identity();
        let cluster_events = self
            .feed
            .engine
            .finish(&format!("in flight when the run stopped: {reason}"));
        Ending {
            aborted,
            loop_end,
            next: self.i,
            throttled: self.throttled,
            waited: self.feed.waited,
            requests,
            identity,
            cluster_events,
            txn: self.txn,
            wake_delay: self.wake_delay,
        }
    }
}

/// Counts gained since `before`.
fn subtract(after: BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .into_iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (d > 0).then_some((k, d))
        })
        .collect()
}

/// Why a run ended when the cluster stopped answering.
fn gone(since: Instant, start: Instant, delivery_timeout: Duration) -> String {
    let from = since.saturating_duration_since(start).as_secs_f64();
    format!(
        "no broker answered for {:.1} s from {from:.1} s: batches failed after delivery.timeout.ms ({} ms)",
        since.elapsed().as_secs_f64(),
        delivery_timeout.as_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator whose own delay is a quarter or more of the latency it reports (and at least
    /// 100 µs) is said to shape it; tokio's old millisecond wake-ups against a 0.2 ms broker were
    /// 1.4 ms of 1.6; tens of µs against the same broker are not.
    #[test]
    fn a_generator_delay_that_shapes_the_latency_is_said() {
        let h = |us: u64| {
            let mut h = latency_histogram();
            h.record_n(us, 100).unwrap();
            h
        };
        let mut s = Saturation::default();
        s.generator_share(&h(1_430), &h(1_640));
        assert!(s.saturated, "{s:?}");
        assert!(s.reasons[0].contains("generator's own delay"), "{s:?}");
        let mut s = Saturation::default();
        s.generator_share(&h(40), &h(250));
        assert!(!s.saturated && s.reasons.is_empty(), "{s:?}");
        // Long waits for a slow broker: the generator's part is small.
        let mut s = Saturation::default();
        s.generator_share(&h(150), &h(20_000));
        assert!(!s.saturated, "{s:?}");
    }

    /// A warm-up's records acknowledged after the warm-up ended count in the run's figures only;
    /// from the warm-up's end the windows count the steady state's records, from its start.
    #[test]
    fn warm_up_records_stay_out_of_the_steady_state() {
        let spec = ProduceSpec {
            interval_histograms: true,
            warmup_records: 2,
            ..ProduceSpec::default()
        };
        let start = Instant::now();
        let mut t = Tally::new(&spec, start, None);
        let early = Batch {
            intended_us: vec![10, 10],
            warmup: 2,
            warmup_bytes: 200,
            value_bytes: 200,
            ..Batch::default()
        };
        t.latencies(&early, 1_010);
        assert_eq!(t.window.latency.as_ref().map(Histogram::len), Some(2));
        let boundary = start + Duration::from_millis(5);
        t.begin_steady(boundary);
        assert_eq!(t.window_restarted, Some(boundary));
        assert!(t.window.steady_state_begins && t.window.records == 0);
        // Two warm-up records and three of the steady state in one batch, answered later.
        let mixed = Batch {
            intended_us: vec![20, 20, 5_000, 5_000, 6_000],
            warmup: 2,
            warmup_bytes: 200,
            value_bytes: 500,
            ..Batch::default()
        };
        t.latencies(&mixed, 8_000);
        assert_eq!(t.latency.len(), 7);
        let steady = t.steady.as_ref().expect("the steady state");
        assert_eq!(steady.latency.len(), 3);
        assert!(steady.latency.equivalent(steady.latency.max(), 3_000));
        assert_eq!(t.window.latency_sum_us, 3_000 + 3_000 + 2_000);
        assert_eq!(t.window.latency.as_ref().map(Histogram::len), Some(3));
        let w = t.take_window(boundary + Duration::from_millis(1));
        assert!(w.steady_state_begins);
        assert!(
            !t.window.steady_state_begins,
            "only the first window says so"
        );
    }

    fn counts(keys: Keys, draws: usize) -> Vec<usize> {
        let mut chooser = KeyChooser::new(keys, None, &[0, 1, 2, 3], 4);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut counts = vec![0; keys.count() as usize];
        for _ in 0..draws {
            counts[chooser.choose(&mut rng).expect("keyed")] += 1;
        }
        counts
    }

    #[test]
    fn a_run_too_short_to_measure_its_cpu_share_is_not_called_saturated() {
        let tick = CpuTime {
            user_us: 4_000,
            sys_us: 0,
        };
        let s = Saturation::judge(false, 0, Duration::ZERO, tick, Duration::from_millis(3));
        assert!(!s.saturated, "{:?}", s.reasons);
        assert!(s.cpu_share > 1.0, "the share is still recorded");
        let busy = CpuTime {
            user_us: 950_000,
            sys_us: 0,
        };
        let s = Saturation::judge(false, 0, Duration::ZERO, busy, Duration::from_secs(1));
        assert!(
            s.saturated && s.reasons[0].contains("95 % of a core"),
            "{:?}",
            s.reasons
        );
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
        let mut none = KeyChooser::new(Keys::None, None, &[0], 1);
        assert_eq!(none.choose(&mut SmallRng::seed_from_u64(1)), None);
    }

    #[test]
    fn a_key_goes_to_the_batch_of_its_murmur2_partition() {
        // Partitions listed out of order: the batch index is the listed position.
        let chooser = KeyChooser::new(Keys::RoundRobin { count: 50 }, None, &[2, 0, 1], 3);
        for (k, idx) in chooser.batch_of.iter().enumerate() {
            let p = kbench_client::partitioner::partition_for_key(&Keys::key(k as u32), 3) as i32;
            assert_eq!([2, 0, 1][*idx], p);
        }
        // One partition chosen (--partition): every key goes to it.
        let one = KeyChooser::new(Keys::Random { count: 50 }, None, &[5], 8);
        assert!(one.batch_of.iter().all(|i| *i == 0));
    }
}
