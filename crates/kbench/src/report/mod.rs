//! `kbench report RESULT… -o report.html`: result documents of any kind turned into one
//! self-contained HTML page (styles inline, charts as inline SVG written by [`svg`], no script, no
//! network): latency distributions on HdrHistogram's 1/(1−q) axis (several results overlaid),
//! throughput and latency timelines from `intervals`, counts and accounting, the method; sweep
//! tables with a heat map against the newest version; codec bars; compare's ratios with their
//! confidence intervals.

mod sections;
mod svg;

use sections::{accounting, codec, compare, sweep};

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use kbench_bench::Kind;
use serde_json::Value;

use svg::escape;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result documents (`--json` files of any command, `kbench compare --json`), or folders of them.
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,

    /// The HTML file to write.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,

    /// The page's title (default: "kbench report").
    #[arg(long)]
    pub title: Option<String>,
}

/// One loaded document, its kind (as the gate read it) and the name it is shown by.
struct Doc {
    label: String,
    kind: Kind,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &'static str {
        self.kind.name()
    }
}

fn load(paths: &[PathBuf]) -> Result<Vec<Doc>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            inner.sort();
            if inner.is_empty() {
                return Err(format!(
                    "{}: no result documents (*.json) in it",
                    p.display()
                ));
            }
            files.extend(inner);
        } else {
            files.push(p.clone());
        }
    }
    let mut docs = Vec::new();
    for f in files {
        let text = kbench_client::input::read_text(&f, kbench_client::input::RESULT)
            .map_err(|e| format!("{}: {e}", f.display()))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        let kind =
            kbench_bench::document::check(&value).map_err(|e| format!("{}: {e}", f.display()))?;
        let label = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        docs.push(Doc { label, kind, value });
    }
    Ok(docs)
}

/// `kbench report`.
pub fn run(args: ReportArgs) -> crate::harness::CliResult {
    use crate::harness::CliError;
    let docs = load(&args.results)?;
    let title = args.title.as_deref().unwrap_or("kbench report");
    let html = page(title, &docs);
    if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::failed(format!("-o {}: {e}", dir.display())))?;
    }
    std::fs::write(&args.output, html)
        .map_err(|e| CliError::failed(format!("-o {}: {e}", args.output.display())))?;
    eprintln!("kbench: wrote {}", args.output.display());
    Ok(0)
}

const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f5f5f5}td.l,th.l{text-align:left}
.chart{display:block;margin:8px 0 14px;background:#fff}.chart .title{font-weight:600;font-size:13px}.chart .tick{font-size:11px;fill:#444}.chart .axis{font-size:12px;fill:#222}.chart .legend{font-size:11px}
.muted{color:#666}.bad{color:#b00020;font-weight:600}.good{color:#006b3c;font-weight:600}code{background:#f3f3f3;padding:0 3px}";

fn page(title: &str, docs: &[Doc]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1><p class=\"muted\">{} result(s), written by kbench {}. Percentiles come from each run's HdrHistogram; every figure carries its method below.</p>",
        docs.len(),
        env!("CARGO_PKG_VERSION"),
        t = escape(title)
    );
    overview(&mut h, docs);
    let runs: Vec<&Doc> = docs
        .iter()
        .filter(|d| {
            matches!(
                d.kind,
                Kind::Produce | Kind::Consume | Kind::E2e | Kind::Omb
            )
        })
        .collect();
    if !runs.is_empty() {
        distributions(&mut h, &runs);
        timelines(&mut h, &runs);
        for d in &runs {
            accounting(&mut h, d);
        }
    }
    for d in docs {
        match d.kind {
            Kind::Sweep => sweep(&mut h, d),
            Kind::Codec => codec(&mut h, d),
            Kind::Compare => compare(&mut h, d),
            Kind::Produce | Kind::Consume | Kind::E2e | Kind::Omb => {}
        }
    }
    h.push_str("</body></html>\n");
    h
}

fn num(v: &Value) -> String {
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if n.is_f64() {
                if f.abs() >= 100.0 {
                    format!("{f:.0}")
                } else {
                    format!("{f:.3}")
                }
            } else {
                n.to_string()
            }
        }
        Value::Null => "–".into(),
        Value::String(s) => escape(s),
        other => escape(&other.to_string()),
    }
}

fn overview(h: &mut String, docs: &[Doc]) {
    h.push_str("<h2>Results</h2><table><tr><th class=\"l\">result</th><th class=\"l\">kind</th><th class=\"l\">start</th><th>duration s</th><th>records/s</th><th>MB/s</th><th>target</th></tr>");
    for d in docs {
        let v = &d.value;
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&d.label),
            escape(d.kind()),
            num(&v["start_time"]),
            num(&v["duration_s"]),
            num(&v["records_per_sec"]),
            num(&v["mb_per_sec"]),
            num(v
                .pointer("/target/bootstrap_servers")
                .unwrap_or(&v["bootstrap_servers"])),
        );
    }
    h.push_str("</table>");
}

/// Every latency summary of a document (an object with a `histogram`), by field name.
fn summaries(v: &Value) -> Vec<(&str, &Value)> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(_, s)| {
            s.get("histogram")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty())
        })
        .filter(|(_, s)| s.get("count").and_then(Value::as_u64).unwrap_or(0) > 0)
        .map(|(k, s)| (k.as_str(), s))
        .collect()
}

fn distributions(h: &mut String, runs: &[&Doc]) {
    let mut fields: Vec<&str> = Vec::new();
    for d in runs {
        for (f, _) in summaries(&d.value) {
            if !fields.contains(&f) {
                fields.push(f);
            }
        }
    }
    if fields.is_empty() {
        return;
    }
    h.push_str("<h2>Latency distributions</h2><p class=\"muted\">HdrHistogram's percentile plot: the value (ms) at each percentile, the x axis 1/(1−q) on a log scale; several results overlaid.</p>");
    for f in fields {
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .filter_map(|d| {
                let s = d.value.get(f)?;
                let hist = kbench_bench::measure::decode_histogram(s.get("histogram")?.as_str()?)?;
                let points = hist
                    .iter_quantiles(5)
                    .map(|v| {
                        (
                            v.quantile_iterated_to(),
                            v.value_iterated_to() as f64 / 1000.0,
                        )
                    })
                    .collect();
                Some((d.label.clone(), points))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        h.push_str(&svg::percentiles(
            &format!("distribution-{f}"),
            &format!("{} (ms)", f.replace('_', " ")),
            &series,
        ));
        h.push_str("<table><tr><th class=\"l\">result</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>");
        for d in runs {
            let Some(s) = d.value.get(f) else { continue };
            let ms = |k: &str| {
                s.get(k)
                    .and_then(Value::as_f64)
                    .map_or("–".into(), |v| format!("{:.3}", v / 1000.0))
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&d.label),
                num(&s["count"]),
                ms("p50"),
                ms("p90"),
                ms("p99"),
                ms("p99.9"),
                ms("max")
            );
        }
        h.push_str("</table>");
    }
}

fn timelines(h: &mut String, runs: &[&Doc]) {
    let with: Vec<&&Doc> = runs
        .iter()
        .filter(|d| {
            d.value["intervals"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .collect();
    // OMB's own periods (its 10 s lines): publish and consume rates.
    let omb: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .filter_map(|d| {
            let periods = d.value["periods"].as_array().filter(|p| !p.is_empty())?;
            let points = |field: &str| -> Vec<(f64, f64)> {
                periods
                    .iter()
                    .filter_map(|p| Some((p["at_s"].as_f64()?, p[field].as_f64()?)))
                    .collect()
            };
            Some(vec![
                (format!("{} publish", d.label), points("publish_rate")),
                (format!("{} consume", d.label), points("consume_rate")),
            ])
        })
        .flatten()
        .collect();
    if with.is_empty() && omb.is_empty() {
        return;
    }
    h.push_str("<h2>Timelines</h2><p class=\"muted\">Per interval of the measured phase (the result's <code>intervals</code>), each point at its window's end; a partial window shorter than half the interval (a run's or a repetition's last) is left out of the charts, where its rate would be a spike of few records, and kept in the data.</p>");
    let series = |f: &dyn Fn(&Value) -> Option<f64>| -> Vec<(String, Vec<(f64, f64)>)> {
        with.iter()
            .map(|d| {
                let windows: Vec<&Value> = d.value["intervals"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .collect();
                let full = windows
                    .iter()
                    .filter_map(|w| w["duration_s"].as_f64())
                    .fold(0.0, f64::max);
                let points = windows
                    .iter()
                    .filter(|w| w["duration_s"].as_f64().unwrap_or(0.0) >= full / 2.0)
                    .filter_map(|w| Some((w["t_s"].as_f64()? + w["duration_s"].as_f64()?, f(w)?)))
                    .collect();
                (d.label.clone(), points)
            })
            .collect()
    };
    let mut bands = fault_bands(&with);
    bands.extend(cluster_bands(&with));
    h.push_str(&svg::lines(&svg::Lines {
        bands: bands.clone(),
        name: "timeline-throughput",
        title: "throughput (records acknowledged per second)",
        x_label: "s into the run",
        y_label: "records/s",
        series: series(&|w| w["records_per_sec"].as_f64())
            .into_iter()
            .filter(|(_, p)| !p.is_empty())
            .chain(omb)
            .collect(),
    }));
    // The headline latency of each kind: produce's latency, e2e's whole trip.
    for (field, title) in [
        ("latency", "latency per interval (ms)"),
        ("whole_trip", "whole trip per interval (ms)"),
    ] {
        let mut s = Vec::new();
        for (q, suffix) in [("p50", "p50"), ("p99", "p99")] {
            for (label, points) in series(&|w| w.get(field)?.get(q)?.as_f64().map(|v| v / 1000.0)) {
                if !points.is_empty() {
                    s.push((format!("{label} {suffix}"), points));
                }
            }
        }
        if !s.is_empty() {
            h.push_str(&svg::lines(&svg::Lines {
                bands: bands.clone(),
                name: &format!("timeline-{field}"),
                title,
                x_label: "s into the run",
                y_label: "ms",
                series: s,
            }));
        }
    }
}

/// The faults of the runs (`faults`: `--fault`), each as a span in seconds into its run — by the
/// wall clock, from the run's `start_time` to the fault's `began_at` and `ended_at` (a fault not
/// ended runs to the chart's end).
fn fault_bands(runs: &[&&Doc]) -> Vec<(String, f64, f64)> {
    let at = |v: &Value| {
        v.as_str()
            .and_then(|s| humantime::parse_rfc3339_weak(s).ok())
    };
    let mut bands = Vec::new();
    for d in runs {
        let Some(start) = at(&d.value["start_time"]) else {
            continue;
        };
        for f in d.value["faults"].as_array().into_iter().flatten() {
            let Some(began) = at(&f["began_at"]) else {
                continue;
            };
            let secs = |t: std::time::SystemTime| match t.duration_since(start) {
                Ok(d) => d.as_secs_f64(),
                Err(e) => -e.duration().as_secs_f64(),
            };
            let to = at(&f["ended_at"]).map_or(f64::MAX, secs);
            let label = if runs.len() > 1 {
                format!("{}: {}", d.label, f["fault"].as_str().unwrap_or("fault"))
            } else {
                f["fault"].as_str().unwrap_or("fault").to_string()
            };
            bands.push((label, secs(began), to));
        }
    }
    bands
}

/// What the cluster did during the runs (`cluster`), shaded the way faults are: leader changes that
/// came together as one band (at least 0.2 s wide, so that it shows), each broker's stall from when
/// it stopped answering for as long as it did. Seconds from the run's start (`at_s`, `from_s`).
fn cluster_bands(runs: &[&&Doc]) -> Vec<(String, f64, f64)> {
    let mut bands = Vec::new();
    for d in runs {
        let prefix = if runs.len() > 1 {
            format!("{}: ", d.label)
        } else {
            String::new()
        };
        let cluster = &d.value["cluster"];
        let mut changes: Vec<f64> = cluster["leader_changes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["at_s"].as_f64())
            .collect();
        changes.sort_by(f64::total_cmp);
        let mut i = 0;
        while i < changes.len() {
            let first = changes[i];
            let mut j = i;
            while j + 1 < changes.len() && changes[j + 1] - changes[j] < 0.5 {
                j += 1;
            }
            let n = j - i + 1;
            let label = format!("{prefix}{n} leader change{}", if n == 1 { "" } else { "s" });
            bands.push((label, first, changes[j].max(first + 0.2)));
            i = j + 1;
        }
        for stall in cluster["stalls"].as_array().into_iter().flatten() {
            let (Some(from), Some(len)) = (stall["from_s"].as_f64(), stall["for_s"].as_f64())
            else {
                continue;
            };
            let addr = stall["addr"].as_str().unwrap_or("a broker");
            bands.push((format!("{prefix}no answer from {addr}"), from, from + len));
        }
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each Fetch max_bytes shape is rated against its own newest version (as the CLI's tables
    /// are), never against another shape's.
    #[test]
    fn sweep_ratios_are_per_shape() {
        let cell = |v: i64, max_bytes: i64, cpu: f64| {
            serde_json::json!({
                "cell": {"api": "fetch", "version": v, "max_bytes": max_bytes},
                "label": format!("fetch v{v} max_bytes={max_bytes}"),
                "cpu_us_per_msg": cpu,
            })
        };
        let d = Doc {
            label: "s.json".into(),
            kind: Kind::Sweep,
            value: serde_json::json!({"kind": "sweep", "cells": [
                cell(4, 4096, 2.0), cell(17, 4096, 1.0),
                cell(4, 65536, 0.8), cell(17, 65536, 1.0),
                cell(4, 1048576, 1.14), cell(17, 1048576, 1.0),
            ]}),
        };
        let mut h = String::new();
        sweep(&mut h, &d);
        // Each v4 row: its label and its "vs newest" cell.
        let mut ratios: Vec<(String, String)> = h
            .split("<tr>")
            .filter(|r| r.contains("fetch v4"))
            .map(|r| {
                let label = r.split("max_bytes=").nth(1).unwrap_or("").split('<').next();
                let ratio = r.split("</td><td>").nth(2).unwrap_or("");
                (label.unwrap_or("").to_string(), ratio.to_string())
            })
            .collect();
        ratios.sort();
        let want = [("1048576", "1.140"), ("4096", "2.000"), ("65536", "0.800")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(ratios, want, "{h}");
    }
}
