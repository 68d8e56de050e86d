//! A group run, for every workload that reads in a consumer group (consume, e2e, omb): its
//! members and the faults that change them ([`roster`]: join, leave, crash, restart, with one
//! [`MemberEnd`] for how a member ends), what each member owned when ([`log`]), and the group's
//! report — its members, its rebalances with their phases, the time each partition had no reader
//! and the time from a fault to the first record read from each partition that moved.
//!
//! The membership itself (joins, heartbeats, commits, revocations) is the client's
//! [`kbench_client::GroupConsumer`]; this module only watches and reports it.

pub mod log;
pub mod roster;

use std::collections::BTreeMap;
use std::time::Duration;

pub use kbench_client::MemberEnd;
use serde::{Deserialize, Serialize};

pub(crate) use log::{OwnerEvent, OwnerLog, Ownership};

/// One join of one member: when it began, its phases, and what it gave up and got.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberJoin {
    /// Seconds from the group run's start.
    pub at_s: f64,
    /// JoinGroup held, SyncGroup, and the whole join (committing first, positioning after).
    pub join_group_ms: f64,
    pub sync_group_ms: f64,
    pub took_ms: f64,
    pub generation_id: i32,
    pub assigned: Vec<i32>,
    /// Under the consumer protocol (KIP-848), the coordinator's heartbeat interval, in seconds:
    /// the members' steps of one incremental rebalance come up to that far apart (each learns
    /// its part at its next heartbeat). 0 with the classic protocol.
    #[serde(skip)]
    pub step_s: f64,
}

/// One member of the group run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberReport {
    pub member: usize,
    pub member_id: Option<String>,
    /// Seconds from the group run's start: when it began, and when it stopped.
    pub started_s: f64,
    pub ended_s: f64,
    /// How it ended ([`MemberEnd::as_str`]): `run-ended`, `left` (consumer-leave), `crashed` (consumer-crash) or
    /// `restarted` (consumer-restart: the member that took its place names it in `replaces`).
    pub ended: String,
    /// `group.instance.id`, for a static member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// A restart's new member: the member it took the place of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<usize>,
    pub records: u64,
    /// With `--verify`: records it read that another member (or it) had read before.
    pub duplicated: Option<u64>,
    pub joins: Vec<MemberJoin>,
    /// Why it read nothing, when it was stopped (a fault) before it had joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One rebalance: a span in which members were joining.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rebalance {
    /// Seconds from the group run's start.
    pub began_s: f64,
    pub ended_s: f64,
    /// What set it off: `start`, a fault as given, or `unknown` (the coordinator's own).
    pub cause: String,
    /// The longest JoinGroup and SyncGroup of the members that joined in it, ms.
    pub join_group_ms_max: f64,
    pub sync_group_ms_max: f64,
    /// Per partition: how long no member read it, ms, for the gaps that closed in this span.
    pub partitions_unowned_ms: BTreeMap<i32, f64>,
    /// Per partition that moved in it (had no reader for a while), when a fault set it off: ms
    /// from the fault to the first record read from the partition after it moved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub first_read_after_fault_ms: BTreeMap<i32, f64>,
    /// The longest of those: from the fault until every partition that moved was read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover_ms: Option<f64>,
}

/// A group fault as applied.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupFault {
    pub fault: String,
    pub at_s: f64,
    /// The members it acted on (a join: the new ones).
    pub members: Vec<usize>,
    /// Why it did less than asked (too few members left), if it did.
    pub error: Option<String>,
}

/// The `group` block of a consume result with several members or group faults.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupReport {
    pub consumers: u32,
    pub members: Vec<MemberReport>,
    pub rebalances: Vec<Rebalance>,
    pub faults: Vec<GroupFault>,
    /// Per partition, all the time no member read it after it was first read, ms (the gaps
    /// still open at the end included).
    pub partitions_unowned_ms: BTreeMap<i32, f64>,
    /// Partitions no member was reading when the run ended, and for how long by then, ms: a
    /// crashed member's partitions that the coordinator never gave to another, say.
    pub partitions_unowned_at_end_ms: BTreeMap<i32, f64>,
}

impl MemberJoin {
    /// A join as the session told it, timed on `log`'s clock (seconds from its start).
    pub(crate) fn of(join: &kbench_client::JoinInfo, owned: &[i32], log: &OwnerLog) -> MemberJoin {
        MemberJoin {
            at_s: log.secs(join.began),
            join_group_ms: join.join_group.as_secs_f64() * 1e3,
            sync_group_ms: join.sync_group.as_secs_f64() * 1e3,
            took_ms: join.took.as_secs_f64() * 1e3,
            generation_id: join.generation,
            assigned: owned.to_vec(),
            step_s: if join.incremental {
                join.heartbeat.as_secs_f64()
            } else {
                0.0
            },
        }
    }
}

/// The members a leave, crash or restart of `count` members stops, of `members` (by index): the
/// newest that have joined first, then any still `running`.
pub(crate) fn members_to_stop(
    members: usize,
    joined: impl Fn(usize) -> bool,
    running: impl Fn(usize) -> bool,
    count: u32,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..members).rev().collect();
    order.sort_by_key(|i| !joined(*i));
    order
        .into_iter()
        .filter(|i| running(*i))
        .take(count as usize)
        .collect()
}

/// The group's rebalances: spans where members' joins overlap (each join from its start to its
/// end), with what set each off, its longest phases, and the partition gaps that closed in it.
pub(crate) fn rebalances(
    members: &[MemberReport],
    events: &[OwnerEvent],
    faults: &[GroupFault],
    end: Duration,
) -> (Vec<Rebalance>, BTreeMap<i32, f64>, BTreeMap<i32, f64>) {
    let mut joins: Vec<(f64, f64, &MemberJoin)> = members
        .iter()
        .flat_map(|m| {
            m.joins
                .iter()
                .map(|j| (j.at_s, j.at_s + j.took_ms / 1000.0, j))
        })
        .collect();
    joins.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Rebalance> = Vec::new();
    for (from, to, j) in joins {
        match out.last_mut() {
            // Overlapping joins; or, under the consumer protocol, the next step of the same
            // incremental rebalance (a heartbeat and a half later at most).
            Some(r) if from <= r.ended_s + 1.5 * j.step_s => {
                r.ended_s = r.ended_s.max(to);
                r.join_group_ms_max = r.join_group_ms_max.max(j.join_group_ms);
                r.sync_group_ms_max = r.sync_group_ms_max.max(j.sync_group_ms);
            }
            _ => out.push(Rebalance {
                began_s: from,
                ended_s: to,
                cause: String::new(),
                join_group_ms_max: j.join_group_ms,
                sync_group_ms_max: j.sync_group_ms,
                partitions_unowned_ms: BTreeMap::new(),
                first_read_after_fault_ms: BTreeMap::new(),
                takeover_ms: None,
            }),
        }
    }
    // What set each off: the start (the first); a join, the rebalance its new members joined
    // in (the one under way at the fault, or the next); a leave or a crash, the first rebalance
    // that began at or after it (the coordinator learns of a crash only later), else the one
    // under way.
    let mut causes: Vec<Vec<String>> = vec![Vec::new(); out.len()];
    // The earliest fault that set each off, seconds.
    let mut fault_at: Vec<Option<f64>> = vec![None; out.len()];
    if let Some(c) = causes.first_mut() {
        c.push("start".into());
    }
    for f in faults
        .iter()
        .filter(|f| f.error.is_none() || !f.members.is_empty())
    {
        // A restart's new members join as a join's do.
        let join = f.fault.contains("consumer-join") || f.fault.contains("consumer-restart");
        let at = f.at_s - 1e-3;
        let i = if join {
            out.iter().position(|r| r.ended_s >= at)
        } else {
            // Or, when none began after it, the one under way (it took the member's leave in).
            out.iter()
                .position(|r| r.began_s >= at)
                .or_else(|| out.iter().position(|r| r.ended_s >= at))
        };
        if let Some(i) = i {
            causes[i].push(f.fault.clone());
            fault_at[i] = Some(fault_at[i].map_or(f.at_s, |t: f64| t.min(f.at_s)));
        }
    }
    for (r, c) in out.iter_mut().zip(causes) {
        r.cause = if c.is_empty() {
            "unknown".into()
        } else {
            c.join(", ")
        };
    }
    // Ownership: per partition, the owners reading it; a gap runs from when the last one stopped
    // to when one took it again (before the first owner, the partition had not begun). A gap that
    // closes in a rebalance a fault set off waits for the partition's first record read after
    // it: the time from the fault to that read is the partition's takeover.
    let mut owners: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    let mut since: BTreeMap<i32, Duration> = BTreeMap::new();
    let mut total: BTreeMap<i32, f64> = BTreeMap::new();
    let mut awaiting_read: BTreeMap<i32, usize> = BTreeMap::new();
    for e in events {
        let o = owners.entry(e.partition).or_default();
        match e.what {
            Ownership::Taken => {
                if o.is_empty()
                    && let Some(gap_from) = since.remove(&e.partition)
                {
                    let ms = (e.at.saturating_sub(gap_from)).as_secs_f64() * 1e3;
                    *total.entry(e.partition).or_default() += ms;
                    let at_s = e.at.as_secs_f64();
                    if let Some(i) = out.iter().rposition(|r| r.began_s <= at_s + 1e-3) {
                        *out[i].partitions_unowned_ms.entry(e.partition).or_default() += ms;
                        if fault_at[i].is_some() {
                            awaiting_read.insert(e.partition, i);
                        }
                    }
                }
                if !o.contains(&e.member) {
                    o.push(e.member);
                }
            }
            Ownership::Released => {
                if let Some(pos) = o.iter().position(|m| *m == e.member) {
                    o.remove(pos);
                    if o.is_empty() {
                        since.insert(e.partition, e.at);
                        awaiting_read.remove(&e.partition);
                    }
                }
            }
            Ownership::FirstRead => {
                if let Some(i) = awaiting_read.remove(&e.partition)
                    && let Some(f) = fault_at[i]
                {
                    let ms = ((e.at.as_secs_f64() - f) * 1e3).max(0.0);
                    out[i].first_read_after_fault_ms.insert(e.partition, ms);
                }
            }
        }
    }
    for r in out.iter_mut() {
        r.takeover_ms = r
            .first_read_after_fault_ms
            .values()
            .copied()
            .reduce(f64::max);
    }
    // Gaps still open when the run ended (members that read to the end say nothing when they
    // stop: only a leave, a crash or a rejoin leaves a partition without its reader).
    let mut at_end = BTreeMap::new();
    for (p, from) in since {
        let ms = end.saturating_sub(from).as_secs_f64() * 1e3;
        at_end.insert(p, ms);
        *total.entry(p).or_default() += ms;
    }
    (out, total, at_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(at_s: f64, took_ms: f64, assigned: &[i32]) -> MemberJoin {
        MemberJoin {
            at_s,
            join_group_ms: took_ms - 1.0,
            sync_group_ms: 1.0,
            took_ms,
            generation_id: 1,
            assigned: assigned.to_vec(),
            step_s: 0.0,
        }
    }

    fn member(index: usize, joins: Vec<MemberJoin>) -> MemberReport {
        MemberReport {
            member: index,
            member_id: None,
            started_s: 0.0,
            ended_s: 30.0,
            ended: "run-ended".into(),
            instance_id: None,
            replaces: None,
            records: 0,
            duplicated: None,
            joins,
            error: None,
        }
    }

    fn event(at_s: f64, member: usize, partition: i32, owned: bool) -> OwnerEvent {
        OwnerEvent {
            at: Duration::from_secs_f64(at_s),
            member,
            partition,
            what: if owned {
                Ownership::Taken
            } else {
                Ownership::Released
            },
        }
    }

    fn fault(text: &str, at_s: f64) -> GroupFault {
        GroupFault {
            fault: text.into(),
            at_s,
            members: vec![1],
            error: None,
        }
    }

    /// Two members start; a third joins at 5 s (its join overlaps the others' rejoins: one
    /// rebalance); member 1 crashes at 10 s and the group notices at 16 s. Partition 1 was member
    /// 1's: without a reader from 10 s to 19 s; partition 2 never found a reader again.
    #[test]
    fn rebalances_are_the_overlapping_joins_and_gaps_run_from_the_last_reader_to_the_next() {
        let members = [
            member(
                0,
                vec![
                    join(0.0, 3000.0, &[0]),
                    join(5.2, 3000.0, &[0]),
                    join(16.0, 3000.0, &[0, 1]),
                ],
            ),
            member(
                1,
                vec![join(0.0, 3000.0, &[1, 2]), join(5.3, 2800.0, &[1, 2])],
            ),
            member(2, vec![join(5.0, 3100.0, &[])]),
        ];
        let events = [
            event(3.0, 0, 0, true),
            event(3.0, 1, 1, true),
            event(3.0, 1, 2, true),
            event(5.2, 0, 0, false),
            event(5.3, 1, 1, false),
            event(5.3, 1, 2, false),
            event(8.1, 1, 1, true),
            event(8.1, 1, 2, true),
            event(8.2, 0, 0, true),
            event(10.0, 1, 1, false),
            event(10.0, 1, 2, false),
            event(16.0, 0, 0, false),
            event(19.0, 0, 0, true),
            event(19.0, 0, 1, true),
        ];
        let faults = [
            fault("at=5s consumer-join=1", 5.0),
            fault("at=10s consumer-crash=1", 10.0),
        ];
        let (r, total, at_end) = rebalances(&members, &events, &faults, Duration::from_secs(30));
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(r[0].cause, "start");
        assert_eq!(r[1].cause, "at=5s consumer-join=1");
        assert_eq!(r[2].cause, "at=10s consumer-crash=1");
        assert!((r[1].began_s - 5.0).abs() < 1e-9 && (r[1].ended_s - 8.2).abs() < 1e-9);
        let ms = |m: &BTreeMap<i32, f64>, p: i32| m.get(&p).copied().unwrap_or(0.0).round();
        // Partition 0: 5.2 → 8.2 s, then 16 → 19 s; partition 1: 5.3 → 8.1 s, then 10 → 19 s.
        assert_eq!(
            (
                ms(&r[1].partitions_unowned_ms, 0),
                ms(&r[1].partitions_unowned_ms, 1)
            ),
            (3000.0, 2800.0)
        );
        assert_eq!(
            (
                ms(&r[2].partitions_unowned_ms, 0),
                ms(&r[2].partitions_unowned_ms, 1)
            ),
            (3000.0, 9000.0)
        );
        assert_eq!(at_end.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(ms(&at_end, 2), 20000.0);
        assert_eq!(ms(&total, 2), 2800.0 + 20000.0);
    }

    /// The takeover of a rebalance a fault set off: from the fault to the first record read from
    /// each partition that moved (a partition read on through it is not one of them).
    #[test]
    fn a_takeover_runs_from_the_fault_to_the_first_record_read_of_each_moved_partition() {
        let members = [
            member(
                0,
                vec![join(0.0, 1000.0, &[0]), join(16.0, 3000.0, &[0, 1])],
            ),
            member(1, vec![join(0.0, 1000.0, &[1])]),
        ];
        let first_read = |at_s: f64, member: usize, partition: i32| OwnerEvent {
            at: Duration::from_secs_f64(at_s),
            member,
            partition,
            what: Ownership::FirstRead,
        };
        let events = [
            event(1.0, 0, 0, true),
            event(1.0, 1, 1, true),
            first_read(1.5, 0, 0),
            first_read(1.6, 1, 1),
            event(10.0, 1, 1, false),
            event(19.0, 0, 1, true),
            first_read(19.4, 0, 1),
        ];
        let faults = [fault("at=10s consumer-crash=1", 10.0)];
        let (r, _, at_end) = rebalances(&members, &events, &faults, Duration::from_secs(30));
        assert!(at_end.is_empty());
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[0].first_read_after_fault_ms.is_empty() && r[0].takeover_ms.is_none());
        assert_eq!(r[1].first_read_after_fault_ms.len(), 1, "{r:?}");
        assert_eq!(r[1].first_read_after_fault_ms[&1].round(), 9400.0);
        assert_eq!(r[1].takeover_ms.map(f64::round), Some(9400.0));
    }
}
