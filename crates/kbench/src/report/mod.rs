//! `kbench report RESULT… -o report.html`: result documents of any kind turned into one
//! self-contained HTML page (styles inline, charts as inline SVG written by [`svg`], no script, no
//! network): latency distributions on HdrHistogram's 1/(1−q) axis (several results overlaid),
//! throughput and latency timelines from `intervals`, counts and accounting, the method; sweep
//! tables with a heat map against the newest version; codec bars; compare's ratios with their
//! confidence intervals.

mod runs;
mod sections;
mod svg;

use runs::{Cell, Run};
use sections::{accounting, codec, compare, sweep};

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use kbench_bench::Kind;
use kbench_bench::codec::CodecDocument;
use kbench_bench::compare::CompareDocument;
use kbench_bench::measure::LatencySummary;
use kbench_bench::sweep::SweepDocument;
use kbench_bench::timeline::{Interval, WindowLatency};
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

/// One loaded document, read as its kind's type through the gate, and the name it is shown by.
struct Doc {
    label: String,
    body: Body,
    /// The faults applied during a run (`--fault`), as its front end appended them.
    faults: Vec<kbench_bench::fault::AppliedFault>,
}

/// A document as its type.
enum Body {
    Run(Run),
    Sweep(Box<SweepDocument>),
    Codec(Box<CodecDocument>),
    Compare(Box<CompareDocument>),
}

impl Doc {
    fn kind(&self) -> &'static str {
        match &self.body {
            Body::Run(r) => r.kind().name(),
            Body::Sweep(_) => Kind::Sweep.name(),
            Body::Codec(_) => Kind::Codec.name(),
            Body::Compare(_) => Kind::Compare.name(),
        }
    }
}

/// `value`, whose kind the gate read, as its type.
fn read(kind: Kind, value: &Value) -> Result<Body, String> {
    use kbench_bench::document::read_as;
    let e = |e: kbench_bench::document::DocumentError| e.to_string();
    Ok(match kind {
        Kind::Sweep => Body::Sweep(read_as(value, kind).map_err(e)?),
        Kind::Codec => Body::Codec(read_as(value, kind).map_err(e)?),
        Kind::Compare => Body::Compare(read_as(value, kind).map_err(e)?),
        Kind::Produce | Kind::Consume | Kind::E2e | Kind::Omb => Body::Run(Run::read(kind, value)?),
    })
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
        let body = read(kind, &value).map_err(|e| format!("{}: {e}", f.display()))?;
        docs.push(Doc {
            label,
            body,
            faults: Run::faults(&value),
        });
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
    let runs: Vec<(&str, &Run, &Doc)> = docs
        .iter()
        .filter_map(|d| match &d.body {
            Body::Run(r) => Some((d.label.as_str(), r, d)),
            _ => None,
        })
        .collect();
    if !runs.is_empty() {
        distributions(&mut h, &runs);
        timelines(&mut h, &runs);
        for (label, run, _) in &runs {
            accounting(&mut h, label, run);
        }
    }
    for d in docs {
        match &d.body {
            Body::Sweep(s) => sweep(&mut h, &d.label, &s.cells),
            Body::Codec(c) => codec(&mut h, &d.label, c),
            Body::Compare(c) => compare(&mut h, &d.label, c),
            Body::Run(_) => {}
        }
    }
    h.push_str("</body></html>\n");
    h
}

fn overview(h: &mut String, docs: &[Doc]) {
    h.push_str("<h2>Results</h2><table><tr><th class=\"l\">result</th><th class=\"l\">kind</th><th class=\"l\">start</th><th>duration s</th><th>records/s</th><th>MB/s</th><th>target</th></tr>");
    let unknown = || Cell::Unknown.text();
    for d in docs {
        let (start, duration, rate, mb, target) = match &d.body {
            Body::Run(r) => (
                escape(r.start_time()),
                Cell::Rate(r.duration_s()).text(),
                Cell::Rate(r.records_per_sec()).text(),
                Cell::rate(r.mb_per_sec()).text(),
                escape(r.bootstrap_servers()),
            ),
            // A sweep, codec run or comparison: what of these it has.
            Body::Sweep(s) => (
                unknown(),
                Cell::Rate(s.duration_s).text(),
                unknown(),
                unknown(),
                escape(&s.bootstrap_servers),
            ),
            Body::Codec(c) => (
                unknown(),
                Cell::Rate(c.duration_s).text(),
                unknown(),
                unknown(),
                unknown(),
            ),
            Body::Compare(_) => (unknown(), unknown(), unknown(), unknown(), unknown()),
        };
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{start}</td><td>{duration}</td><td>{rate}</td><td>{mb}</td><td class=\"l\">{target}</td></tr>",
            escape(&d.label),
            escape(d.kind()),
        );
    }
    h.push_str("</table>");
}

/// A run's latency summaries that hold samples, by field name.
fn summaries(run: &Run) -> Vec<(&'static str, &LatencySummary)> {
    run.summaries()
        .into_iter()
        .filter(|(_, s)| s.count > 0 && !s.histogram.is_empty())
        .collect()
}

/// The summary `field` of a run, if it holds samples.
fn summary<'a>(run: &'a Run, field: &str) -> Option<&'a LatencySummary> {
    summaries(run)
        .into_iter()
        .find_map(|(name, s)| (name == field).then_some(s))
}

fn distributions(h: &mut String, runs: &[(&str, &Run, &Doc)]) {
    let mut fields: Vec<&str> = Vec::new();
    for (_, run, _) in runs {
        for (f, _) in summaries(run) {
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
            .filter_map(|(label, run, _)| {
                let hist = kbench_bench::measure::decode_histogram(&summary(run, f)?.histogram)?;
                let points = hist
                    .iter_quantiles(5)
                    .map(|v| {
                        (
                            v.quantile_iterated_to(),
                            v.value_iterated_to() as f64 / 1000.0,
                        )
                    })
                    .collect();
                Some((label.to_string(), points))
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
        for (label, run, _) in runs {
            let Some(s) = summary(run, f) else { continue };
            let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(label),
                s.count,
                ms(s.p50),
                ms(s.p90),
                ms(s.p99),
                ms(s.p99_9),
                ms(s.max)
            );
        }
        h.push_str("</table>");
    }
}

/// A window's percentile, by which one.
type Quantile = fn(&WindowLatency) -> u64;

/// A chart's series: a label and its points.
type Series = Vec<(String, Vec<(f64, f64)>)>;

fn timelines(h: &mut String, runs: &[(&str, &Run, &Doc)]) {
    let with: Vec<&(&str, &Run, &Doc)> = runs
        .iter()
        .filter(|(_, run, _)| !run.intervals().is_empty())
        .collect();
    // OMB's own periods (its 10 s lines): publish and consume rates.
    let omb: Series = runs
        .iter()
        .filter_map(|(label, run, _)| {
            let periods = run.periods();
            if periods.is_empty() {
                return None;
            }
            Some(vec![
                (
                    format!("{label} publish"),
                    periods.iter().map(|p| (p.0, p.1)).collect(),
                ),
                (
                    format!("{label} consume"),
                    periods.iter().map(|p| (p.0, p.2)).collect(),
                ),
            ])
        })
        .flatten()
        .collect();
    if with.is_empty() && omb.is_empty() {
        return;
    }
    h.push_str("<h2>Timelines</h2><p class=\"muted\">Per interval of the measured phase (the result's <code>intervals</code>), each point at its window's end; a partial window shorter than half the interval (a run's or a repetition's last) is left out of the charts, where its rate would be a spike of few records, and kept in the data.</p>");
    let series = |f: &dyn Fn(&Interval) -> Option<f64>| -> Series {
        with.iter()
            .map(|(label, run, _)| {
                let windows = run.intervals();
                let full = windows.iter().map(|w| w.duration_s).fold(0.0, f64::max);
                let points = windows
                    .iter()
                    .filter(|w| w.duration_s >= full / 2.0)
                    .filter_map(|w| Some((w.t_s + w.duration_s, f(w)?)))
                    .collect();
                (label.to_string(), points)
            })
            .collect()
    };
    let mut bands = fault_bands(&with);
    bands.extend(cluster_bands(&with));
    bands.extend(rebalance_bands(&with));
    h.push_str(&svg::lines(&svg::Lines {
        bands: bands.clone(),
        name: "timeline-throughput",
        title: "throughput (records acknowledged per second)",
        x_label: "s into the run",
        y_label: "records/s",
        series: series(&|w| w.rate("records_per_sec"))
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
        let quantiles: [(Quantile, &str); 2] = [(|l| l.p50, "p50"), (|l| l.p99, "p99")];
        for (q, suffix) in quantiles {
            for (label, points) in series(&|w| Some(q(w.latency(field)?) as f64 / 1000.0)) {
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
fn fault_bands(runs: &[&(&str, &Run, &Doc)]) -> Vec<(String, f64, f64)> {
    let at = |v: Option<&str>| v.and_then(|s| humantime::parse_rfc3339_weak(s).ok());
    let mut bands = Vec::new();
    for (label, run, doc) in runs {
        let Some(start) = at(Some(run.start_time())) else {
            continue;
        };
        for f in &doc.faults {
            let Some(began) = at(f.began_at.as_deref()) else {
                continue;
            };
            let secs = |t: std::time::SystemTime| match t.duration_since(start) {
                Ok(d) => d.as_secs_f64(),
                Err(e) => -e.duration().as_secs_f64(),
            };
            let to = at(f.ended_at.as_deref()).map_or(f64::MAX, secs);
            let name = if runs.len() > 1 {
                format!("{label}: {}", f.fault)
            } else {
                f.fault.clone()
            };
            bands.push((name, secs(began), to));
        }
    }
    bands
}

/// What the cluster did during the runs (`cluster`), shaded the way faults are: leader changes that
/// came together as one band (at least 0.2 s wide, so that it shows), each broker's stall from when
/// it stopped answering for as long as it did. Seconds from the run's start (`at_s`, `from_s`).
fn cluster_bands(runs: &[&(&str, &Run, &Doc)]) -> Vec<(String, f64, f64)> {
    let mut bands = Vec::new();
    for (label, run, _) in runs {
        let prefix = if runs.len() > 1 {
            format!("{label}: ")
        } else {
            String::new()
        };
        let cluster = run.cluster();
        let mut changes: Vec<f64> = cluster.leader_changes.iter().map(|c| c.at_s).collect();
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
        for stall in &cluster.stalls {
            bands.push((
                format!("{prefix}no answer from {}", stall.addr),
                stall.from_s,
                stall.from_s + stall.for_s,
            ));
        }
    }
    bands
}

/// A consumer group's rebalances (`group.rebalances`), shaded the way faults are: each from when
/// its first member began joining to when its last had its partitions (at least 0.2 s wide),
/// named by its cause. Seconds from the group run's start, which is the consume's (an e2e's: its
/// load's, the first joins before it at negative seconds).
fn rebalance_bands(runs: &[&(&str, &Run, &Doc)]) -> Vec<(String, f64, f64)> {
    let mut bands = Vec::new();
    for (label, run, _) in runs {
        let Some(g) = sections::run_group(run) else {
            continue;
        };
        let prefix = if runs.len() > 1 {
            format!("{label}: ")
        } else {
            String::new()
        };
        for r in &g.rebalances {
            bands.push((
                format!("{prefix}rebalance ({})", r.cause),
                r.began_s,
                r.ended_s.max(r.began_s + 0.2),
            ));
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
        use kbench_bench::sweep::{CellStatus, SweepCell, SweepCellDoc, SweepResult};
        let cell = |version: i16, max_bytes: i32, cpu: f64| {
            let mut result = SweepResult::new(
                SweepCell::Fetch { version, max_bytes },
                CellStatus::Completed,
            );
            result.label = format!("fetch v{version} max_bytes={max_bytes}");
            result.cpu_us_per_msg = cpu;
            SweepCellDoc {
                result,
                verdict: "ok".into(),
            }
        };
        let cells = [
            cell(4, 4096, 2.0),
            cell(17, 4096, 1.0),
            cell(4, 65536, 0.8),
            cell(17, 65536, 1.0),
            cell(4, 1048576, 1.14),
            cell(17, 1048576, 1.0),
        ];
        let mut h = String::new();
        sweep(&mut h, "s.json", &cells);
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
