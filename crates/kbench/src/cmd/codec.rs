//! `kbench codec`: tier 0, every Produce and Fetch codec version with no broker. Runs the matrix in a
//! seeded shuffled order (optionally each cell in its own process), prints a table per API, shape,
//! record count and compression, and writes the cells to a result document.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use clap::Args;
use kbench_bench::codec::{
    Api, CellResult, CellSpec, CompressionName, DEFAULT_NOISE_THRESHOLD, DEFAULT_REPETITIONS,
    DEFAULT_TOLERANCE, DEFAULT_WARMUP_BLOCKS, Matrix, Method, Shape, Subject, groups, run_cell,
    shuffle, verdict,
};

fn noise_threshold(args: &CodecArgs) -> f64 {
    args.noise_threshold.unwrap_or(DEFAULT_NOISE_THRESHOLD)
}

fn tolerance(args: &CodecArgs) -> f64 {
    args.tolerance.unwrap_or(DEFAULT_TOLERANCE)
}
use kbench_bench::result::{Header, Kind};
use kbench_wire::Compression;

use crate::harness::{CliError, CliResult};

#[derive(Debug, Args, Default)]
pub struct CodecArgs {
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    /// A short run (< 60 s): small records, 1/100/1000 records per batch, no compression.
    #[arg(long)]
    pub quick: bool,
    /// The scaling series instead: 100 → 400 000 records per batch, newest versions and batches.
    #[arg(long)]
    pub scaling: bool,
    /// Records per batch, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::positive_usize)]
    pub records: Vec<usize>,
    /// Payload shapes, comma-separated: small (8-byte key, 64-byte value, 2 headers), 1k, 100k.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub shape: Vec<Shape>,
    /// Compression codecs, comma-separated: none, gzip, snappy, lz4, zstd.
    #[arg(long, value_delimiter = ',', value_parser = parse_compression)]
    pub compression: Vec<Compression>,
    /// APIs, comma-separated: produce (encode), fetch (decode).
    #[arg(long, value_delimiter = ',', value_parser = parse_api)]
    pub api: Vec<Api>,
    /// Timed repetitions per cell (the median is reported); at least 9 (the default).
    #[arg(long, value_parser = crate::args::at_least::<9>)]
    pub repetitions: Option<usize>,
    /// Warm-up blocks per cell, of the cell's own shape (default 2).
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Records per timed block (fewer for large values: at most 32 MiB of values per block).
    #[arg(long, value_parser = crate::args::positive_usize)]
    pub block_records: Option<usize>,
    /// Seed for the cell order (default: random; printed and stored).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run each cell in its own child process.
    #[arg(long)]
    pub isolate: bool,
    /// Spread (IQR / median) above which a verdict is "inside noise floor" (default 0.15).
    #[arg(long, value_parser = crate::args::fraction)]
    pub noise_threshold: Option<f64>,
    /// How far from the newest version a version may be and still be "within" (default 0.05).
    #[arg(long, value_parser = crate::args::fraction)]
    pub tolerance: Option<f64>,
    /// Write the result document to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the tables as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// `--store DB`, `--build-label`, `--target-label`: the result kept in the results store.
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
    /// Internal: measure one cell (JSON) and print its result as JSON (used by --isolate).
    #[arg(long, hide = true)]
    pub run_cell: Option<String>,
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    s.parse()
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    s.parse()
}

fn parse_api(s: &str) -> Result<Api, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "produce" => Ok(Api::Produce),
        "fetch" => Ok(Api::Fetch),
        other => Err(format!("unknown API {other:?} (expected produce or fetch)")),
    }
}

pub fn run(args: CodecArgs) -> CliResult {
    if let Some(cell) = &args.run_cell {
        return run_one(cell, &args);
    }
    crate::args::check_outputs(&[
        ("--json", args.json.as_deref()),
        ("--markdown", args.markdown.as_deref()),
    ])?;
    args.store.check()?;
    let quick = args.quick;
    let matrix = Matrix {
        record_counts: if !args.records.is_empty() {
            args.records.clone()
        } else if args.scaling {
            vec![100, 1_000, 10_000, 100_000, 400_000]
        } else if quick {
            vec![1, 100, 1_000]
        } else {
            vec![1, 10, 100, 1_000, 10_000]
        },
        shapes: if !args.shape.is_empty() {
            args.shape.clone()
        } else if quick || args.scaling {
            vec![Shape::Small]
        } else {
            Shape::ALL.to_vec()
        },
        compressions: if args.compression.is_empty() {
            vec![CompressionName(Compression::None)]
        } else {
            args.compression
                .iter()
                .map(|c| CompressionName(*c))
                .collect()
        },
        apis: if args.api.is_empty() {
            vec![Api::Produce, Api::Fetch]
        } else {
            args.api.clone()
        },
    };
    let method = Method {
        warmup_blocks: args.warmup.unwrap_or(DEFAULT_WARMUP_BLOCKS),
        repetitions: args.repetitions.unwrap_or(DEFAULT_REPETITIONS),
        block_records: args
            .block_records
            .unwrap_or(if quick { 20_000 } else { 200_000 }),
    };
    let mut cells = matrix.cells();
    if args.scaling {
        cells.retain(|c| {
            matches!(
                c.subject,
                Subject::KbenchBatch | Subject::KafkaProtocolBatch
            ) || c.version == Some(newest(c.api))
        });
    }
    let seed = args.seed.unwrap_or_else(kbench_bench::spec::random_seed);
    shuffle(&mut cells, seed);
    eprintln!(
        "kbench codec: {} cells, seed {seed} (vary it with --seed before believing a single-version result), {} repetitions after {} warm-up blocks{}",
        cells.len(),
        method.repetitions,
        method.warmup_blocks,
        if args.isolate {
            ", each cell in its own process"
        } else {
            ""
        }
    );
    let started = Instant::now();
    let mut results = Vec::with_capacity(cells.len());
    let bar = crate::progress::Progress::steps(&args.progress, cells.len() as u64, "cells");
    for (i, spec) in cells.iter().enumerate() {
        let result = if args.isolate {
            run_isolated(spec, method)
        } else {
            run_cell(*spec, method).map_err(|e| e.to_string())
        };
        match result {
            Ok(r) => {
                let message = format!("{}: {:.0} ns/record", spec.label(), r.ns_per_record);
                let line = (i + 1) % 50 == 0;
                let line = line.then(|| {
                    format!(
                        "  {}/{} cells, {:.0} s",
                        i + 1,
                        cells.len(),
                        started.elapsed().as_secs_f64()
                    )
                });
                bar.step(line.as_deref(), message);
                results.push(r);
            }
            Err(e) => {
                bar.finish();
                return Err(CliError::failed(format!("cell {}: {e}", spec.label())));
            }
        }
    }
    bar.finish();
    let counted = kbench_bench::measure::counting_allocations() || args.isolate;
    let text = if args.scaling {
        scaling_tables(&results)
    } else {
        tables(&results, tolerance(&args), noise_threshold(&args))
    };
    print!("{text}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &text)
            .map_err(|e| CliError::failed(format!("--markdown {}: {e}", path.display())))?;
    }
    println!("seed {seed}; {:.1} s", started.elapsed().as_secs_f64());
    if args.json.is_some() || args.store.store.is_some() {
        let doc = kbench_bench::codec::CodecDocument {
            header: Header::new(Kind::Codec),
            seed,
            isolated: args.isolate,
            method,
            matrix: matrix.clone(),
            scaling: args.scaling,
            noise_threshold: noise_threshold(&args),
            tolerance: tolerance(&args),
            allocations_counted: counted,
            duration_s: started.elapsed().as_secs_f64(),
            cells: results,
        };
        if let Some(path) = &args.json {
            crate::args::write_json(path, &doc)
                .map_err(|e| CliError::failed(format!("--json {e}")))?;
            eprintln!("kbench: wrote {}", path.display());
        }
        args.store.keep(&doc)?;
    }
    Ok(0)
}

fn newest(api: Api) -> i16 {
    match api {
        Api::Produce => *kbench_bench::codec::PRODUCE_VERSIONS.end(),
        Api::Fetch => *kbench_wire::fetch::FETCH_VERSIONS.end(),
    }
}

fn run_one(cell: &str, args: &CodecArgs) -> CliResult {
    let spec: CellSpec =
        serde_json::from_str(cell).map_err(|e| CliError::usage(format!("--run-cell: {e}")))?;
    let method = Method {
        warmup_blocks: args.warmup.unwrap_or(DEFAULT_WARMUP_BLOCKS),
        repetitions: args.repetitions.unwrap_or(DEFAULT_REPETITIONS),
        block_records: args.block_records.unwrap_or(200_000),
    };
    let result = run_cell(spec, method).map_err(CliError::failed)?;
    println!(
        "{}",
        serde_json::to_string(&result).map_err(CliError::failed)?
    );
    Ok(0)
}

fn run_isolated(spec: &CellSpec, method: Method) -> Result<CellResult, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cell = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(["codec", "--run-cell", &cell])
        .args(["--warmup", &method.warmup_blocks.to_string()])
        .args(["--repetitions", &method.repetitions.to_string()])
        .args(["--block-records", &method.block_records.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start a child process: {e}"))?;
    if !out.status.success() {
        return Err(format!("child process failed ({})", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("child process answered badly: {e}"))
}

fn fmt_allocs(a: Option<f64>) -> String {
    a.map_or_else(|| "n/a".into(), |a| format!("{a:.3}"))
}

fn tables(results: &[CellResult], tolerance: f64, noise: f64) -> String {
    let mut out = String::new();
    for ((api, shape, records, compression), cells) in groups(results) {
        let api_name = match api {
            Api::Produce => "Produce (build the complete request)",
            Api::Fetch => "Fetch (decode the complete response)",
        };
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{api_name} · {} × {records} records · {}",
            shape.name(),
            compression.0.name()
        );
        let _ = writeln!(
            out,
            "| version | ns/record | vs newest | spread | allocs/record | wire bytes | verdict |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        let newest_v = newest(api);
        let newest_cell = cells
            .iter()
            .find(|c| c.spec.version == Some(newest_v) && c.skipped.is_none());
        for c in &cells {
            let name = match c.spec.subject {
                Subject::KbenchBatch => "kbench batch".to_string(),
                Subject::KafkaProtocolBatch => "kafka-protocol batch".to_string(),
                _ => format!("v{}", c.spec.version.unwrap_or(-1)),
            };
            if let Some(why) = &c.skipped {
                let _ = writeln!(out, "| {name} | – | – | – | – | – | n/a: {why} |");
                continue;
            }
            let (vs, v) = match newest_cell {
                Some(n) => (
                    format!("{:.2}×", c.ns_per_record / n.ns_per_record),
                    if c.spec.version.is_some() {
                        verdict(c, n, tolerance, noise).to_string()
                    } else {
                        String::new()
                    },
                ),
                None => ("–".into(), String::new()),
            };
            let _ = writeln!(
                out,
                "| {name} | {:.1} | {vs} | {:.1} % | {} | {} | {v} |",
                c.ns_per_record,
                c.spread * 100.0,
                fmt_allocs(c.allocs_per_record),
                c.wire_bytes
            );
        }
        let batch = cells
            .iter()
            .find(|c| c.spec.subject == Subject::KbenchBatch && c.skipped.is_none());
        let kp = cells
            .iter()
            .find(|c| c.spec.subject == Subject::KafkaProtocolBatch && c.skipped.is_none());
        if let (Some(n), Some(b), Some(k)) = (newest_cell, batch, kp) {
            // The difference of two medians is only a cost when it is larger than their spreads.
            let framing = n.ns_per_record - b.ns_per_record;
            let noise = n.ns_per_record * n.spread + b.ns_per_record * b.spread;
            let framing = if framing > noise {
                format!("{framing:.1} ns/record (request or response minus batch)")
            } else {
                format!(
                    "not measurable: the request or response ({:.1} ns/record) and the batch alone ({:.1}) differ by less than their spread",
                    n.ns_per_record, b.ns_per_record
                )
            };
            let ratio = b.ns_per_record / k.ns_per_record;
            let side = if ratio <= 1.0 {
                format!("{:.1}× as fast", 1.0 / ratio)
            } else {
                format!("{ratio:.1}× as slow")
            };
            let _ = writeln!(
                out,
                "framing cost at v{newest_v}: {framing}; kbench's batch takes {ratio:.2}× kafka-protocol's time per record ({side})"
            );
        }
    }
    out
}

fn scaling_tables(results: &[CellResult]) -> String {
    let mut out = String::new();
    for api in [Api::Produce, Api::Fetch] {
        let mut rows: Vec<&CellResult> = results
            .iter()
            .filter(|r| r.spec.api == api && r.skipped.is_none())
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|r| (r.spec.subject, r.spec.records));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{} scaling · small records · ns/record by records per batch",
            if api == Api::Produce {
                "Encode (Produce)"
            } else {
                "Decode (Fetch)"
            }
        );
        let _ = writeln!(
            out,
            "| subject | records | ns/record | vs smallest | spread | allocs/record |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for subject in [
            Subject::ProduceRequest,
            Subject::FetchResponse,
            Subject::KbenchBatch,
            Subject::KafkaProtocolBatch,
        ] {
            let series: Vec<&&CellResult> =
                rows.iter().filter(|r| r.spec.subject == subject).collect();
            let Some(first) = series.first() else {
                continue;
            };
            for r in &series {
                let name = match subject {
                    Subject::KbenchBatch => "kbench batch".to_string(),
                    Subject::KafkaProtocolBatch => "kafka-protocol batch".to_string(),
                    _ => format!("v{}", r.spec.version.unwrap_or(-1)),
                };
                let _ = writeln!(
                    out,
                    "| {name} | {} | {:.1} | {:.2}× | {:.1} % | {} |",
                    r.spec.records,
                    r.ns_per_record,
                    r.ns_per_record / first.ns_per_record,
                    r.spread * 100.0,
                    fmt_allocs(r.allocs_per_record)
                );
            }
        }
    }
    out
}
