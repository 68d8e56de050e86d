//! Distributed runs: one workload spread over several agents, merged into one exact result. The
//! bench side only — no HTTP here: splitting a spec into disjoint segments whose parts sum to the
//! whole, estimating an agent's clock from timed exchanges, and merging the agents' result documents
//! (their HdrHistograms exactly; counts summed; a lost agent named, never dropped). The transport
//! between coordinator and agents is the front end's.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::e2e::{E2eMode, E2eSpec, ProducerSegment};
use crate::error::SpecError;
use crate::measure::{LatencySummary, decode_histogram, latency_histogram};
use crate::produce::ProduceSpec;

/// The coordinator–agent protocol version. An agent refuses a coordinator that speaks another.
/// 2: a segment's work is one tagged spec (`"work": {"produce": …}`), not two optional ones.
pub const AGENT_PROTOCOL: u32 = 2;

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
}

/// A segment's workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    Produce(Box<ProduceSpec>),
    E2e(Box<E2eSpec>),
}

impl Work {
    /// The workload's name, as runs and results say it.
    pub fn name(&self) -> &'static str {
        match self {
            Work::Produce(_) => "produce",
            Work::E2e(_) => "e2e",
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
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Stopping => "stopping",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
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
    let share = 1.0 / agents as f64;
    let mut parts = Vec::with_capacity(agents);
    for (i, count) in counts.into_iter().enumerate() {
        let mut part = spec.clone();
        part.num_records = if unbounded { u64::MAX } else { count };
        part.throughput = spec.throughput.map(|t| t * share);
        part.shape = spec.shape.as_ref().map(|s| s.scaled(share));
        part.seed = segment_seed(spec.seed, i);
        part.interval_histograms = false;
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
        run_tag: Some(run_tag),
        ..spec.clone()
    };
    consumer.validate()?;
    let mut producers = Vec::with_capacity(producer_agents);
    let mut base = 0u32;
    for count in split_count(spec.producers as u64, producer_agents) {
        let part = E2eSpec {
            mode: E2eMode::Producers,
            producers: count as usize,
            producer_base: base,
            run_tag: Some(run_tag),
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

/// One agent's part in a run, as the coordinator gathered it.
#[derive(Debug, Clone)]
pub struct AgentPart {
    /// The agent's address, as given.
    pub agent: String,
    /// `producer`, `consumer` (e2e) or `produce`.
    pub role: &'static str,
    pub clock_before: Option<ClockEstimate>,
    pub clock_after: Option<ClockEstimate>,
    /// Its result document; `None` when the agent was lost.
    pub result: Option<Value>,
    /// Why there is no result (the agent stopped answering, its run failed).
    pub lost: Option<String>,
    /// Its last live figures, as polled.
    pub last_live: Value,
}

fn num(doc: &Value, field: &str) -> u64 {
    doc.get(field).and_then(Value::as_u64).unwrap_or(0)
}

fn float(doc: &Value, field: &str) -> f64 {
    doc.get(field).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The histogram of `field` in each document, merged exactly; an error names the agent whose
/// histogram could not be read.
fn merged(parts: &[&AgentPart], field: &str) -> Result<Histogram<u64>, String> {
    let mut all = latency_histogram();
    for p in parts {
        let Some(doc) = &p.result else { continue };
        let text = doc
            .get(field)
            .and_then(|s| s.get("histogram"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("agent {}: the result has no {field} histogram", p.agent))?;
        let h = decode_histogram(text)
            .ok_or_else(|| format!("agent {}: its {field} histogram does not decode", p.agent))?;
        all.add(&h)
            .map_err(|e| format!("agent {}: {field}: {e}", p.agent))?;
    }
    Ok(all)
}

fn summary(h: &Histogram<u64>) -> Value {
    serde_json::to_value(LatencySummary::of(h)).unwrap_or(Value::Null)
}

/// Error counts of every document, summed per message.
fn merged_errors(parts: &[&AgentPart]) -> BTreeMap<String, u64> {
    let mut errors = BTreeMap::new();
    for p in parts {
        if let Some(map) = p
            .result
            .as_ref()
            .and_then(|d| d.get("errors"))
            .and_then(Value::as_object)
        {
            for (k, v) in map {
                *errors.entry(k.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
            }
        }
    }
    errors
}

fn sum(parts: &[&AgentPart], field: &str) -> u64 {
    parts
        .iter()
        .filter_map(|p| p.result.as_ref())
        .map(|d| num(d, field))
        .sum()
}

fn fsum(parts: &[&AgentPart], field: &str) -> f64 {
    parts
        .iter()
        .filter_map(|p| p.result.as_ref())
        .map(|d| float(d, field))
        .sum()
}

/// The longest measured phase among the documents, s.
fn longest(parts: &[&AgentPart], field: &str) -> f64 {
    parts
        .iter()
        .filter_map(|p| p.result.as_ref())
        .map(|d| float(d, field))
        .fold(0.0, f64::max)
}

/// The earliest `start_time` and the latest `end_time` (RFC 3339 strings compare in time order).
fn span(parts: &[&AgentPart]) -> (Value, Value) {
    let times = |field: &str| -> Vec<String> {
        parts
            .iter()
            .filter_map(|p| p.result.as_ref())
            .filter_map(|d| d.get(field).and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    (
        json!(times("start_time").into_iter().min()),
        json!(times("end_time").into_iter().max()),
    )
}

/// Saturation of the whole: saturated when any agent was, each reason naming its agent.
fn saturation(parts: &[&AgentPart]) -> Value {
    let mut reasons = Vec::new();
    for p in parts {
        if let Some(r) = p
            .result
            .as_ref()
            .and_then(|d| d.pointer("/saturation/reasons"))
            .and_then(Value::as_array)
        {
            reasons.extend(
                r.iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("agent {}: {s}", p.agent)),
            );
        }
    }
    json!({ "saturated": !reasons.is_empty(), "reasons": reasons })
}

/// The `distributed` block: each agent's part and clock, whether the run is degraded, the worst
/// clock bound.
fn distributed_block(parts: &[AgentPart], per_agent: impl Fn(&AgentPart) -> Value) -> Value {
    let lost: Vec<&str> = parts
        .iter()
        .filter(|p| p.result.is_none())
        .map(|p| p.agent.as_str())
        .collect();
    let bound = parts
        .iter()
        .flat_map(|p| [p.clock_before, p.clock_after])
        .flatten()
        .map(|c| c.bound_us)
        .max();
    json!({
        "agents": parts.iter().map(|p| {
            let drift = match (p.clock_before, p.clock_after) {
                (Some(b), Some(a)) => Some(a.offset_us - b.offset_us),
                _ => None,
            };
            let mut v = json!({
                "agent": p.agent,
                "role": p.role,
                "status": if p.result.is_some() { "finished" } else { "lost" },
                "error": p.lost,
                "hostname": p.result.as_ref().and_then(|d| d.pointer("/environment/hostname")).cloned(),
                "clock": {
                    "offset_us": p.clock_before.map(|c| c.offset_us),
                    "rtt_us": p.clock_before.map(|c| c.rtt_us),
                    "bound_us": p.clock_before.map(|c| c.bound_us),
                    "offset_after_us": p.clock_after.map(|c| c.offset_us),
                    "drift_us": drift,
                },
                "last_live": p.last_live,
            });
            if let (Some(map), Value::Object(extra)) = (v.as_object_mut(), per_agent(p)) {
                map.extend(extra);
            }
            v
        }).collect::<Vec<_>>(),
        "degraded": !lost.is_empty(),
        "lost_agents": lost,
        "clock_bound_us": bound,
    })
}

/// Per-agent figures of a latency summary, for the breakdown.
fn brief(doc: Option<&Value>, field: &str) -> Value {
    let q = |p: &str| {
        doc.and_then(|d| d.get(field))
            .and_then(|s| s.get(p))
            .cloned()
    };
    json!({ "count": q("count"), "p50": q("p50"), "p99": q("p99"), "max": q("max") })
}

/// The agents' `cluster` blocks, added together (each agent's producers saw the cluster apart).
fn merged_cluster(done: &[&AgentPart]) -> Value {
    merged_cluster_at(done, "cluster")
}

/// The agents' cluster blocks under `field`, added together.
fn merged_cluster_at(done: &[&AgentPart], field: &str) -> Value {
    let mut all = crate::cluster::ClusterReport::default();
    for d in done.iter().filter_map(|p| p.result.as_ref()) {
        if let Some(Ok(c)) = d
            .get(field)
            .map(|c| serde_json::from_value::<crate::cluster::ClusterReport>(c.clone()))
        {
            all.merge(&c);
        }
    }
    serde_json::to_value(all).unwrap_or(Value::Null)
}

/// The agents' objects of counts under `field`, summed key by key.
fn merged_map(done: &[&AgentPart], field: &str) -> Value {
    let mut all = serde_json::Map::new();
    for d in done.iter().filter_map(|p| p.result.as_ref()) {
        if let Some(m) = d.get(field).and_then(Value::as_object) {
            for (k, v) in m {
                let n = all.get(k).and_then(Value::as_u64).unwrap_or(0) + v.as_u64().unwrap_or(0);
                all.insert(k.clone(), json!(n));
            }
        }
    }
    Value::Object(all)
}

/// Produce results of every agent → one result document: counts summed, histograms merged exactly,
/// rates over the longest measured phase (the agents started together), CPU summed. Agents lost
/// mid-run are named in `distributed` with their last live counts; the totals are the others'.
pub fn merge_produce(parts: &[AgentPart]) -> Result<Value, String> {
    let done: Vec<&AgentPart> = parts.iter().filter(|p| p.result.is_some()).collect();
    let Some(template) = done.first().and_then(|p| p.result.clone()) else {
        return Err(no_result(parts));
    };
    let mut doc = template;
    let latency = merged(&done, "latency")?;
    let service = merged(&done, "service_time")?;
    let delay = merged(&done, "publish_delay")?;
    let acked = sum(&done, "records_acked");
    let sent = sum(&done, "records_sent");
    let failed = sum(&done, "records_failed");
    let bytes = sum(&done, "bytes_acked");
    let duration = longest(&done, "duration_s");
    let cpu_user = fsum(&done, "client_cpu_user_s");
    let cpu_sys = fsum(&done, "client_cpu_sys_s");
    let (start, end) = span(&done);
    let rate = acked as f64 / duration.max(1e-9);
    let mb = bytes as f64 / duration.max(1e-9) / (1024.0 * 1024.0);
    let cpu_per_record = (sent > 0).then(|| (cpu_user + cpu_sys) * 1e6 / sent as f64);
    let q = |h: &Histogram<u64>, q: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        }
    };
    let fields = json!({
        "environment": crate::result::Environment::here(),
        "start_time": start,
        "end_time": end,
        "duration_s": duration,
        "records_sent": sent,
        "records_acked": acked,
        "records_failed": failed,
        "records_unsent": sum(&done, "records_unsent"),
        "bytes_acked": bytes,
        "records_per_sec": rate,
        "mb_per_sec": mb,
        "client_cpu_us_per_record": cpu_per_record,
        "client_cpu_user_s": cpu_user,
        "client_cpu_sys_s": cpu_sys,
        "peak_rss_kib": done.iter().filter_map(|p| p.result.as_ref()).map(|d| num(d, "peak_rss_kib")).max(),
        "latency": summary(&latency),
        "service_time": summary(&service),
        "publish_delay": summary(&delay),
        "saturation": saturation(&done),
        "errors": merged_errors(&done),
        "aborted": done.iter().find_map(|p| p.result.as_ref()?.get("aborted")?.as_str().map(|a| format!("agent {}: {a}", p.agent))),
        "produce_requests": sum(&done, "produce_requests"),
        "record_batches": sum(&done, "record_batches"),
        "cluster": merged_cluster(&done),
        "protocol_anomalies": merged_map(&done, "protocol_anomalies"),
        "frames_written": sum(&done, "frames_written"),
        "socket_writes": sum(&done, "socket_writes"),
        "intervals": merged_intervals(&done),
        "repetitions": [{
            "duration_s": duration,
            "records_acked": acked,
            "records_failed": failed,
            "records_per_sec": rate,
            "mb_per_sec": mb,
            "client_cpu_us_per_record": cpu_per_record,
            "latency_p50_us": q(&latency, 0.5),
            "latency_p99_us": q(&latency, 0.99),
        }],
        "distributed": distributed_block(parts, |p| {
            let d = p.result.as_ref();
            json!({
                "records_sent": d.map(|d| num(d, "records_sent")),
                "records_acked": d.map(|d| num(d, "records_acked")),
                "records_failed": d.map(|d| num(d, "records_failed")),
                "records_per_sec": d.map(|d| float(d, "records_per_sec")),
                "latency": brief(d, "latency"),
                "seed": d.and_then(|d| d.get("seed")).cloned(),
            })
        }),
    });
    overlay(&mut doc, fields);
    Ok(doc)
}

/// The agents' `intervals`, window by window (the agents start together and tick at the same
/// interval): whole-number counters summed, rates recomputed; the per-window percentiles are each
/// agent's own (in its document) and not repeated here, where they could only be approximated.
fn merged_intervals(parts: &[&AgentPart]) -> Value {
    let lists: Vec<&Vec<Value>> = parts
        .iter()
        .filter_map(|p| p.result.as_ref()?.get("intervals")?.as_array())
        .collect();
    let len = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let windows: Vec<&Value> = lists.iter().filter_map(|l| l.get(i)).collect();
        let mut merged = serde_json::Map::new();
        let first = windows[0];
        merged.insert("t_s".into(), first["t_s"].clone());
        let duration = windows
            .iter()
            .filter_map(|w| w["duration_s"].as_f64())
            .fold(0.0, f64::max);
        merged.insert("duration_s".into(), json!(duration));
        for (k, v) in first.as_object().into_iter().flatten() {
            if v.is_u64() && k != "t_s" {
                let total: u64 = windows.iter().filter_map(|w| w[k].as_u64()).sum();
                merged.insert(k.clone(), json!(total));
                let secs = duration.max(1e-9);
                if k == "bytes" {
                    merged.insert("mb_per_sec".into(), json!(total as f64 / secs / 1048576.0));
                } else if first.get(format!("{k}_per_sec")).is_some() {
                    merged.insert(format!("{k}_per_sec"), json!(total as f64 / secs));
                }
            }
        }
        merged.insert("agents".into(), json!(windows.len()));
        out.push(Value::Object(merged));
    }
    Value::Array(out)
}

/// Why there is nothing to merge: every agent's reason.
fn no_result(parts: &[AgentPart]) -> String {
    let why: Vec<String> = parts
        .iter()
        .map(|p| format!("{}: {}", p.agent, p.lost.as_deref().unwrap_or("no result")))
        .collect();
    format!("no agent returned a result ({})", why.join("; "))
}

/// Write every field of `fields` over `doc`.
fn overlay(doc: &mut Value, fields: Value) {
    if let (Some(map), Value::Object(fields)) = (doc.as_object_mut(), fields) {
        map.extend(fields);
    }
}

/// An e2e run's parts → one result document: the producer side (counts, request durations, publish
/// delay) from the producer agents, merged exactly; the consumer side (reads, duplicates, whole
/// trip, already corrected for each producer agent's clock) from the consumer's agent; lost and
/// unexpected records counted per producer agent by the consumer against what that agent
/// acknowledged.
pub fn merge_e2e(consumer: &AgentPart, producers: &[AgentPart]) -> Result<Value, String> {
    let done: Vec<&AgentPart> = producers.iter().filter(|p| p.result.is_some()).collect();
    // Without the consumer's result, the producers' figures still stand (degraded): the consumer
    // side is unknown, said as null, never as zero.
    let consumer_lost = consumer.result.is_none();
    let mut doc = match (&consumer.result, done.first()) {
        (Some(d), _) => d.clone(),
        (None, Some(p)) => {
            let mut d = p.result.clone().unwrap_or(Value::Null);
            for f in [
                "records_consumed",
                "records_lost",
                "records_unverified",
                "records_late",
                "records_duplicated",
                "records_unexpected",
                "records_foreign",
                "records_untracked",
                "whole_trip",
                "fetch_duration",
                "consumer_processing",
                "member_id",
                "drained",
            ] {
                d[f] = Value::Null;
            }
            d
        }
        (None, None) => {
            let mut all = vec![consumer.clone()];
            all.extend(producers.iter().cloned());
            return Err(no_result(&all));
        }
    };
    let request = merged(&done, "producer_request_duration")?;
    let delay = merged(&done, "publish_delay")?;
    let acked = sum(&done, "records_acked");
    let duration = longest(&done, "duration_s");
    let (start, end) = span(&done);
    let mut all = vec![consumer.clone()];
    all.extend(producers.iter().cloned());
    let every: Vec<&AgentPart> = all.iter().collect();
    let segments = doc.get("segments").cloned().unwrap_or(Value::Null);
    let fields = json!({
        "environment": crate::result::Environment::here(),
        "start_time": start,
        "end_time": end,
        "duration_s": duration,
        "records_produced": sum(&done, "records_produced"),
        "records_acked": acked,
        "records_failed": sum(&done, "records_failed"),
        "records_per_sec": acked as f64 / duration.max(1e-9),
        "produce_requests": sum(&done, "produce_requests"),
        "schedule_slips": sum(&done, "schedule_slips"),
        "cluster_slips": sum(&done, "cluster_slips"),
        "cluster": merged_cluster(&done),
        "consumer_cluster": merged_cluster_at(&every, "consumer_cluster"),
        "protocol_anomalies": merged_map(&every, "protocol_anomalies"),
        "client_cpu_user_s": fsum(&every, "client_cpu_user_s"),
        "client_cpu_sys_s": fsum(&every, "client_cpu_sys_s"),
        "peak_rss_kib": every.iter().filter_map(|p| p.result.as_ref()).map(|d| num(d, "peak_rss_kib")).max(),
        "intervals": merged_intervals(&every),
        "producer_request_duration": summary(&request),
        "publish_delay": summary(&delay),
        "saturation": saturation(&every),
        "errors": merged_errors(&every),
        "aborted": every.iter().find_map(|p| p.result.as_ref()?.get("aborted")?.as_str().map(|a| format!("agent {}: {a}", p.agent))),
        "distributed": distributed_block(&all, |p| {
            let d = p.result.as_ref();
            if p.role == "consumer" && consumer_lost {
                json!({ "note": "the consumer's agent was lost: nothing is known of what was read" })
            } else if p.role == "consumer" {
                json!({
                    "records_consumed": d.map(|d| num(d, "records_consumed")),
                    "whole_trip": brief(d, "whole_trip"),
                    "segments": segments,
                })
            } else {
                json!({
                    "records_produced": d.map(|d| num(d, "records_produced")),
                    "records_acked": d.map(|d| num(d, "records_acked")),
                    "records_failed": d.map(|d| num(d, "records_failed")),
                    "producer_request_duration": brief(d, "producer_request_duration"),
                })
            }
        }),
    });
    overlay(&mut doc, fields);
    let mut settings = doc.get("settings").cloned().unwrap_or(Value::Null);
    if let Some(map) = settings.as_object_mut() {
        map.insert("mode".into(), json!("CONSUMER_AND_PRODUCERS"));
        let producers: u64 = done
            .iter()
            .filter_map(|p| p.result.as_ref()?.pointer("/settings/producers")?.as_u64())
            .sum();
        map.insert("producers".into(), json!(producers));
    }
    overlay(&mut doc, json!({ "settings": settings }));
    Ok(doc)
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
    }

    fn part(agent: &str, values: &[u64], acked: u64) -> AgentPart {
        let mut h = latency_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        let s = serde_json::to_value(LatencySummary::of(&h)).unwrap();
        AgentPart {
            agent: agent.into(),
            role: "produce",
            clock_before: None,
            clock_after: None,
            result: Some(json!({
                "kind": "produce", "records_sent": acked, "records_acked": acked,
                "records_failed": 0, "bytes_acked": acked * 100, "duration_s": 1.0,
                "latency": s, "service_time": s, "publish_delay": s, "errors": {"x": 1},
            })),
            lost: None,
            last_live: Value::Null,
        }
    }

    fn e2e_part(agent: &str, role: &'static str, fields: Value) -> AgentPart {
        let s = serde_json::to_value(LatencySummary::of(&latency_histogram())).unwrap();
        let mut doc = json!({
            "kind": "e2e", "producer_request_duration": s, "publish_delay": s, "whole_trip": s,
            "settings": {"producers": 2},
        });
        overlay(&mut doc, fields);
        AgentPart {
            agent: agent.into(),
            role,
            clock_before: None,
            clock_after: None,
            result: Some(doc),
            lost: None,
            last_live: Value::Null,
        }
    }

    #[test]
    fn an_e2e_run_without_its_consumer_keeps_the_producers_figures() {
        let mut consumer = e2e_part("c", "consumer", json!({}));
        consumer.result = None;
        consumer.lost = Some("no answer for 5 s".into());
        let p1 = e2e_part(
            "p1",
            "producer",
            json!({"records_acked": 10, "records_consumed": 0}),
        );
        let p2 = e2e_part("p2", "producer", json!({"records_acked": 5}));
        let doc = merge_e2e(&consumer, &[p1, p2]).unwrap();
        assert_eq!(doc["records_acked"], 15);
        assert_eq!(doc["records_consumed"], Value::Null, "unknown, not zero");
        assert_eq!(doc["whole_trip"], Value::Null);
        assert_eq!(doc["settings"]["producers"], 4);
        assert_eq!(doc["distributed"]["lost_agents"], json!(["c"]));
    }

    #[test]
    fn produce_results_merge_exactly_and_a_lost_agent_is_named() {
        let a = part("a", &[10, 20, 30], 3);
        let b = part("b", &[1_000, 2_000], 2);
        let mut c = part("c", &[], 0);
        c.result = None;
        c.lost = Some("no answer".into());
        let doc = merge_produce(&[a, b, c]).unwrap();
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
        let mut none = part("e", &[], 0);
        none.result = None;
        none.lost = Some("segment failed: cannot connect".into());
        let e = merge_produce(&[none]).unwrap_err();
        assert!(e.contains("e: segment failed: cannot connect"), "{e}");
        let mut broken = part("d", &[1], 1);
        broken.result.as_mut().unwrap()["latency"]["histogram"] = json!("not base64!");
        assert!(merge_produce(&[broken]).unwrap_err().contains("agent d"));
    }
}
