//! What a result document holds that can be compared across runs: its **cells** (the settings
//! that make two runs the same benchmark, as a readable label) and, per cell, each metric's
//! samples with the direction that is better. `kbench compare` matches cells of two documents;
//! the results store (`crate::history`) keeps the same cells and samples run after run. A run's
//! repetitions are its samples; a run without repetitions gives one sample per metric.

use std::collections::BTreeMap;

use super::Better;
use crate::consume::ConsumeResultDocument;
use crate::measure::LatencySummary;
use crate::omb::report::OmbResultDocument;
use crate::result::{E2eResultDocument, Kind, Repetition};

/// The cells and metrics of one result document: cell key → metric → (direction, samples).
pub type Cells = BTreeMap<String, BTreeMap<String, (Better, Vec<f64>)>>;

/// A result document that cannot be compared: what is missing from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("{kind} document: {error}")]
    Shape { kind: Kind, error: String },
    #[error("a {0} document holds no runs' figures to compare")]
    Unsupported(Kind),
}

/// What compare reads of a produce document: its settings (the cell) and its repetitions.
#[derive(Debug, serde::Deserialize)]
struct ProduceSamples {
    settings: serde_json::Value,
    repetitions: Vec<Repetition>,
}

/// What compare reads of a codec document: each cell's label and per-repetition ns/record.
#[derive(Debug, serde::Deserialize)]
struct CodecSamples {
    cells: Vec<CodecCell>,
}

#[derive(Debug, serde::Deserialize)]
struct CodecCell {
    label: String,
    #[serde(default)]
    skipped: Option<serde_json::Value>,
    #[serde(default)]
    ns_per_record_reps: Vec<f64>,
}

/// What compare reads of a sweep document: each cell's label and its repetitions' figures.
#[derive(Debug, serde::Deserialize)]
struct SweepSamples {
    cells: Vec<SweepCell>,
}

#[derive(Debug, serde::Deserialize)]
struct SweepCell {
    label: String,
    #[serde(default)]
    reps: Vec<SweepRep>,
}

#[derive(Debug, serde::Deserialize)]
struct SweepRep {
    cpu_us_per_msg: Option<f64>,
    msgs_per_sec: Option<f64>,
}

/// Read the comparable samples out of a result document of `kind`, as the gate
/// ([`crate::document::check`]) let it through.
pub fn cells_of(kind: Kind, doc: &serde_json::Value) -> Result<Cells, DocumentError> {
    fn read<T: serde::de::DeserializeOwned>(
        kind: Kind,
        doc: &serde_json::Value,
    ) -> Result<T, DocumentError> {
        T::deserialize(doc).map_err(|e| DocumentError::Shape {
            kind,
            error: e.to_string(),
        })
    }
    let mut cells = Cells::new();
    match kind {
        Kind::Produce => {
            let doc: ProduceSamples = read(kind, doc)?;
            let m = cells.entry(produce_cell(&doc.settings)).or_default();
            let reps = &doc.repetitions;
            m.insert(
                "records_per_sec".into(),
                (
                    Better::Higher,
                    reps.iter().map(|r| r.records_per_sec).collect(),
                ),
            );
            m.insert(
                "client_cpu_us_per_record".into(),
                (
                    Better::Lower,
                    reps.iter()
                        .filter_map(|r| r.client_cpu_us_per_record)
                        .collect(),
                ),
            );
            m.insert(
                "latency_p99_us".into(),
                (
                    Better::Lower,
                    reps.iter().map(|r| r.latency_p99_us as f64).collect(),
                ),
            );
            m.insert(
                "mb_per_sec".into(),
                (Better::Higher, reps.iter().map(|r| r.mb_per_sec).collect()),
            );
            m.insert(
                "latency_p50_us".into(),
                (
                    Better::Lower,
                    reps.iter().map(|r| r.latency_p50_us as f64).collect(),
                ),
            );
            m.insert(
                "records_failed".into(),
                (
                    Better::Lower,
                    reps.iter().map(|r| r.records_failed as f64).collect(),
                ),
            );
        }
        Kind::Codec => {
            let doc: CodecSamples = read(kind, doc)?;
            for c in doc
                .cells
                .into_iter()
                .filter(|c| c.skipped.as_ref().is_none_or(|s| s.is_null()))
            {
                cells
                    .entry(format!("codec {}", c.label))
                    .or_default()
                    .insert(
                        "ns_per_record".into(),
                        (Better::Lower, c.ns_per_record_reps),
                    );
            }
        }
        Kind::Sweep => {
            let doc: SweepSamples = read(kind, doc)?;
            for c in doc.cells {
                let m = cells.entry(format!("sweep {}", c.label)).or_default();
                m.insert(
                    "cpu_us_per_msg".into(),
                    (
                        Better::Lower,
                        c.reps.iter().filter_map(|r| r.cpu_us_per_msg).collect(),
                    ),
                );
                m.insert(
                    "msgs_per_sec".into(),
                    (
                        Better::Higher,
                        c.reps.iter().filter_map(|r| r.msgs_per_sec).collect(),
                    ),
                );
            }
        }
        Kind::Consume => consume_cells(&mut cells, &read(kind, doc)?),
        Kind::E2e => e2e_cells(&mut cells, &read(kind, doc)?),
        Kind::Omb => omb_cells(&mut cells, &read(kind, doc)?),
        other => return Err(DocumentError::Unsupported(other)),
    }
    Ok(cells)
}

/// A produce document's cell: the settings that make two runs the same benchmark.
fn produce_cell(s: &serde_json::Value) -> String {
    format!(
        "produce compression={} acks={} record_size={}{} batch_size={} linger_ms={} throughput={} partitions={}",
        s["compression"].as_str().unwrap_or("?"),
        s["acks"].as_str().unwrap_or("?"),
        s["record_size"],
        // A monotonic payload is a payload of its own (absent or false: the key is as before).
        if s["payload_monotonic"] == true {
            " payload=monotonic"
        } else {
            ""
        },
        s["batch_size"],
        s["linger_ms"],
        s["throughput"],
        s["partitions"],
    )
}

/// One sample of a metric.
fn one(m: &mut BTreeMap<String, (Better, Vec<f64>)>, name: &str, better: Better, value: f64) {
    if value.is_finite() {
        m.insert(name.into(), (better, vec![value]));
    }
}

/// A latency summary's p50, p99 and p99.9 as metrics `{name}_p50_us`…, when it has samples.
fn percentiles(m: &mut BTreeMap<String, (Better, Vec<f64>)>, name: &str, l: &LatencySummary) {
    if l.count == 0 {
        return;
    }
    for (q, v) in [("p50", l.p50), ("p99", l.p99), ("p99_9", l.p99_9)] {
        one(m, &format!("{name}_{q}_us"), Better::Lower, v as f64);
    }
}

/// `kind key=value …` for those of `keys` the settings hold (a dotted key reads a nested one).
fn label(kind: &str, settings: &serde_json::Value, keys: &[&str]) -> String {
    let mut out = kind.to_string();
    for key in keys {
        let v = key.split('.').fold(settings, |v, k| &v[k]);
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!(
            " {}={text}",
            key.rsplit('.').next().unwrap_or(key)
        ));
    }
    out
}

/// Errors met, summed over their kinds.
fn errors(e: &BTreeMap<String, u64>) -> f64 {
    e.values().sum::<u64>() as f64
}

fn consume_cells(cells: &mut Cells, d: &ConsumeResultDocument) {
    let keys = [
        "mode",
        "messages",
        "fetch_size",
        "fetch_max_bytes",
        "fetch_max_wait_ms",
        "isolation_level",
    ];
    let m = cells
        .entry(label("consume", &d.settings, &keys))
        .or_default();
    one(m, "records_per_sec", Better::Higher, d.records_per_sec);
    one(m, "mb_per_sec", Better::Higher, d.mb_per_sec);
    if let Some(cpu) = d.client_cpu_us_per_record {
        one(m, "client_cpu_us_per_record", Better::Lower, cpu);
    }
    percentiles(m, "fetch_latency", &d.fetch_latency);
    one(m, "errors", Better::Lower, errors(&d.errors));
}

fn e2e_cells(cells: &mut Cells, d: &E2eResultDocument) {
    let keys = [
        "mode",
        "via",
        "producers",
        "partitions",
        "payload_size",
        "messages_per_batch",
        "batch_interval_ms",
        "acks",
        "compression",
        "max_in_flight",
        "duration_s",
        "rest_proxy.format",
        "rest_proxy.api",
    ];
    let m = cells.entry(label("e2e", &d.settings, &keys)).or_default();
    one(m, "records_per_sec", Better::Higher, d.records_per_sec);
    if d.records_acked > 0 {
        let cpu = (d.client_cpu_user_s + d.client_cpu_sys_s) * 1e6 / d.records_acked as f64;
        one(m, "client_cpu_us_per_record", Better::Lower, cpu);
    }
    one(m, "records_failed", Better::Lower, d.records_failed as f64);
    if let Some(c) = &d.consumer {
        percentiles(m, "whole_trip", &c.whole_trip);
        one(m, "records_lost", Better::Lower, c.records_lost as f64);
    }
    one(m, "errors", Better::Lower, errors(&d.errors));
}

fn omb_cells(cells: &mut Cells, d: &OmbResultDocument) {
    let keys = [
        "workload.name",
        "workload.topics",
        "workload.partitionsPerTopic",
        "workload.messageSize",
        "workload.producersPerTopic",
        "workload.subscriptionsPerTopic",
        "workload.consumerPerSubscription",
        "workload.producerRate",
        "driver",
        "acks",
        "compression",
        "batch_size",
        "linger_ms",
    ];
    let m = cells.entry(label("omb", &d.settings, &keys)).or_default();
    one(m, "records_per_sec", Better::Higher, d.records_per_sec);
    percentiles(m, "latency", &d.latency);
    percentiles(m, "end_to_end", &d.end_to_end);
    one(m, "records_failed", Better::Lower, d.records_failed as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_cells_compare_cpu_and_throughput() {
        let doc = serde_json::json!({"kind": "sweep", "cells": [{
            "label": "fetch max_bytes=1MiB v17",
            "reps": [{"cpu_us_per_msg": 0.1, "msgs_per_sec": 10.0}, {"cpu_us_per_msg": 0.2, "msgs_per_sec": 20.0}],
        }]});
        let cells = cells_of(Kind::Sweep, &doc).unwrap();
        let m = &cells["sweep fetch max_bytes=1MiB v17"];
        assert_eq!(m["cpu_us_per_msg"], (Better::Lower, vec![0.1, 0.2]));
        assert_eq!(m["msgs_per_sec"], (Better::Higher, vec![10.0, 20.0]));
    }

    #[test]
    fn labels_name_the_settings_present_and_read_nested_ones() {
        let s = serde_json::json!({"mode": "group", "messages": 10, "workload": {"name": "w"}, "x": null});
        assert_eq!(
            label(
                "k",
                &s,
                &["mode", "messages", "x", "absent", "workload.name"]
            ),
            "k mode=group messages=10 name=w"
        );
    }
}
