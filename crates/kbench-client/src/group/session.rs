//! The group session: one owner of a consumer group member's lifecycle, after franz-go's
//! `groupConsumer` (`pkg/kgo/consumer_group.go`: `manage`, `setupAssignedAndHeartbeat`,
//! `fetchOffsets` → `assignPartitions`).
//!
//! A [`GroupConsumer`] is a member and the consumer engine that reads its partitions. Its
//! *manager*, a task of its own, heartbeats on its own timer (on the coordinator's connection,
//! apart from the fetches), joins again when the coordinator asks, gives partitions up (committing
//! where the owner got to, unless they were lost), finds where each partition it is given starts
//! (the group's commit, never before the run's floor, else `auto.offset.reset`), hands them to
//! the engine's cursors, commits in the background when asked to, and leaves (or not) as the
//! member ends. The owner — a workload — only [`poll`](GroupConsumer::poll)s and
//! [`mark`](GroupConsumer::mark)s what it processed; it never heartbeats, joins or syncs.
//!
//! What happened to the membership comes out of `poll` in order with the records, as Java's
//! rebalance listener is called from `poll`: [`Polled::Revoked`] before the last answer of a
//! partition given up is dropped, [`Polled::Assigned`] before the first of a partition taken.
//! A revocation waits (bounded) for the owner to come back to `poll`, so that every record it
//! was handed is marked before the positions given up are committed: a clean handover reads
//! nothing twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::OffsetReset;
use crate::consumer::{Consumer, ConsumerOptions, Fetched};
use crate::events::ClusterEvents;

/// Where a partition this member is given starts, when the group has committed nothing for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// `auto.offset.reset`.
    Reset(OffsetReset),
    /// This offset.
    Offset(i64),
}

/// Where partitions start: the group's commit, else [`StartFrom`]; never before `floor` (a run's
/// start, so that an older run's commit in the same group is not read from).
#[derive(Debug, Clone)]
pub struct StartPolicy {
    pub from: StartFrom,
    pub floor: Option<Arc<BTreeMap<i32, i64>>>,
}

impl StartPolicy {
    /// The group's commit, else `auto.offset.reset`.
    pub fn reset(reset: OffsetReset) -> StartPolicy {
        StartPolicy {
            from: StartFrom::Reset(reset),
            floor: None,
        }
    }

    /// Where `partition` starts given the group's `committed` offset: the commit, never below the
    /// floor; the floor where nothing was committed; `None` where the reset must be asked.
    fn start(&self, partition: i32, committed: Option<i64>) -> Option<i64> {
        let floor = self.floor.as_ref().and_then(|f| f.get(&partition).copied());
        match (committed, floor) {
            (Some(c), Some(f)) => Some(c.max(f)),
            (None, Some(f)) => Some(f),
            (Some(c), None) => Some(c),
            (None, None) => match self.from {
                StartFrom::Offset(o) => Some(o),
                StartFrom::Reset(_) => None,
            },
        }
    }
}

/// When the member commits what its owner marked. Whatever the rule, it commits the partitions
/// it gives up (unless lost) and, as it ends, what it still owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commits {
    /// Never (`enable.auto.commit=false` and no commit asked for).
    Off,
    /// The owner commits ([`GroupConsumer::commit`]), as `commitSync` after each poll.
    Owner,
    /// In the background, every interval (`auto.commit.interval.ms`).
    Every(Duration),
}

/// How a member ends: the run ended, or a fault stopped it. One enum for every workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberEnd {
    /// The run ended: it commits and leaves (a static member too, as Java's `close` with
    /// `LEAVE_GROUP`), so that a later run in the group does not wait out its session.
    RunEnded,
    /// `consumer-leave`: it commits and leaves.
    Left,
    /// `consumer-crash`: it says nothing more (no commit, no LeaveGroup); the coordinator learns
    /// of it when its session runs out.
    Crashed,
    /// `consumer-restart`: it closes as Java's consumer does (a static member stays in the group
    /// for its session, for its successor to take its place; a dynamic one leaves).
    Restarted,
}

impl MemberEnd {
    /// As results name it.
    pub fn as_str(&self) -> &'static str {
        match self {
            MemberEnd::RunEnded => "run-ended",
            MemberEnd::Left => "left",
            MemberEnd::Crashed => "crashed",
            MemberEnd::Restarted => "restarted",
        }
    }

    /// Whether a fault ended it (its partitions are then left without a reader).
    pub fn by_fault(&self) -> bool {
        *self != MemberEnd::RunEnded
    }
}

/// The group's counts, shared by every member of a run (live: a progress line may read them).
#[derive(Debug, Default)]
pub struct GroupCounters {
    pub heartbeats: AtomicU64,
    /// Rebalances this run's members went through (each member's count).
    pub rejoins: AtomicU64,
    pub commits: AtomicU64,
    /// Commits the coordinator refused for the membership (a rebalance under way, a stale
    /// generation): not errors (Java logs them and rejoins).
    pub commits_refused: AtomicU64,
    pub commit_failures: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    /// The members rebalancing now (by session), and since when.
    rebalancing: Mutex<BTreeMap<u64, Instant>>,
    /// When a member last got its partitions after a rebalance.
    settled: Mutex<Option<Instant>>,
    sessions: AtomicU64,
}

impl GroupCounters {
    /// Since when a member of the run has been rebalancing (the earliest of those still at it);
    /// `None` while every member reads its partitions. A drain waits for it.
    pub fn rebalancing_since(&self) -> Option<Instant> {
        self.rebalancing
            .lock()
            .expect("rebalancing lock")
            .values()
            .min()
            .copied()
    }

    /// When a member of the run last got its partitions (the end of the last rebalance).
    pub fn last_settled(&self) -> Option<Instant> {
        *self.settled.lock().expect("settled lock")
    }

    fn session(&self) -> u64 {
        self.sessions.fetch_add(1, Ordering::Relaxed)
    }

    fn rebalance_began(&self, session: u64, at: Instant) {
        self.rebalancing
            .lock()
            .expect("rebalancing lock")
            .entry(session)
            .or_insert(at);
    }

    fn rebalance_ended(&self, session: u64, settled: bool) {
        let was = self
            .rebalancing
            .lock()
            .expect("rebalancing lock")
            .remove(&session);
        if settled || was.is_some() {
            *self.settled.lock().expect("settled lock") = Some(Instant::now());
        }
    }

    /// Errors the sessions met and went on from, by message.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        self.errors.lock().expect("errors lock").clone()
    }

    fn error(&self, what: String) {
        tracing::debug!(error = %what, "group session");
        *self
            .errors
            .lock()
            .expect("errors lock")
            .entry(what)
            .or_default() += 1;
    }

    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One join of the member: when its rebalance began, its phases, what it was given.
#[derive(Debug, Clone)]
pub struct JoinInfo {
    /// When the member began this rebalance (it was asked to rejoin, or it started).
    pub began: Instant,
    /// JoinGroup held (every round of it), and SyncGroup.
    pub join_group: Duration,
    pub sync_group: Duration,
    /// From `began` to the new partitions positioned.
    pub took: Duration,
    pub generation: i32,
    pub member_id: String,
    /// The group's leader by the last JoinGroup answer (the classic protocol), and whether it is
    /// this member.
    pub leader_id: String,
    pub leader: bool,
    /// Whether the member reads on through its rebalances (KIP-429's cooperative rebalance, or
    /// KIP-848's consumer protocol).
    pub incremental: bool,
    /// The heartbeat interval in force: an incremental rebalance's steps come that far apart.
    pub heartbeat: Duration,
}

/// Partitions given to the member.
#[derive(Debug, Clone)]
pub struct Assigned {
    /// The partitions new to the member, each with the offset it starts reading at.
    pub added: BTreeMap<i32, i64>,
    /// Every partition the member owns now.
    pub owned: Vec<i32>,
    pub join: JoinInfo,
}

/// Partitions the member gave up, with where its owner got to in each (committed, unless lost).
#[derive(Debug, Clone)]
pub struct Revoked {
    pub positions: BTreeMap<i32, i64>,
    /// The coordinator no longer knew the member (or its generation): the partitions were lost,
    /// not handed on, and nothing was committed for them.
    pub lost: bool,
    pub at: Instant,
}

/// What [`GroupConsumer::poll`] hands its owner, in order.
#[derive(Debug)]
pub enum Polled {
    Fetched(Fetched),
    Assigned(Assigned),
    Revoked(Revoked),
    /// The member is out of the group for good: an error no retry mends (a refused protocol, a
    /// static id taken, an authorization).
    Failed(ClientError),
}

/// What the manager tells the owner, through `poll`.
enum ToOwner {
    Assign(Assigned),
    Revoke {
        partitions: Vec<i32>,
        lost: bool,
        positions: oneshot::Sender<BTreeMap<i32, i64>>,
    },
    Failed(ClientError),
}

/// What the owner and the manager share.
struct Shared {
    state: Mutex<State>,
    counters: Arc<GroupCounters>,
    /// A commit was refused: heartbeat now (the rebalance it means is joined at once).
    heartbeat_now: Notify,
    /// The owner ends the member, as the [`MemberEnd`] kept in `state` says.
    closing: CancellationToken,
    topic: TopicLayout,
}

#[derive(Debug, Default)]
struct State {
    /// The partitions the owner reads, and the next offset to commit in each (what it marked).
    marked: BTreeMap<i32, i64>,
    /// What was committed last, per partition.
    committed: BTreeMap<i32, i64>,
    /// Who commits now; `None` while the member rebalances (a commit then is refused, as Java's
    /// `RebalanceInProgressException`).
    target: Option<CommitTarget>,
    /// Since when the member has been rebalancing (asked to rejoin, not yet given its partitions).
    rebalancing_since: Option<Instant>,
    member_id: String,
    generation: i32,
    leader_id: String,
    leader: bool,
    end: Option<MemberEnd>,
}

/// How a commit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Nothing had moved since the last commit.
    Nothing,
    Done,
    /// Refused for the membership (a rebalance under way, or the generation gone): the member
    /// rejoins; the positions are committed by the partitions' next commit.
    Refused,
}

impl Shared {
    /// Commit `positions` (those that moved since their last commit).
    async fn commit(&self, positions: &BTreeMap<i32, i64>) -> Result<Committed, ClientError> {
        let (request, moved) = {
            let st = self.state.lock().expect("session lock");
            let moved: BTreeMap<i32, i64> = positions
                .iter()
                .filter(|(p, o)| st.committed.get(p) != Some(o))
                .map(|(p, o)| (*p, *o))
                .collect();
            if moved.is_empty() {
                return Ok(Committed::Nothing);
            }
            // Refused here, as Java's `RebalanceInProgressException` is, without a request (and
            // not counted: the coordinator refused nothing).
            let Some(target) = st.target.as_ref() else {
                return Ok(Committed::Refused);
            };
            (target.request(&self.topic, &moved), moved)
        };
        match send_commit(request).await {
            Ok(Membership::Stable) => {
                GroupCounters::add(&self.counters.commits);
                self.state
                    .lock()
                    .expect("session lock")
                    .committed
                    .extend(moved);
                Ok(Committed::Done)
            }
            Ok(Membership::RejoinNeeded) => {
                GroupCounters::add(&self.counters.commits_refused);
                self.heartbeat_now.notify_one();
                Ok(Committed::Refused)
            }
            Err(e) => {
                GroupCounters::add(&self.counters.commit_failures);
                Err(e)
            }
        }
    }

    fn marked(&self) -> BTreeMap<i32, i64> {
        self.state.lock().expect("session lock").marked.clone()
    }
}

/// The session's settings beyond the member protocol's.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub commits: Commits,
    pub start: StartPolicy,
    /// Shared with the run's other members (or a fresh set).
    pub counters: Arc<GroupCounters>,
}

/// A consumer group member and the engine reading its partitions. See the module's doc.
pub struct GroupConsumer {
    engine: Consumer,
    shared: Arc<Shared>,
    from_manager: mpsc::UnboundedReceiver<ToOwner>,
    manager: ManagerTask,
    /// The protocol and the interval the member was configured with (for reports).
    config: GroupConfig,
}

/// The manager's task, ended with its owner (dropped without `close`, as a failed run drops it:
/// the session ends as a crash does).
struct ManagerTask(Option<tokio::task::JoinHandle<()>>, u64, Arc<GroupCounters>);

impl Drop for ManagerTask {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
        // A member gone is no rebalance of the run's to wait for.
        self.2.rebalance_ended(self.1, false);
    }
}

/// How long a revocation waits for the owner to come back to `poll` (it marks every record it
/// was handed first) before the member commits what was marked and goes on: the owner is then
/// not polling, so reads nothing more.
const REVOKE_WAIT: Duration = Duration::from_secs(5);

/// How long the member waits for its last commit and LeaveGroup as it ends (a coordinator that
/// holds a join on the connection answers them only after it).
const LEAVE_WAIT: Duration = Duration::from_secs(5);

impl GroupConsumer {
    /// Join `config`'s group and start its session: on return the member has joined (its first
    /// partitions come out of [`poll`](Self::poll) as [`Polled::Assigned`]). `None` when `stop`
    /// was cancelled while the coordinator held the join (the member then left, if it had an id).
    pub async fn start(
        cluster: Arc<Cluster>,
        layout: &TopicLayout,
        config: GroupConfig,
        options: ConsumerOptions,
        settings: SessionSettings,
        stop: &CancellationToken,
    ) -> Result<Option<GroupConsumer>, ClientError> {
        let began = Instant::now();
        let Some(member) = GroupMember::join_until(cluster.clone(), config.clone(), stop).await?
        else {
            return Ok(None);
        };
        let engine = Consumer::new(cluster.clone(), layout, options.clone());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rebalancing_since: Some(began),
                ..State::default()
            }),
            counters: settings.counters.clone(),
            heartbeat_now: Notify::new(),
            closing: CancellationToken::new(),
            topic: layout.clone(),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let session = settings.counters.session();
        let counters = settings.counters.clone();
        let manager = Manager {
            session,
            member,
            shared: shared.clone(),
            to_owner: tx,
            cluster,
            settings,
            retry_backoff: options.retry_backoff,
            owned: BTreeSet::new(),
            last_heartbeat: Instant::now(),
            background: tokio::task::JoinSet::new(),
            heartbeat_interval: config.heartbeat_interval,
        };
        counters.rebalance_began(session, began);
        let manager = ManagerTask(Some(tokio::spawn(manager.run(began))), session, counters);
        Ok(Some(GroupConsumer {
            engine,
            shared,
            from_manager: rx,
            manager,
            config,
        }))
    }

    /// The next thing that happened: an answer of the engine, or a change of membership.
    /// `None` once the session has ended.
    pub async fn poll(&mut self) -> Option<Polled> {
        tokio::select! {
            biased;
            // `None`: the manager ended (closed, or failed and said so): nothing more to read.
            told = self.from_manager.recv() => told.map(|told| self.take(told)),
            fetched = self.engine.poll() => fetched.map(Polled::Fetched),
        }
    }

    /// What the manager said, applied to the engine and the marks.
    fn take(&mut self, told: ToOwner) -> Polled {
        match told {
            ToOwner::Assign(assigned) => {
                self.engine.add(&assigned.added);
                self.shared
                    .state
                    .lock()
                    .expect("session lock")
                    .marked
                    .extend(assigned.added.iter().map(|(p, o)| (*p, *o)));
                Polled::Assigned(assigned)
            }
            ToOwner::Revoke {
                partitions,
                lost,
                positions,
            } => {
                self.engine.remove(&partitions);
                let given_up: BTreeMap<i32, i64> = {
                    let mut st = self.shared.state.lock().expect("session lock");
                    partitions
                        .iter()
                        .filter_map(|p| st.marked.remove(p).map(|o| (*p, o)))
                        .collect()
                };
                let _ = positions.send(given_up.clone());
                Polled::Revoked(Revoked {
                    positions: given_up,
                    lost,
                    at: Instant::now(),
                })
            }
            ToOwner::Failed(e) => Polled::Failed(e),
        }
    }

    /// The owner processed `partition` up to `next` (the next offset to read): what a commit
    /// commits. A partition the member no longer owns is passed over.
    pub fn mark(&self, partition: i32, next: i64) {
        let mut st = self.shared.state.lock().expect("session lock");
        if let Some(o) = st.marked.get_mut(&partition) {
            *o = next;
        }
    }

    /// Fetch `partition` from `offset` from now on (a hole to wait at, a log read again).
    pub fn seek(&mut self, partition: i32, offset: i64) {
        self.engine.seek(partition, offset);
    }

    /// Stop fetching (the member stays in its group, heartbeating), or go on.
    pub fn pause(&mut self, paused: bool) {
        self.engine.pause(paused);
    }

    /// Commit what was marked, awaited (the member's rebalance under way refuses it, as Java's
    /// `commitSync` does).
    pub async fn commit(&self) -> Result<Committed, ClientError> {
        let marked = self.shared.marked();
        self.shared.commit(&marked).await
    }

    /// The partitions the owner reads now, and where it got to in each.
    pub fn positions(&self) -> BTreeMap<i32, i64> {
        self.shared.marked()
    }

    /// Since when the member has been rebalancing (`None` while it reads its partitions).
    pub fn rebalancing_since(&self) -> Option<Instant> {
        self.shared
            .state
            .lock()
            .expect("session lock")
            .rebalancing_since
    }

    pub fn member_id(&self) -> String {
        self.shared
            .state
            .lock()
            .expect("session lock")
            .member_id
            .clone()
    }

    /// The group's leader by the member's last JoinGroup answer, and whether it is this member.
    pub fn leader(&self) -> (String, bool) {
        let st = self.shared.state.lock().expect("session lock");
        (st.leader_id.clone(), st.leader)
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn counters(&self) -> &Arc<GroupCounters> {
        &self.shared.counters
    }

    /// The topic as the engine last learned it.
    pub fn layout(&self) -> TopicLayout {
        self.engine.layout()
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        self.engine.cluster()
    }

    /// What the cluster did so far, as the engine saw it.
    pub fn events(&self) -> ClusterEvents {
        self.engine.events()
    }

    /// End the member as `end` says: the engine stops; then (but for a crash) what was marked is
    /// committed and the member leaves or closes, within [`LEAVE_WAIT`] each. What the cluster
    /// did, as the engine saw it.
    pub async fn close(self, end: MemberEnd) -> ClusterEvents {
        let GroupConsumer {
            engine,
            shared,
            mut manager,
            ..
        } = self;
        let events = engine.finish();
        let Some(mut task) = manager.0.take() else {
            return events;
        };
        if end == MemberEnd::Crashed {
            task.abort();
            return events;
        }
        shared.state.lock().expect("session lock").end = Some(end);
        shared.closing.cancel();
        // The manager commits and leaves, each bounded; a manager stuck past both is dropped.
        if tokio::time::timeout(LEAVE_WAIT * 3, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
        events
    }
}

/// The manager: the one task that speaks for the member.
struct Manager {
    /// This member's key in the run's [`GroupCounters`].
    session: u64,
    member: GroupMember,
    shared: Arc<Shared>,
    to_owner: mpsc::UnboundedSender<ToOwner>,
    cluster: Arc<Cluster>,
    settings: SessionSettings,
    retry_backoff: Duration,
    /// The partitions the owner was told it owns (and not told it gave up).
    owned: BTreeSet<i32>,
    last_heartbeat: Instant,
    /// Background commits not answered yet.
    background: tokio::task::JoinSet<()>,
    heartbeat_interval: Duration,
}

/// Why the manager stops its work: the owner ends the member.
struct Closing;

impl Manager {
    async fn run(mut self, began: Instant) {
        let outcome = self.manage(began).await;
        match outcome {
            Ok(Closing) => self.end().await,
            Err(e) => {
                // Out of the group for good: said once, through `poll`.
                let _ = tokio::time::timeout(LEAVE_WAIT, self.member.leave()).await;
                let _ = self.to_owner.send(ToOwner::Failed(e));
            }
        }
    }

    /// Heartbeat, commit and rebalance until the owner ends the member.
    async fn manage(&mut self, began: Instant) -> Result<Closing, ClientError> {
        if self.assignment_taken(began).await?.is_none() {
            return Ok(Closing);
        }
        let mut next_commit = match self.settings.commits {
            Commits::Every(d) => Some(tokio::time::Instant::now() + d),
            _ => None,
        };
        loop {
            let due = self
                .member
                .heartbeat_due_in(self.last_heartbeat.elapsed(), self.heartbeat_interval);
            let heartbeat_at = tokio::time::Instant::now() + due;
            let commit_at = next_commit.unwrap_or_else(|| heartbeat_at + Duration::from_secs(3600));
            let closing = self.shared.closing.clone();
            let shared = self.shared.clone();
            tokio::select! {
                _ = closing.cancelled() => return Ok(Closing),
                _ = tokio::time::sleep_until(heartbeat_at) => {
                    if self.heartbeat().await?.is_none() {
                        return Ok(Closing);
                    }
                }
                _ = shared.heartbeat_now.notified() => {
                    if self.heartbeat().await?.is_none() {
                        return Ok(Closing);
                    }
                }
                _ = tokio::time::sleep_until(commit_at), if next_commit.is_some() => {
                    if let Commits::Every(d) = self.settings.commits {
                        next_commit = Some(tokio::time::Instant::now() + d);
                    }
                    self.commit_in_background();
                }
            }
            while self.background.try_join_next().is_some() {}
        }
    }

    /// `f`, unless the owner ends the member first (`None`).
    async fn or_closing<T>(closing: &CancellationToken, f: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            r = f => Some(r),
            _ = closing.cancelled() => None,
        }
    }

    /// One heartbeat; a rebalance it asks for (or a coordinator lost) is gone through.
    async fn heartbeat(&mut self) -> Result<Option<()>, ClientError> {
        self.last_heartbeat = Instant::now();
        GroupCounters::add(&self.shared.counters.heartbeats);
        let closing = self.shared.closing.clone();
        let Some(answer) = Self::or_closing(&closing, self.member.heartbeat()).await else {
            return Ok(None);
        };
        match answer {
            Ok(Membership::Stable) => Ok(Some(())),
            Ok(Membership::RejoinNeeded) => self.rebalance().await,
            Err(e) if ends_the_session(&e) => Err(e),
            Err(e) => {
                self.shared.counters.error(format!("heartbeat: {e}"));
                // The coordinator is gone (a broker restarted, the group moved): find it and
                // join again. A coordinator that stays away fails this too; the next heartbeat
                // tries again.
                let moved = matches!(e.code(), Some(15 | 16));
                if self.member.coordinator_lost() || moved {
                    self.rebalance().await
                } else {
                    Ok(Some(()))
                }
            }
        }
    }

    /// The member rebalances: gives up what it does not keep through the join (committing where
    /// its owner got to, unless lost), joins (again and again, while the session lasts), then
    /// takes its new assignment.
    async fn rebalance(&mut self) -> Result<Option<()>, ClientError> {
        let began = Instant::now();
        GroupCounters::add(&self.shared.counters.rejoins);
        let kept: BTreeSet<i32> = self
            .member
            .incoming()
            .map(|k| k.iter().copied().collect())
            .unwrap_or_default();
        let lost = self.member.owned_lost();
        let give_up: Vec<i32> = self.owned.difference(&kept).copied().collect();
        self.shared
            .state
            .lock()
            .expect("session lock")
            .rebalancing_since = Some(began);
        self.shared.counters.rebalance_began(self.session, began);
        if !give_up.is_empty() && self.revoke(give_up, lost).await.is_none() {
            return Ok(None);
        }
        // No commit is good across the join (Java refuses one meanwhile); the background ones
        // still out end first, so that none lands after the partitions' next owner read the
        // commit.
        while self.background.join_next().await.is_some() {}
        self.shared.state.lock().expect("session lock").target = None;
        let closing = self.shared.closing.clone();
        loop {
            let Some(joined) = Self::or_closing(&closing, self.member.rejoin()).await else {
                return Ok(None);
            };
            match joined {
                Ok(()) => break,
                Err(e) if ends_the_session(&e) => return Err(e),
                Err(e) => {
                    self.shared.counters.error(format!("rejoin: {e}"));
                    // Out of the generation: whatever was kept through the join is lost.
                    if !self.owned.is_empty() {
                        let all: Vec<i32> = self.owned.iter().copied().collect();
                        if self.revoke(all, true).await.is_none() {
                            return Ok(None);
                        }
                    }
                    let wait = self.retry_backoff.max(Duration::from_millis(100));
                    if Self::or_closing(&closing, tokio::time::sleep(wait))
                        .await
                        .is_none()
                    {
                        return Ok(None);
                    }
                }
            }
        }
        self.assignment_taken(began).await
    }

    /// After a join: the commit target is the new generation's; partitions taken away (a
    /// cooperative rebalance) are given up and committed; those new to the member start where
    /// the group committed (never before the floor), else where the policy says, and the owner
    /// is told.
    async fn assignment_taken(&mut self, began: Instant) -> Result<Option<()>, ClientError> {
        let target = self.member.commit_target().ok();
        {
            let mut st = self.shared.state.lock().expect("session lock");
            st.target = target;
            st.member_id = self.member.member_id().to_string();
            st.generation = self.member.generation_id();
            st.leader_id = self.member.leader_id().to_string();
            st.leader = self.member.is_leader();
        }
        let now: BTreeSet<i32> = self.member.assignment().iter().copied().collect();
        let taken_away: Vec<i32> = self.owned.difference(&now).copied().collect();
        if !taken_away.is_empty() && self.revoke(taken_away, false).await.is_none() {
            return Ok(None);
        }
        let added: Vec<i32> = now.difference(&self.owned).copied().collect();
        let closing = self.shared.closing.clone();
        let Some(starts) = Self::or_closing(&closing, self.starts(&added)).await else {
            return Ok(None);
        };
        let starts = starts?;
        self.owned = now;
        let (join_group, sync_group) = self.member.phases();
        let join = JoinInfo {
            began,
            join_group,
            sync_group,
            took: began.elapsed(),
            generation: self.member.generation_id(),
            member_id: self.member.member_id().to_string(),
            leader_id: self.member.leader_id().to_string(),
            leader: self.member.is_leader(),
            incremental: self.member.cooperative() || self.member.heartbeat_interval().is_some(),
            heartbeat: self.member.heartbeat_every(self.heartbeat_interval),
        };
        self.shared
            .state
            .lock()
            .expect("session lock")
            .rebalancing_since = None;
        self.shared.counters.rebalance_ended(self.session, true);
        let _ = self.to_owner.send(ToOwner::Assign(Assigned {
            added: starts,
            owned: self.owned.iter().copied().collect(),
            join,
        }));
        Ok(Some(()))
    }

    /// Where each of `partitions` starts: the group's commit (OffsetFetch), never before the
    /// floor; else the policy's offset or `auto.offset.reset` (ListOffsets). A ListOffsets that
    /// fails is asked again (the leader may be moving) for as long as the rebalance timeout.
    async fn starts(&self, partitions: &[i32]) -> Result<BTreeMap<i32, i64>, ClientError> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let layout = &self.shared.topic;
        let committed = match self.member.committed_offsets(layout, partitions).await {
            Ok(c) => c,
            Err(e) => {
                // Read from the floor (or the reset) rather than skipped: duplicates, never loss.
                self.shared.counters.error(format!(
                    "OffsetFetch before reading the partitions given: {e}"
                ));
                BTreeMap::new()
            }
        };
        let mut out = BTreeMap::new();
        let mut reset = Vec::new();
        for p in partitions {
            match self.settings.start.start(*p, committed.get(p).copied()) {
                Some(o) => {
                    out.insert(*p, o);
                }
                None => reset.push(*p),
            }
        }
        if reset.is_empty() {
            return Ok(out);
        }
        let deadline = Instant::now() + self.member_rebalance_timeout();
        loop {
            let answer = match self.settings.start.from {
                StartFrom::Reset(OffsetReset::Earliest) => {
                    self.cluster.earliest_offsets(layout, &reset).await
                }
                _ => self.cluster.latest_offsets(layout, &reset).await,
            };
            match answer {
                Ok(offsets) => {
                    out.extend(offsets);
                    return Ok(out);
                }
                Err(e) if Instant::now() < deadline && !ends_the_session(&e) => {
                    self.shared
                        .counters
                        .error(format!("ListOffsets for the partitions given: {e}"));
                    tokio::time::sleep(self.retry_backoff.max(Duration::from_millis(100))).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn member_rebalance_timeout(&self) -> Duration {
        self.member.config().rebalance_timeout
    }

    /// Give `partitions` up: the owner is told (and says where it got to in each, once it is
    /// back in `poll`), then, unless they were lost, those positions are committed. `None` when
    /// the owner ended the member meanwhile.
    async fn revoke(&mut self, partitions: Vec<i32>, lost: bool) -> Option<()> {
        for p in &partitions {
            self.owned.remove(p);
        }
        let (tx, rx) = oneshot::channel();
        let asked: Vec<i32> = partitions.clone();
        let _ = self.to_owner.send(ToOwner::Revoke {
            partitions,
            lost,
            positions: tx,
        });
        let closing = self.shared.closing.clone();
        let wait = tokio::time::timeout(REVOKE_WAIT, rx);
        let positions = match Self::or_closing(&closing, wait).await? {
            Ok(Ok(positions)) => positions,
            // The owner did not come back to `poll` in time: it reads nothing meanwhile, so what
            // it marked is where it got to.
            _ => {
                let st = self.shared.state.lock().expect("session lock");
                asked
                    .iter()
                    .filter_map(|p| st.marked.get(p).map(|o| (*p, *o)))
                    .collect()
            }
        };
        if !lost && self.settings.commits != Commits::Off {
            // Java's onPartitionsRevoked: the next owner starts where this member stopped. A
            // refusal (the generation already gone) is what Java logs and moves on from.
            match Self::or_closing(&closing, self.shared.commit(&positions)).await? {
                Ok(_) => {}
                Err(e) => self
                    .shared
                    .counters
                    .error(format!("commit of the partitions given up: {e}")),
            }
        }
        let mut st = self.shared.state.lock().expect("session lock");
        for p in &asked {
            st.committed.remove(p);
        }
        Some(())
    }

    /// An auto-commit: what was marked, sent from a task of its own.
    fn commit_in_background(&mut self) {
        let shared = self.shared.clone();
        self.background.spawn(async move {
            let marked = shared.marked();
            if let Err(e) = shared.commit(&marked).await {
                shared.counters.error(format!("commit: {e}"));
            }
        });
    }

    /// The owner ends the member: the background commits end, then what was marked is
    /// committed, then the member leaves (or, restarting, closes as Java's consumer does), each
    /// within [`LEAVE_WAIT`].
    async fn end(&mut self) {
        let end = self
            .shared
            .state
            .lock()
            .expect("session lock")
            .end
            .unwrap_or(MemberEnd::RunEnded);
        let _ = tokio::time::timeout(LEAVE_WAIT, async {
            while self.background.join_next().await.is_some() {}
        })
        .await;
        if self.settings.commits != Commits::Off {
            let marked = self.shared.marked();
            match tokio::time::timeout(LEAVE_WAIT, self.shared.commit(&marked)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => self.shared.counters.error(format!("commit: {e}")),
                Err(_) => self
                    .shared
                    .counters
                    .error("commit: no answer behind the join the coordinator held".to_string()),
            }
        }
        let closed = if end == MemberEnd::Restarted {
            tokio::time::timeout(LEAVE_WAIT, self.member.close()).await
        } else {
            tokio::time::timeout(LEAVE_WAIT, self.member.leave()).await
        };
        match closed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.shared.counters.error(format!("leave: {e}")),
            Err(_) => self.shared.counters.error(format!(
                "leave: no answer within {} ms (behind a join the coordinator held); the member was left to its session timeout",
                LEAVE_WAIT.as_millis()
            )),
        }
    }
}

/// Whether an error ends the member's session for good, rather than being retried: the
/// coordinator refuses what the member is (its protocol, its static id, its rights, its
/// settings), or kbench cannot speak what is needed.
fn ends_the_session(e: &ClientError) -> bool {
    match e {
        ClientError::Kafka { code, .. } => matches!(
            *code,
            23 // INCONSISTENT_GROUP_PROTOCOL
            | 24 // INVALID_GROUP_ID
            | 26 // INVALID_SESSION_TIMEOUT
            | 29 // TOPIC_AUTHORIZATION_FAILED
            | 30 // GROUP_AUTHORIZATION_FAILED
            | 35 // UNSUPPORTED_VERSION
            | 42 // INVALID_REQUEST
            | 81 // GROUP_MAX_SIZE_REACHED
            | 82 // FENCED_INSTANCE_ID
        ),
        ClientError::Auth { .. } | ClientError::Version(_) | ClientError::Other(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_starts_at_the_commit_never_below_the_floor() {
        let floor = Arc::new(BTreeMap::from([(0, 100), (1, 100)]));
        let policy = StartPolicy {
            from: StartFrom::Reset(OffsetReset::Latest),
            floor: Some(floor),
        };
        assert_eq!(policy.start(0, Some(150)), Some(150));
        assert_eq!(
            policy.start(0, Some(50)),
            Some(100),
            "an older run's commit"
        );
        assert_eq!(policy.start(1, None), Some(100));
        assert_eq!(
            policy.start(2, Some(7)),
            Some(7),
            "a partition the run did not know"
        );
        assert_eq!(policy.start(2, None), None, "asked of the reset");
        let fixed = StartPolicy {
            from: StartFrom::Offset(42),
            floor: None,
        };
        assert_eq!(fixed.start(3, None), Some(42));
        assert_eq!(fixed.start(3, Some(9)), Some(9));
    }

    #[test]
    fn refusals_end_the_session_and_waits_do_not() {
        assert!(ends_the_session(&ClientError::kafka("JoinGroup", "g", 23)));
        assert!(ends_the_session(&ClientError::kafka("SyncGroup", "g", 82)));
        assert!(!ends_the_session(&ClientError::kafka("SyncGroup", "g", 27)));
        assert!(!ends_the_session(&ClientError::kafka("Heartbeat", "g", 25)));
        assert!(!ends_the_session(&ClientError::Timeout {
            addr: "a".into(),
            api: "SyncGroup".into(),
            timeout_ms: 30_000
        }));
        assert!(!ends_the_session(&ClientError::Disconnected {
            addr: "a".into(),
            reason: "reset".into()
        }));
    }
}
