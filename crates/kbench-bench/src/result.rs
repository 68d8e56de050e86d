//! The result document: one JSON object per run, versioned by `schema_version`, documented in
//! docs/results.md. Adding a field is compatible; renaming or removing one bumps the version.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::measure::LatencySummary;
use crate::produce::ProduceRun;

/// The version of the result schema written by this build.
pub const SCHEMA_VERSION: u32 = 3;

/// Every kind of document kbench writes: the `kind` field.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// (The default only for building a document field by field; each constructor sets its own.)
    #[default]
    Produce,
    Consume,
    E2e,
    Omb,
    Codec,
    Sweep,
    Compare,
}

impl Kind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [Kind; 7] = [
        Kind::Produce,
        Kind::Consume,
        Kind::E2e,
        Kind::Omb,
        Kind::Codec,
        Kind::Sweep,
        Kind::Compare,
    ];

    /// The name written in `kind`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Produce => "produce",
            Kind::Consume => "consume",
            Kind::E2e => "e2e",
            Kind::Omb => "omb",
            Kind::Codec => "codec",
            Kind::Sweep => "sweep",
            Kind::Compare => "compare",
        }
    }

    /// The kind named `name`, if kbench writes one.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The fields every document begins with, declared once and flattened into each: the schema it
/// follows, its kind, and where it was written.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Header {
    pub schema_version: u32,
    pub kind: Kind,
    pub environment: Environment,
}

impl Header {
    /// The header of a document of `kind` written here, now, by this build.
    pub fn new(kind: Kind) -> Header {
        Header {
            schema_version: SCHEMA_VERSION,
            kind,
            environment: Environment::here(),
        }
    }
}

/// Where a run ran.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Environment {
    pub kbench_version: String,
    pub hostname: String,
    pub cores: usize,
    pub os: String,
    pub arch: String,
}

impl Environment {
    pub fn here() -> Environment {
        Environment {
            kbench_version: env!("CARGO_PKG_VERSION").to_string(),
            hostname: hostname(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Format a wall-clock instant as RFC 3339 (UTC, milliseconds).
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The target a run measured.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Target {
    pub bootstrap_servers: String,
    /// True when kbench started its own Tansu broker for the run.
    pub embedded_broker: bool,
    /// `security.protocol` (PLAINTEXT, SSL, …); never a credential.
    pub security_protocol: String,
    /// `sasl.mechanism` when SASL was used; never the user, password or token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<String>,
}

impl Target {
    /// The target of a run over `cluster`.
    pub fn of(cluster: &kbench_client::ClusterConfig, embedded_broker: bool) -> Target {
        Target {
            bootstrap_servers: cluster.bootstrap.join(","),
            embedded_broker,
            security_protocol: cluster.security_protocol.name().to_string(),
            sasl_mechanism: cluster
                .sasl
                .as_ref()
                .map(|s| s.mechanism.name().to_string()),
        }
    }
}

/// A produce run's result document.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ResultDocument {
    #[serde(flatten)]
    pub header: Header,
    pub target: Target,
    /// Every setting of the run, secrets removed.
    pub settings: serde_json::Value,
    /// The API versions actually used, by Kafka API name.
    pub negotiated_versions: BTreeMap<String, i16>,
    /// The user's pins, by Kafka API name (empty when nothing was pinned).
    pub pinned_versions: BTreeMap<String, i16>,
    pub seed: u64,
    pub start_time: String,
    pub end_time: String,
    pub duration_s: f64,
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    /// Throttled: records the schedule asked for that were never sent by the end (each one's
    /// wait to the end is in `latency`); sent + unsent = scheduled.
    pub records_unsent: u64,
    pub bytes_acked: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub client_cpu_us_per_record: Option<f64>,
    pub client_cpu_user_s: f64,
    pub client_cpu_sys_s: f64,
    pub peak_rss_kib: u64,
    /// Intended send time (or append time when unthrottled) → ack, µs.
    pub latency: LatencySummary,
    /// Request sent → ack, µs.
    pub service_time: LatencySummary,
    /// Per record: intended send time → its request sent (OMB's publish delay).
    pub publish_delay: LatencySummary,
    /// Throttled: per record that waited for its intended time, how late the wait ended — the
    /// generator's own delay, part of `latency` (`saturation` says when it is a large share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_delay: Option<LatencySummary>,
    /// Whether kbench, not the target, set the pace (and the evidence).
    pub saturation: crate::produce::phase::Saturation,
    /// Failed records per error message.
    pub errors: BTreeMap<String, u64>,
    pub aborted: Option<String>,
    /// Produce requests sent (first attempts) and the record batches in them; more batches than
    /// requests means several partitions shared a request.
    pub produce_requests: u64,
    pub record_batches: u64,
    /// Frames written to the brokers, and the socket writes that carried them.
    pub frames_written: u64,
    pub socket_writes: u64,
    /// Each repetition's own figures, in the order run (one entry without `--repetitions`).
    pub repetitions: Vec<Repetition>,
    /// The measured phase window by window (`settings.timeline_interval_ms`, 1 s by default):
    /// records, failed, bytes and their rates, and each window's latency, service time and
    /// publish delay percentiles ([`crate::timeline::intervals`]).
    pub intervals: Vec<crate::timeline::Interval>,
    /// With `--verify`: the topic read back after the run and checked record by record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verify::VerifyReport>,
    /// With `enable.idempotence=true` or a `transactional.id`: the producer ids, the retried
    /// batches the broker already held, and the transactions committed and aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer: Option<crate::produce::phase::ProducerReport>,
    /// What the cluster did: leader changes, retries by cause, metadata refreshes, stalls.
    pub cluster: crate::cluster::ClusterReport,
    /// Responses with bytes left after their body, by kind (read as Java's client reads them).
    pub protocol_anomalies: BTreeMap<String, u64>,
    /// A distributed run: each agent's part, whether the run is degraded, the clock bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::distributed::Distributed>,
    /// With `--warmup-records` (KIP-1052): the figures of the records after each repetition's
    /// warm-up, from the first of them sent to the end; absent without a warm-up, or when the run
    /// ended within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyStateSummary>,
}

/// The steady state of a run with a warm-up (`--warmup-records`): kafka-producer-perf-test's
/// "steady state" line's figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SteadyStateSummary {
    /// Records left out as the warm-up (each repetition's first `--warmup-records`).
    pub warmup_records: u64,
    /// Steady-state records acknowledged, and their value bytes.
    pub records: u64,
    pub bytes: u64,
    /// From the first steady-state record sent to the end (repetitions summed).
    pub duration_s: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    /// Intended send time (or append time when unthrottled) → ack, µs, as `latency`.
    pub latency: LatencySummary,
}

impl SteadyStateSummary {
    pub fn of(s: &crate::produce::phase::SteadyState) -> SteadyStateSummary {
        SteadyStateSummary {
            warmup_records: s.warmup_records,
            records: s.records,
            bytes: s.bytes,
            duration_s: s.elapsed.as_secs_f64(),
            records_per_sec: s.records_per_sec(),
            mb_per_sec: s.mb_per_sec(),
            latency: LatencySummary::of(&s.latency),
        }
    }
}

/// One repetition's figures: the samples `kbench compare` works on.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Repetition {
    pub duration_s: f64,
    pub records_acked: u64,
    pub records_failed: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub client_cpu_us_per_record: Option<f64>,
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
}

impl Repetition {
    pub fn of(run: &ProduceRun) -> Repetition {
        let q = |q: f64| {
            if run.latency.is_empty() {
                0
            } else {
                run.latency.value_at_quantile(q)
            }
        };
        Repetition {
            duration_s: run.elapsed.as_secs_f64(),
            records_acked: run.records_acked,
            records_failed: run.records_failed,
            records_per_sec: run.records_per_sec(),
            mb_per_sec: run.mb_per_sec(),
            client_cpu_us_per_record: run.cpu_us_per_record(),
            latency_p50_us: q(0.50),
            latency_p99_us: q(0.99),
        }
    }
}

impl ResultDocument {
    /// The document of a produce run (`run`, with every repetition's figures): what it was
    /// against, its settings block, the versions used and the seed.
    pub fn produce(
        run: &ProduceRun,
        repetitions: &[ProduceRun],
        target: Target,
        settings: serde_json::Value,
        negotiated_versions: BTreeMap<String, i16>,
        pinned_versions: BTreeMap<String, i16>,
        seed: u64,
    ) -> ResultDocument {
        ResultDocument {
            header: Header::new(Kind::Produce),
            target,
            settings,
            negotiated_versions,
            pinned_versions,
            seed,
            start_time: rfc3339(run.started_at),
            end_time: rfc3339(run.ended_at),
            duration_s: run.elapsed.as_secs_f64(),
            records_sent: run.records_sent,
            records_acked: run.records_acked,
            records_failed: run.records_failed,
            records_unsent: run.records_unsent,
            bytes_acked: run.bytes_acked,
            records_per_sec: run.records_per_sec(),
            mb_per_sec: run.mb_per_sec(),
            client_cpu_us_per_record: run.cpu_us_per_record(),
            client_cpu_user_s: run.cpu.user_us as f64 / 1e6,
            client_cpu_sys_s: run.cpu.sys_us as f64 / 1e6,
            peak_rss_kib: run.peak_rss_kib,
            latency: LatencySummary::of(&run.latency),
            service_time: LatencySummary::of(&run.service_time),
            publish_delay: LatencySummary::of(&run.publish_delay),
            generator_delay: run.generator_delay.as_ref().map(LatencySummary::of),
            saturation: run.saturation.clone(),
            errors: run.errors.clone(),
            aborted: run.aborted.clone(),
            produce_requests: run.requests,
            record_batches: run.batches,
            frames_written: run.frames_written,
            socket_writes: run.socket_writes,
            repetitions: repetitions.iter().map(Repetition::of).collect(),
            intervals: crate::timeline::intervals(
                run.started_at,
                crate::produce::phase::TIMELINE_COUNTERS,
                &run.timeline,
            ),
            verification: None,
            producer: run.producer.clone(),
            cluster: run.cluster.clone(),
            protocol_anomalies: run.protocol_anomalies.clone(),
            distributed: None,
            steady_state: run.steady_state.as_ref().map(SteadyStateSummary::of),
        }
    }
}

/// An e2e run's result document (`kind: "e2e"`).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct E2eResultDocument {
    #[serde(flatten)]
    pub header: Header,
    pub target: Target,
    /// Every setting of the run, secrets removed.
    pub settings: serde_json::Value,
    pub negotiated_versions: BTreeMap<String, i16>,
    pub seed: u64,
    pub start_time: String,
    pub end_time: String,
    /// Before the load: the consumer joined and positioned, every producer connected.
    pub startup_s: f64,
    /// The load phase, producers running.
    pub duration_s: f64,
    pub drain_s: f64,
    /// The clock whole trip was measured on, and how skew was handled.
    pub clock: String,
    pub group_id: String,
    pub assigned_partitions: Vec<i32>,
    pub records_produced: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    /// What the consumer read and found; absent (never zero) when a distributed run lost the
    /// consumer's agent and nothing is known of what was read.
    #[serde(flatten)]
    pub consumer: Option<E2eConsumerSide>,
    /// With `--consumers` above one or group faults (`--fault at=T consumer-join=K`, ...): the
    /// group's members, its rebalances and the time each partition had no reader, as `kbench
    /// consume` reports them; seconds from the load's start. (Not in the flattened consumer
    /// side: a flattened map with number keys does not read back.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<crate::consume::group::GroupReport>,
    pub produce_requests: u64,
    pub fetches: u64,
    pub commits: u64,
    pub commit_failures: u64,
    pub heartbeats: u64,
    pub rejoins: u64,
    /// Holes in a partition's offsets below records the broker already returned.
    pub fetch_gaps: FetchGaps,
    pub records_per_sec: f64,
    pub client_cpu_user_s: f64,
    pub client_cpu_sys_s: f64,
    pub peak_rss_kib: u64,
    /// Per produce request: sent → acknowledged, µs.
    pub producer_request_duration: LatencySummary,
    /// Per record: its batch's scheduled time → the batch's request sent, µs (OMB's publish delay).
    pub publish_delay: LatencySummary,
    /// Batches that came more than one interval late (the schedule restarted from then) although
    /// the producer had not waited for the cluster: the generator's.
    pub schedule_slips: u64,
    /// Batches late because their producer waited for the cluster (a slow broker, a partition
    /// without a leader): the cluster's, never the generator's saturation.
    #[serde(default)]
    pub cluster_slips: u64,
    /// What the cluster did, as the producers saw it.
    #[serde(default)]
    pub cluster: crate::cluster::ClusterReport,
    /// What the cluster did, as the consumer saw it.
    #[serde(default)]
    pub consumer_cluster: crate::cluster::ClusterReport,
    /// Responses read with bytes after their body, by kind.
    #[serde(default)]
    pub protocol_anomalies: BTreeMap<String, u64>,
    /// Whether kbench, not the target, set the pace (and the evidence).
    pub saturation: crate::produce::phase::Saturation,
    /// The REST Proxy driver's own figures; absent for the native driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rest_proxy: Option<RestSummary>,
    pub errors: BTreeMap<String, u64>,
    pub aborted: Option<String>,
    /// A distributed run's consumer: what it read of each producer agent's records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<crate::e2e::SegmentFigures>,
    /// With `--verify`: every record the consumer read, checked against what was acknowledged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verify::VerifyReport>,
    /// With `--verify`, a distributed run's producer agent: what it acknowledged, which the
    /// coordinator hands to the consumer's agent (not in the merged document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<crate::verify::WrittenWire>,
    /// With a schema registry (`--value-schema`, or the consumer's `schema.registry.url`): every
    /// value the consumer read, decoded with the schema its id names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_decoding: Option<crate::schema::decode::DecodeReport>,
    /// The load and drain window by window (`settings.timeline_interval_ms`): records acked,
    /// failed, consumed and their rates; each window's request duration, publish delay and whole
    /// trip percentiles.
    pub intervals: Vec<crate::timeline::Interval>,
    /// A distributed run: each agent's part, whether the run is degraded, the clock bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::distributed::Distributed>,
    /// Request-reply (`--reply-topic`): requests answered, unanswered, replies unmatched, and
    /// request → reply latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplySummary>,
}

/// Request-reply through the user's application: `requests_sent = answered + unanswered`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplySummary {
    pub reply_topic: String,
    /// The request header that carried each correlation id.
    pub correlation_header: String,
    /// Where replies carried it back: `header:NAME` or `json:PATH`.
    pub reply_correlation: String,
    /// Requests produced (each one record), acknowledged or not.
    pub requests_sent: u64,
    /// Of those, the ones whose produce failed.
    pub requests_failed: u64,
    /// Requests with a reply, each counted once (late ones included).
    pub answered: u64,
    /// Of those, answered only after the drain (found when the reply topic was read again):
    /// their latency is not in the percentiles.
    pub answered_late: u64,
    /// Requests never answered: `requests_sent - answered`.
    pub unanswered: u64,
    /// Replies whose correlation id is none of this run's (missing, foreign, not kbench's).
    pub replies_unmatched: u64,
    /// Replies to a request already answered.
    pub replies_duplicated: u64,
    /// Per reply read in time: request sent → reply in hand, µs.
    pub request_reply: LatencySummary,
    /// With `--app-group`: the application's consumer group lag on the request topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_group: Option<AppGroupLag>,
}

/// The application group's lag, sampled every timeline interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AppGroupLag {
    pub group: String,
    pub max_lag: Option<u64>,
    pub last_lag: Option<u64>,
    pub samples: Vec<crate::e2e::LagSample>,
    /// Samples that could not be taken, by error.
    pub errors: BTreeMap<String, u64>,
}

impl ReplySummary {
    /// The request-reply block of `run`, when it was one.
    pub fn of(run: &crate::e2e::E2eRun) -> Option<ReplySummary> {
        let reply = run.reply.as_ref()?;
        let answered = run.consumed.saturating_sub(run.duplicates) + run.late;
        Some(ReplySummary {
            reply_topic: reply.topic.clone(),
            correlation_header: reply.header.clone(),
            reply_correlation: reply.correlation.describe(),
            requests_sent: run.produced,
            requests_failed: run.failed,
            answered,
            answered_late: run.late,
            unanswered: run.produced.saturating_sub(answered),
            replies_unmatched: run.foreign,
            replies_duplicated: run.duplicates,
            request_reply: LatencySummary::of(&run.whole_trip),
            app_group: run.app_lag.as_ref().map(|l| AppGroupLag {
                group: l.group.clone(),
                max_lag: l.max(),
                last_lag: l.last(),
                samples: l.samples.clone(),
                errors: l.errors.clone(),
            }),
        })
    }
}

/// The consumer's side of an e2e result: what it read, what it found, how long the trip took.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct E2eConsumerSide {
    /// Whether the consumer had every acknowledged record by the end of the drain.
    pub drained: bool,
    pub member_id: Option<String>,
    /// With `--consumers N` above one: every member of the group, and the partitions it held at
    /// the end (`member_id` is the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<E2eMemberEnd>,
    pub records_consumed: u64,
    /// Acknowledged and not on the broker (not found when the missing offsets were read again).
    pub records_lost: u64,
    /// Acknowledged, not consumed, and the re-read that would have told lost from late could not
    /// finish (`unverified_reason`): never counted lost.
    #[serde(default)]
    pub records_unverified: u64,
    #[serde(default)]
    pub unverified_reason: Option<String>,
    /// Acknowledged and on the broker, but not consumed by the end of the drain: *unread*
    /// (found by reading the missing offsets again, by a reader outside the group). Never lost.
    pub records_late: u64,
    /// Where the unread records are, per partition, and why they were not read (`no reader for
    /// the last T s`, `the group was rebalancing when the drain ended`, or `not read by the end of
    /// the drain`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unread: BTreeMap<i32, crate::e2e::UnreadPartition>,
    pub records_duplicated: u64,
    pub records_unexpected: u64,
    pub records_foreign: u64,
    /// Consumed from more producer streams than the duplicate tracker keeps (a consumer-only run
    /// reading foreign keys): counted, not checked for duplicates.
    #[serde(default)]
    pub records_untracked: u64,
    /// Per record: send time carried in the record → consumer receipt, µs.
    pub whole_trip: LatencySummary,
    /// Per Fetch that returned records: sent → response in hand, µs.
    pub fetch_duration: LatencySummary,
    /// Per poll that returned records: response in hand → records decoded and counted, µs.
    pub consumer_processing: LatencySummary,
}

/// A member of an e2e run's consumer group at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct E2eMemberEnd {
    pub member_id: String,
    pub assigned_partitions: Vec<i32>,
}

impl E2eResultDocument {
    pub fn of(
        run: &crate::e2e::E2eRun,
        target: Target,
        settings: serde_json::Value,
        seed: u64,
    ) -> E2eResultDocument {
        E2eResultDocument {
            header: Header::new(Kind::E2e),
            target,
            settings,
            negotiated_versions: run.negotiated.named().collect(),
            seed,
            start_time: rfc3339(run.started_at),
            end_time: rfc3339(run.ended_at),
            startup_s: run.startup.as_secs_f64(),
            duration_s: run.elapsed.as_secs_f64(),
            drain_s: run.drain_elapsed.as_secs_f64(),
            clock: run.clock.to_string(),
            group_id: run.group_id.clone(),
            assigned_partitions: run.assignment.clone(),
            records_produced: run.produced,
            records_acked: run.acked,
            records_failed: run.failed,
            consumer: Some(E2eConsumerSide {
                drained: run.drained,
                member_id: run.member_id.clone(),
                members: run.members.clone(),
                records_consumed: run.consumed,
                records_lost: run.lost,
                records_unverified: run.unverified,
                unverified_reason: run.unverified_reason.clone(),
                records_late: run.late,
                unread: run.unread.clone(),
                records_duplicated: run.duplicates,
                records_unexpected: run.unexpected,
                records_foreign: run.foreign,
                records_untracked: run.untracked,
                whole_trip: LatencySummary::of(&run.whole_trip),
                fetch_duration: LatencySummary::of(&run.fetch_duration),
                consumer_processing: LatencySummary::of(&run.consumer_processing),
            }),
            group: run.group.clone(),
            produce_requests: run.produce_requests,
            fetches: run.fetches,
            commits: run.commits,
            commit_failures: run.commit_failures,
            heartbeats: run.heartbeats,
            rejoins: run.rejoins,
            fetch_gaps: FetchGaps {
                held: run.gaps_held,
                skipped: run.gaps_skipped,
            },
            records_per_sec: run.acked as f64 / run.elapsed.as_secs_f64().max(1e-9),
            client_cpu_user_s: run.cpu.user_us as f64 / 1e6,
            client_cpu_sys_s: run.cpu.sys_us as f64 / 1e6,
            peak_rss_kib: run.peak_rss_kib,
            producer_request_duration: LatencySummary::of(&run.producer_latency),
            publish_delay: LatencySummary::of(&run.publish_delay),
            schedule_slips: run.schedule_slips,
            cluster_slips: run.cluster_slips,
            cluster: run.cluster.clone(),
            consumer_cluster: run.consumer_cluster.clone(),
            protocol_anomalies: run.protocol_anomalies.clone(),
            saturation: run.saturation.clone(),
            rest_proxy: run.rest.as_ref().map(|r| RestSummary {
                format: r.format.to_string(),
                api: r.api.to_string(),
                value_schema_id: r.value_schema_id,
                throttled_429: r.throttled,
                instances_created: r.instances_created,
                instances_expired_40403: r.instances_expired,
                instance_creation: LatencySummary::of(&r.instance_creation),
                time_to_first_record_ms: r.time_to_first_record_us.map(|us| us as f64 / 1000.0),
                records_per_get: LatencySummary::of(&r.records_per_get),
                empty_gets: r.empty_gets,
            }),
            errors: run.errors.clone(),
            aborted: run.aborted.clone(),
            segments: run.segments.clone(),
            verification: run.verification.clone(),
            written: run.written.clone(),
            value_decoding: run.value_decoding.clone(),
            intervals: crate::timeline::intervals(
                run.started_at,
                crate::e2e::live::TIMELINE_COUNTERS,
                &run.timeline,
            ),
            distributed: None,
            reply: ReplySummary::of(run),
        }
    }
}

/// Holes in a partition's offsets that a Fetch (or a REST Proxy poll) returned records beyond.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default)]
pub struct FetchGaps {
    /// Times the consumer held its position at such a hole and asked again.
    pub held: u64,
    /// Holes passed over after the hold (their offsets were read again after the drain).
    pub skipped: u64,
}

/// What the REST Proxy driver measured on its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestSummary {
    pub format: String,
    pub api: String,
    /// The value schema id used (given, or registered with --schema-registry).
    pub value_schema_id: Option<i64>,
    pub throttled_429: u64,
    pub instances_created: u64,
    pub instances_expired_40403: u64,
    /// Consumer instance creation + subscription, µs.
    pub instance_creation: LatencySummary,
    /// From the first instance's creation to the first record received.
    pub time_to_first_record_ms: Option<f64>,
    /// Records per GET that returned any (a count, not µs).
    pub records_per_get: LatencySummary,
    pub empty_gets: u64,
}
