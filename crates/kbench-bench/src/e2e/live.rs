//! What an e2e run shows while it runs (live counters and histograms, read by progress lines and the
//! HTTP API) and what it leaves behind ([`E2eRun`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_wire::Negotiated;

use crate::measure::{CpuTime, latency_histogram};

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
    /// Records of streams past the duplicate tracker's budget (`MAX_TRACKED_STREAMS`): counted,
    /// not checked for duplicates.
    pub untracked: AtomicU64,
    pub produce_requests: AtomicU64,
    pub fetches: AtomicU64,
    pub commits: AtomicU64,
    pub commit_failures: AtomicU64,
    pub heartbeats: AtomicU64,
    pub rejoins: AtomicU64,
    /// The native consumer group's counts (heartbeats, rejoins, commits) and whether a member is
    /// rebalancing (the drain waits for it), shared by its members' sessions.
    pub group: Arc<kbench_client::GroupCounters>,
    /// Fetch answers whose batches left a hole below later records: the consumer held its position
    /// at the hole and asked again (see [`readable_until`]).
    pub gaps_held: AtomicU64,
    /// Holes that stayed open for the whole hold and were passed over (re-read after the drain).
    pub gaps_skipped: AtomicU64,
    /// Records of this run never consumed in time but found on the broker when the missing offsets
    /// were read again after the drain.
    pub late: AtomicU64,
    /// Of `late`, per partition.
    pub late_by_partition: Mutex<BTreeMap<i32, u64>>,
    pub producer_latency: Mutex<Histogram<u64>>,
    /// Per record: its batch's scheduled time → the batch's request sent (OMB's publish delay).
    pub publish_delay: Mutex<Histogram<u64>>,
    /// Batches whose turn came more than one interval late: the schedule restarted from then (the
    /// seed's pacing), so the batches in between were never sent — the rate was not sustained.
    pub schedule_slips: AtomicU64,
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
    /// A distributed run's consumer: this run's records read, per agent's producers.
    pub segments: Mutex<Segments>,
    /// `--verify`: what the producers had acknowledged and what the consumer checked.
    pub verify: Mutex<Option<E2eVerify>>,
    /// With a schema registry: what decoding the values found (the consumer's, at its end).
    pub value_decoding: Mutex<Option<crate::schema::decode::DecodeReport>>,
    /// What the cluster did, as the producers saw it (each adds its engine's events at its end).
    pub cluster: Mutex<kbench_client::ClusterEvents>,
    /// And as the consumer saw it.
    pub consumer_cluster: Mutex<kbench_client::ClusterEvents>,
    /// Batches whose turn came late because the producer had waited for the cluster (a slow
    /// broker, a partition without a leader): the cluster's time, not the generator's.
    pub cluster_slips: AtomicU64,
    /// Why the re-read of missing offsets after the drain could not finish (a broker gone, out of
    /// time): what was not found then is unverifiable, never lost.
    pub reread_failed: Mutex<Option<String>>,
    /// With `keep_trips`: every whole trip (µs), in the order the consumer read the records.
    pub trips: Mutex<Option<Vec<u64>>>,
    /// Whether this run created its topic (it did not exist).
    pub topic_created: std::sync::atomic::AtomicBool,
    /// Connected to the cluster (or the REST Proxy), the topic ready: what "starting" waits on
    /// after this is the consumer's join.
    pub connected: std::sync::atomic::AtomicBool,
    /// Request-reply with `--app-group`: the application group's lag, sampled.
    pub app_lag: Mutex<Option<crate::e2e::AppLag>>,
    /// Woken when a record's outcome is known or records were read: a closed loop's turn.
    pub(crate) turn: tokio::sync::Notify,
    phase: Mutex<&'static str>,
    pub(crate) started: Mutex<Option<Instant>>,
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
            untracked: AtomicU64::new(0),
            produce_requests: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_failures: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            rejoins: AtomicU64::new(0),
            group: Arc::default(),
            gaps_held: AtomicU64::new(0),
            gaps_skipped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            late_by_partition: Mutex::new(BTreeMap::new()),
            producer_latency: Mutex::new(latency_histogram()),
            publish_delay: Mutex::new(latency_histogram()),
            schedule_slips: AtomicU64::new(0),
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
            segments: Mutex::new(Segments::default()),
            verify: Mutex::new(None),
            value_decoding: Mutex::new(None),
            cluster: Mutex::new(Default::default()),
            consumer_cluster: Mutex::new(Default::default()),
            cluster_slips: AtomicU64::new(0),
            reread_failed: Mutex::new(None),
            trips: Mutex::new(None),
            topic_created: Default::default(),
            connected: Default::default(),
            app_lag: Mutex::new(None),
            turn: tokio::sync::Notify::new(),
            phase: Mutex::new("starting"),
            started: Mutex::new(None),
        }
    }
}

/// The producers of a distributed run as its consumer counts them: each agent's range of producer
/// ids, the run's records read from them (once each), and — told after the producers ended — how
/// many each agent's producers had acknowledged (`None` for an agent lost mid-run).
#[derive(Debug, Default)]
pub struct Segments {
    ranges: Vec<std::ops::Range<u32>>,
    read: Vec<u64>,
    acked: Option<Vec<Option<u64>>>,
}

/// One agent's producers, as the consumer of a distributed run counted them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SegmentFigures {
    pub first_producer: u32,
    pub producers: u32,
    /// Distinct records of the run read from these producers (re-read late ones included).
    pub records_read: u64,
    /// What these producers acknowledged, as the coordinator told the consumer.
    pub records_acked: Option<u64>,
}

impl Segments {
    /// Segments for these producer ranges, nothing read yet.
    pub fn new(ranges: Vec<std::ops::Range<u32>>) -> Segments {
        Segments {
            read: vec![0; ranges.len()],
            ranges,
            acked: None,
        }
    }

    /// A record of producer `p` read for the first time.
    pub(crate) fn count(&mut self, p: u32) {
        if let Some(i) = self.ranges.iter().position(|r| r.contains(&p)) {
            self.read[i] += 1;
        }
    }

    /// The producers' acknowledged counts, per segment; from now on the drain waits for them.
    pub fn set_acked(&mut self, acked: Vec<Option<u64>>) {
        self.acked = Some(acked);
    }

    /// Acknowledged records not read yet (over the segments whose counts are known), and records
    /// read beyond what was acknowledged; `None` before the counts were told.
    pub(crate) fn missing_and_extra(&self) -> Option<(u64, u64)> {
        let acked = self.acked.as_ref()?;
        let mut missing = 0u64;
        let mut extra = 0u64;
        for (read, acked) in self.read.iter().zip(acked) {
            if let Some(a) = acked {
                missing += a.saturating_sub(*read);
                extra += read.saturating_sub(*a);
            }
        }
        Some((missing, extra))
    }

    pub fn figures(&self) -> Vec<SegmentFigures> {
        self.ranges
            .iter()
            .enumerate()
            .map(|(i, r)| SegmentFigures {
                first_producer: r.start,
                producers: r.end - r.start,
                records_read: self.read[i],
                records_acked: self
                    .acked
                    .as_ref()
                    .and_then(|a| a.get(i).copied().flatten()),
            })
            .collect()
    }
}

/// An e2e timeline's counters.
pub const TIMELINE_COUNTERS: &[&str] = &["records", "failed", "consumed"];
/// An e2e timeline's histograms.
pub const TIMELINE_HISTOGRAMS: &[&str] =
    &["producer_request_duration", "publish_delay", "whole_trip"];

impl E2eLive {
    /// The cumulative figures a timeline window is the difference of.
    pub(crate) fn timeline_snapshot(&self) -> ([u64; 3], Vec<Histogram<u64>>) {
        let h = |m: &Mutex<Histogram<u64>>| m.lock().expect("latency lock").clone();
        (
            [get(&self.acked), get(&self.failed), get(&self.consumed)],
            vec![
                h(&self.producer_latency),
                h(&self.publish_delay),
                h(&self.whole_trip),
            ],
        )
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

    /// Commits, failed commits, heartbeats and rejoins: the REST driver's and the native group's.
    pub(crate) fn group_figures(&self) -> (u64, u64, u64, u64) {
        let g = &self.group;
        (
            get(&self.commits) + get(&g.commits),
            get(&self.commit_failures) + get(&g.commits_refused) + get(&g.commit_failures),
            get(&self.heartbeats) + get(&g.heartbeats),
            get(&self.rejoins) + get(&g.rejoins),
        )
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
            commits: get(&self.commits) + get(&self.group.commits),
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
    /// Before the load: the consumer joined and positioned, every producer connected.
    pub startup: Duration,
    /// When the load started (every producer connected).
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
    /// Of `late`, where and why.
    pub unread: BTreeMap<i32, crate::e2e::UnreadPartition>,
    pub gaps_held: u64,
    pub gaps_skipped: u64,
    /// Consumed although their request was reported failed (e.g. acknowledged after a time-out).
    pub unexpected: u64,
    pub foreign: u64,
    /// Consumed past the duplicate tracker's stream budget: counted, not checked for duplicates.
    pub untracked: u64,
    pub produce_requests: u64,
    pub fetches: u64,
    pub commits: u64,
    pub commit_failures: u64,
    pub heartbeats: u64,
    pub rejoins: u64,
    pub producer_latency: Histogram<u64>,
    pub publish_delay: Histogram<u64>,
    pub schedule_slips: u64,
    /// Batches late because the producer waited for the cluster (never the generator's
    /// saturation).
    pub cluster_slips: u64,
    /// What the cluster did, as the producers saw it.
    pub cluster: crate::cluster::ClusterReport,
    /// What the cluster did, as the consumer saw it.
    pub consumer_cluster: crate::cluster::ClusterReport,
    /// Whether the load generator set the pace (a slipped schedule, or a busy core).
    pub saturation: crate::produce::phase::Saturation,
    pub whole_trip: Histogram<u64>,
    pub fetch_duration: Histogram<u64>,
    pub consumer_processing: Histogram<u64>,
    /// The REST Proxy driver's own figures (None for the native driver).
    pub rest: Option<RestFigures>,
    /// A distributed run's consumer: its counts per agent's producers (empty otherwise).
    pub segments: Vec<SegmentFigures>,
    /// The load and drain window by window: counters [`TIMELINE_COUNTERS`], histograms
    /// [`TIMELINE_HISTOGRAMS`].
    pub timeline: Vec<crate::timeline::Window>,
    /// Which clock whole trip was measured on.
    pub clock: &'static str,
    pub group_id: String,
    pub member_id: Option<String>,
    /// With several consumers: each member and its partitions at the end.
    pub members: Vec<crate::result::E2eMemberEnd>,
    /// With several members or group faults: the group's members, rebalances and faults.
    pub group: Option<crate::consume::group::GroupReport>,
    pub assignment: Vec<i32>,
    pub negotiated: Negotiated,
    /// Acknowledged, not consumed, and not known to be on the broker or not: the re-read by offset
    /// could not finish (`unverified_reason`). Never counted lost.
    pub unverified: u64,
    pub unverified_reason: Option<String>,
    /// Responses read with bytes after their body, by kind, over every connection of the run.
    pub protocol_anomalies: BTreeMap<String, u64>,
    pub cpu: CpuTime,
    pub peak_rss_kib: u64,
    pub errors: BTreeMap<String, u64>,
    pub aborted: Option<String>,
    /// `--verify`: the consumer's record-by-record check against what was acknowledged.
    pub verification: Option<crate::verify::VerifyReport>,
    /// `--verify` over agents, a producer agent's part: what it acknowledged, for the consumer's.
    pub written: Option<crate::verify::WrittenWire>,
    /// Request-reply: the settings; the counts above are then of requests (produced, acked,
    /// failed) and replies (consumed, duplicates, foreign: unmatched), `whole_trip` is request →
    /// reply, and `lost` counts requests acknowledged and never answered.
    pub reply: Option<crate::e2e::ReplySpec>,
    /// With `--app-group`: the application group's lag, sampled.
    pub app_lag: Option<crate::e2e::AppLag>,
    /// With a schema registry: the consumer's decoding of every value it read.
    pub value_decoding: Option<crate::schema::decode::DecodeReport>,
}

/// `--verify` in an e2e run: producer `i` stamps its records as producer `base + i`; each ack is
/// recorded in `written`, each record read is checked by `verifier`.
#[derive(Debug)]
pub struct E2eVerify {
    pub base: u64,
    pub written: crate::verify::Written,
    pub verifier: crate::verify::Verifier,
}

impl E2eVerify {
    /// For `producers` producers numbered from `first` (a consumer-only run: any stamped record).
    pub fn new(producers: Option<(u32, usize)>) -> E2eVerify {
        let base = crate::verify::new_producer_id();
        match producers {
            Some((first, n)) => {
                let ids: Vec<u64> = (0..n as u64)
                    .map(|i| base.wrapping_add(u64::from(first) + i))
                    .collect();
                E2eVerify {
                    base,
                    written: crate::verify::Written {
                        producers: ids.clone(),
                        ..Default::default()
                    },
                    verifier: crate::verify::Verifier::for_producers(&ids),
                }
            }
            None => E2eVerify {
                base,
                written: Default::default(),
                verifier: crate::verify::Verifier::any_producer(),
            },
        }
    }

    /// Producer `idx`'s stamp id.
    pub fn producer_id(&self, idx: u32) -> u64 {
        self.base.wrapping_add(u64::from(idx))
    }
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
