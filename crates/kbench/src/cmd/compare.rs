//! `kbench compare BASELINE CANDIDATE`: match the cells of two sets of result documents (files or
//! folders of them) and give each metric its ratio, confidence interval and verdict. Exit 1 on any
//! regression, for CI pipelines.

use std::path::{Path, PathBuf};

use clap::Args;
use kbench_bench::compare::{Cells, Comparison, Samples, Verdict, cells_of, compare};
use kbench_bench::{Header, Kind};

use crate::harness::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a result document, or a folder of them.
    pub baseline: PathBuf,
    /// The candidate: a result document, or a folder of them.
    pub candidate: PathBuf,
    /// Smallest change called a regression or improvement (0.05 = 5 %).
    #[arg(long, default_value = "0.05", value_parser = parse_threshold)]
    pub threshold: f64,
    /// Seed of the bootstrap resampling.
    #[arg(long, default_value = "1")]
    pub seed: u64,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,

    /// Also write the comparison as a result document (kind "compare", for `kbench report`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t > 0.0 && t < 1.0 => Ok(t),
        _ => Err("must be a fraction between 0 and 1, e.g. 0.05".into()),
    }
}

fn load(path: &Path) -> Result<(Kind, Cells), String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(format!(
            "{}: no result documents (*.json) in it",
            path.display()
        ));
    }
    let mut kind: Option<Kind> = None;
    let mut all = Cells::new();
    for f in files {
        let text = kbench_client::input::read_text(&f, kbench_client::input::RESULT)
            .map_err(|e| format!("{}: {e}", f.display()))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        let k = kbench_bench::document::check(&doc).map_err(|e| format!("{}: {e}", f.display()))?;
        let cells = cells_of(k, &doc).map_err(|e| format!("{}: {e}", f.display()))?;
        if let Some(prev) = kind
            && prev != k
        {
            return Err(format!(
                "{}: a {k} document among {prev} documents",
                f.display()
            ));
        }
        kind = Some(k);
        for (cell, metrics) in cells {
            let entry = all.entry(cell).or_default();
            for (m, (better, samples)) in metrics {
                entry
                    .entry(m)
                    .or_insert((better, Vec::new()))
                    .1
                    .extend(samples);
            }
        }
    }
    // `files` is never empty, so a kind was read.
    Ok((kind.unwrap_or(Kind::Compare), all))
}

pub fn run(args: CompareArgs) -> CliResult {
    let (a, b) = (load(&args.baseline)?, load(&args.candidate)?);
    if a.0 != b.0 {
        return Err(CliError::usage(format!(
            "cannot compare {} results with {} results",
            a.0, b.0
        )));
    }
    let mut rows: Vec<Comparison> = Vec::new();
    for (cell, metrics) in &a.1 {
        let Some(other) = b.1.get(cell) else { continue };
        for (metric, (better, sa)) in metrics {
            if let Some((_, sb)) = other.get(metric) {
                let samples = Samples {
                    cell: cell.clone(),
                    metric: metric.clone(),
                    better: *better,
                    a: sa.clone(),
                    b: sb.clone(),
                };
                rows.push(compare(&samples, args.threshold, args.seed));
            }
        }
    }
    let only_a: Vec<&String> = a.1.keys().filter(|k| !b.1.contains_key(*k)).collect();
    let only_b: Vec<&String> = b.1.keys().filter(|k| !a.1.contains_key(*k)).collect();
    if rows.is_empty() {
        return Err(CliError::usage(
            "no cell appears on both sides (same settings), nothing to compare",
        ));
    }
    let mut table = String::new();
    table.push_str(&format!(
        "Baseline A: {}\nCandidate B: {}\nThreshold {:.0} %, 95 % bootstrap confidence intervals over the repetitions\n\n",
        args.baseline.display(),
        args.candidate.display(),
        args.threshold * 100.0
    ));
    table.push_str("| cell | metric | A (median) | B (median) | B/A | 95 % CI | verdict |\n|---|---|---|---|---|---|---|\n");
    // A figure with no samples (or a zero baseline) has no value to print: a dash, never "NaN".
    let num = |v: f64, digits: usize| {
        if v.is_finite() {
            format!("{v:.digits$}")
        } else {
            "–".to_string()
        }
    };
    for r in &rows {
        let ci = if r.ci_low.is_finite() && r.ci_high.is_finite() {
            format!("{:.3}–{:.3}", r.ci_low, r.ci_high)
        } else {
            "–".to_string()
        };
        table.push_str(&format!(
            "| {} | {} ({} is better) | {} | {} | {} | {} | {} |\n",
            r.cell,
            r.metric,
            match r.better {
                kbench_bench::compare::Better::Higher => "higher",
                kbench_bench::compare::Better::Lower => "lower",
            },
            num(r.a_median, 4),
            num(r.b_median, 4),
            num(r.ratio, 3),
            ci,
            r.verdict.label()
        ));
    }
    for k in &only_a {
        table.push_str(&format!("\nonly in A: {k}"));
    }
    for k in &only_b {
        table.push_str(&format!("\nonly in B: {k}"));
    }
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let regressions = count(Verdict::Regression);
    let improvements = count(Verdict::Improvement);
    let others = [
        (count(Verdict::Identical), "identical"),
        (
            count(Verdict::NoRatio),
            "changed from a baseline of 0 (no ratio)",
        ),
        (
            count(Verdict::TooFewRepetitions),
            "with too few repetitions (use --repetitions 3 or more)",
        ),
    ];
    let inside = count(Verdict::InsideNoise);
    let others: String = others
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!(", {n} {what}"))
        .collect();
    table.push_str(&format!(
        "\n{regressions} regression(s), {improvements} improvement(s), {inside} inside noise{others}\n"
    ));
    print!("{table}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &table)
            .map_err(|e| CliError::usage(format!("--markdown {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.json {
        let doc = kbench_bench::compare::CompareDocument {
            header: Header::new(Kind::Compare),
            baseline: args.baseline.display().to_string(),
            candidate: args.candidate.display().to_string(),
            threshold: args.threshold,
            seed: args.seed,
            rows,
            only_in_baseline: only_a.into_iter().cloned().collect(),
            only_in_candidate: only_b.into_iter().cloned().collect(),
        };
        crate::args::write_json(path, &doc).map_err(|e| CliError::usage(format!("--json {e}")))?;
    }
    Ok(if regressions > 0 { 1 } else { 0 })
}
