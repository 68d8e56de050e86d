//! Several members in one consumer group (`consume --consumers N`), and the group faults on the
//! run's schedule (`consumer-join=K`, `consumer-leave=K`, `consumer-crash=K`,
//! `consumer-restart=K`): each member a
//! [`super::phase`] reading of its own — its own connections, its own member id — sharing the
//! record target, the idle time-out and (with `--verify`) one verifier, so that a record read by
//! two members across a handover is a duplicate, counted against the member that read it second.
//!
//! Every member says when it owned which partition; the group's rebalances are the spans in which
//! members were joining, and for each the time each partition had no member reading it: from the
//! moment its owner stopped (it began rejoining, left, or crashed) to the moment a member had it
//! again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use kbench_client::{Cluster, TopicLayout};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{ConsumeObserver, ConsumeRun, ConsumeSpec};
use crate::error::BenchError;
use crate::fault::FaultAction;
use crate::stop::Stop;

/// What the members share.
pub(crate) struct GroupShare {
    pub start: Instant,
    /// Records read by every member together, and their key and value bytes.
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// When any member last read a record, µs from `start`.
    pub last_record_us: AtomicU64,
    /// One verifier for the group (`--verify`).
    pub verifier: Option<Arc<Mutex<crate::verify::Verifier>>>,
    /// One latest-value check for the group (`--latest-values`): each key's last record, whoever
    /// read it (a record read again across a handover is the same record).
    pub latest: Option<Arc<Mutex<crate::latest::LatestChecker>>>,
    /// Ownership changes, in the order they happened.
    pub events: Mutex<Vec<OwnerEvent>>,
}

impl GroupShare {
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Records were just read.
    pub fn read(&self, n: u64, bytes: u64) {
        self.records.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_record_us
            .store(self.start.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// How long since any member read a record.
    pub fn idle(&self) -> Duration {
        self.start.elapsed().saturating_sub(Duration::from_micros(
            self.last_record_us.load(Ordering::Relaxed),
        ))
    }

    /// `member` took (`owned`) or stopped reading (`!owned`) `partitions`, now. A partition taken
    /// is a handover for the verifier.
    pub fn owner(&self, member: usize, partitions: impl IntoIterator<Item = i32>, owned: bool) {
        let at = self.start.elapsed();
        let partitions: Vec<i32> = partitions.into_iter().collect();
        if owned && let Some(v) = self.verifier.as_ref() {
            let mut v = v.lock().expect("verifier lock");
            for p in &partitions {
                v.handover(*p);
            }
        }
        let mut events = self.events.lock().expect("events lock");
        events.extend(partitions.into_iter().map(|partition| OwnerEvent {
            at,
            member,
            partition,
            owned,
        }));
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnerEvent {
    pub at: Duration,
    pub member: usize,
    pub partition: i32,
    pub owned: bool,
}

/// A member's part in the group run.
pub(crate) struct MemberCtx {
    pub index: usize,
    /// Cancelled when the member is to stop (the run's end, a leave, a crash).
    pub cancel: CancellationToken,
    /// Set before `cancel` for a crash: no commit, no LeaveGroup.
    pub crash: Arc<AtomicBool>,
    /// Set before `cancel` for a leave or a crash: its partitions are left without a reader
    /// (at the run's end they are not).
    pub stopped: Arc<AtomicBool>,
    /// Set once the member first joined (a leave or a crash picks joined members first).
    pub joined: Arc<AtomicBool>,
    /// Set before `cancel` for a restart: the member closes as Java's consumer does (a static
    /// member does not leave); otherwise it leaves when it ends.
    pub restart: Arc<AtomicBool>,
    /// `group.instance.id` (KIP-345): the run's, with `-N` after it, N the member's place.
    pub instance_id: Option<String>,
    pub share: Arc<GroupShare>,
}

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
    /// How it ended: `run-ended`, `left` (consumer-leave), `crashed` (consumer-crash) or
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

/// What a member's reading hands back.
pub(crate) struct MemberRun {
    pub run: ConsumeRun,
    pub joins: Vec<MemberJoin>,
    pub duplicated: Option<u64>,
}

struct Running {
    index: usize,
    /// Its place: a restart's new member takes the place (and the `group.instance.id`) of the
    /// member it replaces.
    slot: usize,
    replaces: Option<usize>,
    instance_id: Option<String>,
    started: Duration,
    cancel: CancellationToken,
    crash: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
    joined: Arc<AtomicBool>,
    restart: Arc<AtomicBool>,
    ended_by: Option<String>,
    ended_at: Option<Duration>,
    task: tokio::task::JoinHandle<Result<MemberRun, BenchError>>,
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

/// How long a restart waits for the members it stops to close before their new members start.
const RESTART_CLOSE_WAIT: Duration = Duration::from_secs(15);

/// Run `spec.consumers` members in `spec`'s group (and the members `spec.member_faults` add and
/// stop), each over a cluster of its own from `connect`; the pooled run and the group's report.
pub(crate) async fn run_group<O: ConsumeObserver>(
    first: Arc<Cluster>,
    layout: TopicLayout,
    spec: Arc<ConsumeSpec>,
    stop: Stop,
    observer: Arc<O>,
) -> Result<(ConsumeRun, GroupReport), BenchError> {
    // The members leave leader first (one order for every topic's members with `--include`).
    let spec = if spec.leave_order.0.is_none() {
        Arc::new(ConsumeSpec {
            leave_order: super::SharedLeave(Some(Arc::default())),
            ..(*spec).clone()
        })
    } else {
        spec
    };
    let cpu_start = crate::measure::CpuTime::now();
    let share = Arc::new(GroupShare {
        start: Instant::now(),
        records: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        last_record_us: AtomicU64::new(0),
        verifier: spec
            .verify
            .then(|| Arc::new(Mutex::new(crate::verify::Verifier::any_producer()))),
        // Checked by `ConsumeSpec::validate`.
        latest: spec
            .latest_values
            .as_ref()
            .and_then(|f| crate::latest::LatestChecker::new(f).ok())
            .map(|l| Arc::new(Mutex::new(l))),
        events: Mutex::new(Vec::new()),
    });
    let started_wall = SystemTime::now();
    let mut members: Vec<Running> = Vec::new();
    let spawn = |index: usize, slot: usize, replaces: Option<usize>, cluster: Arc<Cluster>| {
        let cancel = stop.token().child_token();
        let crash = Arc::new(AtomicBool::new(false));
        let joined = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let restart = Arc::new(AtomicBool::new(false));
        let instance_id = spec
            .consumer
            .group_instance_id
            .as_ref()
            .map(|id| format!("{id}-{slot}"));
        let ctx = MemberCtx {
            index,
            cancel: cancel.clone(),
            crash: crash.clone(),
            stopped: stopped.clone(),
            joined: joined.clone(),
            restart: restart.clone(),
            instance_id: instance_id.clone(),
            share: share.clone(),
        };
        let (layout, spec, stop, observer) =
            (layout.clone(), spec.clone(), stop.clone(), observer.clone());
        let task = tokio::spawn(async move {
            super::phase::run_member(cluster, layout, &spec, stop, observer, ctx).await
        });
        Running {
            index,
            slot,
            replaces,
            instance_id,
            started: share.start.elapsed(),
            cancel,
            crash,
            stopped,
            joined,
            restart,
            ended_by: None,
            ended_at: None,
            task,
        }
    };
    // A member's own connections; the cluster's brokers learnt (a coordinator or a leader may be
    // one the bootstrap answer did not name).
    let connect = || async {
        let cluster = Cluster::connect(first.config().clone())
            .await
            .map_err(|e| BenchError::Run(format!("a group member's connection: {e}")))?;
        cluster
            .metadata(&layout.name)
            .await
            .map_err(|e| BenchError::topic(&layout.name, e))?;
        Ok::<_, BenchError>(Arc::new(cluster))
    };
    // Every first member's connections before any member starts: a failure here leaves nothing
    // running.
    let mut clusters = vec![first.clone()];
    for _ in 1..spec.consumers {
        clusters.push(connect().await?);
    }
    for (i, cluster) in clusters.into_iter().enumerate() {
        members.push(spawn(i, i, None, cluster));
    }
    let mut slots = members.len();
    // The progress windows of the whole group (a member's own would each say only its part).
    let counted = share.clone();
    let reporter = tokio::spawn(report_windows(
        move || {
            (
                counted.records.load(Ordering::Relaxed),
                counted.bytes.load(Ordering::Relaxed),
            )
        },
        spec.reporting_interval,
        observer.clone(),
    ));
    let mut applied = Vec::new();
    for fault in &spec.member_faults {
        // Wait for the fault's time, unless the run is over first: stopped, or a member finished
        // because the group read all it was to read or went idle (members that a fault stopped
        // are not the run's end: a later join may follow).
        let due = share.start + fault.at;
        let over = |members: &[Running]| {
            stop.token().is_cancelled()
                || members
                    .iter()
                    .any(|m| m.ended_by.is_none() && m.task.is_finished())
        };
        while Instant::now() < due && !over(&members) {
            let step = (due - Instant::now()).min(Duration::from_millis(50));
            tokio::time::sleep(step).await;
        }
        if over(&members) {
            break;
        }
        let at = share.start.elapsed();
        let mut acted = Vec::new();
        let mut error = None;
        match fault.action {
            FaultAction::ConsumerJoin { count } => {
                for _ in 0..count {
                    match connect().await {
                        Ok(cluster) => {
                            let index = members.len();
                            members.push(spawn(index, slots, None, cluster));
                            slots += 1;
                            acted.push(index);
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
            }
            FaultAction::ConsumerLeave { count }
            | FaultAction::ConsumerCrash { count }
            | FaultAction::ConsumerRestart { count } => {
                let crash = matches!(fault.action, FaultAction::ConsumerCrash { .. });
                let restart = matches!(fault.action, FaultAction::ConsumerRestart { .. });
                let chosen = members_to_stop(
                    members.len(),
                    |i| members[i].joined.load(Ordering::SeqCst),
                    |i| members[i].ended_by.is_none() && !members[i].task.is_finished(),
                    count,
                );
                for &i in &chosen {
                    let m = &mut members[i];
                    m.crash.store(crash, Ordering::SeqCst);
                    m.restart.store(restart, Ordering::SeqCst);
                    m.stopped.store(true, Ordering::SeqCst);
                    m.ended_by = Some(
                        match fault.action {
                            FaultAction::ConsumerCrash { .. } => "crashed",
                            FaultAction::ConsumerLeave { .. } => "left",
                            _ => "restarted",
                        }
                        .into(),
                    );
                    m.ended_at = Some(at);
                    m.cancel.cancel();
                    acted.push(m.index);
                }
                if restart {
                    // Each new member starts once the one it replaces has closed (committed,
                    // and left if dynamic), as a process restarted in place does.
                    let closing = Instant::now() + RESTART_CLOSE_WAIT;
                    while Instant::now() < closing
                        && !stop.token().is_cancelled()
                        && chosen.iter().any(|&i| !members[i].task.is_finished())
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if chosen.iter().any(|&i| !members[i].task.is_finished()) {
                        error = Some(format!(
                            "a member had not closed within {} s: its successor joined beside it",
                            RESTART_CLOSE_WAIT.as_secs()
                        ));
                    }
                    // Stopped meanwhile (the run's stop, or the group done): no successor.
                    let ended = stop.token().is_cancelled()
                        || members
                            .iter()
                            .any(|m| m.ended_by.is_none() && m.task.is_finished());
                    if ended {
                        error = Some("not restarted: the run had ended".into());
                    }
                    for &i in chosen.iter().filter(|_| !ended) {
                        match connect().await {
                            Ok(cluster) => {
                                let index = members.len();
                                let slot = members[i].slot;
                                members.push(spawn(index, slot, Some(i), cluster));
                            }
                            Err(e) => error = Some(e.to_string()),
                        }
                    }
                }
                if acted.len() < count as usize {
                    error = Some(format!(
                        "{} of {count} members were still reading",
                        acted.len()
                    ));
                }
            }
            _ => error = Some("not a group member's fault".into()),
        }
        applied.push(GroupFault {
            fault: fault.spec.clone(),
            at_s: at.as_secs_f64(),
            members: acted,
            error,
        });
    }
    for fault in &spec.member_faults[applied.len()..] {
        applied.push(GroupFault {
            fault: fault.spec.clone(),
            at_s: fault.at.as_secs_f64(),
            members: Vec::new(),
            error: Some("not applied: the run had ended".into()),
        });
    }
    let mut runs = Vec::new();
    let mut reports = Vec::new();
    let mut members = members.into_iter();
    while let Some(m) = members.next() {
        let out = match m.task.await {
            Ok(out) => out,
            Err(e) => Err(BenchError::Run(format!("group member {}: {e}", m.index))),
        };
        let out = match out {
            Ok(out) => out,
            // Stopped by a fault before it had joined, or still joining when the agents of a
            // distributed run had read its --messages together: a member that read nothing.
            Err(e)
                if m.ended_by.is_some()
                    || (matches!(e, BenchError::StoppedJoining)
                        && stop.reason().as_deref() == Some(crate::distributed::ENOUGH)) =>
            {
                reports.push(MemberReport {
                    member: m.index,
                    member_id: None,
                    started_s: m.started.as_secs_f64(),
                    ended_s: m.ended_at.unwrap_or_default().as_secs_f64(),
                    ended: m.ended_by.unwrap_or_else(|| "run-ended".into()),
                    instance_id: m.instance_id,
                    replaces: m.replaces,
                    records: 0,
                    duplicated: None,
                    joins: Vec::new(),
                    error: Some(e.to_string()),
                });
                continue;
            }
            // A member that could not join is the run's failure: the others are stopped first.
            Err(e) => {
                for rest in members {
                    rest.cancel.cancel();
                    let _ = rest.task.await;
                }
                reporter.abort();
                return Err(e);
            }
        };
        let ended_s = m.ended_at.map_or_else(
            || {
                out.run
                    .ended_at
                    .duration_since(started_wall)
                    .unwrap_or_default()
                    .as_secs_f64()
            },
            |d| d.as_secs_f64(),
        );
        reports.push(MemberReport {
            member: m.index,
            member_id: out.run.member_id.clone(),
            started_s: m.started.as_secs_f64(),
            ended_s,
            ended: m.ended_by.unwrap_or_else(|| "run-ended".into()),
            instance_id: m.instance_id,
            replaces: m.replaces,
            records: out.run.records,
            duplicated: out.duplicated,
            joins: out.joins,
            error: None,
        });
        runs.push(out.run);
    }
    reporter.abort();
    let events = share.events.lock().expect("events lock").clone();
    let (rebalances, unowned, at_end) =
        rebalances(&reports, &events, &applied, share.start.elapsed());
    let mut run = pooled(runs, started_wall, spec.timeline_interval)
        .ok_or_else(|| BenchError::Run("no group member ran".into()))?;
    // One process: its CPU over the whole group run.
    run.cpu = crate::measure::CpuTime::now().since(cpu_start);
    run.verification = share
        .verifier
        .as_ref()
        .map(|v| v.lock().expect("verifier lock").report(None));
    run.latest_values = share
        .latest
        .as_ref()
        .map(|l| l.lock().expect("latest lock").report());
    Ok((
        run,
        GroupReport {
            consumers: spec.consumers,
            members: reports,
            rebalances,
            faults: applied,
            partitions_unowned_ms: unowned,
            partitions_unowned_at_end_ms: at_end,
        },
    ))
}

/// Every `every`, the progress window of several readers together (a group's members, the
/// topics of `--include`: the records and bytes `counts` gives) to `observer`, as one consumer's
/// would be.
pub(crate) async fn report_windows<O: ConsumeObserver>(
    counts: impl Fn() -> (u64, u64),
    every: Duration,
    observer: Arc<O>,
) {
    let mut last = (0u64, 0u64, Instant::now());
    loop {
        tokio::time::sleep(every).await;
        let (records, bytes) = counts();
        let now = Instant::now();
        observer.interval(&super::ConsumeWindow {
            at: SystemTime::now(),
            elapsed: now - last.2,
            total_records: records,
            total_bytes: bytes,
            records: records - last.0,
            bytes: bytes - last.1,
            join: Duration::ZERO,
            end_to_end: None,
        });
        last = (records, bytes, now);
    }
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
            }),
        }
    }
    // What set each off: the start (the first); a join, the rebalance its new members joined
    // in (the one under way at the fault, or the next); a leave or a crash, the first rebalance
    // that began at or after it (the coordinator learns of a crash only later), else the one
    // under way.
    let mut causes: Vec<Vec<String>> = vec![Vec::new(); out.len()];
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
    // to when one took it again (before the first owner, the partition had not begun).
    let mut owners: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    let mut since: BTreeMap<i32, Duration> = BTreeMap::new();
    let mut total: BTreeMap<i32, f64> = BTreeMap::new();
    for e in events {
        let o = owners.entry(e.partition).or_default();
        if e.owned {
            if o.is_empty()
                && let Some(gap_from) = since.remove(&e.partition)
            {
                let ms = (e.at.saturating_sub(gap_from)).as_secs_f64() * 1e3;
                *total.entry(e.partition).or_default() += ms;
                let at_s = e.at.as_secs_f64();
                if let Some(r) = out.iter_mut().rev().find(|r| r.began_s <= at_s + 1e-3) {
                    *r.partitions_unowned_ms.entry(e.partition).or_default() += ms;
                }
            }
            if !o.contains(&e.member) {
                o.push(e.member);
            }
        } else if let Some(pos) = o.iter().position(|m| *m == e.member) {
            o.remove(pos);
            if o.is_empty() {
                since.insert(e.partition, e.at);
            }
        }
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

/// The members' runs as one: counts summed, histograms added, windows merged by wall-clock slot
/// of `every` from `start`, the span from the first start to the last end.
pub(crate) fn pooled(
    runs: Vec<ConsumeRun>,
    start: SystemTime,
    every: Duration,
) -> Option<ConsumeRun> {
    let mut iter = runs.into_iter();
    let mut all = iter.next()?;
    let mut windows = std::mem::take(&mut all.timeline);
    for r in iter {
        all.records += r.records;
        all.bytes += r.bytes;
        all.batches += r.batches;
        all.started_at = all.started_at.min(r.started_at);
        all.ended_at = all.ended_at.max(r.ended_at);
        all.join = all.join.max(r.join);
        let _ = all.fetch_latency.add(&r.fetch_latency);
        let _ = all.end_to_end.add(&r.end_to_end);
        all.peak_rss_kib = all.peak_rss_kib.max(r.peak_rss_kib);
        all.cluster.merge(&r.cluster);
        all.fetches += r.fetches;
        all.empty_fetches += r.empty_fetches;
        all.commits += r.commits;
        all.commits_refused += r.commits_refused;
        all.timed_out |= r.timed_out;
        if all.aborted.is_none() {
            all.aborted = r.aborted;
        }
        for (k, n) in r.errors {
            *all.errors.entry(k).or_default() += n;
        }
        for (p, span) in r.partitions {
            match all.partitions.get_mut(&p) {
                Some(s) => {
                    s.start_offset = s.start_offset.min(span.start_offset);
                    s.end_offset = s.end_offset.max(span.end_offset);
                    s.records += span.records;
                    s.skipped += span.skipped;
                }
                None => {
                    all.partitions.insert(p, span);
                }
            }
        }
        windows.extend(r.timeline);
        if let (Some(a), Some(b)) = (all.value_decoding.as_mut(), r.value_decoding.as_ref()) {
            a.merge(b);
        }
    }
    all.elapsed = all
        .ended_at
        .duration_since(all.started_at)
        .unwrap_or_default();
    all.member_id = None;
    all.timeline = crate::timeline::merge_by_slot(windows, start, every);
    Some(all)
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
            owned,
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
}
