//! The native e2e driver: producers and the group consumer speak the Kafka protocol, each on its own
//! connections. Every record carries its id in its key (run tag, producer, sequence: 16 bytes) and
//! its send time in a header (`kbench-sent-us`: µs on this process's monotonic clock since the run's
//! epoch). The consumer joins its group and learns its start offsets (latest) *before* any producer
//! starts, so no record of the run can fall before its position; it never moves a position past
//! records it has not read (see [`readable_until`]), heartbeats, commits by the one commit rule, and
//! leaves the group at the end.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbench_client::group::{GroupConfig, GroupMember, Membership, send_commit};
use kbench_client::{ClientError, Cluster, ClusterConfig, TopicLayout};
use kbench_wire::batch::{RecordHeader, now_ms};
use kbench_wire::{BatchDecoder, Negotiated};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::e2e::live::{E2eLive, add};
use crate::e2e::phases::{
    CommitDue, Committed, Committer, ConsumerDone, ConsumerTask, Driver, Pacer, RECORD_ID_LEN,
    Seen, missing, record_id,
};
use crate::e2e::spec::{E2eMode, E2eSpec};
use crate::error::BenchError;
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
        };
        let admin = native.connect(cluster.client_id.clone()).await?;
        native.layout = admin
            .ensure_topic(&spec.topic, spec.partitions, spec.replication_factor)
            .await
            .map_err(|e| BenchError::topic(&spec.topic, e))?;
        Ok(native)
    }

    /// A connection set of its own, as `client_id`, that knows the brokers.
    async fn connect(&mut self, client_id: String) -> Result<Arc<Cluster>, BenchError> {
        let c = connect_as(self.cluster_config(client_id), self.spec.topic.clone()).await?;
        self.clusters.push(c.clone());
        Ok(c)
    }

    fn cluster_config(&self, client_id: String) -> ClusterConfig {
        let mut config = self.cluster.clone();
        config.client_id = client_id;
        config.max_in_flight = self.spec.producer.max_in_flight.max(1);
        config
    }
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
        let cluster = self.connect(self.spec.consumer_id.clone()).await?;
        Ok(tokio::spawn(consume(
            self.spec.clone(),
            cluster,
            self.layout.clone(),
            live,
            stop,
            ready,
            self.epoch,
            self.run_tag,
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
        for (idx, c) in connected.into_iter().enumerate() {
            let Some(c) = c else { continue };
            producers.spawn(produce(
                self.spec.clone(),
                self.spec.producer_base + idx as u32,
                c,
                self.layout.clone(),
                live.clone(),
                stop.clone(),
                self.epoch,
                self.run_tag,
            ));
        }
        Ok(())
    }

    async fn finish(self) -> (Negotiated, std::collections::BTreeMap<String, u64>) {
        let mut negotiated = Negotiated::default();
        let mut anomalies = std::collections::BTreeMap::<String, u64>::new();
        for c in &self.clusters {
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
    }
}

/// One producer: batches at random intervals until stopped, each to the next partition in turn,
/// through the producer engine (which follows the partitions' leaders); then its outstanding
/// batches get [`DURATION_GRACE`](crate::spec::DURATION_GRACE) to resolve.
#[allow(clippy::too_many_arguments)]
async fn produce(
    spec: E2eSpec,
    idx: u32,
    cluster: Arc<Cluster>,
    layout: TopicLayout,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    epoch: Instant,
    run_tag: u32,
) {
    let mut pacer = Pacer::new(&spec, idx, live.clone());
    let values = pacer.payload(spec.payload_size.max);
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
            let size = pacer.size();
            key[8..16].copy_from_slice(&seq.to_be_bytes());
            seq += 1;
            let value = &values[..size];
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

/// The consumer: join, learn positions, signal ready, then poll/commit/heartbeat until stopped.
#[allow(clippy::too_many_arguments)]
async fn consume(
    spec: E2eSpec,
    cluster: Arc<Cluster>,
    mut layout: TopicLayout,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
    epoch: Instant,
    run_tag: u32,
) -> Result<ConsumerDone, BenchError> {
    let config = GroupConfig {
        group_id: spec.group_id.clone(),
        topic: spec.topic.clone(),
        session_timeout: spec.consumer.session_timeout,
        rebalance_timeout: spec.consumer.session_timeout.max(Duration::from_secs(30)),
    };
    let setup = async {
        let member = GroupMember::join(cluster.clone(), config).await?;
        let positions = cluster.latest_offsets(&layout, member.assignment()).await?;
        Ok::<_, ClientError>((member, positions))
    };
    let (mut member, mut positions) = setup.await?;
    let mut engine = kbench_client::Consumer::new(
        cluster.clone(),
        &layout,
        kbench_client::ConsumerOptions {
            partition_max_bytes: fetch_bytes(&spec),
            max_bytes: fetch_bytes(&spec),
            max_wait: spec.consumer.fetch_max_wait,
            read_committed: false,
            // A log that lost the offsets read (a broker that restarted empty) is read again from
            // its start.
            reset: kbench_client::OffsetReset::Earliest,
            retry_backoff: kbench_client::config::RETRY_BACKOFF,
        },
    );
    engine.assign(&positions);
    let _ = ready.send(());

    let mut decoder = BatchDecoder::new();
    let mut seen = Seen::counting_into(live.clone());
    let mut gaps: BTreeMap<i32, Gaps> = BTreeMap::new();
    let gap_hold = gap_hold(spec.consumer.fetch_max_wait);
    let mut committer = Committer::new(spec.commit, &positions);
    let mut last_heartbeat = Instant::now();
    let mut async_commits: JoinSet<()> = JoinSet::new();
    // Consumer only: without a run tag every kbench record counts, timed from its CreateTime (ms);
    // a distributed run's consumer counts its run's records, timed from their wall-clock send
    // header, corrected per producer agent.
    let peers = spec.peers_consumer();
    let wall_clock = spec.mode == E2eMode::Consumer && !peers;
    let clock_ahead = |producer: u32| -> i64 {
        spec.producer_segments
            .iter()
            .find(|s| (s.first_producer..s.first_producer + s.producers).contains(&producer))
            .map_or(0, |s| s.clock_ahead_us)
    };
    if peers {
        *live.segments.lock().expect("segments lock") = crate::e2e::Segments::new(
            spec.producer_segments
                .iter()
                .map(|s| s.first_producer..s.first_producer + s.producers)
                .collect(),
        );
    }
    while !stop.is_cancelled() {
        if last_heartbeat.elapsed() >= spec.consumer.heartbeat_interval {
            last_heartbeat = Instant::now();
            add(&live.heartbeats, 1);
            match member.heartbeat().await {
                Ok(Membership::Stable) => {}
                Ok(Membership::RejoinNeeded) => {
                    rejoin(&mut member, &mut engine, &mut positions, &live).await?;
                }
                Err(e) => {
                    live.error(format!("heartbeat: {e}"), 0);
                    // The coordinator is gone (a broker restarted): find it and join again. A
                    // broker that stays down fails this too; the next heartbeat tries again.
                    let moved = matches!(e, ClientError::Kafka { code: 15 | 16, .. });
                    if (member.coordinator_lost() || moved)
                        && let Err(e) =
                            rejoin(&mut member, &mut engine, &mut positions, &live).await
                    {
                        live.error(format!("rejoin: {e}"), 0);
                    }
                }
            }
        }
        if positions.is_empty() {
            // Nothing assigned (another member has every partition): wait for a rebalance.
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(spec.consumer.heartbeat_interval) => continue,
            }
        }
        // The next answer of any broker's fetch loop (each broker is fetched from concurrently,
        // on connections of their own); the heartbeat's turn comes between answers.
        let until_heartbeat = spec
            .consumer
            .heartbeat_interval
            .saturating_sub(last_heartbeat.elapsed());
        let fetched = tokio::select! {
            _ = stop.cancelled() => break,
            f = engine.poll() => f,
            _ = tokio::time::sleep(until_heartbeat) => continue,
        };
        let Some(fetched) = fetched else { break };
        add(&live.fetches, 1);
        for e in &fetched.errors {
            live.error(format!("fetch: {e}"), 0);
        }
        for (p, from, to) in &fetched.resets {
            live.error(
                format!(
                    "fetch: {}-{p}: offset {from} out of range (the broker lost its log): read again from offset {to}",
                    layout.name
                ),
                0,
            );
            positions.insert(*p, *to);
        }
        // A log that ends below what was read from it was lost (a broker that restarted empty, an
        // unclean election): read it again from its start, as auto.offset.reset=earliest would.
        let behind: Vec<i32> = fetched
            .parts
            .iter()
            .filter(|part| {
                part.data.high_watermark >= 0
                    && positions
                        .get(&part.partition)
                        .is_some_and(|pos| part.data.high_watermark < *pos)
            })
            .map(|part| part.partition)
            .collect();
        if !behind.is_empty() {
            layout = engine.layout();
            reset_to_start(&cluster, &layout, &behind, &mut positions, &live).await;
            for p in &behind {
                engine.seek(*p, positions[p]);
            }
            continue;
        }
        // Receipt time: when the response was in hand, one reading for the whole response (the
        // fetch loop's, before the answer waited its turn here).
        let in_hand = Instant::now();
        let queued = in_hand.saturating_duration_since(fetched.answered);
        let received_us = fetched.answered.duration_since(epoch).as_micros() as u64;
        let received_wall_ms = now_ms() - queued.as_millis() as i64;
        let received_wall_us = crate::clock::wall_us().saturating_sub(queued.as_micros() as u64);
        let mut firsts: Vec<u32> = Vec::new();
        let mut got = 0u64;
        let mut trips: Vec<u64> = Vec::new();
        let mut seeks: Vec<(i32, i64)> = Vec::new();
        // Held for the response, never across an await.
        {
            let mut verify = live.verify.lock().expect("verify lock");
            for part in &fetched.parts {
                let (partition, data) = (&part.partition, &part.data);
                let Some(position) = positions.get(partition).copied() else {
                    continue;
                };
                let gaps = gaps.entry(*partition).or_default();
                let limit = readable_until(&data.records, position, gaps, gap_hold, &live);
                let mut next = position;
                let result = decoder.decode_all(&data.records, |header, record| {
                    if header.base_offset >= limit {
                        return; // at or past a hole still held: asked for again next time
                    }
                    next = next.max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                    if record.offset < position || header.is_control() {
                        return;
                    }
                    got += 1;
                    if let Some(v) = verify.as_mut() {
                        v.verifier.check(
                            *partition,
                            record.offset,
                            Stamp::of(&record),
                            record.value.unwrap_or_default(),
                        );
                    }
                    match record_id(record.key) {
                        Some((tag, producer, seq)) if tag == run_tag || wall_clock => {
                            add(&live.consumed, 1);
                            if seen.mark(tag, producer, seq) {
                                add(&live.duplicates, 1);
                                return;
                            }
                            if peers {
                                firsts.push(producer);
                            }
                            if !spec.gather_latencies {
                                return;
                            }
                            if peers {
                                if let Some(sent) = record
                                    .headers()
                                    .find(|(k, _)| *k == SENT_WALL_HEADER)
                                    .and_then(|(_, v)| v)
                                    .and_then(|v| <[u8; 8]>::try_from(v).ok())
                                {
                                    let trip = received_wall_us as i64
                                        - u64::from_be_bytes(sent) as i64
                                        + clock_ahead(producer);
                                    trips.push(trip.max(1) as u64);
                                }
                            } else if wall_clock {
                                let trip_ms = received_wall_ms.saturating_sub(record.timestamp);
                                trips.push((trip_ms.max(0) as u64) * 1000);
                            } else if let Some(sent) = record
                                .headers()
                                .find(|(k, _)| *k == SENT_HEADER)
                                .and_then(|(_, v)| v)
                                .and_then(|v| <[u8; 8]>::try_from(v).ok())
                            {
                                trips.push(received_us.saturating_sub(u64::from_be_bytes(sent)));
                            }
                        }
                        _ => add(&live.foreign, 1),
                    }
                });
                if let Err(e) = result {
                    live.error(format!("decode {}-{partition}: {e}", layout.name), 0);
                }
                if next > position {
                    positions.insert(*partition, next);
                }
                // The engine fetches on from the end of these batches; a position held at a hole
                // (or answered from elsewhere) is asked for from where it is.
                let assumed = kbench_wire::records::batches_end(&data.records, part.from)
                    .unwrap_or(part.from)
                    .max(part.from);
                let at = positions.get(partition).copied().unwrap_or(next);
                if at != assumed {
                    seeks.push((*partition, at));
                }
            }
        }
        for (p, at) in seeks {
            engine.seek(p, at);
        }
        if !firsts.is_empty() {
            let mut segments = live.segments.lock().expect("segments lock");
            for p in firsts {
                segments.count(p);
            }
        }
        if !trips.is_empty() {
            let mut h = live.whole_trip.lock().expect("latency lock");
            for t in trips {
                let _ = h.record(t.max(1));
            }
        }
        if spec.gather_latencies && got > 0 {
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
                .record((in_hand.elapsed().as_micros() as u64).max(1));
        }
        match committer.due(&positions) {
            Some(CommitDue::Awaited) => {
                match committed(member.commit(&layout, &positions).await).count(&live) {
                    Committed::Yes => committer.committed(&positions),
                    Committed::RejoinNeeded => {
                        rejoin(&mut member, &mut engine, &mut positions, &live).await?;
                    }
                    Committed::Failed(_) => {}
                }
            }
            Some(CommitDue::Background) => {
                let request = member.commit_request(&layout, &positions)?;
                committer.committed(&positions);
                let live = live.clone();
                async_commits.spawn(async move {
                    committed(send_commit(request).await).count(&live);
                });
                while async_commits.try_join_next().is_some() {}
            }
            None => {}
        }
    }
    let layout = engine.layout();
    let events = engine.finish();
    live.consumer_cluster
        .lock()
        .expect("cluster lock")
        .merge(&events);
    while async_commits.join_next().await.is_some() {}
    // A final synchronous commit of what was read, then leave: the group does not wait out a session.
    if committer.pending(&positions) {
        committed(member.commit(&layout, &positions).await).count(&live);
    }
    if let Err(e) = member.leave().await {
        live.error(format!("leave group: {e}"), 0);
    }
    if (spec.mode == E2eMode::ConsumerAndProducers || peers) && missing(&live) > 0 {
        tracing::info!(
            missing = missing(&live),
            "re-reading missing offsets after the drain"
        );
        live.set_phase("verifying");
        let ranges = gaps
            .into_iter()
            .flat_map(|(p, g)| g.skipped.into_iter().map(move |r| (p, r)))
            .chain(positions.iter().map(|(p, o)| (*p, *o..i64::MAX)))
            .collect();
        let deadline = Instant::now() + spec.drain.max(Duration::from_secs(1));
        let reading = Reread {
            cluster: &cluster,
            layout: &layout,
            max_bytes: fetch_bytes(&spec),
            run_tag,
            deadline,
        };
        reading
            .count_late(ranges, &mut decoder, &mut seen, &live)
            .await;
    }
    Ok(ConsumerDone {
        member_id: member.member_id().to_string(),
        assignment: member.assignment().to_vec(),
    })
}

/// A group commit's answer as the commit rule counts it.
fn committed(answer: Result<Membership, ClientError>) -> Committed {
    match answer {
        Ok(Membership::Stable) => Committed::Yes,
        Ok(Membership::RejoinNeeded) => Committed::RejoinNeeded,
        Err(e) => Committed::Failed(e.to_string()),
    }
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
        seen: &mut Seen,
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
                let decoded = {
                    let mut verify = live.verify.lock().expect("verify lock");
                    decoder.decode_all(&fetched.records, |header, record| {
                        offset = offset
                            .max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                        if record.offset < from || record.offset >= end || header.is_control() {
                            return;
                        }
                        if let Some(v) = verify.as_mut() {
                            v.verifier.check(
                                partition,
                                record.offset,
                                Stamp::of(&record),
                                record.value.unwrap_or_default(),
                            );
                        }
                        if let Some((tag, producer, seq)) = record_id(record.key)
                            && tag == self.run_tag
                            && !seen.mark(tag, producer, seq)
                        {
                            add(&live.late, 1);
                            late_producers.push(producer);
                        }
                    })
                };
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

/// Rejoin after the coordinator asked for it; keep positions of partitions still ours, start new
/// ones at latest; the engine reads the new assignment from there.
async fn rejoin(
    member: &mut GroupMember,
    engine: &mut kbench_client::Consumer,
    positions: &mut BTreeMap<i32, i64>,
    live: &E2eLive,
) -> Result<(), ClientError> {
    add(&live.rejoins, 1);
    member.rejoin().await?;
    let assigned = member.assignment().to_vec();
    positions.retain(|p, _| assigned.contains(p));
    let new: Vec<i32> = assigned
        .into_iter()
        .filter(|p| !positions.contains_key(p))
        .collect();
    if !new.is_empty() {
        let layout = engine.layout();
        positions.extend(engine.cluster().latest_offsets(&layout, &new).await?);
    }
    engine.assign(positions);
    Ok(())
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
    fn the_gap_hold_covers_two_fetch_waits() {
        assert_eq!(
            gap_hold(Duration::from_millis(10)),
            Duration::from_millis(500)
        );
        assert_eq!(gap_hold(Duration::from_secs(1)), Duration::from_secs(2));
    }
}
