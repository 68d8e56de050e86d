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
    /// How many clients saw this change (each producer's engine sees it at its own refresh).
    #[serde(default = "one")]
    pub seen_by: u64,
}

/// Clients see one move within this much of each other.
const SAME_MOVE_US: u64 = 5_000_000;

/// The same move (partition, from, to) seen by several clients within [`SAME_MOVE_US`], counted
/// once, at its first sighting.
fn merge_leader_changes(changes: &mut Vec<LeaderChangeReport>) {
    changes.sort_by_key(|c| (c.partition, c.from, c.to, c.at_unix_us));
    let mut out: Vec<LeaderChangeReport> = Vec::with_capacity(changes.len());
    for c in changes.drain(..) {
        if let Some(last) = out.last_mut()
            && (last.partition, last.from, last.to) == (c.partition, c.from, c.to)
            && c.at_unix_us <= last.at_unix_us + SAME_MOVE_US
        {
            last.seen_by += c.seen_by;
            continue;
        }
        out.push(c);
    }
    out.sort_by_key(|c| (c.at_unix_us, c.partition));
    *changes = out;
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
    /// How many clients (producers, the consumer, repetitions' engines) saw this stall: the same
    /// broker unanswered for overlapping times is one stall.
    #[serde(default = "one")]
    pub seen_by: u64,
}

fn one() -> u64 {
    1
}

/// Stalls of one broker whose times overlap, merged into one (the earliest start, the latest
/// end); the rest in order of start.
fn merge_stalls(stalls: &mut Vec<StallReport>) {
    stalls.sort_by(|a, b| {
        (a.broker, &a.addr, a.from_unix_us).cmp(&(b.broker, &b.addr, b.from_unix_us))
    });
    let mut out: Vec<StallReport> = Vec::with_capacity(stalls.len());
    for s in stalls.drain(..) {
        if let Some(last) = out.last_mut() {
            let end = |r: &StallReport| r.from_unix_us + (r.for_s * 1e6) as u64;
            if last.broker == s.broker && last.addr == s.addr && s.from_unix_us <= end(last) {
                let until = end(last).max(end(&s));
                last.for_s = (until - last.from_unix_us) as f64 / 1e6;
                last.ongoing |= s.ongoing;
                last.seen_by += s.seen_by;
                continue;
            }
        }
        out.push(s);
    }
    out.sort_by_key(|s| (s.from_unix_us, s.broker));
    *stalls = out;
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
        let mut report = ClusterReport {
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
                    seen_by: 1,
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
                    // Clipped to the measured phase, as from_s is.
                    for_s: since(s.until).saturating_sub(since(s.from)).as_secs_f64(),
                    from_unix_us: wall(s.from),
                    ongoing: s.ongoing,
                    seen_by: 1,
                })
                .collect(),
        };
        merge_leader_changes(&mut report.leader_changes);
        merge_stalls(&mut report.stalls);
        report
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
        merge_leader_changes(&mut self.leader_changes);
        for (p, ms) in &other.unavailable_ms {
            *self.unavailable_ms.entry(p.clone()).or_default() += ms;
        }
        self.stalls.extend(other.stalls.iter().cloned());
        merge_stalls(&mut self.stalls);
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
            // Several producers see the same change: merged (seen_by) when the report was made.
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
            let refreshes = format!(
                "{} metadata refresh{}",
                self.metadata_refreshes,
                if self.metadata_refreshes == 1 {
                    ""
                } else {
                    "es"
                }
            );
            line.push_str(&if self.batches_rerouted > 0 {
                format!(
                    " ({} batches re-routed, {refreshes})",
                    self.batches_rerouted
                )
            } else {
                format!(" ({refreshes})")
            });
            lines.push(line);
        }
        if !self.retries.is_empty() {
            let causes: Vec<String> = self
                .retries
                .iter()
                .map(|(cause, n)| format!("{n} × {cause}"))
                .collect();
            lines.push(if self.retried_batches > 0 {
                format!(
                    "retries: {} (of {} batches, at most {} attempts each)",
                    causes.join(", "),
                    self.retried_batches,
                    self.max_attempts
                )
            } else {
                format!("retries: {}", causes.join(", "))
            });
        }
        for s in &self.stalls {
            lines.push(format!(
                "no answer from {} for {:.1} s from {:.1} s{}{}",
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
                },
                if s.seen_by > 1 {
                    format!(", seen by {} clients", s.seen_by)
                } else {
                    String::new()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(broker: i32, from_s: f64, for_s: f64) -> StallReport {
        StallReport {
            broker,
            addr: format!("127.0.0.1:{}", 9000 + broker),
            from_s,
            for_s,
            from_unix_us: (from_s * 1e6) as u64,
            ongoing: false,
            seen_by: 1,
        }
    }

    fn change(partition: i32, at_s: f64) -> LeaderChangeReport {
        LeaderChangeReport {
            at_s,
            at_unix_us: (at_s * 1e6) as u64,
            partition,
            from: 1,
            to: 2,
            seen_by: 1,
        }
    }

    #[test]
    fn one_broker_unanswered_for_many_clients_is_one_stall() {
        let mut a = ClusterReport::default();
        for i in 0..3000 {
            let b = ClusterReport {
                stalls: vec![stall(1, 0.1 + f64::from(i % 7) * 0.01, 1.5)],
                ..ClusterReport::default()
            };
            a.merge(&b);
        }
        a.merge(&ClusterReport {
            stalls: vec![stall(2, 0.5, 1.0), stall(1, 10.0, 1.0)],
            ..ClusterReport::default()
        });
        assert_eq!(a.stalls.len(), 3, "{:?}", a.stalls);
        assert_eq!(a.stalls[0].seen_by, 3000);
        assert!((a.stalls[0].from_s - 0.1).abs() < 1e-9);
        assert!(
            (a.stalls[0].for_s - 1.56).abs() < 1e-6,
            "{}",
            a.stalls[0].for_s
        );
        assert_eq!(a.stalls[1].broker, 2);
        assert_eq!(a.stalls[2].from_s, 10.0);
        assert_eq!(a.summary(&[], "x").len(), 3);
    }

    /// A stall that began before the measured phase is counted from its start: its end stays
    /// where it was.
    #[test]
    fn a_stall_from_before_the_start_is_clipped_whole() {
        let start = Instant::now() + std::time::Duration::from_secs(2);
        let events = ClusterEvents {
            stalls: vec![kbench_client::Stall {
                broker: 1,
                addr: "a".into(),
                from: start - std::time::Duration::from_secs(1),
                until: start + std::time::Duration::from_secs(3),
                ongoing: false,
            }],
            ..ClusterEvents::default()
        };
        let r = ClusterReport::of(&events, start, SystemTime::now());
        assert_eq!(r.stalls[0].from_s, 0.0);
        assert!(
            (r.stalls[0].for_s - 3.0).abs() < 1e-6,
            "{}",
            r.stalls[0].for_s
        );
    }

    #[test]
    fn one_move_seen_by_every_producer_is_one_change_and_a_later_one_is_another() {
        let mut a = ClusterReport::default();
        for i in 0..100 {
            a.merge(&ClusterReport {
                leader_changes: vec![change(0, 2.0 + f64::from(i) * 0.01)],
                ..ClusterReport::default()
            });
        }
        a.merge(&ClusterReport {
            leader_changes: vec![change(0, 30.0), change(1, 2.0)],
            ..ClusterReport::default()
        });
        assert_eq!(a.leader_changes.len(), 3);
        assert_eq!(a.leader_changes[0].seen_by, 100);
        assert!(a.summary(&[], "x")[0].starts_with("3 leader changes"));
    }
}
