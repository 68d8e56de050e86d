//! Tier 0: every Produce and Fetch codec version timed with no broker and no network, so that the
//! codec is the only variable. Each cell builds complete Produce requests (header, body, record
//! batch) or decodes complete Fetch responses (header, body, record batches), in blocks sized to
//! about `block_records` records so that timer resolution never matters, after warm-up blocks of the
//! same shape, repeated, in a seeded shuffled order. Baselines in the same run: the record batch
//! alone (framing cost = total − batch), and kafka-protocol's own batch encoder and decoder on the
//! same input.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use kbench_wire::batch::{RecordBatchBuilder, RecordHeader, now_ms};
use kbench_wire::fetch::{
    FETCH_VERSIONS, PartitionRecords, build_fetch_response, decode_fetch_response,
};
use kbench_wire::{ApiKey, BatchDecoder, Compression, encode_request};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::measure::{allocations, counting_allocations, median_and_spread};

/// The Produce versions timed in tier 0.
pub const PRODUCE_VERSIONS: std::ops::RangeInclusive<i16> = 3..=13;

/// A record's shape: an 8-byte key, two headers, and a value of this many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// 64-byte value.
    Small,
    /// 1 KiB value.
    #[serde(rename = "1k")]
    OneK,
    /// 100 KiB value.
    #[serde(rename = "100k")]
    HundredK,
}

impl Shape {
    pub const ALL: [Shape; 3] = [Shape::Small, Shape::OneK, Shape::HundredK];

    pub fn value_len(self) -> usize {
        match self {
            Shape::Small => 64,
            Shape::OneK => 1024,
            Shape::HundredK => 100 * 1024,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::Small => "small",
            Shape::OneK => "1k",
            Shape::HundredK => "100k",
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Shape::ALL
            .into_iter()
            .find(|x| x.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown shape {s:?} (expected small, 1k or 100k)"))
    }
}

/// What a cell times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// Produce: a complete request at `version` with kbench's batch encoder.
    ProduceRequest,
    /// Fetch: a complete response at `version` decoded with kbench's batch decoder.
    FetchResponse,
    /// kbench's record batch alone (encode for Produce, decode for Fetch).
    KbenchBatch,
    /// kafka-protocol's RecordBatchEncoder / RecordBatchDecoder on the same records.
    KafkaProtocolBatch,
}

/// Produce (encode) or Fetch (decode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Produce,
    Fetch,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellSpec {
    pub api: Api,
    pub subject: Subject,
    /// The protocol version, for request/response cells.
    pub version: Option<i16>,
    pub records: usize,
    pub shape: Shape,
    pub compression: CompressionName,
}

/// A compression codec by name, serialisable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CompressionName(#[serde(with = "compression_serde")] pub Compression);

mod compression_serde {
    use kbench_wire::Compression;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl CellSpec {
    /// A short label, e.g. `produce v9 small×1000 none`.
    pub fn label(&self) -> String {
        let what = match (self.subject, self.version) {
            (Subject::ProduceRequest | Subject::FetchResponse, Some(v)) => format!("v{v}"),
            (Subject::KbenchBatch, _) => "kbench batch".into(),
            (Subject::KafkaProtocolBatch, _) => "kafka-protocol batch".into(),
            _ => "?".into(),
        };
        let api = match self.api {
            Api::Produce => "produce",
            Api::Fetch => "fetch",
        };
        format!(
            "{api} {what} {}×{} {}",
            self.shape.name(),
            self.records,
            self.compression.0.name()
        )
    }

    /// Why the cell cannot run, if it cannot: zstd needs Produce v7+ / Fetch v10+ (KIP-110), and
    /// batches over 64 MiB are left out.
    pub fn not_applicable(&self) -> Option<String> {
        if self.compression.0 == Compression::Zstd
            && let Some(v) = self.version
        {
            let min = match self.api {
                Api::Produce => 7,
                Api::Fetch => 10,
            };
            if v < min {
                return Some(format!("zstd needs {:?} v{min}+", self.api));
            }
        }
        if self.records * self.shape.value_len() > 64 * 1024 * 1024 {
            return Some("batch over 64 MiB".into());
        }
        None
    }
}

/// How a cell is measured.
/// Timed repetitions per cell unless told otherwise (the median is reported); at least 9.
pub const DEFAULT_REPETITIONS: usize = 9;
/// Warm-up blocks per cell, of the cell's own shape.
pub const DEFAULT_WARMUP_BLOCKS: usize = 2;
/// Spread (IQR / median) above which a verdict is "inside noise floor".
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.15;
/// How far from the newest version a version may be and still be "within".
pub const DEFAULT_TOLERANCE: f64 = 0.05;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Method {
    pub warmup_blocks: usize,
    pub repetitions: usize,
    /// Records per timed block (fewer when the values are large: at most 32 MiB of values a block).
    pub block_records: usize,
}

/// The result document of a codec run (`kind: "codec"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodecDocument {
    #[serde(flatten)]
    pub header: crate::result::Header,
    pub seed: u64,
    pub isolated: bool,
    pub method: Method,
    pub matrix: Matrix,
    pub scaling: bool,
    pub noise_threshold: f64,
    pub tolerance: f64,
    pub allocations_counted: bool,
    pub duration_s: f64,
    pub cells: Vec<CellResult>,
}

/// One cell's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    pub spec: CellSpec,
    pub label: String,
    /// Why it did not run, if it did not.
    pub skipped: Option<String>,
    pub ops_per_block: usize,
    /// ns per record of every repetition, in the order run.
    pub ns_per_record_reps: Vec<f64>,
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub ns_per_record: f64,
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub ns_per_op: f64,
    /// Interquartile range / median of the repetitions.
    #[serde(deserialize_with = "crate::document::null_as_nan")]
    pub spread: f64,
    /// Allocations per record over the timed blocks; `None` when not counted.
    pub allocs_per_record: Option<f64>,
    /// Bytes of one request, response or batch.
    pub wire_bytes: usize,
}

/// The inputs a cell works on, prepared before anything is timed.
struct Input {
    key: [u8; 8],
    value: Vec<u8>,
    /// kafka-protocol's records for the same input.
    kp_records: Vec<Record>,
    /// The encoded batch (Fetch cells decode it).
    batch: Bytes,
    /// The complete Fetch response (Fetch response cells).
    fetch_frame: Option<Bytes>,
}

const HEADER_KEYS: [&[u8]; 2] = [b"trace-id", b"source"];
const HEADER_VALUES: [&[u8]; 2] = [b"0123456789abcdef", b"kbench"];
const TOPIC: &str = "kbench-codec";

fn headers() -> [RecordHeader<'static>; 2] {
    [
        RecordHeader {
            key: HEADER_KEYS[0],
            value: Some(HEADER_VALUES[0]),
        },
        RecordHeader {
            key: HEADER_KEYS[1],
            value: Some(HEADER_VALUES[1]),
        },
    ]
}

/// Why a codec cell could not be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// An encoder or decoder under test failed.
    #[error("{0}")]
    Codec(String),
    /// A decoder found a different number of records than were written.
    #[error("decoded {got} records, expected {want}")]
    Count { got: u64, want: usize },
    #[error("{api:?} has no {subject:?} cell")]
    NoSuchCell { api: Api, subject: Subject },
}

/// Any encoder's or decoder's error, as a codec failure.
fn codec(e: impl std::fmt::Display) -> CodecError {
    CodecError::Codec(e.to_string())
}

fn prepare(spec: &CellSpec) -> Result<Input, CodecError> {
    let key = 0x6b62_656e_6368_0001u64.to_be_bytes();
    let value: Vec<u8> = (0..spec.shape.value_len())
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let base = now_ms();
    let mut builder = RecordBatchBuilder::new(spec.compression.0);
    builder.start(base);
    for _ in 0..spec.records {
        builder.append(base, Some(&key), Some(&value), &headers());
    }
    let batch = builder.finish().map_err(codec)?;
    let key_b = Bytes::copy_from_slice(&key);
    let value_b = Bytes::from(value.clone());
    let kp_records = (0..spec.records)
        .map(|i| {
            let mut hs = IndexMap::new();
            for (k, v) in HEADER_KEYS.iter().zip(HEADER_VALUES) {
                hs.insert(
                    StrBytes::from_static_str(std::str::from_utf8(k).expect("ascii")),
                    Some(Bytes::from_static(v)),
                );
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: base,
                key: Some(key_b.clone()),
                value: Some(value_b.clone()),
                headers: hs,
            }
        })
        .collect();
    let fetch_frame = match (spec.subject, spec.version) {
        (Subject::FetchResponse, Some(v)) => Some(
            build_fetch_response(
                v,
                1,
                TOPIC,
                uuid::Uuid::from_u128(0x6b62_656e_6368),
                &[PartitionRecords {
                    partition: 0,
                    high_watermark: spec.records as i64,
                    records: batch.clone(),
                }],
            )
            .map_err(codec)?,
        ),
        _ => None,
    };
    Ok(Input {
        key,
        value,
        kp_records,
        batch,
        fetch_frame,
    })
}

fn kp_compression(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
    }
}

/// The reusable state of one cell's operation.
struct Worker<'a> {
    spec: CellSpec,
    input: &'a Input,
    builder: RecordBatchBuilder,
    decoder: BatchDecoder,
    out: BytesMut,
    client_id: StrBytes,
    topic_name: TopicName,
    topic_id: uuid::Uuid,
}

impl<'a> Worker<'a> {
    fn new(spec: CellSpec, input: &'a Input) -> Self {
        Worker {
            spec,
            input,
            builder: RecordBatchBuilder::new(spec.compression.0),
            decoder: BatchDecoder::new(),
            out: BytesMut::with_capacity(1024),
            client_id: StrBytes::from_static_str("kbench"),
            topic_name: TopicName(StrBytes::from_static_str(TOPIC)),
            topic_id: uuid::Uuid::from_u128(0x6b62_656e_6368),
        }
    }

    fn encode_batch(&mut self) -> Result<Bytes, CodecError> {
        let ts = now_ms();
        self.builder.start(ts);
        let hs = headers();
        for _ in 0..self.spec.records {
            self.builder
                .append(ts, Some(&self.input.key), Some(&self.input.value), &hs);
        }
        self.builder.finish().map_err(codec)
    }

    /// One operation; returns the bytes it produced or consumed.
    fn op(&mut self) -> Result<usize, CodecError> {
        match (self.spec.api, self.spec.subject) {
            (Api::Produce, Subject::ProduceRequest) => {
                let version = self.spec.version.ok_or_else(|| codec("no version"))?;
                let batch = self.encode_batch()?;
                let mut data = TopicProduceData::default().with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch)),
                ]);
                data = if version >= 13 {
                    data.with_topic_id(self.topic_id)
                } else {
                    data.with_name(self.topic_name.clone())
                };
                let request = ProduceRequest::default()
                    .with_acks(1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![data]);
                self.out.clear();
                encode_request(
                    &mut self.out,
                    ApiKey::Produce,
                    version,
                    1,
                    &self.client_id,
                    &request,
                )
                .map_err(codec)?;
                Ok(self.out.len())
            }
            (Api::Produce, Subject::KbenchBatch) => Ok(self.encode_batch()?.len()),
            (Api::Produce, Subject::KafkaProtocolBatch) => {
                self.out.clear();
                let options = RecordEncodeOptions {
                    version: 2,
                    compression: kp_compression(self.spec.compression.0),
                };
                RecordBatchEncoder::encode(&mut self.out, self.input.kp_records.iter(), &options)
                    .map_err(codec)?;
                Ok(self.out.len())
            }
            (Api::Fetch, Subject::FetchResponse) => {
                let version = self.spec.version.ok_or_else(|| codec("no version"))?;
                let frame = self
                    .input
                    .fetch_frame
                    .clone()
                    .ok_or_else(|| codec("no response"))?;
                let len = frame.len();
                let mut sink = 0usize;
                let n = decode_fetch_response(version, 1, frame, &mut self.decoder, |_, r| {
                    sink += r.value.map_or(0, <[u8]>::len) + r.header_count();
                })
                .map_err(codec)?;
                std::hint::black_box(sink);
                check_count(n, self.spec.records)?;
                Ok(len)
            }
            (Api::Fetch, Subject::KbenchBatch) => {
                let mut sink = 0usize;
                let summary = self
                    .decoder
                    .decode_all(&self.input.batch, |_, r| {
                        sink += r.value.map_or(0, <[u8]>::len) + r.header_count();
                    })
                    .map_err(codec)?;
                std::hint::black_box(sink);
                check_count(summary.records, self.spec.records)?;
                Ok(self.input.batch.len())
            }
            (Api::Fetch, Subject::KafkaProtocolBatch) => {
                let mut bytes = self.input.batch.clone();
                let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(codec)?;
                let n: usize = sets.iter().map(|s| s.records.len()).sum();
                std::hint::black_box(&sets);
                check_count(n as u64, self.spec.records)?;
                Ok(self.input.batch.len())
            }
            (api, subject) => Err(CodecError::NoSuchCell { api, subject }),
        }
    }
}

fn check_count(got: u64, want: usize) -> Result<(), CodecError> {
    if got as usize != want {
        return Err(CodecError::Count { got, want });
    }
    Ok(())
}

/// Measure one cell in this process.
pub fn run_cell(spec: CellSpec, method: Method) -> Result<CellResult, CodecError> {
    let label = spec.label();
    if let Some(why) = spec.not_applicable() {
        return Ok(CellResult {
            spec,
            label,
            skipped: Some(why),
            ops_per_block: 0,
            ns_per_record_reps: Vec::new(),
            ns_per_record: 0.0,
            ns_per_op: 0.0,
            spread: 0.0,
            allocs_per_record: None,
            wire_bytes: 0,
        });
    }
    let input = prepare(&spec)?;
    let mut worker = Worker::new(spec, &input);
    let value_cap = (32 * 1024 * 1024) / spec.shape.value_len();
    let per_block = method.block_records.min(value_cap).max(1);
    let ops_per_block = (per_block / spec.records.max(1)).max(1);
    let wire_bytes = worker.op()?;
    let block = |w: &mut Worker<'_>| -> Result<f64, CodecError> {
        let started = Instant::now();
        for _ in 0..ops_per_block {
            std::hint::black_box(w.op()?);
        }
        Ok(started.elapsed().as_nanos() as f64)
    };
    for _ in 0..method.warmup_blocks {
        block(&mut worker)?;
    }
    let counting = counting_allocations();
    let allocs_before = allocations();
    let mut reps = Vec::with_capacity(method.repetitions);
    for _ in 0..method.repetitions {
        let ns = block(&mut worker)?;
        reps.push(ns / (ops_per_block * spec.records.max(1)) as f64);
    }
    let allocs = allocations() - allocs_before;
    let (median, spread) = median_and_spread(&reps);
    let records_timed = (method.repetitions * ops_per_block * spec.records.max(1)) as f64;
    Ok(CellResult {
        spec,
        label,
        skipped: None,
        ops_per_block,
        ns_per_record_reps: reps,
        ns_per_record: median,
        ns_per_op: median * spec.records.max(1) as f64,
        spread,
        allocs_per_record: counting.then(|| allocs as f64 / records_timed),
        wire_bytes,
    })
}

/// Which cells to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Matrix {
    pub record_counts: Vec<usize>,
    pub shapes: Vec<Shape>,
    pub compressions: Vec<CompressionName>,
    pub apis: Vec<Api>,
}

impl Matrix {
    /// Every cell: each version of each API, plus the two batch baselines, per count, shape and codec.
    pub fn cells(&self) -> Vec<CellSpec> {
        let mut cells = Vec::new();
        for &api in &self.apis {
            for &records in &self.record_counts {
                for &shape in &self.shapes {
                    for &compression in &self.compressions {
                        let cell = |subject, version| CellSpec {
                            api,
                            subject,
                            version,
                            records,
                            shape,
                            compression,
                        };
                        match api {
                            Api::Produce => cells.extend(
                                PRODUCE_VERSIONS.map(|v| cell(Subject::ProduceRequest, Some(v))),
                            ),
                            Api::Fetch => cells.extend(
                                FETCH_VERSIONS.map(|v| cell(Subject::FetchResponse, Some(v))),
                            ),
                        }
                        cells.push(cell(Subject::KbenchBatch, None));
                        cells.push(cell(Subject::KafkaProtocolBatch, None));
                    }
                }
            }
        }
        cells
    }
}

/// Shuffle cells with a seeded PRNG: a constant order confounds version with position.
pub fn shuffle(cells: &mut [CellSpec], seed: u64) {
    cells.shuffle(&mut SmallRng::seed_from_u64(seed));
}

/// A version cell's verdict against the newest version of its group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CodecVerdict {
    /// The spread of this cell or the newest is above the noise threshold: no verdict.
    InsideNoise,
    /// More than the tolerance slower: the ratio to the newest.
    Slower(f64),
    /// More than the tolerance faster: the ratio to the newest.
    Faster(f64),
    /// Within the tolerance.
    Within { tolerance: f64 },
}

impl std::fmt::Display for CodecVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecVerdict::InsideNoise => f.write_str("inside noise floor"),
            CodecVerdict::Slower(r) => write!(f, "slower ({:+.1} %)", (r - 1.0) * 100.0),
            CodecVerdict::Faster(r) => write!(f, "faster ({:+.1} %)", (r - 1.0) * 100.0),
            CodecVerdict::Within { tolerance } => write!(f, "within ±{:.0} %", tolerance * 100.0),
        }
    }
}

/// The verdict for a version cell against the newest version of its group.
pub fn verdict(
    cell: &CellResult,
    newest: &CellResult,
    tolerance: f64,
    noise_threshold: f64,
) -> CodecVerdict {
    if cell.spread > noise_threshold || newest.spread > noise_threshold {
        return CodecVerdict::InsideNoise;
    }
    let ratio = cell.ns_per_record / newest.ns_per_record;
    if ratio > 1.0 + tolerance {
        CodecVerdict::Slower(ratio)
    } else if ratio < 1.0 - tolerance {
        CodecVerdict::Faster(ratio)
    } else {
        CodecVerdict::Within { tolerance }
    }
}

/// Group key of cells compared with each other: same API, shape, count and compression.
pub type GroupKey = (Api, Shape, usize, CompressionName);

/// Group results for reporting.
pub fn groups(results: &[CellResult]) -> BTreeMap<GroupKey, Vec<&CellResult>> {
    let mut g: BTreeMap<GroupKey, Vec<&CellResult>> = BTreeMap::new();
    for r in results {
        g.entry((r.spec.api, r.spec.shape, r.spec.records, r.spec.compression))
            .or_default()
            .push(r);
    }
    for cells in g.values_mut() {
        cells.sort_by_key(|c| (c.spec.subject, c.spec.version));
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method() -> Method {
        Method {
            warmup_blocks: 1,
            repetitions: 3,
            block_records: 2_000,
        }
    }

    #[test]
    fn every_cell_kind_runs_and_reports_its_size() {
        let matrix = Matrix {
            record_counts: vec![10],
            shapes: vec![Shape::Small],
            compressions: vec![
                CompressionName(Compression::None),
                CompressionName(Compression::Zstd),
            ],
            apis: vec![Api::Produce, Api::Fetch],
        };
        let cells = matrix.cells();
        assert_eq!(cells.len(), 2 * (11 + 2) + 2 * (15 + 2));
        for spec in cells {
            let r = run_cell(spec, method()).unwrap();
            if r.skipped.is_some() {
                assert_eq!(spec.compression.0, Compression::Zstd, "{}", r.label);
                continue;
            }
            assert_eq!(r.ns_per_record_reps.len(), 3, "{}", r.label);
            assert!(r.ns_per_record > 0.0 && r.wire_bytes > 0, "{}", r.label);
        }
    }

    #[test]
    fn median_and_spread_are_those_of_the_sample() {
        let (m, s) = median_and_spread(&[10.0, 11.0, 12.0, 13.0, 14.0]);
        assert_eq!(m, 12.0);
        assert!((s - 2.0 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn seeded_shuffle_is_repeatable_and_seed_dependent() {
        let matrix = Matrix {
            record_counts: vec![1, 10],
            shapes: vec![Shape::Small],
            compressions: vec![CompressionName(Compression::None)],
            apis: vec![Api::Produce, Api::Fetch],
        };
        let (mut a, mut b, mut c) = (matrix.cells(), matrix.cells(), matrix.cells());
        shuffle(&mut a, 1);
        shuffle(&mut b, 1);
        shuffle(&mut c, 2);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn verdicts() {
        let cell = |ns: f64, spread: f64| CellResult {
            spec: CellSpec {
                api: Api::Fetch,
                subject: Subject::FetchResponse,
                version: Some(4),
                records: 1,
                shape: Shape::Small,
                compression: CompressionName(Compression::None),
            },
            label: String::new(),
            skipped: None,
            ops_per_block: 1,
            ns_per_record_reps: vec![],
            ns_per_record: ns,
            ns_per_op: ns,
            spread,
            allocs_per_record: None,
            wire_bytes: 1,
        };
        assert_eq!(
            verdict(&cell(103.0, 0.01), &cell(100.0, 0.01), 0.05, 0.15).to_string(),
            "within ±5 %"
        );
        assert!(
            verdict(&cell(120.0, 0.01), &cell(100.0, 0.01), 0.05, 0.15)
                .to_string()
                .starts_with("slower")
        );
        assert!(
            verdict(&cell(80.0, 0.01), &cell(100.0, 0.01), 0.05, 0.15)
                .to_string()
                .starts_with("faster")
        );
        assert_eq!(
            verdict(&cell(120.0, 0.2), &cell(100.0, 0.01), 0.05, 0.15),
            CodecVerdict::InsideNoise
        );
    }
}
