//! Service-level conditions a run must meet, for CI gates: `--slo 'p99<20ms,lost==0,records_per_sec>=500000'`.
//! Each condition names a figure of the run's result document, a comparison and a threshold; the
//! names are checked against the workload before the run starts, and the conditions are evaluated
//! on the finished document (a table of each with its measured value; exit code 3 when any fails).
//!
//! Names: a latency percentile of the workload's main latency — `min`, `mean`, `p50`, `p80`,
//! `p90`, `p95`, `p98`, `p99`, `p99.9` (or `p999`), `max` — with a unit (`us`, `ms`, `s`): produce's
//! `latency`, consume's `fetch_latency`, e2e's `whole_trip`; the same on another latency of the
//! document as `NAME.p99` (e.g. `service_time.p99<5ms`); or a numeric field of the document
//! (`records_per_sec`, `records_failed`, `client_cpu_us_per_record`, …), with the aliases `lost`,
//! `failed`, `duplicated`.

use serde::Serialize;

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// Where a condition's figure is in the result document.
#[derive(Debug, Clone, PartialEq)]
enum Figure {
    /// A latency summary's field, in µs.
    Latency { summary: String, field: String },
    /// A top-level numeric field.
    Field(String),
}

/// One condition, checked against a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// As written.
    pub text: String,
    figure: Figure,
    op: Op,
    /// In the document's unit (µs for latencies).
    threshold: f64,
}

/// A condition's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub condition: String,
    /// The document field it read.
    pub figure: String,
    /// The value, in the condition's unit (ms for a condition written in ms).
    pub measured: Option<f64>,
    pub unit: String,
    pub passed: bool,
}

const PERCENTILES: &[&str] = &[
    "min", "mean", "p50", "p80", "p90", "p95", "p98", "p99", "p99.9", "max",
];

/// The main latency, the other latencies, and the numeric fields of each workload's document.
fn shape(
    kind: &str,
) -> (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
) {
    match kind {
        "produce" => (
            "latency",
            &["latency", "service_time"],
            &[
                "records_sent",
                "records_acked",
                "records_failed",
                "bytes_acked",
                "records_per_sec",
                "mb_per_sec",
                "client_cpu_us_per_record",
                "client_cpu_user_s",
                "client_cpu_sys_s",
                "peak_rss_kib",
                "duration_s",
                "produce_requests",
                "record_batches",
            ],
        ),
        "omb" => (
            "latency",
            &["latency", "publish_delay", "end_to_end", "service_time"],
            &[
                "records_sent",
                "records_acked",
                "records_failed",
                "records_per_sec",
                "duration_s",
            ],
        ),
        "consume" => (
            "fetch_latency",
            &["fetch_latency"],
            &[
                "records_consumed",
                "bytes_consumed",
                "records_per_sec",
                "mb_per_sec",
                "fetch_records_per_sec",
                "fetch_mb_per_sec",
                "rebalance_time_ms",
                "fetch_time_ms",
                "client_cpu_us_per_record",
                "client_cpu_user_s",
                "client_cpu_sys_s",
                "peak_rss_kib",
                "duration_s",
                "fetches",
                "empty_fetches",
                "offsets_skipped",
            ],
        ),
        _ => (
            "whole_trip",
            &[
                "whole_trip",
                "producer_request_duration",
                "fetch_duration",
                "consumer_processing",
            ],
            &[
                "records_produced",
                "records_acked",
                "records_failed",
                "records_consumed",
                "records_lost",
                "records_late",
                "records_duplicated",
                "records_unexpected",
                "records_foreign",
                "records_per_sec",
                "client_cpu_user_s",
                "client_cpu_sys_s",
                "peak_rss_kib",
                "duration_s",
                "startup_s",
                "drain_s",
                "rejoins",
                "commit_failures",
            ],
        ),
    }
}

/// Parse `--slo` for a workload (`produce`, `consume` or `e2e`); an error names the condition and
/// what is wrong with it.
pub fn parse(text: &str, kind: &str) -> Result<Vec<Condition>, String> {
    let (main, latencies, fields) = shape(kind);
    let mut out = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let bad = |why: String| format!("{raw:?}: {why}");
        let (at, op, len) = ["<=", ">=", "==", "!=", "<", ">"]
            .iter()
            .find_map(|sym| raw.find(sym).map(|i| (i, *sym, sym.len())))
            .ok_or_else(|| bad("expected NAME<VALUE (or <=, >, >=, ==, !=)".into()))?;
        let op = match op {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            _ => Op::Gt,
        };
        let name = raw[..at].trim();
        let value = raw[at + len..].trim();
        let name = match name {
            "lost" => "records_lost",
            "failed" => "records_failed",
            "duplicated" => "records_duplicated",
            "p999" => "p99.9",
            n => n,
        };
        let (summary, field) = match name.split_once('.') {
            Some((s, f)) if latencies.contains(&s) => (Some(s), f),
            _ if PERCENTILES.contains(&name) => (Some(main), name),
            _ => (None, name),
        };
        let field = if field == "p999" { "p99.9" } else { field };
        let (figure, threshold) = match summary {
            Some(summary) => {
                if !PERCENTILES.contains(&field) {
                    return Err(bad(format!(
                        "{field:?} is not a latency figure (one of {})",
                        PERCENTILES.join(", ")
                    )));
                }
                let (number, scale) = if let Some(n) = value.strip_suffix("ms") {
                    (n, 1000.0)
                } else if let Some(n) = value
                    .strip_suffix("us")
                    .or_else(|| value.strip_suffix("µs"))
                {
                    (n, 1.0)
                } else if let Some(n) = value.strip_suffix('s') {
                    (n, 1_000_000.0)
                } else {
                    return Err(bad("a latency needs a unit: us, ms or s (20ms)".into()));
                };
                let n: f64 = number
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("{value:?} is not a duration")))?;
                (
                    Figure::Latency {
                        summary: summary.to_string(),
                        field: field.to_string(),
                    },
                    n * scale,
                )
            }
            None => {
                if !fields.contains(&name) {
                    return Err(bad(format!(
                        "{name:?} is not a figure of a {kind} run (latency: {}; or {}; or NAME.p99 for {})",
                        PERCENTILES.join(", "),
                        fields.join(", "),
                        latencies.join(", ")
                    )));
                }
                let n: f64 = value
                    .parse()
                    .map_err(|_| bad(format!("{value:?} is not a number")))?;
                (Figure::Field(name.to_string()), n)
            }
        };
        if !threshold.is_finite() {
            return Err(bad("the threshold must be a finite number".into()));
        }
        out.push(Condition {
            text: raw.to_string(),
            figure,
            op,
            threshold,
        });
    }
    if out.is_empty() {
        return Err("no condition given".into());
    }
    Ok(out)
}

/// Evaluate the conditions on a finished result document. A figure the document lacks (a run that
/// measured nothing) fails its condition.
pub fn evaluate(conditions: &[Condition], doc: &serde_json::Value) -> Vec<Check> {
    conditions
        .iter()
        .map(|c| {
            let (figure, measured, unit, scale) = match &c.figure {
                Figure::Latency { summary, field } => {
                    let s = &doc[summary.as_str()];
                    let us = if s["count"].as_u64() == Some(0) {
                        None
                    } else {
                        s[field.as_str()].as_f64()
                    };
                    let (unit, scale) = if c.text.trim_end().ends_with("ms") {
                        ("ms", 1000.0)
                    } else if c.text.trim_end().ends_with("us") || c.text.ends_with("µs") {
                        ("µs", 1.0)
                    } else {
                        ("s", 1_000_000.0)
                    };
                    (format!("{summary}.{field}"), us, unit, scale)
                }
                Figure::Field(name) => (name.clone(), doc[name.as_str()].as_f64(), "", 1.0),
            };
            let passed = measured.is_some_and(|m| c.op.holds(m, c.threshold));
            Check {
                condition: c.text.clone(),
                figure,
                measured: measured.map(|m| m / scale),
                unit: unit.to_string(),
                passed,
            }
        })
        .collect()
}

/// The summary table: each condition, what was measured, pass or FAIL.
pub fn table(checks: &[Check]) -> String {
    let width = checks
        .iter()
        .map(|c| c.condition.len())
        .max()
        .unwrap_or(0)
        .max(3);
    let mut out = format!("{:width$}  {:>16}  result\n", "SLO", "measured");
    for c in checks {
        let measured = c.measured.map_or_else(
            || "n/a".to_string(),
            |m| {
                format!(
                    "{m:.3}{}{}",
                    if c.unit.is_empty() { "" } else { " " },
                    c.unit
                )
            },
        );
        out.push_str(&format!(
            "{:width$}  {:>16}  {}\n",
            c.condition,
            measured,
            if c.passed { "pass" } else { "FAIL" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_and_evaluate_with_units() {
        let c = parse(
            "p99<20ms, records_per_sec>=1000,lost==0,service_time.p50<=500us",
            "e2e",
        );
        assert!(c.is_err(), "service_time is not an e2e latency");
        let c = parse(
            "p99<20ms, records_per_sec>=1000,failed==0,service_time.p50<=500us,p999<1s",
            "produce",
        )
        .unwrap();
        let doc = serde_json::json!({
            "latency": {"count": 10, "p99": 15_000, "p99.9": 2_000_000},
            "service_time": {"count": 10, "p50": 600},
            "records_per_sec": 2000.0,
            "records_failed": 0,
        });
        let checks = evaluate(&c, &doc);
        let passed: Vec<bool> = checks.iter().map(|c| c.passed).collect();
        assert_eq!(passed, [true, true, true, false, false]);
        assert_eq!(checks[0].measured, Some(15.0));
        assert_eq!(checks[0].unit, "ms");
        assert_eq!(checks[3].measured, Some(600.0));
        let t = table(&checks);
        assert!(t.contains("FAIL") && t.contains("15.000 ms"), "{t}");
    }

    #[test]
    fn bad_conditions_are_named() {
        for (text, said) in [
            ("p99<20", "unit"),
            ("p99=20ms", "expected NAME<VALUE"),
            ("nonsense>1", "not a figure of a produce run"),
            ("records_per_sec>fast", "not a number"),
            ("latency.p42<1ms", "not a latency figure"),
            ("", "no condition"),
        ] {
            let e = parse(text, "produce").unwrap_err();
            assert!(e.contains(said), "{text}: {e}");
        }
    }

    #[test]
    fn an_empty_latency_fails_its_condition() {
        let c = parse("p99<1s", "consume").unwrap();
        let doc = serde_json::json!({"fetch_latency": {"count": 0, "p99": 0}});
        assert!(!evaluate(&c, &doc)[0].passed);
    }
}
