//! `kbench`'s front ends as a library: the CLI's subcommands, `kbench serve` / `kbench agent`, the
//! report, and the embedded broker. The `kbench` binary (`main.rs`) is a thin shell over it; the fuzz
//! targets (`crates/kbench-fuzz`) reach the HTTP API's body parsers through `serve::payloads`.

mod args;
pub mod cli;
pub mod cmd;
mod coordinator;
#[cfg(test)]
mod defaults_agree;
mod embedded;
mod faults;
mod harness;
mod metrics;
mod perf_test;
mod progress;
pub mod report;
pub mod serve;
pub mod signals;
mod store;
#[cfg(feature = "embedded-broker")]
mod tansu;
#[cfg(feature = "embedded-broker")]
mod tansu_sasl;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

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

/// The whole of the `kbench` binary: parse the arguments, run the subcommand, exit with its code.
/// Non-generic and not async, so every workload's futures are compiled here, once, and the binary
/// only links them (built in the binary, the same code cost three minutes of every build).
pub fn main() -> ExitCode {
    keep_freed_buffers();
    let cli = Cli::parse();
    let command = match cli.command {
        // Pure computation: no runtime, no broker.
        Command::Codec(args) => return ExitCode::from(harness::exit_code(cmd::codec::run(*args))),
        Command::Compare(args) => {
            return ExitCode::from(harness::exit_code(cmd::compare::run(args)));
        }
        Command::Report(args) => return ExitCode::from(harness::exit_code(report::run(args))),
        Command::History(args) => {
            return ExitCode::from(harness::exit_code(cmd::history::run(args)));
        }
        other => other,
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KBENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR set (no-color.org): a pipe or a log
        // file gets plain text.
        .with_ansi(colour_on_stderr())
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
            Command::Produce(args) => {
                harness::exit_code(cmd::produce::run(*args, cmd::produce::Mode::Produce).await)
            }
            Command::Consume(args) => harness::exit_code(cmd::consume::run(*args).await),
            Command::Omb(args) => harness::exit_code(cmd::omb::run(*args).await),
            Command::Quickstart(args) => harness::exit_code(cmd::produce::quickstart(args).await),
            Command::Broker(args) => harness::exit_code(cmd::broker::run(args).await),
            Command::Codec(args) => harness::exit_code(cmd::codec::run(*args)),
            Command::Compare(args) => harness::exit_code(cmd::compare::run(args)),
            Command::Report(args) => harness::exit_code(report::run(args)),
            Command::History(args) => harness::exit_code(cmd::history::run(args)),
            Command::Sweep(args) => harness::exit_code(cmd::sweep::run(*args).await),
            Command::Suite(args) => harness::exit_code(cmd::suite::run(args).await),
            Command::E2e(args) => harness::exit_code(cmd::e2e::run(*args).await),
            Command::E2eLatency(args) => harness::exit_code(cmd::e2e_latency::run(*args).await),
            Command::Serve(args) => harness::exit_code(serve::run(*args, false).await),
            Command::Agent(args) => harness::exit_code(serve::run(*args, true).await),
        }
    });
    // Tasks still running (a broker's connections, a server's idle keep-alives) are dropped, and a
    // blocking task still running is not waited for past this: the process ends on the first stop.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}

/// Whether stderr takes terminal colour: a terminal, and `NO_COLOR` unset or empty.
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
