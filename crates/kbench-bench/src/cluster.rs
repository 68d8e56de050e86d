//! What the cluster did during a run, as a result document says it: the engines' events
//! ([`kbench_client::ClusterEvents`]) turned into times from the run's start and the wall clock,
//! and the one-line summaries the front ends print ("6 leader changes at 4.0 s; p50 4.1 ms before,
//! 4.3 ms after"; "no answer from 127.0.0.1:39811 for 5.0 s from 3.0 s").

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use kbench_client::ClusterEvents;
use serde::{Deserialize, Serialize};

/// A leader change seen during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderChangeReport {
    /// Seconds from the start of the measured phase.
    pub at_s: f64,
    /// The wall clock, µs since the Unix epoch (where the report's timelines place it).
    pub at_unix_us: u64,
    pub partition: i32,
    /// -1: no leader.
    pub from: i32,
    pub to: i32,
}

/// A broker that left every request unanswered for a while.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallReport {
    pub broker: i32,
    pub addr: String,
    pub from_s: f64,
    pub for_s: f64,
    pub from_unix_us: u64,
    /// Still unanswered when the run ended.
    pub ongoing: bool,
}

/// The result's `cluster` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    pub metadata_refreshes: u64,
    pub metadata_refresh_failures: u64,
    /// Attempts tried again, by cause (Kafka's error name, or what happened to the connection).
    pub retries: BTreeMap<String, u64>,
    /// Batches that needed more than one attempt, and the most attempts a batch needed.
    pub retried_batches: u64,
    pub max_attempts: u32,
    /// Batches sent to a partition's new leader after it moved.
    pub batches_rerouted: u64,
    pub leader_changes: Vec<LeaderChangeReport>,
    /// Per partition, ms from a failed attempt to the next success.
    pub unavailable_ms: BTreeMap<String, f64>,
    pub stalls: Vec<StallReport>,
}

fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl ClusterReport {
    /// The events of a run whose measured phase started at `start` (`started_at` on the wall
    /// clock).
    pub fn of(events: &ClusterEvents, start: Instant, started_at: SystemTime) -> ClusterReport {
        let since = |t: Instant| t.saturating_duration_since(start);
        let wall = |t: Instant| unix_us(started_at + since(t));
        ClusterReport {
            metadata_refreshes: events.metadata_refreshes,
            metadata_refresh_failures: events.metadata_refresh_failures,
            retries: events.retries.clone(),
            retried_batches: events.retried_batches,
            max_attempts: events.max_attempts,
            batches_rerouted: events.batches_rerouted,
            leader_changes: events
                .leader_changes
                .iter()
                .map(|c| LeaderChangeReport {
                    at_s: since(c.at).as_secs_f64(),
                    at_unix_us: wall(c.at),
                    partition: c.partition,
                    from: c.from,
                    to: c.to,
                })
                .collect(),
            unavailable_ms: events
                .unavailable
                .iter()
                .map(|(p, d)| (p.to_string(), d.as_secs_f64() * 1e3))
                .collect(),
            stalls: events
                .stalls
                .iter()
                .map(|s| StallReport {
                    broker: s.broker,
                    addr: s.addr.clone(),
                    from_s: since(s.from).as_secs_f64(),
                    for_s: s.until.saturating_duration_since(s.from).as_secs_f64(),
                    from_unix_us: wall(s.from),
                    ongoing: s.ongoing,
                })
                .collect(),
        }
    }

    /// Another run's (a repetition's, a producer's) report added to this one.
    pub fn merge(&mut self, other: &ClusterReport) {
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
        self.leader_changes
            .sort_by_key(|c| (c.at_unix_us, c.partition));
        for (p, ms) in &other.unavailable_ms {
            *self.unavailable_ms.entry(p.clone()).or_default() += ms;
        }
        self.stalls.extend(other.stalls.iter().cloned());
        self.stalls.sort_by_key(|s| (s.from_unix_us, s.broker));
    }

    /// Whether nothing happened worth a line.
    pub fn is_quiet(&self) -> bool {
        self.retries.is_empty()
            && self.leader_changes.is_empty()
            && self.stalls.is_empty()
            && self.metadata_refresh_failures == 0
    }

    /// The lines a front end prints under a run: leader changes (with latency before and after,
    /// from the timeline's `tag` histograms), retries, brokers that stopped answering.
    pub fn summary(&self, windows: &[crate::timeline::Window], tag: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if let (Some(first), Some(last)) = (self.leader_changes.first(), self.leader_changes.last())
        {
            let n = self.leader_changes.len();
            let when = if last.at_s - first.at_s < 0.5 {
                format!("at {:.1} s", first.at_s)
            } else {
                format!("from {:.1} s to {:.1} s", first.at_s, last.at_s)
            };
            let mut line = format!("{n} leader change{} {when}", if n == 1 { "" } else { "s" });
            let before = p50(windows, tag, |w| {
                w.start_us + w.duration.as_micros() as u64 <= first.at_unix_us
            });
            let after = p50(windows, tag, |w| w.start_us > last.at_unix_us);
            if let (Some(b), Some(a)) = (before, after) {
                line.push_str(&format!(
                    "; p50 {:.1} ms before, {:.1} ms after",
                    b as f64 / 1e3,
                    a as f64 / 1e3
                ));
            }
            line.push_str(&format!(
                " ({} batches re-routed, {} metadata refreshes)",
                self.batches_rerouted, self.metadata_refreshes
            ));
            lines.push(line);
        }
        if !self.retries.is_empty() {
            let causes: Vec<String> = self
                .retries
                .iter()
                .map(|(cause, n)| format!("{n} × {cause}"))
                .collect();
            lines.push(format!(
                "retries: {} (of {} batches, at most {} attempts each)",
                causes.join(", "),
                self.retried_batches,
                self.max_attempts
            ));
        }
        for s in &self.stalls {
            lines.push(format!(
                "no answer from {} for {:.1} s from {:.1} s{}",
                if s.addr.is_empty() {
                    format!("broker {}", s.broker)
                } else {
                    s.addr.clone()
                },
                s.for_s,
                s.from_s,
                if s.ongoing {
                    " (until the run ended)"
                } else {
                    ""
                }
            ));
        }
        if self.metadata_refresh_failures > 0 {
            lines.push(format!(
                "{} metadata refreshes failed",
                self.metadata_refresh_failures
            ));
        }
        lines
    }
}

/// The median of the `tag` histograms of the windows `keep` selects.
fn p50(
    windows: &[crate::timeline::Window],
    tag: &str,
    keep: impl Fn(&crate::timeline::Window) -> bool,
) -> Option<u64> {
    let mut all: Option<Histogram<u64>> = None;
    for w in windows.iter().filter(|w| keep(w)) {
        if let Some(h) = w.histogram(tag) {
            match all.as_mut() {
                Some(a) => {
                    let _ = a.add(&h);
                }
                None => all = Some(h),
            }
        }
    }
    all.filter(|h| !h.is_empty())
        .map(|h| h.value_at_quantile(0.5))
}
