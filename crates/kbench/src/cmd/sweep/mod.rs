//! `kbench sweep`: tier 1, every Produce and Fetch version the broker and kbench share, pinned one
//! cell at a time against one broker (the embedded one unless `--bootstrap-server`), in a seeded
//! shuffled order, with the guards and verdicts of `kbench_bench::sweep`.

mod tables;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use kbench_bench::broker_metrics::Conversions;
use kbench_bench::result::{Header, Kind};
use kbench_bench::sweep::{
    CellStatus, Guard, SweepResult, SweepSettings, cells, grouped, run_cell, seed_fetch_topic,
    shuffle, verdict,
};
use kbench_client::{Cluster, ClusterConfig, ConnectionSettings};
use kbench_wire::{ApiKey, Pins, kbench_range};
use serde::Serialize;

use crate::embedded::bootstrap_or_embedded;

use crate::harness::{CliError, CliResult};

#[derive(Debug, Args, Default)]
pub struct SweepArgs {
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    /// Kafka bootstrap servers; without it, kbench starts an embedded broker.
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,
    /// Timed repetitions per cell (the median is reported; default 5).
    #[arg(long, value_parser = crate::args::at_least::<3>)]
    pub repetitions: Option<usize>,
    /// Seed for the cell order (default: random; printed and stored).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A short run: a tenth of the records, 3 repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Produce versions to sweep, e.g. 3-11 or 3,7,11 (default: all the broker and kbench share).
    #[arg(long, value_parser = parse_versions)]
    pub produce_versions: Option<VersionList>,
    /// Fetch versions to sweep, e.g. 4-17 (default: all the broker and kbench share).
    #[arg(long, value_parser = parse_versions)]
    pub fetch_versions: Option<VersionList>,
    /// No progress for this long stalls a repetition (retried 3 times, then the cell is abandoned;
    /// default 30s).
    #[arg(long, value_parser = crate::args::parse_duration)]
    pub stall_timeout: Option<Duration>,
    /// Spread (IQR / median) above which a verdict is "inside noise floor" (default 0.15).
    #[arg(long, value_parser = crate::args::fraction)]
    pub noise_threshold: Option<f64>,
    /// APIs to sweep, comma-separated: produce, fetch.
    #[arg(long, value_delimiter = ',', value_parser = parse_api)]
    pub api: Vec<ApiKey>,
    /// Prometheus page of the broker (JMX exporter) to check that it converted no messages.
    #[arg(long, value_name = "URL")]
    pub broker_metrics: Option<String>,
    /// Tier 2: no pins; use whatever the broker negotiates (a sanity run, not comparable).
    #[arg(long)]
    pub no_pin: bool,
    /// Run each cell in its own child process (its peak RSS is then its own, and RSS is judged too).
    #[arg(long)]
    pub isolate: bool,
    /// Internal: run one cell (JSON) and print its result as JSON (used by --isolate).
    #[arg(long, hide = true)]
    pub run_cell: Option<String>,
    /// Write the result document to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the tables as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// `--store DB`, `--build-label`, `--target-label`: the result kept in the results store.
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
}

fn parse_api(s: &str) -> Result<ApiKey, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "produce" => Ok(ApiKey::Produce),
        "fetch" => Ok(ApiKey::Fetch),
        other => Err(format!("unknown API {other:?} (expected produce or fetch)")),
    }
}

/// Versions given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionList(pub Vec<i16>);

/// `3-11`, `3,7,11`, or a mix.
fn parse_versions(s: &str) -> Result<VersionList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("expected versions like 3-11 or 3,7,11, got {part:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (i16, i16) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err("no versions given".into());
    }
    Ok(VersionList(out))
}

/// Whether `guard` failed in any cell.
fn failed_guard(results: &[SweepResult], guard: Guard) -> bool {
    results.iter().any(|r| {
        matches!(
            &r.status,
            CellStatus::Error { guard: Some(g), .. } if *g == guard
        )
    })
}

/// What an isolated cell's child process is given.
#[derive(Debug, Serialize, serde::Deserialize)]
struct IsolatedCell {
    settings: SweepSettings,
    cell: kbench_bench::sweep::SweepCell,
    produce_topic: String,
    seeded: kbench_bench::sweep::SeededTopic,
}

/// What every cell of one sweep runs against: the settings, the topics, the broker, and where the
/// cell runs (in this process, or with `--isolate` in a child process of its own).
struct Runner<'a> {
    args: &'a SweepArgs,
    settings: &'a SweepSettings,
    bootstrap: &'a str,
    produce_topic: String,
    seeded: kbench_bench::sweep::SeededTopic,
}

impl Runner<'_> {
    /// Every cell in the order given, a progress line after each.
    async fn run_all(&self, cells: &[kbench_bench::sweep::SweepCell]) -> Vec<SweepResult> {
        let mut results = Vec::with_capacity(cells.len());
        let bar =
            crate::progress::Progress::steps(&self.args.progress, cells.len() as u64, "cells");
        for (i, cell) in cells.iter().enumerate() {
            let r = if self.args.isolate {
                self.run_isolated(cell).await
            } else {
                run_cell(self.settings, *cell, &self.produce_topic, &self.seeded).await
            };
            let state = cell_state(&r);
            bar.step(
                Some(&format!(
                    "  [{}/{}] {}: {state}",
                    i + 1,
                    cells.len(),
                    r.label
                )),
                format!("{}: {state}", r.label),
            );
            results.push(r);
        }
        bar.finish();
        results
    }

    /// The parent side of `--isolate`: one cell run by a child process (`--run-cell`), its result
    /// read from the child's output; a child that fails makes the cell an error.
    async fn run_isolated(&self, cell: &kbench_bench::sweep::SweepCell) -> SweepResult {
        let job = IsolatedCell {
            settings: self.settings.clone(),
            cell: *cell,
            produce_topic: self.produce_topic.clone(),
            seeded: self.seeded.clone(),
        };
        let failed = |reason: String| {
            SweepResult::new(
                *cell,
                CellStatus::Error {
                    reason,
                    guard: None,
                },
            )
        };
        let (exe, json) = match (std::env::current_exe(), serde_json::to_string(&job)) {
            (Ok(exe), Ok(json)) => (exe, json),
            (Err(e), _) => return failed(e.to_string()),
            (_, Err(e)) => return failed(e.to_string()),
        };
        let out = tokio::process::Command::new(exe)
            .args([
                "sweep",
                "--bootstrap-server",
                self.bootstrap,
                "--run-cell",
                &json,
            ])
            .args(self.args.connection.as_args())
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .output()
            .await;
        match out {
            Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| failed(format!("child process answered badly: {e}"))),
            Ok(out) => failed(format!("child process failed ({})", out.status)),
            Err(e) => failed(format!("cannot start a child process: {e}")),
        }
    }
}

/// A finished cell in a few words, for its progress line.
fn cell_state(r: &SweepResult) -> String {
    match &r.status {
        CellStatus::Completed => format!(
            "{:.3} µs/msg, {:.0} msg/s",
            r.cpu_us_per_msg, r.msgs_per_sec
        ),
        CellStatus::Abandoned { reason } => format!("abandoned: {reason}"),
        CellStatus::Error { reason, .. } => format!("error: {reason}"),
    }
}

/// The child side of `--isolate`.
async fn run_one(job: &str, args: &SweepArgs) -> CliResult {
    let bootstrap = args.bootstrap_server.as_ref();
    let client = args.connection.settings()?;
    let job: IsolatedCell =
        serde_json::from_str(job).map_err(|e| CliError::usage(format!("--run-cell: {e}")))?;
    let mut settings = job.settings;
    settings.bootstrap = bootstrap
        .map(|b| b.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    settings.tls = client.tls;
    let result = run_cell(&settings, job.cell, &job.produce_topic, &job.seeded).await;
    println!(
        "{}",
        serde_json::to_string(&result).map_err(CliError::failed)?
    );
    Ok(0)
}

pub async fn run(args: SweepArgs) -> CliResult {
    if let Some(job) = &args.run_cell {
        return run_one(job, &args).await;
    }
    crate::args::check_outputs(&[
        ("--json", args.json.as_deref()),
        ("--markdown", args.markdown.as_deref()),
    ])?;
    args.store.check().map_err(CliError::usage)?;
    sweep(args).await.map_err(CliError::failed)
}

async fn sweep(args: SweepArgs) -> Result<u8, String> {
    let (servers, embedded) = bootstrap_or_embedded(args.bootstrap_server.as_deref())
        .await
        .map_err(|(_, e)| e)?;
    let result = drive(&args, &servers.join(","), embedded.is_some()).await;
    if let Some(b) = embedded {
        b.stop().await;
    }
    result
}

/// The sweep against `bootstrap`: its settings, every cell in a seeded shuffled order, then the
/// tables, the Markdown and result files, and the exit code.
async fn drive(args: &SweepArgs, bootstrap: &str, embedded: bool) -> Result<u8, String> {
    let (settings, conversions_before) = prepare(args, bootstrap).await?;
    let run_id = std::process::id();
    let produce_topic = format!("kbench-sweep-produce-{run_id}");
    let fetch_topic = format!("kbench-sweep-fetch-{run_id}");
    let mut cells = cells(&settings);
    shuffle(&mut cells, settings.seed);
    eprintln!(
        "kbench sweep: {} cells (Produce v{:?}, Fetch v{:?}), seed {} — vary it with --seed before believing a single-version result",
        cells.len(),
        settings.produce_versions,
        settings.fetch_versions,
        settings.seed
    );
    let started = Instant::now();
    let seeded = seed_fetch_topic(&settings, &fetch_topic)
        .await
        .map_err(|e| e.to_string())?;
    let runner = Runner {
        args,
        settings: &settings,
        bootstrap,
        produce_topic,
        seeded,
    };
    let results = runner.run_all(&cells).await;
    let conversions = conversions_over(args, conversions_before).await?;
    let sweep = Finished {
        args,
        bootstrap,
        embedded,
        settings: &settings,
        results,
        conversions,
        started,
    };
    let tables = sweep.tables();
    print!("{tables}");
    println!(
        "seed {}; {:.0} s",
        settings.seed,
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.markdown {
        std::fs::write(path, &tables).map_err(|e| format!("--markdown {}: {e}", path.display()))?;
    }
    let doc = sweep.document();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        crate::args::write_atomic(path, |out| {
            std::io::Write::write_all(out, (text + "\n").as_bytes())
        })
        .map_err(|e| format!("--json {e}"))?;
        eprintln!("kbench: wrote {}", path.display());
    }
    args.store.try_keep(&doc)?;
    Ok(sweep.exit_code())
}

/// The sweep's settings, from the flags and the versions the broker supports (asked over one probe
/// connection), and the broker's conversion counters before any cell (with `--broker-metrics`).
async fn prepare(
    args: &SweepArgs,
    bootstrap: &str,
) -> Result<(SweepSettings, Option<Conversions>), String> {
    let servers: Vec<String> = bootstrap
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let client = args.connection.settings()?;
    let probe = Cluster::connect(ClusterConfig {
        max_in_flight: 1,
        client_id: "kbench-sweep-probe".into(),
        ..client.cluster_config(servers.clone(), Pins::default())
    })
    .await
    .map_err(|e| format!("--bootstrap-server {bootstrap}: {e}"))?;
    let ranges = probe.bootstrap_ranges();
    // Every version both the broker and kbench support.
    let default_versions = |api: ApiKey| -> Vec<i16> {
        let common = ranges.get(api).map(|b| b.intersect(&kbench_range(api)));
        common.map_or_else(Vec::new, |r| (r.min..=r.max).collect())
    };
    let settings = settings_of(args, servers, &client, &default_versions);
    let conversions_before = match &args.broker_metrics {
        Some(url) => Some(
            kbench_bench::broker_metrics::scrape(url)
                .await
                .map_err(|e| format!("--broker-metrics {e}"))?,
        ),
        None => None,
    };
    probe.close(Duration::from_secs(1)).await;
    Ok((settings, conversions_before))
}

/// The flags as settings: each count and threshold given, or its default (`--quick` scaling some
/// down), and the versions to sweep of those `shared` (both the broker and kbench support).
fn settings_of(
    args: &SweepArgs,
    servers: Vec<String>,
    client: &ConnectionSettings,
    shared: &dyn Fn(ApiKey) -> Vec<i16>,
) -> SweepSettings {
    SweepSettings {
        bootstrap: servers,
        tls: client.tls.clone(),
        sasl: client.sasl.clone(),
        security_protocol: client.security.protocol.name().into(),
        sasl_mechanism: client.sasl.as_ref().map(|s| s.mechanism.name().into()),
        repetitions: match (args.repetitions, args.quick) {
            (Some(r), _) => r,
            (None, true) => 3,
            (None, false) => kbench_bench::sweep::DEFAULT_REPETITIONS,
        },
        scale_down: if args.quick { 10 } else { 1 },
        stall_timeout: args
            .stall_timeout
            .unwrap_or(kbench_bench::sweep::DEFAULT_STALL_TIMEOUT),
        noise_threshold: args
            .noise_threshold
            .unwrap_or(kbench_bench::sweep::DEFAULT_NOISE_THRESHOLD),
        seed: args.seed.unwrap_or_else(kbench_bench::spec::random_seed),
        value_size: 100,
        fetch_seed_records: if args.quick { 5_000 } else { 50_000 },
        max_bytes: vec![4 * 1024, 64 * 1024, 1024 * 1024],
        produce_versions: versions_for(
            args,
            ApiKey::Produce,
            args.produce_versions.as_ref(),
            shared,
        ),
        fetch_versions: versions_for(args, ApiKey::Fetch, args.fetch_versions.as_ref(), shared),
        no_pin: args.no_pin,
    }
}

/// The broker's message conversions over the sweep, as the tables and the guards say them ("not
/// checked" without `--broker-metrics`; "FAILED: …" when there were any).
async fn conversions_over(args: &SweepArgs, before: Option<Conversions>) -> Result<String, String> {
    Ok(match (&args.broker_metrics, before) {
        (Some(url), Some(before)) => {
            let after = kbench_bench::broker_metrics::scrape(url)
                .await
                .map_err(|e| format!("--broker-metrics {e}"))?;
            let (p, f) = (after.produce - before.produce, after.fetch - before.fetch);
            if p == 0.0 && f == 0.0 {
                "0 (produce and fetch message conversions unchanged during the sweep)".to_string()
            } else {
                format!(
                    "FAILED: the broker converted {p} produce and {f} fetch messages during the sweep"
                )
            }
        }
        _ => "not checked".to_string(),
    })
}

/// A finished sweep: every cell's result and the broker's conversions over it, with what its
/// tables, its result document and its exit code are said against.
struct Finished<'a> {
    args: &'a SweepArgs,
    bootstrap: &'a str,
    embedded: bool,
    settings: &'a SweepSettings,
    results: Vec<SweepResult>,
    conversions: String,
    started: Instant,
}

impl Finished<'_> {
    /// The tables, as printed and written by `--markdown`: a table per group of cells, then the
    /// per-record cost growth.
    fn tables(&self) -> String {
        let mut out = tables::groups(
            &self.results,
            self.settings.noise_threshold,
            self.embedded,
            self.settings.no_pin,
            &self.conversions,
            self.args.isolate,
        );
        tables::growth(&mut out, &self.results);
        out
    }

    /// The guards, each true when no cell failed it.
    fn guards(&self) -> kbench_bench::sweep::Guards {
        let results = &self.results;
        kbench_bench::sweep::Guards {
            negotiated_equals_pin: results.iter().all(|r| {
                !matches!(r.status, CellStatus::Completed) || r.negotiated == Some(r.cell.version())
            }),
            records_read_equal_seeded: !failed_guard(results, Guard::RecordsReadEqualSeeded),
            timestamps_from_clock: !failed_guard(results, Guard::TimestampsFromClock),
            no_protocol_anomalies: !failed_guard(results, Guard::NoProtocolAnomalies),
            conversions: self.conversions.clone(),
        }
    }

    /// The result document (`--json`, `--store`), each cell with its verdict.
    fn document(&self) -> kbench_bench::sweep::SweepDocument {
        let groups = grouped(&self.results);
        let verdict_of = |r: &SweepResult| {
            let group = groups
                .iter()
                .find(|(g, _)| *g == r.cell.group())
                .map(|(_, v)| v.as_slice())
                .unwrap_or(&[]);
            verdict(r, group, self.settings.noise_threshold, self.args.isolate)
        };
        kbench_bench::sweep::SweepDocument {
            header: Header::new(Kind::Sweep),
            bootstrap_servers: self.bootstrap.to_string(),
            embedded_broker: self.embedded,
            seed: self.settings.seed,
            settings: self.settings.clone(),
            guards: self.guards(),
            duration_s: self.started.elapsed().as_secs_f64(),
            cells: self
                .results
                .iter()
                .map(|r| kbench_bench::sweep::SweepCellDoc {
                    result: r.clone(),
                    verdict: verdict_of(r).to_string(),
                })
                .collect(),
        }
    }

    /// 0 when every cell completed and the broker converted no messages; else 1.
    fn exit_code(&self) -> u8 {
        let all_completed = self
            .results
            .iter()
            .all(|r| matches!(r.status, CellStatus::Completed));
        let conversions_ok = !self.conversions.starts_with("FAILED");
        if all_completed && conversions_ok {
            0
        } else {
            1
        }
    }
}

/// The versions to sweep for `api`: none if `--api` leaves it out; the broker's own choice with
/// `--no-pin`; the given list; or every version both sides share.
fn versions_for(
    args: &SweepArgs,
    api: ApiKey,
    given: Option<&VersionList>,
    shared: &dyn Fn(ApiKey) -> Vec<i16>,
) -> Vec<i16> {
    if !args.api.is_empty() && !args.api.contains(&api) {
        return Vec::new();
    }
    if args.no_pin {
        return shared(api).last().copied().into_iter().collect();
    }
    given.map_or_else(|| shared(api), |v| v.0.clone())
}
