//! `kbench suite`: the protocol-version load test in the right order, one command. Tier 0 (codecs, no
//! broker) → tier 1 Produce (an embedded broker of its own) → tier 1 Fetch (a fresh broker) → tier 2
//! against `--legacy-bootstrap-server` if given. Every result is written, plus a combined Markdown
//! summary.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::SystemTime;

use clap::Args;
use kbench_wire::ApiKey;

use crate::cmd::codec::CodecArgs;
use crate::cmd::sweep::SweepArgs;

use crate::harness::{CliError, CliResult};

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
    /// Connection and security properties (-X, --command-config) for --bootstrap-server and
    /// --legacy-bootstrap-server; the embedded brokers are plaintext.
    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,
}

/// One step: its name, the command it runs, and the tables it writes.
struct Step {
    title: &'static str,
    command: StepCommand,
    markdown: PathBuf,
}

enum StepCommand {
    Codec(CodecArgs),
    Sweep(SweepArgs),
}

impl StepCommand {
    /// The command as a user would type it, for the log and the summary.
    fn line(&self) -> String {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let mut words: Vec<String> = Vec::new();
        let (name, quick, seed, json, markdown) = match self {
            StepCommand::Codec(a) => ("codec", a.quick, a.seed, path(&a.json), path(&a.markdown)),
            StepCommand::Sweep(a) => ("sweep", a.quick, a.seed, path(&a.json), path(&a.markdown)),
        };
        words.push(name.into());
        if let StepCommand::Sweep(a) = self {
            if a.no_pin {
                words.push("--no-pin".into());
            }
            for api in &a.api {
                words.extend(["--api".into(), kbench_wire::api_name(*api).to_lowercase()]);
            }
            if let Some(b) = &a.bootstrap_server {
                words.extend(["--bootstrap-server".into(), b.clone()]);
            }
            words.extend(a.connection.shown_args());
        }
        for (flag, value) in [("--json", json), ("--markdown", markdown)] {
            if let Some(v) = value {
                words.extend([flag.into(), v]);
            }
        }
        if let Some(s) = seed {
            words.extend(["--seed".into(), s.to_string()]);
        }
        if quick {
            words.push("--quick".into());
        }
        words.join(" ")
    }

    /// The step's exit code (its error, if it failed to run, said as it would be alone).
    async fn run(self) -> u8 {
        crate::harness::exit_code(match self {
            StepCommand::Codec(a) => crate::cmd::codec::run(a),
            StepCommand::Sweep(a) => crate::cmd::sweep::run(a).await,
        })
    }
}

pub async fn run(args: SuiteArgs) -> CliResult {
    let secured =
        !args.connection.property.is_empty() || !args.connection.command_config.is_empty();
    if secured && args.bootstrap_server.is_none() && args.legacy_bootstrap_server.is_none() {
        return Err(CliError::usage(
            "-X/--command-config apply to --bootstrap-server and --legacy-bootstrap-server; the embedded brokers take none",
        ));
    }
    args.connection.settings()?;
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = kbench_bench::result::rfc3339(SystemTime::now()).replace([':', '.'], "-");
        PathBuf::from("kbench-results").join(format!("suite-{stamp}"))
    });
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError::usage(format!("--out {}: {e}", out.display())))?;
    let seed = args.seed.unwrap_or_else(kbench_bench::spec::random_seed);
    let file = |name: &str| Some(out.join(name));
    let mut steps = vec![Step {
        title: "Tier 0 — codecs, no broker",
        command: StepCommand::Codec(CodecArgs {
            quick: args.quick,
            seed: Some(seed),
            json: file("codec.json"),
            markdown: file("codec.md"),
            ..CodecArgs::default()
        }),
        markdown: out.join("codec.md"),
    }];
    for (api, name, title) in [
        (ApiKey::Produce, "produce", "Tier 1 — Produce, pinned"),
        (
            ApiKey::Fetch,
            "fetch",
            "Tier 1 — Fetch, pinned, on a fresh broker",
        ),
    ] {
        steps.push(Step {
            title,
            command: StepCommand::Sweep(SweepArgs {
                api: vec![api],
                quick: args.quick,
                seed: Some(seed),
                bootstrap_server: args.bootstrap_server.clone(),
                connection: args.connection.clone(),
                json: file(&format!("sweep-{name}.json")),
                markdown: file(&format!("sweep-{name}.md")),
                ..SweepArgs::default()
            }),
            markdown: out.join(format!("sweep-{name}.md")),
        });
    }
    if let Some(legacy) = &args.legacy_bootstrap_server {
        steps.push(Step {
            title: "Tier 2 — legacy broker, unpinned (sanity run, not comparable)",
            command: StepCommand::Sweep(SweepArgs {
                no_pin: true,
                quick: args.quick,
                seed: Some(seed),
                bootstrap_server: Some(legacy.clone()),
                connection: args.connection.clone(),
                json: file("sweep-legacy.json"),
                markdown: file("sweep-legacy.md"),
                ..SweepArgs::default()
            }),
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
    for step in steps {
        let line = step.command.line();
        eprintln!("kbench suite: {} — kbench {line}", step.title);
        let code = step.command.run().await;
        worst = worst.max(code);
        let _ = writeln!(
            summary,
            "## {}\n\n`kbench {line}` — exit {code}\n",
            step.title
        );
        match kbench_client::input::read_text(&step.markdown, kbench_client::input::TEXT) {
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
    std::fs::write(&summary_path, &summary)
        .map_err(|e| CliError::failed(format!("{}: {e}", summary_path.display())))?;
    println!("Suite summary: {}", summary_path.display());
    Ok(worst)
}
