//! The e2e workload through a Kafka REST Proxy: the same producers, consumer, drain and accounting as
//! the native driver (`e2e`), with HTTP conversations instead of Kafka ones.
//!
//! Records are the seed's Avro value `AvroRecord{value: string, metadata: MetaData{eid: string,
//! occurred_at: string}}`, embedded as JSON (avro and json formats) or as base64 of that JSON
//! (binary). `eid` is the record id (run tag, producer, sequence); `occurred_at` is the send time as an
//! ISO-8601 instant *derived from this process's monotonic clock* (run start + monotonic elapsed), so
//! that whole trip is monotonic when producers and consumer share the process.
//!
//! Measured apart from the common figures: HTTP produce request duration (the common producer
//! histogram), consumer-instance creation, time to the first record after creation, records per GET,
//! 429s (backed off, retried), 40403s (instance recreated), commits.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kbench_rest::{ConsumerInstance, RecordOutcome, RestError, RestFormat, RestProxy};
use kbench_wire::Negotiated;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::e2e::live::{E2eLive, RestFigures, add, get};
use crate::e2e::phases::{
    CommitDue, Committed, Committer, ConsumerDone, ConsumerTask, Driver, InFlight, Pacer, Seen,
    missing,
};
use crate::e2e::spec::{E2eMode, E2eSpec, RestApi, RestSpec, clock_for};
use crate::error::BenchError;

/// The seed service's Avro value schema.
pub const SEED_VALUE_SCHEMA: &str = r#"{"type":"record","name":"AvroRecord","fields":[{"name":"value","type":"string"},{"name":"metadata","type":{"type":"record","name":"MetaData","fields":[{"name":"eid","type":"string"},{"name":"occurred_at","type":"string"}]}}]}"#;

/// The seed's record as a Protobuf message (`--rest-format protobuf`): the same fields, so that
/// its JSON mapping is the same document.
pub const SEED_VALUE_PROTO: &str = "syntax = \"proto3\";\n\nmessage AvroRecord {\n  string value = 1;\n  MetaData metadata = 2;\n}\n\nmessage MetaData {\n  string eid = 1;\n  string occurred_at = 2;\n}\n";

/// The seed's record as a JSON Schema (`--rest-format jsonschema`).
pub const SEED_VALUE_JSON_SCHEMA: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"AvroRecord","type":"object","required":["value","metadata"],"properties":{"value":{"type":"string"},"metadata":{"type":"object","required":["eid","occurred_at"],"properties":{"eid":{"type":"string"},"occurred_at":{"type":"string"}}}}}"#;

/// The seed's record schema in a schema format, and its registry `schemaType`.
pub fn seed_schema(format: RestFormat) -> Option<(&'static str, Option<&'static str>)> {
    match format {
        RestFormat::Avro => Some((SEED_VALUE_SCHEMA, None)),
        RestFormat::Protobuf => Some((SEED_VALUE_PROTO, format.schema_type())),
        RestFormat::JsonSchema => Some((SEED_VALUE_JSON_SCHEMA, format.schema_type())),
        RestFormat::Json | RestFormat::Binary => None,
    }
}

/// The clock statement for REST runs with both sides in this process.
pub const REST_CLOCK: &str = "monotonic: producers and consumer share this process; send time carried in metadata.occurred_at as run start + monotonic elapsed";

struct Clock {
    epoch: Instant,
    wall_at_epoch: SystemTime,
}

impl Clock {
    /// The send time as an ISO-8601 instant on the monotonic clock.
    fn stamp(&self) -> String {
        humantime::format_rfc3339_micros(self.wall_at_epoch + self.epoch.elapsed()).to_string()
    }

    /// µs from a stamp to now, on the same clock.
    fn since(&self, stamp: &str) -> Option<u64> {
        let sent = humantime::parse_rfc3339(stamp).ok()?;
        let now = self.wall_at_epoch + self.epoch.elapsed();
        Some(now.duration_since(sent).unwrap_or_default().as_micros() as u64)
    }
}

/// The REST Proxy driver, with the proxy checked and the schema id known.
pub(crate) struct Rest {
    run: Arc<RestRun>,
}

/// What the producers and the consumer of a REST run share: its settings, the proxy (and the
/// cluster id its v3 API names), the clock send times are stamped on, and the tag that marks the
/// run's records.
struct RestRun {
    spec: E2eSpec,
    rest: RestSpec,
    proxy: RestProxy,
    cluster_id: Option<String>,
    clock: Clock,
    run_tag: u32,
}

impl Rest {
    /// Before any load: the proxy answers, the v3 API exists when asked for, the schema id is known
    /// (registered when a registry is given).
    pub(crate) async fn new(spec: &E2eSpec, rest: &RestSpec) -> Result<Rest, BenchError> {
        let proxy = RestProxy::new(rest.proxy.clone())?;
        proxy.check().await?;
        let cluster_id = match rest.api {
            RestApi::V2 => None,
            RestApi::V3 | RestApi::V3Stream => Some(proxy.cluster_id().await?),
        };
        let mut rest = rest.clone();
        if let Some((schema, schema_type)) = seed_schema(rest.format)
            && spec.mode.has_producers()
            && let Some(registry) = &rest.schema_registry
        {
            let id = proxy
                .register_schema(
                    registry,
                    &format!("{}-value", spec.topic),
                    schema,
                    schema_type,
                )
                .await
                .map_err(|e| BenchError::Run(format!("schema registry {registry}: {e}")))?;
            rest.value_schema_id = Some(id);
        }
        let mut spec = spec.clone();
        // The figures carry the schema id actually used (registered or given).
        spec.rest = Some(rest.clone());
        let clock = Clock {
            epoch: Instant::now(),
            wall_at_epoch: SystemTime::now(),
        };
        let run_tag = SmallRng::seed_from_u64(spec.seed ^ clock_seed()).random();
        Ok(Rest {
            run: Arc::new(RestRun {
                spec,
                rest,
                proxy,
                cluster_id,
                clock,
                run_tag,
            }),
        })
    }
}

impl Driver for Rest {
    fn spec(&self) -> &E2eSpec {
        &self.run.spec
    }

    async fn start_consumer(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        ready: tokio::sync::oneshot::Sender<()>,
    ) -> Result<ConsumerTask, BenchError> {
        Ok(tokio::spawn(consume(self.run.clone(), live, stop, ready)))
    }

    async fn start_producers(
        &mut self,
        live: Arc<E2eLive>,
        stop: CancellationToken,
        run_stop: &CancellationToken,
        producers: &mut JoinSet<()>,
    ) -> Result<(), BenchError> {
        for idx in 0..self.run.spec.producers {
            if run_stop.is_cancelled() {
                break;
            }
            producers.spawn(produce(
                self.run.clone(),
                idx as u32,
                live.clone(),
                stop.clone(),
            ));
        }
        Ok(())
    }

    fn figures(&self, live: &E2eLive) -> (&'static str, Option<RestFigures>) {
        let h = |m: &std::sync::Mutex<hdrhistogram::Histogram<u64>>| {
            m.lock().expect("latency lock").clone()
        };
        let (spec, rest) = (&self.run.spec, &self.run.rest);
        let clock = if spec.mode == E2eMode::ConsumerAndProducers {
            REST_CLOCK
        } else {
            clock_for(spec.mode, spec.reply.is_some())
        };
        let figures = RestFigures {
            format: rest.format.name(),
            api: rest.api.name(),
            value_schema_id: rest.value_schema_id,
            throttled: get(&live.rest_throttled),
            instances_expired: get(&live.rest_expired),
            instances_created: get(&live.rest_instances),
            instance_creation: h(&live.rest_instance_creation),
            time_to_first_record_us: match get(&live.rest_first_record_us) {
                0 => None,
                us => Some(us),
            },
            records_per_get: h(&live.rest_records_per_get),
            empty_gets: get(&live.rest_empty_gets),
        };
        (clock, Some(figures))
    }

    async fn finish(self) -> (Negotiated, std::collections::BTreeMap<String, u64>) {
        (Negotiated::default(), std::collections::BTreeMap::new())
    }
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The seed's record, embedded in the format.
fn value_for(format: RestFormat, payload: &str, eid: &str, occurred_at: &str) -> Value {
    let record =
        json!({ "value": payload, "metadata": { "eid": eid, "occurred_at": occurred_at } });
    match format {
        RestFormat::Avro | RestFormat::Protobuf | RestFormat::JsonSchema | RestFormat::Json => {
            record
        }
        RestFormat::Binary => Value::String(
            base64::engine::general_purpose::STANDARD.encode(record.to_string().as_bytes()),
        ),
    }
}

/// `eid` and `occurred_at` back from a consumed value.
fn read_value(format: RestFormat, v: &Value) -> Option<(String, String)> {
    let record = match format {
        RestFormat::Avro | RestFormat::Protobuf | RestFormat::JsonSchema | RestFormat::Json => {
            v.clone()
        }
        RestFormat::Binary => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str()?)
                .ok()?;
            serde_json::from_slice(&bytes).ok()?
        }
    };
    let m = &record["metadata"];
    // Protobuf's JSON mapping may name the field in lowerCamelCase.
    let at = m["occurred_at"]
        .as_str()
        .or_else(|| m["occurredAt"].as_str())?;
    Some((m["eid"].as_str()?.to_string(), at.to_string()))
}

fn eid(tag: u32, producer: u32, seq: u64) -> String {
    format!("{tag:08x}-{producer}-{seq}")
}

fn parse_eid(s: &str) -> Option<(u32, u32, u64)> {
    let mut it = s.splitn(3, '-');
    let tag = u32::from_str_radix(it.next()?, 16).ok()?;
    let producer = it.next()?.parse().ok()?;
    let seq = it.next()?.parse().ok()?;
    Some((tag, producer, seq))
}

/// One producer: batches at random intervals until stopped, each sent by the chosen API while the
/// next is made; then its requests still outstanding are settled.
async fn produce(run: Arc<RestRun>, idx: u32, live: Arc<E2eLive>, stop: CancellationToken) {
    let (spec, rest) = (&run.spec, &run.rest);
    let mut pacer = Pacer::new(spec, idx, live.clone());
    let payload = String::from_utf8(pacer.payload(spec.payload_size.max)).unwrap_or_default();
    let mut requests = InFlight::new();
    let mut seq = 0u64;
    while let Some((permit, count)) = pacer.next_batch(&stop).await {
        let stamp = run.clock.stamp();
        let values: Vec<Value> = (0..count)
            .map(|_| {
                let size = pacer.size();
                let v = value_for(
                    rest.format,
                    &payload[..size],
                    &eid(run.run_tag, idx, seq),
                    &stamp,
                );
                seq += 1;
                v
            })
            .collect();
        let records = count as u64;
        add(&live.produced, records);
        let (run, live) = (run.clone(), live.clone());
        requests.spawn(records, async move {
            let outcomes = send_batch(&run, &live, values).await;
            drop(permit);
            let mut failed = BTreeMap::<String, u64>::new();
            let mut ok = 0;
            for o in outcomes {
                match o {
                    RecordOutcome::Ok { .. } => ok += 1,
                    RecordOutcome::Failed { code, message } => {
                        *failed
                            .entry(format!("REST produce: error_code {code}: {message}"))
                            .or_default() += 1;
                    }
                }
            }
            add(&live.acked, ok);
            for (e, n) in failed {
                add(&live.failed, n);
                live.error(e, n);
            }
        });
    }
    requests.settle(&live).await;
}

/// Send one batch by the chosen API; every record gets an outcome. 429s are counted, backed off and
/// retried until the delivery timeout; other errors fail the batch's records with their code.
async fn send_batch(run: &RestRun, live: &E2eLive, values: Vec<Value>) -> Vec<RecordOutcome> {
    let (proxy, rest, topic) = (&run.proxy, &run.rest, run.spec.topic.as_str());
    let cluster_id = run.cluster_id.as_deref();
    let gather = run.spec.gather_latencies;
    let delivery_timeout = run.spec.producer.delivery_timeout;
    let n = values.len();
    let started = Instant::now();
    loop {
        let t0 = Instant::now();
        let result: Result<Vec<RecordOutcome>, RestError> = match (rest.api, cluster_id) {
            (RestApi::V2, _) | (_, None) => {
                proxy
                    .produce_v2(topic, rest.format, rest.value_schema_id, values.clone())
                    .await
            }
            (RestApi::V3, Some(c)) => {
                let mut out = Vec::with_capacity(n);
                let mut err = None;
                for v in values.iter().cloned() {
                    let t1 = Instant::now();
                    match proxy
                        .produce_v3(c, topic, rest.format, rest.value_schema_id, v)
                        .await
                    {
                        Ok(o) => {
                            record_duration(live, gather, t1);
                            add(&live.produce_requests, 1);
                            out.push(o);
                        }
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                match err {
                    // Records already answered keep their outcome; the rest are retried or failed.
                    Some(e) if out.is_empty() => Err(e),
                    Some(e) => {
                        let code = e.code().unwrap_or(-1);
                        let message = e.to_string();
                        out.extend((out.len()..n).map(|_| RecordOutcome::Failed {
                            code,
                            message: message.clone(),
                        }));
                        Ok(out)
                    }
                    None => return out,
                }
            }
            (RestApi::V3Stream, Some(c)) => {
                proxy
                    .produce_v3_stream(c, topic, rest.format, rest.value_schema_id, values.clone())
                    .await
            }
        };
        if rest.api != RestApi::V3 {
            add(&live.produce_requests, 1);
        }
        match result {
            Ok(outcomes) => {
                if rest.api != RestApi::V3 {
                    record_duration(live, gather, t0);
                }
                return outcomes;
            }
            Err(e)
                if e.is_throttle()
                    && started.elapsed() + rest.throttle_backoff < delivery_timeout =>
            {
                add(&live.rest_throttled, 1);
                tokio::time::sleep(rest.throttle_backoff).await;
            }
            Err(e) => {
                if e.is_throttle() {
                    add(&live.rest_throttled, 1);
                }
                let code = e.code().unwrap_or(-1);
                let message = e.to_string();
                return (0..n)
                    .map(|_| RecordOutcome::Failed {
                        code,
                        message: message.clone(),
                    })
                    .collect();
            }
        }
    }
}

fn record_duration(live: &E2eLive, gather: bool, since: Instant) {
    if gather {
        let _ = live
            .producer_latency
            .lock()
            .expect("latency lock")
            .record((since.elapsed().as_micros() as u64).max(1));
    }
}

/// Create an instance and subscribe, timed and counted.
async fn open_instance(
    run: &RestRun,
    live: &E2eLive,
    generation: u32,
) -> Result<ConsumerInstance, RestError> {
    let (proxy, spec, rest) = (&run.proxy, &run.spec, &run.rest);
    let t0 = Instant::now();
    let name = if generation == 0 {
        spec.consumer_id.clone()
    } else {
        format!("{}-{generation}", spec.consumer_id)
    };
    let instance = proxy
        .create_consumer(&spec.group_id, &name, rest.format)
        .await?;
    if let Err(e) = proxy.subscribe(&instance, &spec.topic).await {
        let _ = proxy.delete_consumer(&instance).await;
        return Err(e);
    }
    add(&live.rest_instances, 1);
    let _ = live
        .rest_instance_creation
        .lock()
        .expect("latency lock")
        .record((t0.elapsed().as_micros() as u64).max(1));
    Ok(instance)
}

/// How long a consumer instance may take to be given partitions (real proxies join the group
/// lazily, over the first polls; a broker may delay the first rebalance by seconds).
const JOIN_PATIENCE: Duration = Duration::from_secs(60);

/// Most holes remembered per partition for the re-read after the drain.
const MAX_HOLES: usize = 10_000;

/// Where the consumer is in each partition: the next offset (after what it read), and the offsets
/// the proxy's records jumped over (re-read after the drain when records are missing).
#[derive(Debug, Default)]
struct Progress {
    positions: BTreeMap<i32, i64>,
    holes: BTreeMap<i32, Vec<std::ops::Range<i64>>>,
}

/// Each partition's end offset, taken before any record of the run is sent: where the run starts.
async fn start_offsets(proxy: &RestProxy, topic: &str) -> Result<BTreeMap<i32, i64>, RestError> {
    let mut out = BTreeMap::new();
    for p in proxy.partitions(topic).await? {
        out.insert(p, proxy.end_offset(topic, p).await?);
    }
    Ok(out)
}

/// Poll until the instance holds partitions (a real proxy's instance joins its group lazily, and
/// with `auto.offset.reset=latest` would start at the end *as of the join*, seconds after the
/// producers began), then seek every assigned partition explicitly: to where this consumer got to,
/// or to the run's start. Records the polls return before the seek are not counted: those at or
/// after the seek are read again, those before it are older than the run or already counted.
async fn position_instance(
    run: &RestRun,
    instance: &ConsumerInstance,
    start: &BTreeMap<i32, i64>,
    progress: &mut Progress,
    stop: &CancellationToken,
) -> Result<(), BenchError> {
    let (proxy, spec, rest) = (&run.proxy, &run.spec, &run.rest);
    let deadline = Instant::now() + JOIN_PATIENCE;
    let timeout_ms = spec.consumer.fetch_max_wait.as_millis() as u64;
    let assigned = loop {
        let assigned = proxy
            .assignments(instance, &spec.topic)
            .await
            .map_err(|e| BenchError::Run(format!("consumer assignments: {e}")))?;
        if !assigned.is_empty() {
            break assigned;
        }
        if Instant::now() >= deadline || stop.is_cancelled() {
            return Err(BenchError::Run(format!(
                "the consumer instance was given no partition of {:?} within {} s (another member of group {:?} may hold them all)",
                spec.topic,
                JOIN_PATIENCE.as_secs(),
                spec.group_id
            )));
        }
        match proxy.poll(instance, rest.format, timeout_ms, 1).await {
            Ok(_) => {}
            Err(e) if e.is_throttle() => tokio::time::sleep(rest.throttle_backoff).await,
            Err(e) => return Err(BenchError::Run(format!("poll while joining: {e}"))),
        }
    };
    tracing::debug!(
        ?assigned,
        "consumer instance joined; seeking its partitions"
    );
    let mut seeks = Vec::with_capacity(assigned.len());
    for p in assigned {
        let offset = match progress.positions.get(&p).or(start.get(&p)) {
            Some(o) => *o,
            // A partition created after the start: its beginning is the run's.
            None => 0,
        };
        progress.positions.insert(p, offset);
        seeks.push((p, offset));
    }
    proxy
        .seek(instance, &spec.topic, &seeks)
        .await
        .map_err(|e| BenchError::Run(format!("consumer positions: {e}")))
}

/// The consumer: its own instance in the group, positioned at the run's start before the producers
/// begin; then poll and commit until stopped, and re-read what is missing after the drain.
async fn consume(
    run: Arc<RestRun>,
    live: Arc<E2eLive>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<ConsumerDone, BenchError> {
    let created = Instant::now();
    let generation = 0;
    let start = start_offsets(&run.proxy, &run.spec.topic)
        .await
        .map_err(|e| BenchError::Run(format!("the topic's end offsets before the run: {e}")))?;
    let instance = open_instance(&run, &live, generation)
        .await
        .map_err(|e| BenchError::Run(format!("consumer instance: {e}")))?;
    let mut progress = Progress::default();
    if let Err(e) = position_instance(&run, &instance, &start, &mut progress, &stop).await {
        let _ = run.proxy.delete_consumer(&instance).await;
        return Err(e);
    }
    let _ = ready.send(());
    let mut consumer = RestConsumer {
        run: &run,
        live: &live,
        stop: &stop,
        created,
        start,
        instance,
        generation,
        progress,
        seen: Seen::counting_into(live.clone()),
    };
    let result = consumer.consume_loop().await;
    consumer.finish(result).await
}

/// After the drain, with records still missing: read them again through a consumer instance of
/// its own (assigned, not subscribed), from each hole the proxy's records jumped over and from where
/// the consumer stopped to the end, and count this run's records found there into `live.late`.
async fn count_late(
    run: &RestRun,
    progress: &Progress,
    seen: &mut Seen,
    live: &E2eLive,
    deadline: Instant,
) -> Result<(), RestError> {
    let (proxy, spec, rest, run_tag) = (&run.proxy, &run.spec, &run.rest, run.run_tag);
    let mut ends = BTreeMap::new();
    for p in progress.positions.keys() {
        ends.insert(*p, proxy.end_offset(&spec.topic, *p).await?);
    }
    let from: Vec<(i32, i64)> = progress
        .positions
        .iter()
        .map(|(p, o)| {
            let hole = progress
                .holes
                .get(p)
                .and_then(|h| h.iter().map(|r| r.start).min());
            (*p, hole.map_or(*o, |h| h.min(*o)))
        })
        .collect();
    let wanted = |p: i32, offset: i64| {
        offset >= progress.positions.get(&p).copied().unwrap_or(i64::MAX)
            || progress
                .holes
                .get(&p)
                .is_some_and(|h| h.iter().any(|r| r.contains(&offset)))
    };
    let group = format!("{}-reread", spec.group_id);
    let instance = proxy
        .create_consumer(&group, &format!("{}-reread", spec.consumer_id), rest.format)
        .await?;
    let partitions: Vec<i32> = progress.positions.keys().copied().collect();
    let reading = async {
        proxy.assign(&instance, &spec.topic, &partitions).await?;
        proxy.seek(&instance, &spec.topic, &from).await?;
        let mut reached: BTreeMap<i32, i64> = from.iter().copied().collect();
        let timeout_ms = spec.consumer.fetch_max_wait.as_millis() as u64;
        let max_bytes = spec.consumer.fetch_max_bytes.max(1) as u64;
        while reached.iter().any(|(p, o)| *o < ends[p]) && Instant::now() < deadline {
            for r in proxy
                .poll(&instance, rest.format, timeout_ms, max_bytes)
                .await?
            {
                if let Some(o) = reached.get_mut(&r.partition) {
                    *o = (*o).max(r.offset + 1);
                }
                if r.offset >= ends.get(&r.partition).copied().unwrap_or(0)
                    || !wanted(r.partition, r.offset)
                {
                    continue;
                }
                if let Some(((tag, producer, seq), _)) = read_value(rest.format, &r.value)
                    .and_then(|(eid, at)| parse_eid(&eid).map(|id| (id, at)))
                    && tag == run_tag
                    && !seen.mark(tag, producer, seq)
                {
                    add(&live.late, 1);
                }
            }
        }
        Ok(())
    };
    let result = reading.await;
    let _ = proxy.delete_consumer(&instance).await;
    result
}

/// A proxy commit's answer as the commit rule counts it.
fn committed(answer: Result<(), RestError>) -> Committed {
    match answer {
        Ok(()) => Committed::Yes,
        Err(e) => Committed::Failed(e.to_string()),
    }
}

/// The REST consumer under way: its instance (made again when the proxy forgets it), where it is
/// in each partition, and the records seen.
struct RestConsumer<'a> {
    run: &'a RestRun,
    live: &'a Arc<E2eLive>,
    stop: &'a CancellationToken,
    /// When the consumer started: the time to the first record counts from here.
    created: Instant,
    /// Each partition's end offset before the run: where a partition not read yet starts.
    start: BTreeMap<i32, i64>,
    instance: ConsumerInstance,
    /// How many times the instance was made again (each one is named apart).
    generation: u32,
    progress: Progress,
    seen: Seen,
}

impl RestConsumer<'_> {
    /// Poll, count and commit until stopped; then wait for the background commits and commit what
    /// is still pending.
    async fn consume_loop(&mut self) -> Result<(), BenchError> {
        let (run, live) = (self.run, self.live);
        let (spec, rest) = (&run.spec, &run.rest);
        let mut committer = Committer::new(spec.commit, &self.progress.positions);
        let timeout_ms = spec.consumer.fetch_max_wait.as_millis() as u64;
        let max_bytes = spec.consumer.fetch_max_bytes.max(1) as u64;
        let mut consecutive_errors = 0;
        let mut commits: JoinSet<()> = JoinSet::new();
        while !self.stop.is_cancelled() {
            let polled = tokio::select! {
                _ = self.stop.cancelled() => break,
                r = run.proxy.poll(&self.instance, rest.format, timeout_ms, max_bytes) => r,
            };
            add(&live.fetches, 1);
            let records = match polled {
                Ok(r) => {
                    consecutive_errors = 0;
                    r
                }
                Err(e) if e.is_instance_gone() => {
                    self.reopen(e).await?;
                    continue;
                }
                Err(e) => {
                    if e.is_throttle() {
                        add(&live.rest_throttled, 1);
                    }
                    live.error(format!("poll: {e}"), 0);
                    consecutive_errors += 1;
                    if consecutive_errors >= 20 {
                        return Err(BenchError::Run(format!(
                            "20 polls in a row failed, the last: {e}"
                        )));
                    }
                    tokio::time::sleep(rest.throttle_backoff).await;
                    continue;
                }
            };
            let in_hand = Instant::now();
            if records.is_empty() {
                add(&live.rest_empty_gets, 1);
                continue;
            }
            self.count(&records, in_hand);
            self.commit_if_due(&mut committer, &mut commits).await;
        }
        while commits.join_next().await.is_some() {}
        if committer.pending(&self.progress.positions) {
            let offsets: Vec<(i32, i64)> = self
                .progress
                .positions
                .iter()
                .map(|(p, o)| (*p, *o))
                .collect();
            committed(
                run.proxy
                    .commit(&self.instance, &spec.topic, &offsets)
                    .await,
            )
            .count(live);
        }
        Ok(())
    }

    /// The proxy forgot the instance (it expired): count that, make a new one and position it
    /// where this consumer got to.
    async fn reopen(&mut self, e: RestError) -> Result<(), BenchError> {
        add(&self.live.rest_expired, 1);
        self.live.error(format!("poll: {e}"), 0);
        self.generation += 1;
        self.instance = open_instance(self.run, self.live, self.generation)
            .await
            .map_err(|e| BenchError::Run(format!("recreating the consumer instance: {e}")))?;
        position_instance(
            self.run,
            &self.instance,
            &self.start,
            &mut self.progress,
            self.stop,
        )
        .await
    }

    /// Count one GET's records: the positions (and the holes jumped over), this run's records once
    /// (duplicates and foreign records apart), their whole trips and the time they took to count.
    fn count(&mut self, records: &[kbench_rest::RestRecord], in_hand: Instant) {
        let (run, live) = (self.run, self.live);
        let spec = &run.spec;
        // Consumer only: every kbench record counts, whatever its run.
        let wall_clock = spec.mode == E2eMode::Consumer;
        let _ = live
            .rest_records_per_get
            .lock()
            .expect("latency lock")
            .record(records.len() as u64);
        if live
            .rest_first_record_us
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0
        {
            live.rest_first_record_us.store(
                (self.created.elapsed().as_micros() as u64).max(1),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        let mut trips = Vec::with_capacity(records.len());
        for r in records {
            if r.offset >= 0 {
                let next = self
                    .progress
                    .positions
                    .entry(r.partition)
                    .or_insert(r.offset);
                if r.offset > *next {
                    let holes = self.progress.holes.entry(r.partition).or_default();
                    if holes.len() < MAX_HOLES {
                        holes.push(*next..r.offset);
                    }
                    add(&live.gaps_skipped, 1);
                }
                *next = (*next).max(r.offset + 1);
            }
            let parsed = read_value(run.rest.format, &r.value)
                .and_then(|(eid, at)| parse_eid(&eid).map(|id| (id, at)));
            match parsed {
                Some(((tag, producer, seq), at)) if tag == run.run_tag || wall_clock => {
                    add(&live.consumed, 1);
                    if self.seen.mark(tag, producer, seq) {
                        add(&live.duplicates, 1);
                        continue;
                    }
                    if spec.gather_latencies
                        && let Some(us) = run.clock.since(&at)
                    {
                        trips.push(us);
                    }
                }
                _ => add(&live.foreign, 1),
            }
        }
        if !trips.is_empty() {
            let mut h = live.whole_trip.lock().expect("latency lock");
            for t in trips {
                let _ = h.record(t.max(1));
            }
        }
        if spec.gather_latencies {
            let _ = live
                .consumer_processing
                .lock()
                .expect("latency lock")
                .record((in_hand.elapsed().as_micros() as u64).max(1));
        }
    }

    /// Commit the positions when the commit rule says so: awaited, or in the background (into
    /// `commits`).
    async fn commit_if_due(&self, committer: &mut Committer, commits: &mut JoinSet<()>) {
        let (run, live) = (self.run, self.live);
        let positions = &self.progress.positions;
        let offsets: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
        match committer.due(positions) {
            Some(CommitDue::Awaited) => {
                let answer = run
                    .proxy
                    .commit(&self.instance, &run.spec.topic, &offsets)
                    .await;
                if let Committed::Yes = committed(answer).count(live) {
                    committer.committed(positions);
                }
            }
            Some(CommitDue::Background) => {
                committer.committed(positions);
                let (proxy, instance, topic, live) = (
                    run.proxy.clone(),
                    self.instance.clone(),
                    run.spec.topic.clone(),
                    live.clone(),
                );
                commits.spawn(async move {
                    committed(proxy.commit(&instance, &topic, &offsets).await).count(&live);
                });
                while commits.try_join_next().is_some() {}
            }
            None => {}
        }
    }

    /// Delete the instance (always: at the end, on error, on stop); after a loop that ended well
    /// with records missing, read them again through the proxy ([`count_late`]).
    async fn finish(mut self, result: Result<(), BenchError>) -> Result<ConsumerDone, BenchError> {
        let (run, live) = (self.run, self.live);
        if let Err(e) = run.proxy.delete_consumer(&self.instance).await {
            live.error(format!("delete consumer instance: {e}"), 0);
        }
        if result.is_ok() && run.spec.mode == E2eMode::ConsumerAndProducers && missing(live) > 0 {
            tracing::info!(
                missing = missing(live),
                "re-reading missing offsets through the proxy after the drain"
            );
            live.set_phase("verifying");
            let deadline = Instant::now() + run.spec.drain.max(Duration::from_secs(1));
            if let Err(e) = count_late(run, &self.progress, &mut self.seen, live, deadline).await {
                live.error(format!("re-reading the missing offsets: {e}"), 0);
            }
        }
        result.map(|()| ConsumerDone {
            member_id: self.instance.instance_id.clone(),
            members: Vec::new(),
            group: None,
            assignment: self.progress.positions.keys().copied().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_every_format() {
        for f in [RestFormat::Avro, RestFormat::Json, RestFormat::Binary] {
            let v = value_for(
                f,
                "AAAA",
                &eid(0xdead_beef, 3, 42),
                "2026-11-29T21:00:00.000001Z",
            );
            let (e, at) = read_value(f, &v).unwrap();
            assert_eq!(parse_eid(&e), Some((0xdead_beef, 3, 42)));
            assert_eq!(at, "2026-11-29T21:00:00.000001Z");
        }
        assert!(parse_eid("nope").is_none());
        assert!(read_value(RestFormat::Binary, &json!("!!!")).is_none());
    }

    #[test]
    fn the_clock_measures_from_its_own_stamps() {
        let c = Clock {
            epoch: Instant::now(),
            wall_at_epoch: SystemTime::now(),
        };
        // Never more than really passed (the stamp keeps µs: at most 1 µs of truncation).
        let before = Instant::now();
        let s = c.stamp();
        let us = c.since(&s).unwrap();
        let passed = before.elapsed().as_micros() as u64;
        assert!(us <= passed + 1, "{us} µs measured, {passed} µs passed");
        // A stamp 2 s back on the same clock measures at least 2 s.
        let earlier = humantime::format_rfc3339_micros(
            c.wall_at_epoch + c.epoch.elapsed() - Duration::from_secs(2),
        )
        .to_string();
        assert!(c.since(&earlier).unwrap() >= 2_000_000);
    }

    #[test]
    fn the_seed_schema_is_valid_avro() {
        let schema = apache_avro::Schema::parse_str(SEED_VALUE_SCHEMA).unwrap();
        let v = value_for(RestFormat::Avro, "x", "e", "t");
        let avro = apache_avro::types::Value::from(v);
        assert!(avro.resolve(&schema).is_ok());
    }
}
