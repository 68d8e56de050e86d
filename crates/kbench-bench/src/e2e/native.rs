//! The native e2e driver: producers and the group consumer speak the Kafka protocol, each on its own
//! connections. Every record carries its id in its key (run tag, producer, sequence: 16 bytes) and
//! its send time in a header (`kbench-sent-us`: µs on this process's monotonic clock since the run's
//! epoch). The consumer learns the run's start offsets (latest) and joins its group *before* any
//! producer starts, so no record of the run can fall before its position; it never moves a position
//! past records it has not read (see [`readable_until`]), heartbeats, commits by the one commit
//! rule, and leaves the group at the end. With `--consumers N` the group has N such members, each
//! on connections of its own, counting into one record tracker: a partition handed from one member
//! to another is read on from where the group committed (never before the run's start), and what is
//! read twice across the handover is counted duplicated.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kbench_client::{
    ClientError, Cluster, ClusterConfig, Commits, GroupConfig, GroupConsumer, MemberEnd, Polled,
    SessionSettings, StartFrom, StartPolicy, TopicLayout,
};
use kbench_wire::batch::{RecordHeader, now_ms};
use kbench_wire::{BatchDecoder, Negotiated, RecordView};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::e2e::live::{E2eLive, add};
use crate::e2e::phases::{
    ConsumerDone, ConsumerTask, Driver, Pacer, RECORD_ID_LEN, Seen, missing, record_id,
};
use crate::e2e::reply::{Correlation, correlation_of};
use crate::e2e::spec::{CommitMode, E2eMode, E2eSpec};
use crate::error::BenchError;
use crate::group::roster::{MemberStop, Roster};
use crate::group::{GroupFault, GroupReport, MemberJoin, MemberReport, OwnerLog, Ownership};
use crate::schema::decode::{Decoding, RegistryReader};
use crate::verify::{Stamp, VERIFY_HEADER};

/// The header that carries a record's send time (8 bytes, big-endian µs since the run's epoch).
pub const SENT_HEADER: &[u8] = b"kbench-sent-us";
/// The header that carries a distributed run's record's send time (8 bytes, big-endian µs since
/// the Unix epoch on the producer agent's clock, [`crate::clock::wall_us`]).
pub const SENT_WALL_HEADER: &[u8] = b"kbench-sent-wall-us";

/// The native driver, connected and with its topic ensured.
pub(crate) struct Native {
    spec: E2eSpec,
    cluster: ClusterConfig,
    layout: TopicLayout,
    /// Every connection set opened (admin, consumer, one per producer), closed at the end.
    clusters: Vec<Arc<Cluster>>,
    epoch: Instant,
    run_tag: u32,
    /// Whether the topic was missing (and so created here).
    pub(crate) created: bool,
    /// Request-reply: the reply topic's layout (the consumer reads it).
    reply_layout: Option<TopicLayout>,
    /// Request-reply with an application group: its lag sampler, stopped at the end.
    lag_sampler: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// The connection sets of members that a consumer-join fault added: their versions are the
    /// run's too, and they are closed at the end with the rest.
    late: Arc<Mutex<Vec<Arc<Cluster>>>>,
}

impl Native {
    /// Connect, learn the brokers and ensure the topic. Fails when the run cannot start.
    pub(crate) async fn new(spec: &E2eSpec, cluster: &ClusterConfig) -> Result<Native, BenchError> {
        let mut native = Native {
            spec: spec.clone(),
            cluster: cluster.clone(),
            layout: TopicLayout {
                name: spec.topic.clone(),
                topic_id: uuid::Uuid::nil(),
                partitions: Vec::new(),
            },
            clusters: Vec::new(),
            epoch: Instant::now(),
            run_tag: spec
                .run_tag
                .unwrap_or_else(|| SmallRng::seed_from_u64(spec.seed ^ now_ms() as u64).random()),
            created: false,
            reply_layout: None,
            lag_sampler: None,
            late: Arc::default(),
        };
        let admin = native
            .connect(cluster.client_id.clone(), &spec.topic)
            .await?;
        let (code, found) = admin
            .metadata(&spec.topic)
            .await
            .map_err(|e| BenchError::topic(&spec.topic, e))?;
        native.created = code != 0 || found.partitions.is_empty();
        native.layout = admin
            .ensure_topic(&spec.topic, spec.partitions, spec.replication_factor)
            .await
            .map_err(|e| BenchError::topic(&spec.topic, e))?;
        if let Some(reply) = &spec.reply {
            native.reply_layout = Some(
                admin
                    .ensure_topic(&reply.topic, spec.partitions, spec.replication_factor)
                    .await
                    .map_err(|e| BenchError::topic(&reply.topic, e))?,
            );
        }
        Ok(native)
    }

    /// A connection set of its own, as `client_id`, that knows the brokers and `topic`'s leaders.
    async fn connect(
        &mut self,
        client_id: String,
        topic: &str,
    ) -> Result<Arc<Cluster>, BenchError> {
        let c = connect_as(self.cluster_config(client_id), topic.to_string()).await?;
        self.clusters.push(c.clone());
        Ok(c)
    }

    /// What the producers are given of the run.
    fn shared(&self) -> NativeRun {
        NativeRun {
            spec: self.spec.clone(),
            layout: self.layout.clone(),
            epoch: self.epoch,
            run_tag: self.run_tag,
        }
    }

    /// What the consumer is given of the run: the layout of the topic it reads.
    fn shared_reading(&self) -> NativeRun {
        NativeRun {
            layout: self.reply_layout.clone().unwrap_or(self.layout.clone()),
            ..self.shared()
        }
    }

    /// Request-reply with `--app-group`: sample the group's lag on the request topic every
    /// timeline interval, from the load's start until [`Driver::finish`].
    fn start_lag_sampler(&mut self, live: &Arc<E2eLive>) {
        let Some(group) = self.spec.reply.as_ref().and_then(|r| r.app_group.clone()) else {
            return;
        };
        let Some(admin) = self.clusters.first().cloned() else {
            return;
        };
        *live.app_lag.lock().expect("lag lock") = Some(crate::e2e::AppLag {
            group: group.clone(),
            ..Default::default()
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(sample_lag(
            admin,
            self.layout.clone(),
            group,
            self.spec.timeline_interval,
            live.clone(),
            stop.clone(),
        ));
        self.lag_sampler = Some((stop, task));
    }

    /// The connection settings of a client of the run, as `client_id`.
    fn cluster_config(&self, client_id: String) -> ClusterConfig {
        let mut config = self.cluster.clone();
        config.client_id = client_id;
        config.max_in_flight = self.spec.producer.max_in_flight.max(1);
        config
    }
}

/// What the producers and the consumer of a native run share: its settings, the topic's layout, the
/// instant send times are counted from, and the tag that marks the run's records.
#[derive(Clone)]
struct NativeRun {
    spec: E2eSpec,
    layout: TopicLayout,
    epoch: Instant,
    run_tag: u32,
}

/// How many producers connect at once: enough that thousands start in seconds, few enough that the
/// broker is not flooded with connection attempts.
const CONNECTING_AT_ONCE: usize = 32;

/// Connect a connection set as `config.client_id` and learn `topic`'s leaders.
async fn connect_as(config: ClusterConfig, topic: String) -> Result<Arc<Cluster>, BenchError> {
    let bootstrap = config.bootstrap.join(",");
    let c = Cluster::connect(config)
        .await
        .map_err(|e| BenchError::connect(&bootstrap, e))?;
    c.metadata(&topic).await?;
    Ok(Arc::new(c))
}

impl Driver for Native {
    fn spec(&self) -> &E2eSpec {
        &self.spec
    }

    async fn start_consumer(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        ready: tokio::sync::oneshot::Sender<()>,
    ) -> Result<ConsumerTask, BenchError> {
        let topic = self.spec.read_topic().to_string();
        let mut clusters = Vec::new();
        let many = self.spec.group_changes();
        for k in 0..self.spec.consumers.max(1) {
            let id = member_name(&self.spec.consumer_id, k, many);
            clusters.push(self.connect(id, &topic).await?);
        }
        // Members that a consumer-join fault adds connect as they join.
        let joiner = Joiner {
            config: self.cluster_config(String::new()),
            topic,
            late: self.late.clone(),
        };
        Ok(tokio::spawn(consume(
            self.shared_reading(),
            clusters,
            joiner,
            live,
            stop,
            ready,
        )))
    }

    async fn start_producers(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        run_stop: &CancellationToken,
        producers: &mut JoinSet<()>,
    ) -> Result<(), BenchError> {
        // Every producer connects first, a bounded number at a time, and none sends before all are
        // connected: the load phase (and --duration) starts with the whole fleet, and a stop while
        // thousands connect ends the start-up now.
        let n = self.spec.producers;
        let mut connected: Vec<Option<Arc<Cluster>>> = vec![None; n];
        let mut connecting = JoinSet::new();
        let mut next = 0;
        let mut done = 0;
        while done < n {
            while next < n && connecting.len() < CONNECTING_AT_ONCE {
                let config =
                    self.cluster_config(format!("{}-producer-{next}", self.cluster.client_id));
                let topic = self.spec.topic.clone();
                let idx = next;
                connecting.spawn(async move { (idx, connect_as(config, topic).await) });
                next += 1;
            }
            let joined = tokio::select! {
                joined = connecting.join_next() => joined,
                _ = run_stop.cancelled() => return Ok(()),
            };
            let Some(joined) = joined else { break };
            let (idx, c) =
                joined.map_err(|e| BenchError::Run(format!("connecting producer failed: {e}")))?;
            let c = c?;
            self.clusters.push(c.clone());
            connected[idx] = Some(c);
            done += 1;
        }
        // A distributed segment: every agent's producers start at the one instant chosen ahead.
        if let Some(at) = self.spec.start_at_us
            && !crate::clock::sleep_until_wall(at, run_stop).await
        {
            return Ok(());
        }
        self.start_lag_sampler(&live);
        for (idx, c) in connected.into_iter().enumerate() {
            let Some(c) = c else { continue };
            producers.spawn(produce(
                self.shared(),
                self.spec.producer_base + idx as u32,
                c,
                live.clone(),
                stop.clone(),
            ));
        }
        Ok(())
    }

    async fn finish(self) -> (Negotiated, std::collections::BTreeMap<String, u64>) {
        if let Some((stop, task)) = self.lag_sampler {
            stop.cancel();
            let _ = task.await;
        }
        let mut negotiated = Negotiated::default();
        let mut anomalies = std::collections::BTreeMap::<String, u64>::new();
        let late = std::mem::take(&mut *self.late.lock().expect("late lock"));
        for c in self.clusters.iter().chain(&late) {
            negotiated.merge(&c.negotiated());
            for (k, v) in c.protocol_anomalies() {
                *anomalies.entry(k).or_default() += v;
            }
            c.close(Duration::from_secs(2)).await;
        }
        (negotiated, anomalies)
    }
}

/// What a producer keeps of each batch while the engine has it.
#[derive(Default)]
struct E2eBatch {
    partition: i32,
    /// With `--verify`: the stamp sequence of the batch's first record.
    first_stamp: u64,
    /// The producer's in-flight slot, held until the outcome.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A producer's side of the engine: outcomes into the live figures.
struct E2eDelivery {
    live: Arc<E2eLive>,
    stamp_id: Option<u64>,
    gather: bool,
}

impl kbench_client::Delivery<E2eBatch> for E2eDelivery {
    fn accepted(&self, _: &E2eBatch, records: u32) {
        add(&self.live.produced, u64::from(records));
    }

    fn done(&self, b: E2eBatch, records: u32, outcome: kbench_client::Outcome) {
        let records = u64::from(records);
        if outcome.first_sent.is_some() {
            add(&self.live.produce_requests, 1);
        }
        match outcome.result {
            Ok(_) => {
                add(&self.live.acked, records);
                if let Some(producer) = self.stamp_id
                    && let Some(v) = self.live.verify.lock().expect("verify lock").as_mut()
                {
                    v.written.ack(producer, b.partition, b.first_stamp, records);
                }
                if self.gather
                    && let Some(sent) = outcome.first_sent
                {
                    let took = (outcome.at - sent).as_micros() as u64;
                    let _ = self
                        .live
                        .producer_latency
                        .lock()
                        .expect("latency lock")
                        .record(took.max(1));
                }
            }
            Err(error) => {
                add(&self.live.failed, records);
                self.live.error(error.to_string(), records);
            }
        }
        self.live.turn.notify_waiters();
    }
}

/// The most lag samples a run keeps (a day of one-second windows; 14 minutes of 10 ms ones).
const MAX_LAG_SAMPLES: usize = 86_400;

/// Sample `group`'s lag on `layout`'s topic every `every` until `stop`: each partition's latest
/// offset less the group's committed one (OffsetFetch, no membership), into `live.app_lag`.
async fn sample_lag(
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    group: String,
    every: Duration,
    live: Arc<E2eLive>,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let partitions: Vec<i32> = layout.partitions.iter().map(|p| p.partition).collect();
    loop {
        let sample = async {
            let ends = cluster.latest_offsets(&layout, &partitions).await?;
            let committed = cluster.group_offsets(&group, &layout, &partitions).await?;
            Ok::<_, ClientError>(crate::e2e::reply::lag_of(&ends, &committed))
        };
        let taken = tokio::select! {
            _ = stop.cancelled() => return,
            taken = tokio::time::timeout(every.max(Duration::from_secs(1)), sample) => taken,
        };
        let at_s = started.elapsed().as_secs_f64();
        if let Some(lag) = live.app_lag.lock().expect("lag lock").as_mut() {
            match taken {
                Ok(Ok(_)) if lag.samples.len() >= MAX_LAG_SAMPLES => {
                    *lag.errors
                        .entry(format!("samples past {MAX_LAG_SAMPLES} not kept"))
                        .or_default() += 1;
                }
                Ok(Ok((value, without))) => lag.samples.push(crate::e2e::LagSample {
                    at_s,
                    lag: value,
                    partitions_without_commit: without,
                }),
                Ok(Err(e)) => *lag.errors.entry(e.to_string()).or_default() += 1,
                Err(_) => *lag.errors.entry("timed out".into()).or_default() += 1,
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// One producer: batches at random intervals until stopped, each to the next partition in turn,
/// through the producer engine (which follows the partitions' leaders); then its outstanding
/// batches get [`DURATION_GRACE`](crate::spec::DURATION_GRACE) to resolve.
async fn produce(
    run: NativeRun,
    idx: u32,
    cluster: Arc<Cluster>,
    live: Arc<E2eLive>,
    stop: CancellationToken,
) {
    let NativeRun {
        spec,
        layout,
        epoch,
        run_tag,
    } = run;
    let mut pacer = Pacer::new(&spec, idx, live.clone());
    let values = if spec.values.is_some() {
        Vec::new()
    } else {
        pacer.payload(spec.payload_size.max)
    };
    let partitions: Vec<i32> = layout.partitions.iter().map(|p| p.partition).collect();
    let mut next_partition = idx as usize;
    let mut seq = 0u64;
    let mut key = [0u8; RECORD_ID_LEN];
    key[0..4].copy_from_slice(&run_tag.to_be_bytes());
    key[4..8].copy_from_slice(&idx.to_be_bytes());
    // A distributed run's consumer is in another process, on another clock: the send time goes
    // as wall-clock µs, which the consumer corrects by the clocks' estimated offset.
    let (sent_key, wall) = if spec.run_tag.is_some() {
        (SENT_WALL_HEADER, true)
    } else {
        (SENT_HEADER, false)
    };
    // --verify: this producer's stamp id, and its next sequence number per partition.
    let stamp_id = live
        .verify
        .lock()
        .expect("verify lock")
        .as_ref()
        .map(|v| v.producer_id(idx));
    let mut stamp_seqs: HashMap<i32, u64> = HashMap::new();
    // Request-reply: each request's correlation id (its identity and send time, as text) in the
    // correlation header, and where to answer in Spring Kafka's reply-topic header.
    let reply = spec
        .reply
        .as_ref()
        .map(|r| (r.header.as_bytes().to_vec(), r.topic.as_bytes().to_vec()));
    let mut correlation = Vec::with_capacity(64);
    let options = kbench_client::ProducerOptions {
        // Each batch is closed as soon as its records are in.
        batch_size: usize::MAX,
        linger: Duration::ZERO,
        ..spec
            .producer
            .engine_options(cluster.config().request_timeout)
    };
    let mut producer = kbench_client::Producer::new(
        cluster,
        &layout,
        partitions.clone(),
        options,
        Arc::new(E2eDelivery {
            live: live.clone(),
            stamp_id,
            gather: spec.gather_latencies,
        }),
    );
    let until = kbench_client::Until {
        cancel: &stop,
        deadline: None,
    };
    while let Some((slot, count)) = pacer.next_batch(&stop).await {
        let pos = next_partition % partitions.len();
        let partition = partitions[pos];
        next_partition += 1;
        let first_stamp = stamp_seqs.get(&partition).copied().unwrap_or(0);
        let sent_us = if wall {
            crate::clock::wall_us()
        } else {
            epoch.elapsed().as_micros() as u64
        };
        let sent = sent_us.to_be_bytes();
        let header = [RecordHeader {
            key: sent_key,
            value: Some(&sent),
        }];
        let open = producer.open(0, Instant::now(), Some(pos));
        let timestamp = open.base_ms;
        for i in 0..count as u64 {
            let value = match &spec.values {
                Some(pool) => &pool[pacer.pick(pool.len())][..],
                None => &values[..pacer.size()],
            };
            key[8..16].copy_from_slice(&seq.to_be_bytes());
            let request = seq;
            seq += 1;
            if let Some((name, reply_topic)) = &reply {
                crate::e2e::reply::CorrelationId {
                    tag: run_tag,
                    producer: idx,
                    seq: request,
                    sent_us,
                }
                .write(&mut correlation);
                let headers = [
                    header[0],
                    RecordHeader {
                        key: name,
                        value: Some(&correlation),
                    },
                    RecordHeader {
                        key: crate::e2e::reply::REPLY_TOPIC_HEADER,
                        value: Some(reply_topic),
                    },
                ];
                open.builder
                    .append(timestamp, Some(&key), Some(value), &headers);
                continue;
            }
            match stamp_id {
                Some(producer) => {
                    let stamp = Stamp::encode(producer, first_stamp + i, value);
                    let headers = [
                        header[0],
                        RecordHeader {
                            key: VERIFY_HEADER,
                            value: Some(&stamp),
                        },
                    ];
                    open.builder
                        .append(timestamp, Some(&key), Some(value), &headers);
                }
                None => open
                    .builder
                    .append(timestamp, Some(&key), Some(value), &header),
            }
        }
        open.meta = E2eBatch {
            partition,
            first_stamp,
            _slot: Some(slot),
        };
        if stamp_id.is_some() {
            stamp_seqs.insert(partition, first_stamp + count as u64);
        }
        // The partition still has a batch waiting (its broker slow, or its leader moving): that
        // wait is the cluster's.
        let closing = Instant::now();
        let closed = producer.close(0, &until).await;
        pacer.waited_for_cluster(closing.elapsed());
        if !closed {
            break;
        }
    }
    // Stopped: what is open or outstanding gets a bounded grace, whatever the broker's state.
    let never = CancellationToken::new();
    let flushed = producer
        .flush(&kbench_client::Until {
            cancel: &never,
            deadline: Some(Instant::now() + crate::spec::DURATION_GRACE),
        })
        .await;
    let reason = if flushed {
        "stopped".to_string()
    } else {
        format!(
            "in flight when the producers stopped: still unanswered {} s later",
            crate::spec::DURATION_GRACE.as_secs()
        )
    };
    let events = producer.finish(&reason);
    live.cluster.lock().expect("cluster lock").merge(&events);
}

/// A member's name with `--consumers N`: the run's own for one member, `-k` after it for member
/// k of several, or of a group that faults change (as `consume --consumers` names its members'
/// `group.instance.id`s).
fn member_name(name: &str, k: usize, many: bool) -> String {
    if many {
        format!("{name}-{k}")
    } else {
        name.to_string()
    }
}

/// How a member that a `consumer-join` fault (or a restart) adds connects: the consumers'
/// connection settings (its client id `<consumer-id>-k`) and the topic it reads.
struct Joiner {
    config: ClusterConfig,
    topic: String,
    /// Where each late member's connection set is kept for the driver (see `Native::late`).
    late: Arc<Mutex<Vec<Arc<Cluster>>>>,
}

/// How far the group read each partition, and the holes its members passed over: where the
/// re-read after the drain looks, for every partition of the topic (a partition no member owned
/// at the end included).
#[derive(Debug, Default)]
struct Reach {
    positions: BTreeMap<i32, i64>,
    skipped: Vec<(i32, std::ops::Range<i64>)>,
}

impl Reach {
    /// A member got this far in these partitions.
    fn note(&mut self, positions: &BTreeMap<i32, i64>) {
        for (p, o) in positions {
            let at = self.positions.entry(*p).or_insert(*o);
            *at = (*at).max(*o);
        }
    }

    /// A member found this partition's log gone below where it had read (a broker that restarted
    /// empty) and reads it again from `to`: what was read in the old log says nothing of the new.
    fn reset(&mut self, partition: i32, to: i64) {
        self.positions.insert(partition, to);
        self.skipped.retain(|(p, _)| *p != partition);
    }

    /// A member passed over these holes.
    fn holes(&mut self, gaps: &mut BTreeMap<i32, Gaps>, partitions: impl IntoIterator<Item = i32>) {
        for p in partitions {
            if let Some(g) = gaps.remove(&p) {
                self.skipped
                    .extend(g.skipped.into_iter().map(move |r| (p, r)));
            }
        }
    }

    /// What to read again: every hole passed over, and in every partition of `partitions`
    /// everything from the furthest any member got (the run's start where none read it).
    fn ranges(
        &self,
        partitions: &[i32],
        run_start: &BTreeMap<i32, i64>,
    ) -> Vec<(i32, std::ops::Range<i64>)> {
        let mut out = self.skipped.clone();
        for p in partitions {
            let from = self
                .positions
                .get(p)
                .or_else(|| run_start.get(p))
                .copied()
                .unwrap_or(0);
            out.push((*p, from..i64::MAX));
        }
        out
    }
}

/// `ranges` moved into the partitions' logs as they are now. A range that starts before its log's
/// start starts there (what the log no longer holds is read by no one: lost). One that starts past
/// its log's end: in a log that is another (`new_log`: the topic has another id now, or no id tells
/// — a broker that restarted empty, unnoticed by the group) from the log's start; in the same log,
/// cut short (an unclean election), from its end. The group's records read already are not counted
/// again (the re-read skips what it has seen).
fn within_logs(
    ranges: Vec<(i32, std::ops::Range<i64>)>,
    starts: &BTreeMap<i32, i64>,
    ends: &BTreeMap<i32, i64>,
    new_log: bool,
) -> Vec<(i32, std::ops::Range<i64>)> {
    ranges
        .into_iter()
        .filter_map(|(p, r)| {
            let (Some(&start), Some(&end)) = (starts.get(&p), ends.get(&p)) else {
                return Some((p, r));
            };
            let from = if r.start > end {
                if new_log { start } else { end }
            } else {
                r.start.max(start)
            };
            (from < r.end).then_some((p, from..r.end))
        })
        .collect()
}

/// A member's task's outcome: its place, its id (none when a fault stopped it before it had
/// joined), its joins, the records it read and what it read at the end.
struct MemberOut {
    k: usize,
    member_id: Option<String>,
    joins: Vec<MemberJoin>,
    records: u64,
    duplicated: u64,
    /// The partitions it read when the run ended (none for a member a fault stopped).
    assignment: Vec<i32>,
}

/// Member `k`'s task: it joins, says so on `joined` once it has its first partitions (the
/// first members), reads until its stop, and ends as its stop says.
async fn run_member(
    shared: MemberShared,
    cluster: Arc<Cluster>,
    stop: MemberStop,
    joined: Option<tokio::sync::mpsc::Sender<()>>,
) -> Result<MemberOut, BenchError> {
    let k = shared.index;
    let Some(mut consumer) = NativeConsumer::start(shared, cluster, stop.token()).await? else {
        // Stopped (the run's end, or a fault) while the coordinator held its join: a member
        // that read nothing (and left, if it had been given an id).
        return Ok(MemberOut {
            k,
            member_id: None,
            joins: Vec::new(),
            records: 0,
            duplicated: 0,
            assignment: Vec::new(),
        });
    };
    let read = consumer.consume_until(&stop, joined).await;
    let end = if read.is_err() {
        // Out of the group at once: the others' next join does not wait for it.
        MemberEnd::Left
    } else if stop.by_fault() {
        stop.end()
    } else {
        MemberEnd::RunEnded
    };
    let out = consumer.end(end).await;
    read.map(|()| out)
}

/// The consumer group: learn the run's start offsets, join every member (at once, as a group
/// forms), signal ready once each has its partitions, then each member polls and counts until
/// stopped, while the group faults on the schedule (timed from the load's start, the moment ready
/// is said) add, stop, crash and restart members ([`Roster`]). One member failing stops the
/// others; its error is the consumer's. After the drain, the offsets no member read are read
/// again by a reader outside the group, in every partition: a record is lost only when that read
/// does not find it.
async fn consume(
    run: NativeRun,
    clusters: Vec<Arc<Cluster>>,
    joiner: Joiner,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<ConsumerDone, BenchError> {
    let Some(first) = clusters.first().cloned() else {
        return Err(BenchError::Run("no consumer to start".into()));
    };
    let first_members = clusters.len();
    let many = run.spec.group_changes();
    // The run's start, before any member joins: no member reads before it (a commit of an
    // earlier run in the group included), and a partition taken over is read from the group's
    // commit, or from here.
    let all: Vec<i32> = run.layout.partitions.iter().map(|p| p.partition).collect();
    let run_start = Arc::new(first.latest_offsets(&run.layout, &all).await?);
    let seen = Arc::new(Mutex::new(Seen::counting_into(live.clone())));
    let log = Arc::new(OwnerLog::from_load());
    let reach = Arc::new(Mutex::new(Reach::default()));
    let shared = |index: usize, slot: usize| MemberShared {
        run: run.clone(),
        live: live.clone(),
        seen: seen.clone(),
        run_start: run_start.clone(),
        log: log.clone(),
        reach: reach.clone(),
        index,
        slot,
    };
    let mut roster: Roster<MemberOut> = Roster::new(&stop);
    let (joined_tx, mut joined_rx) = tokio::sync::mpsc::channel::<()>(first_members.max(1));
    for cluster in clusters {
        let tx = joined_tx.clone();
        roster.spawn(None, None, Duration::ZERO, |index, slot, member_stop| {
            run_member(shared(index, slot), cluster, member_stop, Some(tx))
        });
    }
    drop(joined_tx);
    let mut joined = 0;
    while joined < first_members {
        tokio::select! {
            Some(()) = joined_rx.recv() => joined += 1,
            Some((_, ended)) = roster.next_ended() => {
                // A member ended before every member had joined: its error is the run's.
                roster.stop_all();
                while roster.next_ended().await.is_some() {}
                return Err(match ended {
                    Err(e) => e,
                    Ok(_) => BenchError::Run("a consumer stopped before it was ready".into()),
                });
            }
            else => return Err(BenchError::Run("the consumers ended before they were ready".into())),
        }
    }
    if run.spec.peers_consumer() {
        count_by_segment(&run, &live);
    }
    let _ = ready.send(());
    let load_start = Instant::now();
    log.set_zero(load_start);
    // Members a fault adds connect as they join, each as `<consumer-id>-k`.
    let next_k = std::sync::atomic::AtomicUsize::new(first_members);
    let connect = || {
        let mut config = joiner.config.clone();
        let k = next_k.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        config.client_id = member_name(&run.spec.consumer_id, k, true);
        let (topic, late) = (joiner.topic.clone(), joiner.late.clone());
        async move {
            let cluster = connect_as(config, topic).await?;
            late.lock().expect("late lock").push(cluster.clone());
            Ok(cluster)
        }
    };
    let spawn = |roster: &mut Roster<MemberOut>,
                 slot: Option<usize>,
                 replaces: Option<usize>,
                 cluster: Arc<Cluster>,
                 started: Duration| {
        roster.spawn(slot, replaces, started, |index, slot, member_stop| {
            run_member(shared(index, slot), cluster, member_stop, None)
        });
    };
    let mut faults = run.spec.member_faults.iter().peekable();
    let mut applied: Vec<GroupFault> = Vec::new();
    let mut outs: Vec<MemberOut> = Vec::new();
    let mut failed = None;
    loop {
        let due = faults.peek().map(|f| load_start + f.at);
        // Every member gone (left, crashed) and a join still to come: wait for it, unless the run
        // ends first.
        let waiting = due.is_some() && !stop.is_cancelled() && failed.is_none();
        if roster.is_empty() && !waiting {
            break;
        }
        tokio::select! {
            _ = stop.cancelled(), if roster.is_empty() => break,
            ended = roster.next_ended(), if !roster.is_empty() => match ended {
                None => continue,
                Some((_, Ok(out))) => outs.push(out),
                Some((_, Err(e))) => {
                    roster.stop_all();
                    failed.get_or_insert(e);
                }
            },
            _ = tokio::time::sleep_until(due.unwrap_or(load_start).into()), if waiting => {
                // The run ended meanwhile: this fault and the rest are not applied.
                if stop.is_cancelled() {
                    continue;
                }
                let Some(fault) = faults.next() else { continue };
                let at = log.elapsed();
                applied.push(roster.apply(fault, at, connect, spawn).await);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    for fault in faults {
        applied.push(Roster::<MemberOut>::not_applied(fault));
    }
    // What the members' sessions met and went on from, into the run's errors.
    for what in live.group.errors().into_keys() {
        live.error(what, 0);
    }
    // After the drain: what no member read is read again, in every partition.
    let spec = &run.spec;
    if stop.is_cancelled()
        && (spec.mode == E2eMode::ConsumerAndProducers || spec.peers_consumer())
        && missing(&live) > 0
    {
        tracing::info!(
            missing = missing(&live),
            "re-reading missing offsets after the drain"
        );
        live.set_phase("verifying");
        let ranges = reach.lock().expect("reach lock").ranges(&all, &run_start);
        let deadline = Instant::now() + spec.drain.max(Duration::from_secs(1));
        // The topic as the broker has it now (a broker that restarted empty gave it a new
        // id), and where the group read past a log's end, the log as it is now (within the
        // re-read's deadline: what could not be asked is read as the group left it).
        let now = tokio::time::timeout_at(deadline.into(), async {
            let layout = match first.metadata(&run.layout.name).await {
                Ok((_, now)) if !now.partitions.is_empty() => now,
                _ => run.layout.clone(),
            };
            let starts = first.earliest_offsets(&layout, &all).await;
            let ends = first.latest_offsets(&layout, &all).await;
            (layout, starts, ends)
        })
        .await;
        let (layout, ranges) = match now {
            Ok((layout, Ok(starts), Ok(ends))) => {
                let new_log = layout.topic_id.is_nil() || layout.topic_id != run.layout.topic_id;
                let ranges = within_logs(ranges, &starts, &ends, new_log);
                (layout, ranges)
            }
            Ok((layout, _, _)) => (layout, ranges),
            Err(_) => (run.layout.clone(), ranges),
        };
        let reading = Reread {
            cluster: &first,
            layout: &layout,
            max_bytes: fetch_bytes(spec),
            run_tag: run.run_tag,
            reply: spec.reply.as_ref().map(|r| &r.correlation),
            deadline,
        };
        reading
            .count_late(ranges, &mut BatchDecoder::new(), &seen, &live)
            .await;
    }
    outs.sort_by_key(|o| o.k);
    let end = log.elapsed();
    // The joins in the load's seconds (those before it negative).
    let before_load = log.zero_s();
    for o in outs.iter_mut() {
        for j in o.joins.iter_mut() {
            j.at_s -= before_load;
        }
    }
    let reports: Vec<MemberReport> = outs
        .iter()
        .map(|o| {
            let m = &roster.members[o.k];
            MemberReport {
                member: o.k,
                member_id: o.member_id.clone(),
                started_s: m.started.as_secs_f64(),
                ended_s: m.ended_at.unwrap_or(end).as_secs_f64(),
                ended: m.ended_by.unwrap_or(MemberEnd::RunEnded).as_str().into(),
                instance_id: run
                    .spec
                    .consumer
                    .group_instance_id
                    .as_ref()
                    .map(|id| member_name(id, m.slot, many)),
                replaces: m.replaces,
                records: o.records,
                duplicated: Some(o.duplicated),
                joins: o.joins.clone(),
                error: o
                    .member_id
                    .is_none()
                    .then(|| "stopped before it had joined".to_string()),
            }
        })
        .collect();
    let group = many.then(|| {
        let events = log.events();
        let (rebalances, unowned, at_end) =
            crate::group::rebalances(&reports, &events, &applied, end);
        GroupReport {
            consumers: run.spec.consumers as u32,
            members: reports,
            rebalances,
            faults: applied,
            partitions_unowned_ms: unowned,
            partitions_unowned_at_end_ms: at_end,
        }
    });
    // The members that read to the end: their partitions at the end.
    let ends: Vec<&MemberOut> = outs
        .iter()
        .filter(|o| roster.members[o.k].ended_by.is_none() && o.member_id.is_some())
        .collect();
    let mut assignment: Vec<i32> = ends
        .iter()
        .flat_map(|o| o.assignment.iter().copied())
        .collect();
    assignment.sort_unstable();
    assignment.dedup();
    let member_id = ends
        .first()
        .and_then(|o| o.member_id.clone())
        .unwrap_or_default();
    let members = if many {
        ends.iter()
            .map(|o| crate::result::E2eMemberEnd {
                member_id: o.member_id.clone().unwrap_or_default(),
                assigned_partitions: o.assignment.clone(),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(ConsumerDone {
        member_id,
        assignment,
        members,
        group,
    })
}

/// What every member of the run's consumer group shares, and its place among them.
struct MemberShared {
    run: NativeRun,
    live: Arc<E2eLive>,
    /// The records read by any member: one read again by another is a duplicate.
    seen: Arc<Mutex<Seen>>,
    /// The run's start offset in each partition (latest, before any member joined): a partition
    /// taken over is never read from before it.
    run_start: Arc<BTreeMap<i32, i64>>,
    /// When each member took or stopped reading which partition.
    log: Arc<OwnerLog>,
    /// How far the group read.
    reach: Arc<Mutex<Reach>>,
    index: usize,
    /// Its place (a restart's successor takes its predecessor's, and its `group.instance.id`).
    slot: usize,
}

/// A distributed run's consumer: count the records read by the producer agents' segments.
fn count_by_segment(run: &NativeRun, live: &E2eLive) {
    *live.segments.lock().expect("segments lock") = crate::e2e::Segments::new(
        run.spec
            .producer_segments
            .iter()
            .map(|s| s.first_producer..s.first_producer + s.producers)
            .collect(),
    );
}

/// One member of the run's consumer group: the client's session (which joins, heartbeats,
/// commits and rebalances on its own), the positions this member reached, and what it keeps from
/// answer to answer (the records seen, the holes held).
struct NativeConsumer {
    run: NativeRun,
    cluster: Arc<Cluster>,
    live: Arc<E2eLive>,
    group: GroupConsumer,
    /// The next offset to read in each partition the member reads now.
    positions: BTreeMap<i32, i64>,
    /// Partitions taken and not read from yet (their first record ends a takeover).
    fresh: std::collections::BTreeSet<i32>,
    decoder: BatchDecoder,
    seen: Arc<Mutex<Seen>>,
    gaps: BTreeMap<i32, Gaps>,
    /// How long a hole is held before it is passed over ([`gap_hold`]).
    gap_hold: Duration,
    /// `--commit sync`: the member commits after every answer that moved a position.
    commit_each_poll: bool,
    /// A distributed run's consumer: it counts its run's records, timed from their wall-clock send
    /// header, corrected per producer agent.
    peers: bool,
    /// Consumer only, without a run tag: every kbench record counts, timed from its CreateTime (ms).
    wall_clock: bool,
    /// With a schema registry (`deserializer`): the values' decoder, and the registry it asks.
    decoding: Option<(Decoding, RegistryReader)>,
    /// Its place in the group, the group's log and reach, its joins and the records it read.
    index: usize,
    log: Arc<OwnerLog>,
    reach: Arc<Mutex<Reach>>,
    joins: Vec<MemberJoin>,
    records: u64,
    duplicated: u64,
}

impl NativeConsumer {
    /// Join the group (the partitions come as it polls: from the group's commit, never before the
    /// run's start), and learn the run's value schema. `None` when stopped while joining.
    async fn start(
        shared: MemberShared,
        cluster: Arc<Cluster>,
        stop: &CancellationToken,
    ) -> Result<Option<NativeConsumer>, BenchError> {
        let MemberShared {
            run,
            live,
            seen,
            run_start,
            log,
            reach,
            index,
            slot,
        } = shared;
        let spec = &run.spec;
        let config = GroupConfig {
            group_id: spec.group_id.clone(),
            topic: spec.read_topic().to_string(),
            session_timeout: spec.consumer.session_timeout,
            rebalance_timeout: spec.rebalance_timeout(),
            assignors: spec.consumer.assignors.clone(),
            protocol: spec.consumer.group_protocol,
            remote_assignor: spec.consumer.remote_assignor.clone(),
            instance_id: spec
                .consumer
                .group_instance_id
                .as_ref()
                .map(|id| member_name(id, slot, spec.group_changes())),
            heartbeat_interval: spec.consumer.heartbeat_interval,
        };
        let options = kbench_client::ConsumerOptions {
            partition_max_bytes: fetch_bytes(spec),
            max_bytes: fetch_bytes(spec),
            max_wait: spec.consumer.fetch_max_wait,
            read_committed: false,
            // A log that lost the offsets read (a broker that restarted empty) is read again
            // from its start.
            reset: kbench_client::OffsetReset::Earliest,
            retry_backoff: kbench_client::config::RETRY_BACKOFF,
        };
        let settings = SessionSettings {
            commits: match spec.commit {
                CommitMode::Sync => Commits::Owner,
                CommitMode::Interval(every) => Commits::Every(every),
            },
            start: StartPolicy {
                from: StartFrom::Reset(kbench_client::OffsetReset::Latest),
                floor: Some(run_start),
            },
            counters: live.group.clone(),
        };
        let Some(group) = GroupConsumer::start(
            cluster.clone(),
            &run.layout,
            config,
            options,
            settings,
            stop,
        )
        .await?
        else {
            return Ok(None);
        };
        let peers = spec.peers_consumer();
        let wall_clock = spec.mode == E2eMode::Consumer && !peers;
        let decoding = match spec.deserializer.get("schema.registry.url") {
            Some(_) => {
                let reader = RegistryReader::new(&spec.deserializer)
                    .map_err(|e| BenchError::Run(e.to_string()))?;
                let mut decoding = Decoding::new(reader.url());
                // The run's own schema is asked for before the load, so that no answer waits
                // on the registry.
                if let Some(schema) = &spec.value_schema {
                    let id = schema.schema_id;
                    decoding.learn(id, reader.schema(id).await);
                }
                Some((decoding, reader))
            }
            None => None,
        };
        Ok(Some(NativeConsumer {
            gap_hold: gap_hold(spec.consumer.fetch_max_wait),
            commit_each_poll: spec.commit == CommitMode::Sync,
            run,
            cluster,
            live,
            group,
            positions: BTreeMap::new(),
            fresh: Default::default(),
            decoder: BatchDecoder::new(),
            seen,
            gaps: BTreeMap::new(),
            peers,
            wall_clock,
            decoding,
            index,
            log,
            reach,
            joins: Vec::new(),
            records: 0,
            duplicated: 0,
        }))
    }

    /// Poll, count and mark until stopped; the first partitions said on `joined`.
    async fn consume_until(
        &mut self,
        stop: &MemberStop,
        mut joined: Option<tokio::sync::mpsc::Sender<()>>,
    ) -> Result<(), BenchError> {
        let token = stop.token().clone();
        loop {
            let polled = tokio::select! {
                _ = token.cancelled() => break,
                p = self.group.poll() => p,
            };
            match polled {
                None => break,
                Some(Polled::Fetched(fetched)) => {
                    add(&self.live.fetches, 1);
                    if self.answer_is_readable(&fetched).await {
                        let answer = self.read_answer(&fetched);
                        self.take_in(answer, &fetched);
                        self.learn_schemas().await;
                    }
                    self.mark();
                    if self.commit_each_poll
                        && let Err(e) = self.group.commit().await
                    {
                        self.live.error(format!("commit: {e}"), 0);
                    }
                }
                Some(Polled::Assigned(assigned)) => {
                    self.assigned(assigned);
                    stop.joined();
                    if let Some(tx) = joined.take() {
                        let _ = tx.send(()).await;
                    }
                }
                Some(Polled::Revoked(revoked)) => self.revoked(revoked),
                Some(Polled::Failed(e)) => {
                    return Err(BenchError::Run(format!("the consumer's group member: {e}")));
                }
            }
        }
        Ok(())
    }

    /// Where this member got to in each partition: what its session commits.
    fn mark(&self) {
        for (p, o) in &self.positions {
            self.group.mark(*p, *o);
        }
    }

    /// Partitions given: each read from where the session positioned it (the group's commit,
    /// never before the run's start), a handover for the verifier (what another member read may
    /// be read again: duplicates).
    fn assigned(&mut self, assigned: kbench_client::Assigned) {
        if self.run.spec.group_changes()
            && let Some(v) = self.live.verify.lock().expect("verify lock").as_mut()
        {
            for p in assigned.added.keys() {
                v.verifier.handover(*p);
            }
        }
        for (p, o) in &assigned.added {
            self.positions.insert(*p, *o);
            self.fresh.insert(*p);
        }
        self.log
            .note(self.index, assigned.added.keys().copied(), Ownership::Taken);
        self.joins
            .push(MemberJoin::of(&assigned.join, &assigned.owned, &self.log));
    }

    /// Partitions given up: no longer read (the session committed where this member got to,
    /// unless they were lost); how far it got, and the holes it passed over, kept for the
    /// re-read.
    fn revoked(&mut self, revoked: kbench_client::Revoked) {
        let given_up: BTreeMap<i32, i64> = revoked
            .positions
            .keys()
            .filter_map(|p| self.positions.remove(p).map(|o| (*p, o)))
            .collect();
        for p in given_up.keys() {
            self.fresh.remove(p);
        }
        let mut reach = self.reach.lock().expect("reach lock");
        reach.note(&given_up);
        reach.holes(&mut self.gaps, given_up.keys().copied());
        drop(reach);
        self.log
            .note(self.index, given_up.keys().copied(), Ownership::Released);
    }

    /// The member ends as `end` says (the session commits and leaves, or crashes); what it read
    /// and how far, into the run's.
    async fn end(mut self, end: MemberEnd) -> MemberOut {
        if end.by_fault() {
            // A leave or a crash: its partitions have no reader from now.
            self.log.note(
                self.index,
                self.positions.keys().copied(),
                Ownership::Released,
            );
        }
        {
            let mut reach = self.reach.lock().expect("reach lock");
            reach.note(&self.positions);
            let all: Vec<i32> = self.gaps.keys().copied().collect();
            reach.holes(&mut self.gaps, all);
        }
        self.learn_schemas().await;
        if let Some((decoding, _)) = self.decoding.take() {
            // Every member's counts, added up.
            let mut kept = self.live.value_decoding.lock().expect("decoding lock");
            match kept.as_mut() {
                Some(report) => report.merge(&decoding.report()),
                None => *kept = Some(decoding.report()),
            }
        }
        let member_id = Some(self.group.member_id());
        let events = self.group.close(end).await;
        self.live
            .consumer_cluster
            .lock()
            .expect("cluster lock")
            .merge(&events);
        MemberOut {
            k: self.index,
            member_id,
            joins: self.joins,
            records: self.records,
            duplicated: self.duplicated,
            assignment: if end == MemberEnd::RunEnded {
                self.positions.keys().copied().collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Count an answer's errors and offset resets. A log that ends below what was read from it was
    /// lost (a broker that restarted empty, an unclean election): its partitions are read again
    /// from their start, as auto.offset.reset=earliest would, and the answer is not read (false).
    async fn answer_is_readable(&mut self, fetched: &kbench_client::Fetched) -> bool {
        for e in &fetched.errors {
            self.live.error(format!("fetch: {e}"), 0);
        }
        for (p, from, to) in &fetched.resets {
            self.live.error(
                format!(
                    "fetch: {}-{p}: offset {from} out of range (the broker lost its log): read again from offset {to}",
                    self.run.layout.name
                ),
                0,
            );
            self.positions.insert(*p, *to);
            self.reach.lock().expect("reach lock").reset(*p, *to);
        }
        let behind: Vec<i32> = fetched
            .parts
            .iter()
            .filter(|part| {
                part.data.high_watermark >= 0
                    && self
                        .positions
                        .get(&part.partition)
                        .is_some_and(|pos| part.data.high_watermark < *pos)
            })
            .map(|part| part.partition)
            .collect();
        if behind.is_empty() {
            return true;
        }
        self.run.layout = self.group.layout();
        reset_to_start(
            &self.cluster,
            &self.run.layout,
            &behind,
            &mut self.positions,
            &self.live,
        )
        .await;
        let mut reach = self.reach.lock().expect("reach lock");
        for p in &behind {
            self.group.seek(*p, self.positions[p]);
            reach.reset(*p, self.positions[p]);
        }
        false
    }

    /// Decode an answer's records, up to the first hole held in each partition, and count them;
    /// move the positions past what was read.
    fn read_answer(&mut self, fetched: &kbench_client::Fetched) -> Answer {
        let mut answer = Answer::received(fetched, self.run.epoch);
        let counting = Counting {
            spec: &self.run.spec,
            run_tag: self.run.run_tag,
            live: &self.live,
            peers: self.peers,
            wall_clock: self.wall_clock,
            reply: self.run.spec.reply.as_ref().map(|r| &r.correlation),
        };
        // Held for the response, never across an await (the verifier's first, then the tracker's,
        // as every member takes them).
        let mut verify = self.live.verify.lock().expect("verify lock");
        let mut seen = self.seen.lock().expect("seen lock");
        for part in &fetched.parts {
            let (partition, data) = (&part.partition, &part.data);
            let Some(position) = self.positions.get(partition).copied() else {
                continue;
            };
            let gaps = self.gaps.entry(*partition).or_default();
            let limit = readable_until(&data.records, position, gaps, self.gap_hold, &self.live);
            let mut next = position;
            let result = self.decoder.decode_all(&data.records, |header, record| {
                if header.base_offset >= limit {
                    return; // at or past a hole still held: asked for again next time
                }
                next = next.max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                if record.offset < position || header.is_control() {
                    return;
                }
                answer.got += 1;
                if let Some((d, _)) = self.decoding.as_mut() {
                    d.value(record.value);
                }
                if let Some(v) = verify.as_mut() {
                    v.verifier.check(
                        *partition,
                        record.offset,
                        Stamp::of(&record),
                        record.value.unwrap_or_default(),
                    );
                }
                counting.record(&record, &mut seen, &mut answer);
            });
            if let Err(e) = result {
                self.live.error(
                    format!("decode {}-{partition}: {e}", self.run.layout.name),
                    0,
                );
            }
            if next > position {
                self.positions.insert(*partition, next);
                // The partition's first records since this member took it: its takeover's end.
                if self.fresh.remove(partition) {
                    self.log
                        .note(self.index, [*partition], Ownership::FirstRead);
                }
            }
            // The engine fetches on from the end of these batches; a position held at a hole
            // (or answered from elsewhere) is asked for from where it is.
            let assumed = kbench_wire::records::batches_end(&data.records, part.from)
                .unwrap_or(part.from)
                .max(part.from);
            let at = self.positions.get(partition).copied().unwrap_or(next);
            if at != assumed {
                answer.seeks.push((*partition, at));
            }
        }
        answer
    }

    /// Ask the registry for the schemas the values just read name and the decoder does not know
    /// yet (each once), and decode the values held for them.
    async fn learn_schemas(&mut self) {
        let Some((decoding, reader)) = self.decoding.as_mut() else {
            return;
        };
        for id in decoding.missing() {
            let schema = reader.schema(id).await;
            decoding.learn(id, schema);
        }
    }

    /// Take in what an answer added: the engine's seeks, the counts by segment, the whole trips and
    /// (latencies gathered) the fetch's duration and the time the answer took to process.
    fn take_in(&mut self, answer: Answer, fetched: &kbench_client::Fetched) {
        for (p, at) in answer.seeks {
            self.group.seek(p, at);
        }
        let live = &self.live;
        if !answer.firsts.is_empty() {
            let mut segments = live.segments.lock().expect("segments lock");
            for p in answer.firsts {
                segments.count(p);
            }
        }
        if !answer.trips.is_empty() {
            if let Some(kept) = live.trips.lock().expect("trips lock").as_mut() {
                kept.extend_from_slice(&answer.trips);
            }
            let mut h = live.whole_trip.lock().expect("latency lock");
            for t in answer.trips {
                let _ = h.record(t.max(1));
            }
        }
        self.records += answer.consumed;
        self.duplicated += answer.duplicated;
        if answer.got > 0 {
            live.turn.notify_waiters();
        }
        if self.run.spec.gather_latencies && answer.got > 0 {
            let fetch_us = fetched.answered.duration_since(fetched.sent).as_micros() as u64;
            let _ = live
                .fetch_duration
                .lock()
                .expect("latency lock")
                .record(fetch_us.max(1));
            let _ = live
                .consumer_processing
                .lock()
                .expect("latency lock")
                .record((answer.in_hand.elapsed().as_micros() as u64).max(1));
        }
    }
}

/// One Fetch answer as the consumer reads it: when it was in hand, by each clock a send time may
/// be on, and what its records add.
struct Answer {
    in_hand: Instant,
    /// µs since the run's epoch, on this process's monotonic clock.
    received_us: u64,
    received_wall_ms: i64,
    received_wall_us: u64,
    /// Records read (at or past their partition's position).
    got: u64,
    /// Of them, this run's (as `records_consumed` counts them), and those read before.
    consumed: u64,
    duplicated: u64,
    /// The producer of each record counted, for the counts by segment (a distributed run).
    firsts: Vec<u32>,
    /// Whole trips, µs.
    trips: Vec<u64>,
    /// Partitions whose position is not where the engine fetches on from.
    seeks: Vec<(i32, i64)>,
}

impl Answer {
    /// Receipt time: when the response was in hand, one reading for the whole response (the fetch
    /// loop's, before the answer waited its turn here).
    fn received(fetched: &kbench_client::Fetched, epoch: Instant) -> Answer {
        let in_hand = Instant::now();
        let queued = in_hand.saturating_duration_since(fetched.answered);
        Answer {
            in_hand,
            received_us: fetched.answered.duration_since(epoch).as_micros() as u64,
            received_wall_ms: now_ms() - queued.as_millis() as i64,
            received_wall_us: crate::clock::wall_us().saturating_sub(queued.as_micros() as u64),
            got: 0,
            consumed: 0,
            duplicated: 0,
            firsts: Vec::new(),
            trips: Vec::new(),
            seeks: Vec::new(),
        }
    }
}

/// Which records the consumer counts, and how it times them.
struct Counting<'a> {
    spec: &'a E2eSpec,
    run_tag: u32,
    live: &'a E2eLive,
    /// See [`NativeConsumer::peers`].
    peers: bool,
    /// See [`NativeConsumer::wall_clock`].
    wall_clock: bool,
    /// Request-reply: where a reply carries its request's id.
    reply: Option<&'a Correlation>,
}

impl Counting<'_> {
    /// Count a record read: this run's (consumer only: any kbench record) once, again as a
    /// duplicate, anything else as foreign; with latencies gathered, its whole trip into `answer`.
    fn record(&self, record: &RecordView<'_>, seen: &mut Seen, answer: &mut Answer) {
        let live = self.live;
        match identify(record, self.reply) {
            Some((tag, producer, seq, sent)) if tag == self.run_tag || self.wall_clock => {
                add(&live.consumed, 1);
                answer.consumed += 1;
                if seen.mark(tag, producer, seq) {
                    add(&live.duplicates, 1);
                    answer.duplicated += 1;
                    return;
                }
                if self.peers {
                    answer.firsts.push(producer);
                }
                if !self.spec.gather_latencies {
                    return;
                }
                let trip = match sent {
                    // A reply: request sent → reply in hand, on this process's clock.
                    Some(sent) => Some(answer.received_us.saturating_sub(sent)),
                    None => self.whole_trip(record, producer, answer),
                };
                if let Some(trip) = trip {
                    answer.trips.push(trip);
                }
            }
            _ => add(&live.foreign, 1),
        }
    }

    /// A record's whole trip, µs, from its send time on the clock it was stamped on (`None` when
    /// its send-time header is missing).
    fn whole_trip(&self, record: &RecordView<'_>, producer: u32, answer: &Answer) -> Option<u64> {
        if self.peers {
            let sent = sent_header(record, SENT_WALL_HEADER)?;
            let trip =
                answer.received_wall_us as i64 - sent as i64 + clock_ahead(self.spec, producer);
            Some(trip.max(1) as u64)
        } else if self.wall_clock {
            let trip_ms = answer.received_wall_ms.saturating_sub(record.timestamp);
            Some((trip_ms.max(0) as u64) * 1000)
        } else {
            let sent = sent_header(record, SENT_HEADER)?;
            Some(answer.received_us.saturating_sub(sent))
        }
    }
}

/// A record's id (run tag, producer, sequence) and, for a reply, its request's send time: from the
/// key, or with `reply` from the correlation id the reply carries.
fn identify(
    record: &RecordView<'_>,
    reply: Option<&Correlation>,
) -> Option<(u32, u32, u64, Option<u64>)> {
    match reply {
        Some(c) => {
            correlation_of(record, c).map(|id| (id.tag, id.producer, id.seq, Some(id.sent_us)))
        }
        None => record_id(record.key).map(|(t, p, s)| (t, p, s, None)),
    }
}

/// A send-time header's value (8 bytes, big-endian).
fn sent_header(record: &RecordView<'_>, key: &[u8]) -> Option<u64> {
    record
        .headers()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v)
        .and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_be_bytes)
}

/// How far `producer`'s agent's clock runs ahead of this one, µs, as estimated for a distributed
/// run (0 when unknown).
fn clock_ahead(spec: &E2eSpec, producer: u32) -> i64 {
    spec.producer_segments
        .iter()
        .find(|s| (s.first_producer..s.first_producer + s.producers).contains(&producer))
        .map_or(0, |s| s.clock_ahead_us)
}

/// How long the consumer holds its position at a hole in a partition's offsets before it passes
/// over it: long enough for a broker that exposes later records before earlier ones to store the
/// earlier ones (Tansu takes well under a millisecond), and at least two fetch waits.
pub(crate) fn gap_hold(consume_wait: Duration) -> Duration {
    (consume_wait * 2).max(Duration::from_millis(500))
}

/// One partition's holes: the one being held (since when), and the ones passed over.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    held: Option<(std::ops::Range<i64>, Instant)>,
    pub(crate) skipped: Vec<std::ops::Range<i64>>,
}

/// How far into a partition's fetched batches the consumer may read, from `position`: up to the
/// first hole it is still holding at, or everything.
///
/// A Fetch that returns a batch beyond the position while the offsets in between are missing means
/// the broker exposed later records before earlier ones were readable (the upstream Tansu broker
/// raises its high watermark before it stores the batch, so a Fetch racing a Produce sees this).
/// Moving the position past the hole would skip those records for good, and report them lost. So
/// the consumer reads only up to the hole and asks again; a hole still open after `hold` (offsets
/// removed by compaction, say) is passed over, counted, and read again after the drain.
pub(crate) fn readable_until(
    records: &[u8],
    position: i64,
    gaps: &mut Gaps,
    hold: Duration,
    live: &E2eLive,
) -> i64 {
    if records.is_empty() {
        return i64::MAX;
    }
    let mut from = position;
    loop {
        let Some(gap) = kbench_wire::first_gap(records, from) else {
            gaps.held = None;
            return i64::MAX;
        };
        match &gaps.held {
            Some((held, since)) if held.start == gap.start => {
                if since.elapsed() < hold {
                    return gap.start;
                }
                add(&live.gaps_skipped, 1);
                tracing::debug!(?gap, "fetch gap still open after the hold: passed over");
                gaps.held = None;
                from = gap.end;
                gaps.skipped.push(gap);
            }
            _ => {
                add(&live.gaps_held, 1);
                tracing::debug!(?gap, "fetch returned records beyond a gap: position held");
                let start = gap.start;
                gaps.held = Some((gap, Instant::now()));
                return start;
            }
        }
    }
}

/// Reading missing offsets again after the drain, to tell records that were not consumed in time
/// from records that are not on the broker.
struct Reread<'a> {
    cluster: &'a Cluster,
    layout: &'a TopicLayout,
    max_bytes: i32,
    run_tag: u32,
    /// Request-reply: where a reply carries its request's id.
    reply: Option<&'a Correlation>,
    deadline: Instant,
}

impl Reread<'_> {
    /// Read each `(partition, offsets)` range (an open end means: to the high watermark) and count
    /// this run's records found there that were never consumed into `live.late`. Bounded by the
    /// deadline; what it could not read stays lost, and an error says so.
    async fn count_late(
        &self,
        ranges: Vec<(i32, std::ops::Range<i64>)>,
        decoder: &mut BatchDecoder,
        seen: &Mutex<Seen>,
        live: &E2eLive,
    ) {
        for (partition, range) in ranges {
            let mut offset = range.start;
            let mut end = range.end;
            while offset < end {
                if Instant::now() >= self.deadline {
                    let why = format!(
                        "re-reading {}-{partition} from offset {offset}: out of time",
                        self.layout.name
                    );
                    live.error(why.clone(), 0);
                    *live.reread_failed.lock().expect("reread lock") = Some(why);
                    return;
                }
                let fetched = match self
                    .cluster
                    .fetch(self.layout, partition, offset, self.max_bytes, 100)
                    .await
                {
                    Ok(f) => f,
                    Err(e) => {
                        let why = format!("re-reading {}-{partition}: {e}", self.layout.name);
                        live.error(why.clone(), 0);
                        *live.reread_failed.lock().expect("reread lock") = Some(why);
                        return;
                    }
                };
                if fetched.high_watermark >= 0 {
                    end = end.min(fetched.high_watermark);
                }
                let from = offset;
                let mut late_producers: Vec<u32> = Vec::new();
                let mut late_here = 0u64;
                let decoded = {
                    let mut verify = live.verify.lock().expect("verify lock");
                    let mut seen = seen.lock().expect("seen lock");
                    decoder.decode_all(&fetched.records, |header, record| {
                        offset = offset
                            .max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                        if record.offset < from || record.offset >= end || header.is_control() {
                            return;
                        }
                        // This run's records the group read already (a range read again from a
                        // log's start holds them) are neither checked nor counted again.
                        if let Some((tag, producer, seq, _)) = identify(&record, self.reply)
                            && tag == self.run_tag
                        {
                            if seen.mark(tag, producer, seq) {
                                return;
                            }
                            add(&live.late, 1);
                            late_producers.push(producer);
                            late_here += 1;
                        }
                        if let Some(v) = verify.as_mut() {
                            v.verifier.check(
                                partition,
                                record.offset,
                                Stamp::of(&record),
                                record.value.unwrap_or_default(),
                            );
                        }
                    })
                };
                if late_here > 0 {
                    *live
                        .late_by_partition
                        .lock()
                        .expect("late lock")
                        .entry(partition)
                        .or_default() += late_here;
                }
                if !late_producers.is_empty() {
                    let mut segments = live.segments.lock().expect("segments lock");
                    for p in late_producers.drain(..) {
                        segments.count(p);
                    }
                }
                if let Err(e) = decoded {
                    let why = format!("re-reading {}-{partition}: {e}", self.layout.name);
                    live.error(why.clone(), 0);
                    *live.reread_failed.lock().expect("reread lock") = Some(why);
                    return;
                }
            }
        }
    }
}

/// Positions of `partitions` that lie outside their logs now, moved to the log's start; noted in
/// the errors (with no records: what was acknowledged and not read stays lost).
async fn reset_to_start(
    cluster: &Cluster,
    layout: &TopicLayout,
    partitions: &[i32],
    positions: &mut BTreeMap<i32, i64>,
    live: &E2eLive,
) {
    let ends = match cluster.latest_offsets(layout, partitions).await {
        Ok(ends) => ends,
        Err(e) => return live.error(format!("fetch: log ends of {}: {e}", layout.name), 0),
    };
    let starts = match cluster.earliest_offsets(layout, partitions).await {
        Ok(starts) => starts,
        Err(e) => return live.error(format!("fetch: log starts of {}: {e}", layout.name), 0),
    };
    for p in partitions {
        let (Some(pos), Some(end), Some(start)) =
            (positions.get_mut(p), ends.get(p), starts.get(p))
        else {
            continue;
        };
        if *pos > *end || *pos < *start {
            live.error(
                format!(
                    "fetch: {}-{p} ends at offset {end}, below the position {pos} (the broker lost its log): read again from offset {start}",
                    layout.name
                ),
                0,
            );
            *pos = *start;
        }
    }
}

/// A Fetch's bound, and each partition's in it: the seed's `consumeMaxBytesMs`.
fn fetch_bytes(spec: &E2eSpec) -> i32 {
    spec.consumer.fetch_max_bytes.min(i32::MAX as usize) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::live::get;
    use kbench_wire::Compression;
    use kbench_wire::batch::RecordBatchBuilder;

    /// Batches of `n` records at each base offset, one after the other, as a Fetch carries them.
    fn batches_at(offsets: &[(i64, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = RecordBatchBuilder::new(Compression::None);
        for &(base, n) in offsets {
            b.start_now();
            for _ in 0..n {
                b.append(now_ms(), None, Some(b"v"), &[]);
            }
            let mut batch = b.finish().unwrap().to_vec();
            batch[0..8].copy_from_slice(&base.to_be_bytes());
            out.extend_from_slice(&batch);
        }
        out
    }

    #[test]
    fn the_position_is_held_at_a_hole_until_it_fills() {
        let live = E2eLive::default();
        let mut gaps = Gaps::default();
        let hold = Duration::from_secs(3600);
        // 10..14 read, 14..18 not there yet, 18..22 already returned: read up to 14 only.
        let holed = batches_at(&[(10, 4), (18, 4)]);
        assert_eq!(readable_until(&holed, 10, &mut gaps, hold, &live), 14);
        assert_eq!(get(&live.gaps_held), 1);
        // Asked again from 14, the same hole: still held, counted once.
        let later = batches_at(&[(18, 4)]);
        assert_eq!(readable_until(&later, 14, &mut gaps, hold, &live), 14);
        assert_eq!(get(&live.gaps_held), 1);
        // An empty answer changes nothing.
        assert_eq!(readable_until(&[], 14, &mut gaps, hold, &live), i64::MAX);
        assert!(gaps.held.is_some());
        // Filled: everything is readable, and nothing was passed over.
        let filled = batches_at(&[(14, 4), (18, 4)]);
        assert_eq!(
            readable_until(&filled, 14, &mut gaps, hold, &live),
            i64::MAX
        );
        assert!(gaps.held.is_none() && gaps.skipped.is_empty());
        assert_eq!(get(&live.gaps_skipped), 0);
    }

    #[test]
    fn a_hole_that_outlives_the_hold_is_passed_over_and_remembered() {
        let live = E2eLive::default();
        let mut gaps = Gaps::default();
        let holed = batches_at(&[(18, 4), (30, 2)]);
        // Held first; with a zero hold, the next answer passes it over, then holds at the next one.
        assert_eq!(
            readable_until(&holed, 14, &mut gaps, Duration::ZERO, &live),
            14
        );
        assert_eq!(
            readable_until(&holed, 14, &mut gaps, Duration::ZERO, &live),
            22
        );
        assert_eq!(gaps.skipped, vec![14..18]);
        assert_eq!((get(&live.gaps_held), get(&live.gaps_skipped)), (2, 1));
        // The position moved to 22; asked again, the second hole is passed over too.
        assert_eq!(
            readable_until(&holed, 22, &mut gaps, Duration::ZERO, &live),
            i64::MAX
        );
        assert_eq!(gaps.skipped, vec![14..18, 22..30]);
    }

    #[test]
    fn a_range_past_a_new_log_is_read_from_its_start_and_past_a_cut_log_from_its_end() {
        let starts = BTreeMap::from([(0, 0), (1, 5), (2, 0)]);
        let ends = BTreeMap::from([(0, 40), (1, 50), (2, 10)]);
        let ranges = || {
            vec![
                (0, 30..i64::MAX),
                (1, 2..i64::MAX),
                (2, 300..i64::MAX),
                (2, 100..120),
            ]
        };
        assert_eq!(
            within_logs(ranges(), &starts, &ends, true),
            vec![
                (0, 30..i64::MAX),
                (1, 5..i64::MAX),
                (2, 0..i64::MAX),
                (2, 0..120)
            ]
        );
        assert_eq!(
            within_logs(ranges(), &starts, &ends, false),
            vec![
                (0, 30..i64::MAX),
                (1, 5..i64::MAX),
                (2, 10..i64::MAX),
                (2, 10..120)
            ]
        );
    }

    #[test]
    fn a_log_found_gone_resets_the_group_s_reach() {
        let mut reach = Reach::default();
        reach.note(&BTreeMap::from([(0, 146), (1, 50)]));
        reach.skipped.push((0, 100..110));
        reach.reset(0, 0);
        reach.note(&BTreeMap::from([(0, 28)]));
        assert_eq!(
            reach.ranges(&[0, 1], &BTreeMap::new()),
            vec![(0, 28..i64::MAX), (1, 50..i64::MAX)]
        );
    }

    #[test]
    fn the_group_s_reach_is_read_again_in_every_partition() {
        let mut reach = Reach::default();
        reach.note(&BTreeMap::from([(0, 120), (1, 90)]));
        // Another member read partition 0 less far (after a handover): the furthest counts.
        reach.note(&BTreeMap::from([(0, 110)]));
        let mut gaps = BTreeMap::from([(
            1,
            Gaps {
                held: None,
                skipped: vec![40..45, 50..52],
            },
        )]);
        reach.holes(&mut gaps, [1]);
        assert!(gaps.is_empty());
        let run_start = BTreeMap::from([(0, 100), (1, 30), (2, 70)]);
        let ranges = reach.ranges(&[0, 1, 2], &run_start);
        // Partition 2 no member read: from the run's start.
        assert_eq!(
            ranges,
            vec![
                (1, 40..45),
                (1, 50..52),
                (0, 120..i64::MAX),
                (1, 90..i64::MAX),
                (2, 70..i64::MAX)
            ]
        );
        assert_eq!(member_name("c", 0, false), "c");
        assert_eq!(member_name("c", 2, true), "c-2");
    }

    #[test]
    fn the_gap_hold_covers_two_fetch_waits() {
        assert_eq!(
            gap_hold(Duration::from_millis(10)),
            Duration::from_millis(500)
        );
        assert_eq!(gap_hold(Duration::from_secs(1)), Duration::from_secs(2));
    }
}
