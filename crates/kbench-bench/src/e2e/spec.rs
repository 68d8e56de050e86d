//! An e2e run's spec: every setting with its default (defined here once: the CLI, `/v1` and
//! `/pub-sub-demo` all start from [`E2eSpec::default`]), the one `validate()`, and the settings block
//! of the result document.

use std::time::Duration;

use kbench_client::{ConsumerSettings, ProducerSettings};
use kbench_rest::{RestConfig, RestFormat};

use crate::e2e::reply::ReplySpec;
use crate::error::SpecError;
use crate::spec::{
    Limits, MAX_DURATION, MAX_PARTITIONS, MAX_WAIT, Span, check_duration, check_range, check_span,
    check_topic, fresh_id, random_seed,
};

/// When the consumer commits. Either way it commits only what moved since the last commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CommitMode {
    /// After every poll that moved a position, awaited before the next poll.
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

impl std::str::FromStr for CommitMode {
    type Err = String;
    /// `sync`, or an interval for asynchronous commits (`10s`).
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("sync") {
            return Ok(CommitMode::Sync);
        }
        let d = crate::spec::parse_duration(s)
            .map_err(|_| format!("{s:?}: expected `sync` or an interval such as 10s"))?;
        if d.is_zero() {
            return Err("the commit interval must be above zero (or `sync`)".into());
        }
        Ok(CommitMode::Interval(d))
    }
}

/// Which sides of the pipe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

impl std::str::FromStr for E2eMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "consumer-and-producers" | "both" => Ok(E2eMode::ConsumerAndProducers),
            "producers" => Ok(E2eMode::Producers),
            "consumer" => Ok(E2eMode::Consumer),
            other => Err(format!(
                "unknown mode {other:?} (expected consumer-and-producers, producers or consumer)"
            )),
        }
    }
}

/// Which produce API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestApi {
    /// `POST /topics/{topic}`, one request per batch.
    V2,
    /// `POST /v3/clusters/{id}/topics/{topic}/records`, one request per record.
    V3,
    /// The same endpoint, one chunked request per batch, one delivery report per record.
    V3Stream,
}

impl RestApi {
    pub fn name(self) -> &'static str {
        match self {
            RestApi::V2 => "v2",
            RestApi::V3 => "v3",
            RestApi::V3Stream => "v3-stream",
        }
    }
}

impl std::str::FromStr for RestApi {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "v2" => Ok(RestApi::V2),
            "v3" => Ok(RestApi::V3),
            "v3-stream" | "v3stream" | "stream" => Ok(RestApi::V3Stream),
            other => Err(format!("unknown REST API {other:?} (v2, v3 or v3-stream)")),
        }
    }
}

/// The REST Proxy driver's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RestSpec {
    pub proxy: RestConfig,
    pub format: RestFormat,
    pub api: RestApi,
    /// The value schema id (avro): given, or registered with `schema_registry`.
    pub value_schema_id: Option<i64>,
    /// Register the seed schema here (`POST /subjects/{topic}-value/versions`) and use its id.
    pub schema_registry: Option<String>,
    /// Back-off after a 429.
    pub throttle_backoff: Duration,
}

impl RestSpec {
    /// The proxy at `url` with the driver's defaults: avro (the seed's format) through the v2 produce
    /// API, a 60 s HTTP timeout, 100 ms back-off after a 429.
    pub fn new(url: &str) -> RestSpec {
        RestSpec {
            proxy: RestConfig {
                // Credentials in the URL become basic auth: the URL kept (and shown) has none.
                url: kbench_rest::redact_url(url),
                basic_auth: kbench_rest::userinfo(url),
                timeout: Duration::from_secs(60),
                ca_cert_pem: None,
            },
            format: RestFormat::Avro,
            api: RestApi::V2,
            value_schema_id: None,
            schema_registry: None,
            throttle_backoff: Duration::from_millis(100),
        }
    }
}

/// The most records one produce request of an e2e run carries.
pub const MAX_RECORDS_PER_REQUEST: usize = 1_000_000;
/// The most producers one run starts.
pub const MAX_PRODUCERS: usize = 10_000;
/// The most members of the run's consumer group one e2e run starts (`--consumers`).
pub const MAX_CONSUMERS: usize = 100;

/// An e2e run's settings.
/// Serialisable (the REST driver's settings excepted): the same spec travels to distributed agents.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Each producer's settings (acks, compression, requests in flight, delivery). Its records go
    /// out `messages_per_batch` to a request, so `batch_size` and `linger` do not apply, nor does
    /// idempotence.
    pub producer: ProducerSettings,
    pub group_id: String,
    /// Members of the consumer group, each a consumer of its own (connections, member id,
    /// heartbeats, commits), reading what the group assigns it (`--consumers`).
    #[serde(default = "one_consumer")]
    pub consumers: usize,
    /// Group faults on the load's schedule (`--fault at=T consumer-join=K`, `consumer-leave=K`,
    /// `consumer-crash=K`): members that join, leave or stop heartbeating while records flow,
    /// timed from the load's start. Never sent to agents.
    #[serde(skip)]
    pub member_faults: Vec<crate::fault::Fault>,
    /// The consumer's client id (the member id is the coordinator's to give).
    pub consumer_id: String,
    pub commit: CommitMode,
    /// The consumer's settings: `fetch_max_wait` is how long a poll may wait for data (the seed's
    /// `consumeTimeoutMs`, `--consume-wait`), `fetch_max_bytes` bounds a Fetch and each partition
    /// in it (the seed's `consumeMaxBytesMs`, `--consume-max-bytes`); session and heartbeat.
    pub consumer: ConsumerSettings,
    /// Load phase length; `None` runs until stopped.
    pub duration: Option<Duration>,
    /// Records sent in all (split over the producers): the load ends when each sent its share.
    #[serde(default)]
    pub records: Option<u64>,
    /// A closed loop: each batch waits (at most this) for the pipe to empty — nothing in flight,
    /// everything acknowledged consumed; past that its producer stops. `None`: `batch_interval`.
    #[serde(default)]
    pub closed_loop: Option<Duration>,
    /// Every whole trip (µs) in the order read, in `E2eLive::trips`; bounded by `records`.
    #[serde(default)]
    pub keep_trips: bool,
    /// Longest wait, after the producers stop, for the consumer to catch up.
    pub drain: Duration,
    /// Record latency histograms (counts are always kept).
    pub gather_latencies: bool,
    /// `--verify`: every record stamped (producer, sequence, checksum: `kbench-verify`) and checked
    /// by the consumer as it reads — order, integrity, and what the broker acknowledged.
    #[serde(default)]
    pub verify: bool,
    pub seed: u64,
    /// Through a Kafka REST Proxy instead of the Kafka protocol (never sent to agents).
    #[serde(skip)]
    pub rest: Option<RestSpec>,
    /// The largest record and the memory the run may hold.
    pub limits: Limits,
    /// The length of a timeline window (the result's `intervals`, `--histogram-log`).
    pub timeline_interval: Duration,
    /// Where timeline windows go as they close (live metrics).
    #[serde(skip)]
    pub window_sink: crate::timeline::WindowSink,
    /// A distributed segment: the load starts when this process's wall clock
    /// ([`crate::clock`]) reads this, µs since the Unix epoch (every agent's producers at once).
    pub start_at_us: Option<u64>,
    /// A distributed run's tag, shared by every agent (otherwise each run draws its own). With
    /// it, producers carry their wall-clock send time (`kbench-sent-wall-us`) and a consumer-only
    /// run counts this run's records per [`ProducerSegment`].
    pub run_tag: Option<u32>,
    /// The id of this segment's first producer: agents' producers are numbered apart, so that
    /// records keep distinct ids and each producer its own seeded schedule.
    pub producer_base: u32,
    /// A distributed run's consumer: each agent's producers and its clock against the consumer's.
    pub producer_segments: Vec<ProducerSegment>,
    /// Request-reply through the user's service: the consumer reads the replies on this topic,
    /// not the records written (`--reply-topic`).
    #[serde(default)]
    pub reply: Option<ReplySpec>,
    /// Keep each timeline window's histograms whole in the result's `intervals` (a distributed
    /// segment, for the coordinator's `--histogram-log`: windows added exactly).
    #[serde(default)]
    pub window_histograms: bool,
    /// `--value-schema`: the values, schema-encoded and framed before the run; each record takes
    /// one at random (in place of `payload_size` random bytes). Never sent to agents.
    #[serde(skip)]
    pub values: Option<std::sync::Arc<[bytes::Bytes]>>,
    /// How `values` were made (the result's `settings.value_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_schema: Option<crate::schema::ValueSchema>,
    /// The deserializer's properties (`schema.registry.url`, `basic.auth.user.info`, …): with a
    /// registry, the consumer decodes every value with the schema its id names
    /// (`value_decoding`). Never serialized: it may hold the registry's password.
    #[serde(skip)]
    pub deserializer: std::collections::BTreeMap<String, String>,
}

/// One agent's producers, as a distributed run's consumer needs to know them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProducerSegment {
    pub first_producer: u32,
    pub producers: u32,
    /// How far the producers' agent's clock is ahead of the consumer's agent's clock, µs (as the
    /// coordinator estimated it); whole-trip times are corrected by it.
    pub clock_ahead_us: i64,
}

impl Default for E2eSpec {
    /// One producer sending one 1 KiB record every 100 ms with acks=all to topic `kbench-e2e`, one
    /// consumer in a fresh group committing synchronously, a 10 ms fetch wait and a 10 s drain; a
    /// fresh group id, consumer id and seed.
    fn default() -> Self {
        E2eSpec {
            topic: "kbench-e2e".into(),
            partitions: 1,
            replication_factor: 1,
            mode: E2eMode::ConsumerAndProducers,
            producers: 1,
            batch_interval_ms: Span::fixed(100),
            payload_size: Span::fixed(1024),
            messages_per_batch: Span::fixed(1),
            producer: ProducerSettings::default(),
            group_id: fresh_id("kbench-e2e"),
            consumers: 1,
            member_faults: Vec::new(),
            consumer_id: fresh_id("kbench-consumer"),
            commit: CommitMode::Sync,
            consumer: ConsumerSettings {
                // The seed service's consumeTimeoutMs.
                fetch_max_wait: Duration::from_millis(10),
                ..ConsumerSettings::default()
            },
            duration: None,
            records: None,
            closed_loop: None,
            keep_trips: false,
            drain: Duration::from_secs(10),
            gather_latencies: true,
            verify: false,
            seed: random_seed(),
            rest: None,
            limits: Limits::default(),
            timeline_interval: crate::timeline::DEFAULT_INTERVAL,
            window_sink: Default::default(),
            start_at_us: None,
            run_tag: None,
            producer_base: 0,
            producer_segments: Vec::new(),
            reply: None,
            window_histograms: false,
            values: None,
            value_schema: None,
            deserializer: Default::default(),
        }
    }
}

impl E2eSpec {
    /// Whether this is the consumer of a distributed run (producers on other agents).
    pub fn peers_consumer(&self) -> bool {
        self.mode == E2eMode::Consumer && self.run_tag.is_some()
    }

    /// The topic the consumer reads: the replies' with `reply`, else the one written.
    pub fn read_topic(&self) -> &str {
        self.reply.as_ref().map_or(&self.topic, |r| &r.topic)
    }

    /// How long the consumer's group join may take: the rebalance timeout it sends in JoinGroup
    /// (the session timeout, at least 30 s). A coordinator holds a new group's join up to that
    /// (upstream Tansu holds it for half the session timeout).
    pub fn rebalance_timeout(&self) -> std::time::Duration {
        self.consumer
            .session_timeout
            .max(std::time::Duration::from_secs(30))
    }

    /// The Kafka APIs a native e2e run sends (what may be pinned).
    pub const APIS: &[kbench_wire::ApiKey] = {
        use kbench_wire::ApiKey::*;
        &[
            Produce,
            Fetch,
            Metadata,
            CreateTopics,
            ListOffsets,
            FindCoordinator,
            JoinGroup,
            SyncGroup,
            Heartbeat,
            OffsetCommit,
            LeaveGroup,
        ]
    };

    /// Every check a run needs before it starts; the error names the spec field.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_topic("topic", &self.topic)?;
        check_range("partitions", self.partitions, 1..=MAX_PARTITIONS)?;
        if self.mode.has_producers() {
            check_range("producers", self.producers, 1..=MAX_PRODUCERS)?;
        }
        check_span("batch_interval", self.batch_interval_ms)?;
        check_range(
            "batch_interval",
            self.batch_interval_ms.max,
            0..=MAX_WAIT.as_millis() as u64,
        )?;
        let max_record = self.limits.max_record_bytes;
        check_span("payload_size", self.payload_size)?;
        check_range("payload_size", self.payload_size.min, 1..=max_record)?;
        check_range("payload_size", self.payload_size.max, 1..=max_record)?;
        check_span("messages_per_batch", self.messages_per_batch)?;
        check_range(
            "messages_per_batch",
            self.messages_per_batch.min,
            1..=MAX_RECORDS_PER_REQUEST,
        )?;
        check_range(
            "messages_per_batch",
            self.messages_per_batch.max,
            1..=MAX_RECORDS_PER_REQUEST,
        )?;
        check_range("max_in_flight", self.producer.max_in_flight, 1..=1_000)?;
        if self.producer.idempotent() {
            return Err(SpecError::new(
                "enable_idempotence",
                "e2e producers are not idempotent (use `kbench produce` for idempotent or transactional produce)",
            ));
        }
        self.producer
            .check()
            .map_err(|c| SpecError::new(c.key, c.reason))?;
        if self.consumer.group_protocol == kbench_client::config::GroupProtocol::Consumer
            && self.rest.is_some()
        {
            return Err(SpecError::new(
                "group_protocol",
                "consumer (KIP-848) is kbench's own consumer's; through a REST Proxy, the proxy's consumer joins the group",
            ));
        }
        if self.consumer.group_instance_id.is_some() && self.rest.is_some() {
            return Err(SpecError::new(
                "group_instance_id",
                "kbench's own consumer's; through a REST Proxy, the proxy's consumer joins the group",
            ));
        }
        if self.mode.has_consumer() {
            check_range("consumers", self.consumers, 1..=MAX_CONSUMERS)?;
        }
        if self.consumers > 1 && self.rest.is_some() {
            return Err(SpecError::new(
                "consumers",
                "kbench's own consumers; through a REST Proxy one proxy consumer reads",
            ));
        }
        if self.consumers > 1 && !self.mode.has_consumer() {
            return Err(SpecError::new(
                "consumers",
                "nothing reads in producer-only mode",
            ));
        }
        if let Some(f) = self.member_faults.first()
            && (self.rest.is_some() || !self.mode.has_consumer() || self.run_tag.is_some())
        {
            return Err(SpecError::new(
                "fault",
                format!(
                    "{:?} acts on kbench's own consumer group, in one process: not through a REST Proxy, without a consumer, or over agents",
                    f.spec
                ),
            ));
        }
        if self.verify && self.rest.is_some() {
            return Err(SpecError::new(
                "verify",
                "not through a REST Proxy (the stamp travels in a record header)",
            ));
        }
        // A distributed run's producer part (`run_tag`) stamps its records; the consumer's agent
        // checks them against what it acknowledged.
        if self.verify && self.mode == E2eMode::Producers && self.run_tag.is_none() {
            return Err(SpecError::new(
                "verify",
                "nothing reads in producer-only mode: verify with `kbench produce --verify`, or run the consumer",
            ));
        }
        check_range(
            "consume_max_bytes",
            self.consumer.fetch_max_bytes,
            1..=i32::MAX as usize,
        )?;
        if let CommitMode::Interval(d) = self.commit {
            if d.is_zero() {
                return Err(SpecError::new("commit", "the interval must be above zero"));
            }
            check_duration("commit", d, MAX_WAIT)?;
        }
        check_duration("consume_wait", self.consumer.fetch_max_wait, MAX_WAIT)?;
        check_duration("drain", self.drain, MAX_WAIT)?;
        if self.timeline_interval < Duration::from_millis(10) {
            return Err(SpecError::new("timeline_interval", "must be at least 10ms"));
        }
        check_duration("timeline_interval", self.timeline_interval, MAX_WAIT)?;
        check_duration("session_timeout", self.consumer.session_timeout, MAX_WAIT)?;
        self.consumer
            .check()
            .map_err(|c| SpecError::new(c.key, c.reason))?;
        if let Some(d) = self.duration {
            if d.is_zero() {
                return Err(SpecError::new("duration", "must be above zero"));
            }
            check_duration("duration", d, MAX_DURATION)?;
        }
        self.check_count_and_loop()?;
        self.limits.check_memory(
            "producers, payload_size, messages_per_batch",
            self.memory_needed(),
        )?;
        if self.mode.has_producers()
            && self
                .producer_base
                .checked_add(self.producers as u32)
                .is_none()
        {
            return Err(SpecError::new("producer_base", "producer ids past 2^32"));
        }
        if self.group_id.is_empty() {
            return Err(SpecError::new("group", "must not be empty"));
        }
        self.check_reply()?;
        self.check_values()?;
        if let Some(rest) = &self.rest
            && rest.format.has_schema()
            && self.mode.has_producers()
            && rest.value_schema_id.is_none()
            && rest.schema_registry.is_none()
        {
            return Err(SpecError::new(
                "value_schema_id",
                "avro, protobuf and jsonschema need a value schema id: give one, or a schema registry to register the seed schema in",
            ));
        }
        Ok(())
    }

    /// `values` (from `--value-schema`): each no larger than a record may be, on the Kafka
    /// protocol (the REST Proxy driver encodes its own). Over agents, each producer agent is sent
    /// the coordinator's values; a consumer's segment keeps only `value_schema`, for its settings.
    fn check_values(&self) -> Result<(), SpecError> {
        let Some(values) = &self.values else {
            return match self.value_schema {
                Some(_) if self.mode.has_producers() => Err(SpecError::new(
                    "value_schema",
                    "says how values were made, but there are none for the producers",
                )),
                _ => Ok(()),
            };
        };
        let refused = if values.is_empty() {
            Some("no values".to_string())
        } else if self.rest.is_some() {
            Some("not through a REST Proxy (--rest-format and --value-schema-id choose what it sends)".into())
        } else {
            values
                .iter()
                .map(bytes::Bytes::len)
                .max()
                .filter(|m| *m > self.limits.max_record_bytes)
                .map(|m| {
                    format!(
                        "a value of {m} bytes is larger than a record may be ({} bytes)",
                        self.limits.max_record_bytes
                    )
                })
        };
        match refused {
            Some(why) => Err(SpecError::new("value_schema", why)),
            None => Ok(()),
        }
    }

    /// The largest value a producer sends: a schema value's, or `payload_size`'s.
    pub fn largest_value(&self) -> usize {
        match &self.values {
            Some(v) => v.iter().map(bytes::Bytes::len).max().unwrap_or(0),
            None => self.payload_size.max,
        }
    }

    /// Request-reply: a valid reply topic, read by the consumer beside the producers, on the
    /// Kafka protocol, without `verify` (the replies are the application's records, not kbench's).
    fn check_reply(&self) -> Result<(), SpecError> {
        let Some(reply) = &self.reply else {
            return Ok(());
        };
        reply.validate(&self.topic)?;
        let refused = if self.rest.is_some() {
            Some("not through a REST Proxy")
        } else if self.mode != E2eMode::ConsumerAndProducers || self.run_tag.is_some() {
            Some(
                "needs the consumer and the producers in one process (mode consumer-and-producers, not distributed)",
            )
        } else if self.verify {
            Some(
                "not with verify: the replies are the application's records, not the ones kbench wrote",
            )
        } else {
            None
        };
        match refused {
            Some(why) => Err(SpecError::new("reply_topic", why)),
            None => Ok(()),
        }
    }

    /// `records`, `closed_loop` and `keep_trips`: a count above zero; a loop closed in this process
    /// (its consumer beside its producers) on the Kafka protocol; trips kept only for a bounded run.
    fn check_count_and_loop(&self) -> Result<(), SpecError> {
        if let Some(bound) = self.closed_loop {
            if self.mode != E2eMode::ConsumerAndProducers || self.run_tag.is_some() {
                return Err(SpecError::new(
                    "closed_loop",
                    "needs the consumer and the producers in one process (mode consumer-and-producers, not distributed)",
                ));
            }
            if bound.is_zero() {
                return Err(SpecError::new("closed_loop", "the wait must be above zero"));
            }
            check_duration("closed_loop", bound, MAX_WAIT)?;
        }
        match (self.records, self.keep_trips) {
            (Some(0), _) => Err(SpecError::new("num_records", "must be above zero")),
            (Some(_), _) if !self.mode.has_producers() => Err(SpecError::new(
                "num_records",
                "nothing is sent in consumer-only mode (the count is the producers')",
            )),
            _ if self.rest.is_some() && (self.keep_trips || self.closed_loop.is_some()) => Err(
                SpecError::new("closed_loop, keep_trips", "not through a REST Proxy"),
            ),
            (None, true) => Err(SpecError::new(
                "keep_trips",
                "needs records (the count bounds them)",
            )),
            // Eight bytes a record, as Kafka's EndToEndLatency keeps a long per record.
            (Some(n), true) => self.limits.check_memory("num_records", u128::from(n) * 8),
            _ => Ok(()),
        }
    }

    /// About the most memory the run's buffers hold at once: each producer's requests in flight
    /// (records of the largest size, with their framing) and its value pool, and the consumer's
    /// Fetch response and decompression buffer.
    pub fn memory_needed(&self) -> u128 {
        let record = self.largest_value() as u128 + 64;
        let producers = if self.mode.has_producers() {
            self.producers as u128
                * (self.producer.max_in_flight as u128
                    * self.messages_per_batch.max as u128
                    * record
                    + record)
        } else {
            0
        };
        let consumer = if self.mode.has_consumer() {
            self.consumers as u128 * 2 * self.consumer.fetch_max_bytes as u128
        } else {
            0
        };
        producers + consumer
    }

    /// Whether the run's group has several members, now or later (`--consumers` above one, or
    /// group faults): its members are named `-k` and share the run's start offsets.
    pub fn group_changes(&self) -> bool {
        self.consumers > 1 || !self.member_faults.is_empty()
    }

    /// The settings block of the result document: the spec as the user would write it (never a
    /// password).
    pub fn settings_json(&self) -> serde_json::Value {
        serde_json::json!({
            "topic": self.topic,
            "partitions": self.partitions,
            "mode": self.mode,
            "producers": self.producers,
            "batch_interval_ms": self.batch_interval_ms,
            // Schema values have their own sizes (`value_schema.mean_value_bytes`).
            "payload_size": self.value_schema.is_none().then_some(self.payload_size),
            "messages_per_batch": self.messages_per_batch,
            "acks": self.producer.acks.name(),
            "compression": self.producer.compression.name(),
            "max_in_flight": self.producer.max_in_flight,
            "group_id": self.group_id,
            "consumers": self.consumers,
            "member_faults": self.member_faults.iter().map(|f| &f.spec).collect::<Vec<_>>(),
            "consumer_id": self.consumer_id,
            "commit": self.commit.describe(),
            "consume_wait_ms": self.consumer.fetch_max_wait.as_millis() as u64,
            "consume_max_bytes": self.consumer.fetch_max_bytes,
            "session_timeout_ms": self.consumer.session_timeout.as_millis() as u64,
            "heartbeat_interval_ms": self.consumer.heartbeat_interval.as_millis() as u64,
            "group_protocol": self.consumer.group_protocol.name(),
            "partition_assignment_strategy": self.consumer.assignors.iter().map(|a| a.name()).collect::<Vec<_>>(),
            "group_instance_id": self.consumer.group_instance_id,
            "duration_s": self.duration.map(|d| d.as_secs_f64()),
            "records": self.records,
            "closed_loop_ms": self.closed_loop.map(|d| d.as_millis() as u64),
            "drain_s": self.drain.as_secs_f64(),
            "timeline_interval_ms": self.timeline_interval.as_millis() as u64,
            "gather_latencies": self.gather_latencies,
            "verify": self.verify,
            "via": if self.rest.is_some() { "rest-proxy" } else { "kafka" },
            "rest_proxy": self.rest.as_ref().map(|r| serde_json::json!({
                "url": r.proxy.url,
                "user": r.proxy.basic_auth.as_ref().map(|(u, _)| u),
                "format": r.format.name(),
                "api": r.api.name(),
                "value_schema_id": r.value_schema_id,
                "schema_registry": r.schema_registry.as_deref().map(kbench_rest::redact_url),
            })),
            "reply": self.reply.as_ref().map(|r| serde_json::json!({
                "topic": r.topic,
                "correlation_header": r.header,
                "reply_correlation": r.correlation.describe(),
                "app_group": r.app_group,
            })),
            "value_schema": self.value_schema,
            "value_decoding_registry": self
                .deserializer
                .get("schema.registry.url")
                .map(|u| kbench_rest::redact_url(u)),
        })
    }
}

fn one_consumer() -> usize {
    1
}

/// The clock statement for a distributed run's consumer.
pub const PEERS_CLOCK: &str = "wall: send time carried in kbench-sent-wall-us on the producer agent's clock, receipt on the consumer agent's, corrected by the coordinator's estimate of the two clocks' offset (its bound is in distributed.clock)";

/// The clock statement for a run.
pub fn clock_for(mode: E2eMode, reply: bool) -> &'static str {
    match mode {
        E2eMode::ConsumerAndProducers if reply => {
            "monotonic: producers and reply consumer share this process; each request's send time carried in its correlation id, which the application copies into its reply"
        }
        E2eMode::ConsumerAndProducers => {
            "monotonic: producers and consumer share this process; send time carried in the kbench-sent-us header"
        }
        E2eMode::Producers => "none: no consumer, no whole trip",
        E2eMode::Consumer => {
            "wall: record CreateTime (ms) to receipt on this host's clock; skew between hosts is not corrected"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field name and a change that makes it invalid.
    type Case = (&'static str, fn(&mut E2eSpec));

    #[test]
    fn the_default_spec_is_valid_and_each_bad_field_is_named() {
        assert_eq!(E2eSpec::default().validate(), Ok(()));
        let cases: [Case; 19] = [
            ("num_records", |s| s.records = Some(0)),
            ("closed_loop", |s| s.closed_loop = Some(Duration::ZERO)),
            ("closed_loop", |s| {
                s.closed_loop = Some(Duration::from_secs(1));
                s.mode = E2eMode::Producers;
            }),
            ("keep_trips", |s| s.keep_trips = true),
            ("consume_wait", |s| s.consumer.fetch_max_wait = MAX_WAIT * 2),
            ("duration", |s| s.duration = Some(Duration::MAX)),
            ("partitions", |s| s.partitions = MAX_PARTITIONS + 1),
            ("producers, payload_size, messages_per_batch", |s| {
                s.producers = 2_000;
                s.payload_size = Span::fixed(1_000_000);
                s.messages_per_batch = Span::fixed(1_000);
            }),
            ("topic", |s| s.topic = "a b".into()),
            ("partitions", |s| s.partitions = 0),
            ("producers", |s| s.producers = 0),
            ("producers", |s| s.producers = MAX_PRODUCERS + 1),
            ("consumers", |s| s.consumers = 0),
            ("consumers", |s| s.consumers = MAX_CONSUMERS + 1),
            ("batch_interval", |s| {
                s.batch_interval_ms = Span { min: 5, max: 1 }
            }),
            ("payload_size", |s| s.payload_size = Span::fixed(0)),
            ("payload_size", |s| {
                s.payload_size = Span::fixed(s.limits.max_record_bytes + 1)
            }),
            ("messages_per_batch", |s| {
                s.messages_per_batch = Span::fixed(MAX_RECORDS_PER_REQUEST + 1)
            }),
            ("duration", |s| s.duration = Some(Duration::ZERO)),
        ];
        for (field, break_it) in cases {
            let mut s = E2eSpec::default();
            break_it(&mut s);
            assert_eq!(s.validate().unwrap_err().field, field);
        }
        // A consumer-only run needs no producer.
        let s = E2eSpec {
            mode: E2eMode::Consumer,
            producers: 0,
            ..E2eSpec::default()
        };
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn commit_and_mode_parse() {
        assert_eq!("sync".parse::<CommitMode>(), Ok(CommitMode::Sync));
        assert_eq!(
            "10s".parse::<CommitMode>(),
            Ok(CommitMode::Interval(Duration::from_secs(10)))
        );
        assert!("0s".parse::<CommitMode>().is_err());
        assert!("often".parse::<CommitMode>().is_err());
        assert_eq!("both".parse::<E2eMode>(), Ok(E2eMode::ConsumerAndProducers));
        assert_eq!("Consumer".parse::<E2eMode>(), Ok(E2eMode::Consumer));
        assert!("all".parse::<E2eMode>().is_err());
    }
}
