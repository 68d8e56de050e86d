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
mod metrics;
mod progress;
pub mod report;
pub mod serve;
pub mod signals;
#[cfg(feature = "embedded-broker")]
mod tansu;
#[cfg(feature = "embedded-broker")]
mod tansu_sasl;
