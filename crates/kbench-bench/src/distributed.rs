//! Distributed runs: one workload spread over several agents, merged into one exact result. The
//! bench side only — no HTTP here: splitting a spec into disjoint segments whose parts sum to the
//! whole, estimating an agent's clock from timed exchanges, and merging the agents' result documents
//! (their HdrHistograms exactly; counts summed; a lost agent named, never dropped). The transport
//! between coordinator and agents is the front end's.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::consume::{ConsumeMode, ConsumeResultDocument, ConsumeSpec, PartitionSpan};
use crate::e2e::{E2eMode, E2eSpec, ProducerSegment, SegmentFigures};
use crate::error::SpecError;
use crate::measure::{LatencySummary, decode_histogram, latency_histogram};
use crate::omb::report::OmbResultDocument;
use crate::omb::{OmbDriver, OmbShare, OmbSpec, OmbWorkload, Period, PeriodParts};
use crate::produce::ProduceSpec;
use crate::produce::phase::Saturation;
use crate::result::{E2eResultDocument, Header, Kind, Repetition, ResultDocument};
use crate::timeline::{Figure, Interval};

/// The coordinator–agent protocol version. An agent refuses a coordinator that speaks another.
/// 2: a segment's work is one tagged spec (`"work": {"produce": …}`), not two optional ones.
/// 3: a segment is answered at once (the coordinator polls an e2e consumer until it has joined its
/// group), and it holds a lease that the coordinator's polls renew: a segment nobody asks about
/// for the agent's lease time is stopped and marked `abandoned`.
/// 4: a segment carries the run's `--pin`s, which its agent negotiates and holds.
/// 7: a segment's work may be a consume run (`"work": {"consume": …}`).
/// 8: a segment's work may be an OMB workload's share (`"work": {"omb": …}`), started by
/// `…/go` once every agent's consumers have joined and ended by `…/enough`.
/// 9: a consume segment may keep its windows' histograms (`window_histograms`, for the
/// coordinator's `--histogram-log`), and an OMB share is checked against the agent's own limits.
pub const AGENT_PROTOCOL: u32 = 9;

/// What one agent runs of a distributed run: the very spec the coordinator's front end built,
/// split; the cluster to reach and its connection properties (secrets included: the agent needs
/// them to connect; it never shows them back). Typed on both sides of the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    /// The coordinator's [`AGENT_PROTOCOL`].
    pub protocol: u32,
    /// The run this segment belongs to (for the agent's logs and result file).
    pub run: String,
    pub work: Work,
    pub bootstrap_servers: Vec<String>,
    pub properties: Vec<(String, String)>,
    /// The run's pins, version by Kafka API name: the agent negotiates and holds them as a
    /// single-process run does, and a broker that cannot hold one fails the segment before its
    /// barrier.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, i16>,
    /// An e2e producer's values (`--value-schema`: generated, registered and framed once by the
    /// coordinator, as one process prepares them), taken in place of its payload.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_values"
    )]
    pub values: Option<Vec<bytes::Bytes>>,
    /// An e2e consumer's deserializer properties (`schema.registry.url`, and any credentials):
    /// it decodes every value it reads. The agent never shows them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deserializer: BTreeMap<String, String>,
}

/// [`Segment::values`] as base64 strings (a third more than the bytes; JSON's arrays of numbers
/// would be four times them).
mod base64_values {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(
        values: &Option<Vec<bytes::Bytes>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match values {
            Some(v) => s.collect_seq(v.iter().map(|b| STANDARD.encode(b))),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<bytes::Bytes>>, D::Error> {
        let Some(texts) = Option::<Vec<String>>::deserialize(d)? else {
            return Ok(None);
        };
        texts
            .into_iter()
            .map(|t| {
                STANDARD
                    .decode(t)
                    .map(bytes::Bytes::from)
                    .map_err(|e| D::Error::custom(format!("values: not base64: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A segment's workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    Produce(Box<ProduceSpec>),
    E2e(Box<E2eSpec>),
    Consume(Box<ConsumeSpec>),
    Omb(Box<OmbSegment>),
}

impl Work {
    /// The workload's name, as runs and results say it.
    pub fn name(&self) -> &'static str {
        match self {
            Work::Produce(_) => "produce",
            Work::E2e(_) => "e2e",
            Work::Consume(_) => "consume",
            Work::Omb(_) => "omb",
        }
    }
}

/// Where a run (an agent's segment among them) is, as `GET` on it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Stopping,
    Finished,
    Failed,
    /// Stopped by its agent because its coordinator stopped asking about it (the lease ran out);
    /// whatever it had done is kept in its result.
    Abandoned,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Stopping => "stopping",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Abandoned => "abandoned",
        }
    }

    /// Still going (running, or asked to stop and not yet ended).
    pub fn active(self) -> bool {
        matches!(self, RunStatus::Running | RunStatus::Stopping)
    }
}

/// The most agents one run spreads over.
pub const MAX_AGENTS: usize = 1_000;

/// One timed exchange with an agent: the coordinator's clock when it asked, the agent's clock in
/// its answer, and the coordinator's clock when the answer arrived (µs since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSample {
    pub sent_us: u64,
    pub agent_us: u64,
    pub received_us: u64,
}

impl ClockSample {
    pub fn rtt_us(&self) -> u64 {
        self.received_us.saturating_sub(self.sent_us)
    }
}

/// An agent's clock against the coordinator's, from the sample with the shortest round trip (the
/// NTP way): the agent read its clock somewhere within that round trip, so the offset is known to
/// within half of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockEstimate {
    /// Agent clock − coordinator clock, µs.
    pub offset_us: i64,
    /// The shortest round trip seen, µs.
    pub rtt_us: u64,
    /// The offset is right to within this, µs (half the shortest round trip).
    pub bound_us: u64,
    pub samples: usize,
}

impl ClockEstimate {
    /// The estimate from `samples`; `None` without any.
    pub fn from_samples(samples: &[ClockSample]) -> Option<ClockEstimate> {
        let best = samples
            .iter()
            .filter(|s| s.received_us >= s.sent_us)
            .min_by_key(|s| s.rtt_us())?;
        let midpoint = (i128::from(best.sent_us) + i128::from(best.received_us)) / 2;
        Some(ClockEstimate {
            offset_us: (i128::from(best.agent_us) - midpoint) as i64,
            rtt_us: best.rtt_us(),
            bound_us: best.rtt_us().div_ceil(2),
            samples: samples.len(),
        })
    }
}

/// `total` split into `parts` whole shares that differ by at most one and sum to `total`.
pub fn split_count(total: u64, parts: usize) -> Vec<u64> {
    let n = parts.max(1) as u64;
    (0..n)
        .map(|i| total / n + u64::from(i < total % n))
        .collect()
}

/// The seed of segment `i`: distinct per agent (payloads and key choices differ), derived from the
/// run's seed so that a run is repeatable.
fn segment_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A produce run split over `agents`: the record count and the rate divided so that the parts sum
/// exactly to the whole; a distinct seed each. Every part is checked as its own spec.
pub fn split_produce(spec: &ProduceSpec, agents: usize) -> Result<Vec<ProduceSpec>, SpecError> {
    if spec.repetitions != 1 {
        return Err(SpecError::new(
            "repetitions",
            "a distributed run has one repetition (run it again for more)",
        ));
    }
    if spec.producer.transactional_id.is_some() {
        return Err(SpecError::new(
            "transactional_id",
            "not over agents: every agent would take the same transactional.id and fence the others",
        ));
    }
    let unbounded = spec.num_records == u64::MAX;
    if !unbounded && spec.num_records < agents as u64 {
        return Err(SpecError::new(
            "num_records",
            format!(
                "{} records cannot be split over {agents} agents",
                spec.num_records
            ),
        ));
    }
    let counts = split_count(spec.num_records, agents);
    // --warmup-records: each agent leaves out its share of the warm-up (its first records), as its
    // records are its share of the run's.
    let warmups = split_count(spec.warmup_records, agents);
    if !unbounded && let Some((w, n)) = warmups.iter().zip(&counts).find(|(w, n)| **w > 0 && w >= n)
    {
        return Err(SpecError::new(
            "warmup_records",
            format!(
                "over {agents} agents each leaves out its share of the warm-up, which must be fewer than its records ({w} of {n}): give at most {}",
                spec.num_records.saturating_sub(agents as u64)
            ),
        ));
    }
    let share = 1.0 / agents as f64;
    let mut parts = Vec::with_capacity(agents);
    for (i, count) in counts.into_iter().enumerate() {
        let mut part = spec.clone();
        part.num_records = if unbounded { u64::MAX } else { count };
        part.warmup_records = warmups[i];
        part.throughput = spec.throughput.map(|t| t * share);
        part.shape = spec.shape.as_ref().map(|s| s.scaled(share));
        part.seed = segment_seed(spec.seed, i);
        part.interval_histograms = false;
        // --payload-monotonic: the agents' numbers interleave, 0..N−1 once each in all.
        part.monotonic_offset = i as u64;
        part.monotonic_stride = agents as u64;
        part.validate()?;
        parts.push(part);
    }
    Ok(parts)
}

/// Why a consume segment was ended by its coordinator: the agents together read the run's
/// `--messages`. A segment ended so is complete, not stopped.
pub const ENOUGH: &str = "the agents together read the records asked for (--messages)";

/// Why an OMB segment was ended by its coordinator: every producer had ended and the agents'
/// consumers together had read every record acknowledged (once per subscription). A segment
/// ended so is complete, not stopped.
pub const DRAINED: &str =
    "the agents together read every record the producers acknowledged, once per subscription";

/// What an agent runs of an OMB workload: the workload and driver files as text (the agent reads
/// them as `kbench omb` reads the files), what the coordinator chose for the run (its seed and
/// topic names, phases, the rate over every producer, the records' values), and the agent's share
/// of the producers and consumers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OmbSegment {
    pub workload: String,
    pub driver: Option<String>,
    pub seed: u64,
    pub topic_prefix: String,
    pub warmup: std::time::Duration,
    pub test_duration: std::time::Duration,
    pub reporting_interval: std::time::Duration,
    pub drain: std::time::Duration,
    /// Records/s over every producer of the workload (each producer takes its part).
    pub rate: f64,
    /// The records' values as the coordinator made them, where the agent could not make the same
    /// from the workload and the seed: a `payloadFile` read there, `--value-schema`'s values.
    pub payload: Option<crate::produce::Payload>,
    pub value_schema: Option<crate::schema::ValueSchema>,
    pub share: OmbShare,
}

impl OmbSegment {
    /// The segment of `spec`'s run (read from the texts `workload` and `driver`) for one agent.
    pub fn of(spec: &OmbSpec, workload: &str, driver: Option<&str>, share: OmbShare) -> OmbSegment {
        OmbSegment {
            workload: workload.to_string(),
            driver: driver.map(str::to_string),
            seed: spec.seed,
            topic_prefix: spec.topic_prefix.clone(),
            warmup: spec.warmup,
            test_duration: spec.test_duration,
            reporting_interval: spec.reporting_interval,
            drain: spec.drain,
            rate: spec.workload.producer_rate,
            // A randomized pool (up to 1 GiB) is made again from the seed on each agent.
            payload: (spec.workload.payload_file.is_some() || spec.value_schema.is_some())
                .then(|| spec.payload.clone()),
            value_schema: spec.value_schema.clone(),
            share,
        }
    }

    /// The spec the agent runs: the files read again, the coordinator's choices over them.
    pub fn spec(&self) -> Result<OmbSpec, String> {
        let mut workload = OmbWorkload::parse(&self.workload)?;
        if self.payload.is_some() {
            // The payload travels in the segment: no file is read on the agent.
            workload.payload_file = None;
        }
        workload.producer_rate = self.rate;
        let driver = match &self.driver {
            Some(text) => OmbDriver::parse(text)?,
            None => OmbDriver::default(),
        };
        let mut spec = OmbSpec::new(workload, &driver, None, self.seed)?;
        spec.topic_prefix = self.topic_prefix.clone();
        spec.warmup = self.warmup;
        spec.test_duration = self.test_duration;
        spec.reporting_interval = self.reporting_interval;
        spec.drain = self.drain;
        if let Some(payload) = &self.payload {
            spec.payload = payload.clone();
        }
        spec.value_schema = self.value_schema.clone();
        // Each index once, ascending and within the workload, as `split_omb` deals them.
        for (field, indices, count) in [
            ("share.producers", &self.share.producers, spec.producers()),
            ("share.consumers", &self.share.consumers, spec.consumers()),
        ] {
            if !indices.windows(2).all(|w| w[0] < w[1])
                || indices.last().is_some_and(|i| *i >= count)
            {
                return Err(format!(
                    "{field}: each index once, ascending, below {count} (the workload's)"
                ));
            }
        }
        spec.share = Some(self.share.clone());
        Ok(spec)
    }
}

/// An OMB workload split over `agents`: its producers (every topic's, in order) and its consumers
/// (every topic's subscriptions' members, in order) each cut into contiguous shares that differ by
/// at most one, the consumers' shares dealt from the last agent back, so that an agent short of
/// producers is the first to take consumers (as OMB's distributed workers split into producers and
/// consumers). Contiguous shares keep a subscription's members on one agent where the counts
/// allow. Every agent must run something.
pub fn split_omb(spec: &OmbSpec, agents: usize) -> Result<Vec<OmbShare>, SpecError> {
    let w = &spec.workload;
    if w.producer_rate <= 0.0 {
        return Err(SpecError::new(
            "producerRate",
            "0 (search for the highest rate) is not run over agents yet: give the rate (a single-process `kbench omb` finds it)",
        ));
    }
    if w.consumer_backlog_size_gb > 0.0 {
        return Err(SpecError::new(
            "consumerBacklogSizeGB",
            "backlog mode is not run over agents yet (its consumers pause and resume together)",
        ));
    }
    let (producers, consumers) = (spec.producers(), spec.consumers());
    if u64::from(producers) + u64::from(consumers) < agents as u64 {
        return Err(SpecError::new(
            "agents",
            format!(
                "the workload has {producers} producer(s) and {consumers} consumer(s): too few for {agents} agents, each of which must run one at least"
            ),
        ));
    }
    let cut = |total: u32| {
        let mut next = 0u32;
        split_count(u64::from(total), agents)
            .into_iter()
            .map(|n| {
                let share: Vec<u32> = (next..next + n as u32).collect();
                next += n as u32;
                share
            })
            .collect::<Vec<_>>()
    };
    let mut producer_shares = cut(producers);
    // The consumers' shares (the larger first) go to the agents with the fewest producers first;
    // among equals, from the last agent back (the first agents hold the larger producer shares).
    let mut order: Vec<usize> = (0..agents).collect();
    order.sort_by_key(|i| (producer_shares[*i].len(), std::cmp::Reverse(*i)));
    let mut consumer_shares = vec![Vec::new(); agents];
    for (k, share) in cut(consumers).into_iter().enumerate() {
        consumer_shares[order[k]] = share;
    }
    let shares: Vec<OmbShare> = producer_shares
        .iter_mut()
        .zip(consumer_shares)
        .map(|(p, consumers)| OmbShare {
            producers: std::mem::take(p),
            consumers,
        })
        .collect();
    if let Some(k) = shares
        .iter()
        .position(|s| s.producers.is_empty() && s.consumers.is_empty())
    {
        return Err(SpecError::new(
            "agents",
            format!(
                "agent {} of {agents} would run nothing of a workload with {producers} producer(s) and {consumers} consumer(s): give fewer agents",
                k + 1
            ),
        ));
    }
    let most = shares
        .iter()
        .map(|s| (s.producers.len() + s.consumers.len()) as u64)
        .max()
        .unwrap_or(0);
    if most > crate::omb::MAX_PROCESS_CLIENTS {
        let total = u64::from(producers) + u64::from(consumers);
        return Err(SpecError::new(
            "agents",
            format!(
                "split over {agents} agent(s), one would run {most} of the workload's {total} clients, above the {} one kbench process runs: give at least {} agents",
                crate::omb::MAX_PROCESS_CLIENTS,
                total.div_ceil(crate::omb::MAX_PROCESS_CLIENTS)
            ),
        ));
    }
    Ok(shares)
}

/// A consume run split over `agents`, every part in the run's one group or on its own partitions:
/// - in a group (the default), the members (`--consumers`, at least one per agent) divided
///   between the agents, all in the run's group, whose coordinator gives each member its
///   partitions (and hands a finished agent's on to the others);
/// - with assigned partitions (`--partition`), the partitions dealt out in turn, each agent
///   reading its own.
///
/// Every agent may read the whole `--messages` (no agent can know ahead what its partitions
/// hold): each reads until its `--timeout` finds nothing, or until the coordinator, seeing the
/// agents' live counts sum to `--messages`, ends every segment ([`ENOUGH`]). Every part is
/// checked as its own spec.
pub fn split_consume(spec: &ConsumeSpec, agents: usize) -> Result<Vec<ConsumeSpec>, SpecError> {
    let refused = if spec.include.is_some() {
        Some((
            "include",
            "not over agents yet: give --topic (one topic, its partitions or members split)",
        ))
    } else if !spec.member_faults.is_empty() {
        Some((
            "fault",
            "group faults act on one process's members: not over agents",
        ))
    } else if spec.consumer.group_instance_id.is_some() {
        Some((
            "group_instance_id",
            "not over agents: every agent's members would take the same group.instance.id and fence each other",
        ))
    } else if spec.latest_values.is_some() {
        Some((
            "latest_values",
            "each agent sees only its own partitions' last values: not over agents",
        ))
    } else if spec.verify && matches!(spec.mode, ConsumeMode::Group { .. }) {
        Some((
            "verify",
            "over agents only with assigned partitions (--partition): in a group, a partition handed from one agent to another would be checked in two halves",
        ))
    } else {
        None
    };
    if let Some((field, why)) = refused {
        return Err(SpecError::new(field, why));
    }
    // Each agent's members: as given, at least one each.
    let members: Vec<u32> = match spec.mode {
        ConsumeMode::Group { .. } => {
            let total = if spec.consumers <= 1 {
                agents as u64
            } else {
                u64::from(spec.consumers)
            };
            if total < agents as u64 {
                return Err(SpecError::new(
                    "consumers",
                    format!(
                        "{total} members cannot be split over {agents} agents (give at least one per agent)"
                    ),
                ));
            }
            split_count(total, agents)
                .into_iter()
                .map(|n| n as u32)
                .collect()
        }
        ConsumeMode::Assign { .. } => vec![1; agents],
    };
    let partitions: Vec<Vec<i32>> = match &spec.mode {
        ConsumeMode::Assign { partitions } => {
            let mut seen = std::collections::BTreeSet::new();
            if let Some(p) = partitions.iter().find(|p| !seen.insert(**p)) {
                return Err(SpecError::new(
                    "partition",
                    format!("{p} is given twice (each partition is read by one agent)"),
                ));
            }
            if partitions.len() < agents {
                return Err(SpecError::new(
                    "partition",
                    format!(
                        "{} partitions cannot be split over {agents} agents (each reads its own: give at least one per agent)",
                        partitions.len()
                    ),
                ));
            }
            (0..agents)
                .map(|i| partitions.iter().copied().skip(i).step_by(agents).collect())
                .collect()
        }
        ConsumeMode::Group { .. } => vec![Vec::new(); agents],
    };
    let mut parts = Vec::with_capacity(agents);
    for i in 0..agents {
        let mut part = spec.clone();
        part.consumers = members[i];
        if let ConsumeMode::Assign { .. } = spec.mode {
            part.mode = ConsumeMode::Assign {
                partitions: partitions[i].clone(),
            };
        }
        part.validate()?;
        parts.push(part);
    }
    Ok(parts)
}

/// An e2e run split for distribution: the consumer's segment (consumer only, the run's tag) and one
/// producer segment per producer agent, the producers divided so that the parts sum exactly to the
/// whole, numbered apart (each keeps the schedule it would have in one process). The consumer's
/// clock corrections are filled in by the coordinator once it has estimated the clocks.
pub fn split_e2e(
    spec: &E2eSpec,
    producer_agents: usize,
    run_tag: u32,
) -> Result<(E2eSpec, Vec<E2eSpec>), SpecError> {
    if spec.rest.is_some() {
        return Err(SpecError::new(
            "rest_proxy",
            "a distributed run speaks the Kafka protocol; run the REST Proxy driver from one machine",
        ));
    }
    if spec.mode != E2eMode::ConsumerAndProducers {
        return Err(SpecError::new(
            "mode",
            "a distributed run places the consumer and the producers itself",
        ));
    }
    if producer_agents == 0 {
        return Err(SpecError::new(
            "agents",
            "an e2e run needs at least one agent besides the consumer's (give two or more agents)",
        ));
    }
    if spec.producers < producer_agents {
        return Err(SpecError::new(
            "producers",
            format!(
                "{} producers cannot be split over {producer_agents} producer agents",
                spec.producers
            ),
        ));
    }
    // The consumer runs until the coordinator tells it what the producers acknowledged.
    let consumer = E2eSpec {
        mode: E2eMode::Consumer,
        producers: 0,
        duration: None,
        records: None,
        run_tag: Some(run_tag),
        ..spec.clone()
    };
    consumer.validate()?;
    let mut producers = Vec::with_capacity(producer_agents);
    let mut base = 0u32;
    let all = spec.producers as u64;
    for count in split_count(all, producer_agents) {
        // `records`: the agent's producers' shares, as one process splits them (producer p sends
        // r / n, one more while p < r mod n), so that the agents' counts sum to the whole.
        let records = spec
            .records
            .map(|r| count * (r / all) + (r % all).saturating_sub(u64::from(base)).min(count));
        if let (Some(0), Some(r)) = (records, spec.records) {
            return Err(SpecError::new(
                "num_records",
                format!(
                    "{r} records over {} producers leave the producers of agent {} none: give at least one a producer",
                    spec.producers,
                    producers.len() + 1
                ),
            ));
        }
        let part = E2eSpec {
            mode: E2eMode::Producers,
            producers: count as usize,
            producer_base: base,
            run_tag: Some(run_tag),
            records,
            ..spec.clone()
        };
        part.validate()?;
        base += count as u32;
        producers.push(part);
    }
    Ok((consumer, producers))
}

/// The consumer's view of each producer segment: its producers, and how far their agent's clock is
/// ahead of the consumer's agent's (from the coordinator's two estimates).
pub fn producer_segments(
    producers: &[E2eSpec],
    clocks: &[ClockEstimate],
    consumer_clock: &ClockEstimate,
) -> Vec<ProducerSegment> {
    producers
        .iter()
        .zip(clocks)
        .map(|(p, c)| ProducerSegment {
            first_producer: p.producer_base,
            producers: p.producers as u32,
            clock_ahead_us: c.offset_us - consumer_clock.offset_us,
        })
        .collect()
}

/// One agent's part in a run, as the coordinator gathered it: `D` is the document its workload
/// writes ([`ResultDocument`] for produce, [`E2eResultDocument`] for e2e).
#[derive(Debug, Clone)]
pub struct AgentPart<D> {
    /// The agent's address, as given.
    pub agent: String,
    /// `producer`, `consumer` (e2e) or `produce`.
    pub role: &'static str,
    pub clock_before: Option<ClockEstimate>,
    pub clock_after: Option<ClockEstimate>,
    /// Its result document; `None` when the agent was lost.
    pub result: Option<D>,
    /// Why there is no result (the agent stopped answering, its run failed).
    pub lost: Option<String>,
    /// Its last live figures, as polled (the agent's own live block, shown as it came).
    pub last_live: Value,
}

/// The `distributed` block of a merged document: each agent's part and clock, whether the run is
/// degraded (an agent lost), the worst clock bound.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distributed {
    pub agents: Vec<AgentEntry>,
    pub degraded: bool,
    pub lost_agents: Vec<String>,
    pub clock_bound_us: Option<u64>,
}

/// One agent of a distributed run, in the merged document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentEntry {
    pub agent: String,
    pub role: String,
    pub status: AgentOutcome,
    pub error: Option<String>,
    pub hostname: Option<String>,
    pub clock: AgentClock,
    pub last_live: Value,
    #[serde(flatten)]
    pub figures: AgentFigures,
}

/// Whether an agent's result came back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentOutcome {
    #[default]
    Finished,
    Lost,
}

/// An agent's clock against the coordinator's, before and after the run, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentClock {
    pub offset_us: Option<i64>,
    pub rtt_us: Option<u64>,
    pub bound_us: Option<u64>,
    pub offset_after_us: Option<i64>,
    pub drift_us: Option<i64>,
}

/// An agent's own figures, by its role; absent where its role has none or its result was lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_sent: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_produced: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_acked: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_failed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_per_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Brief>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_request_duration: Option<Brief>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_consumed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_trip: Option<Brief>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<SegmentFigures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A latency summary's headline figures, for the per-agent breakdown, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Brief {
    fn of(s: &LatencySummary) -> Brief {
        Brief {
            count: s.count,
            p50: s.p50,
            p99: s.p99,
            max: s.max,
        }
    }
}

/// Each agent whose result came back, with its document.
type Done<'a, D> = Vec<(&'a str, &'a D)>;

/// The agents whose result came back, and the first one's document; none is the run's error,
/// naming every agent and why.
fn finished_first<D>(parts: &[AgentPart<D>]) -> Result<(Done<'_, D>, &D), String> {
    let done = finished(parts);
    let first = done
        .first()
        .map(|(_, d)| *d)
        .ok_or_else(|| no_result(parts))?;
    Ok((done, first))
}

/// The agents whose result came back, each with its document.
fn finished<D>(parts: &[AgentPart<D>]) -> Vec<(&str, &D)> {
    parts
        .iter()
        .filter_map(|p| Some((p.agent.as_str(), p.result.as_ref()?)))
        .collect()
}

/// The histograms `of` each document, merged exactly; an error names the agent whose histogram
/// could not be read.
fn merged<D>(
    done: &[(&str, &D)],
    name: &str,
    of: impl Fn(&D) -> &LatencySummary,
) -> Result<Histogram<u64>, String> {
    let mut all = latency_histogram();
    for (agent, doc) in done {
        let h = decode_histogram(&of(doc).histogram)
            .ok_or_else(|| format!("agent {agent}: its {name} histogram does not decode"))?;
        all.add(&h)
            .map_err(|e| format!("agent {agent}: {name}: {e}"))?;
    }
    Ok(all)
}

/// The agents' steady states (`--warmup-records`) as one: records, bytes and warm-ups summed,
/// latencies added exactly, over the longest agent's steady-state time (the agents run at once).
/// Agents whose run ended within their warm-up add nothing; none at all: `None`.
fn merged_steady_state(
    done: &[(&str, &ResultDocument)],
) -> Result<Option<crate::result::SteadyStateSummary>, String> {
    let steady: Vec<(&str, &crate::result::SteadyStateSummary)> = done
        .iter()
        .filter_map(|(a, d)| d.steady_state.as_ref().map(|s| (*a, s)))
        .collect();
    if steady.is_empty() {
        return Ok(None);
    }
    let latency = merged(&steady, "steady-state latency", |s| &s.latency)?;
    let records = sum(&steady, |s| s.records);
    let bytes = sum(&steady, |s| s.bytes);
    let duration_s = steady.iter().map(|(_, s)| s.duration_s).fold(0.0, f64::max);
    let secs = duration_s.max(1e-9);
    // Every agent's warm-up, those that ended within theirs included.
    let warmup_records = done
        .iter()
        .map(|(_, d)| d.settings["warmup_records"].as_u64().unwrap_or(0))
        .sum();
    Ok(Some(crate::result::SteadyStateSummary {
        warmup_records,
        records,
        bytes,
        duration_s,
        records_per_sec: records as f64 / secs,
        mb_per_sec: bytes as f64 / secs / (1024.0 * 1024.0),
        latency: LatencySummary::of(&latency),
    }))
}

/// `--verify` over agents: the agents' checks as one ([`crate::verify::VerifyReport::merged`]);
/// an agent lost, or finished without a check, leaves its records unchecked: the verification is
/// then unknown, naming it — never OK over the others alone.
fn merged_verification(parts: &[AgentPart<ResultDocument>]) -> Option<crate::verify::VerifyReport> {
    let checked: Vec<(&str, &crate::verify::VerifyReport)> = parts
        .iter()
        .filter_map(|p| Some((p.agent.as_str(), p.result.as_ref()?.verification.as_ref()?)))
        .collect();
    let merged = crate::verify::VerifyReport::merged(&checked)?;
    match parts
        .iter()
        .find(|p| p.result.as_ref().is_none_or(|d| d.verification.is_none()))
    {
        Some(p) if merged.error.is_none() => Some(merged.failed(format!(
            "agent {}: its records were not verified ({})",
            p.agent,
            p.lost.as_deref().unwrap_or("no verification in its result")
        ))),
        _ => Some(merged),
    }
}

/// The sum of a whole-number figure over the documents.
fn sum<D>(done: &[(&str, &D)], of: impl Fn(&D) -> u64) -> u64 {
    done.iter().map(|(_, d)| of(d)).sum()
}

/// The sum of a figure over the documents.
fn fsum<D>(done: &[(&str, &D)], of: impl Fn(&D) -> f64) -> f64 {
    done.iter().map(|(_, d)| of(d)).sum()
}

/// Counts by name, summed name by name.
fn sum_maps<'a>(maps: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            *all.entry(k.clone()).or_insert(0) += v;
        }
    }
    all
}

/// The figures every workload's document has, read alike for the merge.
trait Figures {
    fn start_time(&self) -> &str;
    fn end_time(&self) -> &str;
    fn duration_s(&self) -> f64;
    fn cpu_s(&self) -> (f64, f64);
    fn peak_rss_kib(&self) -> u64;
    fn saturation_reasons(&self) -> &[String];
    fn errors(&self) -> &BTreeMap<String, u64>;
    fn aborted(&self) -> Option<&str>;
    fn protocol_anomalies(&self) -> &BTreeMap<String, u64>;
    fn intervals(&self) -> &[Interval];
    /// The agent's host, as its document's environment names it.
    fn hostname(&self) -> &str;
}

macro_rules! figures {
    ($t:ty, $d:ident => $reasons:expr) => {
        figures!($t, $d => $reasons, ($d.client_cpu_user_s, $d.client_cpu_sys_s), $d.peak_rss_kib, &$d.intervals);
    };
    ($t:ty, $d:ident => $reasons:expr, $cpu:expr, $rss:expr, $intervals:expr) => {
        // A document without a figure gives a constant, leaving `$d` unused there.
        #[allow(unused_variables)]
        impl Figures for $t {
            fn start_time(&self) -> &str {
                &self.start_time
            }
            fn end_time(&self) -> &str {
                &self.end_time
            }
            fn duration_s(&self) -> f64 {
                self.duration_s
            }
            fn cpu_s(&self) -> (f64, f64) {
                let $d = self;
                $cpu
            }
            fn peak_rss_kib(&self) -> u64 {
                let $d = self;
                $rss
            }
            fn saturation_reasons(&self) -> &[String] {
                let $d = self;
                $reasons
            }
            fn errors(&self) -> &BTreeMap<String, u64> {
                &self.errors
            }
            fn aborted(&self) -> Option<&str> {
                self.aborted.as_deref()
            }
            fn protocol_anomalies(&self) -> &BTreeMap<String, u64> {
                &self.protocol_anomalies
            }
            fn intervals(&self) -> &[Interval] {
                let $d = self;
                $intervals
            }
            fn hostname(&self) -> &str {
                &self.header.environment.hostname
            }
        }
    };
}
figures!(ResultDocument, d => &d.saturation.reasons);
figures!(E2eResultDocument, d => &d.saturation.reasons);
// A consumer has no saturation guard of its own (it reads as fast as it can).
figures!(ConsumeResultDocument, _d => &[]);

/// What every workload's merge shares: the span in time, CPU, memory, saturation, errors, the
/// first abort, protocol anomalies and the window-by-window timeline.
struct Common {
    start_time: String,
    end_time: String,
    duration_s: f64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    peak_rss_kib: u64,
    saturation: Saturation,
    errors: BTreeMap<String, u64>,
    aborted: Option<String>,
    protocol_anomalies: BTreeMap<String, u64>,
    intervals: Vec<Interval>,
}

impl Common {
    /// `duration_from`: the documents whose longest measured phase is the run's (the producers').
    fn of<D: Figures>(all: &[(&str, &D)], duration_from: &[(&str, &D)]) -> Common {
        // RFC 3339 strings of one format compare in time order.
        let start = duration_from.iter().map(|(_, d)| d.start_time()).min();
        let end = duration_from.iter().map(|(_, d)| d.end_time()).max();
        let mut reasons = Vec::new();
        for (agent, d) in all {
            reasons.extend(
                d.saturation_reasons()
                    .iter()
                    .map(|r| format!("agent {agent}: {r}")),
            );
        }
        Common {
            start_time: start.unwrap_or_default().to_string(),
            end_time: end.unwrap_or_default().to_string(),
            duration_s: duration_from
                .iter()
                .map(|(_, d)| d.duration_s())
                .fold(0.0, f64::max),
            cpu_user_s: fsum(all, |d| d.cpu_s().0),
            cpu_sys_s: fsum(all, |d| d.cpu_s().1),
            peak_rss_kib: all.iter().map(|(_, d)| d.peak_rss_kib()).max().unwrap_or(0),
            saturation: Saturation {
                saturated: !reasons.is_empty(),
                reasons,
                ..Saturation::default()
            },
            errors: sum_maps(all.iter().map(|(_, d)| d.errors())),
            aborted: all
                .iter()
                .find_map(|(agent, d)| Some(format!("agent {agent}: {}", d.aborted()?))),
            protocol_anomalies: sum_maps(all.iter().map(|(_, d)| d.protocol_anomalies())),
            intervals: merged_intervals(all.iter().map(|(_, d)| d.intervals()).collect()),
        }
    }
}

/// The `distributed` block: each agent's part and clock, whether the run is degraded, the worst
/// clock bound; `figures` gives each agent's own figures.
fn distributed_block<D: Figures>(
    parts: &[AgentPart<D>],
    figures: impl Fn(&AgentPart<D>) -> AgentFigures,
) -> Distributed {
    let lost: Vec<String> = parts
        .iter()
        .filter(|p| p.result.is_none())
        .map(|p| p.agent.clone())
        .collect();
    let bound = parts
        .iter()
        .flat_map(|p| [p.clock_before, p.clock_after])
        .flatten()
        .map(|c| c.bound_us)
        .max();
    let agents = parts
        .iter()
        .map(|p| AgentEntry {
            agent: p.agent.clone(),
            role: p.role.to_string(),
            status: if p.result.is_some() {
                AgentOutcome::Finished
            } else {
                AgentOutcome::Lost
            },
            error: p.lost.clone(),
            hostname: p.result.as_ref().map(|d| d.hostname().to_string()),
            clock: AgentClock {
                offset_us: p.clock_before.map(|c| c.offset_us),
                rtt_us: p.clock_before.map(|c| c.rtt_us),
                bound_us: p.clock_before.map(|c| c.bound_us),
                offset_after_us: p.clock_after.map(|c| c.offset_us),
                drift_us: match (p.clock_before, p.clock_after) {
                    (Some(b), Some(a)) => Some(a.offset_us - b.offset_us),
                    _ => None,
                },
            },
            last_live: p.last_live.clone(),
            figures: figures(p),
        })
        .collect();
    Distributed {
        agents,
        degraded: !lost.is_empty(),
        lost_agents: lost,
        clock_bound_us: bound,
    }
}

/// Produce results of every agent → one result document: counts summed, histograms merged exactly,
/// rates over the longest measured phase (the agents started together), CPU summed. Agents lost
/// mid-run are named in `distributed` with their last live counts; the totals are the others'.
pub fn merge_produce(parts: &[AgentPart<ResultDocument>]) -> Result<ResultDocument, String> {
    let (done, first) = finished_first(parts)?;
    let latency = merged(&done, "latency", |d| &d.latency)?;
    let service = merged(&done, "service_time", |d| &d.service_time)?;
    let delay = merged(&done, "publish_delay", |d| &d.publish_delay)?;
    let common = Common::of(&done, &done);
    let acked = sum(&done, |d| d.records_acked);
    let sent = sum(&done, |d| d.records_sent);
    let failed = sum(&done, |d| d.records_failed);
    let bytes = sum(&done, |d| d.bytes_acked);
    let secs = common.duration_s.max(1e-9);
    let cpu = common.cpu_user_s + common.cpu_sys_s;
    let cpu_per_record = (sent > 0).then(|| cpu * 1e6 / sent as f64);
    let mut cluster = crate::cluster::ClusterReport::default();
    for (_, d) in &done {
        cluster.merge(&d.cluster);
    }
    let q = |h: &Histogram<u64>, q: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        }
    };
    let repetition = Repetition {
        duration_s: common.duration_s,
        records_acked: acked,
        records_failed: failed,
        records_per_sec: acked as f64 / secs,
        mb_per_sec: bytes as f64 / secs / (1024.0 * 1024.0),
        client_cpu_us_per_record: cpu_per_record,
        latency_p50_us: q(&latency, 0.5),
        latency_p99_us: q(&latency, 0.99),
    };
    Ok(ResultDocument {
        header: Header::new(Kind::Produce),
        start_time: common.start_time,
        end_time: common.end_time,
        duration_s: common.duration_s,
        records_sent: sent,
        records_acked: acked,
        records_failed: failed,
        records_unsent: sum(&done, |d| d.records_unsent),
        bytes_acked: bytes,
        records_per_sec: repetition.records_per_sec,
        mb_per_sec: repetition.mb_per_sec,
        client_cpu_us_per_record: cpu_per_record,
        client_cpu_user_s: common.cpu_user_s,
        client_cpu_sys_s: common.cpu_sys_s,
        peak_rss_kib: common.peak_rss_kib,
        latency: LatencySummary::of(&latency),
        service_time: LatencySummary::of(&service),
        publish_delay: LatencySummary::of(&delay),
        saturation: common.saturation,
        errors: common.errors,
        aborted: common.aborted,
        produce_requests: sum(&done, |d| d.produce_requests),
        record_batches: sum(&done, |d| d.record_batches),
        frames_written: sum(&done, |d| d.frames_written),
        socket_writes: sum(&done, |d| d.socket_writes),
        steady_state: merged_steady_state(&done)?,
        verification: merged_verification(parts),
        repetitions: vec![repetition],
        intervals: common.intervals,
        cluster,
        protocol_anomalies: common.protocol_anomalies,
        distributed: Some(distributed_block(parts, |p| {
            let d = p.result.as_ref();
            AgentFigures {
                records_sent: d.map(|d| d.records_sent),
                records_acked: d.map(|d| d.records_acked),
                records_failed: d.map(|d| d.records_failed),
                records_per_sec: d.map(|d| d.records_per_sec),
                latency: d.map(|d| Brief::of(&d.latency)),
                seed: d.map(|d| d.seed),
                ..AgentFigures::default()
            }
        })),
        ..(*first).clone()
    })
}

/// Consume results of every agent → one result document: records, bytes, fetches and commits
/// summed, the Fetch latency histograms merged exactly, each partition's spans joined (a
/// partition a group handed from one agent to another: from the first agent's start to the last
/// one's end, records added), rates over the longest agent's run (they start together), joining
/// time the longest agent's. Agents lost mid-run are named in `distributed` with their last live
/// counts; the totals are the others'.
pub fn merge_consume(
    parts: &[AgentPart<ConsumeResultDocument>],
) -> Result<ConsumeResultDocument, String> {
    let (done, first) = finished_first(parts)?;
    let fetch = merged(&done, "fetch_latency", |d| &d.fetch_latency)?;
    let common = Common::of(&done, &done);
    let records = sum(&done, |d| d.records_consumed);
    let bytes = sum(&done, |d| d.bytes_consumed);
    let secs = common.duration_s.max(1e-9);
    // The tool's split of the run: the longest any agent spent fetching, and the longest join of
    // an agent that read (one ended while still joining spent all its time there, reading
    // nothing).
    let fetch_ms = done.iter().map(|(_, d)| d.fetch_time_ms).max().unwrap_or(0);
    let longest_join = |read: bool| {
        done.iter()
            .filter(|(_, d)| !read || d.records_consumed > 0)
            .map(|(_, d)| d.rebalance_time_ms)
            .max()
    };
    let rebalance_ms = longest_join(true).or(longest_join(false)).unwrap_or(0);
    let fetch_secs = (fetch_ms as f64 / 1e3).max(1e-9);
    let mb = bytes as f64 / (1024.0 * 1024.0);
    let cpu = common.cpu_user_s + common.cpu_sys_s;
    let mut cluster = crate::cluster::ClusterReport::default();
    for (_, d) in &done {
        cluster.merge(&d.cluster);
    }
    let mut partitions: BTreeMap<i32, PartitionSpan> = BTreeMap::new();
    for (_, d) in &done {
        for (p, span) in &d.partitions {
            partitions
                .entry(*p)
                .and_modify(|all| {
                    all.start_offset = all.start_offset.min(span.start_offset);
                    all.end_offset = all.end_offset.max(span.end_offset);
                    all.records += span.records;
                    all.skipped += span.skipped;
                })
                .or_insert(*span);
        }
    }
    // With assigned partitions each agent verified its own partitions: every count adds.
    let checked: Vec<(&str, &crate::verify::VerifyReport)> = done
        .iter()
        .filter_map(|(a, d)| Some((*a, d.verification.as_ref()?)))
        .collect();
    let verification = crate::verify::VerifyReport::of_partitions(&checked).map(|v| {
        match parts
            .iter()
            .find(|p| p.result.as_ref().is_none_or(|d| d.verification.is_none()))
        {
            Some(p) if v.error.is_none() => v.failed(format!(
                "agent {}: its partitions were not verified ({})",
                p.agent,
                p.lost.as_deref().unwrap_or("no verification in its result")
            )),
            _ => v,
        }
    });
    // Every agent was given the run's whole --messages.
    let messages = first.settings["messages"].as_u64().unwrap_or(u64::MAX);
    let complete = parts.iter().all(|p| p.result.is_some()) && records >= messages;
    let mut settings = first.settings.clone();
    if let Some(map) = settings.as_object_mut() {
        let consumers: u64 = done
            .iter()
            .filter_map(|(_, d)| d.settings.get("consumers")?.as_u64())
            .sum();
        map.insert("consumers".into(), json!(consumers));
        // Assigned: every agent's partitions, as they were dealt out (a lost agent's are not
        // known here: its settings did not come back).
        if map.get("partitions").is_some_and(|p| !p.is_null()) {
            let mut asked: Vec<i64> = done
                .iter()
                .filter_map(|(_, d)| d.settings.get("partitions")?.as_array())
                .flatten()
                .filter_map(Value::as_i64)
                .collect();
            asked.sort_unstable();
            map.insert("partitions".into(), json!(asked));
        }
    }
    Ok(ConsumeResultDocument {
        header: Header::new(Kind::Consume),
        settings,
        start_time: common.start_time,
        end_time: common.end_time,
        duration_s: common.duration_s,
        rebalance_time_ms: rebalance_ms,
        fetch_time_ms: fetch_ms,
        records_consumed: records,
        bytes_consumed: bytes,
        record_batches: sum(&done, |d| d.record_batches),
        records_per_sec: records as f64 / secs,
        mb_per_sec: mb / secs,
        fetch_records_per_sec: records as f64 / fetch_secs,
        fetch_mb_per_sec: mb / fetch_secs,
        client_cpu_us_per_record: (records > 0).then(|| cpu * 1e6 / records as f64),
        client_cpu_user_s: common.cpu_user_s,
        client_cpu_sys_s: common.cpu_sys_s,
        peak_rss_kib: common.peak_rss_kib,
        fetch_latency: LatencySummary::of(&fetch),
        fetches: sum(&done, |d| d.fetches),
        empty_fetches: sum(&done, |d| d.empty_fetches),
        commits: sum(&done, |d| d.commits),
        commits_refused: sum(&done, |d| d.commits_refused),
        complete,
        // An agent whose partitions ran dry times out while the others read on: the run timed
        // out only when it did not read --messages.
        timed_out: !complete && done.iter().any(|(_, d)| d.timed_out),
        offsets_skipped: sum(&done, |d| d.offsets_skipped),
        intervals: common.intervals,
        partitions,
        member_id: None,
        errors: common.errors,
        // A segment its coordinator ended because the agents together read --messages is
        // complete, not stopped.
        aborted: done.iter().find_map(|(agent, d)| {
            Some(format!(
                "agent {agent}: {}",
                d.aborted.as_deref().filter(|a| *a != ENOUGH)?
            ))
        }),
        verification,
        latest_values: None,
        // Each agent's members and rebalances are its own document's; the merge does not join
        // them (the agents' members are in `distributed.agents`, by count).
        group: None,
        unread: None,
        topics: BTreeMap::new(),
        // Every agent decoded what it read: the reports add.
        value_decoding: done
            .iter()
            .filter_map(|(_, d)| d.value_decoding.as_ref())
            .fold(
                None,
                |all: Option<crate::schema::decode::DecodeReport>, r| {
                    let mut all = all.unwrap_or_default();
                    all.merge(r);
                    Some(all)
                },
            ),
        cluster,
        protocol_anomalies: common.protocol_anomalies,
        distributed: Some(distributed_block(parts, |p| {
            let d = p.result.as_ref();
            AgentFigures {
                records_consumed: d.map(|d| d.records_consumed),
                records_per_sec: d.map(|d| d.records_per_sec),
                latency: d.map(|d| Brief::of(&d.fetch_latency)),
                note: d.and_then(|d| {
                    let parts: Vec<String> = d.partitions.keys().map(i32::to_string).collect();
                    Some(format!(
                        "{} member(s); partitions read: {}{}",
                        d.settings.get("consumers")?.as_u64()?,
                        if parts.is_empty() {
                            "none".into()
                        } else {
                            parts.join(",")
                        },
                        if d.timed_out { "; timed out" } else { "" }
                    ))
                }),
                ..AgentFigures::default()
            }
        })),
        ..(*first).clone()
    })
}

/// The agents' `intervals`, window by window (the agents start together and tick at the same
/// interval): counters summed, rates recomputed; the per-window percentiles are each agent's own
/// (in its document) and not repeated here, where they could only be approximated.
fn merged_intervals(lists: Vec<&[Interval]>) -> Vec<Interval> {
    let len = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let windows: Vec<&Interval> = lists.iter().filter_map(|l| l.get(i)).collect();
            let first = windows[0];
            let duration = windows.iter().map(|w| w.duration_s).fold(0.0, f64::max);
            let secs = duration.max(1e-9);
            let mut figures = BTreeMap::new();
            for (name, figure) in &first.figures {
                let Figure::Count(_) = figure else { continue };
                let total: u64 = windows.iter().filter_map(|w| w.count(name)).sum();
                figures.insert(name.clone(), Figure::Count(total));
                if name == "bytes" || name == "bytes_consumed" {
                    let mb = total as f64 / secs / (1024.0 * 1024.0);
                    figures.insert("mb_per_sec".into(), Figure::Rate(mb));
                } else if first.figures.contains_key(&format!("{name}_per_sec")) {
                    figures.insert(format!("{name}_per_sec"), Figure::Rate(total as f64 / secs));
                }
            }
            // Histograms kept whole (for the coordinator's `--histogram-log`) add up exactly.
            let mut histograms = BTreeMap::new();
            for name in windows.iter().flat_map(|w| w.histograms.keys()) {
                if histograms.contains_key(name) {
                    continue;
                }
                let mut sum = latency_histogram();
                for h in windows
                    .iter()
                    .filter_map(|w| decode_histogram(w.histograms.get(name)?))
                {
                    // Every agent's histogram has the same bounds: adding cannot fail.
                    let _ = sum.add(h);
                }
                histograms.insert(name.clone(), crate::measure::encode_histogram(&sum));
            }
            Interval {
                t_s: first.t_s,
                duration_s: duration,
                agents: Some(windows.len()),
                histograms,
                figures,
            }
        })
        .collect()
}

/// Why there is nothing to merge: every agent's reason.
fn no_result<D>(parts: &[AgentPart<D>]) -> String {
    let why: Vec<String> = parts
        .iter()
        .map(|p| format!("{}: {}", p.agent, p.lost.as_deref().unwrap_or("no result")))
        .collect();
    format!("no agent returned a result ({})", why.join("; "))
}

/// An e2e run's parts → one result document: the producer side (counts, request durations, publish
/// delay) from the producer agents, merged exactly; the consumer side (reads, duplicates, whole
/// trip, already corrected for each producer agent's clock) from the consumer's agent; lost and
/// unexpected records counted per producer agent by the consumer against what that agent
/// acknowledged. Without the consumer's result the producers' figures still stand (degraded), and
/// the consumer's side is absent: unknown, never zero.
pub fn merge_e2e(
    consumer: &AgentPart<E2eResultDocument>,
    producers: &[AgentPart<E2eResultDocument>],
) -> Result<E2eResultDocument, String> {
    let mut all = vec![consumer.clone()];
    all.extend(producers.iter().cloned());
    let done = finished(producers);
    let every = finished(&all);
    let template = match (&consumer.result, done.first()) {
        (Some(d), _) => d.clone(),
        (None, Some((_, p))) => E2eResultDocument {
            consumer: None,
            ..(*p).clone()
        },
        (None, None) => return Err(no_result(&all)),
    };
    let request = merged(&done, "producer_request_duration", |d| {
        &d.producer_request_duration
    })?;
    let delay = merged(&done, "publish_delay", |d| &d.publish_delay)?;
    let common = Common::of(&every, &done);
    let acked = sum(&done, |d| d.records_acked);
    let (mut cluster, mut consumer_cluster) = Default::default();
    for (_, d) in &done {
        crate::cluster::ClusterReport::merge(&mut cluster, &d.cluster);
    }
    for (_, d) in &every {
        crate::cluster::ClusterReport::merge(&mut consumer_cluster, &d.consumer_cluster);
    }
    let mut settings = template.settings.clone();
    if let Some(map) = settings.as_object_mut() {
        map.insert("mode".into(), json!("CONSUMER_AND_PRODUCERS"));
        let producers: u64 = done
            .iter()
            .filter_map(|(_, d)| d.settings.get("producers")?.as_u64())
            .sum();
        map.insert("producers".into(), json!(producers));
    }
    let segments = template.segments.clone();
    let consumer_lost = consumer.result.is_none();
    // `--verify`: the consumer's agent checked against what every producer agent acknowledged;
    // a producer agent lost took its acknowledgements with it.
    let verification = template.verification.clone().map(|v| {
        match producers.iter().find(|p| p.result.is_none()) {
            Some(p) => v.failed(format!(
                "producer agent {} was lost: what it acknowledged is unknown",
                p.agent
            )),
            None => v,
        }
    });
    Ok(E2eResultDocument {
        header: Header::new(Kind::E2e),
        settings,
        start_time: common.start_time,
        end_time: common.end_time,
        duration_s: common.duration_s,
        records_produced: sum(&done, |d| d.records_produced),
        records_acked: acked,
        records_failed: sum(&done, |d| d.records_failed),
        records_per_sec: acked as f64 / common.duration_s.max(1e-9),
        produce_requests: sum(&done, |d| d.produce_requests),
        schedule_slips: sum(&done, |d| d.schedule_slips),
        cluster_slips: sum(&done, |d| d.cluster_slips),
        cluster,
        consumer_cluster,
        protocol_anomalies: common.protocol_anomalies,
        client_cpu_user_s: common.cpu_user_s,
        client_cpu_sys_s: common.cpu_sys_s,
        peak_rss_kib: common.peak_rss_kib,
        intervals: common.intervals,
        producer_request_duration: LatencySummary::of(&request),
        publish_delay: LatencySummary::of(&delay),
        saturation: common.saturation,
        errors: common.errors,
        aborted: common.aborted,
        // The consumer's agent speaks Fetch and the group APIs, the producers' Produce: the run
        // used every agent's versions.
        negotiated_versions: every
            .iter()
            .flat_map(|(_, d)| d.negotiated_versions.iter())
            .fold(BTreeMap::new(), |mut all, (api, v)| {
                all.entry(api.clone()).or_insert(*v);
                all
            }),
        distributed: Some(distributed_block(&all, |p| {
            e2e_figures(p, consumer_lost, &segments)
        })),
        verification,
        written: None,
        ..template
    })
}

/// An e2e agent's own figures: the consumer's reads, or a producer agent's counts.
fn e2e_figures(
    p: &AgentPart<E2eResultDocument>,
    consumer_lost: bool,
    segments: &[SegmentFigures],
) -> AgentFigures {
    let d = p.result.as_ref();
    if p.role == "consumer" && consumer_lost {
        AgentFigures {
            note: Some("the consumer's agent was lost: nothing is known of what was read".into()),
            ..AgentFigures::default()
        }
    } else if p.role == "consumer" {
        let side = d.and_then(|d| d.consumer.as_ref());
        AgentFigures {
            records_consumed: side.map(|c| c.records_consumed),
            whole_trip: side.map(|c| Brief::of(&c.whole_trip)),
            segments: segments.to_vec(),
            ..AgentFigures::default()
        }
    } else {
        AgentFigures {
            records_produced: d.map(|d| d.records_produced),
            records_acked: d.map(|d| d.records_acked),
            records_failed: d.map(|d| d.records_failed),
            producer_request_duration: d.map(|d| Brief::of(&d.producer_request_duration)),
            ..AgentFigures::default()
        }
    }
}

/// An OMB run's parts merged: kbench's document (with its `distributed` block) and what OMB's own
/// lines and result JSON are made from, the periods and the measured phase's histograms whole.
#[derive(Debug)]
pub struct MergedOmb {
    pub document: OmbResultDocument,
    pub periods: Vec<Period>,
    pub latency: Histogram<u64>,
    pub publish_delay: Histogram<u64>,
    pub end_to_end: Histogram<u64>,
}

// An OMB document has no CPU, memory or window timeline of its own (its periods are its timeline).
figures!(OmbResultDocument, d => &d.saturation.reasons, (0.0, 0.0), 0, &[]);

/// OMB results of every agent (`shares[i]` what agent `i` ran) → one: counts summed, histograms
/// merged exactly, the rate the agents' rates added (they ran at once), each period the agents'
/// same period added (their histograms whole, the backlog from every agent's running counts),
/// what the consumers read summed with each consumer kept. A lost agent is named in
/// `distributed`; the totals are the others'.
pub fn merge_omb(
    parts: &[AgentPart<OmbResultDocument>],
    shares: &[OmbShare],
    subscriptions: u32,
) -> Result<MergedOmb, String> {
    let (done, first) = finished_first(parts)?;
    let latency = merged(&done, "latency", |d| &d.latency)?;
    let service_time = merged(&done, "service_time", |d| &d.service_time)?;
    let publish_delay = merged(&done, "publish_delay", |d| &d.publish_delay)?;
    let end_to_end = merged(&done, "end_to_end", |d| &d.end_to_end)?;
    let producing: Vec<(&str, &OmbResultDocument)> = done
        .iter()
        .filter(|(_, d)| d.records_sent > 0)
        .copied()
        .collect();
    let common = Common::of(
        &done,
        if producing.is_empty() {
            &done
        } else {
            &producing
        },
    );
    let periods = merged_periods(&done, subscriptions)?;
    let mut cluster = crate::cluster::ClusterReport::default();
    let mut consumer_cluster = crate::cluster::ClusterReport::default();
    for (_, d) in &done {
        cluster.merge(&d.cluster);
        consumer_cluster.merge(&d.consumer_cluster);
    }
    let warmups: Vec<&Value> = done.iter().filter_map(|(_, d)| d.warmup.as_ref()).collect();
    let warmup = (!warmups.is_empty()).then(|| {
        let add = |k: &str| warmups.iter().filter_map(|w| w[k].as_u64()).sum::<u64>();
        json!({
            "records_sent": add("records_sent"),
            "records_acked": add("records_acked"),
            "records_failed": add("records_failed"),
            "records_unsent": add("records_unsent"),
        })
    });
    let mut client_errors = Vec::new();
    for (agent, d) in &done {
        client_errors.extend(
            d.client_errors
                .iter()
                .map(|e| format!("agent {agent}: {e}")),
        );
    }
    let shown: Vec<Period> = periods
        .iter()
        .map(|p| Period {
            parts: None,
            ..p.clone()
        })
        .collect();
    let document = OmbResultDocument {
        header: Header::new(Kind::Omb),
        target: first.target.clone(),
        settings: first.settings.clone(),
        seed: first.seed,
        topics: first.topics.clone(),
        target_records_per_sec: first.target_records_per_sec,
        max_rate: None,
        negotiated_versions: first.negotiated_versions.clone(),
        start_time: common.start_time,
        end_time: common.end_time,
        duration_s: common.duration_s,
        records_sent: sum(&done, |d| d.records_sent),
        records_acked: sum(&done, |d| d.records_acked),
        records_failed: sum(&done, |d| d.records_failed),
        records_unsent: sum(&done, |d| d.records_unsent),
        records_per_sec: fsum(&producing, |d| d.records_per_sec),
        latency: LatencySummary::of(&latency),
        service_time: LatencySummary::of(&service_time),
        publish_delay: LatencySummary::of(&publish_delay),
        end_to_end: LatencySummary::of(&end_to_end),
        saturation: common.saturation,
        errors: common.errors,
        cluster,
        consumer_cluster,
        protocol_anomalies: common.protocol_anomalies,
        warmup,
        consumed: merged_consumed(&done),
        backlog: None,
        periods: shown,
        client_errors,
        // Ended by the coordinator once every record was read: complete, not stopped.
        aborted: done.iter().find_map(|(agent, d)| {
            Some(format!(
                "agent {agent}: {}",
                d.aborted.as_deref().filter(|a| *a != DRAINED)?
            ))
        }),
        distributed: Some(distributed_block(parts, |p| {
            let share = parts
                .iter()
                .position(|q| std::ptr::eq(q, p))
                .and_then(|i| shares.get(i));
            let Some(d) = &p.result else {
                return AgentFigures {
                    note: share.map(share_note),
                    ..AgentFigures::default()
                };
            };
            AgentFigures {
                records_sent: Some(d.records_sent),
                records_acked: Some(d.records_acked),
                records_failed: Some(d.records_failed),
                records_per_sec: Some(d.records_per_sec),
                latency: Some(Brief::of(&d.latency)),
                records_consumed: d.consumed["records"].as_u64(),
                whole_trip: Some(Brief::of(&d.end_to_end)),
                note: share.map(share_note),
                ..AgentFigures::default()
            }
        })),
    };
    Ok(MergedOmb {
        document,
        periods,
        latency,
        publish_delay,
        end_to_end,
    })
}

/// What an agent ran of an OMB workload, in words.
fn share_note(share: &OmbShare) -> String {
    let list = |v: &[u32]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        }
    };
    format!(
        "producers {}; consumers {}",
        list(&share.producers),
        list(&share.consumers)
    )
}

/// The agents' periods, the k-th of each added into the run's k-th (the agents' phases start at
/// one instant and their periods are as long): rates summed, histograms added whole, the backlog
/// from every agent's running counts.
fn merged_periods(
    done: &[(&str, &OmbResultDocument)],
    subscriptions: u32,
) -> Result<Vec<Period>, String> {
    let n = done.iter().map(|(_, d)| d.periods.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let mut all: Option<Period> = None;
        let (mut acked, mut consumed) = (0u64, 0u64);
        for (agent, d) in done {
            let Some(p) = d.periods.get(k) else {
                continue;
            };
            let parts: &PeriodParts = p
                .parts
                .as_ref()
                .ok_or_else(|| format!("agent {agent}: its period {k} is not whole"))?;
            let decode = |name: &str, text: &str| {
                decode_histogram(text).ok_or_else(|| {
                    format!("agent {agent}: period {k}: its {name} histogram does not decode")
                })
            };
            let latency = decode("publish latency", &parts.publish_latency)?;
            let delay = decode("publish delay", &parts.publish_delay)?;
            let e2e = decode("end-to-end", &parts.end_to_end)?;
            acked += parts.acked;
            consumed += parts.consumed;
            match &mut all {
                None => {
                    all = Some(Period {
                        publish_latency: latency,
                        publish_delay: delay,
                        end_to_end: e2e,
                        ..p.clone()
                    })
                }
                Some(a) => {
                    a.at_s = a.at_s.max(p.at_s);
                    a.duration_s = a.duration_s.max(p.duration_s);
                    a.warmup &= p.warmup;
                    a.publish_rate += p.publish_rate;
                    a.publish_mb_per_sec += p.publish_mb_per_sec;
                    a.publish_error_rate += p.publish_error_rate;
                    a.consume_rate += p.consume_rate;
                    a.consume_mb_per_sec += p.consume_mb_per_sec;
                    for (into, h) in [
                        (&mut a.publish_latency, &latency),
                        (&mut a.publish_delay, &delay),
                        (&mut a.end_to_end, &e2e),
                    ] {
                        into.add(h)
                            .map_err(|e| format!("agent {agent}: period {k}: {e}"))?;
                    }
                }
            }
        }
        if let Some(mut p) = all {
            p.backlog =
                (acked.saturating_mul(u64::from(subscriptions)) as i64 - consumed as i64).max(0);
            p.parts = None;
            out.push(p);
        }
    }
    Ok(out)
}

/// What the agents' consumers read, summed; every consumer kept, with its agent.
fn merged_consumed(done: &[(&str, &OmbResultDocument)]) -> Value {
    let add = |k: &str| {
        done.iter()
            .filter_map(|(_, d)| d.consumed[k].as_u64())
            .sum::<u64>()
    };
    let mut decoding: Option<crate::schema::decode::DecodeReport> = None;
    for (_, d) in done {
        if let Ok(r) = serde_json::from_value::<crate::schema::decode::DecodeReport>(
            d.consumed["value_decoding"].clone(),
        ) {
            match &mut decoding {
                Some(all) => all.merge(&r),
                None => decoding = Some(r),
            }
        }
    }
    let per_consumer: Vec<Value> = done
        .iter()
        .flat_map(|(agent, d)| {
            d.consumed["per_consumer"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |mut c| {
                    c["agent"] = json!(agent);
                    c
                })
        })
        .collect();
    json!({
        "records": add("records"),
        "bytes": add("bytes"),
        "value_decoding": decoding,
        "expected_records": add("expected_records"),
        "consumers": add("consumers"),
        "per_consumer": per_consumer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_exactly() {
        for (total, parts) in [(10, 3), (1, 1), (7, 7), (1_000_001, 4), (0, 2)] {
            let s = split_count(total, parts);
            assert_eq!(s.len(), parts);
            assert_eq!(s.iter().sum::<u64>(), total);
            let (min, max) = (s.iter().min().unwrap(), s.iter().max().unwrap());
            assert!(max - min <= 1, "{s:?}");
        }
    }

    #[test]
    fn the_shortest_round_trip_sets_the_offset() {
        // Agent clock 1 000 000 µs ahead; the second sample has the shortest round trip.
        let samples = [
            ClockSample {
                sent_us: 100,
                agent_us: 1_000_900,
                received_us: 1_100,
            },
            ClockSample {
                sent_us: 2_000,
                agent_us: 1_002_050,
                received_us: 2_100,
            },
        ];
        let c = ClockEstimate::from_samples(&samples).unwrap();
        assert_eq!(c.rtt_us, 100);
        assert_eq!(c.bound_us, 50);
        assert_eq!(c.offset_us, 1_000_000);
        assert_eq!(ClockEstimate::from_samples(&[]), None);
    }

    #[test]
    fn produce_splits_sum_to_the_whole() {
        let spec = ProduceSpec {
            num_records: 1_000,
            throughput: Some(999.0),
            ..ProduceSpec::default()
        };
        let parts = split_produce(&spec, 3).unwrap();
        assert_eq!(parts.iter().map(|p| p.num_records).sum::<u64>(), 1_000);
        let rate: f64 = parts.iter().map(|p| p.throughput.unwrap()).sum();
        assert!((rate - 999.0).abs() < 1e-9);
        assert_ne!(parts[0].seed, parts[1].seed);
        // --payload-monotonic: offsets 0, 1, 2 and a stride of 3.
        assert_eq!(
            parts
                .iter()
                .map(|p| (p.monotonic_offset, p.monotonic_stride))
                .collect::<Vec<_>>(),
            vec![(0, 3), (1, 3), (2, 3)]
        );
        // --warmup-records: split as the records are; a share as large as its records is refused.
        let warm = |w: u64| {
            split_produce(
                &ProduceSpec {
                    num_records: 1_000,
                    warmup_records: w,
                    ..ProduceSpec::default()
                },
                3,
            )
        };
        let parts = warm(100).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.warmup_records).collect::<Vec<_>>(),
            vec![34, 33, 33]
        );
        assert_eq!(warm(998).unwrap_err().field, "warmup_records");
        assert!(warm(997).is_ok());
        let e = split_produce(
            &ProduceSpec {
                num_records: 2,
                ..ProduceSpec::default()
            },
            3,
        )
        .unwrap_err();
        assert_eq!(e.field, "num_records");
        let e = split_produce(
            &ProduceSpec {
                repetitions: 3,
                ..ProduceSpec::default()
            },
            2,
        )
        .unwrap_err();
        assert_eq!(e.field, "repetitions");
    }

    #[test]
    fn e2e_splits_number_producers_apart() {
        let spec = E2eSpec {
            producers: 5,
            ..E2eSpec::default()
        };
        let (consumer, producers) = split_e2e(&spec, 2, 7).unwrap();
        assert!(consumer.peers_consumer());
        assert_eq!(
            producers
                .iter()
                .map(|p| (p.producer_base, p.producers))
                .collect::<Vec<_>>(),
            vec![(0, 3), (3, 2)]
        );
        assert!(producers.iter().all(|p| p.run_tag == Some(7)));
        assert_eq!(split_e2e(&spec, 6, 7).unwrap_err().field, "producers");
        assert_eq!(split_e2e(&spec, 0, 7).unwrap_err().field, "agents");
        // 13 records over 5 producers: 3, 3, 3, 2, 2 — the first agent's three send 9.
        let counted = E2eSpec {
            records: Some(13),
            ..spec.clone()
        };
        let (consumer, producers) = split_e2e(&counted, 2, 7).unwrap();
        assert_eq!(consumer.records, None);
        assert_eq!(
            producers.iter().map(|p| p.records).collect::<Vec<_>>(),
            vec![Some(9), Some(4)]
        );
        let few = E2eSpec {
            producers: 2,
            records: Some(1),
            ..spec
        };
        assert_eq!(split_e2e(&few, 2, 7).unwrap_err().field, "num_records");
    }

    #[test]
    fn an_omb_workload_splits_its_producers_and_consumers_and_refuses_what_cannot_split() {
        let spec = |producers: u32, consumers: u32, rate: f64, backlog: f64| {
            let text = format!(
                "name: t\ntopics: 1\npartitionsPerTopic: 3\nmessageSize: 10\nsubscriptionsPerTopic: 1\n\
                 consumerPerSubscription: {consumers}\nproducersPerTopic: {producers}\nproducerRate: {rate}\n\
                 consumerBacklogSizeGB: {backlog}\ntestDurationMinutes: 0.1\nwarmupDurationMinutes: 0\n"
            );
            let w = OmbWorkload::parse(&text).unwrap();
            OmbSpec::new(w, &OmbDriver::default(), None, 1).unwrap()
        };
        let shares = |s: &OmbSpec, n| {
            split_omb(s, n)
                .unwrap()
                .into_iter()
                .map(|s| (s.producers, s.consumers))
                .collect::<Vec<_>>()
        };
        // One of each per agent, the consumers from the last agent back.
        assert_eq!(
            shares(&spec(3, 3, 100.0, 0.0), 3),
            [(vec![0], vec![2]), (vec![1], vec![1]), (vec![2], vec![0])]
        );
        // OMB's split: one agent produces, the other consumes.
        assert_eq!(
            shares(&spec(1, 1, 100.0, 0.0), 2),
            [(vec![0], vec![]), (vec![], vec![0])]
        );
        // Contiguous shares: members 0-1 and 2-3 of the one subscription together.
        assert_eq!(
            shares(&spec(2, 4, 100.0, 0.0), 2),
            [(vec![0], vec![2, 3]), (vec![1], vec![0, 1])]
        );
        // The agents short of producers take the larger consumer shares.
        assert_eq!(
            shares(&spec(1, 5, 100.0, 0.0), 3),
            [
                (vec![0], vec![4]),
                (vec![], vec![2, 3]),
                (vec![], vec![0, 1])
            ]
        );
        // Every producer and consumer exactly once, whatever the counts.
        for (p, c, n) in [(7, 5, 4), (1, 9, 5), (10, 1, 3), (1, 4, 4)] {
            let all = shares(&spec(p, c, 100.0, 0.0), n);
            let mut ps: Vec<u32> = all.iter().flat_map(|(p, _)| p.clone()).collect();
            let mut cs: Vec<u32> = all.iter().flat_map(|(_, c)| c.clone()).collect();
            ps.sort();
            cs.sort();
            assert_eq!(ps, (0..p).collect::<Vec<_>>());
            assert_eq!(cs, (0..c).collect::<Vec<_>>());
            assert!(all.iter().all(|(p, c)| !p.is_empty() || !c.is_empty()));
        }
        for (s, n, field) in [
            (spec(1, 1, 0.0, 0.0), 2, "producerRate"),
            (spec(1, 1, 100.0, 1.0), 2, "consumerBacklogSizeGB"),
            (spec(1, 1, 100.0, 0.0), 3, "agents"),
        ] {
            assert_eq!(split_omb(&s, n).unwrap_err().field, field);
        }
    }

    /// A workload whose producers' buffers exceed one process's budget runs over agents whose
    /// shares each fit their own: the whole is refused, each share passes, and the fields alone
    /// (what a coordinator checks) pass too.
    #[test]
    fn an_omb_share_is_checked_against_its_own_agents_budget() {
        let text = "name: t\ntopics: 1\npartitionsPerTopic: 3\nmessageSize: 10\n\
                    subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 4\n\
                    producerRate: 100\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 0.1\n\
                    warmupDurationMinutes: 0\n";
        let of = |text: &str| {
            OmbSpec::new(
                OmbWorkload::parse(text).unwrap(),
                &OmbDriver::default(),
                None,
                1,
            )
            .unwrap()
        };
        // Each of `agents` shares passes this process's checks.
        let every_share_fits = |spec: &OmbSpec, agents: usize| {
            for share in split_omb(spec, agents).unwrap() {
                let agent = OmbSpec {
                    share: Some(share),
                    ..spec.clone()
                };
                agent.validate().unwrap();
            }
        };
        let mut spec = of(text);
        let one = spec.producer_spec(&spec.topic(0), None, 0).memory_needed() as u64;
        // Room for two producers, not four.
        spec.limits.memory_budget_bytes = 2 * one + one / 2;
        let refused = spec.validate().unwrap_err();
        assert_eq!(refused.field, "producersPerTopic, messageSize");
        assert!(
            refused.reason.contains("memory budget"),
            "{}",
            refused.reason
        );
        spec.validate_fields().unwrap();
        assert!(
            split_omb(&spec, 2)
                .unwrap()
                .iter()
                .all(|s| s.producers.len() == 2)
        );
        every_share_fits(&spec, 2);
        // Clients: 1 500 are more than one process runs, not more than two agents' shares (no
        // budget on this machine's memory here).
        let mut spec = of(&text.replace("producersPerTopic: 4", "producersPerTopic: 1500"));
        spec.limits.memory_budget_bytes = u64::MAX;
        let refused = spec.validate().unwrap_err();
        assert!(refused.field.starts_with("topics × "), "{}", refused.field);
        assert!(
            refused.reason.contains("1501 clients"),
            "{}",
            refused.reason
        );
        spec.validate_fields().unwrap();
        let refused = split_omb(&spec, 1).unwrap_err();
        assert_eq!(refused.field, "agents");
        assert!(
            refused.reason.contains("at least 2 agents"),
            "{}",
            refused.reason
        );
        every_share_fits(&spec, 2);
    }

    #[test]
    fn a_consume_run_splits_its_members_or_its_partitions() {
        let spec = ConsumeSpec {
            messages: 1000,
            ..ConsumeSpec::default()
        };
        // A group: one member per agent unless --consumers gives more; every part in the one
        // group, each free to read the whole --messages (the coordinator ends them together).
        let parts = split_consume(&spec, 3).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.consumers).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        assert!(
            parts
                .iter()
                .all(|p| p.mode == spec.mode && p.messages == 1000)
        );
        let five = ConsumeSpec {
            consumers: 5,
            ..spec.clone()
        };
        let parts = split_consume(&five, 3).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.consumers).collect::<Vec<_>>(),
            [2, 2, 1]
        );
        let two = ConsumeSpec {
            consumers: 2,
            ..spec.clone()
        };
        assert_eq!(split_consume(&two, 3).unwrap_err().field, "consumers");
        // Assigned partitions: dealt out in turn.
        let assigned = ConsumeSpec {
            mode: ConsumeMode::Assign {
                partitions: vec![0, 1, 2, 3, 4],
            },
            commit: false,
            verify: true,
            ..spec.clone()
        };
        let parts = split_consume(&assigned, 2).unwrap();
        let dealt: Vec<ConsumeMode> = parts.iter().map(|p| p.mode.clone()).collect();
        assert_eq!(
            dealt,
            [
                ConsumeMode::Assign {
                    partitions: vec![0, 2, 4]
                },
                ConsumeMode::Assign {
                    partitions: vec![1, 3]
                }
            ]
        );
        assert_eq!(split_consume(&assigned, 6).unwrap_err().field, "partition");
        // What cannot be split says so, naming its field.
        let grouped_verify = ConsumeSpec {
            verify: true,
            ..spec.clone()
        };
        assert_eq!(
            split_consume(&grouped_verify, 2).unwrap_err().field,
            "verify"
        );
        let include = ConsumeSpec {
            include: Some("t-.*".into()),
            ..spec.clone()
        };
        assert_eq!(split_consume(&include, 2).unwrap_err().field, "include");
        let twice = ConsumeSpec {
            mode: ConsumeMode::Assign {
                partitions: vec![0, 0, 1],
            },
            commit: false,
            ..spec.clone()
        };
        assert_eq!(split_consume(&twice, 2).unwrap_err().field, "partition");
        let mut fixed = spec.clone();
        fixed.consumer.group_instance_id = Some("static".into());
        assert_eq!(
            split_consume(&fixed, 2).unwrap_err().field,
            "group_instance_id"
        );
        // The part travels as JSON and comes back the same.
        let wire = serde_json::to_string(&parts[0]).unwrap();
        let back: ConsumeSpec = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, parts[0]);
    }

    fn part(agent: &str, values: &[u64], acked: u64) -> AgentPart<ResultDocument> {
        let mut h = latency_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        let s = LatencySummary::of(&h);
        AgentPart {
            agent: agent.into(),
            role: "produce",
            clock_before: None,
            clock_after: None,
            result: Some(ResultDocument {
                records_sent: acked,
                records_acked: acked,
                bytes_acked: acked * 100,
                duration_s: 1.0,
                latency: s.clone(),
                service_time: s.clone(),
                publish_delay: s,
                errors: [("x".to_string(), 1)].into(),
                ..ResultDocument::default()
            }),
            lost: None,
            last_live: Value::Null,
        }
    }

    fn e2e_part(
        agent: &str,
        role: &'static str,
        acked: u64,
        consumer: Option<crate::result::E2eConsumerSide>,
    ) -> AgentPart<E2eResultDocument> {
        let s = LatencySummary::of(&latency_histogram());
        AgentPart {
            agent: agent.into(),
            role,
            clock_before: None,
            clock_after: None,
            result: Some(E2eResultDocument {
                header: Header::new(Kind::E2e),
                records_acked: acked,
                producer_request_duration: s.clone(),
                publish_delay: s,
                settings: json!({"producers": 2}),
                consumer,
                ..E2eResultDocument::default()
            }),
            lost: None,
            last_live: Value::Null,
        }
    }

    #[test]
    fn an_e2e_run_without_its_consumer_keeps_the_producers_figures() {
        let mut consumer = e2e_part("c", "consumer", 0, None);
        consumer.result = None;
        consumer.lost = Some("no answer for 5 s".into());
        let side = crate::result::E2eConsumerSide::default();
        let p1 = e2e_part("p1", "producer", 10, Some(side));
        let p2 = e2e_part("p2", "producer", 5, None);
        let merged = merge_e2e(&consumer, &[p1, p2]).unwrap();
        assert!(merged.consumer.is_none(), "unknown, not zero");
        let doc = serde_json::to_value(&merged).unwrap();
        assert_eq!(doc["records_acked"], 15);
        assert_eq!(doc.get("records_consumed"), None, "unknown, not zero");
        assert_eq!(doc.get("whole_trip"), None);
        assert_eq!(doc["settings"]["producers"], 4);
        assert_eq!(doc["distributed"]["lost_agents"], json!(["c"]));
        let back: E2eResultDocument = serde_json::from_value(doc).unwrap();
        assert!(
            back.consumer.is_none(),
            "a degraded document reads as its type"
        );
        assert!(back.distributed.unwrap().agents[0].figures.note.is_some());
    }

    #[test]
    fn an_e2e_run_with_its_consumer_takes_the_consumer_s_reads() {
        let side = crate::result::E2eConsumerSide {
            records_consumed: 15,
            whole_trip: LatencySummary::of(&latency_histogram()),
            ..Default::default()
        };
        let consumer = e2e_part("c", "consumer", 0, Some(side));
        let p1 = e2e_part("p1", "producer", 10, None);
        let merged = merge_e2e(&consumer, &[p1]).unwrap();
        assert_eq!(merged.consumer.as_ref().unwrap().records_consumed, 15);
        assert_eq!(merged.records_acked, 10);
        let d = merged.distributed.unwrap();
        assert_eq!(d.agents[0].figures.records_consumed, Some(15));
        assert_eq!(d.agents[1].figures.records_acked, Some(10));
        assert!(!d.degraded);
    }

    #[test]
    fn produce_results_merge_exactly_and_a_lost_agent_is_named() {
        let a = part("a", &[10, 20, 30], 3);
        let b = part("b", &[1_000, 2_000], 2);
        let mut c = part("c", &[], 0);
        c.result = None;
        c.lost = Some("no answer".into());
        let merged = merge_produce(&[a, b, c]).unwrap();
        let doc = serde_json::to_value(&merged).unwrap();
        assert_eq!(doc["records_acked"], 5);
        assert_eq!(doc["latency"]["count"], 5);
        let mut union = latency_histogram();
        for v in [10, 20, 30, 1_000, 2_000] {
            union.record(v).unwrap();
        }
        assert_eq!(doc["latency"]["max"], union.max());
        assert_eq!(doc["latency"]["p50"], union.value_at_quantile(0.5));
        assert_eq!(doc["errors"]["x"], 2);
        assert_eq!(doc["distributed"]["degraded"], true);
        assert_eq!(doc["distributed"]["lost_agents"], json!(["c"]));
        assert_eq!(doc["distributed"]["agents"][2]["status"], "lost");
        let back: ResultDocument = serde_json::from_value(doc).unwrap();
        assert_eq!(
            back.distributed, merged.distributed,
            "reads back as its type"
        );
        let mut none = part("e", &[], 0);
        none.result = None;
        none.lost = Some("segment failed: cannot connect".into());
        let e = merge_produce(&[none]).unwrap_err();
        assert!(e.contains("e: segment failed: cannot connect"), "{e}");
        let mut broken = part("d", &[1], 1);
        broken.result.as_mut().unwrap().latency.histogram = "not base64!".into();
        assert!(merge_produce(&[broken]).unwrap_err().contains("agent d"));
    }

    #[test]
    fn intervals_merge_window_by_window() {
        // Each window's latency histogram kept whole: `records` values of `records` µs.
        let window = |records: u64| {
            let mut figures = BTreeMap::new();
            figures.insert("records".to_string(), Figure::Count(records));
            figures.insert("records_per_sec".to_string(), Figure::Rate(records as f64));
            figures.insert("bytes".to_string(), Figure::Count(records * 1_048_576));
            let mut h = latency_histogram();
            h.record_n(records, records).unwrap();
            Interval {
                t_s: 0.0,
                duration_s: 1.0,
                agents: None,
                histograms: [("latency".to_string(), crate::measure::encode_histogram(&h))].into(),
                figures,
            }
        };
        let a = vec![window(3), window(4)];
        let b = vec![window(5)];
        let m = merged_intervals(vec![&a, &b]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].count("records"), Some(8));
        assert_eq!(m[0].rate("records_per_sec"), Some(8.0));
        assert_eq!(m[0].rate("mb_per_sec"), Some(8.0));
        assert_eq!(m[0].agents, Some(2));
        assert_eq!(m[1].count("records"), Some(4));
        // The histograms add up exactly: 3 × 3 µs and 5 × 5 µs.
        let h = decode_histogram(&m[0].histograms["latency"]).unwrap();
        assert_eq!((h.len(), h.min(), h.max()), (8, 3, 5));
        assert_eq!(h.count_at(5), 5);
    }
}
