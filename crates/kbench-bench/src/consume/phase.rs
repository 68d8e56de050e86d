//! The measured phase of a consume run ([`run_consume`]): join the group or take the assigned
//! partitions, then fetch, decode and count until `messages` records were read, the time-out
//! passed or the run was stopped; progress and timeline windows on the way, and at the end a last
//! commit and leaving the group.
//!
//! In a group the member is the client's [`GroupConsumer`]: it heartbeats, rejoins, commits and
//! revokes on its own; the reading only polls it, takes the partitions it is given and gives up,
//! and marks where it got to.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use kbench_client::{
    Cluster, Commits, Consumer, FetchedPart, GroupConfig, GroupConsumer, GroupCounters, MemberEnd,
    Polled, SessionSettings, StartFrom, StartPolicy, TopicLayout,
};
use kbench_wire::BatchDecoder;
use tokio_util::sync::CancellationToken;

use super::group::{MemberCtx, MemberRun};
use super::{
    ConsumeMode, ConsumeObserver, ConsumeRun, ConsumeSpec, ConsumeWindow, PartitionSpan, StartAt,
    TIMELINE_COUNTERS, TIMELINE_HISTOGRAMS, batches_end, engine_options, start_positions,
};
use crate::error::BenchError;
use crate::group::MemberJoin;
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

/// Where records come from: a group member (the client's session), or assigned partitions.
enum Source {
    Group(Box<GroupConsumer>),
    Assigned(Consumer),
}

impl Source {
    async fn poll(&mut self) -> Option<Polled> {
        match self {
            Source::Group(g) => g.poll().await,
            Source::Assigned(c) => c.poll().await.map(Polled::Fetched),
        }
    }

    /// Processed `partition` up to `next`: what the group commits.
    fn mark(&self, partition: i32, next: i64) {
        if let Source::Group(g) = self {
            g.mark(partition, next);
        }
    }

    fn seek(&mut self, partition: i32, offset: i64) {
        match self {
            Source::Group(g) => g.seek(partition, offset),
            Source::Assigned(c) => c.seek(partition, offset),
        }
    }

    fn pause(&mut self, paused: bool) {
        match self {
            Source::Group(g) => g.pause(paused),
            Source::Assigned(c) => c.pause(paused),
        }
    }

    fn rebalancing_since(&self) -> Option<Instant> {
        match self {
            Source::Group(g) => g.rebalancing_since(),
            Source::Assigned(_) => None,
        }
    }
}

/// A consume run between joining and the end: where it reads, where it is in each partition, and
/// every figure the [`ConsumeRun`] reports.
struct Reading<'a, O> {
    /// Its place in the run's [`super::LeaveOrder`].
    slot: usize,
    spec: &'a ConsumeSpec,
    observer: Arc<O>,
    stop: Stop,
    cancel: CancellationToken,
    layout: Arc<TopicLayout>,
    source: Source,
    /// The member's counts (its own: a group run adds its members' runs up).
    counters: Arc<GroupCounters>,
    decoder: BatchDecoder,
    began: Began,
    /// The next offset to read in each partition read now.
    positions: BTreeMap<i32, i64>,
    /// Partitions taken and not read from yet (their first record ends a takeover).
    fresh: BTreeSet<i32>,
    spans: BTreeMap<i32, PartitionSpan>,
    records: u64,
    bytes: u64,
    batches: u64,
    fetches: u64,
    empty_fetches: u64,
    errors: BTreeMap<String, u64>,
    /// Time spent joining the group, every round (not reading through it).
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
    /// Whether the member has had its first partitions (told the observer).
    joined: bool,
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
    /// The observer asked for a pause (a backlog being built): the consumer does not fetch.
    paused: bool,
    window: ProgressWindow,
    timeline: Timeline,
    /// The timeline's window length, and when the next window closes.
    every: Duration,
    next_window: Instant,
}

/// `spec`'s group as the client's session is configured.
fn group_config(spec: &ConsumeSpec, group_id: &str, group: Option<&MemberCtx>) -> GroupConfig {
    GroupConfig {
        group_id: group_id.to_string(),
        topic: spec.topic.clone(),
        session_timeout: spec.consumer.session_timeout,
        rebalance_timeout: spec.rebalance_timeout(),
        assignors: spec.consumer.assignors.clone(),
        protocol: spec.consumer.group_protocol,
        remote_assignor: spec.consumer.remote_assignor.clone(),
        // A group run's member has its own (the run's, numbered).
        instance_id: match group {
            Some(g) => g.instance_id.clone(),
            None => spec.consumer.group_instance_id.clone(),
        },
        heartbeat_interval: spec.consumer.heartbeat_interval,
    }
}

/// Join `spec`'s group, or take the assigned partitions (every one of `layout`'s when none is
/// named) at their start positions.
async fn open_source(
    cluster: &Arc<Cluster>,
    layout: &TopicLayout,
    spec: &ConsumeSpec,
    group: Option<&MemberCtx>,
    counters: &Arc<GroupCounters>,
    cancel: &CancellationToken,
) -> Result<(Source, BTreeMap<i32, i64>), BenchError> {
    match &spec.mode {
        ConsumeMode::Group { group_id } => {
            let settings = SessionSettings {
                commits: if spec.commit {
                    Commits::Every(spec.consumer.auto_commit_interval)
                } else {
                    Commits::Off
                },
                start: StartPolicy {
                    from: match spec.start {
                        StartAt::Reset(r) => StartFrom::Reset(r),
                        StartAt::Offset(o) => StartFrom::Offset(o),
                    },
                    floor: None,
                },
                counters: counters.clone(),
            };
            // Stopped while the coordinator held the join: given up (leaving, if it had an id).
            let g = GroupConsumer::start(
                cluster.clone(),
                layout,
                group_config(spec, group_id, group),
                engine_options(spec),
                settings,
                cancel,
            )
            .await
            .map_err(|e| BenchError::Run(format!("group {group_id:?}: {e}")))?
            .ok_or(BenchError::StoppedJoining)?;
            // Its partitions come as it polls.
            Ok((Source::Group(Box::new(g)), BTreeMap::new()))
        }
        ConsumeMode::Assign { partitions } => {
            let assigned: Vec<i32> = if partitions.is_empty() {
                layout.partitions.iter().map(|p| p.partition).collect()
            } else {
                partitions.clone()
            };
            let positions = start_positions(cluster, layout, &assigned, spec.start)
                .await
                .map_err(|e| BenchError::topic(&spec.topic, e))?;
            let mut c = Consumer::new(cluster.clone(), layout, engine_options(spec));
            c.assign(&positions);
            Ok((Source::Assigned(c), positions))
        }
    }
}

impl<'a, O: ConsumeObserver> Reading<'a, O> {
    /// Join (group mode: the partitions come as it polls) or take the assigned partitions.
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
            .map_or_else(|| stop.token().clone(), |g| g.stop.token().clone());
        let began = Began {
            wall: SystemTime::now(),
            at: Instant::now(),
            cpu: CpuTime::now(),
        };
        let counters = Arc::new(GroupCounters::default());
        let (source, positions) =
            open_source(&cluster, &layout, spec, group.as_ref(), &counters, &cancel).await?;
        // Its place in the group's leave order, once nothing more can fail its start.
        let slot = spec.leave_order.0.as_ref().map_or(0, |o| o.slot());
        let spans = positions
            .iter()
            .map(|(p, o)| (*p, fresh_span(*o)))
            .collect();
        let assigned = matches!(source, Source::Assigned(_));
        if assigned {
            observer.joined();
        }
        let layout = Arc::new(layout);
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
            layout,
            source,
            counters,
            decoder: BatchDecoder::new(),
            positions,
            fresh: BTreeSet::new(),
            spans,
            records: 0,
            bytes: 0,
            batches: 0,
            fetches: 0,
            empty_fetches: 0,
            errors: BTreeMap::new(),
            join: Duration::ZERO,
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
            joins: Vec::new(),
            joined: assigned,
            duplicated: 0,
            decoding,
            last_record: Instant::now(),
            timed_out: false,
            paused: false,
            window: ProgressWindow {
                start: Instant::now(),
                records: 0,
                bytes: 0,
                join: Duration::ZERO,
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
        // How often the loop looks up from the answers (windows, the time-out) when none comes.
        let tick = Duration::from_millis(20);
        while self.total() < self.spec.messages {
            if self.cancel.is_cancelled() {
                break;
            }
            let now = Instant::now();
            if self.idle_past_timeout(now) {
                self.timed_out = true;
                break;
            }
            self.close_windows(now);
            // Paused (a backlog being built): in the group, heartbeating, not fetching, not idle.
            if self.observer.paused() != self.paused {
                self.paused = !self.paused;
                self.source.pause(self.paused);
            }
            if self.paused {
                self.last_record = Instant::now();
            }
            let polled = tokio::select! {
                p = self.source.poll() => p,
                _ = self.cancel.cancelled() => break,
                _ = tokio::time::sleep(tick) => continue,
            };
            match polled {
                None => break,
                Some(Polled::Fetched(fetched)) => {
                    self.on_fetched(&fetched);
                    self.learn_schemas().await?;
                }
                Some(Polled::Assigned(assigned)) => self.assigned(assigned),
                Some(Polled::Revoked(revoked)) => self.revoked(revoked),
                Some(Polled::Failed(e)) => {
                    return Err(BenchError::Run(format!("the group member failed: {e}")));
                }
            }
        }
        Ok(())
    }

    /// Whether no record came for `timeout` (the group's: any member's record counts). A
    /// rebalance under way holds the time-out off, for as long as the rebalance timeout: the
    /// records are there, the group is settling who reads them.
    fn idle_past_timeout(&self, now: Instant) -> bool {
        let idle = match self.group.as_ref() {
            Some(g) => g.share.idle().min(now - self.began.at),
            None => now - self.last_record,
        };
        if idle <= self.spec.timeout {
            return false;
        }
        self.source
            .rebalancing_since()
            .is_none_or(|since| now - since >= self.spec.rebalance_timeout())
    }

    /// Partitions given to the member: each read from where the session positioned it, a
    /// handover for the verifier; the join noted; the tool's rebalance time counted (unless the
    /// member read on through it).
    fn assigned(&mut self, assigned: kbench_client::Assigned) {
        for (p, o) in &assigned.added {
            self.positions.insert(*p, *o);
            self.spans.entry(*p).or_insert(fresh_span(*o));
            self.fresh.insert(*p);
        }
        let took = assigned.join.took;
        if !assigned.join.incremental || !self.joined {
            self.join += took;
            self.window.join += took;
        }
        self.spec.leave_order.joined(self.slot, &assigned.join);
        if let Some(g) = self.group.as_ref() {
            g.share.owner(g.index, assigned.added.keys().copied(), true);
            self.joins.push(MemberJoin::of(
                &assigned.join,
                &assigned.owned,
                &g.share.log,
            ));
            g.stop.joined();
            // The group read nothing while it settled: the time-out counts from now.
            g.share.touch();
        }
        self.last_record = Instant::now();
        if !self.joined {
            self.joined = true;
            self.observer.joined();
        }
    }

    /// Partitions the member gave up: no longer read (the session committed where this reading
    /// got to, unless they were lost).
    fn revoked(&mut self, revoked: kbench_client::Revoked) {
        for p in revoked.positions.keys() {
            self.positions.remove(p);
            self.fresh.remove(p);
        }
        // The coordinator may hold the join until the others join too: none waits for this
        // member to leave meanwhile (`assigned` puts it back if it leads again).
        self.spec.leave_order.gone(self.slot);
        if let Some(g) = self.group.as_ref() {
            g.share
                .owner(g.index, revoked.positions.keys().copied(), false);
        }
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
                self.source.mark(*partition, *to);
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
            // The partition's first record since this member took it: its takeover's end.
            if self.fresh.remove(partition) {
                g.share
                    .log
                    .note(g.index, [*partition], crate::group::Ownership::FirstRead);
            }
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
            self.source.mark(*partition, next);
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
            self.source.seek(*partition, next);
        }
    }

    /// End the run: close the last timeline window; in a group, commit what was read, wait (as
    /// the run's other readings need) and leave as the member's end says; gather the figures.
    async fn finish(mut self) -> MemberRun {
        let elapsed = self.began.at.elapsed();
        let cpu = CpuTime::now().since(self.began.cpu);
        let ended_at = SystemTime::now();
        // The last, partial window: the windows add up to the run.
        self.timeline.take(
            ended_at,
            &[self.records, self.bytes],
            vec![self.fetch_latency.clone(), self.end_to_end.clone()],
        );
        let end = self
            .group
            .as_ref()
            .map_or(MemberEnd::RunEnded, |g| g.stop.end());
        if let Some(g) = self.group.as_ref()
            && end.by_fault()
        {
            g.share
                .owner(g.index, self.positions.keys().copied(), false);
        }
        let crashed = end == MemberEnd::Crashed;
        let member_id;
        let cluster_events = match self.source {
            Source::Assigned(c) => {
                member_id = None;
                if let Some(shared) = &self.spec.shared_total.0 {
                    shared.last_commit(false, Duration::ZERO).await;
                }
                c.finish()
            }
            Source::Group(g) => {
                member_id = Some(g.member_id());
                if crashed {
                    // A crashed member says nothing more to the group: its session runs out
                    // (and the others do not wait for it to leave).
                    if let Some(shared) = &self.spec.shared_total.0 {
                        shared.last_commit(false, Duration::ZERO).await;
                    }
                    self.spec.leave_order.gone(self.slot);
                } else {
                    if self.spec.commit
                        && let Err(e) = g.commit().await
                    {
                        *self.errors.entry(format!("commit: {e}")).or_default() += 1;
                    }
                    // The waits below (for the others' last commits, for the leader's leave)
                    // together last at most half the session.
                    let waits_end = tokio::time::Instant::now()
                        + (self.spec.consumer.session_timeout / 2).min(LAST_COMMIT_WAIT);
                    let left_of = |end: tokio::time::Instant| {
                        end.saturating_duration_since(tokio::time::Instant::now())
                    };
                    // `--include`'s topics: no member leaves before every topic's has committed
                    // (a LeaveGroup starts a rebalance, in which the others' commits would be
                    // refused).
                    if let Some(shared) = &self.spec.shared_total.0 {
                        shared.last_commit(true, left_of(waits_end)).await;
                    }
                    // At the run's end the group's leader leaves first (see `LeaveOrder`); a
                    // member a fault stops leaves when told.
                    if let Some(order) = self.spec.leave_order.0.as_ref()
                        && !end.by_fault()
                    {
                        order.before_leaving(g.leader(), left_of(waits_end)).await;
                    }
                }
                let events = g.close(end).await;
                self.spec.leave_order.gone(self.slot);
                events
            }
        };
        for (what, n) in self.counters.errors() {
            *self.errors.entry(what).or_default() += n;
        }
        let aborted = self.stop.reason();
        let duplicated = self.verifier.is_some().then_some(self.duplicated);
        use std::sync::atomic::Ordering::Relaxed;
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
            commits: self.counters.commits.load(Relaxed),
            commits_refused: self.counters.commits_refused.load(Relaxed),
            timed_out: self.timed_out,
            aborted,
            errors: self.errors,
            partitions: self.spans,
            member_id,
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
/// topics' members to make theirs before it leaves (at most half its session).
const LAST_COMMIT_WAIT: Duration = Duration::from_secs(5);

/// A partition's span before anything was read from `offset`.
fn fresh_span(offset: i64) -> PartitionSpan {
    PartitionSpan {
        start_offset: offset,
        end_offset: offset,
        records: 0,
        skipped: 0,
    }
}
