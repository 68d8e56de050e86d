//! Tier 1: pinned-version load against a live broker, where the protocol version is the only
//! variable. Every cell gets a fresh connection pinned to its version and checks that the version
//! negotiated *is* the pin (a mismatch is an error, never a number); warms up on its own workload
//! shape; repeats; and reports the median client CPU per message (getrusage of this process over the
//! measured phase), messages per second, and the spread. Cells run in a seeded shuffled order.
//!
//! Produce cells (each writing to a topic of its own): one record per request (`single`), 100 and 1 000 (`batch100`, `batch1000`), × acks 0
//! and all. Fetch cells: a topic seeded once with records in 10-record batches, read end to end with
//! max-bytes 4 KiB, 64 KiB and 1 MiB.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbench_client::{Acks, ClientError, Cluster, ClusterConfig, ProducerSettings, TopicLayout};
use kbench_wire::batch::{RecordBatchBuilder, now_ms};
use kbench_wire::{ApiKey, BatchDecoder, Compression, Pins};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::measure::{CpuTime, median_and_spread, peak_rss_kib};
use crate::produce::{Payload, ProduceSpec, run_produce};

/// A Produce request shape: records per request and records per repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Single,
    Batch100,
    Batch1000,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Single, Workload::Batch100, Workload::Batch1000];

    pub fn records_per_request(self) -> usize {
        match self {
            Workload::Single => 1,
            Workload::Batch100 => 100,
            Workload::Batch1000 => 1000,
        }
    }

    pub fn records_per_repetition(self) -> u64 {
        match self {
            Workload::Single => 20_000,
            _ => 100_000,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Single => "single",
            Workload::Batch100 => "batch100",
            Workload::Batch1000 => "batch1000",
        }
    }
}

/// One sweep cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "api", rename_all = "lowercase")]
pub enum SweepCell {
    Produce {
        version: i16,
        workload: Workload,
        acks: SweepAcks,
    },
    Fetch {
        version: i16,
        max_bytes: i32,
    },
}

impl SweepCell {
    pub fn version(&self) -> i16 {
        match self {
            SweepCell::Produce { version, .. } | SweepCell::Fetch { version, .. } => *version,
        }
    }

    pub fn api(&self) -> ApiKey {
        match self {
            SweepCell::Produce { .. } => ApiKey::Produce,
            SweepCell::Fetch { .. } => ApiKey::Fetch,
        }
    }

    /// Cells compared with each other share this: everything but the version.
    pub fn group(&self) -> String {
        match self {
            SweepCell::Produce { workload, acks, .. } => {
                format!("produce {} acks={}", workload.name(), acks.name())
            }
            SweepCell::Fetch { max_bytes, .. } => {
                format!("fetch max_bytes={}", human_bytes(*max_bytes))
            }
        }
    }

    pub fn label(&self) -> String {
        format!("{} v{}", self.group(), self.version())
    }
}

/// The acks a Produce cell uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SweepAcks {
    #[serde(rename = "0")]
    Zero,
    #[serde(rename = "all")]
    All,
}

impl SweepAcks {
    pub const BOTH: [SweepAcks; 2] = [SweepAcks::Zero, SweepAcks::All];

    pub fn name(self) -> &'static str {
        match self {
            SweepAcks::Zero => "0",
            SweepAcks::All => "all",
        }
    }
}

fn human_bytes(b: i32) -> String {
    if b % (1024 * 1024) == 0 {
        format!("{}MiB", b / (1024 * 1024))
    } else if b % 1024 == 0 {
        format!("{}KiB", b / 1024)
    } else {
        b.to_string()
    }
}

/// How the sweep runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepSettings {
    #[serde(skip)]
    pub bootstrap: Vec<String>,
    /// TLS for every connection (`security.protocol=SSL`), built once by the front end.
    #[serde(skip)]
    pub tls: Option<std::sync::Arc<kbench_client::Tls>>,
    /// SASL for every connection, built once by the front end.
    #[serde(skip)]
    pub sasl: Option<std::sync::Arc<kbench_client::Sasl>>,
    /// `security.protocol`, for the result.
    #[serde(default = "plaintext")]
    pub security_protocol: String,
    /// `sasl.mechanism`, for the result (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<String>,
    pub repetitions: usize,
    /// Divide every record count by this (`--quick` uses 10).
    pub scale_down: u64,
    pub stall_timeout: Duration,
    pub noise_threshold: f64,
    pub seed: u64,
    pub value_size: usize,
    pub fetch_seed_records: u64,
    pub max_bytes: Vec<i32>,
    pub produce_versions: Vec<i16>,
    pub fetch_versions: Vec<i16>,
    /// Tier 2: connect without pins and use what the broker negotiates.
    pub no_pin: bool,
}

fn plaintext() -> String {
    "PLAINTEXT".into()
}

/// Timed repetitions per cell unless told otherwise (the median is reported).
pub const DEFAULT_REPETITIONS: usize = 5;
/// No progress for this long stalls a repetition.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Spread (IQR / median) above which a verdict is "inside noise floor".
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.15;

/// One repetition of a cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepRep {
    pub messages: u64,
    pub seconds: f64,
    pub cpu_us_per_msg: f64,
    pub msgs_per_sec: f64,
}

/// What became of a cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    Completed,
    /// Stalled (no progress for the stall timeout) on every attempt.
    Abandoned {
        reason: String,
    },
    /// Could not run as specified (e.g. the negotiated version is not the pin): an error, not a number.
    Error {
        reason: String,
        /// The guard that failed, when a guard is why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<Guard>,
    },
}

/// The checks a sweep makes before it reports a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// The connection used the pinned version.
    NegotiatedEqualsPin,
    /// A Fetch cell read exactly the records seeded, intact (count and checksum).
    RecordsReadEqualSeeded,
    /// Every record's timestamp is from the time the topic was seeded.
    TimestampsFromClock,
    /// Every response the cell read was exactly its fields (no bytes left after a body): a codec
    /// that reads what the broker did not quite write is not measured.
    NoProtocolAnomalies,
}

/// Why a cell has no figure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CellError {
    /// A guard failed.
    #[error("{reason}")]
    Guard { guard: Guard, reason: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{0}")]
    Run(String),
}

impl CellError {
    fn guard(guard: Guard, reason: String) -> CellError {
        CellError::Guard { guard, reason }
    }
}

impl From<CellError> for CellStatus {
    fn from(e: CellError) -> CellStatus {
        let guard = match &e {
            CellError::Guard { guard, .. } => Some(*guard),
            _ => None,
        };
        CellStatus::Error {
            reason: e.to_string(),
            guard,
        }
    }
}

/// One cell's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    pub cell: SweepCell,
    pub label: String,
    pub status: CellStatus,
    /// The version the connection actually used for the cell's API.
    pub negotiated: Option<i16>,
    /// Every API's version the cell's connections used (ApiVersions, Metadata, the cell's API,
    /// …), by API name; a version that changed is kept as the lowest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub negotiated_versions: BTreeMap<String, i16>,
    pub reps: Vec<SweepRep>,
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub cpu_us_per_msg: f64,
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub msgs_per_sec: f64,
    /// IQR / median of the CPU per message over the repetitions.
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub spread: f64,
    /// Peak RSS of this process when the cell ended (a process-wide high-water mark).
    pub peak_rss_kib: u64,
    pub stall_retries: u32,
    /// The process that measured the cell (a child of its own with `--isolate`).
    #[serde(default)]
    pub pid: u32,
    /// Fetch cells: the Fetch max wait the cell read with (0 unless the broker answered a Fetch
    /// with `max_wait_ms` 0 with nothing while records remained; see [`fetch_rep`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_max_wait_ms: Option<i32>,
}

impl SweepResult {
    /// A result with no repetitions yet.
    pub fn new(cell: SweepCell, status: CellStatus) -> SweepResult {
        SweepResult {
            cell,
            label: cell.label(),
            status,
            negotiated: None,
            negotiated_versions: BTreeMap::new(),
            reps: Vec::new(),
            cpu_us_per_msg: 0.0,
            msgs_per_sec: 0.0,
            spread: 0.0,
            peak_rss_kib: 0,
            stall_retries: 0,
            pid: std::process::id(),
            fetch_max_wait_ms: None,
        }
    }
}

/// A sweep's result document (`kind: "sweep"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepDocument {
    #[serde(flatten)]
    pub header: crate::result::Header,
    pub bootstrap_servers: String,
    pub embedded_broker: bool,
    pub seed: u64,
    pub settings: SweepSettings,
    pub guards: Guards,
    pub duration_s: f64,
    pub cells: Vec<SweepCellDoc>,
}

/// The sweep's guards: what held over every cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Guards {
    /// Every completed cell used exactly its pinned version (a mismatch makes the cell an error).
    pub negotiated_equals_pin: bool,
    /// Every Fetch repetition read exactly the seeded records, with the same checksum.
    pub records_read_equal_seeded: bool,
    /// Record timestamps come from the clock (checked on every record read back).
    pub timestamps_from_clock: bool,
    /// Every response of every cell was exactly its fields (none with bytes after its body).
    pub no_protocol_anomalies: bool,
    /// Broker-side message conversions over the sweep, from `--broker-metrics`; "not checked" without it.
    pub conversions: String,
}

/// One cell of a sweep's document: its figures and its verdict, as said.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepCellDoc {
    #[serde(flatten)]
    pub result: SweepResult,
    pub verdict: String,
}

/// What the seeded Fetch topic holds, for the records-read guard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeededTopic {
    pub topic: String,
    pub records: u64,
    /// CRC-32C over every value in offset order.
    pub checksum: u32,
    pub first_timestamp_ms: i64,
}

/// The cells for the given versions: Produce shapes × acks, Fetch max-bytes.
pub fn cells(s: &SweepSettings) -> Vec<SweepCell> {
    let mut out = Vec::new();
    for &version in &s.produce_versions {
        for workload in Workload::ALL {
            for acks in SweepAcks::BOTH {
                out.push(SweepCell::Produce {
                    version,
                    workload,
                    acks,
                });
            }
        }
    }
    for &version in &s.fetch_versions {
        for &max_bytes in &s.max_bytes {
            out.push(SweepCell::Fetch { version, max_bytes });
        }
    }
    out
}

/// Shuffle with the seed: a constant order confounds version with position.
pub fn shuffle(cells: &mut [SweepCell], seed: u64) {
    cells.shuffle(&mut SmallRng::seed_from_u64(seed));
}

fn config(s: &SweepSettings, pins: Pins, client: &str) -> ClusterConfig {
    // Kafka's client defaults: 10 s to connect, 30 s per request, 5 in flight.
    let mut config = ClusterConfig::new(s.bootstrap.clone(), client, pins);
    config.tls = s.tls.clone();
    config.sasl = s.sasl.clone();
    config.security_protocol =
        kbench_client::SecurityProtocol::of(s.tls.is_some(), s.sasl.is_some());
    config
}

fn value_for(i: u64, size: usize) -> Vec<u8> {
    let mut v = format!("{i:012}").into_bytes();
    v.resize(size.max(12), b'.');
    v
}

/// Seed the Fetch topic: `records` distinct values in 10-record batches, so that max-bytes really
/// decides how much one response carries.
pub async fn seed_fetch_topic(s: &SweepSettings, topic: &str) -> Result<SeededTopic, BenchError> {
    let cluster =
        Arc::new(Cluster::connect(config(s, Pins::default(), "kbench-sweep-seed")).await?);
    let layout = cluster
        .ensure_topic(topic, 1, 1)
        .await
        .map_err(|e| BenchError::topic(topic, e))?;
    let producer = ProducerSettings {
        retries: 5,
        delivery_timeout: Duration::from_secs(60),
        ..ProducerSettings::default()
    }
    .delivery(cluster.config().request_timeout);
    let mut builder = RecordBatchBuilder::new(Compression::None);
    let mut checksum = 0u32;
    let first_timestamp_ms = now_ms();
    let records = s.fetch_seed_records;
    let mut i = 0;
    while i < records {
        builder.start_now();
        let ts = now_ms();
        let in_batch = 10.min(records - i);
        for _ in 0..in_batch {
            let v = value_for(i, s.value_size);
            checksum = crc32c::crc32c_append(checksum, &v);
            builder.append(ts, None, Some(&v), &[]);
            i += 1;
        }
        let batch = builder
            .finish()
            .map_err(|e| BenchError::Run(format!("seeding {topic}: {e}")))?;
        if let Err(error) = kbench_client::producer::deliver_one(
            cluster.clone(),
            &producer,
            &layout,
            0,
            batch,
            in_batch as u32,
        )
        .await
        {
            return Err(BenchError::Run(format!("seeding {topic}: {error}")));
        }
    }
    cluster.close(Duration::from_secs(2)).await;
    Ok(SeededTopic {
        topic: topic.to_string(),
        records,
        checksum,
        first_timestamp_ms,
    })
}

/// A fresh connection pinned to the cell's version, with the pin checked against what was
/// negotiated. Tier 2 (`no_pin`) pins nothing: the connection negotiates unaided, and what it
/// chose must be the cell's version, the highest the broker and kbench share.
async fn pinned_cluster(s: &SweepSettings, cell: &SweepCell) -> Result<Cluster, CellError> {
    let api = cell.api();
    let mut pins = Pins::default();
    if !s.no_pin {
        pins.extend_from(&format!(
            "{}={}",
            kbench_wire::api_name(api),
            cell.version()
        ))
        .map_err(|e| CellError::Run(e.to_string()))?;
    }
    let cluster = Cluster::connect(config(s, pins, "kbench-sweep")).await?;
    cluster.check_versions(&[api])?;
    match cluster.negotiated().get(api) {
        Some(v) if v == cell.version() => Ok(cluster),
        other => {
            let what = if s.no_pin {
                "the highest version both sides share,"
            } else {
                "the pinned"
            };
            Err(CellError::guard(
                Guard::NegotiatedEqualsPin,
                format!(
                    "{}: negotiated {:?} is not {what} v{}; no figure is reported for it",
                    cell.label(),
                    other,
                    cell.version()
                ),
            ))
        }
    }
}

/// Run one repetition of a Produce cell; `None` when it stalled.
async fn produce_rep(
    cluster: &Arc<Cluster>,
    topic: &TopicLayout,
    workload: Workload,
    acks: Acks,
    records: u64,
    s: &SweepSettings,
) -> Result<Option<SweepRep>, CellError> {
    let spec = ProduceSpec {
        num_records: records,
        duration: None,
        payload: Payload::Random { size: s.value_size },
        throughput: None,
        partition: Some(0),
        reporting_interval: s.stall_timeout / 2,
        producer: ProducerSettings {
            acks,
            compression: Compression::None,
            // Every batch is closed at `records_per_batch`.
            batch_size: usize::MAX,
            linger: Duration::from_secs(3600),
            retries: 3,
            delivery_timeout: s.stall_timeout,
            ..ProducerSettings::default()
        },
        records_per_batch: Some(workload.records_per_request()),
        seed: s.seed,
        ..ProduceSpec::default()
    };
    let stop = crate::Stop::new();
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let stop = stop.clone();
        let stalled = stalled.clone();
        move |w: &crate::produce::IntervalReport| {
            if w.records == 0 && w.failed == 0 {
                stalled.store(true, std::sync::atomic::Ordering::Relaxed);
                stop.stop("stalled");
            }
        }
    };
    let run = run_produce(cluster.clone(), topic.clone(), &spec, stop, watch).await;
    if stalled.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(None);
    }
    if run.records_failed > 0 {
        let first = run.errors.keys().next().cloned().unwrap_or_default();
        return Err(CellError::Run(format!(
            "{} records failed: {first}",
            run.records_failed
        )));
    }
    Ok(Some(SweepRep {
        messages: run.records_sent,
        seconds: run.elapsed.as_secs_f64(),
        cpu_us_per_msg: run.cpu_us_per_record().unwrap_or(0.0),
        msgs_per_sec: run.records_per_sec(),
    }))
}

/// The longest Fetch max wait a Fetch cell escalates to.
const FETCH_WAIT_CAP_MS: i32 = 500;

/// Read the seeded topic end to end once; checks count, checksum and timestamps. `None` on a stall.
///
/// Fetches ask for `max_wait_ms` = `*wait_ms`, 0 at first: Kafka answers at once with what it has,
/// and a wait would only time the broker's timer. A broker that answers a 0 ms Fetch with nothing
/// while records remain (the upstream Tansu binary) gets a wait from then on: 1 ms, doubled on every
/// further empty answer up to [`FETCH_WAIT_CAP_MS`], and kept for the rest of the cell. Reaching the
/// broker's high watermark with fewer records than were seeded is an error naming both counts.
async fn fetch_rep(
    cluster: &Cluster,
    layout: &TopicLayout,
    seeded: &SeededTopic,
    max_bytes: i32,
    s: &SweepSettings,
    wait_ms: &mut i32,
) -> Result<Option<SweepRep>, CellError> {
    let mut decoder = BatchDecoder::new();
    let (mut offset, mut read, mut checksum) = (0i64, 0u64, 0u32);
    let mut bad_timestamp = None;
    let now = now_ms() + 60_000;
    let started = Instant::now();
    let cpu = CpuTime::now();
    let mut last_progress = Instant::now();
    while read < seeded.records {
        let fetched = cluster
            .fetch(layout, 0, offset, max_bytes, *wait_ms)
            .await?;
        let before = read;
        decoder
            .decode_all(&fetched.records, |_, r| {
                if r.offset < offset {
                    return; // a batch may start before the offset asked for
                }
                offset = r.offset + 1;
                read += 1;
                checksum = crc32c::crc32c_append(checksum, r.value.unwrap_or_default());
                if r.timestamp < seeded.first_timestamp_ms - 60_000 || r.timestamp > now {
                    bad_timestamp = Some(r.timestamp);
                }
            })
            .map_err(|e| CellError::Run(e.to_string()))?;
        if read > before {
            last_progress = Instant::now();
            continue;
        }
        if let Some(short) = short_read(read, seeded.records, offset, fetched.high_watermark) {
            return Err(CellError::guard(Guard::RecordsReadEqualSeeded, short));
        }
        *wait_ms = (*wait_ms * 2).clamp(1, FETCH_WAIT_CAP_MS);
        if last_progress.elapsed() > s.stall_timeout {
            return Ok(None);
        }
    }
    let cpu = CpuTime::now().since(cpu);
    let seconds = started.elapsed().as_secs_f64();
    if read != seeded.records || checksum != seeded.checksum {
        return Err(CellError::guard(
            Guard::RecordsReadEqualSeeded,
            format!(
                "read {read} records (checksum {checksum:#010x}), seeded {} (checksum {:#010x})",
                seeded.records, seeded.checksum
            ),
        ));
    }
    if let Some(ts) = bad_timestamp {
        return Err(CellError::guard(
            Guard::TimestampsFromClock,
            format!("a record's timestamp {ts} is not from the time the topic was seeded"),
        ));
    }
    Ok(Some(SweepRep {
        messages: read,
        seconds,
        cpu_us_per_msg: cpu.total_us() as f64 / read.max(1) as f64,
        msgs_per_sec: read as f64 / seconds.max(1e-9),
    }))
}

/// The Fetch guard: reading reached the broker's high watermark (-1: not said) with fewer records
/// than were seeded. Never a silent figure: an error naming both counts.
fn short_read(read: u64, seeded: u64, offset: i64, high_watermark: i64) -> Option<String> {
    (read < seeded && high_watermark >= 0 && offset >= high_watermark).then(|| {
        format!(
            "read {read} of the {seeded} records seeded: the broker's high watermark is \
             {high_watermark} and reading reached it"
        )
    })
}

/// Run one cell: fresh pinned connection, a warm-up of the same shape, then the repetitions. A stall
/// is retried up to 3 times, then the cell is abandoned (reported, never dropped).
pub async fn run_cell(
    s: &SweepSettings,
    cell: SweepCell,
    produce_topic: &str,
    seeded: &SeededTopic,
) -> SweepResult {
    let mut result = SweepResult::new(cell, CellStatus::Completed);
    let cluster = match pinned_cluster(s, &cell).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            result.negotiated = None;
            result.status = e.into();
            return result;
        }
    };
    result.negotiated = cluster.negotiated().get(cell.api());
    let layout = match cell {
        // A topic of its own per Produce cell: a partition that grows over the sweep would make the
        // broker's state (and so its speed) depend on the cell's position in the order.
        SweepCell::Produce { .. } => {
            let topic = format!("{produce_topic}-{}", cell.label().replace([' ', '='], "-"));
            cluster.ensure_topic(&topic, 1, 1).await
        }
        SweepCell::Fetch { .. } => cluster.metadata(&seeded.topic).await.map(|(_, l)| l),
    };
    let layout = match layout {
        Ok(l) => l,
        Err(e) => {
            result.negotiated_versions = cluster.negotiated().named().collect();
            result.status = CellStatus::Error {
                reason: e.to_string(),
                guard: None,
            };
            return result;
        }
    };
    // Warm-up (not measured), then the repetitions; each attempt may stall.
    for rep in 0..=s.repetitions {
        let warmup = rep == 0;
        loop {
            let outcome = match cell {
                SweepCell::Produce { workload, acks, .. } => {
                    let acks = if acks == SweepAcks::Zero {
                        Acks::None
                    } else {
                        Acks::All
                    };
                    let n = (workload.records_per_repetition() / s.scale_down)
                        .max(workload.records_per_request() as u64);
                    let n = if warmup {
                        (n / 5).max(workload.records_per_request() as u64)
                    } else {
                        n
                    };
                    produce_rep(&cluster, &layout, workload, acks, n, s).await
                }
                SweepCell::Fetch { max_bytes, .. } => {
                    let wait = result.fetch_max_wait_ms.get_or_insert(0);
                    fetch_rep(&cluster, &layout, seeded, max_bytes, s, wait).await
                }
            };
            match outcome {
                Ok(Some(r)) => {
                    if !warmup {
                        result.reps.push(r);
                    }
                    break;
                }
                Ok(None) if result.stall_retries < 3 => result.stall_retries += 1,
                Ok(None) => {
                    result.status = CellStatus::Abandoned {
                        reason: format!("no progress for {:?}, 3 retries", s.stall_timeout),
                    };
                    cluster.close(Duration::from_secs(1)).await;
                    result.negotiated_versions = cluster.negotiated().named().collect();
                    return result;
                }
                Err(e) => {
                    result.status = e.into();
                    cluster.close(Duration::from_secs(1)).await;
                    result.negotiated_versions = cluster.negotiated().named().collect();
                    return result;
                }
            }
        }
    }
    cluster.close(Duration::from_secs(2)).await;
    result.negotiated_versions = cluster.negotiated().named().collect();
    let anomalies = cluster.protocol_anomalies();
    if !anomalies.is_empty() {
        let what: Vec<String> = anomalies
            .iter()
            .map(|(kind, n)| format!("{n} × {kind}"))
            .collect();
        result.status = CellError::guard(
            Guard::NoProtocolAnomalies,
            format!(
                "{}: the broker's responses were not exactly their fields ({}); no figure is reported for it",
                cell.label(),
                what.join(", ")
            ),
        )
        .into();
        return result;
    }
    let cpu: Vec<f64> = result.reps.iter().map(|r| r.cpu_us_per_msg).collect();
    let rate: Vec<f64> = result.reps.iter().map(|r| r.msgs_per_sec).collect();
    let (cpu_median, spread) = median_and_spread(&cpu);
    result.cpu_us_per_msg = cpu_median;
    result.msgs_per_sec = median_and_spread(&rate).0;
    result.spread = spread;
    result.peak_rss_kib = peak_rss_kib();
    result
}

/// Something a completed cell does worse than the newest version of its group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SweepProblem {
    /// Client CPU per message, as a multiple of the newest version's.
    Cpu(f64),
    /// acks=0 throughput, as a fraction of the best version's in the group.
    Throughput(f64),
    /// Peak RSS, as a multiple of the newest version's (isolated cells only).
    Rss(f64),
}

/// A cell's verdict against the newest version of its group.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepVerdict {
    Ok,
    Problems(Vec<SweepProblem>),
    /// The spread of this cell or the newest is above the noise threshold: no verdict.
    InsideNoise,
    /// No completed newest version in the group.
    NoNewest,
    Abandoned,
    Error,
}

impl std::fmt::Display for SweepProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepProblem::Cpu(r) => write!(f, "CPU/msg {r:.2}× newest"),
            SweepProblem::Throughput(r) => {
                write!(f, "acks=0 throughput {:.0} % of the best", r * 100.0)
            }
            SweepProblem::Rss(r) => write!(f, "peak RSS {r:.2}× newest"),
        }
    }
}

impl std::fmt::Display for SweepVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepVerdict::Ok => f.write_str("ok"),
            SweepVerdict::Problems(p) => {
                let text: Vec<String> = p.iter().map(ToString::to_string).collect();
                f.write_str(&text.join("; "))
            }
            SweepVerdict::InsideNoise => f.write_str("inside noise floor"),
            SweepVerdict::NoNewest => f.write_str("no newest version to compare"),
            SweepVerdict::Abandoned => f.write_str("abandoned"),
            SweepVerdict::Error => f.write_str("error"),
        }
    }
}

impl Serialize for SweepVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The verdict of a completed cell against the newest version of its group: client CPU/msg within
/// 1.15× of the newest, and for acks=0 throughput within 10 % of the best version in the group.
/// With `check_rss` (cells isolated in their own processes, so that peak RSS is the cell's own), peak
/// RSS must also stay within 1.2× the newest version's.
pub fn verdict(
    cell: &SweepResult,
    group: &[&SweepResult],
    noise_threshold: f64,
    check_rss: bool,
) -> SweepVerdict {
    match &cell.status {
        CellStatus::Abandoned { .. } => return SweepVerdict::Abandoned,
        CellStatus::Error { .. } => return SweepVerdict::Error,
        CellStatus::Completed => {}
    }
    let newest = group
        .iter()
        .filter(|c| matches!(c.status, CellStatus::Completed))
        .max_by_key(|c| c.cell.version());
    let Some(newest) = newest else {
        return SweepVerdict::NoNewest;
    };
    if cell.spread > noise_threshold || newest.spread > noise_threshold {
        return SweepVerdict::InsideNoise;
    }
    let mut problems = Vec::new();
    let ratio = cell.cpu_us_per_msg / newest.cpu_us_per_msg;
    if ratio > 1.15 {
        problems.push(SweepProblem::Cpu(ratio));
    }
    if let SweepCell::Produce {
        acks: SweepAcks::Zero,
        ..
    } = cell.cell
    {
        let best = group
            .iter()
            .filter(|c| matches!(c.status, CellStatus::Completed))
            .map(|c| c.msgs_per_sec)
            .fold(0.0, f64::max);
        if cell.msgs_per_sec < 0.9 * best {
            problems.push(SweepProblem::Throughput(cell.msgs_per_sec / best));
        }
    }
    if check_rss && newest.peak_rss_kib > 0 {
        let rss = cell.peak_rss_kib as f64 / newest.peak_rss_kib as f64;
        if rss > 1.2 {
            problems.push(SweepProblem::Rss(rss));
        }
    }
    if problems.is_empty() {
        SweepVerdict::Ok
    } else {
        SweepVerdict::Problems(problems)
    }
}

/// Per-record cost growth from 100 to 1 000 records per request, per version and acks: the CPU per
/// message at `batch1000` over that at `batch100`, and its ratio to the newest version's growth.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    pub version: i16,
    pub acks: &'static str,
    pub batch100_us: f64,
    pub batch1000_us: f64,
    pub growth: f64,
    pub vs_newest: f64,
    /// More than 10 % worse than the newest version's growth.
    pub worse: bool,
}

pub fn growth(results: &[SweepResult]) -> Vec<Growth> {
    let cpu = |v: i16, w: Workload, a: &str| {
        results.iter().find_map(|r| match (&r.cell, &r.status) {
            (
                SweepCell::Produce {
                    version,
                    workload,
                    acks,
                },
                CellStatus::Completed,
            ) if *version == v && *workload == w && acks.name() == a => Some(r.cpu_us_per_msg),
            _ => None,
        })
    };
    let mut versions: Vec<i16> = results
        .iter()
        .filter(|r| matches!(r.cell, SweepCell::Produce { .. }))
        .map(|r| r.cell.version())
        .collect();
    versions.sort_unstable();
    versions.dedup();
    let mut out = Vec::new();
    for acks in ["0", "all"] {
        let g = |v| Some(cpu(v, Workload::Batch1000, acks)? / cpu(v, Workload::Batch100, acks)?);
        let Some(newest) = versions.iter().rev().find_map(|v| g(*v)) else {
            continue;
        };
        for &v in &versions {
            if let (Some(b100), Some(b1000)) = (
                cpu(v, Workload::Batch100, acks),
                cpu(v, Workload::Batch1000, acks),
            ) {
                let growth = b1000 / b100;
                out.push(Growth {
                    version: v,
                    acks,
                    batch100_us: b100,
                    batch1000_us: b1000,
                    growth,
                    vs_newest: growth / newest,
                    worse: growth > newest * 1.10,
                });
            }
        }
    }
    out
}

/// Results grouped by everything but the version, sorted by version within each group.
pub fn grouped(results: &[SweepResult]) -> Vec<(String, Vec<&SweepResult>)> {
    let mut groups: std::collections::BTreeMap<(ApiOrder, String), Vec<&SweepResult>> =
        Default::default();
    for r in results {
        let order = if matches!(r.cell, SweepCell::Produce { .. }) {
            0
        } else {
            1
        };
        groups.entry((order, r.cell.group())).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|((_, g), mut v)| {
            v.sort_by_key(|r| r.cell.version());
            (g, v)
        })
        .collect()
}

type ApiOrder = u8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaching_the_high_watermark_short_of_the_seeded_records_is_an_error_naming_both() {
        let e = short_read(4990, 5000, 5000, 5000).unwrap();
        assert!(e.contains("read 4990 of the 5000 records seeded"), "{e}");
        assert!(e.contains("high watermark is 5000"), "{e}");
        // Not yet at the end, or every record read, or the watermark not said: no verdict.
        assert_eq!(short_read(4990, 5000, 4990, 5000), None);
        assert_eq!(short_read(5000, 5000, 5000, 5000), None);
        assert_eq!(short_read(10, 5000, 10, -1), None);
    }
}
