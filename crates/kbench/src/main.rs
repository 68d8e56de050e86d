//! `kbench`: Kafka load testing and protocol benchmarking. This crate is the front end only: it parses
//! flags, starts the embedded broker when no cluster is named, runs a workload from `kbench-bench`,
//! and prints and writes its result.

mod args;
mod cli;
mod cmd;
#[cfg(test)]
mod defaults_agree;
mod embedded;
mod serve;
mod signals;
#[cfg(feature = "embedded-broker")]
mod tansu;
#[cfg(feature = "embedded-broker")]
mod tansu_sasl;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// Counts allocations so that `kbench codec` can report allocations per record.
#[global_allocator]
static ALLOCATOR: kbench_bench::measure::CountingAlloc = kbench_bench::measure::CountingAlloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        // Pure computation: no runtime, no broker.
        Command::Codec(args) => return ExitCode::from(cmd::codec::run(*args)),
        Command::Compare(args) => return ExitCode::from(cmd::compare::run(args)),
        other => other,
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KBENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    // One thread drives the client: the hot path never crosses threads, and the process's CPU time is
    // the client's cost. The broker, when embedded, is another process.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kbench: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async move {
        signals::install();
        match command {
            Command::Produce(args) => cmd::produce::run(*args, cmd::produce::Mode::Produce).await,
            Command::Quickstart(args) => cmd::produce::quickstart(args).await,
            Command::Broker(args) => cmd::broker::run(args).await,
            Command::Codec(args) => cmd::codec::run(*args),
            Command::Compare(args) => cmd::compare::run(args),
            Command::Sweep(args) => cmd::sweep::run(*args).await,
            Command::Suite(args) => cmd::suite::run(args).await,
            Command::E2e(args) => cmd::e2e::run(*args).await,
            Command::Serve(args) => serve::run(*args).await,
        }
    });
    ExitCode::from(code)
}
