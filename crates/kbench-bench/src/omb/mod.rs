//! OpenMessaging Benchmark workloads, run unmodified: `topics` fresh topics of
//! `partitionsPerTopic`; `producersPerTopic` producers each (one connection set each, the rate
//! split evenly, open loop); `subscriptionsPerTopic` consumer groups of `consumerPerSubscription`
//! members each, reading from before the first record and timing each record end to end (wall
//! clock at the fetch's answer less its CreateTime, ms resolution, as OMB). A warm-up phase runs
//! first and is left out of every figure; then the measured phase; then a bounded drain so that
//! consumers catch up. Periodic lines and the result carry OMB's figures under OMB's names
//! ([`report`]), beside kbench's own result.

pub mod report;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hdrhistogram::Histogram;
use kbench_client::{ClusterConfig, ConsumerProperties, ProducerProperties, TopicLayout};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::consume::{ConsumeMode, ConsumeObserver, ConsumeRun, ConsumeSpec, StartAt};
use crate::error::{BenchError, SpecError};
use crate::measure::latency_histogram;
use crate::produce::{IntervalReport, Keys, Payload, ProduceRun, ProduceSpec};
use crate::stop::Stop;

pub use workload::{KeyDistributor, OmbDriver, OmbWorkload};

/// A workload made runnable: the file's fields, the driver's settings, and what kbench adds.
#[derive(Debug, Clone)]
pub struct OmbSpec {
    pub workload: OmbWorkload,
    /// The driver's name (`name:`), or "Kafka".
    pub driver_name: String,
    pub replication_factor: i16,
    pub producer: ProducerProperties,
    pub consumer: ConsumerProperties,
    /// Driver properties as given (for the result; secrets masked there).
    pub producer_properties: Vec<(String, String)>,
    pub consumer_properties: Vec<(String, String)>,
    /// Driver settings kbench does not apply, each with why: listed, never silently dropped.
    pub not_applied: Vec<String>,
    /// The driver's `topicConfig`, sent as configs in the CreateTopics request of every topic.
    pub topic_configs: Vec<(String, String)>,
    pub payload: Payload,
    pub keys: Keys,
    pub warmup: Duration,
    pub test_duration: Duration,
    /// OMB prints a line every 10 s.
    pub reporting_interval: Duration,
    /// Consumers catch up for at most this long after the producers stop.
    pub drain: Duration,
    /// producerRate 0: the search's step length.
    pub search_step: Duration,
    /// consumerBacklogSizeGB > 0: how much longer than the test the producers may go on while the
    /// backlog drains (OMB waits without a bound).
    pub backlog_timeout: Duration,
    pub seed: u64,
    /// Topics are `{topic_prefix}-0000`, `-0001`, …; fresh for every run.
    pub topic_prefix: String,
    /// Where every producer's and consumer's timeline windows go (live metrics).
    pub window_sink: crate::timeline::WindowSink,
    /// The driver's Confluent serializer settings (`schema.registry.url`, …), for
    /// `--value-schema`; without one they are listed as not applied
    /// ([`OmbSpec::serializer_not_applied`]).
    pub serializer: BTreeMap<String, String>,
    /// `--value-schema`: how the values (the payload's lines) were made.
    pub value_schema: Option<crate::schema::ValueSchema>,
    /// A distributed run's agent: which of the workload's producers and consumers run here;
    /// `None` runs them all.
    pub share: Option<OmbShare>,
    /// What this process may build and hold: its records' size and its producers' buffers (an
    /// agent's are its own `--max-record-size` and `--memory-budget`).
    pub limits: crate::spec::Limits,
}

/// The producers and consumers one agent runs of a workload, by their index over the whole
/// workload: producer `t × producersPerTopic + p`, consumer
/// `(t × subscriptionsPerTopic + s) × consumerPerSubscription + c`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OmbShare {
    pub producers: Vec<u32>,
    pub consumers: Vec<u32>,
}

/// Where an OMB run is, as its live figures say it.
const PHASES: [&str; 5] = ["starting", "joined", "running", "draining", "done"];
const JOINED: u8 = 1;
const RUNNING: u8 = 2;
const DRAINING: u8 = 3;
const DONE: u8 = 4;

/// An OMB run's live figures: its phase, what its producers acknowledged and its consumers read so
/// far. An agent's segment also waits here, once its consumers have joined, for the instant its
/// producers start ([`OmbLive::go`]): its coordinator gives it once every agent's have.
#[derive(Debug)]
pub struct OmbLive {
    phase: std::sync::atomic::AtomicU8,
    acked: std::sync::atomic::AtomicU64,
    consumed: std::sync::atomic::AtomicU64,
    go: tokio::sync::watch::Sender<Option<u64>>,
}

impl Default for OmbLive {
    fn default() -> OmbLive {
        OmbLive {
            phase: Default::default(),
            acked: Default::default(),
            consumed: Default::default(),
            go: tokio::sync::watch::channel(None).0,
        }
    }
}

impl OmbLive {
    /// The producers start when this process's wall clock ([`crate::clock`]) reads `at_us`.
    pub fn go(&self, at_us: u64) {
        self.go.send_replace(Some(at_us));
    }

    pub fn phase(&self) -> &'static str {
        PHASES[usize::from(self.phase.load(std::sync::atomic::Ordering::SeqCst)).min(4)]
    }

    fn set_phase(&self, phase: u8) {
        // After the counts it follows (draining: the producers' final count), for a reader that
        // reads the phase first.
        self.phase.store(phase, std::sync::atomic::Ordering::SeqCst);
    }

    /// Records acknowledged (warm-up included) and read, so far. Read after [`OmbLive::phase`]:
    /// once it says `draining`, the acknowledged count is the producers' final one.
    pub fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.acked.load(SeqCst), self.consumed.load(SeqCst))
    }

    /// The start instant, once given; `None` when `cancel` came first.
    async fn started(&self, cancel: &tokio_util::sync::CancellationToken) -> Option<u64> {
        let mut told = self.go.subscribe();
        loop {
            if let Some(at) = *told.borrow_and_update() {
                return Some(at);
            }
            tokio::select! {
                _ = told.changed() => {}
                _ = cancel.cancelled() => return None,
            }
        }
    }
}

/// The largest payload pool a workload may ask for, in bytes.
const MAX_POOL_BYTES: u128 = 1 << 30;

/// The most producers and consumers one process runs (a workload's, or an agent's share of one).
pub const MAX_PROCESS_CLIENTS: u64 = 1_000;

impl OmbSpec {
    /// The spec a workload and a driver make. `base` is the workload file's folder (a relative
    /// `payloadFile` is found from the working directory first, then from there).
    pub fn new(
        workload: OmbWorkload,
        driver: &OmbDriver,
        base: Option<&std::path::Path>,
        seed: u64,
    ) -> Result<OmbSpec, String> {
        let mut not_applied = Vec::new();
        let common = workload::properties("commonConfig", driver.common_config.as_deref())?;
        let producer_props =
            workload::properties("producerConfig", driver.producer_config.as_deref())?;
        let consumer_props =
            workload::properties("consumerConfig", driver.consumer_config.as_deref())?;
        // Carried by the CreateTopics request that makes each topic; a config the broker refuses
        // fails the run, naming it.
        let topic_configs = workload::properties("topicConfig", driver.topic_config.as_deref())?;
        let mut producer = ProducerProperties::default();
        producer.connection.client_id = "kbench-omb-producer".into();
        let mut consumer = ConsumerProperties::default();
        let mut producer_properties = Vec::new();
        let mut consumer_properties = Vec::new();
        for (block, props, to_producer, to_consumer) in [
            ("commonConfig", &common, true, true),
            ("producerConfig", &producer_props, true, false),
            ("consumerConfig", &consumer_props, false, true),
        ] {
            for (k, v) in props {
                if to_producer {
                    producer_properties.push((k.clone(), v.clone()));
                    apply(block, k, v, &mut not_applied, |b, k, v| {
                        producer.apply(b, k, v)
                    })?;
                }
                if to_consumer {
                    consumer_properties.push((k.clone(), v.clone()));
                    // A common key the producer already listed is not listed twice.
                    let mut quiet = Vec::new();
                    let list = if to_producer {
                        &mut quiet
                    } else {
                        &mut not_applied
                    };
                    apply(block, k, v, list, |b, k, v| consumer.apply(b, k, v))?;
                }
            }
        }
        // OMB's Kafka driver writes bytes: a serializer's settings are kept for --value-schema.
        let serializer = std::mem::take(&mut producer.serializer);
        producer.finish().map_err(|e| e.to_string())?;
        consumer.finish().map_err(|e| e.to_string())?;
        if let (Some(_), Some(file)) = (&workload.message_size_distribution, &workload.payload_file)
        {
            not_applied.push(format!(
                "payloadFile {file}: with messageSizeDistribution every bucket has its own payload (as OMB)"
            ));
        }
        if driver.reset == Some(true) {
            not_applied.push(
                "reset: true: kbench's topics are fresh for every run, none is deleted".into(),
            );
        }

        let payload = payload_of(&workload, base, seed)?;
        let keys = match workload.key_distributor {
            KeyDistributor::NoKey => Keys::None,
            KeyDistributor::KeyRoundRobin => Keys::RoundRobin {
                count: crate::produce::DEFAULT_KEY_COUNT,
            },
            KeyDistributor::RandomNano => Keys::Random {
                count: crate::produce::DEFAULT_KEY_COUNT,
            },
        };
        let minutes = |m: f64| Duration::from_secs_f64(m * 60.0);
        Ok(OmbSpec {
            warmup: minutes(workload.warmup_duration_minutes),
            test_duration: minutes(workload.test_duration_minutes),
            driver_name: driver.name.clone().unwrap_or_else(|| "Kafka".into()),
            replication_factor: driver.replication_factor.unwrap_or(1),
            workload,
            producer,
            consumer,
            producer_properties,
            consumer_properties,
            not_applied,
            topic_configs,
            payload,
            keys,
            reporting_interval: Duration::from_secs(10),
            drain: Duration::from_secs(10),
            search_step: Duration::from_secs(5),
            backlog_timeout: Duration::from_secs(1800),
            seed,
            topic_prefix: format!("kbench-omb-{:08x}", seed as u32),
            window_sink: Default::default(),
            serializer,
            value_schema: None,
            share: None,
            limits: crate::spec::Limits::default(),
        })
    }

    /// Without `--value-schema`, the driver's serializer settings do nothing (OMB's driver sends
    /// bytes): listed.
    pub fn serializer_not_applied(&mut self) {
        for key in self.serializer.keys() {
            self.not_applied.push(format!(
                "{key}: a serializer setting (OMB's driver sends bytes; --value-schema FILE uses it)"
            ));
        }
    }

    /// A record's size as OMB's result states it: the payload's, or with
    /// `messageSizeDistribution` the mean the weights give (rounded; OMB's is the weighted mean of
    /// each bucket's midpoint, while its records are each bucket's top: kbench's is what it sends).
    pub fn message_size(&self) -> u64 {
        if let Some(schema) = &self.value_schema {
            return schema.mean_value_bytes.round() as u64;
        }
        match &self.payload {
            Payload::Weighted { sizes, .. } => sizes.mean().round() as u64,
            p => p.longest() as u64,
        }
    }

    pub fn producers(&self) -> u32 {
        self.workload.topics * self.workload.producers_per_topic
    }

    pub fn consumers(&self) -> u32 {
        self.workload.topics
            * self.workload.subscriptions_per_topic
            * self.workload.consumer_per_subscription
    }

    /// Whether this process runs the workload's producer `i`.
    fn runs_producer(&self, i: u32) -> bool {
        // A share's indices are ascending (`split_omb`).
        self.share
            .as_ref()
            .is_none_or(|s| s.producers.binary_search(&i).is_ok())
    }

    /// Whether this process runs the workload's consumer `i`.
    fn runs_consumer(&self, i: u32) -> bool {
        self.share
            .as_ref()
            .is_none_or(|s| s.consumers.binary_search(&i).is_ok())
    }

    /// The producers this process runs.
    pub fn local_producers(&self) -> u32 {
        self.share
            .as_ref()
            .map_or(self.producers(), |s| s.producers.len() as u32)
    }

    /// The consumers this process runs.
    pub fn local_consumers(&self) -> u32 {
        self.share
            .as_ref()
            .map_or(self.consumers(), |s| s.consumers.len() as u32)
    }

    pub fn topic(&self, i: u32) -> String {
        format!("{}-{i:04}", self.topic_prefix)
    }

    /// Each producer's spec: its share of the rate, the payload, keys and driver settings.
    pub(crate) fn producer_spec(&self, topic: &str, rate: Option<f64>, index: u32) -> ProduceSpec {
        ProduceSpec {
            topic: topic.to_string(),
            partitions: self.workload.partitions_per_topic as i32,
            replication_factor: self.replication_factor,
            num_records: u64::MAX,
            payload: self.payload.clone(),
            keys: self.keys,
            throughput: rate,
            // Windows feed the periods (and the backlog): short, so that a period is up to date.
            reporting_interval: Duration::from_millis(100),
            seed: self.seed.wrapping_add(u64::from(index)),
            properties: self.producer_properties.clone(),
            interval_histograms: true,
            window_sink: self.window_sink.clone(),
            producer: self.producer.producer.clone(),
            limits: self.limits,
            ..ProduceSpec::default()
        }
    }

    /// Every check before a run starts: the fields, and what this process runs (its share, over
    /// agents): its clients, and its producers' buffers against its memory budget.
    pub fn validate(&self) -> Result<(), SpecError> {
        let clients = u64::from(self.local_producers()) + u64::from(self.local_consumers());
        if clients > MAX_PROCESS_CLIENTS {
            return Err(SpecError::new(
                "topics × (producersPerTopic + subscriptionsPerTopic × consumerPerSubscription)",
                format!(
                    "{clients} clients, above the {MAX_PROCESS_CLIENTS} one kbench process runs (spread them over agents: --agents)"
                ),
            ));
        }
        let probe = self.checked_probe(self.limits)?;
        let memory = probe.memory_needed() * u128::from(self.local_producers());
        probe
            .limits
            .check_memory("producersPerTopic, messageSize", memory)
    }

    /// The checks that do not depend on where the producers run: a coordinator's over agents,
    /// where each agent checks its share's records and buffers against its own limits.
    pub fn validate_fields(&self) -> Result<(), SpecError> {
        let unbounded = crate::spec::Limits {
            max_record_bytes: usize::MAX,
            memory_budget_bytes: u64::MAX,
        };
        self.checked_probe(unbounded).map(drop)
    }

    /// One producer's spec, checked against `limits` (a single producer must fit the process),
    /// and the workload's own fields.
    fn checked_probe(&self, limits: crate::spec::Limits) -> Result<ProduceSpec, SpecError> {
        let probe = ProduceSpec {
            limits,
            ..self.producer_spec(&self.topic(0), None, 0)
        };
        probe.validate()?;
        crate::spec::check_range("replicationFactor", self.replication_factor, 1..=i16::MAX)?;
        Ok(probe)
    }
}

/// Apply one property; keys kbench does not know or support are listed (with their block), a bad
/// value of a known key is an error.
fn apply(
    block: &str,
    key: &str,
    value: &str,
    not_applied: &mut Vec<String>,
    f: impl FnOnce(&str, &str, &str) -> Result<(), kbench_client::PropertyError>,
) -> Result<(), String> {
    use kbench_client::PropertyError as E;
    match f(block, key, value) {
        Ok(()) => Ok(()),
        Err(E::Unknown { .. }) => {
            not_applied.push(format!("{block} {key}: not a property kbench implements"));
            Ok(())
        }
        Err(E::Unsupported { .. }) => {
            not_applied.push(format!("{block} {key}: not supported by kbench yet"));
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The payload a workload describes: `payloadFile` whole (OMB sends the file's bytes as every
/// record), a pool of randomized payloads (`randomBytesRatio` of each random, the rest zeros), or
/// `messageSize` random letters.
fn payload_of(
    w: &OmbWorkload,
    base: Option<&std::path::Path>,
    seed: u64,
) -> Result<Payload, String> {
    if let Some(sizes) = w.size_distribution() {
        // OMB's distribution mode: one payload per bucket, zeros, or randomBytesRatio of it random
        // with useRandomizedPayloads.
        let ratio = if w.use_randomized_payloads {
            w.random_bytes_ratio
        } else {
            0.0
        };
        return Ok(Payload::Weighted {
            sizes,
            random_ratio: Some(ratio),
        });
    }
    let message_size = w.message_size();
    if w.use_randomized_payloads {
        let pool = u128::from(w.randomized_payload_pool_size) * message_size as u128;
        if pool > MAX_POOL_BYTES {
            return Err(format!(
                "randomizedPayloadPoolSize × messageSize: {} MiB of payloads, above the {} MiB allowed",
                pool >> 20,
                MAX_POOL_BYTES >> 20
            ));
        }
        let mut rng = SmallRng::seed_from_u64(seed);
        let random = ((message_size as f64) * w.random_bytes_ratio).round() as usize;
        let lines = (0..w.randomized_payload_pool_size)
            .map(|_| {
                let mut v = vec![0u8; message_size];
                rng.fill(&mut v[..random.min(message_size)]);
                Bytes::from(v)
            })
            .collect();
        return Ok(Payload::Lines(lines));
    }
    if let Some(file) = &w.payload_file {
        let direct = std::path::PathBuf::from(file);
        let path = if direct.exists() || base.is_none() {
            direct
        } else {
            base.map(|b| b.join(file)).unwrap_or(direct)
        };
        let bytes = kbench_client::input::read(&path, kbench_client::input::PAYLOAD)
            .map_err(|e| format!("payloadFile {}: {e}", path.display()))?;
        if bytes.is_empty() {
            return Err(format!("payloadFile {}: empty", path.display()));
        }
        return Ok(Payload::Lines(vec![Bytes::from(bytes)]));
    }
    Ok(Payload::Random { size: message_size })
}

/// One reporting period's figures, OMB's units: rates per second, publish and end-to-end latency
/// in ms, publish delay in µs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Period {
    /// Seconds since the measured phase began (negative: warm-up).
    pub at_s: f64,
    pub warmup: bool,
    /// The period's length on the clock (the consume rates' span). The publish rates are over the
    /// producers' windows it holds (acknowledgements arrive per 100 ms window, so a short tail
    /// period holding a whole window is never counted as a burst).
    pub duration_s: f64,
    pub publish_rate: f64,
    pub publish_mb_per_sec: f64,
    pub publish_error_rate: f64,
    pub consume_rate: f64,
    pub consume_mb_per_sec: f64,
    pub backlog: i64,
    #[serde(skip, default = "crate::measure::latency_histogram")]
    pub publish_latency: Histogram<u64>,
    #[serde(skip, default = "crate::measure::latency_histogram")]
    pub publish_delay: Histogram<u64>,
    #[serde(skip, default = "crate::measure::latency_histogram")]
    pub end_to_end: Histogram<u64>,
    /// An agent's period (a distributed run): what its coordinator needs to merge it exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<PeriodParts>,
}

/// An agent's period whole: its histograms ([`crate::measure::encode_histogram`]) and its running
/// counts at the period's end (the merged backlog is every agent's acknowledged records × the
/// subscriptions, less every agent's reads: one agent's consumers read others' producers' records).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PeriodParts {
    pub publish_latency: String,
    pub publish_delay: String,
    pub end_to_end: String,
    pub acked: u64,
    pub consumed: u64,
}

/// What producers and consumers report as they go, under one lock.
struct Tally {
    acked: u64,
    failed: u64,
    pub_bytes: u64,
    consumed: u64,
    con_bytes: u64,
    period_start: Instant,
    p_acked: u64,
    p_failed: u64,
    p_pub_bytes: u64,
    p_consumed: u64,
    p_con_bytes: u64,
    /// The producers' window time this period holds, summed over producers.
    p_window_secs: f64,
    p_latency: Histogram<u64>,
    p_delay: Histogram<u64>,
    p_e2e: Histogram<u64>,
    /// Measured phase: end-to-end latency of every record read since it began.
    e2e: Histogram<u64>,
    measuring: bool,
    joined: u32,
}

struct Shared {
    tally: Mutex<Tally>,
    subscriptions: u32,
    producers: u32,
    live: Arc<OmbLive>,
    /// An agent's run: its periods carry their [`PeriodParts`].
    agent: bool,
    /// Consumers hold off fetching (a backlog being built).
    paused: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn new(subscriptions: u32, producers: u32, live: Arc<OmbLive>, agent: bool) -> Shared {
        Shared {
            tally: Mutex::new(Tally {
                acked: 0,
                failed: 0,
                pub_bytes: 0,
                consumed: 0,
                con_bytes: 0,
                period_start: Instant::now(),
                p_acked: 0,
                p_failed: 0,
                p_pub_bytes: 0,
                p_consumed: 0,
                p_con_bytes: 0,
                p_window_secs: 0.0,
                p_latency: latency_histogram(),
                p_delay: latency_histogram(),
                p_e2e: latency_histogram(),
                e2e: latency_histogram(),
                measuring: false,
                joined: 0,
            }),
            subscriptions,
            producers,
            live,
            agent,
            paused: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn producer_window(&self, w: &IntervalReport) {
        let mut t = self.tally.lock().expect("tally lock");
        self.live
            .acked
            .fetch_add(w.records, std::sync::atomic::Ordering::Relaxed);
        t.acked += w.records;
        t.failed += w.failed;
        t.pub_bytes += w.bytes;
        t.p_acked += w.records;
        t.p_failed += w.failed;
        t.p_pub_bytes += w.bytes;
        t.p_window_secs += w.elapsed.as_secs_f64();
        if let Some(h) = &w.latency {
            let _ = t.p_latency.add(h);
        }
        if let Some(h) = &w.publish_delay {
            let _ = t.p_delay.add(h);
        }
    }

    /// Cut the period: its figures, and fresh counters.
    fn period(&self, epoch: Instant) -> Period {
        let mut guard = self.tally.lock().expect("tally lock");
        let t = &mut *guard;
        let now = Instant::now();
        let secs = (now - t.period_start).as_secs_f64().max(1e-9);
        // The time the producers' windows in this period span (each producer's, on average).
        // Never less than the period itself: a producer that ended early (or never started)
        // sends no windows, and must not shrink the others' time.
        let pub_secs = if t.p_window_secs > 0.0 {
            (t.p_window_secs / f64::from(self.producers.max(1))).max(secs)
        } else {
            secs
        };
        let fresh = |h: &Histogram<u64>| Histogram::new_from(h);
        let (fresh_latency, fresh_delay, fresh_e2e) =
            (fresh(&t.p_latency), fresh(&t.p_delay), fresh(&t.p_e2e));
        let parts = self.agent.then(|| PeriodParts {
            publish_latency: crate::measure::encode_histogram(&t.p_latency),
            publish_delay: crate::measure::encode_histogram(&t.p_delay),
            end_to_end: crate::measure::encode_histogram(&t.p_e2e),
            acked: t.acked,
            consumed: t.consumed,
        });
        let p = Period {
            at_s: if now >= epoch {
                (now - epoch).as_secs_f64()
            } else {
                -(epoch - now).as_secs_f64()
            },
            warmup: !t.measuring,
            duration_s: secs,
            publish_rate: t.p_acked as f64 / pub_secs,
            publish_mb_per_sec: t.p_pub_bytes as f64 / pub_secs / MB,
            publish_error_rate: t.p_failed as f64 / pub_secs,
            consume_rate: t.p_consumed as f64 / secs,
            consume_mb_per_sec: t.p_con_bytes as f64 / secs / MB,
            // Acknowledgements arrive in windows (100 ms), reads at once: never below zero.
            backlog: ((t.acked * u64::from(self.subscriptions)) as i64 - t.consumed as i64).max(0),
            publish_latency: std::mem::replace(&mut t.p_latency, fresh_latency),
            publish_delay: std::mem::replace(&mut t.p_delay, fresh_delay),
            end_to_end: std::mem::replace(&mut t.p_e2e, fresh_e2e),
            parts,
        };
        t.period_start = now;
        t.p_window_secs = 0.0;
        (
            t.p_acked,
            t.p_failed,
            t.p_pub_bytes,
            t.p_consumed,
            t.p_con_bytes,
        ) = (0, 0, 0, 0, 0);
        p
    }
}

const MB: f64 = 1024.0 * 1024.0;

struct ConsumerHook(Arc<Shared>);

impl ConsumeObserver for ConsumerHook {
    fn paused(&self) -> bool {
        self.0.paused.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn joined(&self) {
        self.0.tally.lock().expect("tally lock").joined += 1;
    }
    fn fetched(&self, records: u64, bytes: u64, end_to_end_us: &[u64]) {
        let mut t = self.0.tally.lock().expect("tally lock");
        self.0
            .live
            .consumed
            .fetch_add(records, std::sync::atomic::Ordering::Relaxed);
        t.consumed += records;
        t.con_bytes += bytes;
        t.p_consumed += records;
        t.p_con_bytes += bytes;
        let measuring = t.measuring;
        for us in end_to_end_us {
            let _ = t.p_e2e.record(*us);
            if measuring {
                let _ = t.e2e.record(*us);
            }
        }
    }
}

/// What an OMB run leaves.
#[derive(Debug)]
pub struct OmbRun {
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    pub topics: Vec<String>,
    /// The rate run, records/s over every producer (`None`: unthrottled).
    pub rate: Option<f64>,
    /// producerRate 0: the search's steps.
    pub search: Option<crate::produce::search::MaxRate>,
    /// The measured phase of every producer, pooled (histograms merged exactly; elapsed times
    /// add up, one per producer).
    pub producers: ProduceRun,
    pub producer_count: usize,
    /// Warm-up of every producer, pooled (counted, never reported as a figure).
    pub warmup: Option<ProduceRun>,
    pub consumers: Vec<ConsumeRun>,
    /// Measured phase: end-to-end latency, µs.
    pub end_to_end: Histogram<u64>,
    /// Measured periods (warm-up periods are printed, not kept).
    pub periods: Vec<Period>,
    /// Records read over the whole run by every consumer, and the records every subscription
    /// should have read (acknowledged × subscriptions per topic).
    pub consumed: u64,
    pub expected_consumed: u64,
    pub negotiated: BTreeMap<String, i16>,
    pub aborted: Option<String>,
    /// Producers or consumers that failed (the run went on without them), said here, never dropped.
    pub errors: Vec<String>,
    /// consumerBacklogSizeGB > 0: how the backlog was built and drained.
    pub backlog: Option<Backlog>,
}

impl OmbRun {
    /// What the cluster did as the consumers saw it (the producers' is `producers.cluster`).
    pub fn consumer_cluster(&self) -> crate::cluster::ClusterReport {
        let mut all = crate::cluster::ClusterReport::default();
        for c in &self.consumers {
            all.merge(&c.cluster);
        }
        all
    }
}

/// How long a backlog took to build and to drain, measured from the measured phase's start.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Backlog {
    pub requested_bytes: u64,
    /// Draining is done at this many records behind (OMB's rule).
    pub drained_at_records: u64,
    /// Seconds from the measured phase's start until the backlog was built.
    pub built_s: Option<f64>,
    /// Seconds from then until it was drained (NaN: given up).
    pub drained_s: Option<f64>,
    /// Records read while draining.
    pub drain_records: u64,
    #[serde(skip)]
    consumed_at_build: u64,
}

/// Backlog mode: producers go on in phases of this length until the backlog drained.
const BACKLOG_EXTENSION: Duration = Duration::from_secs(2);

/// Run the workload. `cluster` is the producers' connection settings (each client gets its own
/// connections and client id); `live` follows it; `on_period` hears every period, warm-up
/// included.
///
/// With [`OmbSpec::share`] (a distributed run's agent) only the share's producers and consumers
/// run here; once its consumers have joined, the producers wait for the start instant its
/// coordinator gives ([`OmbLive::go`]), and after them the consumers read until it says the agents
/// together have read every record ([`crate::distributed::DRAINED`]), or for `drain` at most. An
/// agent without producers keeps their phases all the same (warm-up, then the measured phase), so
/// that its consumers' periods and end-to-end figures are the run's.
pub async fn run_omb(
    spec: &OmbSpec,
    cluster: ClusterConfig,
    stop: Stop,
    live: Arc<OmbLive>,
    on_period: impl Fn(&Period) + Send + Sync + 'static,
    on_note: impl Fn(&str) + Send + Sync + 'static,
) -> Result<OmbRun, BenchError> {
    let cancel = stop.token().clone();
    spec.validate()?;
    let w = &spec.workload;
    let (layouts, negotiated) = prepare_topics(spec, &cluster, &cancel).await?;
    let started_at = SystemTime::now();
    let (rate, search) = choose_rate(spec, &cluster, &stop, &on_note).await?;

    let shared = Arc::new(Shared::new(
        w.subscriptions_per_topic,
        spec.local_producers(),
        live.clone(),
        spec.share.is_some(),
    ));
    let mut errors: Vec<String> = Vec::new();
    let mut consumers = Consumers::spawn(spec, &cluster, &layouts, &shared, &stop);
    consumers.wait_joined(spec, &cancel, &mut errors).await?;
    if spec.share.is_some() {
        live.set_phase(JOINED);
        let started = match live.started(&cancel).await {
            Some(at) => crate::clock::sleep_until_wall(at, &cancel).await,
            None => false,
        };
        if !started {
            consumers.finish(&mut errors).await;
            return Err(BenchError::Run(format!(
                "stopped before the producers' start: {}",
                stop.reason().unwrap_or_else(|| "stopped".into())
            )));
        }
    }
    live.set_phase(RUNNING);

    // Producers: warm-up, a barrier, the measured phase.
    let backlog_bytes = (w.consumer_backlog_size_gb * (1u64 << 30) as f64) as u64;
    let common = ProducerCommon {
        shared: shared.clone(),
        // An agent without producers has a stand-in that keeps their phases' time.
        barrier: Arc::new(tokio::sync::Barrier::new(
            spec.local_producers().max(1) as usize + 1,
        )),
        drained: Arc::new(std::sync::atomic::AtomicBool::new(backlog_bytes == 0)),
        stop: stop.clone(),
    };
    let mut producer_tasks = spawn_producers(spec, &cluster, &layouts, rate, &common);

    let mut run = Phases {
        spec,
        shared: shared.clone(),
        on_period: &on_period,
        on_note: &on_note,
        drained: common.drained.clone(),
        periods: Vec::new(),
        errors,
    };
    let (epoch, mut tick) = run.warm_up(&common.barrier).await;
    let mut backlog = run.start_backlog(backlog_bytes);
    let (warm_runs, measured_runs) = run
        .follow(&mut producer_tasks, epoch, &mut tick, &mut backlog)
        .await;
    // Consumers catch up (bounded), then stop: every record acknowledged, warm-up included, once
    // per subscription.
    let acked: u64 = warm_runs
        .iter()
        .chain(&measured_runs)
        .map(|r| r.records_acked)
        .sum();
    let expected_consumed = acked * u64::from(w.subscriptions_per_topic);
    // The producers' own count: their windows may leave the last acknowledgements out, and a
    // coordinator reads this count, once the phase says draining, as what must be read.
    live.acked.store(acked, std::sync::atomic::Ordering::SeqCst);
    live.set_phase(DRAINING);
    run.drain(epoch, expected_consumed, &cancel).await;
    let Phases {
        periods,
        mut errors,
        ..
    } = run;
    let consumers = consumers.finish(&mut errors).await;
    live.set_phase(DONE);
    let Some(producers) = ProduceRun::pooled(&measured_runs) else {
        return Err(BenchError::Run(format!(
            "no producer ran: {}",
            errors.join("; ")
        )));
    };
    let t = shared.tally.lock().expect("tally lock");
    let aborted = stop.reason();
    Ok(OmbRun {
        started_at,
        ended_at: SystemTime::now(),
        topics: layouts.iter().map(|l| l.name.clone()).collect(),
        rate,
        search,
        producer_count: measured_runs.len(),
        producers,
        warmup: ProduceRun::pooled(&warm_runs),
        consumers,
        end_to_end: t.e2e.clone(),
        periods,
        consumed: t.consumed,
        expected_consumed,
        negotiated,
        aborted,
        errors,
        backlog,
    })
}

/// Connect, check that the cluster has the APIs the workload needs, and ensure its topics: their
/// layouts and the negotiated API versions.
async fn prepare_topics(
    spec: &OmbSpec,
    cluster: &ClusterConfig,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(Vec<TopicLayout>, BTreeMap<String, i16>), BenchError> {
    let w = &spec.workload;
    let admin = crate::produce::job::connect_bounded(cluster.clone(), cancel).await?;
    let mut needed = ProduceSpec::APIS.to_vec();
    if spec.consumers() > 0 {
        needed.extend_from_slice(ConsumeSpec::APIS);
    }
    // CreateTopics only for a topic that does not exist yet (ensure_topic names the API then): a
    // broker without it (librdkafka's mock cluster) runs a workload whose topics were made for it.
    needed.retain(|a| *a != kbench_wire::ApiKey::CreateTopics);
    admin.check_versions(&needed)?;
    let mut layouts: Vec<TopicLayout> = Vec::new();
    for t in 0..w.topics {
        let name = spec.topic(t);
        let layout = admin
            .ensure_topic_with(
                &name,
                w.partitions_per_topic as i32,
                spec.replication_factor,
                &spec.topic_configs,
            )
            .await
            .map_err(|e| BenchError::topic(&name, e))?;
        layouts.push(layout);
    }
    let negotiated: BTreeMap<String, i16> = admin.negotiated().named().collect();
    admin.close(Duration::from_secs(2)).await;
    Ok((layouts, negotiated))
}

/// The run's rate over every producer: the workload's producerRate, or (producerRate 0) the
/// highest rate one producer set sustains on a topic of its own, with the search's steps.
async fn choose_rate(
    spec: &OmbSpec,
    cluster: &ClusterConfig,
    stop: &Stop,
    on_note: &impl Fn(&str),
) -> Result<(Option<f64>, Option<crate::produce::search::MaxRate>), BenchError> {
    if spec.workload.producer_rate > 0.0 {
        return Ok((Some(spec.workload.producer_rate), None));
    }
    on_note("producerRate 0: searching for the highest sustainable rate first");
    // On a topic of its own, so that the consumers never read the search's records.
    let probe = ProduceSpec {
        reporting_interval: spec.search_step * 2,
        interval_histograms: false,
        // The search is not the run: its records are not the run's metrics.
        window_sink: Default::default(),
        ..spec.producer_spec(&format!("{}-search", spec.topic_prefix), None, 0)
    };
    let found = crate::produce::search::find_max_rate(
        &probe,
        cluster.clone(),
        false,
        &crate::produce::search::SearchSettings {
            step_duration: spec.search_step,
            ..Default::default()
        },
        stop.clone(),
        |_, step| {
            on_note(&format!(
                "  step {:.0} records/s: {}",
                step.target_records_per_sec,
                if step.kept_up { "kept up" } else { "missed" }
            ))
        },
    )
    .await?;
    match found.chosen {
        Some(r) => {
            on_note(&format!("producerRate 0: running at {r:.0} records/s"));
            Ok((Some(r), Some(found)))
        }
        None => Err(BenchError::Run(
            "producerRate 0: no rate kept up, not even the first step's 10000 records/s".into(),
        )),
    }
}

/// The workload's consumers, each in its group, reading from the start of the fresh topics: their
/// tasks, the runs of those that ended, and the stop that ends them at the end of the drain (or
/// with the run), saying the run's reason.
struct Consumers {
    tasks: tokio::task::JoinSet<Result<ConsumeRun, BenchError>>,
    runs: Vec<ConsumeRun>,
    /// The tally, where the consumers count themselves in as they join.
    shared: Arc<Shared>,
    stop: Stop,
    /// The run's stop, whose reason the consumers' says.
    run_stop: Stop,
}

impl Consumers {
    /// Every consumer of every subscription of every topic, started.
    fn spawn(
        spec: &OmbSpec,
        cluster: &ClusterConfig,
        layouts: &[TopicLayout],
        shared: &Arc<Shared>,
        run_stop: &Stop,
    ) -> Consumers {
        let w = &spec.workload;
        let consumers_stop = Stop::new();
        let mut tasks = tokio::task::JoinSet::new();
        for (t, layout) in layouts.iter().enumerate() {
            for s in 0..w.subscriptions_per_topic {
                let group = format!("{}-sub-{t:04}-{s:03}", spec.topic_prefix);
                for c in 0..w.consumer_per_subscription {
                    let index = (t as u32 * w.subscriptions_per_topic + s)
                        * w.consumer_per_subscription
                        + c;
                    if !spec.runs_consumer(index) {
                        continue;
                    }
                    let mut connection = spec.consumer.connection.clone();
                    connection.client_id = format!("kbench-omb-consumer-{t}-{s}-{c}");
                    let config =
                        connection.cluster_config(cluster.bootstrap.clone(), cluster.pins.clone());
                    let mut cspec = ConsumeSpec {
                        topic: layout.name.clone(),
                        messages: u64::MAX,
                        properties: spec.consumer_properties.clone(),
                        window_sink: spec.window_sink.clone(),
                        ..ConsumeSpec::default()
                    };
                    cspec.take_properties(&spec.consumer);
                    // Static members (`group.instance.id`): one id each.
                    if let Some(id) = cspec.consumer.group_instance_id.as_mut() {
                        *id = format!("{id}-{t}-{s}-{c}");
                    }
                    cspec.mode = ConsumeMode::Group {
                        group_id: group.clone(),
                    };
                    cspec.start = StartAt::Reset(kbench_client::OffsetReset::Earliest);
                    cspec.timeout = crate::spec::MAX_WAIT;
                    cspec.reporting_interval = crate::spec::MAX_WAIT;
                    cspec.end_to_end = true;
                    let hook = Arc::new(ConsumerHook(shared.clone()));
                    tasks.spawn(consume(
                        config,
                        layout.clone(),
                        cspec,
                        consumers_stop.clone(),
                        hook,
                    ));
                }
            }
        }
        Consumers {
            tasks,
            runs: Vec::new(),
            shared: shared.clone(),
            stop: consumers_stop,
            run_stop: run_stop.clone(),
        }
    }

    /// Wait until every consumer has its partitions, before the first record (bounded by the
    /// join's own patience: the session timeout, twice, and a margin). A consumer that failed to
    /// start, or too few joined in time, end the run (every consumer stopped first).
    async fn wait_joined(
        &mut self,
        spec: &OmbSpec,
        cancel: &tokio_util::sync::CancellationToken,
        errors: &mut Vec<String>,
    ) -> Result<(), BenchError> {
        let joined_by =
            Instant::now() + spec.consumer.consumer.session_timeout * 2 + Duration::from_secs(30);
        while self.shared.tally.lock().expect("tally lock").joined < spec.local_consumers() {
            if Instant::now() > joined_by || cancel.is_cancelled() || self.tasks.is_empty() {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(100), self.tasks.join_next()).await {
                Ok(Some(Ok(Err(e)))) => {
                    self.stop();
                    while self.tasks.join_next().await.is_some() {}
                    return Err(e);
                }
                Ok(Some(Ok(Ok(run)))) => self.runs.push(run),
                Ok(Some(Err(e))) => errors.push(format!("consumer task: {e}")),
                Ok(None) | Err(_) => {}
            }
        }
        let joined = self.shared.tally.lock().expect("tally lock").joined;
        if joined < spec.local_consumers() {
            self.stop();
            while self.tasks.join_next().await.is_some() {}
            return Err(BenchError::Run(format!(
                "only {joined} of {} consumers joined their groups in time",
                spec.local_consumers()
            )));
        }
        Ok(())
    }

    /// Tell every consumer to stop, with the run's reason.
    fn stop(&self) {
        self.stop
            .stop(self.run_stop.reason().unwrap_or_else(|| "stopped".into()));
    }

    /// Stop every consumer and collect their runs; a consumer that failed is said in `errors`.
    async fn finish(mut self, errors: &mut Vec<String>) -> Vec<ConsumeRun> {
        self.stop();
        while let Some(done) = self.tasks.join_next().await {
            match done {
                Ok(Ok(run)) => self.runs.push(run),
                Ok(Err(e)) => errors.push(format!("consumer: {e}")),
                Err(e) => errors.push(format!("consumer task: {e}")),
            }
        }
        self.runs
    }
}

/// One consumer: connected (bounded), its own metadata (the leaders' addresses, on its own
/// connections), and its run until `stop`.
async fn consume(
    config: ClusterConfig,
    layout: TopicLayout,
    cspec: ConsumeSpec,
    stop: Stop,
    hook: Arc<ConsumerHook>,
) -> Result<ConsumeRun, BenchError> {
    let cluster = crate::produce::job::connect_bounded(config, stop.token()).await?;
    // Its own metadata: the leaders' addresses, on its own connections.
    let (_, layout) = cluster
        .metadata(&layout.name)
        .await
        .map_err(|e| BenchError::topic(&layout.name, e))?;
    let cluster = Arc::new(cluster);
    let run = crate::consume::run_consume(cluster.clone(), layout, &cspec, stop, hook).await;
    cluster.close(Duration::from_secs(2)).await;
    run
}

/// What every producer task shares: the tally, the barrier between warm-up and the measured
/// phase, the flag that ends backlog mode's extra phases, and the run's stop.
#[derive(Clone)]
struct ProducerCommon {
    shared: Arc<Shared>,
    barrier: Arc<tokio::sync::Barrier>,
    drained: Arc<std::sync::atomic::AtomicBool>,
    stop: Stop,
}

/// A producer's warm-up (if any) and its measured phase, pooled.
type ProducerResult = Result<(Option<ProduceRun>, ProduceRun), BenchError>;

/// Every producer of every topic, started, each with its share of `rate`.
fn spawn_producers(
    spec: &OmbSpec,
    cluster: &ClusterConfig,
    layouts: &[TopicLayout],
    rate: Option<f64>,
    common: &ProducerCommon,
) -> tokio::task::JoinSet<ProducerResult> {
    let w = &spec.workload;
    let per_producer = rate.map(|r| r / f64::from(spec.producers()));
    let mut tasks = tokio::task::JoinSet::new();
    for (t, layout) in layouts.iter().enumerate() {
        for p in 0..w.producers_per_topic {
            let index = t as u32 * w.producers_per_topic + p;
            if !spec.runs_producer(index) {
                continue;
            }
            let pspec = spec.producer_spec(&layout.name, per_producer, index);
            let mut config = pspec.connection(cluster.clone());
            config.client_id = format!("kbench-omb-producer-{t}-{p}");
            tasks.spawn(
                Producer {
                    spec: pspec,
                    layout: layout.clone(),
                    warmup: spec.warmup,
                    test: spec.test_duration,
                    common: common.clone(),
                }
                .run(config),
            );
        }
    }
    if tasks.is_empty() {
        // An agent that runs only consumers: its phases last as long as the producers' elsewhere
        // (they started at the same instant), a run of no records standing for its producers.
        let (warmup, test, common) = (spec.warmup, spec.test_duration, common.clone());
        tasks.spawn(async move {
            let cancel = common.stop.token().clone();
            let phase = |d: Duration| {
                let cancel = cancel.clone();
                async move {
                    tokio::select! {
                        _ = tokio::time::sleep(d) => {}
                        _ = cancel.cancelled() => {}
                    }
                }
            };
            phase(warmup).await;
            common.barrier.wait().await;
            let began = SystemTime::now();
            phase(test).await;
            Ok((None, ProduceRun::none(began)))
        });
    }
    tasks
}

/// One producer of the workload: its spec (its share of the rate), its topic, and its phases'
/// lengths, with what it shares with the others ([`ProducerCommon`]).
struct Producer {
    spec: ProduceSpec,
    layout: TopicLayout,
    warmup: Duration,
    test: Duration,
    common: ProducerCommon,
}

impl Producer {
    /// Connect with `config` (bounded), warm up, wait at the barrier, then the measured phase (in
    /// backlog mode, with short phases after it until the backlog drained). A producer that cannot
    /// connect still meets the barrier.
    async fn run(self, config: ClusterConfig) -> ProducerResult {
        let ProducerCommon {
            shared,
            barrier,
            drained,
            stop,
        } = &self.common;
        let cancel = stop.token().clone();
        let connected = async {
            let cluster = crate::produce::job::connect_bounded(config, &cancel).await?;
            // Its own metadata: the leaders' addresses, on its own connections.
            let (_, layout) = cluster
                .metadata(&self.layout.name)
                .await
                .map_err(|e| BenchError::topic(&self.layout.name, e))?;
            Ok::<_, BenchError>((Arc::new(cluster), layout))
        };
        let (cluster, layout) = match connected.await {
            Ok(c) => c,
            Err(e) => {
                barrier.wait().await;
                return Err(e);
            }
        };
        let phase = |duration: Duration| {
            let spec = ProduceSpec {
                duration: Some(duration),
                ..self.spec.clone()
            };
            let shared = shared.clone();
            let (cluster, layout, stop) = (cluster.clone(), layout.clone(), stop.clone());
            async move {
                crate::produce::run_produce(cluster, layout, &spec, stop, move |w| {
                    shared.producer_window(w)
                })
                .await
            }
        };
        let warm = if self.warmup.is_zero() {
            None
        } else {
            Some(phase(self.warmup).await)
        };
        barrier.wait().await;
        let mut measured = vec![phase(self.test).await];
        // Backlog mode: producing goes on, in short phases, until the backlog drained.
        while !drained.load(std::sync::atomic::Ordering::Acquire) && !cancel.is_cancelled() {
            measured.push(phase(BACKLOG_EXTENSION).await);
        }
        cluster.close(Duration::from_secs(2)).await;
        let measured = ProduceRun::pooled(&measured).expect("one phase at least");
        Ok::<_, BenchError>((warm, measured))
    }
}

/// The run from the producers' start as the coordinator follows it: periods cut and heard, the
/// backlog built and drained, producers' and consumers' failures said.
struct Phases<'a> {
    spec: &'a OmbSpec,
    shared: Arc<Shared>,
    on_period: &'a (dyn Fn(&Period) + Send + Sync),
    on_note: &'a (dyn Fn(&str) + Send + Sync),
    /// Backlog mode: set once the backlog drained (or was given up), ending the producers'
    /// extra phases.
    drained: Arc<std::sync::atomic::AtomicBool>,
    /// Measured periods.
    periods: Vec<Period>,
    errors: Vec<String>,
}

impl Phases<'_> {
    /// Warm-up periods until every producer is at the barrier; then the measured phase begins:
    /// the warm-up's last period cut, its figures left behind. Its epoch, and the period tick.
    async fn warm_up(
        &mut self,
        barrier: &tokio::sync::Barrier,
    ) -> (Instant, tokio::time::Interval) {
        // Periods: every reporting interval, and one at the end of each phase.
        let epoch_guess = Instant::now() + self.spec.warmup;
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + self.spec.reporting_interval,
            self.spec.reporting_interval,
        );
        {
            let waiting = barrier.wait();
            tokio::pin!(waiting);
            loop {
                tokio::select! {
                    _ = &mut waiting => break,
                    _ = tick.tick() => (self.on_period)(&self.shared.period(epoch_guess)),
                }
            }
        }
        // The measured phase begins: warm-up figures are left behind.
        let epoch = Instant::now();
        // The warm-up's last period is cut (and shown, if there was a warm-up).
        let last_warmup = self.shared.period(epoch);
        if !self.spec.warmup.is_zero() {
            (self.on_period)(&last_warmup);
        }
        self.shared.tally.lock().expect("tally lock").measuring = true;
        tick.reset();
        (epoch, tick)
    }

    /// Backlog mode (OMB's): consumers stop while the backlog builds to consumerBacklogSizeGB,
    /// then resume; draining is done when the backlog is down to (1 − backlogDrainRatio) of its
    /// size (at least 1000 records).
    fn start_backlog(&self, backlog_bytes: u64) -> Option<Backlog> {
        let w = &self.spec.workload;
        (backlog_bytes > 0).then(|| {
            self.shared
                .paused
                .store(true, std::sync::atomic::Ordering::Relaxed);
            (self.on_note)(&format!(
                "Stopping all consumers to build a backlog of {:.3} GB",
                w.consumer_backlog_size_gb
            ));
            let capacity = backlog_bytes / self.record_bytes();
            let empty = ((1.0 - w.backlog_drain_ratio).max(0.0) * capacity as f64) as u64;
            Backlog {
                requested_bytes: backlog_bytes,
                drained_at_records: empty.max(1000),
                built_s: None,
                drained_s: None,
                drain_records: 0,
                consumed_at_build: 0,
            }
        })
    }

    /// A record's bytes (the mean with a size distribution, as OMB): how many records a backlog
    /// of bytes holds.
    fn record_bytes(&self) -> u64 {
        self.spec.message_size().max(1)
    }

    /// The measured phase from `epoch` until every producer ended: a period every tick of
    /// `tick`, the backlog checked every 100 ms until drained, each producer's warm-up and
    /// measured runs collected.
    async fn follow(
        &mut self,
        producers: &mut tokio::task::JoinSet<ProducerResult>,
        epoch: Instant,
        tick: &mut tokio::time::Interval,
        backlog: &mut Option<Backlog>,
    ) -> (Vec<ProduceRun>, Vec<ProduceRun>) {
        let mut check = tokio::time::interval(Duration::from_millis(100));
        let mut warm_runs = Vec::new();
        let mut measured_runs = Vec::new();
        loop {
            tokio::select! {
                _ = check.tick(), if backlog.as_ref().is_some_and(|b| b.drained_s.is_none()) => {
                    self.check_backlog(backlog.as_mut().expect("backlog mode"), epoch);
                }
                done = producers.join_next() => match done {
                    None => break,
                    Some(Ok(Ok((warm, measured)))) => {
                        warm_runs.extend(warm);
                        measured_runs.push(measured);
                    }
                    Some(Ok(Err(e))) => self.errors.push(format!("producer: {e}")),
                    Some(Err(e)) => self.errors.push(format!("producer task: {e}")),
                },
                _ = tick.tick() => {
                    let p = self.shared.period(epoch);
                    (self.on_period)(&p);
                    self.periods.push(p);
                }
            }
        }
        (warm_runs, measured_runs)
    }

    /// Backlog mode, every 100 ms: the backlog built (consumers resume), drained (the producers'
    /// extra phases end), or given up past the test duration and the backlog timeout.
    fn check_backlog(&mut self, b: &mut Backlog, epoch: Instant) {
        let (acked, consumed) = {
            let t = self.shared.tally.lock().expect("tally lock");
            (t.acked, t.consumed)
        };
        let behind = (acked * u64::from(self.spec.workload.subscriptions_per_topic))
            .saturating_sub(consumed);
        let elapsed = epoch.elapsed().as_secs_f64();
        match b.built_s {
            None if behind * self.record_bytes() >= b.requested_bytes => {
                b.built_s = Some(elapsed);
                b.consumed_at_build = consumed;
                self.shared
                    .paused
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                (self.on_note)(&format!(
                    "--- Completed backlog build in {elapsed:.1} s ---"
                ));
                (self.on_note)("--- Start draining backlog ---");
            }
            Some(built) if behind <= b.drained_at_records => {
                b.drained_s = Some(elapsed - built);
                b.drain_records = consumed - b.consumed_at_build;
                self.drained
                    .store(true, std::sync::atomic::Ordering::Release);
                (self.on_note)(&format!(
                    "--- Completed backlog draining in {:.1} s ---",
                    elapsed - built
                ));
            }
            _ if epoch.elapsed() > self.spec.test_duration + self.spec.backlog_timeout => {
                self.errors.push(format!(
                    "the backlog was not {} within {:?} after the test duration",
                    if b.built_s.is_none() {
                        "built"
                    } else {
                        "drained"
                    },
                    self.spec.backlog_timeout
                ));
                b.drained_s = Some(f64::NAN);
                self.shared
                    .paused
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                self.drained
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            _ => {}
        }
    }

    /// The producers ended: consumers catch up until they read `expected` records (bounded by
    /// the drain), then the last period is cut (kept if it saw any traffic).
    async fn drain(
        &mut self,
        epoch: Instant,
        expected: u64,
        cancel: &tokio_util::sync::CancellationToken,
    ) {
        let drain_until = Instant::now() + self.spec.drain;
        while self.spec.local_consumers() > 0
            && Instant::now() < drain_until
            && !cancel.is_cancelled()
        {
            // An agent cannot know what the others' producers sent: its coordinator says when
            // every record was read (`cancel`, with [`crate::distributed::ENOUGH`]).
            if self.spec.share.is_none()
                && self.shared.tally.lock().expect("tally lock").consumed >= expected
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last = self.shared.period(epoch);
        if last.publish_rate > 0.0 || last.consume_rate > 0.0 {
            (self.on_period)(&last);
            self.periods.push(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(producers: u32) -> Shared {
        let s = Shared::new(1, producers, Default::default(), false);
        s.tally.lock().unwrap().measuring = true;
        s
    }

    fn window(records: u64) -> IntervalReport {
        IntervalReport {
            records,
            failed: 0,
            bytes: records * 100,
            elapsed: Duration::from_millis(100),
            latency_sum_us: 0,
            latency_max_us: 0,
            latency: None,
            publish_delay: None,
            steady_state_begins: false,
        }
    }

    /// A tail period cut moments after a window arrived is rated over the window's time, not the
    /// moments: 2 producers at 1 000 records/s each make 2 000/s, however short the cut.
    #[test]
    fn a_short_tail_period_is_no_burst() {
        let s = shared(2);
        s.producer_window(&window(100));
        s.producer_window(&window(100));
        let p = s.period(Instant::now());
        assert!(
            (p.publish_rate - 2_000.0).abs() < 1e-6,
            "{}",
            p.publish_rate
        );
        assert!(p.duration_s < 0.1, "{}", p.duration_s);
        // Ten windows each over a period: the same rate.
        for _ in 0..10 {
            s.producer_window(&window(100));
            s.producer_window(&window(100));
        }
        let p = s.period(Instant::now());
        assert!(
            (p.publish_rate - 2_000.0).abs() < 1e-6,
            "{}",
            p.publish_rate
        );
    }
}
