#![no_main]
//! `kbench_fuzz::sasl` under libFuzzer (see crates/kbench-fuzz and docs/FUZZING.md).

use libfuzzer_sys::fuzz_target;

// The kbench binary's allocator underneath: a count from the wire reserves address space lazily.
#[global_allocator]
static ALLOCATOR: kbench_wire::alloc::Reserving<std::alloc::System> =
    kbench_wire::alloc::Reserving(std::alloc::System);

fuzz_target!(|data: &[u8]| kbench_fuzz::sasl(data));
