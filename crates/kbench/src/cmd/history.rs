//! `kbench history`: the results store read and filled. `import` stores result documents already
//! on disk, `list` names the benchmarks stored, `show` prints one metric's runs as a table, and
//! `check` looks for changes in every series (change-point detection) and exits 1 on a
//! regression newer than `--since`. Every workload's `--store DB` fills the same store as it runs.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use kbench_bench::history::{Series, Store};

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
    /// One metric of one benchmark, run by run: median, spread and repetitions.
    Show(ShowArgs),
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
}

pub fn run(args: HistoryArgs) -> CliResult {
    match args.command {
        HistoryCommand::Import(a) => import(a),
        HistoryCommand::List(a) => list(a),
        HistoryCommand::Show(a) => show(a),
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
        println!("no benchmarks in {}", args.store);
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
    println!("{} {} against {}", b.key, b.cell, b.target);
    print!("{}", table(&series));
    Ok(0)
}

/// A series as a table: one line per run, its median, spread and repetition count.
fn table(s: &Series) -> String {
    let better = match s.better {
        kbench_bench::compare::Better::Higher => "higher is better",
        kbench_bench::compare::Better::Lower => "lower is better",
    };
    let mut out = format!("{} ({better})\n", s.metric);
    out.push_str(&format!(
        "{:>5}  {:<24}  {:<18}  {:>14}  {:>14}  {:>14}  {:>4}\n",
        "run", "started", "build", "median", "min", "max", "reps"
    ));
    for p in &s.points {
        let mut v = p.samples.clone();
        v.sort_by(f64::total_cmp);
        let median = kbench_bench::compare::median(&mut v);
        out.push_str(&format!(
            "{:>5}  {:<24}  {:<18}  {:>14.3}  {:>14.3}  {:>14.3}  {:>4}\n",
            p.run_id,
            p.started_at,
            p.build_label.as_deref().unwrap_or("-"),
            median,
            v[0],
            v[v.len() - 1],
            v.len()
        ));
    }
    out
}
