//! What the cluster did while an engine (producer or consumer) worked: metadata refreshes, retries by cause, batches
//! re-routed, leader changes seen, time partitions spent without a usable leader, and brokers that
//! stopped answering. The engines record *when* these happened (the cluster's events); they never
//! time the workload — turning these into a result's figures is the bench's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A partition's leader, as Metadata named it, changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderChange {
    /// When the refresh that saw it was answered.
    pub at: Instant,
    pub partition: i32,
    /// -1: none known.
    pub from: i32,
    pub to: i32,
}

/// A broker that had requests outstanding and answered none of them for a while (at least
/// [`STALL`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    pub broker: i32,
    pub addr: String,
    pub from: Instant,
    pub until: Instant,
    /// Still unanswered when the engine finished.
    pub ongoing: bool,
}

/// How long a broker may leave every outstanding request unanswered before it counts as a stall.
pub const STALL: Duration = Duration::from_secs(1);

/// What the cluster did, as one engine saw it.
#[derive(Debug, Clone, Default)]
pub struct ClusterEvents {
    pub metadata_refreshes: u64,
    pub metadata_refresh_failures: u64,
    /// Attempts that failed and were tried again, by cause (Kafka's error name, or what happened
    /// to the connection).
    pub retries: BTreeMap<String, u64>,
    /// Batches that needed more than one attempt, and the most attempts any batch needed.
    pub retried_batches: u64,
    pub max_attempts: u32,
    /// Batches (queued or in flight) of partitions whose leader changed: sent to the new leader.
    pub batches_rerouted: u64,
    pub leader_changes: Vec<LeaderChange>,
    /// Per partition: the time from a failed attempt to the next success (no usable leader).
    pub unavailable: BTreeMap<i32, Duration>,
    pub stalls: Vec<Stall>,
}

impl ClusterEvents {
    /// Whether anything happened worth telling the user.
    pub fn is_quiet(&self) -> bool {
        self.retries.is_empty()
            && self.leader_changes.is_empty()
            && self.stalls.is_empty()
            && self.metadata_refresh_failures == 0
    }

    /// Another engine's events added to these (several producers or consumers in one run).
    pub fn merge(&mut self, other: &ClusterEvents) {
        self.metadata_refreshes += other.metadata_refreshes;
        self.metadata_refresh_failures += other.metadata_refresh_failures;
        for (k, v) in &other.retries {
            *self.retries.entry(k.clone()).or_default() += v;
        }
        self.retried_batches += other.retried_batches;
        self.max_attempts = self.max_attempts.max(other.max_attempts);
        self.batches_rerouted += other.batches_rerouted;
        self.leader_changes
            .extend(other.leader_changes.iter().cloned());
        self.leader_changes.sort_by_key(|c| (c.at, c.partition));
        for (p, d) in &other.unavailable {
            *self.unavailable.entry(*p).or_default() += *d;
        }
        self.stalls.extend(other.stalls.iter().cloned());
        self.stalls.sort_by_key(|s| (s.from, s.broker));
    }

    pub(crate) fn retry(&mut self, cause: String) {
        *self.retries.entry(cause).or_default() += 1;
    }
}
