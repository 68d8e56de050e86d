//! OMB's own figures under OMB's own names: the periodic and aggregated log lines of its
//! `WorkloadGenerator`, and its `TestResult` JSON (what OMB's chart scripts read), beside kbench's
//! result document for the same run.
//!
//! Units are OMB's: publish and end-to-end latency in ms, publish delay in µs. kbench's publish
//! latency counts from each record's *intended* send time (coordinated omission corrected), so
//! under a rate the client cannot sustain it includes the publish delay; OMB's counts from the
//! `send()` call.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use crate::cluster::ClusterReport;
use crate::measure::LatencySummary;
use crate::omb::{OmbRun, OmbSpec, Period};
use crate::produce::phase::Saturation;
use crate::result::{Header, Kind, Target, rfc3339};
use serde::Serialize;

fn q(h: &Histogram<u64>, quantile: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(quantile)
    }
}

fn mean(h: &Histogram<u64>) -> f64 {
    if h.is_empty() { 0.0 } else { h.mean() }
}

/// OMB's one decimal.
fn d1(x: f64) -> String {
    format!("{x:.1}")
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// OMB's periodic line.
pub fn period_line(p: &Period) -> String {
    let l = &p.publish_latency;
    let d = &p.publish_delay;
    let e = &p.end_to_end;
    format!(
        "{}Pub rate {} msg/s / {} MB/s | Pub err {} err/s | Cons rate {} msg/s / {} MB/s | Backlog: {} K | Pub Latency (ms) avg: {} - 50%: {} - 99%: {} - 99.9%: {} - Max: {} | Pub Delay Latency (us) avg: {} - 50%: {} - 99%: {} - 99.9%: {} - Max: {} | E2E Latency (ms) avg: {} - 50%: {} - 99%: {} - Max: {}",
        if p.warmup { "[warm-up] " } else { "" },
        d1(p.publish_rate),
        d1(p.publish_mb_per_sec),
        d1(p.publish_error_rate),
        d1(p.consume_rate),
        d1(p.consume_mb_per_sec),
        d1(p.backlog as f64 / 1000.0),
        d1(mean(l) / 1000.0),
        d1(ms(q(l, 0.5))),
        d1(ms(q(l, 0.99))),
        d1(ms(q(l, 0.999))),
        d1(ms(l.max())),
        d1(mean(d)),
        q(d, 0.5),
        q(d, 0.99),
        q(d, 0.999),
        d.max(),
        d1(mean(e) / 1000.0),
        d1(ms(q(e, 0.5))),
        d1(ms(q(e, 0.99))),
        d1(ms(e.max())),
    )
}

/// OMB's aggregated lines, for the measured phase.
pub fn aggregated_lines(run: &OmbRun) -> Vec<String> {
    aggregated_lines_of(
        &run.producers.latency,
        &run.producers.publish_delay,
        &run.end_to_end,
    )
}

/// OMB's aggregated lines of the measured phase's publish latency `l`, publish delay `d` and
/// end-to-end latency `e` (µs).
pub fn aggregated_lines_of(
    l: &Histogram<u64>,
    d: &Histogram<u64>,
    e: &Histogram<u64>,
) -> Vec<String> {
    vec![
        format!(
            "----- Aggregated Pub Latency (ms) avg: {} - 50%: {} - 95%: {} - 99%: {} - 99.9%: {} - 99.99%: {} - Max: {} | Pub Delay (us)  avg: {} - 50%: {} - 95%: {} - 99%: {} - 99.9%: {} - 99.99%: {} - Max: {}",
            d1(mean(l) / 1000.0),
            d1(ms(q(l, 0.5))),
            d1(ms(q(l, 0.95))),
            d1(ms(q(l, 0.99))),
            d1(ms(q(l, 0.999))),
            d1(ms(q(l, 0.9999))),
            d1(ms(l.max())),
            d1(mean(d)),
            q(d, 0.5),
            q(d, 0.95),
            q(d, 0.99),
            q(d, 0.999),
            q(d, 0.9999),
            d.max(),
        ),
        format!(
            "----- Aggregated E2E Latency (ms) avg: {} - 50%: {} - 95%: {} - 99%: {} - 99.9%: {} - 99.99%: {} - Max: {}",
            d1(mean(e) / 1000.0),
            d1(ms(q(e, 0.5))),
            d1(ms(q(e, 0.95))),
            d1(ms(q(e, 0.99))),
            d1(ms(q(e, 0.999))),
            d1(ms(q(e, 0.9999))),
            d1(ms(e.max())),
        ),
    ]
}

/// The OMB percentile fields of one histogram, named `{prefix}{Avg,50pct,…,Max}`; `scale` turns µs
/// into the field's unit; `whole` writes whole numbers (OMB's `long` publish delays).
fn percentile_fields(
    out: &mut serde_json::Map<String, Value>,
    prefix: &str,
    h: &Histogram<u64>,
    scale: f64,
    whole: bool,
) {
    let v = |us: u64| -> Value {
        if whole {
            json!(us)
        } else {
            json!(us as f64 / scale)
        }
    };
    out.insert(format!("{prefix}Avg"), json!(mean(h) / scale));
    for (name, quantile) in PERCENTILES {
        out.insert(format!("{prefix}{name}"), v(q(h, quantile)));
    }
    out.insert(format!("{prefix}Max"), v(h.max()));
}

const PERCENTILES: [(&str, f64); 7] = [
    ("50pct", 0.5),
    ("75pct", 0.75),
    ("95pct", 0.95),
    ("99pct", 0.99),
    ("999pct", 0.999),
    ("9999pct", 0.9999),
    ("99999pct", 0.99999),
];

/// A list per percentile field over the periods.
fn series(
    out: &mut serde_json::Map<String, Value>,
    prefix: &str,
    periods: &[&Histogram<u64>],
    scale: f64,
    whole: bool,
) {
    let mut columns: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for h in periods {
        let mut one = serde_json::Map::new();
        percentile_fields(&mut one, prefix, h, scale, whole);
        for (k, v) in one {
            columns.entry(k).or_default().push(v);
        }
    }
    if periods.is_empty() {
        let mut one = serde_json::Map::new();
        percentile_fields(
            &mut one,
            prefix,
            &crate::measure::latency_histogram(),
            scale,
            whole,
        );
        for k in one.keys() {
            columns.entry(k.clone()).or_default();
        }
    }
    for (k, v) in columns {
        out.insert(k, Value::Array(v));
    }
}

/// `percentile → value` as OMB writes its `aggregated…Quantiles` maps (HdrHistogram's percentile
/// iteration, 100 ticks per half distance).
fn quantiles(h: &Histogram<u64>, scale: f64, whole: bool) -> Value {
    let mut m = serde_json::Map::new();
    if !h.is_empty() {
        for v in h.iter_quantiles(100) {
            let key = format!("{:?}", v.percentile());
            let value = v.value_iterated_to();
            m.insert(
                key,
                if whole {
                    json!(value)
                } else {
                    json!(value as f64 / scale)
                },
            );
        }
    }
    Value::Object(m)
}

/// OMB's `TestResult` JSON for the measured phase.
pub fn omb_result(spec: &OmbSpec, run: &OmbRun) -> Value {
    omb_result_of(
        spec,
        &run.periods,
        &run.producers.latency,
        &run.producers.publish_delay,
        &run.end_to_end,
    )
}

/// OMB's `TestResult` JSON of `periods` and the measured phase's publish latency, publish delay
/// and end-to-end latency (µs).
pub fn omb_result_of(
    spec: &OmbSpec,
    periods: &[Period],
    latency: &Histogram<u64>,
    delay: &Histogram<u64>,
    e2e: &Histogram<u64>,
) -> Value {
    let w = &spec.workload;
    let mut out = serde_json::Map::new();
    out.insert("workload".into(), json!(w.name));
    out.insert("driver".into(), json!(spec.driver_name));
    out.insert("messageSize".into(), json!(spec.message_size()));
    out.insert("topics".into(), json!(w.topics));
    out.insert("partitions".into(), json!(w.partitions_per_topic));
    out.insert("producersPerTopic".into(), json!(w.producers_per_topic));
    out.insert(
        "consumersPerTopic".into(),
        json!(w.consumer_per_subscription),
    );
    let measured: Vec<&Period> = periods.iter().filter(|p| !p.warmup).collect();
    out.insert(
        "publishRate".into(),
        json!(measured.iter().map(|p| p.publish_rate).collect::<Vec<_>>()),
    );
    out.insert(
        "publishErrorRate".into(),
        json!(
            measured
                .iter()
                .map(|p| p.publish_error_rate)
                .collect::<Vec<_>>()
        ),
    );
    out.insert(
        "consumeRate".into(),
        json!(measured.iter().map(|p| p.consume_rate).collect::<Vec<_>>()),
    );
    out.insert(
        "backlog".into(),
        json!(measured.iter().map(|p| p.backlog).collect::<Vec<_>>()),
    );
    let lat: Vec<&Histogram<u64>> = measured.iter().map(|p| &p.publish_latency).collect();
    let delays: Vec<&Histogram<u64>> = measured.iter().map(|p| &p.publish_delay).collect();
    let e2es: Vec<&Histogram<u64>> = measured.iter().map(|p| &p.end_to_end).collect();
    series(&mut out, "publishLatency", &lat, 1000.0, false);
    series(&mut out, "publishDelayLatency", &delays, 1.0, true);
    series(&mut out, "endToEndLatency", &e2es, 1000.0, false);
    percentile_fields(&mut out, "aggregatedPublishLatency", latency, 1000.0, false);
    percentile_fields(&mut out, "aggregatedPublishDelayLatency", delay, 1.0, true);
    percentile_fields(&mut out, "aggregatedEndToEndLatency", e2e, 1000.0, false);
    out.insert(
        "aggregatedPublishLatencyQuantiles".into(),
        quantiles(latency, 1000.0, false),
    );
    out.insert(
        "aggregatedPublishDelayLatencyQuantiles".into(),
        quantiles(delay, 1.0, true),
    );
    out.insert(
        "aggregatedEndToEndLatencyQuantiles".into(),
        quantiles(e2e, 1000.0, false),
    );
    Value::Object(out)
}

/// kbench's result document for an OMB run (kind `omb`; docs/results.md).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct OmbResultDocument {
    #[serde(flatten)]
    pub header: Header,
    pub target: Target,
    /// The workload file, the workload as read, and the driver's settings (secrets removed).
    pub settings: Value,
    pub seed: u64,
    pub topics: Vec<String>,
    pub target_records_per_sec: Option<f64>,
    /// `producerRate: -1`: the rate search's chosen rate, whether it found the limit, its steps.
    pub max_rate: Option<Value>,
    pub negotiated_versions: BTreeMap<String, i16>,
    pub start_time: String,
    pub end_time: String,
    /// The producers' mean measured phase.
    pub duration_s: f64,
    pub records_sent: u64,
    pub records_acked: u64,
    pub records_failed: u64,
    pub records_unsent: u64,
    pub records_per_sec: f64,
    pub latency: LatencySummary,
    pub service_time: LatencySummary,
    pub publish_delay: LatencySummary,
    pub end_to_end: LatencySummary,
    pub saturation: Saturation,
    pub errors: BTreeMap<String, u64>,
    pub cluster: ClusterReport,
    pub consumer_cluster: ClusterReport,
    pub protocol_anomalies: BTreeMap<String, u64>,
    /// The warm-up phase's accounting, apart from the measured phase's.
    pub warmup: Option<Value>,
    /// What the consumers read: in all and per consumer.
    pub consumed: Value,
    pub backlog: Option<crate::omb::Backlog>,
    pub periods: Vec<Period>,
    pub client_errors: Vec<String>,
    pub aborted: Option<String>,
    /// A run over agents: each agent's part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::distributed::Distributed>,
}

/// kbench's result document for an OMB run.
pub fn kbench_result(
    spec: &OmbSpec,
    run: &OmbRun,
    target: Target,
    workload_file: &str,
) -> OmbResultDocument {
    let p = &run.producers;
    let mean_elapsed = p.elapsed.as_secs_f64() / (run.producer_count.max(1) as f64);
    OmbResultDocument {
        header: Header::new(Kind::Omb),
        target,
        settings: settings(spec, workload_file),
        seed: spec.seed,
        topics: run.topics.clone(),
        target_records_per_sec: run.rate,
        max_rate: run
            .search
            .as_ref()
            .map(|s| json!({"chosen": s.chosen, "limit_found": s.limit_found, "steps": s.steps})),
        negotiated_versions: run.negotiated.clone(),
        start_time: rfc3339(run.started_at),
        end_time: rfc3339(run.ended_at),
        duration_s: mean_elapsed,
        records_sent: p.records_sent,
        records_acked: p.records_acked,
        records_failed: p.records_failed,
        records_unsent: p.records_unsent,
        records_per_sec: p.records_acked as f64 / mean_elapsed.max(1e-9),
        latency: LatencySummary::of(&p.latency),
        service_time: LatencySummary::of(&p.service_time),
        publish_delay: LatencySummary::of(&p.publish_delay),
        end_to_end: LatencySummary::of(&run.end_to_end),
        saturation: p.saturation.clone(),
        errors: p.errors.clone(),
        cluster: p.cluster.clone(),
        consumer_cluster: run.consumer_cluster(),
        protocol_anomalies: p.protocol_anomalies.clone(),
        warmup: run.warmup.as_ref().map(|w| {
            json!({
                "records_sent": w.records_sent,
                "records_acked": w.records_acked,
                "records_failed": w.records_failed,
                "records_unsent": w.records_unsent,
            })
        }),
        consumed: consumed(run),
        backlog: run.backlog.clone(),
        periods: run.periods.clone(),
        client_errors: run.errors.clone(),
        aborted: run.aborted.clone(),
        distributed: None,
    }
}

/// The `consumed` block: what the consumers read, in all and per consumer.
fn consumed(run: &OmbRun) -> Value {
    let consumed_bytes: u64 = run.consumers.iter().map(|c| c.bytes).sum();
    // With a registry in the driver's consumer settings, each consumer decoded what it read.
    let decoding = run
        .consumers
        .iter()
        .filter_map(|c| c.value_decoding.as_ref())
        .fold(
            None,
            |all: Option<crate::schema::decode::DecodeReport>, d| {
                Some(match all {
                    Some(mut all) => {
                        all.merge(d);
                        all
                    }
                    None => d.clone(),
                })
            },
        );
    json!({
        "records": run.consumed,
        "bytes": consumed_bytes,
        "value_decoding": decoding,
        "expected_records": run.expected_consumed,
        "consumers": run.consumers.len(),
        "per_consumer": run.consumers.iter().map(|c| json!({
            "member_id": c.member_id,
            "records": c.records,
            "fetches": c.fetches,
            "empty_fetches": c.empty_fetches,
            "rebalance_time_ms": c.join.as_millis() as u64,
            "fetch_latency": LatencySummary::of(&c.fetch_latency),
            "errors": c.errors,
        })).collect::<Vec<_>>(),
    })
}

/// The `settings` block: the workload file, the workload as read, and the driver's settings.
pub fn settings(spec: &OmbSpec, workload_file: &str) -> Value {
    let secret =
        |props: &[(String, String)]| -> BTreeMap<String, String> { kbench_client::redacted(props) };
    json!({
        "workload_file": workload_file,
        "workload": {
            "name": spec.workload.name,
            "topics": spec.workload.topics,
            "partitionsPerTopic": spec.workload.partitions_per_topic,
            "messageSize": spec.workload.message_size,
            "messageSizeDistribution": spec.workload.size_distribution().map(|d| d.buckets().to_vec()),
            "payloadFile": spec.workload.payload_file,
            "useRandomizedPayloads": spec.workload.use_randomized_payloads,
            "randomBytesRatio": spec.workload.random_bytes_ratio,
            "randomizedPayloadPoolSize": spec.workload.randomized_payload_pool_size,
            "subscriptionsPerTopic": spec.workload.subscriptions_per_topic,
            "producersPerTopic": spec.workload.producers_per_topic,
            "consumerPerSubscription": spec.workload.consumer_per_subscription,
            "producerRate": spec.workload.producer_rate,
            "consumerBacklogSizeGB": spec.workload.consumer_backlog_size_gb,
            "backlogDrainRatio": spec.workload.backlog_drain_ratio,
            "keyDistributor": spec.workload.key_distributor.name(),
            "testDurationMinutes": spec.workload.test_duration_minutes,
            "warmupDurationMinutes": spec.workload.warmup_duration_minutes,
        },
        "driver": spec.driver_name,
        "replication_factor": spec.replication_factor,
        "producer_properties": secret(&spec.producer_properties),
        "consumer_properties": secret(&spec.consumer_properties),
        "not_applied": spec.not_applied,
        "topic_config": secret(&spec.topic_configs),
        "keys": spec.keys.describe(),
        "acks": spec.producer.producer.acks.name(),
        "compression": spec.producer.producer.compression.name(),
        "batch_size": spec.producer.producer.batch_size,
        "linger_ms": spec.producer.producer.linger.as_millis() as u64,
        "warmup_s": spec.warmup.as_secs_f64(),
        "test_duration_s": spec.test_duration.as_secs_f64(),
        "reporting_interval_s": spec.reporting_interval.as_secs_f64(),
        "value_schema": spec.value_schema,
    })
}
