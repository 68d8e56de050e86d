//! The consumer engine: every workload that reads drives this one, modelled on franz-go's
//! `source` and `cursor` (`pkg/kgo/source.go`).
//!
//! - A **cursor** per partition: where the next Fetch starts, the leader it goes to, and whether it
//!   is waiting (for metadata, a back-off, an offset reset).
//! - A **source** per broker: one fetch loop of its own, concurrent with the others, asking for
//!   every ready cursor the broker leads in one Fetch (each Fetch starting from the next partition,
//!   KIP-74's rotation). A slow or dead broker holds back only its own partitions.
//! - After an answer a source moves each cursor to the end of the complete batches it brought and
//!   fetches again at once, while the caller decodes (one answer buffered per source): the caller
//!   [`seek`](Consumer::seek)s a cursor when it decides otherwise (a hole to wait at), and answers
//!   fetched for an earlier position are dropped.
//! - When metadata changes, cursors **move to their new leader's source**. A stale-metadata error
//!   asks for one refresh, coalesced across partitions; OFFSET_OUT_OF_RANGE is answered by
//!   `auto.offset.reset` (ListOffsets), told to the caller; an unreachable broker is backed off.
//! - Fetches go on connections of their own ([`Purpose::Fetch`]): a Fetch the broker holds never
//!   delays a heartbeat or a produce answer.
//!
//! It never measures: it hands each answer over with when it was asked and answered, and keeps
//! what the cluster did ([`ClusterEvents`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kbench_wire::ApiKey;
use tokio::sync::{Notify, mpsc};

use crate::cluster::{Cluster, Purpose, TopicLayout, topic_name};
use crate::config::OffsetReset;
use crate::error::{ClientError, ErrorClass};
use crate::events::{ClusterEvents, LeaderChange, STALL, Stall};
use crate::fetch::FetchedPartition;

/// How the engine fetches.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// `max.partition.fetch.bytes`.
    pub partition_max_bytes: i32,
    /// `fetch.max.bytes`.
    pub max_bytes: i32,
    /// `fetch.max.wait.ms`.
    pub max_wait: Duration,
    /// `isolation.level=read_committed`.
    pub read_committed: bool,
    /// Where a cursor whose offset the broker no longer has goes (`auto.offset.reset`).
    pub reset: OffsetReset,
    /// `retry.backoff.ms`: between refreshes, and before asking an erring partition again.
    pub retry_backoff: Duration,
}

/// One partition's share of an answer.
#[derive(Debug, Clone)]
pub struct FetchedPart {
    pub partition: i32,
    /// The offset it was fetched from.
    pub from: i64,
    pub data: FetchedPartition,
    /// Which positioning of the cursor it belongs to (a seek since makes it stale).
    epoch: u64,
}

/// One Fetch answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub broker: i32,
    /// When the Fetch was sent and when its answer was in hand.
    pub sent: Instant,
    pub answered: Instant,
    pub parts: Vec<FetchedPart>,
    /// What went wrong with it that retrying cannot mend (the request, or a partition's error
    /// code): the caller counts it. Retried errors (a leader moved, a broker unreachable) are the
    /// cluster's events, not errors.
    pub errors: Vec<ClientError>,
    /// Cursors moved by `auto.offset.reset` since the last answer: (partition, from, to).
    pub resets: Vec<(i32, i64, i64)>,
}

/// A partition's place in the engine.
#[derive(Debug)]
struct Cursor {
    offset: i64,
    /// New at every positioning (an assignment, a seek, a reset), from the engine's one sequence,
    /// so never repeated for a partition: answers for an earlier epoch are dropped.
    epoch: u64,
    leader: i32,
    /// A Fetch for it is out (its source asked for it).
    in_flight: bool,
    /// A stale-metadata answer for a Fetch sent at this time: wait for a refresh begun after it.
    stale_since: Option<Instant>,
    backoff_until: Option<Instant>,
    /// The broker answered OFFSET_OUT_OF_RANGE: the driver resets it.
    out_of_range: bool,
    unavailable_since: Option<Instant>,
}

impl Cursor {
    /// A cursor positioned at `offset` (epoch `epoch`) whose partition `leader` leads (-1: not
    /// known yet).
    fn at(offset: i64, epoch: u64, leader: i32) -> Cursor {
        Cursor {
            offset,
            epoch,
            leader,
            in_flight: false,
            stale_since: None,
            backoff_until: None,
            out_of_range: false,
            unavailable_since: None,
        }
    }
}

struct State {
    layout: TopicLayout,
    cursors: BTreeMap<i32, Cursor>,
    /// Brokers with a fetch loop.
    sources: HashMap<i32, tokio::task::AbortHandle>,
    paused: bool,
    refresh_wanted: bool,
    refreshing: bool,
    last_refresh: Option<Instant>,
    resets: Vec<(i32, i64, i64)>,
    events: ClusterEvents,
    /// Per broker: since when a Fetch has been out without an answer.
    waiting: HashMap<i32, Instant>,
    stopped: bool,
    /// The last cursor epoch given out.
    epochs: u64,
}

struct Shared {
    cluster: Arc<Cluster>,
    options: ConsumerOptions,
    state: Mutex<State>,
    /// A cursor changed (assigned, sought, moved, unblocked): idle sources look again.
    changed: Notify,
    /// Something the driver acts on (a refresh, a reset).
    wake: Notify,
    tx: mpsc::Sender<Fetched>,
}

/// The engine, held by the task that reads.
pub struct Consumer {
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Fetched>,
    driver: tokio::task::JoinHandle<()>,
}

/// OFFSET_OUT_OF_RANGE: the broker no longer (or not yet) has the offset asked for.
const OFFSET_OUT_OF_RANGE: i16 = 1;

impl Consumer {
    /// An engine reading `layout`'s topic over `cluster`; nothing is fetched until
    /// [`assign`](Self::assign).
    pub fn new(cluster: Arc<Cluster>, layout: &TopicLayout, options: ConsumerOptions) -> Consumer {
        // One answer buffered per source at most (each source waits for room): the engine reads
        // ahead of the caller by one Fetch, never more.
        let (tx, rx) = mpsc::channel(4);
        let shared = Arc::new(Shared {
            cluster,
            options,
            state: Mutex::new(State {
                layout: layout.clone(),
                cursors: BTreeMap::new(),
                sources: HashMap::new(),
                paused: false,
                refresh_wanted: false,
                refreshing: false,
                last_refresh: None,
                resets: Vec::new(),
                events: ClusterEvents::default(),
                waiting: HashMap::new(),
                stopped: false,
                epochs: 0,
            }),
            changed: Notify::new(),
            wake: Notify::new(),
            tx,
        });
        let driver = tokio::spawn(drive(shared.clone()));
        Consumer { shared, rx, driver }
    }

    /// Read exactly these partitions from these offsets (replacing any earlier assignment).
    pub fn assign(&mut self, positions: &BTreeMap<i32, i64>) {
        {
            let mut st = self.shared.state.lock().expect("consumer state");
            let leaders: Vec<(i32, i32)> = positions
                .keys()
                .map(|p| (*p, st.layout.leader(*p).unwrap_or(-1)))
                .collect();
            st.cursors.clear();
            for (p, leader) in leaders {
                let epoch = st.next_epoch();
                st.cursors
                    .insert(p, Cursor::at(positions[&p], epoch, leader));
            }
            if st.cursors.values().any(|c| c.leader < 0) {
                st.refresh_wanted = true;
            }
            self.shared.start_sources(&mut st);
        }
        self.shared.changed.notify_waiters();
        self.shared.wake.notify_one();
    }

    /// Read these partitions too, from these offsets (a partition already read is sought there);
    /// the others are read on as they were. A group's assignment grows so.
    pub fn add(&mut self, positions: &BTreeMap<i32, i64>) {
        {
            let mut st = self.shared.state.lock().expect("consumer state");
            for (p, offset) in positions {
                let leader = st.layout.leader(*p).unwrap_or(-1);
                let epoch = st.next_epoch();
                st.cursors.insert(*p, Cursor::at(*offset, epoch, leader));
            }
            if st.cursors.values().any(|c| c.leader < 0) {
                st.refresh_wanted = true;
            }
            self.shared.start_sources(&mut st);
        }
        self.shared.changed.notify_waiters();
        self.shared.wake.notify_one();
    }

    /// Stop reading these partitions: answers for them still under way are dropped. A group's
    /// assignment shrinks so (a revocation).
    pub fn remove(&mut self, partitions: &[i32]) {
        let mut st = self.shared.state.lock().expect("consumer state");
        for p in partitions {
            if let Some(c) = st.cursors.remove(p)
                && let Some(since) = c.unavailable_since
            {
                *st.events.unavailable.entry(*p).or_default() += Instant::now() - since;
            }
        }
    }

    /// The partitions being read.
    pub fn assigned(&self) -> Vec<i32> {
        let st = self.shared.state.lock().expect("consumer state");
        st.cursors.keys().copied().collect()
    }

    /// Fetch `partition` from `offset` from now on; answers fetched from elsewhere are dropped.
    pub fn seek(&mut self, partition: i32, offset: i64) {
        {
            let mut st = self.shared.state.lock().expect("consumer state");
            let epoch = st.next_epoch();
            if let Some(c) = st.cursors.get_mut(&partition) {
                c.offset = offset;
                c.epoch = epoch;
                c.out_of_range = false;
            }
        }
        self.shared.changed.notify_waiters();
    }

    /// Stop fetching (the cursors stay where they are), or go on.
    pub fn pause(&mut self, paused: bool) {
        self.shared.state.lock().expect("consumer state").paused = paused;
        self.shared.changed.notify_waiters();
    }

    /// The next answer: only its parts fetched for the cursors' current positions. `None` when the
    /// engine has stopped.
    pub async fn poll(&mut self) -> Option<Fetched> {
        let mut fetched = self.rx.recv().await?;
        let st = self.shared.state.lock().expect("consumer state");
        fetched.parts.retain(|part| {
            st.cursors
                .get(&part.partition)
                .is_some_and(|c| c.epoch == part.epoch)
        });
        drop(st);
        let mut st = self.shared.state.lock().expect("consumer state");
        fetched.resets.append(&mut st.resets);
        Some(fetched)
    }

    /// The topic as the engine last learned it.
    pub fn layout(&self) -> TopicLayout {
        self.shared
            .state
            .lock()
            .expect("consumer state")
            .layout
            .clone()
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.shared.cluster
    }

    /// What the cluster did so far.
    pub fn events(&self) -> ClusterEvents {
        self.shared.state.lock().expect("consumer state").events_at(
            Instant::now(),
            &self.shared.cluster,
            self.shared.options.max_wait,
        )
    }

    /// Stop every fetch loop; what the cluster did.
    pub fn finish(self) -> ClusterEvents {
        let events = self.events();
        let mut st = self.shared.state.lock().expect("consumer state");
        st.stopped = true;
        for (_, source) in st.sources.drain() {
            source.abort();
        }
        drop(st);
        self.driver.abort();
        events
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.driver.abort();
        if let Ok(mut st) = self.shared.state.lock() {
            st.stopped = true;
            for (_, source) in st.sources.drain() {
                source.abort();
            }
        }
    }
}

impl State {
    /// A cursor epoch never given out before.
    fn next_epoch(&mut self) -> u64 {
        self.epochs += 1;
        self.epochs
    }

    /// The events so far, with a broker still unanswered (beyond a Fetch's `max_wait`) and
    /// partitions still without a usable leader counted up to `now`.
    fn events_at(&self, now: Instant, cluster: &Cluster, max_wait: Duration) -> ClusterEvents {
        let mut events = self.events.clone();
        for (node, since) in &self.waiting {
            if now.saturating_duration_since(*since) >= STALL + max_wait {
                events.stalls.push(Stall {
                    broker: *node,
                    addr: cluster.broker_addr(*node).unwrap_or_default(),
                    from: *since,
                    until: now,
                    ongoing: true,
                });
            }
        }
        for (p, c) in &self.cursors {
            if let Some(since) = c.unavailable_since {
                *events.unavailable.entry(*p).or_default() += now - since;
            }
        }
        events
    }
}

impl Shared {
    /// A fetch loop for every broker leading an assigned partition that has none yet.
    fn start_sources(self: &Arc<Self>, st: &mut State) {
        if st.stopped {
            return;
        }
        let leaders: Vec<i32> = st
            .cursors
            .values()
            .map(|c| c.leader)
            .filter(|l| *l >= 0)
            .collect();
        for node in leaders {
            if let std::collections::hash_map::Entry::Vacant(e) = st.sources.entry(node) {
                let task = tokio::spawn(source(self.clone(), node));
                e.insert(task.abort_handle());
            }
        }
    }

    /// One Fetch to `node` for `asked` (partition, offset), decoded; the request's own failure is
    /// the error.
    async fn fetch_once(
        &self,
        node: i32,
        topic: &TopicLayout,
        asked: &[(i32, i64)],
    ) -> Result<Vec<(i32, i16, FetchedPartition)>, ClientError> {
        let o = &self.options;
        let conn = self.cluster.connection_for(node, Purpose::Fetch).await?;
        let version = self
            .cluster
            .version_for_topic(&conn, ApiKey::Fetch, &topic.topic_id)?;
        let partitions = asked
            .iter()
            .map(|(p, offset)| {
                FetchPartition::default()
                    .with_partition(*p)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(o.partition_max_bytes)
            })
            .collect();
        let mut fetch_topic = FetchTopic::default().with_partitions(partitions);
        fetch_topic = if version >= 13 {
            fetch_topic.with_topic_id(topic.topic_id)
        } else {
            fetch_topic.with_topic(topic_name(&topic.name))
        };
        let request = FetchRequest::default()
            .with_max_wait_ms(o.max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(1)
            .with_max_bytes(o.max_bytes)
            .with_isolation_level(i8::from(o.read_committed))
            .with_topics(vec![fetch_topic]);
        let (correlation_id, frame) = conn.request_frame(ApiKey::Fetch, version, &request).await?;
        let response = kbench_wire::fetch::decode_fetch_frame(version, correlation_id, frame)?;
        if response.error_code != 0 {
            return Err(ClientError::kafka(
                "Fetch",
                topic.name.clone(),
                response.error_code,
            ));
        }
        Ok(response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions.into_iter())
            .map(|p| (p.partition_index, p.error_code, FetchedPartition::of(p)))
            .collect())
    }

    /// What one answer does to the cursors it asked for; what to hand the caller.
    fn settle(
        &self,
        st: &mut State,
        node: i32,
        asked: &[(i32, i64, u64)],
        result: Result<Vec<(i32, i16, FetchedPartition)>, ClientError>,
        sent: Instant,
        now: Instant,
    ) -> (Vec<FetchedPart>, Vec<ClientError>) {
        let backoff = self.options.retry_backoff;
        let mut parts = Vec::new();
        let mut errors = Vec::new();
        let reached = !matches!(&result, Err(e) if e.class() == ErrorClass::Unreachable);
        if reached
            && let Some(since) = st.waiting.remove(&node)
            && now - since >= STALL + self.options.max_wait
        {
            st.events.stalls.push(Stall {
                broker: node,
                addr: self.cluster.broker_addr(node).unwrap_or_default(),
                from: since,
                until: now,
                ongoing: false,
            });
        }
        for (p, _, _) in asked {
            if let Some(c) = st.cursors.get_mut(p) {
                c.in_flight = false;
            }
        }
        let answers = match result {
            Ok(answers) => answers,
            Err(e) => {
                // The whole request failed: every partition asked waits, and the broker's
                // leadership is looked up again.
                st.events.retry(e.cause());
                for (p, _, _) in asked {
                    if let Some(c) = st.cursors.get_mut(p) {
                        c.backoff_until = Some(now + backoff);
                        c.unavailable_since.get_or_insert(now);
                    }
                }
                if e.class() == ErrorClass::Fatal {
                    errors.push(e);
                } else {
                    st.refresh_wanted = true;
                }
                return (parts, errors);
            }
        };
        for (partition, code, data) in answers {
            let Some(&(_, from, epoch)) = asked.iter().find(|(p, _, _)| *p == partition) else {
                continue;
            };
            let Some(c) = st.cursors.get_mut(&partition) else {
                continue;
            };
            if c.epoch != epoch || c.offset != from {
                // Sought since, or already answered from elsewhere (the partition moved while
                // this Fetch was out): asked again from the new place.
                continue;
            }
            if code != 0 {
                let e =
                    ClientError::kafka("Fetch", format!("{}-{partition}", st.layout.name), code);
                st.events.retry(e.cause());
                c.unavailable_since.get_or_insert(now);
                if code == OFFSET_OUT_OF_RANGE {
                    c.out_of_range = true;
                } else {
                    match e.class() {
                        ErrorClass::StaleMetadata => {
                            c.stale_since = Some(sent);
                            st.refresh_wanted = true;
                        }
                        ErrorClass::Fatal => {
                            c.backoff_until = Some(now + backoff);
                            errors.push(e);
                        }
                        _ => c.backoff_until = Some(now + backoff),
                    }
                }
                continue;
            }
            if let Some(since) = c.unavailable_since.take() {
                *st.events.unavailable.entry(partition).or_default() += now - since;
            }
            // The next Fetch starts after the complete batches this one brought.
            if let Some(end) = kbench_wire::records::batches_end(&data.records, from) {
                c.offset = c.offset.max(end);
            }
            parts.push(FetchedPart {
                partition,
                from,
                data,
                epoch,
            });
        }
        (parts, errors)
    }

    /// A Metadata answer: cursors whose partition has a new leader move to its source.
    fn apply(
        self: &Arc<Self>,
        st: &mut State,
        layout: TopicLayout,
        started: Instant,
        now: Instant,
    ) {
        let backoff = self.options.retry_backoff;
        for (p, c) in st.cursors.iter_mut() {
            let leader = layout.leader(*p).unwrap_or(-1);
            let moved = leader != c.leader;
            if moved {
                st.events.leader_changes.push(LeaderChange {
                    at: now,
                    partition: *p,
                    from: c.leader,
                    to: leader,
                });
                c.leader = leader;
                // The new leader's source may ask at once: a Fetch still out to the old one (a
                // broker that hangs holds it for request.timeout.ms) is dropped when it answers,
                // the cursor having moved on.
                c.in_flight = false;
            }
            if c.stale_since.is_some_and(|s| s <= started) {
                c.stale_since = None;
                if !moved {
                    c.backoff_until = Some(now + backoff);
                }
            }
            if c.stale_since.is_some() || c.leader < 0 {
                st.refresh_wanted = true;
            }
        }
        st.layout = layout;
        self.start_sources(st);
    }
}

/// One broker's fetch loop.
async fn source(shared: Arc<Shared>, node: i32) {
    let mut rotation = 0usize;
    loop {
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let now = Instant::now();
        let (asked, layout, wake) = {
            let mut st = shared.state.lock().expect("consumer state");
            if st.stopped {
                return;
            }
            let mut asked = Vec::new();
            let mut wake: Option<Instant> = None;
            let State {
                cursors, paused, ..
            } = &mut *st;
            for (p, c) in cursors.iter_mut() {
                let ready = !*paused
                    && c.leader == node
                    && !c.in_flight
                    && c.stale_since.is_none()
                    && !c.out_of_range
                    && c.backoff_until.is_none_or(|t| now >= t);
                if ready {
                    c.in_flight = true;
                    asked.push((*p, c.offset, c.epoch));
                } else if c.leader == node
                    && let Some(t) = c.backoff_until
                    && now < t
                {
                    wake = Some(wake.map_or(t, |w: Instant| w.min(t)));
                }
            }
            if !asked.is_empty() {
                st.waiting.entry(node).or_insert(now);
            }
            (asked, st.layout.clone(), wake)
        };
        if asked.is_empty() {
            let sleep = async {
                match wake {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = changed => {}
                _ = sleep => {}
            }
            continue;
        }
        // Each Fetch starts from the next partition (KIP-74; Java's consumer and librdkafka rotate
        // too): a broker that serves partitions in request order, giving the first ones its wait and
        // byte budget, otherwise starves the last ones.
        rotation += 1;
        let asked = fetch_order(asked, rotation);
        let request: Vec<(i32, i64)> = asked.iter().map(|(p, o, _)| (*p, *o)).collect();
        let sent = Instant::now();
        let result = shared.fetch_once(node, &layout, &request).await;
        let answered = Instant::now();
        let fetched = {
            let mut st = shared.state.lock().expect("consumer state");
            let (parts, errors) = shared.settle(&mut st, node, &asked, result, sent, answered);
            if st.refresh_wanted || st.cursors.values().any(|c| c.out_of_range) {
                shared.wake.notify_one();
            }
            Fetched {
                broker: node,
                sent,
                answered,
                parts,
                errors,
                resets: Vec::new(),
            }
        };
        // Room for the answer: the caller takes answers as it decodes them.
        if shared.tx.send(fetched).await.is_err() {
            return;
        }
        shared.changed.notify_waiters();
    }
}

/// The partitions of the `rotation`-th Fetch, starting from partition `rotation` (mod their count).
fn fetch_order<T>(mut asked: Vec<T>, rotation: usize) -> Vec<T> {
    if !asked.is_empty() {
        let n = rotation % asked.len();
        asked.rotate_left(n);
    }
    asked
}

/// The engine's driver: metadata refreshes (coalesced, spaced by `retry.backoff.ms`) and offset
/// resets.
async fn drive(shared: Arc<Shared>) {
    loop {
        let wake = shared.wake.notified();
        let now = Instant::now();
        let (refresh, resets, next) = {
            let mut st = shared.state.lock().expect("consumer state");
            let due = st
                .last_refresh
                .map_or(now, |t| t + shared.options.retry_backoff);
            let refresh = st.refresh_wanted && !st.refreshing && now >= due;
            if refresh {
                st.refresh_wanted = false;
                st.refreshing = true;
                st.last_refresh = Some(now);
            }
            // A reset that failed waits out its back-off (never asked again at once).
            let resets: Vec<i32> = st
                .cursors
                .iter()
                .filter(|(_, c)| c.out_of_range && c.backoff_until.is_none_or(|t| now >= t))
                .map(|(p, _)| *p)
                .collect();
            let reset_due = st
                .cursors
                .values()
                .filter(|c| c.out_of_range)
                .filter_map(|c| c.backoff_until.filter(|t| *t > now))
                .min();
            let next = [
                (st.refresh_wanted && !st.refreshing).then_some(due),
                reset_due,
            ]
            .into_iter()
            .flatten()
            .min();
            (refresh, resets, next)
        };
        if refresh {
            let layout = shared
                .state
                .lock()
                .expect("consumer state")
                .layout
                .name
                .clone();
            let answer = shared.cluster.metadata(&layout).await;
            let answered = Instant::now();
            let mut st = shared.state.lock().expect("consumer state");
            st.refreshing = false;
            match answer {
                Ok((_, layout)) if !layout.partitions.is_empty() => {
                    st.events.metadata_refreshes += 1;
                    shared.apply(&mut st, layout, now, answered);
                }
                Ok(_) => {
                    st.events.metadata_refreshes += 1;
                    st.refresh_wanted = true;
                }
                Err(e) => {
                    tracing::debug!("consumer metadata refresh failed: {e}");
                    st.events.metadata_refresh_failures += 1;
                    st.refresh_wanted = true;
                }
            }
            drop(st);
            shared.changed.notify_waiters();
            continue;
        }
        if !resets.is_empty() {
            reset(&shared, &resets).await;
            shared.changed.notify_waiters();
            continue;
        }
        let sleep = async {
            match next {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = wake => {}
            _ = sleep => {}
        }
    }
}

/// Cursors out of range go where `auto.offset.reset` says (ListOffsets), and the caller is told.
async fn reset(shared: &Arc<Shared>, partitions: &[i32]) {
    let layout = shared.state.lock().expect("consumer state").layout.clone();
    let answer = match shared.options.reset {
        OffsetReset::Earliest => shared.cluster.earliest_offsets(&layout, partitions).await,
        OffsetReset::Latest => shared.cluster.latest_offsets(&layout, partitions).await,
    };
    let mut st = shared.state.lock().expect("consumer state");
    match answer {
        Ok(offsets) => {
            for (p, to) in offsets {
                let epoch = st.next_epoch();
                if let Some(c) = st.cursors.get_mut(&p)
                    && c.out_of_range
                {
                    let from = c.offset;
                    c.offset = to;
                    c.epoch = epoch;
                    c.out_of_range = false;
                    st.resets.push((p, from, to));
                }
            }
        }
        Err(e) => {
            tracing::debug!("offset reset failed: {e}");
            for p in partitions {
                if let Some(c) = st.cursors.get_mut(p) {
                    c.backoff_until = Some(Instant::now() + shared.options.retry_backoff);
                }
            }
            st.events.retry(e.cause());
            st.refresh_wanted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fetch_starts_from_the_next_partition() {
        let asked: Vec<(i32, i64)> = (0..5).map(|p| (p, 100 + i64::from(p))).collect();
        let firsts: Vec<i32> = (0..10)
            .map(|r| fetch_order(asked.clone(), r)[0].0)
            .collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
        let mut once = fetch_order(asked.clone(), 3);
        assert_eq!(once[0], (3, 103), "positions travel with their partitions");
        once.sort();
        assert_eq!(once, asked, "every partition, once");
        assert!(fetch_order(Vec::<(i32, i64)>::new(), 7).is_empty());
    }
}
