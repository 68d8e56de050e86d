//! The produce workload, in kafka-producer-perf-test's terms: N records of a given size (or lines of a
//! payload file), optionally throttled to a rate, batched per partition by `batch.size` and
//! `linger.ms`, spread round-robin per batch, with latency from each record's intended send time.
//!
//! [`ProduceSpec`] holds every setting with its default (defined here, from Kafka's client defaults in
//! [`ProducerSettings`]); [`job::run_job`] runs it end to end (connect, topic, repetitions, close,
//! result document); [`phase::run_produce`] is the measured phase alone (the sweep uses it too).

pub mod job;
pub mod phase;
pub mod search;
pub mod sizes;

use std::time::Duration;

use bytes::Bytes;
use kbench_client::{ClusterConfig, ProducerSettings};
use rand::Rng;
use rand::rngs::SmallRng;

use crate::error::SpecError;
use crate::spec::{
    Limits, MAX_DURATION, MAX_PARTITIONS, MAX_WAIT, check_duration, check_finite, check_producer,
    check_range, check_topic, random_seed,
};

pub use job::{ProduceObserver, ProduceOutcome, run_job};
pub use phase::{IntervalReport, ProduceRun, run_produce};

/// The lowest throttle: a record every 1 000 s (slower is a typo, and overflows the schedule).
pub const MIN_RATE: f64 = 0.001;
/// The highest throttle: far above what any client sends.
pub const MAX_RATE: f64 = 1e9;

/// What each record's value is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Payload {
    /// One random payload of this many bytes (uppercase letters, as kafka-producer-perf-test makes it),
    /// reused for every record.
    Random { size: usize },
    /// Lines of a payload file; each record takes one at random.
    Lines(Vec<Bytes>),
    /// Random payloads whose length is drawn uniformly from `min..=max` for each record (slices of
    /// one random buffer of `max` bytes).
    Uniform { min: usize, max: usize },
    /// Each record's value is its index in the run, in decimal ("0", "1", …), as Kafka 4.x's
    /// `kafka-producer-perf-test --payload-monotonic` writes it.
    Monotonic,
    /// Each record's size drawn from weighted buckets (one pooled value per bucket). `random_ratio`
    /// None: uppercase letters, as [`Payload::Random`]; `Some(r)`: OMB's fill, the first `r` of
    /// each value random bytes and the rest zeros.
    Weighted {
        sizes: sizes::SizeDistribution,
        random_ratio: Option<f64>,
    },
}

impl Payload {
    pub(crate) fn values(&self, rng: &mut SmallRng) -> Vec<Bytes> {
        match self {
            Payload::Random { size } => {
                let v: Vec<u8> = (0..*size).map(|_| rng.random_range(b'A'..=b'Z')).collect();
                vec![Bytes::from(v)]
            }
            Payload::Lines(lines) => lines.clone(),
            Payload::Uniform { max, .. } => Payload::Random { size: *max }.values(rng),
            Payload::Monotonic => Vec::new(),
            Payload::Weighted {
                sizes,
                random_ratio: None,
            } => sizes
                .buckets()
                .iter()
                .flat_map(|b| Payload::Random { size: b.size }.values(rng))
                .collect(),
            Payload::Weighted {
                sizes,
                random_ratio: Some(ratio),
            } => sizes
                .buckets()
                .iter()
                .map(|b| {
                    let mut v = vec![0u8; b.size];
                    let random = ((b.size as f64) * ratio).round() as usize;
                    rng.fill(&mut v[..random.min(b.size)]);
                    Bytes::from(v)
                })
                .collect(),
        }
    }

    /// What the values are, in a few words ("100 bytes", "payload lines").
    pub fn describe(&self) -> String {
        match self {
            Payload::Random { size } => format!("{size} bytes"),
            Payload::Lines(_) => "payload lines".into(),
            Payload::Uniform { min, max } => format!("{min}..{max} bytes"),
            Payload::Monotonic => "monotonic payloads".into(),
            Payload::Weighted { sizes, .. } => sizes.describe(),
        }
    }

    /// The longest value a record may carry.
    pub fn longest(&self) -> usize {
        match self {
            Payload::Random { size } => *size,
            Payload::Lines(lines) => lines.iter().map(Bytes::len).max().unwrap_or(0),
            Payload::Uniform { max, .. } => *max,
            Payload::Monotonic => u64::MAX.to_string().len(),
            Payload::Weighted { sizes, .. } => sizes.largest(),
        }
    }

    /// Bytes held by the payload pool.
    fn pool_bytes(&self) -> u128 {
        match self {
            Payload::Lines(lines) => lines.iter().map(|l| l.len() as u128).sum(),
            Payload::Weighted { sizes, .. } => sizes.buckets().iter().map(|b| b.size as u128).sum(),
            _ => self.longest() as u128,
        }
    }
}

/// The most distinct keys a run may cycle through (each is held in memory).
pub const MAX_KEYS: u32 = 1_000_000;
/// OpenMessaging Benchmark's number of distinct keys, kbench's default.
pub const DEFAULT_KEY_COUNT: u32 = 10_000;

/// Which key each record carries. Keyed records go to the partition Kafka's default partitioner
/// picks (murmur2 of the key), as every Java and librdkafka producer would send them; unkeyed
/// records fill one partition's batch at a time, round-robin per batch (the sticky partitioner).
/// Key number `i` is the ten ASCII digits of `i` (OMB's keys are ten characters too).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub enum Keys {
    /// No key (OMB's `NO_KEY`).
    #[default]
    None,
    /// Key `i mod count` for record `i` (OMB's `KEY_ROUND_ROBIN`).
    RoundRobin { count: u32 },
    /// A key drawn uniformly (OMB's `RANDOM_NANO`).
    Random { count: u32 },
    /// A key drawn by Zipf's law: key 0 is the most frequent, key `k` is chosen with weight
    /// `1 / (k + 1)^exponent`. Real topics' keys are skewed; this puts most records on a few
    /// partitions.
    Zipf { count: u32, exponent: f64 },
}

impl Keys {
    /// `none`, `round-robin[:COUNT]`, `random[:COUNT]` or `zipf[:COUNT[:EXPONENT]]` (COUNT
    /// defaults to 10000, EXPONENT to 1.0).
    pub fn parse(s: &str) -> Result<Keys, String> {
        let mut parts = s.trim().split(':');
        let kind = parts.next().unwrap_or_default();
        let count = match parts.next() {
            None => DEFAULT_KEY_COUNT,
            Some(c) => match c.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_KEYS).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "key count {c:?} is not a whole number in 1..={MAX_KEYS}"
                    ));
                }
            },
        };
        let exponent = match parts.next() {
            None => 1.0,
            Some(e) => match e.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && (0.0..=10.0).contains(&x) => x,
                _ => return Err(format!("Zipf exponent {e:?} is not a number in 0..=10")),
            },
        };
        let extra = parts.next();
        let keys = match kind.trim() {
            "none" => Keys::None,
            "round-robin" => Keys::RoundRobin { count },
            "random" => Keys::Random { count },
            "zipf" => Keys::Zipf { count, exponent },
            other => {
                return Err(format!(
                    "{other:?} is not a key distribution: expected none, round-robin[:COUNT], random[:COUNT] or zipf[:COUNT[:EXPONENT]]"
                ));
            }
        };
        let parts_allowed = match keys {
            Keys::None => 1,
            Keys::Zipf { .. } => 3,
            _ => 2,
        };
        if extra.is_some() || s.trim().split(':').count() > parts_allowed {
            return Err(format!("{s:?}: too many ':' parts for {}", kind.trim()));
        }
        Ok(keys)
    }

    /// The canonical text (what `parse` reads back).
    pub fn describe(&self) -> String {
        match self {
            Keys::None => "none".into(),
            Keys::RoundRobin { count } => format!("round-robin:{count}"),
            Keys::Random { count } => format!("random:{count}"),
            Keys::Zipf { count, exponent } => format!("zipf:{count}:{exponent}"),
        }
    }

    /// How many distinct keys; 0 without keys.
    pub fn count(&self) -> u32 {
        match self {
            Keys::None => 0,
            Keys::RoundRobin { count } | Keys::Random { count } | Keys::Zipf { count, .. } => {
                *count
            }
        }
    }

    /// Key number `i`: its ten decimal digits.
    pub fn key(i: u32) -> Bytes {
        Bytes::from(format!("{i:010}"))
    }
}

/// A produce run's settings.
/// Serialisable: the same spec travels to distributed agents (`crate::distributed`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProduceSpec {
    /// The topic; created when missing, with `partitions` and `replication_factor`.
    pub topic: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub num_records: u64,
    /// Stop sending after this long, even if fewer than `num_records` were sent.
    pub duration: Option<Duration>,
    pub payload: Payload,
    /// Where `Payload::Lines` came from, for the result document.
    pub payload_file: Option<String>,
    /// With `--value-schema`, how the pooled values (`Payload::Lines`) were generated.
    #[serde(default)]
    pub value_schema: Option<crate::schema::ValueSchema>,
    /// Each record's key, and so its partition.
    pub keys: Keys,
    /// With `--key-schema`: the keys themselves (one per key number of `keys`), schema-encoded.
    #[serde(default)]
    pub key_values: Option<Vec<bytes::Bytes>>,
    /// With `--key-schema`, how the keys were generated.
    #[serde(default)]
    pub key_schema: Option<crate::schema::ValueSchema>,
    /// Records per second; `None` is unthrottled.
    pub throughput: Option<f64>,
    /// A rate that changes over the run (ramp, steps, bursts, scenario); the run ends with it.
    /// Not with `throughput`.
    pub shape: Option<crate::shape::LoadShape>,
    /// Produce to this partition only; otherwise round-robin over all partitions, per batch.
    pub partition: Option<i32>,
    pub reporting_interval: Duration,
    /// The producer's settings, whole (Java's defaults): batching, delivery, idempotence and a
    /// `transactional.id`. The engine's options and the connection's requests in flight come from
    /// them.
    pub producer: ProducerSettings,
    /// Close every batch at exactly this many records (a fixed request shape, as the sweep uses);
    /// `batch_size` and `linger` still apply.
    pub records_per_batch: Option<usize>,
    /// Seed for the payload generator and payload-file line choice.
    pub seed: u64,
    /// Run the measured phase this many times (same topic, same connections).
    pub repetitions: usize,
    /// Client properties as given (`-X`, `--producer-props`), for the result document.
    pub properties: Vec<(String, String)>,
    /// The largest record and the memory the run may hold.
    pub limits: Limits,
    /// Give each progress window its own latency and publish-delay histograms (per-interval
    /// percentiles, as OMB reports them), and report the last, partial window too, so that the
    /// windows add up to the run; off, a window has sums and maxima only.
    pub interval_histograms: bool,
    /// `Payload::Monotonic` over agents: record `i`'s value is `monotonic_offset + i ×
    /// monotonic_stride`, so that the agents' values interleave (agent k of n: k, k + n, …) and
    /// together are 0..N−1 once each, as one process's would be.
    #[serde(default)]
    pub monotonic_offset: u64,
    #[serde(default = "one")]
    pub monotonic_stride: u64,
    /// The length of a timeline window (the result's `intervals`, `--histogram-log`).
    pub timeline_interval: Duration,
    /// Where timeline windows go as they close (live metrics).
    #[serde(skip)]
    pub window_sink: crate::timeline::WindowSink,
    /// A distributed segment: the measured phase starts when this process's wall clock
    /// ([`crate::clock`]) reads this, µs since the Unix epoch (every agent at once).
    pub start_at_us: Option<u64>,
    /// A distributed segment whose coordinator writes `--histogram-log`: the result's `intervals`
    /// keep each window's histograms whole ([`crate::timeline::Interval::histograms`]), for the
    /// merge to add up exactly.
    #[serde(default)]
    pub window_histograms: bool,
    /// Stamp every record ([`crate::verify`]) and read the topic back after the run: what was
    /// acknowledged must be there, in order, intact (`--verify`).
    #[serde(default)]
    pub verify: bool,
    /// With a `transactional.id` (in `producer`): how long each transaction stays open before it
    /// is committed (EndTxn) (kafka-producer-perf-test's `--transaction-duration-ms`).
    #[serde(default = "default_transaction_duration")]
    pub transaction_duration: Duration,
    /// With a `transactional.id`: the share of transactions aborted on purpose as they end
    /// (kgo-verifier's `--transaction-abort-rate`), drawn from the run's seed; 0 commits every
    /// transaction whose records were all acknowledged.
    #[serde(default)]
    pub transaction_abort_rate: f64,
    /// With keys: the share of records written as tombstones (a null value), drawn from the
    /// seed (`--tombstones`).
    #[serde(default)]
    pub tombstones: f64,
    /// Keep every key's last acknowledged write ([`crate::latest`]), for `--latest-values`: the
    /// run's [`phase::ProduceRun::latest`].
    #[serde(default)]
    pub latest_values: bool,
    /// Topic configs a topic the run creates carries (`--topic-config cleanup.policy=compact`).
    #[serde(default)]
    pub topic_configs: Vec<(String, String)>,
    /// The first this many records of each repetition are its warm-up (KIP-1052's
    /// `--warmup-records`): counted in the run's figures, left out of the steady-state ones
    /// ([`phase::SteadyState`]). 0: no warm-up. Fewer than `num_records`.
    #[serde(default)]
    pub warmup_records: u64,
}

fn default_transaction_duration() -> Duration {
    DEFAULT_TRANSACTION_DURATION
}

/// Transactional produce: the producer's `transactional.id`, and how long each transaction stays
/// open before it is committed.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionSpec {
    pub transactional_id: String,
    pub duration: Duration,
    /// The share of transactions aborted on purpose.
    pub abort_rate: f64,
}

/// kafka-producer-perf-test's `--transaction-duration-ms` default.
pub const DEFAULT_TRANSACTION_DURATION: Duration = Duration::from_millis(3000);

impl Default for ProduceSpec {
    /// kafka-producer-perf-test's shape: 1 000 000 records of 100 bytes, unthrottled, to topic
    /// `kbench-perf`, with Kafka's producer defaults (acks=all, 16 KiB batches, linger 5 ms, 5 in
    /// flight, no compression); progress every 5 s; a fresh seed.
    fn default() -> Self {
        ProduceSpec {
            topic: "kbench-perf".into(),
            partitions: 1,
            replication_factor: 1,
            num_records: 1_000_000,
            duration: None,
            payload: Payload::Random { size: 100 },
            payload_file: None,
            value_schema: None,
            key_values: None,
            key_schema: None,
            keys: Keys::None,
            throughput: None,
            shape: None,
            partition: None,
            reporting_interval: Duration::from_secs(5),
            producer: ProducerSettings::default(),
            records_per_batch: None,
            seed: random_seed(),
            repetitions: 1,
            properties: Vec::new(),
            limits: Limits::default(),
            interval_histograms: false,
            monotonic_offset: 0,
            monotonic_stride: 1,
            start_at_us: None,
            window_histograms: false,
            timeline_interval: crate::timeline::DEFAULT_INTERVAL,
            window_sink: Default::default(),
            verify: false,
            transaction_duration: DEFAULT_TRANSACTION_DURATION,
            transaction_abort_rate: 0.0,
            tombstones: 0.0,
            latest_values: false,
            topic_configs: Vec::new(),
            warmup_records: 0,
        }
    }
}

impl ProduceSpec {
    /// The Kafka APIs a produce run sends (what may be pinned).
    pub const APIS: &[kbench_wire::ApiKey] = &[
        kbench_wire::ApiKey::Produce,
        kbench_wire::ApiKey::Metadata,
        kbench_wire::ApiKey::CreateTopics,
    ];

    /// Transactional produce: the producer's `transactional.id` and each transaction's length.
    pub fn transaction(&self) -> Option<TransactionSpec> {
        self.producer
            .transactional_id
            .as_ref()
            .map(|id| TransactionSpec {
                transactional_id: id.clone(),
                duration: self.transaction_duration,
                abort_rate: self.transaction_abort_rate,
            })
    }

    /// The connection this run's producer connects with: `cluster`'s, carrying the producer's
    /// requests in flight, so that no front end's connection settings cap them below the spec's.
    pub fn connection(&self, cluster: ClusterConfig) -> ClusterConfig {
        ClusterConfig {
            max_in_flight: self.producer.max_in_flight,
            ..cluster
        }
    }

    /// The engine's options: the producer's settings, the spec's fixed batch shape, and one open
    /// batch per partition when records carry keys.
    pub fn engine_options(&self, request_timeout: Duration) -> kbench_client::ProducerOptions {
        kbench_client::ProducerOptions {
            records_per_batch: self.records_per_batch,
            per_partition: self.keys != Keys::None,
            ..self.producer.engine_options(request_timeout)
        }
    }

    /// Every check a run needs before it starts; the error names the spec field.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_topic("topic", &self.topic)?;
        check_range("partitions", self.partitions, 1..=MAX_PARTITIONS)?;
        check_range("replication_factor", self.replication_factor, 1..=i16::MAX)?;
        check_range("num_records", self.num_records, 1..=u64::MAX)?;
        if self.monotonic_stride == 0 || self.monotonic_offset >= self.monotonic_stride {
            return Err(SpecError::new(
                "monotonic_offset, monotonic_stride",
                "the stride must be at least 1 and the offset below it (agent k of n: k, n)",
            ));
        }
        if self.warmup_records >= self.num_records {
            return Err(SpecError::new(
                "warmup_records",
                "must be strictly fewer than the number of records in the test, num_records",
            ));
        }
        check_producer(&self.producer)?;
        if let Some(t) = self.transaction() {
            // Kafka's transaction.max.timeout.ms is 15 minutes by default.
            check_range(
                "transaction_duration_ms",
                t.duration.as_millis(),
                1..=900_000,
            )?;
            // A string of the protocol: at most 32 767 bytes.
            check_range(
                "transactional_id",
                t.transactional_id.len(),
                1..=i16::MAX as usize,
            )?;
        }
        if !(0.0..=1.0).contains(&self.transaction_abort_rate) {
            return Err(SpecError::new(
                "transaction_abort_rate",
                "must be a share from 0 to 1",
            ));
        }
        if !(0.0..=1.0).contains(&self.tombstones) {
            return Err(SpecError::new("tombstones", "must be a share from 0 to 1"));
        }
        if self.keys == Keys::None && (self.tombstones > 0.0 || self.latest_values) {
            return Err(SpecError::new(
                if self.latest_values {
                    "latest_values"
                } else {
                    "tombstones"
                },
                "needs keyed records (keys, key_space)",
            ));
        }
        if self.latest_values {
            if self.producer.acks == kbench_client::Acks::None {
                return Err(SpecError::new(
                    "latest_values",
                    "needs the offsets acknowledgements give: not with acks=0",
                ));
            }
            if self.transaction().is_some() {
                return Err(SpecError::new(
                    "latest_values",
                    "not with a transactional_id (an aborted write is never a key's last value; not followed yet)",
                ));
            }
        }
        if self.transaction_abort_rate > 0.0 && self.transaction().is_none() {
            return Err(SpecError::new(
                "transaction_abort_rate",
                "only with a transactional_id",
            ));
        }
        let max_record = self.limits.max_record_bytes;
        match &self.payload {
            Payload::Random { size } => check_range("record_size", *size, 1..=max_record)?,
            Payload::Lines(lines) => {
                let longest = lines.iter().map(Bytes::len).max().unwrap_or(0);
                check_range("payload_file", longest, 1..=max_record)?;
            }
            Payload::Uniform { min, max } => {
                check_range("record_size", *min, 1..=*max)?;
                check_range("record_size", *max, 1..=max_record)?;
            }
            Payload::Monotonic => {}
            Payload::Weighted { sizes, .. } => {
                check_range("record_size", sizes.largest(), 1..=max_record)?
            }
        }
        if let Some(k) = &self.key_values
            && k.len() as u64 != u64::from(self.keys.count())
        {
            return Err(SpecError::new(
                "keys",
                format!(
                    "{} schema-encoded keys for {} key numbers (--key-schema needs --keys with a count)",
                    k.len(),
                    self.keys.count()
                ),
            ));
        }
        match self.keys {
            Keys::None => {}
            Keys::RoundRobin { count } | Keys::Random { count } => {
                check_range("keys", count, 1..=MAX_KEYS)?
            }
            Keys::Zipf { count, exponent } => {
                check_range("keys", count, 1..=MAX_KEYS)?;
                check_finite("keys", exponent)?;
                if !(0.0..=10.0).contains(&exponent) {
                    return Err(SpecError::new(
                        "keys",
                        format!("Zipf exponent {exponent} is outside 0..=10"),
                    ));
                }
            }
        }
        if let Some(t) = self.throughput {
            check_finite("throughput", t)?;
            if !(MIN_RATE..=MAX_RATE).contains(&t) {
                return Err(SpecError::new(
                    "throughput",
                    format!(
                        "{t} records/s is outside {MIN_RATE}..={MAX_RATE} (or -1 for unthrottled)"
                    ),
                ));
            }
        }
        if let Some(shape) = &self.shape {
            if self.throughput.is_some() {
                return Err(SpecError::new(
                    "throughput",
                    "a load shape sets the rate: give one or the other",
                ));
            }
            shape.check().map_err(|e| SpecError::new("shape", e))?;
        }
        check_range("repetitions", self.repetitions, 1..=10_000)?;
        if let Some(d) = self.duration {
            if d.is_zero() {
                return Err(SpecError::new("duration", "must be above zero"));
            }
            check_duration("duration", d, MAX_DURATION)?;
        }
        if self.reporting_interval.is_zero() {
            return Err(SpecError::new("reporting_interval", "must be above zero"));
        }
        check_duration("reporting_interval", self.reporting_interval, MAX_WAIT)?;
        if self.timeline_interval < Duration::from_millis(10) {
            return Err(SpecError::new("timeline_interval", "must be at least 10ms"));
        }
        check_duration("timeline_interval", self.timeline_interval, MAX_WAIT)?;
        if let Some(p) = self.partition
            && p < 0
        {
            return Err(SpecError::new("partition", "must not be negative"));
        }
        self.limits.check_memory(
            "record_size, batch_size, max_in_flight",
            self.memory_needed(),
        )
    }

    /// About the most memory the run's buffers hold at once: the open batch, one batch waiting per
    /// partition, the requests in flight (each up to `max_request_size`, or one batch, which may
    /// pass `batch_size` by one record), and the payload pool.
    /// Keyed, every partition has a batch open; the keys themselves are held too.
    pub fn memory_needed(&self) -> u128 {
        let pool = self.payload.pool_bytes();
        let record = self.payload.longest() as u128 + 64;
        let batch = self.producer.batch_size as u128 + record;
        let partitions = if self.partition.is_some() {
            1
        } else {
            self.partitions.max(1) as u128
        };
        let open = if self.keys == Keys::None {
            1
        } else {
            partitions
        };
        let keys = u128::from(self.keys.count()) * 64;
        let request = batch.max((self.producer.max_request_size as u128).min(partitions * batch));
        (open + partitions) * batch + self.producer.max_in_flight as u128 * request + pool + keys
    }

    /// The settings block of the result document (secret property values masked).
    pub fn settings_json(&self, cluster: &ClusterConfig) -> serde_json::Value {
        let p = &self.producer;
        let transaction = self.transaction();
        serde_json::json!({
            "topic": self.topic,
            // Unbounded (a duration or a shape ends the run): null, not 18446744073709551615.
            "num_records": (self.num_records != u64::MAX).then_some(self.num_records),
            "duration_s": self.duration.map(|d| d.as_secs_f64()),
            "record_size": match &self.payload { Payload::Random { size } => Some(*size), _ => None },
            "record_size_range": match &self.payload { Payload::Uniform { min, max } => Some([*min, *max]), _ => None },
            "record_size_distribution": match &self.payload { Payload::Weighted { sizes, .. } => Some(sizes.buckets()), _ => None },
            "payload_file": self.payload_file,
            "value_schema": self.value_schema,
            "key_schema": self.key_schema,
            "payload_monotonic": self.payload == Payload::Monotonic,
            "keys": self.keys.describe(),
            "throughput": self.throughput.unwrap_or(-1.0),
            "shape": self.shape,
            "acks": p.acks.name(),
            "compression": p.compression.name(),
            "batch_size": p.batch_size,
            "max_request_size": p.max_request_size,
            "linger_ms": p.linger.as_millis() as u64,
            "max_in_flight": p.max_in_flight,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "partition": self.partition,
            "client_id": cluster.client_id,
            "request_timeout_ms": cluster.request_timeout.as_millis() as u64,
            "retries": p.retries,
            "retry_backoff_ms": p.retry_backoff.as_millis() as u64,
            "delivery_timeout_ms": p.delivery_timeout.as_millis() as u64,
            "enable_idempotence": p.idempotent(),
            "transactional_id": transaction.as_ref().map(|t| &t.transactional_id),
            "transaction_duration_ms": transaction.as_ref().map(|t| t.duration.as_millis() as u64),
            "transaction_abort_rate": transaction.as_ref().map(|t| t.abort_rate),
            "tombstones": self.tombstones,
            "latest_values": self.latest_values,
            "topic_configs": self.topic_configs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "reporting_interval_ms": self.reporting_interval.as_millis() as u64,
            "timeline_interval_ms": self.timeline_interval.as_millis() as u64,
            "repetitions": self.repetitions,
            "verify": self.verify,
            "warmup_records": self.warmup_records,
            "properties": kbench_client::redacted(&self.properties),
        })
    }
}

/// A serde default: 1.
fn one() -> u64 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field name and a change that makes it invalid.
    type Case = (&'static str, fn(&mut ProduceSpec));

    #[test]
    fn the_default_spec_is_valid_and_takes_kafkas_producer_defaults() {
        let spec = ProduceSpec::default();
        assert_eq!(spec.validate(), Ok(()));
        assert_eq!(spec.producer, ProducerSettings::default());
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: [Case; 18] = [
            ("warmup_records", |s| s.warmup_records = s.num_records),
            ("record_size", |s| {
                s.payload = Payload::Uniform { min: 10, max: 5 }
            }),
            ("keys", |s| s.keys = Keys::Random { count: 0 }),
            ("keys", |s| {
                s.keys = Keys::Zipf {
                    count: 10,
                    exponent: f64::NAN,
                }
            }),
            ("throughput", |s| s.throughput = Some(1e-20)),
            ("throughput", |s| s.throughput = Some(f64::INFINITY)),
            ("duration", |s| s.duration = Some(Duration::MAX)),
            ("record_size, batch_size, max_in_flight", |s| {
                s.producer.batch_size = 1 << 30;
                s.producer.max_in_flight = 1_000;
            }),
            ("topic", |s| s.topic.clear()),
            ("num_records", |s| s.num_records = 0),
            ("record_size", |s| s.payload = Payload::Random { size: 0 }),
            ("record_size", |s| {
                s.payload = Payload::Random {
                    size: s.limits.max_record_bytes + 1,
                }
            }),
            ("throughput", |s| s.throughput = Some(f64::NAN)),
            ("batch_size", |s| s.producer.batch_size = 0),
            ("partitions", |s| s.partitions = 0),
            // The producer's own rules hold however the spec was made (flags, /v1, a segment).
            ("acks", |s| {
                s.producer.idempotence = true;
                s.producer.acks = kbench_client::Acks::Leader;
            }),
            ("max.in.flight.requests.per.connection", |s| {
                s.producer.transactional_id = Some("t".into());
                s.producer.max_in_flight = 6;
            }),
            ("linger", |s| s.producer.linger = Duration::MAX),
        ];
        for (field, break_it) in cases {
            let mut s = ProduceSpec::default();
            break_it(&mut s);
            assert_eq!(s.validate().unwrap_err().field, field);
        }
    }

    #[test]
    fn the_connection_carries_the_producers_requests_in_flight() {
        // Whatever connection settings a front end built (the /v1 and agent paths build them from
        // connection properties alone), the producer's own limit is the connection's.
        let mut spec = ProduceSpec::default();
        spec.producer.max_in_flight = 12;
        let cluster = ClusterConfig::new(vec!["h:1".into()], "c", Default::default());
        assert_eq!(cluster.max_in_flight, kbench_client::config::MAX_IN_FLIGHT);
        assert_eq!(spec.connection(cluster).max_in_flight, 12);
    }

    #[test]
    fn key_distributions_parse_and_describe_themselves() {
        for text in [
            "none",
            "round-robin:7",
            "random:10000",
            "zipf:100:1.2",
            "zipf:5:0",
        ] {
            let keys = Keys::parse(text).unwrap();
            assert_eq!(Keys::parse(&keys.describe()), Ok(keys), "{text}");
        }
        assert_eq!(
            Keys::parse("zipf"),
            Ok(Keys::Zipf {
                count: DEFAULT_KEY_COUNT,
                exponent: 1.0
            })
        );
        assert_eq!(
            Keys::parse("round-robin"),
            Ok(Keys::RoundRobin {
                count: DEFAULT_KEY_COUNT
            })
        );
        for bad in [
            "",
            "hash",
            "random:0",
            "random:x",
            "random:2000000",
            "zipf:10:-1",
            "zipf:10:inf",
            "random:10:2",
            "none:3",
            "zipf:1:1:1",
        ] {
            assert!(Keys::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(Keys::key(42), Bytes::from_static(b"0000000042"));
    }

    #[test]
    fn secret_properties_are_masked_in_the_settings() {
        let spec = ProduceSpec {
            properties: vec![("sasl.password".into(), "hunter2".into())],
            ..ProduceSpec::default()
        };
        let cluster = ClusterConfig::new(vec!["h:1".into()], "c", Default::default());
        let text = spec.settings_json(&cluster).to_string();
        assert!(!text.contains("hunter2") && text.contains("***"), "{text}");
    }
}
