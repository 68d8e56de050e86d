//! `kbench`: Kafka load testing and protocol benchmarking. This crate is the front end only: it parses
//! flags, starts the embedded broker when no cluster is named, runs a workload from `kbench-bench`,
//! and prints and writes its result.

use std::process::ExitCode;

/// Counts allocations so that `kbench codec` can report allocations per record.
#[global_allocator]
static ALLOCATOR: kbench_bench::measure::CountingAlloc = kbench_bench::measure::CountingAlloc;

fn main() -> ExitCode {
    kbench::main()
}
