//! `kbench`: Kafka load testing and protocol benchmarking. This crate is the front end only: it parses
//! flags, starts the embedded broker when no cluster is named, runs a workload from `kbench-bench`,
//! and prints and writes its result.

use std::process::ExitCode;

use clap::Parser;

use kbench::cli::{Cli, Command};
use kbench::{cmd, report, serve, signals};

/// Counts allocations so that `kbench codec` can report allocations per record.
#[global_allocator]
static ALLOCATOR: kbench_bench::measure::CountingAlloc = kbench_bench::measure::CountingAlloc;

/// Keep freed record-batch and request buffers mapped. glibc hands every freed buffer above its
/// mmap threshold (128 KiB at first) back to the kernel, and trims the heap's top above 128 KiB, so at
/// 1 MB batches every batch and every request frame was a fresh mapping: page faults and zeroing
/// were a quarter of the client's CPU (docs/PERFORMANCE.md). Raising both thresholds lets freed
/// buffers be reused; the cost is that the peak stays resident.
fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 * 1024 * 1024);
    }
}

fn main() -> ExitCode {
    keep_freed_buffers();
    let cli = Cli::parse();
    let command = match cli.command {
        // Pure computation: no runtime, no broker.
        Command::Codec(args) => return ExitCode::from(cmd::codec::run(*args)),
        Command::Compare(args) => return ExitCode::from(cmd::compare::run(args)),
        Command::Report(args) => return ExitCode::from(report::run(args)),
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
            Command::Consume(args) => cmd::consume::run(*args).await,
            Command::Omb(args) => cmd::omb::run(*args).await,
            Command::Quickstart(args) => cmd::produce::quickstart(args).await,
            Command::Broker(args) => cmd::broker::run(args).await,
            Command::Codec(args) => cmd::codec::run(*args),
            Command::Compare(args) => cmd::compare::run(args),
            Command::Report(args) => report::run(args),
            Command::Sweep(args) => cmd::sweep::run(*args).await,
            Command::Suite(args) => cmd::suite::run(args).await,
            Command::E2e(args) => cmd::e2e::run(*args).await,
            Command::Serve(args) => serve::run(*args, false).await,
            Command::Agent(args) => serve::run(*args, true).await,
        }
    });
    ExitCode::from(code)
}
