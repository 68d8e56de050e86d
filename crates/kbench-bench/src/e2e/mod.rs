//! The end-to-end workload: N producers and one consumer in a fresh consumer group.
//!
//! Each producer sends a batch of a random number of records (each of a random size) after a random
//! interval, all drawn from a seeded PRNG within inclusive ranges. Every record carries its identity
//! (run tag, producer, sequence) and its send time. The consumer is joined and positioned *before*
//! any producer starts, so no record of the run can fall before its start. On stop, producers stop
//! sending and every request in flight resolves (acknowledged or failed); then the consumer drains
//! until it has every acknowledged record or the drain time runs out, and missing records are read
//! again by offset: *late* when found on the broker, *lost* when not. Duplicates are counted by record
//! id. Counts are records, not requests: produced = acknowledged + failed.
//!
//! Layout: [`spec`] (settings, defaults, validation), [`live`] (counters while running, the run's
//! figures after), `phases` (the driver interface and everything both drivers share), and the two
//! drivers, `native` (the Kafka protocol) and `rest` (a Kafka REST Proxy). Drivers import `phases`;
//! `phases` imports no driver.

pub mod live;
pub(crate) mod native;
pub(crate) mod phases;
pub mod reply;
pub mod rest;
pub mod spec;

use std::sync::Arc;

use kbench_client::ClusterConfig;

use crate::error::BenchError;
pub use crate::spec::Span;
pub use live::{E2eLive, E2eRun, E2eSnapshot, RestFigures, SegmentFigures, Segments};
pub use native::SENT_HEADER;
pub use phases::{CLOSED_LOOP_TIMEOUT, RECORD_ID_LEN};
pub use reply::{AppLag, Correlation, LagSample, ReplySpec};
pub use spec::{CommitMode, E2eMode, E2eSpec, ProducerSegment, RestApi, RestSpec, clock_for};

/// One partition's acknowledged records that were on the broker and not read by the end of the
/// drain (found by reading them again by offset, from outside the group): unread, never lost.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UnreadPartition {
    pub records: u64,
    /// `no reader for the last T s` (no member owned it at the end), `the group was rebalancing
    /// when the drain ended`, or `not read by the end of the drain`.
    pub reason: String,
}

/// Run the e2e workload until `stop` or `spec.duration` ends the load, then drain. `cluster`
/// is where the native driver connects (each producer and the consumer on connections of their own);
/// a spec with `rest` goes through the proxy instead. `live` is updated as the run goes. Fails only
/// when the run cannot start (invalid spec, no broker, no group, no proxy); later errors are counted.
pub async fn run_e2e(
    spec: &E2eSpec,
    cluster: &ClusterConfig,
    live: Arc<E2eLive>,
    stop: crate::Stop,
) -> Result<E2eRun, BenchError> {
    let stop = stop.token().clone();
    spec.validate()?;
    if spec.verify {
        let producers = spec
            .mode
            .has_producers()
            .then_some((spec.producer_base, spec.producers));
        *live.verify.lock().expect("verify lock") = Some(live::E2eVerify::new(producers));
    }
    if spec.keep_trips {
        let capacity = spec.records.unwrap_or(0).min(1 << 20) as usize;
        *live.trips.lock().expect("trips lock") = Some(Vec::with_capacity(capacity));
    }
    // Connecting (and creating the topic) ends at the first stop too, as every later phase does.
    let before_load = || BenchError::Run("stopped before the run began".into());
    match &spec.rest {
        Some(rest) => {
            let driver = tokio::select! {
                d = rest::Rest::new(spec, rest) => d?,
                _ = stop.cancelled() => return Err(before_load()),
            };
            live.connected
                .store(true, std::sync::atomic::Ordering::Relaxed);
            phases::run_with(driver, live, stop).await
        }
        None => {
            let driver = tokio::select! {
                d = native::Native::new(spec, cluster) => d?,
                _ = stop.cancelled() => return Err(before_load()),
            };
            live.topic_created
                .store(driver.created, std::sync::atomic::Ordering::Relaxed);
            live.connected
                .store(true, std::sync::atomic::Ordering::Relaxed);
            phases::run_with(driver, live, stop).await
        }
    }
}
