//! What each member of a group run owned when: the partitions it took, gave up and first read
//! from, timed from one instant (the run's start, or the load's), for the group report's
//! rebalances ([`super::rebalances`]).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What happened to a member's hold on a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// It was given the partition.
    Taken,
    /// It stopped reading it (gave it up, left, crashed, or began an eager rejoin).
    Released,
    /// It read the partition's first record since it took it.
    FirstRead,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnerEvent {
    /// From the log's zero (see [`OwnerLog::elapsed`]).
    pub at: Duration,
    pub member: usize,
    pub partition: i32,
    pub what: Ownership,
}

/// The log of a group run.
pub(crate) struct OwnerLog {
    /// The group's start (before its first joins): joins are timed from it ([`OwnerLog::secs`]).
    created: Instant,
    /// Where the log's events are timed from: the load's start where one is set (e2e: the first
    /// joins, before it, are then at negative seconds in its report), else `created`.
    zero: OnceLock<Instant>,
    /// Whether a zero is to come: until it does, events are at 0.
    awaits_zero: bool,
    events: Mutex<Vec<OwnerEvent>>,
}

impl OwnerLog {
    /// A log timed from now.
    pub fn new() -> OwnerLog {
        OwnerLog {
            created: Instant::now(),
            zero: OnceLock::new(),
            awaits_zero: false,
            events: Mutex::new(Vec::new()),
        }
    }

    /// A log timed from the load's start, to be set ([`OwnerLog::set_zero`]): what happens
    /// before it (the first joins) is at 0.
    pub fn from_load() -> OwnerLog {
        OwnerLog {
            awaits_zero: true,
            ..OwnerLog::new()
        }
    }

    /// Time events from `at` on (the load's start).
    pub fn set_zero(&self, at: Instant) {
        let _ = self.zero.set(at);
    }

    /// Seconds from the group's start to `t`.
    pub fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.created).as_secs_f64()
    }

    /// From the log's zero to now (0 before a zero that is still to come).
    pub fn elapsed(&self) -> Duration {
        match self.zero.get() {
            Some(z) => z.elapsed(),
            None if self.awaits_zero => Duration::ZERO,
            None => self.created.elapsed(),
        }
    }

    /// Seconds from the group's start to the log's zero.
    pub fn zero_s(&self) -> f64 {
        self.zero.get().map_or(0.0, |z| self.secs(*z))
    }

    /// `member` took or released `partitions`, or first read one, now.
    pub fn note(&self, member: usize, partitions: impl IntoIterator<Item = i32>, what: Ownership) {
        let at = self.elapsed();
        self.events
            .lock()
            .expect("owner log lock")
            .extend(partitions.into_iter().map(|partition| OwnerEvent {
                at,
                member,
                partition,
                what,
            }));
    }

    pub fn events(&self) -> Vec<OwnerEvent> {
        self.events.lock().expect("owner log lock").clone()
    }
}
