//! `kbench suite`: the protocol-version load test in the right order, one command. Tier 0 (codecs, no
//! broker) → tier 1 Produce (an embedded broker of its own) → tier 1 Fetch (a fresh broker) → tier 2
//! against `--legacy-bootstrap-server` if given. Every result is written, plus a combined Markdown
//! summary.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, Parser};

use crate::cli::{Cli, Command};

#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Folder for every result and the summary (default: kbench-results/suite-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Short runs everywhere (codec --quick, sweep --quick).
    #[arg(long)]
    pub quick: bool,
    /// Seed for every tier's cell order (default: random, printed and stored).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A cluster for tier 1 instead of the embedded brokers (both sweeps then share it).
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    /// A legacy broker for the tier-2 sanity run (versions negotiated unaided, not comparable).
    #[arg(long)]
    pub legacy_bootstrap_server: Option<String>,
}

/// One step: a kbench command line, its name, and the files it writes.
struct Step {
    title: &'static str,
    args: Vec<String>,
    markdown: PathBuf,
}

pub async fn run(args: SuiteArgs) -> u8 {
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = kbench_bench::result::rfc3339(SystemTime::now()).replace([':', '.'], "-");
        PathBuf::from("kbench-results").join(format!("suite-{stamp}"))
    });
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("kbench: error: --out {}: {e}", out.display());
        return 2;
    }
    let seed = args.seed.unwrap_or_else(crate::cli::random_seed);
    let file = |name: &str| out.join(name).display().to_string();
    let mut steps = vec![Step {
        title: "Tier 0 — codecs, no broker",
        args: strings(&[
            "codec",
            "--json",
            &file("codec.json"),
            "--markdown",
            &file("codec.md"),
        ]),
        markdown: out.join("codec.md"),
    }];
    for (api, title) in [
        ("produce", "Tier 1 — Produce, pinned"),
        ("fetch", "Tier 1 — Fetch, pinned, on a fresh broker"),
    ] {
        let mut a = strings(&[
            "sweep",
            "--api",
            api,
            "--json",
            &file(&format!("sweep-{api}.json")),
            "--markdown",
            &file(&format!("sweep-{api}.md")),
        ]);
        if let Some(b) = &args.bootstrap_server {
            a.extend(strings(&["--bootstrap-server", b]));
        }
        steps.push(Step {
            title,
            args: a,
            markdown: out.join(format!("sweep-{api}.md")),
        });
    }
    if let Some(legacy) = &args.legacy_bootstrap_server {
        steps.push(Step {
            title: "Tier 2 — legacy broker, unpinned (sanity run, not comparable)",
            args: strings(&[
                "sweep",
                "--no-pin",
                "--bootstrap-server",
                legacy,
                "--json",
                &file("sweep-legacy.json"),
                "--markdown",
                &file("sweep-legacy.md"),
            ]),
            markdown: out.join("sweep-legacy.md"),
        });
    }
    let mut worst = 0u8;
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "# kbench suite\n\nseed {seed}; results in `{}`\n",
        out.display()
    );
    for step in &mut steps {
        step.args.extend(strings(&["--seed", &seed.to_string()]));
        if args.quick {
            step.args.push("--quick".into());
        }
        eprintln!(
            "kbench suite: {} — kbench {}",
            step.title,
            step.args.join(" ")
        );
        let code = run_step(&step.args).await;
        worst = worst.max(code);
        let _ = writeln!(
            summary,
            "## {}\n\n`kbench {}` — exit {code}\n",
            step.title,
            step.args.join(" ")
        );
        match std::fs::read_to_string(&step.markdown) {
            Ok(md) => {
                let _ = writeln!(summary, "{md}");
            }
            Err(_) => {
                let _ = writeln!(
                    summary,
                    "(no tables: the step failed before writing them)\n"
                );
            }
        }
    }
    let summary_path = out.join("summary.md");
    if let Err(e) = std::fs::write(&summary_path, &summary) {
        eprintln!("kbench: error: {}: {e}", summary_path.display());
        return 1;
    }
    println!("Suite summary: {}", summary_path.display());
    worst
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

async fn run_step(args: &[String]) -> u8 {
    let line = std::iter::once("kbench".to_string()).chain(args.iter().cloned());
    match Cli::try_parse_from(line) {
        Ok(cli) => match cli.command {
            Command::Codec(a) => crate::codec::run(*a),
            Command::Sweep(a) => crate::sweep::run(*a).await,
            _ => 2,
        },
        Err(e) => {
            eprintln!("kbench: error: suite step: {e}");
            2
        }
    }
}
