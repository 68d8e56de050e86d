//! The measured phase of a consume run ([`run_consume`]): join the group or take the assigned
//! partitions, position them, then fetch, decode and count until `messages` records were read, the
//! time-out passed or the run was stopped; heartbeats, commits, progress and timeline windows on the
//! way, a last commit and leaving the group at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_client::{
    ClientError, Cluster, FetchedPart, GroupConfig, GroupMember, Membership, TopicLayout,
};
use kbench_wire::BatchDecoder;
use tokio_util::sync::CancellationToken;

use super::group::{MemberCtx, MemberJoin, MemberRun};
use super::{
    ConsumeMode, ConsumeObserver, ConsumeRun, ConsumeSpec, ConsumeWindow, PartitionSpan,
    TIMELINE_COUNTERS, TIMELINE_HISTOGRAMS, batches_end, engine_options, start_positions,
};
use crate::error::BenchError;
use crate::measure::{CpuTime, latency_histogram, peak_rss_kib};
use crate::stop::Stop;
use crate::timeline::Timeline;

/// The measured phase: join (group mode), position, fetch until done.
pub async fn run_consume<O: ConsumeObserver>(
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    spec: &ConsumeSpec,
    stop: Stop,
    observer: Arc<O>,
) -> Result<ConsumeRun, BenchError> {
    let mut reading = Reading::join(cluster, layout, spec, stop, observer, None).await?;
    if let Err(e) = reading.fetch_until_done().await {
        spec.leave_order.gone(reading.slot);
        return Err(e);
    }
    Ok(reading.finish().await.run)
}

/// One member of a group run ([`super::group`]): join, read until the group is done or this
/// member is stopped (a leave, a crash), finish as it was told.
pub(crate) async fn run_member<O: ConsumeObserver>(
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    spec: &ConsumeSpec,
    stop: Stop,
    observer: Arc<O>,
    ctx: MemberCtx,
) -> Result<MemberRun, BenchError> {
    let mut reading = Reading::join(cluster, layout, spec, stop, observer, Some(ctx)).await?;
    if let Err(e) = reading.fetch_until_done().await {
        spec.leave_order.gone(reading.slot);
        return Err(e);
    }
    Ok(reading.finish().await)
}

/// When the run began, by each clock it is measured on.
struct Began {
    wall: SystemTime,
    at: Instant,
    cpu: CpuTime,
}

/// The progress window being gathered, told to [`ConsumeObserver::interval`] every
/// `ConsumeSpec::reporting_interval`.
struct ProgressWindow {
    start: Instant,
    records: u64,
    bytes: u64,
    /// Time spent joining the group in this window.
    join: Duration,
    /// With `ConsumeSpec::end_to_end`: this window's end-to-end latencies, µs.
    end_to_end: Option<Histogram<u64>>,
}

/// A cooperative rejoin under way (KIP-429): the member, moved into the join, comes back with
/// its outcome; the partitions it owns are read on meanwhile.
type Joining = std::pin::Pin<
    Box<dyn std::future::Future<Output = (GroupMember, Result<(), ClientError>)> + Send>,
>;

/// A consume run between joining and the end: the consumer, where it is in each partition, and
/// every figure the [`ConsumeRun`] reports.
struct Reading<'a, O> {
    /// Its place in the run's [`super::LeaveOrder`].
    slot: usize,
    spec: &'a ConsumeSpec,
    observer: Arc<O>,
    stop: Stop,
    cancel: CancellationToken,
    cluster: Arc<Cluster>,
    layout: Arc<TopicLayout>,
    /// Group mode: kbench's membership of the group (`None` while [`Reading::joining`] has it).
    member: Option<GroupMember>,
    /// A cooperative rejoin under way, and when it began.
    joining: Option<(Joining, Instant)>,
    /// Cancelled, the rejoin under way gives up and hands the member back (to leave the group).
    abandon_join: CancellationToken,
    consumer: kbench_client::Consumer,
    decoder: BatchDecoder,
    began: Began,
    /// The next offset to read in each partition.
    positions: BTreeMap<i32, i64>,
    /// The positions last committed.
    committed: BTreeMap<i32, i64>,
    spans: BTreeMap<i32, PartitionSpan>,
    records: u64,
    bytes: u64,
    batches: u64,
    fetches: u64,
    empty_fetches: u64,
    commits: u64,
    /// Commits refused because the group was rebalancing (not errors).
    commits_refused: u64,
    errors: BTreeMap<String, u64>,
    /// Time spent joining the group, every round.
    join: Duration,
    fetch_latency: Histogram<u64>,
    end_to_end: Histogram<u64>,
    /// The end-to-end latencies of the answer being read, for [`ConsumeObserver::fetched`].
    fetch_e2e: Vec<u64>,
    /// `--verify`: the run's verifier (a group's members share one).
    verifier: Option<Arc<std::sync::Mutex<crate::verify::Verifier>>>,
    /// A group run's member: what it shares with the others, and its joins.
    group: Option<MemberCtx>,
    joins: Vec<MemberJoin>,
    /// `--verify`: records this member read that had been read before.
    duplicated: u64,
    /// `--latest-values`: each expected key's last value read (a group's members share one).
    latest: Option<Arc<std::sync::Mutex<crate::latest::LatestChecker>>>,
    /// With a schema registry: the values' decoder, and the registry it asks.
    decoding: Option<(
        crate::schema::decode::Decoding,
        crate::schema::decode::RegistryReader,
    )>,
    last_record: Instant,
    timed_out: bool,
    last_heartbeat: Instant,
    last_commit: Instant,
    /// The observer asked for a pause (a backlog being built): the consumer does not fetch.
    paused: bool,
    window: ProgressWindow,
    timeline: Timeline,
    /// The timeline's window length, and when the next window closes.
    every: Duration,
    next_window: Instant,
}

/// Join `spec`'s group (returning the member and its assignment), or take the assigned partitions
/// (every one of `layout`'s when none is named).
async fn join_or_assign(
    cluster: &Arc<Cluster>,
    layout: &TopicLayout,
    spec: &ConsumeSpec,
    group: Option<&MemberCtx>,
    cancel: &CancellationToken,
) -> Result<(Option<GroupMember>, Vec<i32>), BenchError> {
    match &spec.mode {
        ConsumeMode::Group { group_id } => {
            let config = GroupConfig {
                group_id: group_id.clone(),
                topic: spec.topic.clone(),
                session_timeout: spec.consumer.session_timeout,
                rebalance_timeout: spec.consumer.session_timeout.max(Duration::from_secs(30)),
                assignors: spec.consumer.assignors.clone(),
                protocol: spec.consumer.group_protocol,
                remote_assignor: spec.consumer.remote_assignor.clone(),
                // A group run's member has its own (the run's, numbered).
                instance_id: match group {
                    Some(g) => g.instance_id.clone(),
                    None => spec.consumer.group_instance_id.clone(),
                },
            };
            // Stopped while the coordinator held the join: given up (leaving, if it had an id).
            let m = GroupMember::join_until(cluster.clone(), config, cancel)
                .await
                .map_err(|e| BenchError::Run(format!("group {group_id:?}: {e}")))?
                .ok_or(BenchError::StoppedJoining)?;
            let assigned = m.assignment().to_vec();
            Ok((Some(m), assigned))
        }
        ConsumeMode::Assign { partitions } if partitions.is_empty() => Ok((
            None,
            layout.partitions.iter().map(|p| p.partition).collect(),
        )),
        ConsumeMode::Assign { partitions } => Ok((None, partitions.clone())),
    }
}

impl<'a, O: ConsumeObserver> Reading<'a, O> {
    /// Join (group mode) and position, the tool's "rebalance" time being the join; tell the
    /// observer, and hand the positions to a consumer engine.
    async fn join(
        cluster: Arc<Cluster>,
        layout: TopicLayout,
        spec: &'a ConsumeSpec,
        stop: Stop,
        observer: Arc<O>,
        group: Option<MemberCtx>,
    ) -> Result<Self, BenchError> {
        let cancel = group
            .as_ref()
            .map_or_else(|| stop.token().clone(), |g| g.cancel.clone());
        let began = Began {
            wall: SystemTime::now(),
            at: Instant::now(),
            cpu: CpuTime::now(),
        };
        let (member, assigned) =
            join_or_assign(&cluster, &layout, spec, group.as_ref(), &cancel).await?;
        let join = if member.is_some() {
            began.at.elapsed()
        } else {
            Duration::ZERO
        };
        let mut joins = Vec::new();
        if let (Some(g), Some(m)) = (group.as_ref(), member.as_ref()) {
            joins.push(member_join(g, m, began.at, join, spec));
            g.share.owner(g.index, assigned.iter().copied(), true);
            g.joined.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let positions = start_positions(&cluster, &layout, member.as_ref(), &assigned, spec.start)
            .await
            .map_err(|e| BenchError::topic(&spec.topic, e))?;
        // Its place in the group's leave order, once nothing more can fail its start.
        let slot = spec.leave_order.0.as_ref().map_or(0, |o| o.slot());
        if let Some(m) = member.as_ref() {
            spec.leave_order.joined(slot, m);
        }
        let spans = positions
            .iter()
            .map(|(p, o)| (*p, fresh_span(*o)))
            .collect();

        observer.joined();
        let layout = Arc::new(layout);
        let mut consumer =
            kbench_client::Consumer::new(cluster.clone(), &layout, engine_options(spec));
        consumer.assign(&positions);
        let timeline = Timeline::new(began.wall, TIMELINE_COUNTERS, TIMELINE_HISTOGRAMS)
            .with_sink(spec.window_sink.clone());
        let every = spec.timeline_interval.max(Duration::from_millis(10));
        let decoding = if spec.deserializer.contains_key("schema.registry.url") {
            let reader = crate::schema::decode::RegistryReader::new(&spec.deserializer)
                .map_err(|e| BenchError::Run(e.to_string()))?;
            Some((crate::schema::decode::Decoding::new(reader.url()), reader))
        } else {
            None
        };
        Ok(Reading {
            slot,
            spec,
            observer,
            stop,
            cancel,
            cluster,
            layout,
            member,
            joining: None,
            abandon_join: CancellationToken::new(),
            consumer,
            decoder: BatchDecoder::new(),
            positions,
            committed: BTreeMap::new(),
            spans,
            records: 0,
            bytes: 0,
            batches: 0,
            fetches: 0,
            empty_fetches: 0,
            commits: 0,
            commits_refused: 0,
            errors: BTreeMap::new(),
            join,
            fetch_latency: latency_histogram(),
            end_to_end: latency_histogram(),
            fetch_e2e: Vec::new(),
            latest: match group.as_ref() {
                Some(g) => g.share.latest.clone(),
                // Checked by `ConsumeSpec::validate`.
                None => spec
                    .latest_values
                    .as_ref()
                    .and_then(|f| crate::latest::LatestChecker::new(f).ok())
                    .map(|l| Arc::new(std::sync::Mutex::new(l))),
            },
            verifier: match group.as_ref() {
                Some(g) => g.share.verifier.clone(),
                None => spec.verify.then(|| {
                    Arc::new(std::sync::Mutex::new(
                        crate::verify::Verifier::any_producer(),
                    ))
                }),
            },
            group,
            joins,
            duplicated: 0,
            decoding,
            last_record: Instant::now(),
            timed_out: false,
            last_heartbeat: Instant::now(),
            last_commit: Instant::now(),
            paused: false,
            window: ProgressWindow {
                start: Instant::now(),
                records: 0,
                bytes: 0,
                join,
                end_to_end: spec.end_to_end.then(latency_histogram),
            },
            timeline,
            every,
            next_window: began.at + every,
            began,
        })
    }

    /// Fetch until `messages` records were read, none came for `timeout`, or the run is stopped.
    async fn fetch_until_done(&mut self) -> Result<(), BenchError> {
        // How often the loop looks up from the answers (heartbeats, windows, the time-out) when none
        // comes.
        let tick = Duration::from_millis(20);
        while self.total() < self.spec.messages {
            if self.cancel.is_cancelled() {
                break;
            }
            let now = Instant::now();
            let idle = match self.group.as_ref() {
                Some(g) => g.share.idle().min(now - self.began.at),
                None => now - self.last_record,
            };
            if idle > self.spec.timeout {
                self.timed_out = true;
                break;
            }
            self.close_windows(now);
            self.keep_membership(now).await?;
            // Paused (a backlog being built): in the group, heartbeating, not fetching, not idle.
            if self.observer.paused() != self.paused {
                self.paused = !self.paused;
                self.consumer.pause(self.paused);
            }
            if self.paused {
                self.last_record = Instant::now();
            }
            if self.paused || self.positions.is_empty() {
                // Nothing to read (paused, or another member has every partition): wait.
                let wait = if self.paused {
                    tick
                } else {
                    self.member
                        .as_ref()
                        .map_or(self.spec.consumer.heartbeat_interval, |m| {
                            m.heartbeat_every(self.spec.consumer.heartbeat_interval)
                        })
                        .min(Duration::from_millis(500))
                };
                tokio::select! {
                    _ = self.cancel.cancelled() => break,
                    _ = tokio::time::sleep(wait) => continue,
                    (m, r, began) = joined(&mut self.joining) => {
                        self.rejoined(m, r, began).await?;
                        continue;
                    }
                }
            }
            let fetched = tokio::select! {
                f = self.consumer.poll() => f,
                _ = self.cancel.cancelled() => break,
                _ = tokio::time::sleep(tick) => continue,
                (m, r, began) = joined(&mut self.joining) => {
                    self.rejoined(m, r, began).await?;
                    continue;
                }
            };
            let Some(fetched) = fetched else { break };
            self.on_fetched(&fetched);
            self.learn_schemas().await?;
        }
        Ok(())
    }

    /// Records read towards a target shared with other readings, else this reading's own.
    fn total_or_own(&self) -> u64 {
        match &self.spec.shared_total.0 {
            Some(shared) => shared.records.load(std::sync::atomic::Ordering::SeqCst),
            None => self.records,
        }
    }

    /// Records read: this member's, or the whole group's.
    fn total(&self) -> u64 {
        if let Some(shared) = &self.spec.shared_total.0 {
            return shared.records.load(std::sync::atomic::Ordering::SeqCst);
        }
        self.group
            .as_ref()
            .map_or(self.records, |g| g.share.records())
    }

    /// Ask the registry for the schemas the values just read name and the decoder does not know
    /// yet (each once), and decode the values held for them.
    async fn learn_schemas(&mut self) -> Result<(), BenchError> {
        let Some((decoding, reader)) = self.decoding.as_mut() else {
            return Ok(());
        };
        for id in decoding.missing() {
            let schema = reader.schema(id).await;
            decoding.learn(id, schema);
        }
        Ok(())
    }

    /// Close the timeline window and the progress window when their time has come.
    fn close_windows(&mut self, now: Instant) {
        if now >= self.next_window {
            self.next_window += self.every;
            self.timeline.take(
                SystemTime::now(),
                &[self.records, self.bytes],
                vec![self.fetch_latency.clone(), self.end_to_end.clone()],
            );
        }
        let window = &mut self.window;
        if now - window.start >= self.spec.reporting_interval {
            // A group's members report together ([`super::group`]), not one by one.
            if self.group.is_none() {
                self.observer.interval(&ConsumeWindow {
                    at: SystemTime::now(),
                    elapsed: now - window.start,
                    total_records: self.records,
                    total_bytes: self.bytes,
                    records: window.records,
                    bytes: window.bytes,
                    join: window.join,
                    end_to_end: window.end_to_end.as_mut().map(|h| {
                        let fresh = Histogram::new_from(h);
                        std::mem::replace(h, fresh)
                    }),
                });
            }
            window.start = now;
            (window.records, window.bytes) = (0, 0);
            window.join = Duration::ZERO;
        }
    }

    /// Group mode: heartbeat (rejoining when asked) and commit, each when its interval has passed.
    async fn keep_membership(&mut self, now: Instant) -> Result<(), BenchError> {
        if self.member.is_none() {
            return Ok(());
        }
        let due = self.member.as_ref().is_some_and(|m| {
            m.heartbeat_due_in(
                now - self.last_heartbeat,
                self.spec.consumer.heartbeat_interval,
            )
            .is_zero()
        });
        if due {
            self.last_heartbeat = now;
            self.heartbeat().await?;
        }
        if self.spec.commit
            && now - self.last_commit >= self.spec.consumer.auto_commit_interval
            && self.positions != self.committed
        {
            self.last_commit = now;
            self.commit().await;
        }
        Ok(())
    }

    /// One heartbeat; a rebalance asked for is joined at once, an error counted.
    async fn heartbeat(&mut self) -> Result<(), BenchError> {
        let Some(m) = self.member.as_mut() else {
            return Ok(());
        };
        match m.heartbeat().await {
            Ok(Membership::Stable) => {}
            Ok(Membership::RejoinNeeded) => self.rejoin().await?,
            Err(e) => *self.errors.entry(format!("heartbeat: {e}")).or_default() += 1,
        }
        Ok(())
    }

    /// Join the group again and position the new assignment; partitions kept keep the position
    /// reached. The time it takes is join time.
    async fn rejoin(&mut self) -> Result<(), BenchError> {
        if self.member.is_none() {
            return Ok(());
        }
        // The coordinator may hold this join until the others join too: none waits for this
        // member to leave meanwhile (`joined` puts it back if it leads again).
        self.spec.leave_order.gone(self.slot);
        let began = Instant::now();
        // As Java's consumer does before it rejoins (onJoinPrepare): the positions reached are
        // committed, so that the partitions' next owners start where this member stopped.
        // Its failure (the member's generation already gone) is what Java's consumer logs and
        // moves on from: not an error of the run.
        if self.spec.commit
            && self.positions != self.committed
            && let Err(e) = self.try_commit().await
        {
            tracing::debug!(%e, "commit before rejoining");
        }
        // The partitions given up stop being read here; with the consumer protocol (KIP-848)
        // those kept are read on.
        let kept: Vec<i32> = self
            .member
            .as_ref()
            .and_then(|m| m.incoming())
            .map(|next| next.to_vec())
            .unwrap_or_default();
        if let Some(g) = self.group.as_ref() {
            g.share.owner(
                g.index,
                self.positions.keys().copied().filter(|p| !kept.contains(p)),
                false,
            );
        }
        let Some(mut m) = self.member.take() else {
            return Ok(());
        };
        if m.cooperative() {
            // KIP-429: the partitions owned are read on while the coordinator holds the join
            // (none when the member was lost: those are neither read nor committed).
            self.positions.retain(|p, _| kept.contains(p));
            self.consumer.assign(&self.positions);
            self.abandon_join = CancellationToken::new();
            let abandon = self.abandon_join.clone();
            let join: Joining = Box::pin(async move {
                let r = tokio::select! {
                    r = m.rejoin() => r,
                    _ = abandon.cancelled() => Err(ClientError::Other(
                        "the member ended before its rejoin did".into(),
                    )),
                };
                (m, r)
            });
            self.joining = Some((join, began));
            return Ok(());
        }
        // Eagerly the member reads nothing while the coordinator holds its join. A leave or a
        // crash fault in the meantime gives the join up at once: the member, owning nothing,
        // then leaves (or, crashed, says nothing), so that the others' rebalance does not wait
        // for a join it would only leave (one held for 21 s on librdkafka's mock cluster gave
        // partitions to a member already told to leave). At the run's end the join is awaited.
        let stopped = self.group.as_ref().map(|g| g.stopped.clone());
        let joined = {
            let join = m.rejoin();
            tokio::pin!(join);
            let mut run_end = false;
            loop {
                tokio::select! {
                    r = &mut join => break Some(r),
                    _ = self.cancel.cancelled(), if !run_end => {
                        if stopped
                            .as_ref()
                            .is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
                        {
                            break None;
                        }
                        run_end = true;
                    }
                }
            }
        };
        match joined {
            Some(r) => self.rejoined(m, r, began).await,
            None => {
                tracing::debug!("stopped by a fault while joining: the join given up");
                self.positions.clear();
                self.committed.clear();
                self.consumer.assign(&self.positions);
                self.member = Some(m);
                Ok(())
            }
        }
    }

    /// A rejoin's end: the new assignment positioned, partitions kept keep the position reached;
    /// cooperatively, those taken away are committed where this member stopped and given up (the
    /// member then joins again at once, [`GroupMember::heartbeat_due_in`]). The time from the
    /// rejoin's start is join time, unless the member read on through it (cooperatively).
    async fn rejoined(
        &mut self,
        m: GroupMember,
        joined: Result<(), ClientError>,
        began: Instant,
    ) -> Result<(), BenchError> {
        self.member = Some(m);
        joined.map_err(|e| BenchError::Run(format!("rejoining the group: {e}")))?;
        if let Some(m) = self.member.as_ref() {
            self.spec.leave_order.joined(self.slot, m);
        }
        let revoked = self.member.as_ref().is_some_and(|m| {
            m.cooperative() && self.positions.keys().any(|p| !m.assignment().contains(p))
        });
        if revoked && self.spec.commit && self.positions != self.committed {
            // Java's onPartitionsRevoked: the next owner starts where this member stopped. A
            // refusal (the next round already under way) is what Java logs and moves on from,
            // as before a rejoin.
            if let Err(e) = self.try_commit().await {
                tracing::debug!(%e, "commit of the partitions given up");
            }
        }
        let Some(m) = self.member.as_ref() else {
            return Ok(());
        };
        let assigned = m.assignment().to_vec();
        let mut fresh = start_positions(
            &self.cluster,
            &self.layout,
            Some(m),
            &assigned,
            self.spec.start,
        )
        .await
        .map_err(|e| BenchError::topic(&self.spec.topic, e))?;
        for (p, o) in fresh.iter_mut() {
            if let Some(kept) = self.positions.get(p) {
                *o = *kept;
            }
            self.spans.entry(*p).or_insert(fresh_span(*o));
        }
        if let Some(g) = self.group.as_ref() {
            g.share.owner(
                g.index,
                self.positions
                    .keys()
                    .copied()
                    .filter(|p| !fresh.contains_key(p)),
                false,
            );
        }
        self.positions = fresh;
        self.consumer.assign(&self.positions);
        let took = began.elapsed();
        let cooperative = self.member.as_ref().is_some_and(|m| m.cooperative());
        if let (Some(g), Some(m)) = (self.group.as_ref(), self.member.as_ref()) {
            self.joins.push(member_join(g, m, began, took, self.spec));
            g.share.owner(g.index, self.positions.keys().copied(), true);
        }
        // The tool's rebalance time is time not reading; a cooperative join went on beside the
        // reading (it is in the group's report, not here).
        if !cooperative {
            self.join += took;
            self.window.join += took;
        }
        Ok(())
    }

    /// Commit the positions reached (group mode); an error is counted.
    async fn commit(&mut self) {
        if let Err(e) = self.try_commit().await {
            *self.errors.entry(format!("commit: {e}")).or_default() += 1;
        }
    }

    /// Commit the positions reached (group mode), counted when it succeeds; the error when not.
    /// A commit the coordinator refused for the membership (a rebalance under way, a stale
    /// generation or epoch) did not commit and is counted as refused, not as an error: Java's
    /// consumer logs it and rejoins (the heartbeat finds the rebalance), and the positions are
    /// committed at the next commit or by their next owner.
    async fn try_commit(&mut self) -> Result<(), kbench_client::ClientError> {
        let Some(m) = self.member.as_ref() else {
            return Ok(());
        };
        if m.commit(&self.layout, &self.positions).await? == Membership::RejoinNeeded {
            self.commits_refused += 1;
            tracing::debug!(
                member = m.member_id(),
                group = m.group_id(),
                "OffsetCommit refused: the group is rebalancing"
            );
            return Ok(());
        }
        self.commits += 1;
        self.committed = self.positions.clone();
        Ok(())
    }

    /// Count one Fetch answer: its latency, its errors and offset resets, then its records, up to
    /// `messages`; tell the observer what it added.
    fn on_fetched(&mut self, fetched: &kbench_client::Fetched) {
        self.fetches += 1;
        let took = fetched.answered.saturating_duration_since(fetched.sent);
        let _ = self.fetch_latency.record((took.as_micros() as u64).max(1));
        for e in &fetched.errors {
            *self.errors.entry(format!("fetch: {e}")).or_default() += 1;
        }
        // `auto.offset.reset` moved a partition the broker no longer had the offsets of.
        for (partition, from, to) in &fetched.resets {
            *self
                .errors
                .entry(format!(
                    "fetch: {}-{partition}: offset {from} out of range, reset to {to}",
                    self.layout.name
                ))
                .or_default() += 1;
            if let Some(p) = self.positions.get_mut(partition) {
                if let Some(s) = self.spans.get_mut(partition)
                    && *to > *p
                {
                    s.skipped += (*to - *p) as u64;
                    s.end_offset = *to;
                }
                *p = *to;
            }
        }
        let before = self.records;
        // End to end: the wall clock when the answer came, less each record's CreateTime.
        let arrived_ms = self.spec.end_to_end.then(kbench_wire::batch::now_ms);
        let bytes_before = self.bytes;
        self.fetch_e2e.clear();
        // A target shared with other readings: counted under their one gate, so that together
        // they read exactly that many.
        let shared = self.spec.shared_total.0.clone();
        let _gate = shared
            .as_ref()
            .map(|s| s.gate.lock().unwrap_or_else(|e| e.into_inner()));
        for part in &fetched.parts {
            self.read_part(part, arrived_ms);
            if self.total() >= self.spec.messages {
                break;
            }
        }
        if self.records > before {
            self.last_record = Instant::now();
            self.observer.fetched(
                self.records - before,
                self.bytes - bytes_before,
                &self.fetch_e2e,
            );
        } else {
            self.empty_fetches += 1;
        }
    }

    /// Decode and count one partition's share of an answer (with `arrived_ms`, each record's
    /// end-to-end latency), move its position, and tell the engine where to fetch on from when
    /// that is not where the answer's batches end.
    fn read_part(&mut self, part: &FetchedPart, arrived_ms: Option<i64>) {
        let (partition, data) = (&part.partition, &part.data);
        let Some(position) = self.positions.get(partition).copied() else {
            return;
        };
        let wanted = self.spec.messages.saturating_sub(self.total());
        let mut taken = 0u64;
        let mut duplicated = 0u64;
        let mut verifier = self
            .verifier
            .as_ref()
            .map(|v| v.lock().expect("verifier lock"));
        let mut latest = self.latest.as_ref().map(|l| l.lock().expect("latest lock"));
        let mut taken_bytes = 0u64;
        let mut skipped = 0u64;
        let mut next = position;
        let mut aborted = kbench_wire::records::AbortedFilter::new(&data.aborted);
        // A record counts once, at the offset expected next or later: a batch a broker sends
        // twice, or one that starts before the position, adds nothing. Offsets passed over (a
        // compacted log, or a broker answering from the wrong place) are counted as skipped.
        let result = self.decoder.decode_all(&data.records, |header, record| {
            if header.is_control() || (header.is_transactional() && aborted.skips(header)) {
                // Control batches (and, read committed, the records of an aborted
                // transaction, its marker closing it) are passed over, never counted.
                if header.is_control() {
                    aborted.skips(header);
                } else if record.offset >= next
                    && taken < wanted
                    && let Some(v) = verifier.as_deref_mut()
                {
                    v.passed_over(*partition, crate::verify::Stamp::of(&record));
                }
                if taken < wanted {
                    next = next.max(record.offset + 1);
                }
                return;
            }
            if record.offset < next || taken >= wanted {
                return;
            }
            skipped += (record.offset - next) as u64;
            taken += 1;
            if let Some(l) = latest.as_deref_mut() {
                l.record(*partition, record.offset, record.key, record.value);
            }
            if let Some(v) = verifier.as_deref_mut()
                && !v.check(
                    *partition,
                    record.offset,
                    crate::verify::Stamp::of(&record),
                    record.value.unwrap_or(&[]),
                )
            {
                duplicated += 1;
            }
            if let Some((d, _)) = self.decoding.as_mut() {
                d.value(record.value);
            }
            if let Some(at) = arrived_ms {
                let us = ((at - record.timestamp).max(0) as u64 * 1000).max(1);
                let _ = self.end_to_end.record(us);
                if let Some(h) = self.window.end_to_end.as_mut() {
                    let _ = h.record(us);
                }
                self.fetch_e2e.push(us);
            }
            taken_bytes += record.key.map_or(0, |k| k.len() as u64)
                + record.value.map_or(0, |v| v.len() as u64);
            next = record.offset + 1;
        });
        match result {
            Ok(summary) => {
                self.batches += summary.batches as u64;
                // A batch read whole moves the position past its end (compacted offsets).
                if taken < wanted
                    && let Some(end) = batches_end(&data.records, position)
                {
                    next = next.max(end);
                }
            }
            Err(e) => {
                *self
                    .errors
                    .entry(format!("decode {}-{partition}: {e}", self.layout.name))
                    .or_default() += 1;
            }
        }
        drop(verifier);
        self.duplicated += duplicated;
        if let Some(g) = self.group.as_ref()
            && taken > 0
        {
            g.share.read(taken, taken_bytes);
        }
        if let Some(shared) = &self.spec.shared_total.0 {
            shared
                .records
                .fetch_add(taken, std::sync::atomic::Ordering::SeqCst);
        }
        self.records += taken;
        self.bytes += taken_bytes;
        self.window.records += taken;
        self.window.bytes += taken_bytes;
        if next > position {
            self.positions.insert(*partition, next);
            if let Some(s) = self.spans.get_mut(partition) {
                s.end_offset = next;
                s.records += taken;
                s.skipped += skipped;
            }
        }
        // The engine fetches on from the end of these batches; where the records read end
        // elsewhere (a broker answering from the wrong place), it is told.
        if next
            != batches_end(&data.records, part.from)
                .unwrap_or(part.from)
                .max(part.from)
            && self.total_or_own() < self.spec.messages
        {
            self.consumer.seek(*partition, next);
        }
    }

    /// End the run: stop the engine, close the last timeline window, commit what was read and
    /// leave the group (group mode), and gather the figures.
    async fn finish(mut self) -> MemberRun {
        let cluster_events = self.consumer.finish();
        let elapsed = self.began.at.elapsed();
        let cpu = CpuTime::now().since(self.began.cpu);
        let ended_at = SystemTime::now();
        // The last, partial window: the windows add up to the run.
        self.timeline.take(
            ended_at,
            &[self.records, self.bytes],
            vec![self.fetch_latency.clone(), self.end_to_end.clone()],
        );
        let crashed = self
            .group
            .as_ref()
            .is_some_and(|g| g.crash.load(std::sync::atomic::Ordering::SeqCst));
        if let Some(g) = self.group.as_ref()
            && g.stopped.load(std::sync::atomic::Ordering::SeqCst)
        {
            g.share
                .owner(g.index, self.positions.keys().copied(), false);
        }
        // A cooperative rejoin under way ends first (a crashed member's is dropped): the member
        // then commits and leaves as any other. One that a coordinator holds past a session (or
        // `FINISH_JOIN_WAIT`) is given up — the join request abandoned — and the member leaves
        // from where it is, as Java's `close()` leaves in the middle of a rebalance. A broker that
        // reads one request of a connection at a time (Kafka) answers its commit and LeaveGroup
        // only after the join it holds: they get as long again, and past it the member is left
        // to its session timeout (an error of the run, named).
        let patience = self.spec.consumer.session_timeout.min(FINISH_JOIN_WAIT);
        let mut close_by = None;
        if let Some((mut join, began)) = self.joining.take()
            && !crashed
        {
            let (m, joined) = match tokio::time::timeout(patience, &mut join).await {
                Ok(ended) => ended,
                Err(_) => {
                    tracing::debug!(
                        "the group's rebalance did not end within {} ms of the member's end: leaving from the join",
                        patience.as_millis()
                    );
                    self.abandon_join.cancel();
                    close_by = Some(tokio::time::Instant::now() + patience);
                    join.await
                }
            };
            if joined.is_ok() {
                self.spec.leave_order.joined(self.slot, &m);
            }
            if let (Ok(()), Some(g)) = (joined, self.group.as_ref()) {
                self.joins
                    .push(member_join(g, &m, began, began.elapsed(), self.spec));
            }
            self.member = Some(m);
        }
        // A reading with no member to commit and leave with does not hold the others.
        if let Some(shared) = &self.spec.shared_total.0
            && (self.member.is_none() || crashed)
        {
            shared.last_commit(false, Duration::ZERO).await;
        }
        // A crashed member says nothing more to the group: its session runs out (and the others
        // do not wait for it to leave).
        if self.member.is_none() || crashed {
            self.spec.leave_order.gone(self.slot);
        }
        if let Some(m) = self.member.as_ref().filter(|_| !crashed) {
            let far = tokio::time::Instant::now() + Duration::from_secs(3600);
            let by = close_by.unwrap_or(far);
            if self.spec.commit && self.positions != self.committed {
                match tokio::time::timeout_at(by, m.commit(&self.layout, &self.positions)).await {
                    Ok(Ok(Membership::Stable)) => self.commits += 1,
                    Ok(Ok(Membership::RejoinNeeded)) => self.commits_refused += 1,
                    Ok(Err(e)) => *self.errors.entry(format!("commit: {e}")).or_default() += 1,
                    Err(_) => {
                        *self
                            .errors
                            .entry("commit: no answer behind the join the coordinator held".into())
                            .or_default() += 1
                    }
                }
            }
            // The waits below (for the others' last commits, for the leader's leave) together
            // last at most half the session, as the member does not heartbeat meanwhile.
            let waits_end = tokio::time::Instant::now()
                + (self.spec.consumer.session_timeout / 2).min(LAST_COMMIT_WAIT);
            let left_of = |end: tokio::time::Instant| {
                end.saturating_duration_since(tokio::time::Instant::now())
            };
            // `--include`'s topics: no member leaves before every topic's has committed (a
            // LeaveGroup starts a rebalance, in which the others' commits would be refused).
            if let Some(shared) = &self.spec.shared_total.0 {
                shared.last_commit(true, left_of(waits_end)).await;
            }
            // A restart closes as Java's consumer does (a static member stays in the group for
            // its session, for its successor to take its place); the run's end and a leave fault
            // leave, static members too (Java's `close` with `LEAVE_GROUP`), so that a later run
            // in the group does not wait out their sessions.
            let restart = self
                .group
                .as_ref()
                .is_some_and(|g| g.restart.load(std::sync::atomic::Ordering::SeqCst));
            // At the run's end the group's leader leaves first (see `LeaveOrder`); a member a
            // fault stops leaves when told.
            let fault = self
                .group
                .as_ref()
                .is_some_and(|g| g.stopped.load(std::sync::atomic::Ordering::SeqCst));
            if let Some(order) = self.spec.leave_order.0.as_ref()
                && !restart
                && !fault
            {
                order.before_leaving(m, left_of(waits_end)).await;
            }
            let closed = if restart {
                tokio::time::timeout_at(by, m.close()).await
            } else {
                tokio::time::timeout_at(by, m.leave()).await
            };
            self.spec.leave_order.gone(self.slot);
            match closed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => *self.errors.entry(format!("leave: {e}")).or_default() += 1,
                Err(_) => {
                    *self
                        .errors
                        .entry(format!(
                            "leave: no answer within {} ms behind the join the coordinator held; the member was left to its session timeout",
                            patience.as_millis()
                        ))
                        .or_default() += 1
                }
            }
        }
        let aborted = self.stop.reason();
        let duplicated = self.verifier.is_some().then_some(self.duplicated);
        let run = ConsumeRun {
            records: self.records,
            bytes: self.bytes,
            batches: self.batches,
            started_at: self.began.wall,
            ended_at,
            elapsed,
            join: self.join,
            cpu,
            peak_rss_kib: peak_rss_kib(),
            fetch_latency: self.fetch_latency,
            fetches: self.fetches,
            empty_fetches: self.empty_fetches,
            commits: self.commits,
            commits_refused: self.commits_refused,
            timed_out: self.timed_out,
            aborted,
            errors: self.errors,
            partitions: self.spans,
            member_id: self.member.map(|m| m.member_id().to_string()),
            end_to_end: self.end_to_end,
            timeline: self.timeline.into_windows(),
            verification: self
                .verifier
                .as_ref()
                .map(|v| v.lock().expect("verifier lock").report(None)),
            latest_values: self
                .latest
                .as_ref()
                .map(|l| l.lock().expect("latest lock").report()),
            value_decoding: self.decoding.map(|(d, _)| d.report()),
            cluster: crate::cluster::ClusterReport::of(
                &cluster_events,
                self.began.at,
                self.began.wall,
            ),
        };
        MemberRun {
            run,
            joins: self.joins,
            duplicated,
        }
    }
}

/// `--include`'s topics: how long a member that has made its last commit waits for the other
/// topics' members to make theirs before it leaves (at most half its session, as it does not
/// heartbeat meanwhile).
const LAST_COMMIT_WAIT: Duration = Duration::from_secs(5);

/// How long a member that ends during a cooperative rebalance waits for it, to commit and leave.
const FINISH_JOIN_WAIT: Duration = Duration::from_secs(10);

/// The rejoin under way, once it ends (never, when none is).
async fn joined(
    joining: &mut Option<(Joining, Instant)>,
) -> (GroupMember, Result<(), ClientError>, Instant) {
    let Some((join, _)) = joining.as_mut() else {
        return std::future::pending().await;
    };
    let (m, r) = join.await;
    let began = joining.take().map_or_else(Instant::now, |(_, b)| b);
    (m, r, began)
}

/// A member's join that began at `began` and took `took`, as the group report keeps it.
fn member_join(
    g: &MemberCtx,
    m: &GroupMember,
    began: Instant,
    took: Duration,
    spec: &ConsumeSpec,
) -> MemberJoin {
    // An incremental rebalance goes in steps (KIP-848's heartbeats; KIP-429's second round,
    // which follows the first at once): a heartbeat apart at most.
    let incremental = m.cooperative() || m.heartbeat_interval().is_some();
    let step = m.heartbeat_every(spec.consumer.heartbeat_interval);
    let (join, sync) = m.phases();
    MemberJoin {
        at_s: began.saturating_duration_since(g.share.start).as_secs_f64(),
        join_group_ms: join.as_secs_f64() * 1e3,
        sync_group_ms: sync.as_secs_f64() * 1e3,
        took_ms: took.as_secs_f64() * 1e3,
        generation_id: m.generation_id(),
        assigned: m.assignment().to_vec(),
        step_s: if incremental { step.as_secs_f64() } else { 0.0 },
    }
}

/// A partition's span before anything was read from `offset`.
fn fresh_span(offset: i64) -> PartitionSpan {
    PartitionSpan {
        start_offset: offset,
        end_offset: offset,
        records: 0,
        skipped: 0,
    }
}
