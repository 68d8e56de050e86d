//! The runs a report shows (produce, consume, e2e, omb), read as the types their documents are
//! written from: one view of what every kind has (its span, its counts, its latency summaries, its
//! timeline, what the cluster did, its method), each kind saying which of its fields fill it.

use std::collections::BTreeMap;

use kbench_bench::Kind;
use kbench_bench::cluster::ClusterReport;
use kbench_bench::consume::ConsumeResultDocument;
use kbench_bench::distributed::Distributed;
use kbench_bench::fault::AppliedFault;
use kbench_bench::measure::LatencySummary;
use kbench_bench::omb::report::OmbResultDocument;
use kbench_bench::produce::phase::Saturation;
use kbench_bench::result::{E2eResultDocument, Environment, ResultDocument};
use kbench_bench::timeline::Interval;
use serde::Deserialize as _;
use serde_json::Value;

/// A run's document, as its type.
pub(super) enum Run {
    Produce(Box<ResultDocument>),
    Consume(Box<ConsumeResultDocument>),
    E2e(Box<E2eResultDocument>),
    Omb(Box<OmbResultDocument>),
}

/// A figure of the accounting table: a count, a rate, or unknown (`–`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cell {
    Count(u64),
    Rate(f64),
    Unknown,
}

impl Cell {
    pub(super) fn rate(r: Option<f64>) -> Cell {
        r.map_or(Cell::Unknown, Cell::Rate)
    }

    pub(super) fn text(self) -> String {
        match self {
            Cell::Count(n) => n.to_string(),
            Cell::Rate(f) if f.abs() >= 100.0 => format!("{f:.0}"),
            Cell::Rate(f) => format!("{f:.3}"),
            Cell::Unknown => "–".into(),
        }
    }
}

/// What a front end appends to a run's document after the run (`--fault`'s `faults`).
#[derive(Debug, Default, serde::Deserialize)]
struct Appended {
    #[serde(default)]
    faults: Vec<AppliedFault>,
}

impl Run {
    /// The run in `value`, whose kind the gate read.
    pub(super) fn read(kind: Kind, value: &Value) -> Result<Run, String> {
        use kbench_bench::document::read_as;
        let e = |e: kbench_bench::document::DocumentError| e.to_string();
        Ok(match kind {
            Kind::Produce => Run::Produce(read_as(value, kind).map_err(e)?),
            Kind::Consume => Run::Consume(read_as(value, kind).map_err(e)?),
            Kind::E2e => Run::E2e(read_as(value, kind).map_err(e)?),
            Kind::Omb => Run::Omb(read_as(value, kind).map_err(e)?),
            Kind::Codec | Kind::Sweep | Kind::Compare => {
                return Err(format!("a {kind} document is not a run"));
            }
        })
    }

    /// The faults applied during the run, as its front end appended them.
    pub(super) fn faults(value: &Value) -> Vec<AppliedFault> {
        Appended::deserialize(value)
            .map(|a| a.faults)
            .unwrap_or_default()
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            Run::Produce(_) => Kind::Produce,
            Run::Consume(_) => Kind::Consume,
            Run::E2e(_) => Kind::E2e,
            Run::Omb(_) => Kind::Omb,
        }
    }

    pub(super) fn start_time(&self) -> &str {
        match self {
            Run::Produce(d) => &d.start_time,
            Run::Consume(d) => &d.start_time,
            Run::E2e(d) => &d.start_time,
            Run::Omb(d) => &d.start_time,
        }
    }

    pub(super) fn end_time(&self) -> &str {
        match self {
            Run::Produce(d) => &d.end_time,
            Run::Consume(d) => &d.end_time,
            Run::E2e(d) => &d.end_time,
            Run::Omb(d) => &d.end_time,
        }
    }

    pub(super) fn duration_s(&self) -> f64 {
        match self {
            Run::Produce(d) => d.duration_s,
            Run::Consume(d) => d.duration_s,
            Run::E2e(d) => d.duration_s,
            Run::Omb(d) => d.duration_s,
        }
    }

    pub(super) fn records_per_sec(&self) -> f64 {
        match self {
            Run::Produce(d) => d.records_per_sec,
            Run::Consume(d) => d.records_per_sec,
            Run::E2e(d) => d.records_per_sec,
            Run::Omb(d) => d.records_per_sec,
        }
    }

    /// MB/s, where the kind measures it.
    pub(super) fn mb_per_sec(&self) -> Option<f64> {
        match self {
            Run::Produce(d) => Some(d.mb_per_sec),
            Run::Consume(d) => Some(d.mb_per_sec),
            Run::E2e(_) | Run::Omb(_) => None,
        }
    }

    pub(super) fn bootstrap_servers(&self) -> &str {
        match self {
            Run::Produce(d) => &d.target.bootstrap_servers,
            Run::Consume(d) => &d.target.bootstrap_servers,
            Run::E2e(d) => &d.target.bootstrap_servers,
            Run::Omb(d) => &d.target.bootstrap_servers,
        }
    }

    /// Every latency summary of the run, by field name, in the document's order.
    pub(super) fn summaries(&self) -> Vec<(&'static str, &LatencySummary)> {
        match self {
            Run::Produce(d) => vec![
                ("latency", &d.latency),
                ("service_time", &d.service_time),
                ("publish_delay", &d.publish_delay),
            ],
            Run::Consume(d) => vec![("fetch_latency", &d.fetch_latency)],
            Run::E2e(d) => {
                let mut all = vec![
                    ("producer_request_duration", &d.producer_request_duration),
                    ("publish_delay", &d.publish_delay),
                ];
                if let Some(c) = &d.consumer {
                    all.extend([
                        ("whole_trip", &c.whole_trip),
                        ("fetch_duration", &c.fetch_duration),
                        ("consumer_processing", &c.consumer_processing),
                    ]);
                }
                all
            }
            Run::Omb(d) => vec![
                ("latency", &d.latency),
                ("service_time", &d.service_time),
                ("publish_delay", &d.publish_delay),
                ("end_to_end", &d.end_to_end),
            ],
        }
    }

    pub(super) fn intervals(&self) -> &[Interval] {
        match self {
            Run::Produce(d) => &d.intervals,
            Run::Consume(d) => &d.intervals,
            Run::E2e(d) => &d.intervals,
            Run::Omb(_) => &[],
        }
    }

    /// OMB's own periods (its 10 s lines): when, publish rate, consume rate.
    pub(super) fn periods(&self) -> Vec<(f64, f64, f64)> {
        match self {
            Run::Omb(d) => d
                .periods
                .iter()
                .map(|p| (p.at_s, p.publish_rate, p.consume_rate))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// What the cluster did, as the run's producers (or its consumer) saw it.
    pub(super) fn cluster(&self) -> &ClusterReport {
        match self {
            Run::Produce(d) => &d.cluster,
            Run::Consume(d) => &d.cluster,
            Run::E2e(d) => &d.cluster,
            Run::Omb(d) => &d.cluster,
        }
    }

    /// The accounting table's rows, each figure the kind has.
    pub(super) fn counts(&self) -> Vec<(&'static str, Cell)> {
        use Cell::{Count, Rate};
        match self {
            Run::Produce(d) => vec![
                ("records_sent", Count(d.records_sent)),
                ("records_acked", Count(d.records_acked)),
                ("records_failed", Count(d.records_failed)),
                ("bytes_acked", Count(d.bytes_acked)),
                ("records_per_sec", Rate(d.records_per_sec)),
                ("mb_per_sec", Rate(d.mb_per_sec)),
                (
                    "client_cpu_us_per_record",
                    Cell::rate(d.client_cpu_us_per_record),
                ),
                ("peak_rss_kib", Count(d.peak_rss_kib)),
            ],
            Run::Consume(d) => vec![
                ("records_consumed", Count(d.records_consumed)),
                ("records_per_sec", Rate(d.records_per_sec)),
                ("mb_per_sec", Rate(d.mb_per_sec)),
                (
                    "client_cpu_us_per_record",
                    Cell::rate(d.client_cpu_us_per_record),
                ),
                ("peak_rss_kib", Count(d.peak_rss_kib)),
            ],
            Run::E2e(d) => {
                let mut rows = vec![
                    ("records_produced", Count(d.records_produced)),
                    ("records_acked", Count(d.records_acked)),
                    ("records_failed", Count(d.records_failed)),
                ];
                if let Some(c) = &d.consumer {
                    rows.extend([
                        ("records_consumed", Count(c.records_consumed)),
                        ("records_lost", Count(c.records_lost)),
                        ("records_late", Count(c.records_late)),
                        ("records_duplicated", Count(c.records_duplicated)),
                        ("records_unexpected", Count(c.records_unexpected)),
                    ]);
                }
                rows.extend([
                    ("records_per_sec", Rate(d.records_per_sec)),
                    ("peak_rss_kib", Count(d.peak_rss_kib)),
                ]);
                rows
            }
            Run::Omb(d) => vec![
                ("records_sent", Count(d.records_sent)),
                ("records_acked", Count(d.records_acked)),
                ("records_failed", Count(d.records_failed)),
                ("records_per_sec", Rate(d.records_per_sec)),
            ],
        }
    }

    /// Sent (or produced), acknowledged and failed, where the kind sends.
    pub(super) fn sent_acked_failed(&self) -> Option<(u64, u64, u64)> {
        match self {
            Run::Produce(d) => Some((d.records_sent, d.records_acked, d.records_failed)),
            Run::E2e(d) => Some((d.records_produced, d.records_acked, d.records_failed)),
            Run::Omb(d) => Some((d.records_sent, d.records_acked, d.records_failed)),
            Run::Consume(_) => None,
        }
    }

    /// The protocol versions used and pinned (empty where the kind has none).
    pub(super) fn versions(&self) -> [(&'static str, Option<&BTreeMap<String, i16>>); 2] {
        let (negotiated, pinned) = match self {
            Run::Produce(d) => (&d.negotiated_versions, Some(&d.pinned_versions)),
            Run::Consume(d) => (&d.negotiated_versions, Some(&d.pinned_versions)),
            Run::E2e(d) => (&d.negotiated_versions, None),
            Run::Omb(d) => (&d.negotiated_versions, None),
        };
        [
            ("negotiated_versions", Some(negotiated)),
            ("pinned_versions", pinned),
        ]
    }

    pub(super) fn seed(&self) -> Option<u64> {
        match self {
            Run::Produce(d) => Some(d.seed),
            Run::E2e(d) => Some(d.seed),
            Run::Omb(d) => Some(d.seed),
            Run::Consume(_) => None,
        }
    }

    /// The clock an e2e run's whole trip was measured on.
    pub(super) fn clock(&self) -> Option<&str> {
        match self {
            Run::E2e(d) => Some(&d.clock),
            _ => None,
        }
    }

    pub(super) fn environment(&self) -> &Environment {
        match self {
            Run::Produce(d) => &d.header.environment,
            Run::Consume(d) => &d.header.environment,
            Run::E2e(d) => &d.header.environment,
            Run::Omb(d) => &d.header.environment,
        }
    }

    /// Whether kbench set the pace, where the kind says.
    pub(super) fn saturation(&self) -> Option<&Saturation> {
        match self {
            Run::Produce(d) => Some(&d.saturation),
            Run::E2e(d) => Some(&d.saturation),
            Run::Omb(d) => Some(&d.saturation),
            Run::Consume(_) => None,
        }
    }

    pub(super) fn distributed(&self) -> Option<&Distributed> {
        match self {
            Run::Produce(d) => d.distributed.as_ref(),
            Run::E2e(d) => d.distributed.as_ref(),
            Run::Consume(_) | Run::Omb(_) => None,
        }
    }

    /// The run's settings block, as its writer put it.
    pub(super) fn settings(&self) -> &Value {
        match self {
            Run::Produce(d) => &d.settings,
            Run::Consume(d) => &d.settings,
            Run::E2e(d) => &d.settings,
            Run::Omb(d) => &d.settings,
        }
    }
}
