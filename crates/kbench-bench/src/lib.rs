//! Workloads, measurement and results: what kbench runs against a cluster, how it times and counts
//! it, and the result document every run writes.
//!
//! Measurement rules kept here, once: latency in HdrHistograms (µs), from the *intended* send time when
//! a rate is set; client CPU from getrusage of this process over the measured phase only; every record
//! accounted for (sent = acked + failed).

pub mod broker_metrics;
pub mod changepoint;
pub mod clock;
pub mod cluster;
pub mod codec;
pub mod compare;
pub mod consume;
pub mod distributed;
pub mod document;
pub mod e2e;
pub mod error;
pub mod fault;
pub mod group;
pub mod history;
pub mod iso8601;
pub mod latest;
pub mod measure;
pub mod omb;
pub mod pace;
pub mod produce;
pub mod ranges;
pub mod result;
pub mod schema;
pub mod seed_service;
pub mod shape;
pub mod slo;
pub mod spec;
pub mod stop;
pub mod sweep;
pub mod timeline;
pub mod verify;
pub mod yaml;

pub use error::{BenchError, SpecError};
pub use measure::{CpuTime, LatencySummary};
pub use produce::{IntervalReport, Keys, Payload, ProduceRun, ProduceSpec, run_produce};
pub use result::{Environment, Header, Kind, ResultDocument, SCHEMA_VERSION, Target};
pub use stop::Stop;
