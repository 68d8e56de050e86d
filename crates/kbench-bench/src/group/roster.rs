//! The members of a group run and the faults that change them, in one place for every workload:
//! `consumer-join=K` starts K members, `consumer-leave=K`, `consumer-crash=K` and
//! `consumer-restart=K` end K members (the newest that have joined first) as one [`MemberEnd`]
//! says, a restart starting a successor in each one's place once it has closed.
//!
//! A member is a task the workload spawns; it is told to end through its [`MemberStop`], which
//! also says how.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kbench_client::{Cluster, MemberEnd};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::GroupFault;
use crate::error::BenchError;
use crate::fault::{Fault, FaultAction};

/// How a member task learns that it is to end, and how.
#[derive(Clone)]
pub(crate) struct MemberStop {
    token: CancellationToken,
    end: Arc<Mutex<MemberEnd>>,
    joined: Arc<AtomicBool>,
}

impl MemberStop {
    /// Cancelled when the member is to end (the run's end, or a fault).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// How it ends: the run's end unless a fault said otherwise.
    pub fn end(&self) -> MemberEnd {
        *self.end.lock().expect("member end lock")
    }

    /// Whether a fault (not the run's end) stopped it.
    pub fn by_fault(&self) -> bool {
        self.token.is_cancelled() && self.end().by_fault()
    }

    /// The member has joined its group (a fault picks joined members first).
    pub fn joined(&self) {
        self.joined.store(true, Ordering::SeqCst);
    }
}

/// A member as the roster keeps it.
pub(crate) struct Member {
    /// Its place: a restart's successor takes the place (and the `group.instance.id`) of the
    /// member it replaces.
    pub slot: usize,
    pub replaces: Option<usize>,
    /// From the roster's zero.
    pub started: Duration,
    stop: MemberStop,
    pub ended_by: Option<MemberEnd>,
    pub ended_at: Option<Duration>,
    /// Its task has ended.
    pub finished: bool,
}

impl Member {
    pub fn joined(&self) -> bool {
        self.stop.joined.load(Ordering::SeqCst)
    }
}

/// The members of a run's group and their tasks, each task's output a `T`.
pub(crate) struct Roster<T> {
    pub members: Vec<Member>,
    tasks: JoinSet<(usize, Result<T, BenchError>)>,
    /// Every member's stop is a child of it.
    run_stop: CancellationToken,
    slots: usize,
}

/// How long a restart waits for the members it stops to close before their successors start.
const RESTART_CLOSE_WAIT: Duration = Duration::from_secs(15);

impl<T: Send + 'static> Roster<T> {
    /// Members that end when `run_stop` is cancelled (each also alone, by a fault).
    pub fn new(run_stop: &CancellationToken) -> Roster<T> {
        Roster {
            members: Vec::new(),
            tasks: JoinSet::new(),
            run_stop: run_stop.clone(),
            slots: 0,
        }
    }

    /// Start a member in `slot` (a new one when `None`), replacing `replaces`, at `started`: its
    /// task is `member(index, slot, stop)`. Its index.
    pub fn spawn<F, Fut>(
        &mut self,
        slot: Option<usize>,
        replaces: Option<usize>,
        started: Duration,
        member: F,
    ) -> usize
    where
        F: FnOnce(usize, usize, MemberStop) -> Fut,
        Fut: Future<Output = Result<T, BenchError>> + Send + 'static,
    {
        let index = self.members.len();
        let slot = slot.unwrap_or_else(|| {
            self.slots += 1;
            self.slots - 1
        });
        let stop = MemberStop {
            token: self.run_stop.child_token(),
            end: Arc::new(Mutex::new(MemberEnd::RunEnded)),
            joined: Arc::new(AtomicBool::new(false)),
        };
        let task = member(index, slot, stop.clone());
        self.tasks.spawn(async move { (index, task.await) });
        self.members.push(Member {
            slot,
            replaces,
            started,
            stop,
            ended_by: None,
            ended_at: None,
            finished: false,
        });
        index
    }

    /// The next member task to end, and its output.
    pub async fn next_ended(&mut self) -> Option<(usize, Result<T, BenchError>)> {
        let ended = match self.tasks.join_next().await? {
            Ok(ended) => ended,
            Err(e) => {
                // A task that panicked or was aborted: which one is not known; the run fails.
                return Some((
                    usize::MAX,
                    Err(BenchError::Run(format!(
                        "a group member's task failed: {e}"
                    ))),
                ));
            }
        };
        if let Some(m) = self.members.get_mut(ended.0) {
            m.finished = true;
        }
        Some(ended)
    }

    /// Whether no member task is left.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Whether a member ended other than by a fault (the group read what it was to, went idle,
    /// or failed).
    pub fn one_ended_by_itself(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.ended_by.is_none() && m.finished)
    }

    /// End every member (the run's end, or a member failed).
    pub fn stop_all(&self) {
        for m in &self.members {
            m.stop.token.cancel();
        }
    }

    /// Apply a group `fault` at `at` (from the roster's zero): a join starts members over
    /// clusters from `connect` (each spawned by `spawn`), a leave, crash or restart ends members
    /// (a restart's successors spawned the same way once their predecessors closed). What was
    /// done, and why less than asked, if it was.
    pub async fn apply<C>(
        &mut self,
        fault: &Fault,
        at: Duration,
        connect: impl Fn() -> C,
        mut spawn: impl FnMut(&mut Roster<T>, Option<usize>, Option<usize>, Arc<Cluster>, Duration),
    ) -> GroupFault
    where
        C: Future<Output = Result<Arc<Cluster>, BenchError>>,
    {
        let mut acted = Vec::new();
        let mut error = None;
        let end = match fault.action {
            FaultAction::ConsumerJoin { count } => {
                for _ in 0..count {
                    match connect().await {
                        Ok(cluster) => {
                            acted.push(self.members.len());
                            spawn(self, None, None, cluster, at);
                        }
                        Err(e) => error = Some(e.to_string()),
                    }
                }
                None
            }
            FaultAction::ConsumerLeave { count } => Some((MemberEnd::Left, count)),
            FaultAction::ConsumerCrash { count } => Some((MemberEnd::Crashed, count)),
            FaultAction::ConsumerRestart { count } => Some((MemberEnd::Restarted, count)),
            _ => {
                error = Some("not a group member's fault".into());
                None
            }
        };
        if let Some((end, count)) = end {
            let chosen = super::members_to_stop(
                self.members.len(),
                |i| self.members[i].joined(),
                |i| self.members[i].ended_by.is_none() && !self.members[i].finished,
                count,
            );
            for &i in &chosen {
                let m = &mut self.members[i];
                *m.stop.end.lock().expect("member end lock") = end;
                m.ended_by = Some(end);
                m.ended_at = Some(at);
                m.stop.token.cancel();
                acted.push(i);
            }
            if end == MemberEnd::Restarted {
                error = self.restart(&chosen, connect, &mut spawn, at).await;
            }
            if acted.len() < count as usize {
                error = Some(format!(
                    "{} of {count} members were still reading",
                    acted.len()
                ));
            }
        }
        GroupFault {
            fault: fault.spec.clone(),
            at_s: at.as_secs_f64(),
            members: acted,
            error,
        }
    }

    /// Successors for the `chosen` members, each in its place once it has closed (committed, and
    /// left if dynamic), as a process restarted in place does. Why not, if one was not.
    async fn restart<C>(
        &mut self,
        chosen: &[usize],
        connect: impl Fn() -> C,
        spawn: &mut impl FnMut(&mut Roster<T>, Option<usize>, Option<usize>, Arc<Cluster>, Duration),
        at: Duration,
    ) -> Option<String>
    where
        C: Future<Output = Result<Arc<Cluster>, BenchError>>,
    {
        let mut error = None;
        let closing = Instant::now() + RESTART_CLOSE_WAIT;
        let mut outputs = Vec::new();
        while Instant::now() < closing
            && !self.run_stop.is_cancelled()
            && chosen.iter().any(|&i| !self.members[i].finished)
        {
            tokio::select! {
                ended = self.next_ended() => match ended {
                    Some(out) => outputs.push(out),
                    None => break,
                },
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        // The outputs taken meanwhile go back for the workload to collect.
        for (i, out) in outputs {
            self.tasks.spawn(async move { (i, out) });
        }
        if chosen.iter().any(|&i| !self.members[i].finished) {
            error = Some(format!(
                "a member had not closed within {} s: its successor joined beside it",
                RESTART_CLOSE_WAIT.as_secs()
            ));
        }
        // Stopped meanwhile (the run's stop, or the group done): no successor.
        if self.run_stop.is_cancelled() || self.one_ended_by_itself() {
            return Some("not restarted: the run had ended".into());
        }
        for &i in chosen {
            match connect().await {
                Ok(cluster) => {
                    let slot = self.members[i].slot;
                    spawn(self, Some(slot), Some(i), cluster, at);
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        error
    }

    /// A fault left unapplied (the run ended first).
    pub fn not_applied(fault: &Fault) -> GroupFault {
        GroupFault {
            fault: fault.spec.clone(),
            at_s: fault.at.as_secs_f64(),
            members: Vec::new(),
            error: Some("not applied: the run had ended".into()),
        }
    }
}
