//! Several members in one consumer group (`consume --consumers N`), and the group faults on the
//! run's schedule (`consumer-join=K`, `consumer-leave=K`, `consumer-crash=K`,
//! `consumer-restart=K`, applied by [`crate::group::roster`]): each member a [`super::phase`]
//! reading of its own — its own connections, its own member id — sharing the record target, the
//! idle time-out and (with `--verify`) one verifier, so that a record read by two members across
//! a handover is a duplicate, counted against the member that read it second.
//!
//! Every member says when it owned which partition ([`crate::group::OwnerLog`]); the group's
//! report ([`crate::group::rebalances`]) makes the rebalances of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use kbench_client::{Cluster, TopicLayout};

use super::{ConsumeObserver, ConsumeRun, ConsumeSpec};
use crate::error::BenchError;
use crate::group::roster::{MemberStop, Roster};
pub use crate::group::{GroupFault, GroupReport, MemberJoin, MemberReport, Rebalance};
use crate::group::{OwnerLog, Ownership};
use crate::stop::Stop;

/// What the members share.
pub(crate) struct GroupShare {
    pub start: Instant,
    /// Records read by every member together, and their key and value bytes.
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// When any member last read a record (or the group last settled), µs from `start`.
    pub last_record_us: AtomicU64,
    /// One verifier for the group (`--verify`).
    pub verifier: Option<Arc<Mutex<crate::verify::Verifier>>>,
    /// One latest-value check for the group (`--latest-values`): each key's last record, whoever
    /// read it (a record read again across a handover is the same record).
    pub latest: Option<Arc<Mutex<crate::latest::LatestChecker>>>,
    /// Who owned which partition when.
    pub log: OwnerLog,
}

impl GroupShare {
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Records were just read.
    pub fn read(&self, n: u64, bytes: u64) {
        self.records.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.touch();
    }

    /// The group is reading (or has just settled): its idle time counts from now.
    pub fn touch(&self) {
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
        let partitions: Vec<i32> = partitions.into_iter().collect();
        if owned && let Some(v) = self.verifier.as_ref() {
            let mut v = v.lock().expect("verifier lock");
            for p in &partitions {
                v.handover(*p);
            }
        }
        let what = if owned {
            Ownership::Taken
        } else {
            Ownership::Released
        };
        self.log.note(member, partitions, what);
    }
}

/// A member's part in the group run.
pub(crate) struct MemberCtx {
    pub index: usize,
    /// When the member is to end, and how.
    pub stop: MemberStop,
    /// `group.instance.id` (KIP-345): the run's, with `-N` after it, N the member's place.
    pub instance_id: Option<String>,
    pub share: Arc<GroupShare>,
}

/// What a member's reading hands back.
pub(crate) struct MemberRun {
    pub run: ConsumeRun,
    pub joins: Vec<MemberJoin>,
    pub duplicated: Option<u64>,
}

/// Run `spec.consumers` members in `spec`'s group (and the members `spec.member_faults` add and
/// stop), each over a cluster of its own; the pooled run and the group's report.
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
        log: OwnerLog::new(),
    });
    let started_wall = SystemTime::now();
    let mut roster: Roster<MemberRun> = Roster::new(stop.token());
    let spawn = |roster: &mut Roster<MemberRun>,
                 slot: Option<usize>,
                 replaces: Option<usize>,
                 cluster: Arc<Cluster>,
                 started: Duration| {
        let (layout, spec, stop, observer, share) = (
            layout.clone(),
            spec.clone(),
            stop.clone(),
            observer.clone(),
            share.clone(),
        );
        roster.spawn(slot, replaces, started, move |index, slot, member_stop| {
            let instance_id = spec
                .consumer
                .group_instance_id
                .as_ref()
                .map(|id| format!("{id}-{slot}"));
            let ctx = MemberCtx {
                index,
                stop: member_stop,
                instance_id,
                share,
            };
            async move {
                super::phase::run_member(cluster, layout, &spec, stop, observer, ctx).await
            }
        });
    };
    // A member's own connections; the cluster's brokers learnt (a coordinator or a leader may be
    // one the bootstrap answer did not name).
    let connect = || {
        let (config, topic) = (first.config().clone(), layout.name.clone());
        async move {
            let cluster = Cluster::connect(config)
                .await
                .map_err(|e| BenchError::Run(format!("a group member's connection: {e}")))?;
            cluster
                .metadata(&topic)
                .await
                .map_err(|e| BenchError::topic(&topic, e))?;
            Ok::<_, BenchError>(Arc::new(cluster))
        }
    };
    // Every first member's connections before any member starts: a failure here leaves nothing
    // running.
    let mut clusters = vec![first.clone()];
    for _ in 1..spec.consumers {
        clusters.push(connect().await?);
    }
    for cluster in clusters {
        spawn(&mut roster, None, None, cluster, Duration::ZERO);
    }
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
    let mut ended: Vec<(usize, Result<MemberRun, BenchError>)> = Vec::new();
    let mut applied = Vec::new();
    for fault in &spec.member_faults {
        // Wait for the fault's time, unless the run is over first: stopped, or a member finished
        // because the group read all it was to read or went idle (members that a fault stopped
        // are not the run's end: a later join may follow).
        let due = share.start + fault.at;
        let over = |roster: &Roster<MemberRun>| {
            stop.token().is_cancelled() || roster.one_ended_by_itself()
        };
        while Instant::now() < due && !over(&roster) {
            tokio::select! {
                Some(out) = roster.next_ended() => ended.push(out),
                _ = tokio::time::sleep_until(due.into()) => {}
            }
        }
        if over(&roster) {
            break;
        }
        let at = share.start.elapsed();
        applied.push(roster.apply(fault, at, connect, spawn).await);
    }
    for fault in &spec.member_faults[applied.len()..] {
        applied.push(Roster::<MemberRun>::not_applied(fault));
    }
    // A member that could not join (or failed) is the run's failure: the others are stopped
    // first, and its error is the run's.
    let mut failed = None;
    let mut checked = 0;
    loop {
        while checked < ended.len() {
            if let (i, Err(e)) = &ended[checked]
                && failed.is_none()
                && !tolerated(&roster, *i, e, &stop)
            {
                roster.stop_all();
                failed = Some(checked);
            }
            checked += 1;
        }
        match roster.next_ended().await {
            Some(out) => ended.push(out),
            None => break,
        }
    }
    reporter.abort();
    if let Some(at) = failed
        && let (_, Err(e)) = ended.swap_remove(at)
    {
        return Err(e);
    }
    ended.sort_by_key(|(i, _)| *i);
    let mut runs = Vec::new();
    let mut reports = Vec::new();
    for (i, out) in ended {
        let m = &roster.members[i];
        let ended_by = m.ended_by.unwrap_or(crate::group::MemberEnd::RunEnded);
        let instance_id = spec
            .consumer
            .group_instance_id
            .as_ref()
            .map(|id| format!("{id}-{}", m.slot));
        match out {
            Ok(out) => {
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
                    member: i,
                    member_id: out.run.member_id.clone(),
                    started_s: m.started.as_secs_f64(),
                    ended_s,
                    ended: ended_by.as_str().into(),
                    instance_id,
                    replaces: m.replaces,
                    records: out.run.records,
                    duplicated: out.duplicated,
                    joins: out.joins,
                    error: None,
                });
                runs.push(out.run);
            }
            // Stopped by a fault before it had joined, or still joining when the agents of a
            // distributed run had read its --messages together: a member that read nothing.
            Err(e) => reports.push(MemberReport {
                member: i,
                member_id: None,
                started_s: m.started.as_secs_f64(),
                ended_s: m.ended_at.unwrap_or_default().as_secs_f64(),
                ended: ended_by.as_str().into(),
                instance_id,
                replaces: m.replaces,
                records: 0,
                duplicated: None,
                joins: Vec::new(),
                error: Some(e.to_string()),
            }),
        }
    }
    let events = share.log.events();
    let (rebalances, unowned, at_end) =
        crate::group::rebalances(&reports, &events, &applied, share.start.elapsed());
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

/// Whether member `i`'s error leaves the run standing: a fault stopped it (before it had
/// joined), or it was still joining when the agents of a distributed run had read its
/// `--messages` together.
fn tolerated(roster: &Roster<MemberRun>, i: usize, e: &BenchError, stop: &Stop) -> bool {
    roster.members.get(i).is_some_and(|m| m.ended_by.is_some())
        || (matches!(e, BenchError::StoppedJoining)
            && stop.reason().as_deref() == Some(crate::distributed::ENOUGH))
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
