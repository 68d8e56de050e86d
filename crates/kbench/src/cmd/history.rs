//! `kbench history`: the results store read and filled. `import` stores result documents already
//! on disk, `list` names the benchmarks stored, `show` prints one metric's runs as a table, and
//! `check` looks for changes in every series (change-point detection) and exits 1 on a
//! regression newer than `--since`. Every workload's `--store DB` fills the same store as it runs.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use kbench_bench::compare::Better;
use kbench_bench::history::{Change, Series, Since, Store, changes, time_of};

use crate::harness::{CliError, CliResult};
use crate::store::StoreArgs;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Store result documents already on disk (files, or folders of *.json).
    Import(ImportArgs),
    /// The benchmarks stored: key, kind, runs, target and the settings that identify them.
    List(StoreOnly),
    /// One metric of one benchmark, run by run: median, spread and repetitions, and its changes.
    Show(ShowArgs),
    /// Look for changes in every stored series (change-point detection); exit 1 on a regression
    /// first seen since `--since` (or anywhere, without it).
    Check(CheckArgs),
}

/// `--store DB`, for the commands that only read.
#[derive(Debug, Args)]
pub struct StoreOnly {
    /// The results store: an SQLite file, or a postgres:// URL.
    #[arg(long, value_name = "DB")]
    pub store: String,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Result documents, or folders of them (*.json, not recursive).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub keep: StoreArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub store: StoreOnly,
    /// The benchmark's key (or its first 4+ digits), as `kbench history list` prints it.
    #[arg(long)]
    pub benchmark: String,
    /// The metric (default: records_per_sec, or the benchmark's first).
    #[arg(long)]
    pub metric: Option<String>,
    /// Print every repetition's value, not only their median and range.
    #[arg(long)]
    pub samples: bool,
    #[command(flatten)]
    pub detection: Detection,
}

/// How changes are found (Apache Otava's settings and defaults).
#[derive(Debug, Args)]
pub struct Detection {
    /// A change is called only with a p-value below this (Otava's `--p-value`).
    #[arg(long, default_value_t = 0.001, value_parser = pvalue)]
    pub max_pvalue: f64,
    /// A change is called only when larger than this relative size (0.05 = 5 %; Otava's
    /// `--magnitude`).
    #[arg(long, default_value_t = 0.0, value_parser = crate::args::fraction)]
    pub min_magnitude: f64,
    /// Correct the significance test for the split having been chosen (fewer false changes in
    /// flat noise; Otava does not).
    #[arg(long)]
    pub corrected: bool,
}

fn pvalue(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("expected a p-value above 0 and at most 1, such as 0.001".into()),
    }
}

impl Detection {
    fn options(&self) -> kbench_bench::changepoint::Options {
        kbench_bench::changepoint::Options {
            max_pvalue: self.max_pvalue,
            min_magnitude: self.min_magnitude,
            corrected: self.corrected,
            ..Default::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub store: StoreOnly,
    /// Count regressions first seen at or after this: a date (2026-12-01, UTC), an RFC 3339
    /// time, or a build label (its first run). Without it, any regression stored counts.
    #[arg(long, value_name = "DATE|TIME|BUILD")]
    pub since: Option<String>,
    /// Only these benchmarks (keys, or their first 4+ digits; repeatable).
    #[arg(long)]
    pub benchmark: Vec<String>,
    /// Only these metrics (repeatable; default: every metric stored).
    #[arg(long)]
    pub metric: Vec<String>,
    #[command(flatten)]
    pub detection: Detection,
    /// Also write the changes found as JSON (for CI): each with its benchmark, metric, build,
    /// run, means, size, confidence, direction and whether it counts (at or after --since).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

pub fn run(args: HistoryArgs) -> CliResult {
    match args.command {
        HistoryCommand::Import(a) => import(a),
        HistoryCommand::List(a) => list(a),
        HistoryCommand::Show(a) => show(a),
        HistoryCommand::Check(a) => check(a),
    }
}

/// The documents a path names: itself, or a folder's *.json in name order.
fn documents(path: &Path) -> Result<Vec<PathBuf>, CliError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

fn import(args: ImportArgs) -> CliResult {
    if args.keep.store.is_none() {
        return Err(CliError::usage("--store DB: where to import to"));
    }
    let mut store = args.keep.open()?;
    let (mut new, mut known, mut skipped) = (0, 0, 0);
    for path in &args.paths {
        let named_file = !path.is_dir();
        for file in documents(path)? {
            let text = kbench_client::input::read_text(&file, kbench_client::input::TEXT)
                .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
            let meta = args.keep.meta(Some(file.display().to_string()));
            match store.record(&text, &meta) {
                Ok(stored) => {
                    for (key, fresh) in stored.runs {
                        let said = if fresh { "stored" } else { "already stored" };
                        println!("{}: {said}, benchmark {key}", file.display());
                        if fresh { new += 1 } else { known += 1 }
                    }
                }
                // A file named outright must be a result document; a folder may hold others.
                Err(e) if named_file => {
                    return Err(CliError::usage(format!("{}: {e}", file.display())));
                }
                Err(e) => {
                    println!("{}: skipped ({e})", file.display());
                    skipped += 1;
                }
            }
        }
    }
    println!("{new} runs stored, {known} already stored, {skipped} files skipped");
    Ok(0)
}

fn list(args: StoreOnly) -> CliResult {
    let store = Store::open(&args.store).map_err(CliError::usage)?;
    let all = store.benchmarks().map_err(CliError::failed)?;
    if all.is_empty() {
        println!("no benchmarks in {}", store.location());
        return Ok(0);
    }
    println!(
        "{:<12}  {:<7}  {:>4}  {:<21}  cell",
        "key", "kind", "runs", "target"
    );
    for b in all {
        println!(
            "{:<12}  {:<7}  {:>4}  {:<21}  {}",
            b.key, b.kind, b.runs, b.target, b.cell
        );
    }
    Ok(0)
}

fn show(args: ShowArgs) -> CliResult {
    let store = Store::open(&args.store.store).map_err(CliError::usage)?;
    let b = store.find(&args.benchmark).map_err(CliError::usage)?;
    let metric = args.metric.clone().unwrap_or_else(|| {
        if b.metrics.iter().any(|m| m == "records_per_sec") {
            "records_per_sec".into()
        } else {
            b.metrics.first().cloned().unwrap_or_default()
        }
    });
    let series = store.series(&b, &metric).map_err(CliError::usage)?;
    let found = changes(&series, &args.detection.options());
    println!("{} {} against {}", b.key, b.cell, b.target);
    print!("{}", table(&series, &found, args.samples));
    Ok(0)
}

/// A series as a table: one line per run, its median, range and repetition count (or every
/// repetition), and the change first seen in it.
fn table(s: &Series, found: &[Change], samples: bool) -> String {
    let better = match s.better {
        Better::Higher => "higher is better",
        Better::Lower => "lower is better",
    };
    let mut out = format!("{} ({better})\n", s.metric);
    out.push_str(&format!(
        "{:>5}  {:<24}  {:<18}  {:>14}  {:>14}  {:>14}  {:>4}  change\n",
        "run", "started", "build", "median", "min", "max", "reps"
    ));
    for (i, p) in s.points.iter().enumerate() {
        let mut v = p.samples.clone();
        v.sort_by(f64::total_cmp);
        let median = kbench_bench::compare::median(&mut v);
        let change = found
            .iter()
            .find(|c| c.index == i)
            .map(describe)
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>5}  {:<24}  {:<18}  {:>14.3}  {:>14.3}  {:>14.3}  {:>4}  {change}\n",
            p.run_id,
            p.started_at,
            p.build_label.as_deref().unwrap_or("-"),
            median,
            v[0],
            v[v.len() - 1],
            v.len()
        ));
        if samples {
            let all: Vec<String> = p.samples.iter().map(|x| format!("{x:.3}")).collect();
            out.push_str(&format!("{:>5}  samples: {}\n", "", all.join(" ")));
        }
    }
    out
}

/// A change in a few words: `regression −17.7 % (confidence 99.99 %)`.
fn describe(c: &Change) -> String {
    format!(
        "{} {:+.1} % ({:.3} -> {:.3}, confidence {:.2} %)",
        if c.regression {
            "REGRESSION"
        } else {
            "improvement"
        },
        c.relative_change * 100.0,
        c.mean_before,
        c.mean_after,
        c.confidence * 100.0
    )
}

fn check(args: CheckArgs) -> CliResult {
    let store = Store::open(&args.store.store).map_err(CliError::usage)?;
    let mut benchmarks = store.benchmarks().map_err(CliError::usage)?;
    if !args.benchmark.is_empty() {
        let wanted = args
            .benchmark
            .iter()
            .map(|k| store.find(k).map(|b| b.key))
            .collect::<Result<Vec<_>, _>>()
            .map_err(CliError::usage)?;
        benchmarks.retain(|b| wanted.contains(&b.key));
    }
    for m in &args.metric {
        if !benchmarks.iter().any(|b| b.metrics.contains(m)) {
            return Err(CliError::usage(format!(
                "--metric {m}: no benchmark checked has it"
            )));
        }
    }
    let options = args.detection.options();
    let mut all = Vec::new();
    for b in &benchmarks {
        for metric in &b.metrics {
            if args.metric.is_empty() || args.metric.contains(metric) {
                all.push((b, store.series(b, metric).map_err(CliError::usage)?));
            }
        }
    }
    let since = match &args.since {
        None => None,
        Some(text) => {
            let since = Since::parse(text);
            let start = since.start(all.iter().map(|(_, s)| s)).ok_or_else(|| {
                CliError::usage(format!(
                    "--since {text}: neither a date (YYYY-MM-DD), an RFC 3339 time, nor a build stored"
                ))
            })?;
            Some((text.as_str(), start))
        }
    };
    let counts = |c: &Change| match since {
        None => true,
        Some((_, start)) => time_of(&c.started_at).is_some_and(|t| t >= start),
    };
    println!(
        "kbench history check: {} benchmarks, {} series in {}",
        benchmarks.len(),
        all.len(),
        store.location()
    );
    let (mut regressions, mut older, mut improvements) = (0, 0, 0);
    let mut said = None;
    let mut found = Vec::new();
    for (b, series) in &all {
        for c in changes(series, &options) {
            let new = counts(&c);
            if args.json.is_some() {
                let mut v = serde_json::to_value(&c).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("benchmark".into(), b.key.clone().into());
                    o.insert("cell".into(), b.cell.clone().into());
                    o.insert("target".into(), b.target.clone().into());
                    o.insert("counts".into(), new.into());
                }
                found.push(v);
            }
            match (c.regression, new) {
                (true, true) => regressions += 1,
                (true, false) => older += 1,
                (false, _) => improvements += 1,
            }
            if said != Some(b.id) {
                println!("{}  {} against {}", b.key, b.cell, b.target);
                said = Some(b.id);
            }
            println!(
                "  {:<26}  {}  first in build {} (run {}, {}){}",
                c.metric,
                describe(&c),
                c.build_label.as_deref().unwrap_or("-"),
                c.run_id,
                c.started_at,
                if new { "" } else { ", before --since" }
            );
        }
    }
    let scope = since.map_or(String::new(), |(text, _)| format!(" since {text}"));
    println!("{regressions} regression(s){scope}, {older} older, {improvements} improvement(s)");
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "store": store.location(),
            "since": args.since,
            "benchmarks": benchmarks.len(),
            "series": all.len(),
            "regressions": regressions,
            "older_regressions": older,
            "improvements": improvements,
            "changes": found,
        });
        crate::args::write_json(path, &doc).map_err(|e| CliError::failed(format!("--json {e}")))?;
    }
    Ok(if regressions > 0 { 1 } else { 0 })
}
