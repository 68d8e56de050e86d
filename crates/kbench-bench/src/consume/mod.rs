//! The consume workload, in kafka-consumer-perf-test's terms: read `messages` records of a topic as
//! fast as the broker hands them out, in a consumer group (join, committed offsets or
//! `auto.offset.reset`, heartbeats, commits, leave) or assigned partitions (no group), and report
//! MB and records per second with the join ("rebalance") time apart, as that tool does — plus
//! kbench's own figures: client CPU per record, Fetch latency, the versions used.
//!
//! Records are decoded with kbench's own decoder (CRC-32C checked for every batch, compressed
//! batches decompressed); a record counts when it was decoded, and its bytes are its key's and
//! value's lengths (the tool's count). The run stops at exactly `messages` records, or when no
//! record arrived for `timeout` (the tool's `--timeout`), or when stopped.

pub mod backlog;
mod phase;

pub use phase::run_consume;

pub mod group;
pub mod topics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use kbench_client::{
    ClientError, Cluster, ClusterConfig, ConsumerProperties, ConsumerSettings, OffsetReset,
    TopicLayout,
};
use kbench_wire::{ApiKey, api_name};
use serde::Serialize;

use crate::error::{BenchError, SpecError};
use crate::measure::{CpuTime, LatencySummary, latency_histogram};
use crate::result::{Header, Kind, Target, rfc3339};
use crate::spec::{MAX_WAIT, check_consumer, check_duration, check_range, check_topic};
use crate::stop::Stop;

/// How the consumer gets its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumeMode {
    /// A consumer group: kbench joins as its (only) member and is assigned every partition.
    Group { group_id: String },
    /// These partitions (every partition when empty), assigned: no group, nothing committed.
    Assign { partitions: Vec<i32> },
}

/// Where reading starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// A group's committed offset where there is one, else this (assigned partitions: this).
    Reset(OffsetReset),
    /// This offset in every partition read (assign mode).
    Offset(i64),
}

/// A consume run's settings. Serialisable (what lives only in this process excepted): the same
/// spec travels to distributed agents.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ConsumeSpec {
    pub topic: String,
    /// `--include REGEX` (kafka-consumer-perf-test's): read every topic whose whole name the
    /// regex matches, found when the run starts (internal topics left out, as Java's consumer
    /// leaves them); `topic` is then not read. See [`run_consume_job`].
    pub include: Option<String>,
    /// Records to read (`--messages`).
    pub messages: u64,
    pub mode: ConsumeMode,
    pub start: StartAt,
    /// The consumer's settings, whole (Java's defaults): fetch sizes and wait, session,
    /// heartbeat and commit interval, isolation level.
    pub consumer: ConsumerSettings,
    /// End the run when no record arrived for this long (`--timeout`).
    pub timeout: Duration,
    pub reporting_interval: Duration,
    /// Group mode: commit positions every `consumer.auto_commit_interval` and at the end.
    pub commit: bool,
    /// Client properties as given, for the result document.
    pub properties: Vec<(String, String)>,
    /// Record each record's end-to-end latency: the wall clock when its fetch was answered less its
    /// timestamp (CreateTime, ms), as OMB measures it.
    pub end_to_end: bool,
    /// The length of a timeline window (the result's `intervals`, `--histogram-log`).
    pub timeline_interval: Duration,
    /// Where timeline windows go as they close (live metrics, progress).
    #[serde(skip)]
    pub window_sink: crate::timeline::WindowSink,
    /// Check every record's stamp ([`crate::verify`]): order per producer and partition,
    /// duplicates, checksums, sequence gaps (`--verify`).
    pub verify: bool,
    /// The deserializer's properties (`schema.registry.url`, `basic.auth.user.info`, …): with a
    /// registry, every value is decoded with the schema its id names ([`crate::schema::decode`]).
    /// Not serialized with the spec: a segment carries it apart, as an e2e consumer's.
    #[serde(skip)]
    pub deserializer: BTreeMap<String, String>,
    /// `--latest-values FILE`: every key's last value read is checked against the file's
    /// ([`crate::latest`]).
    pub latest_values: Option<crate::latest::LatestFile>,
    /// Members of the group reading together (`--consumers`), each with its own connections and
    /// member id ([`group`]); 1 is kafka-consumer-perf-test's one consumer.
    pub consumers: u32,
    /// Group faults (`--fault at=T consumer-join=K`, `consumer-leave=K`, `consumer-crash=K`,
    /// `consumer-restart=K`),
    /// applied by the run, in time order. Not over agents.
    #[serde(skip)]
    pub member_faults: Vec<crate::fault::Fault>,
    /// `--include`'s topics: the records every topic's reading has read, which `messages` counts.
    #[serde(skip)]
    pub shared_total: SharedTotal,
    /// Several members in one group (`--consumers N`, `--include`'s topics): the order in which
    /// they leave it at the run's end, leader first ([`LeaveOrder`]). Set by the run.
    #[serde(skip)]
    pub leave_order: SharedLeave,
    /// A distributed segment: reading starts when this process's wall clock ([`crate::clock`])
    /// reads this, µs since the Unix epoch (every agent's members at once).
    #[serde(default)]
    pub start_at_us: Option<u64>,
    /// A distributed segment whose coordinator writes `--histogram-log`: the result's `intervals`
    /// keep each window's histograms whole ([`crate::timeline::Interval::histograms`]), for the
    /// merge to add up exactly.
    #[serde(default)]
    pub window_histograms: bool,
}

/// Records read by several readings together, and the gate each holds while it counts them, so
/// that their one target is met exactly (`--include`'s topics, [`topics`]).
#[derive(Debug, Default)]
pub struct SharedCount {
    pub records: std::sync::atomic::AtomicU64,
    pub gate: std::sync::Mutex<()>,
    /// The readings (members) that end together, and those that have made their last commit:
    /// none leaves the group before every one has committed, since a member's LeaveGroup starts
    /// a rebalance in which the coordinator refuses the others' commits.
    readings: usize,
    committed: std::sync::atomic::AtomicUsize,
    all_committed: tokio::sync::Notify,
}

impl SharedCount {
    /// For `readings` readings (members) that end together.
    pub fn new(readings: usize) -> SharedCount {
        SharedCount {
            readings,
            ..SharedCount::default()
        }
    }

    /// A reading has made its last commit (or has none to make); with `wait`, until every
    /// reading has, for at most `bound`.
    pub async fn last_commit(&self, wait: bool, bound: Duration) {
        use std::sync::atomic::Ordering::SeqCst;
        let done = || self.committed.load(SeqCst) >= self.readings;
        self.committed.fetch_add(1, SeqCst);
        if done() {
            self.all_committed.notify_waiters();
            return;
        }
        if !wait {
            return;
        }
        let all = async {
            loop {
                let notified = self.all_committed.notified();
                if done() {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(bound, all).await;
    }
}

/// A reading's [`SharedCount`], when it shares its target (not a setting: every value compares
/// equal, as [`crate::timeline::WindowSink`]).
#[derive(Debug, Clone, Default)]
pub struct SharedTotal(pub Option<Arc<SharedCount>>);

impl PartialEq for SharedTotal {
    fn eq(&self, _: &SharedTotal) -> bool {
        true
    }
}

/// The members of one run's group leave it leader first. Upstream Tansu (0.6) keeps a leader
/// that left the group during a rebalance as the group's leader for good: every later join in
/// the group is then answered with that leader, whose assignment never comes, and SyncGroup
/// answers REBALANCE_IN_PROGRESS until the broker restarts. A follower's LeaveGroup starts such
/// a rebalance, so a leader that left after it wedged the group (the next run in it failed); a
/// leader that leaves a stable group is cleared, and the followers then leave a group without
/// one. Java's consumers leave in no order; on Kafka the order costs the followers a LeaveGroup's
/// round trip.
#[derive(Debug, Default)]
pub struct LeaveOrder {
    /// Each reading's place (its slot) → its member id while it leads its generation and has not
    /// left: keyed by reading, so that a member whose id changed (it was forgotten, or restarted)
    /// leaves no stale entry.
    leading: std::sync::Mutex<BTreeMap<usize, String>>,
    slots: std::sync::atomic::AtomicUsize,
    left: tokio::sync::Notify,
}

impl LeaveOrder {
    /// A reading's place in the order.
    pub fn slot(&self) -> usize {
        self.slots
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The reading at `slot` joined as `join` says: whether it leads now.
    pub fn joined(&self, slot: usize, join: &kbench_client::JoinInfo) {
        if join.leader {
            self.leading
                .lock()
                .expect("leave order lock")
                .insert(slot, join.member_id.clone());
        } else {
            self.gone(slot);
        }
    }

    /// The reading at `slot` leads no more: it left the group, will say nothing more to it
    /// (crashed, closed, failed), or is joining again (the coordinator may hold its join until
    /// the followers join too: they must not wait for it meanwhile).
    pub fn gone(&self, slot: usize) {
        if self
            .leading
            .lock()
            .expect("leave order lock")
            .remove(&slot)
            .is_some()
        {
            self.left.notify_waiters();
        }
    }

    /// Before a member leaves at the run's end: while its leader (`leader_id`, by its last
    /// JoinGroup answer; `leads` when that is itself) is a reading of this run that has not left,
    /// wait for it to, for at most `bound`.
    pub async fn before_leaving(&self, (leader_id, leads): (String, bool), bound: Duration) {
        if leads || leader_id.is_empty() {
            return;
        }
        let leads = || {
            self.leading
                .lock()
                .expect("leave order lock")
                .values()
                .any(|id| *id == leader_id)
        };
        let waiting = async {
            loop {
                let notified = self.left.notified();
                if !leads() {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(bound, waiting).await.is_err() {
            tracing::debug!(
                leader = %leader_id,
                "the group's leader had not left within {} ms: leaving before it",
                bound.as_millis()
            );
        }
    }
}

/// A run's [`LeaveOrder`], shared by its members (not a setting: every value compares equal).
#[derive(Debug, Clone, Default)]
pub struct SharedLeave(pub Option<Arc<LeaveOrder>>);

impl SharedLeave {
    /// [`LeaveOrder::joined`], where the run has an order.
    pub fn joined(&self, slot: usize, join: &kbench_client::JoinInfo) {
        if let Some(o) = &self.0 {
            o.joined(slot, join);
        }
    }

    /// [`LeaveOrder::gone`], where the run has an order.
    pub fn gone(&self, slot: usize) {
        if let Some(o) = &self.0 {
            o.gone(slot);
        }
    }
}

impl PartialEq for SharedLeave {
    fn eq(&self, _: &SharedLeave) -> bool {
        true
    }
}

/// The most members a group run may start (`--consumers` and every `consumer-join` together are
/// not bounded by it; each `consumer-join` is at most 64).
pub const MAX_CONSUMERS: u32 = 64;

/// A consume timeline's counters.
pub const TIMELINE_COUNTERS: &[&str] = &["consumed", "bytes_consumed"];
/// A consume timeline's histograms.
pub const TIMELINE_HISTOGRAMS: &[&str] = &["fetch_latency", "end_to_end"];

impl Default for ConsumeSpec {
    /// kafka-consumer-perf-test's shape: 1 000 000 records of `kbench-perf` (what `kbench produce`
    /// writes by default) in a fresh group `perf-consumer-N`, from the earliest offset, 1 MiB per
    /// partition per fetch, 10 s timeout, progress every 5 s; Java's consumer defaults otherwise.
    fn default() -> Self {
        ConsumeSpec {
            topic: "kbench-perf".into(),
            include: None,
            messages: 1_000_000,
            mode: ConsumeMode::Group {
                group_id: format!("perf-consumer-{}", crate::spec::random_seed() % 100_000),
            },
            start: StartAt::Reset(OffsetReset::Earliest),
            consumer: ConsumerSettings::default(),
            timeout: Duration::from_millis(10_000),
            reporting_interval: Duration::from_millis(5_000),
            commit: true,
            properties: Vec::new(),
            end_to_end: false,
            timeline_interval: crate::timeline::DEFAULT_INTERVAL,
            window_sink: Default::default(),
            verify: false,
            deserializer: BTreeMap::new(),
            latest_values: None,
            consumers: 1,
            member_faults: Vec::new(),
            shared_total: SharedTotal::default(),
            leave_order: SharedLeave::default(),
            start_at_us: None,
            window_histograms: false,
        }
    }
}

impl ConsumeSpec {
    /// The rebalance timeout a member sends (`max.poll.interval.ms` as kbench reads it: the
    /// session, but at least 30 s): how long a join may be held, and how long a rebalance under
    /// way holds the run's time-out off.
    pub fn rebalance_timeout(&self) -> Duration {
        self.consumer.session_timeout.max(Duration::from_secs(30))
    }

    /// The Kafka APIs a consume run sends (what may be pinned).
    pub const APIS: &[ApiKey] = &[
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::FindCoordinator,
        ApiKey::JoinGroup,
        ApiKey::SyncGroup,
        ApiKey::Heartbeat,
        ApiKey::OffsetFetch,
        ApiKey::OffsetCommit,
        ApiKey::LeaveGroup,
    ];

    /// Take what a consumer's properties choose: `group.id` names the group (unless assigned),
    /// `auto.offset.reset` the start, `enable.auto.commit` whether to commit; and its settings.
    pub fn take_properties(&mut self, p: &ConsumerProperties) {
        self.consumer = p.consumer.clone();
        self.commit = p.enable_auto_commit;
        self.deserializer = p.deserializer.clone();
        if let Some(reset) = p.auto_offset_reset {
            self.start = StartAt::Reset(reset);
        }
        if let (Some(g), ConsumeMode::Group { .. }) = (&p.group_id, &self.mode) {
            self.mode = ConsumeMode::Group {
                group_id: g.clone(),
            };
        }
    }

    /// Every check a run needs before it starts; the error names the spec field.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_topic("topic", &self.topic)?;
        if let Some(pattern) = &self.include {
            include_regex(pattern)?;
            if !matches!(self.mode, ConsumeMode::Group { .. }) {
                return Err(SpecError::new(
                    "include",
                    "a topic pattern is a group's subscription (not with --partition)",
                ));
            }
            if self.latest_values.is_some() {
                return Err(SpecError::new(
                    "latest_values",
                    "the file is one topic's: give --topic, not --include",
                ));
            }
        }
        check_range("messages", self.messages, 1..=u64::MAX)?;
        check_consumer(&self.consumer)?;
        check_duration("timeout", self.timeout, MAX_WAIT)?;
        if self.timeout.is_zero() {
            return Err(SpecError::new("timeout", "must be above zero"));
        }
        if self.reporting_interval.is_zero() {
            return Err(SpecError::new("reporting_interval", "must be above zero"));
        }
        check_duration("reporting_interval", self.reporting_interval, MAX_WAIT)?;
        if self.timeline_interval < Duration::from_millis(10) {
            return Err(SpecError::new("timeline_interval", "must be at least 10ms"));
        }
        check_duration("timeline_interval", self.timeline_interval, MAX_WAIT)?;
        check_range("consumers", self.consumers, 1..=MAX_CONSUMERS)?;
        if self.consumer.group_instance_id.is_some()
            && !matches!(self.mode, ConsumeMode::Group { .. })
        {
            return Err(SpecError::new(
                "group.instance.id",
                "a static member is a group's (not with --partition)",
            ));
        }
        if self.consumers > 1 || !self.member_faults.is_empty() {
            let what = if self.consumers > 1 {
                "consumers"
            } else {
                "fault"
            };
            if !matches!(self.mode, ConsumeMode::Group { .. }) {
                return Err(SpecError::new(
                    what,
                    "group members need a group (not with --partition)",
                ));
            }
        }
        if let Some(file) = &self.latest_values {
            crate::latest::LatestChecker::new(file)
                .map_err(|e| SpecError::new("latest_values", e))?;
            if file.topic != self.topic {
                return Err(SpecError::new(
                    "latest_values",
                    format!(
                        "the file is topic {:?}'s, not {:?}'s",
                        file.topic, self.topic
                    ),
                ));
            }
        }
        match &self.mode {
            ConsumeMode::Group { group_id } => {
                if group_id.is_empty() || group_id.len() > 255 {
                    return Err(SpecError::new("group", "must be 1 to 255 characters"));
                }
                if let StartAt::Offset(_) = self.start {
                    return Err(SpecError::new(
                        "offset",
                        "a numeric start offset needs assigned partitions (--partition)",
                    ));
                }
            }
            ConsumeMode::Assign { partitions } => {
                if let Some(p) = partitions.iter().find(|p| **p < 0) {
                    return Err(SpecError::new(
                        "partition",
                        format!("{p}: must not be negative"),
                    ));
                }
            }
        }
        if let StartAt::Offset(o) = self.start
            && o < 0
        {
            return Err(SpecError::new("offset", "must not be negative"));
        }
        Ok(())
    }

    /// The settings block of the result document (secret property values masked).
    pub fn settings_json(&self, cluster: &ClusterConfig) -> serde_json::Value {
        let c = &self.consumer;
        let (mode, group, partitions) = match &self.mode {
            ConsumeMode::Group { group_id } => ("group", Some(group_id.as_str()), None),
            ConsumeMode::Assign { partitions } => ("assign", None, Some(partitions.clone())),
        };
        let start = match self.start {
            StartAt::Reset(r) => serde_json::json!(r.name()),
            StartAt::Offset(o) => serde_json::json!(o),
        };
        serde_json::json!({
            "topic": self.topic,
            "include": self.include,
            "messages": self.messages,
            "mode": mode,
            "group": group,
            "partitions": partitions,
            "start": start,
            "fetch_size": c.max_partition_fetch_bytes,
            "fetch_max_bytes": c.fetch_max_bytes,
            "fetch_max_wait_ms": c.fetch_max_wait.as_millis() as u64,
            "isolation_level": if c.read_committed { "read_committed" } else { "read_uncommitted" },
            "timeout_ms": self.timeout.as_millis() as u64,
            "reporting_interval_ms": self.reporting_interval.as_millis() as u64,
            "timeline_interval_ms": self.timeline_interval.as_millis() as u64,
            "commit": self.commit,
            "consumers": self.consumers,
            "member_faults": self.member_faults.iter().map(|f| &f.spec).collect::<Vec<_>>(),
            "auto_commit_interval_ms": c.auto_commit_interval.as_millis() as u64,
            "session_timeout_ms": c.session_timeout.as_millis() as u64,
            "heartbeat_interval_ms": c.heartbeat_interval.as_millis() as u64,
            "group_protocol": c.group_protocol.name(),
            "partition_assignment_strategy": c.assignors.iter().map(|a| a.name()).collect::<Vec<_>>(),
            "group_remote_assignor": c.remote_assignor,
            "group_instance_id": c.group_instance_id,
            "client_id": cluster.client_id,
            "properties": kbench_client::redacted(&self.properties),
        })
    }
}

/// `--include`'s pattern as Java's consumer applies it (`Pattern.matcher(topic).matches()`: the
/// whole name); an error names the field.
pub fn include_regex(pattern: &str) -> Result<regex::Regex, SpecError> {
    if pattern.is_empty() {
        return Err(SpecError::new("include", "must not be empty"));
    }
    let bad = |e: regex::Error| {
        // The regex crate's message spans lines (the pattern, a caret, the reason): the reason.
        let text = e.to_string();
        let why = text.lines().last().unwrap_or_default();
        let why = why.strip_prefix("error: ").unwrap_or(why).to_string();
        SpecError::new("include", format!("{pattern:?} is not a regex: {why}"))
    };
    regex::Regex::new(pattern).map_err(bad)?;
    regex::Regex::new(&format!("^(?:{pattern})$")).map_err(bad)
}

/// One progress window, for kafka-consumer-perf-test's `--show-detailed-stats` line.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeWindow {
    /// The window's end, wall clock.
    pub at: SystemTime,
    pub elapsed: Duration,
    /// Totals so far.
    pub total_records: u64,
    pub total_bytes: u64,
    /// This window's.
    pub records: u64,
    pub bytes: u64,
    /// Time spent joining the group in this window.
    pub join: Duration,
    /// With `ConsumeSpec::end_to_end`: this window's end-to-end latencies, µs.
    pub end_to_end: Option<Histogram<u64>>,
}

/// MiB, the tool's "MB".
const MB: f64 = 1024.0 * 1024.0;

/// Told what a consume run does as it goes.
pub trait ConsumeObserver: Send + Sync + 'static {
    fn interval(&self, window: &ConsumeWindow) {
        let _ = window;
    }
    /// The consumer has its partitions (joined its group, or assigned) and its positions.
    fn joined(&self) {}
    /// While true the consumer stays in its group (heartbeats) but does not fetch.
    fn paused(&self) -> bool {
        false
    }
    /// One Fetch answer decoded: the records it added, their key and value bytes, and (with
    /// `ConsumeSpec::end_to_end`) each one's end-to-end latency in µs.
    fn fetched(&self, records: u64, bytes: u64, end_to_end_us: &[u64]) {
        let _ = (records, bytes, end_to_end_us);
    }
}

impl ConsumeObserver for () {}

/// One partition's share of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PartitionSpan {
    /// The first offset asked for.
    pub start_offset: i64,
    /// The next offset to read when the run ended (what a commit says).
    pub end_offset: i64,
    pub records: u64,
    /// Offsets between `start_offset` and `end_offset` that no answer held: compacted away, or a
    /// broker answering from the wrong place. `records + skipped = end_offset - start_offset`.
    pub skipped: u64,
}

/// What a consume run did.
#[derive(Debug, Clone)]
pub struct ConsumeRun {
    pub records: u64,
    /// Key and value bytes of the records read.
    pub bytes: u64,
    pub batches: u64,
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    /// From the start (before joining) to the end, as the tool times it.
    pub elapsed: Duration,
    /// Joining the group (every round): the tool's `rebalance.time.ms`.
    pub join: Duration,
    pub cpu: CpuTime,
    pub peak_rss_kib: u64,
    /// Per Fetch call (one request per leader), sent → answered.
    pub fetch_latency: Histogram<u64>,
    pub fetches: u64,
    /// Fetches that brought no record.
    pub empty_fetches: u64,
    pub commits: u64,
    /// Commits the coordinator refused because the group was rebalancing (REBALANCE_IN_PROGRESS,
    /// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID; KIP-848's FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH): Java's consumer logs these and rejoins, and so
    /// does kbench; the positions are committed at the next commit, or by their next owner. Not
    /// errors.
    pub commits_refused: u64,
    /// No record arrived for `timeout` before `messages` were read.
    pub timed_out: bool,
    pub aborted: Option<String>,
    /// Errors met (and retried) by kind.
    pub errors: BTreeMap<String, u64>,
    pub partitions: BTreeMap<i32, PartitionSpan>,
    pub member_id: Option<String>,
    /// With `ConsumeSpec::end_to_end`: every record's end-to-end latency, µs (ms resolution).
    pub end_to_end: Histogram<u64>,
    /// The run window by window: [`TIMELINE_COUNTERS`], [`TIMELINE_HISTOGRAMS`].
    pub timeline: Vec<crate::timeline::Window>,
    /// With `--verify`: what the records' stamps said.
    pub verification: Option<crate::verify::VerifyReport>,
    /// With `--latest-values`: each key's last value read, judged.
    pub latest_values: Option<crate::latest::LatestReport>,
    /// With a schema registry: what decoding every value found.
    pub value_decoding: Option<crate::schema::decode::DecodeReport>,
    /// What the cluster did: leader changes, retries by cause, refreshes, stalls.
    pub cluster: crate::cluster::ClusterReport,
}

impl ConsumeRun {
    /// A run that read nothing: it was ended (`aborted` says why) before it had its partitions.
    /// All of its time was joining.
    pub fn nothing(started_at: SystemTime, aborted: &str) -> ConsumeRun {
        let elapsed = started_at.elapsed().unwrap_or_default();
        ConsumeRun {
            records: 0,
            bytes: 0,
            batches: 0,
            started_at,
            ended_at: SystemTime::now(),
            elapsed,
            join: elapsed,
            cpu: CpuTime::default(),
            peak_rss_kib: crate::measure::peak_rss_kib(),
            fetch_latency: latency_histogram(),
            fetches: 0,
            empty_fetches: 0,
            commits: 0,
            commits_refused: 0,
            timed_out: false,
            aborted: Some(aborted.to_string()),
            errors: BTreeMap::new(),
            partitions: BTreeMap::new(),
            member_id: None,
            end_to_end: latency_histogram(),
            timeline: Vec::new(),
            verification: None,
            latest_values: None,
            value_decoding: None,
            cluster: Default::default(),
        }
    }

    /// The time spent fetching: elapsed less joining.
    pub fn fetch_time(&self) -> Duration {
        self.elapsed.saturating_sub(self.join)
    }

    /// Client CPU µs per record read; `None` when none was.
    pub fn cpu_us_per_record(&self) -> Option<f64> {
        (self.records > 0).then(|| self.cpu.total_us() as f64 / self.records as f64)
    }
}

/// A consume run's result document (`kind: "consume"`).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ConsumeResultDocument {
    #[serde(flatten)]
    pub header: Header,
    pub target: Target,
    pub settings: serde_json::Value,
    pub negotiated_versions: BTreeMap<String, i16>,
    pub pinned_versions: BTreeMap<String, i16>,
    pub start_time: String,
    pub end_time: String,
    pub duration_s: f64,
    pub rebalance_time_ms: u64,
    pub fetch_time_ms: u64,
    pub records_consumed: u64,
    pub bytes_consumed: u64,
    pub record_batches: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub fetch_records_per_sec: f64,
    pub fetch_mb_per_sec: f64,
    pub client_cpu_us_per_record: Option<f64>,
    pub client_cpu_user_s: f64,
    pub client_cpu_sys_s: f64,
    pub peak_rss_kib: u64,
    pub fetch_latency: LatencySummary,
    pub fetches: u64,
    pub empty_fetches: u64,
    pub commits: u64,
    /// Commits refused because the group was rebalancing (see [`ConsumeRun::commits_refused`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub commits_refused: u64,
    pub complete: bool,
    pub timed_out: bool,
    /// Offsets passed over in every partition (see [`PartitionSpan::skipped`]).
    pub offsets_skipped: u64,
    /// The run window by window (`settings.timeline_interval_ms`): records and bytes consumed and
    /// their rates, each window's fetch latency (and end-to-end) percentiles.
    pub intervals: Vec<crate::timeline::Interval>,
    pub partitions: BTreeMap<i32, PartitionSpan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    pub errors: BTreeMap<String, u64>,
    pub aborted: Option<String>,
    /// With `--verify`: every record's stamp checked (no writer to ask: lost is sequence gaps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verify::VerifyReport>,
    /// With `--latest-values FILE`: each key's last value read against the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_values: Option<crate::latest::LatestReport>,
    /// With `--consumers N` or group faults: every member, every rebalance, every fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<group::GroupReport>,
    /// A run that timed out with records on the broker it had not read (the group stopped
    /// reading them): how many, where, and why. Never "lost": they are there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<Unread>,
    /// With `--include` matching several topics: each topic's own figures, partitions, members
    /// and verification (the document's `partitions` is then empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topics: BTreeMap<String, topics::TopicPart>,
    /// With `-X schema.registry.url=URL`: every value decoded with the schema its id names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_decoding: Option<crate::schema::decode::DecodeReport>,
    /// What the cluster did, as the consumer saw it (as for produce).
    pub cluster: crate::cluster::ClusterReport,
    /// Responses not quite as the protocol says, by kind (as for produce).
    pub protocol_anomalies: BTreeMap<String, u64>,
    /// A run over agents (`--agents`): each agent's part, merged into the figures above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::distributed::Distributed>,
}

impl ConsumeResultDocument {
    /// The document of `run`: what it was against, its settings block and the versions used.
    pub fn of(
        run: &ConsumeRun,
        spec: &ConsumeSpec,
        target: Target,
        settings: serde_json::Value,
        negotiated_versions: BTreeMap<String, i16>,
        pinned_versions: BTreeMap<String, i16>,
    ) -> Self {
        let secs = run.elapsed.as_secs_f64().max(1e-9);
        let fetch_secs = run.fetch_time().as_secs_f64().max(1e-9);
        let mb = run.bytes as f64 / MB;
        ConsumeResultDocument {
            header: Header::new(Kind::Consume),
            target,
            settings,
            negotiated_versions,
            pinned_versions,
            start_time: rfc3339(run.started_at),
            end_time: rfc3339(run.ended_at),
            duration_s: run.elapsed.as_secs_f64(),
            rebalance_time_ms: run.join.as_millis() as u64,
            fetch_time_ms: run.fetch_time().as_millis() as u64,
            records_consumed: run.records,
            bytes_consumed: run.bytes,
            record_batches: run.batches,
            records_per_sec: run.records as f64 / secs,
            mb_per_sec: mb / secs,
            fetch_records_per_sec: run.records as f64 / fetch_secs,
            fetch_mb_per_sec: mb / fetch_secs,
            client_cpu_us_per_record: run.cpu_us_per_record(),
            client_cpu_user_s: run.cpu.user_us as f64 / 1e6,
            client_cpu_sys_s: run.cpu.sys_us as f64 / 1e6,
            peak_rss_kib: run.peak_rss_kib,
            fetch_latency: LatencySummary::of(&run.fetch_latency),
            fetches: run.fetches,
            empty_fetches: run.empty_fetches,
            commits: run.commits,
            commits_refused: run.commits_refused,
            complete: run.records >= spec.messages,
            timed_out: run.timed_out,
            offsets_skipped: run.partitions.values().map(|p| p.skipped).sum(),
            intervals: crate::timeline::intervals(run.started_at, TIMELINE_COUNTERS, &run.timeline),
            partitions: run.partitions.clone(),
            member_id: run.member_id.clone(),
            errors: run.errors.clone(),
            aborted: run.aborted.clone(),
            verification: run.verification.clone(),
            latest_values: run.latest_values.clone(),
            group: None,
            unread: None,
            topics: BTreeMap::new(),
            value_decoding: run.value_decoding.clone(),
            cluster: run.cluster.clone(),
            protocol_anomalies: BTreeMap::new(),
            distributed: None,
        }
    }
}

/// Records on the broker a timed-out run had not read.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Unread {
    pub records: u64,
    pub partitions: BTreeMap<i32, UnreadPartition>,
    /// Read through a consumer group (whose members stopped reading them: the run failed), not
    /// assigned partitions (kafka-consumer-perf-test's time-out, said and not failed).
    pub group: bool,
}

/// One partition's unread records: offsets `from..to` (the log's end when the run ended).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct UnreadPartition {
    pub from: i64,
    pub to: i64,
    pub records: u64,
    /// Why: `no reader since T s` (no member owned it at the end), or `not read when the run
    /// ended`.
    pub reason: String,
}

/// What a run that timed out left unread on the broker: every partition's log end (ListOffsets)
/// against where the run got to (a partition the group never read: from its commit, or the start
/// `auto.offset.reset=earliest` gives). `None` when nothing is.
async fn unread_after(
    cluster: &Cluster,
    layout: &TopicLayout,
    spec: &ConsumeSpec,
    run: &ConsumeRun,
    group: Option<&group::GroupReport>,
) -> Option<Unread> {
    let partitions: Vec<i32> = match &spec.mode {
        ConsumeMode::Assign { partitions } if !partitions.is_empty() => partitions.clone(),
        _ => layout.partitions.iter().map(|p| p.partition).collect(),
    };
    let ends = cluster.latest_offsets(layout, &partitions).await.ok()?;
    let unseen: Vec<i32> = partitions
        .iter()
        .copied()
        .filter(|p| !run.partitions.contains_key(p))
        .collect();
    let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
    if !unseen.is_empty() {
        if let ConsumeMode::Group { group_id } = &spec.mode {
            starts = cluster
                .group_offsets(group_id, layout, &unseen)
                .await
                .unwrap_or_default();
        }
        let missing: Vec<i32> = unseen
            .iter()
            .copied()
            .filter(|p| !starts.contains_key(p))
            .collect();
        if !missing.is_empty() && spec.start == StartAt::Reset(OffsetReset::Earliest) {
            starts.extend(cluster.earliest_offsets(layout, &missing).await.ok()?);
        }
    }
    let mut out = Unread {
        records: 0,
        partitions: BTreeMap::new(),
        group: matches!(spec.mode, ConsumeMode::Group { .. }),
    };
    for p in partitions {
        let Some(from) = run
            .partitions
            .get(&p)
            .map(|s| s.end_offset)
            .or_else(|| starts.get(&p).copied())
        else {
            continue;
        };
        let to = ends.get(&p).copied().unwrap_or(from);
        if to <= from {
            continue;
        }
        let reason = match group.and_then(|g| g.partitions_unowned_at_end_ms.get(&p)) {
            Some(ms) => format!("no reader for the last {:.1} s", ms / 1e3),
            None => "not read when the run ended".to_string(),
        };
        let records = (to - from) as u64;
        out.records += records;
        out.partitions.insert(
            p,
            UnreadPartition {
                from,
                to,
                records,
                reason,
            },
        );
    }
    (out.records > 0).then_some(out)
}

/// A consume job's outcome.
#[derive(Debug)]
pub struct ConsumeOutcome {
    pub run: ConsumeRun,
    pub document: ConsumeResultDocument,
}

/// Run `spec` against `cluster` from connecting to the result document. A `stop` ends the run at
/// once (what was read counts, `aborted` says why).
pub async fn run_consume_job<O: ConsumeObserver>(
    spec: &ConsumeSpec,
    cluster: ClusterConfig,
    embedded: bool,
    stop: Stop,
    observer: Arc<O>,
) -> Result<ConsumeOutcome, BenchError> {
    spec.validate()?;
    let bootstrap = cluster.bootstrap.join(",");
    let pins = cluster.pins.clone();
    let settings = spec.settings_json(&cluster);
    let cluster = crate::produce::job::connect_bounded(cluster, stop.token()).await?;
    let mut needed = vec![ApiKey::Metadata, ApiKey::Fetch, ApiKey::ListOffsets];
    if let ConsumeMode::Group { .. } = spec.mode {
        needed.extend([ApiKey::FindCoordinator, ApiKey::OffsetFetch]);
        // The consumer protocol's ConsumerGroupHeartbeat is checked as the member joins, with
        // an error that names it and the coordinator.
        if spec.consumer.group_protocol == kbench_client::config::GroupProtocol::Classic {
            needed.extend([
                ApiKey::JoinGroup,
                ApiKey::SyncGroup,
                ApiKey::Heartbeat,
                ApiKey::LeaveGroup,
            ]);
        }
        if spec.commit {
            needed.push(ApiKey::OffsetCommit);
        }
    }
    cluster.check_versions(&needed)?;
    // `--include`: the topics it matches now.
    let mut settings = settings;
    let included = match &spec.include {
        Some(pattern) => Some(included_topics(&cluster, pattern).await?),
        None => None,
    };
    if let Some(topics) = &included {
        settings["topic"] = match topics.as_slice() {
            [one] => serde_json::json!(one),
            _ => serde_json::Value::Null,
        };
        settings["topics"] = serde_json::json!(topics);
    }
    if let Some(topics) = included.as_ref().filter(|t| t.len() > 1) {
        let mut layouts = Vec::new();
        for topic in topics {
            let (_, layout) = cluster.metadata(topic).await.map_err(|e| {
                BenchError::Run(format!("--include: topic {topic} it matched: {e}"))
            })?;
            layouts.push(layout);
        }
        let cluster = Arc::new(cluster);
        let (run, parts) =
            topics::run_topics(cluster.clone(), layouts, spec, stop, observer).await?;
        return Ok(outcome(
            run, spec, &cluster, embedded, bootstrap, settings, &pins, None, parts,
        )
        .await);
    }
    let one;
    let spec = match included.as_ref().and_then(|t| t.first()) {
        Some(topic) => {
            one = ConsumeSpec {
                topic: topic.clone(),
                include: None,
                ..spec.clone()
            };
            &one
        }
        None => spec,
    };
    let (_, layout) = cluster
        .metadata(&spec.topic)
        .await
        .map_err(|e| BenchError::topic(&spec.topic, e))?;
    if layout.partitions.is_empty() {
        return Err(BenchError::Topic {
            topic: spec.topic.clone(),
            source: ClientError::Other("the topic does not exist".into()),
        });
    }
    if let ConsumeMode::Assign { partitions } = &spec.mode
        && let Some(p) = partitions
            .iter()
            .find(|p| !layout.partitions.iter().any(|l| l.partition == **p))
    {
        return Err(SpecError::new(
            "partition",
            format!(
                "{p} is not a partition of topic {} (it has 0..{})",
                spec.topic,
                layout.partitions.len().saturating_sub(1)
            ),
        )
        .into());
    }
    // A distributed segment: connected, the versions and the topic checked, every agent's
    // members start reading at the one instant.
    let began = SystemTime::now();
    let enough = |stop: &Stop| stop.reason().as_deref() == Some(crate::distributed::ENOUGH);
    if let Some(at) = spec.start_at_us
        && !crate::clock::sleep_until_wall(at, stop.token()).await
    {
        // The other agents read the run's --messages before this one began: it read nothing.
        if enough(&stop) {
            let run = ConsumeRun::nothing(began, crate::distributed::ENOUGH);
            return Ok(outcome(
                run,
                spec,
                &cluster,
                embedded,
                bootstrap,
                settings,
                &pins,
                None,
                BTreeMap::new(),
            )
            .await);
        }
        cluster.close(Duration::from_secs(1)).await;
        return Err(BenchError::Run("stopped before the barrier start".into()));
    }
    let cluster = Arc::new(cluster);
    let ran = if spec.consumers > 1 || !spec.member_faults.is_empty() {
        group::run_group(
            cluster.clone(),
            layout.clone(),
            Arc::new(spec.clone()),
            stop.clone(),
            observer,
        )
        .await
        .map(|(run, report)| (run, Some(report)))
    } else {
        run_consume(
            cluster.clone(),
            layout.clone(),
            spec,
            stop.clone(),
            observer,
        )
        .await
        .map(|run| (run, None))
    };
    let (run, group) = match ran {
        Ok(ran) => ran,
        // A distributed segment still joining its group when the other agents had read the
        // run's --messages: it read nothing, and that is its result (not a failure).
        Err(BenchError::StoppedJoining) if enough(&stop) => {
            (ConsumeRun::nothing(began, crate::distributed::ENOUGH), None)
        }
        Err(e) => return Err(e),
    };
    // A run that timed out with records it had not read: the group stopped reading them.
    let unread = if run.timed_out {
        unread_after(&cluster, &layout, spec, &run, group.as_ref()).await
    } else {
        None
    };
    let mut out = outcome(
        run,
        spec,
        &cluster,
        embedded,
        bootstrap,
        settings,
        &pins,
        group,
        BTreeMap::new(),
    )
    .await;
    out.document.unread = unread;
    Ok(out)
}

/// The topics `pattern` (`--include`) matches on `cluster` now; none is an error naming it.
async fn included_topics(cluster: &Cluster, pattern: &str) -> Result<Vec<String>, BenchError> {
    let regex = include_regex(pattern)?;
    let names = cluster
        .topic_names()
        .await
        .map_err(|e| BenchError::Run(format!("--include: listing the cluster's topics: {e}")))?;
    let matched: Vec<String> = names
        .iter()
        .filter(|n| regex.is_match(n))
        .cloned()
        .collect();
    if matched.is_empty() {
        let mut known = names
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > 10 {
            known.push_str(", …");
        }
        return Err(SpecError::new(
            "include",
            format!(
                "{pattern:?} matches no topic of the cluster's (the whole name must match; it has {}: {known})",
                names.len()
            ),
        )
        .into());
    }
    Ok(matched)
}

/// A finished run's outcome: the cluster closed, the result document of `run`.
#[allow(clippy::too_many_arguments)]
async fn outcome(
    run: ConsumeRun,
    spec: &ConsumeSpec,
    cluster: &Cluster,
    embedded: bool,
    bootstrap: String,
    settings: serde_json::Value,
    pins: &kbench_wire::Pins,
    group: Option<group::GroupReport>,
    topics: BTreeMap<String, topics::TopicPart>,
) -> ConsumeOutcome {
    cluster.close(Duration::from_secs(2)).await;
    let negotiated: BTreeMap<String, i16> = cluster.negotiated().named().collect();
    let pinned: BTreeMap<String, i16> = pins.iter().map(|(a, v)| (api_name(a), v)).collect();
    let document = ConsumeResultDocument::of(
        &run,
        spec,
        Target {
            bootstrap_servers: bootstrap,
            ..Target::of(cluster.config(), embedded)
        },
        settings,
        negotiated,
        pinned,
    );
    let intervals = if spec.window_histograms {
        crate::timeline::with_histograms(document.intervals, &run.timeline)
    } else {
        document.intervals
    };
    let document = ConsumeResultDocument {
        intervals,
        protocol_anomalies: cluster.protocol_anomalies(),
        group,
        offsets_skipped: document.offsets_skipped
            + topics.values().map(|t| t.offsets_skipped).sum::<u64>(),
        topics,
        ..document
    };
    ConsumeOutcome { run, document }
}

/// Where each assigned partition starts: the spec's start (an offset, or `auto.offset.reset`).
async fn start_positions(
    cluster: &Cluster,
    layout: &TopicLayout,
    partitions: &[i32],
    start: StartAt,
) -> Result<BTreeMap<i32, i64>, ClientError> {
    match start {
        StartAt::Offset(o) => Ok(partitions.iter().map(|p| (*p, o)).collect()),
        StartAt::Reset(OffsetReset::Earliest) => cluster.earliest_offsets(layout, partitions).await,
        StartAt::Reset(OffsetReset::Latest) => cluster.latest_offsets(layout, partitions).await,
    }
}

/// The consumer engine's settings for a consume run.
fn engine_options(spec: &ConsumeSpec) -> kbench_client::ConsumerOptions {
    kbench_client::ConsumerOptions {
        partition_max_bytes: spec
            .consumer
            .max_partition_fetch_bytes
            .min(i32::MAX as usize) as i32,
        max_bytes: spec.consumer.fetch_max_bytes.min(i32::MAX as usize) as i32,
        max_wait: spec.consumer.fetch_max_wait,
        read_committed: spec.consumer.read_committed,
        reset: match spec.start {
            StartAt::Reset(r) => r,
            StartAt::Offset(_) => OffsetReset::Earliest,
        },
        retry_backoff: kbench_client::config::RETRY_BACKOFF,
    }
}

use kbench_wire::records::batches_end;
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_spec_is_valid_and_reads_from_the_earliest_offset() {
        let spec = ConsumeSpec::default();
        assert_eq!(spec.validate(), Ok(()));
        assert_eq!(spec.start, StartAt::Reset(OffsetReset::Earliest));
        assert_eq!(spec.consumer.max_partition_fetch_bytes, 1_048_576);
        assert!(
            matches!(&spec.mode, ConsumeMode::Group { group_id } if group_id.starts_with("perf-consumer-"))
        );
    }

    #[test]
    fn include_matches_the_whole_name_as_java_does() {
        let re = include_regex("orders-[0-9]+").unwrap();
        assert!(re.is_match("orders-12"));
        assert!(!re.is_match("orders-12-dlq"), "the whole name, not a part");
        assert!(!re.is_match("old-orders-12"));
        let alt = include_regex("a|b").unwrap();
        assert!(
            alt.is_match("b") && !alt.is_match("ab"),
            "alternatives grouped"
        );
        let e = include_regex("a(").unwrap_err();
        assert_eq!(e.field, "include");
        assert!(!e.reason.contains('\n'), "one line: {}", e.reason);
    }

    #[test]
    fn each_bad_field_is_named() {
        type Case = (&'static str, fn(&mut ConsumeSpec));
        let cases: [Case; 10] = [
            ("include", |s| s.include = Some("orders-(".into())),
            ("include", |s| {
                s.include = Some("orders-.*".into());
                s.mode = ConsumeMode::Assign { partitions: vec![] };
            }),
            ("latest_values", |s| {
                s.include = Some("orders-.*".into());
                s.latest_values = Some(crate::latest::LatestFile {
                    kind: crate::latest::FILE_KIND.into(),
                    topic: s.topic.clone(),
                    keys: BTreeMap::new(),
                    uncertain: Vec::new(),
                });
            }),
            ("messages", |s| s.messages = 0),
            ("topic", |s| s.topic.clear()),
            ("timeout", |s| s.timeout = Duration::ZERO),
            ("offset", |s| s.start = StartAt::Offset(5)),
            ("partition", |s| {
                s.mode = ConsumeMode::Assign {
                    partitions: vec![-1],
                }
            }),
            ("fetch_size", |s| s.consumer.max_partition_fetch_bytes = 0),
            ("heartbeat.interval.ms", |s| {
                s.consumer.heartbeat_interval = s.consumer.session_timeout
            }),
        ];
        for (field, break_it) in cases {
            let mut s = ConsumeSpec::default();
            break_it(&mut s);
            assert_eq!(s.validate().unwrap_err().field, field);
        }
    }
}
