//! `kbench produce`'s and `kbench quickstart`'s flags, and the one conversion of flags and client
//! properties into the spec (the spec's `validate()` the gate).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use kbench_bench::produce::sizes::RecordSize;
use kbench_bench::schema::ValueSchemaSpec;
use kbench_bench::shape::{LoadShape, Scenario};
use kbench_bench::{Keys, Payload, ProduceSpec};
use kbench_client::{ConnectionSettings, ProducerProperties};
use kbench_wire::{ApiKey, Compression, Pins};

use crate::args::{
    non_negative_i32, non_negative_u64, parse_acks, parse_compression, parse_duration,
    parse_interval_ms, parse_throughput, positive_i16, positive_i32, positive_u64, positive_usize,
    set, spec_error,
};

#[derive(Debug, Args, Default)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub limits: crate::args::LimitArgs,

    #[command(flatten)]
    pub distributed: crate::coordinator::DistributedArgs,

    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,

    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    #[command(flatten)]
    pub fault: crate::faults::FaultArgs,

    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic to produce to; created when missing (default kbench-perf).
    #[arg(long)]
    pub topic: Option<String>,

    /// Number of records to produce (default 1000000).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_u64)]
    pub num_records: Option<u64>,

    /// Size of each record's value in bytes (default 100), a range MIN..MAX drawn uniformly
    /// for each record (e.g. 100..1000), or sizes with weights drawn for each record
    /// (e.g. 100:0.7,1000:0.25,10000:0.05; the weights are normalised).
    #[arg(long, conflicts_with = "payload_file", allow_negative_numbers = true, value_parser = RecordSize::parse)]
    pub record_size: Option<RecordSize>,

    /// Each record's key: none (the default: unkeyed, batches round-robin over partitions),
    /// round-robin[:COUNT], random[:COUNT] or zipf[:COUNT[:EXPONENT]] over COUNT keys (default
    /// 10000, exponent 1.0). Keyed records go to the partition Kafka's default partitioner picks
    /// (murmur2 of the key).
    #[arg(long, value_parser = Keys::parse)]
    pub keys: Option<Keys>,

    /// Keys drawn uniformly from N (kgo-verifier's --key-set-cardinality): --keys random:N.
    #[arg(long, value_name = "N", conflicts_with = "keys", value_parser = clap::value_parser!(u32).range(1..))]
    pub key_space: Option<u32>,

    /// The share of keyed records written as tombstones (a null value), 0 to 1, drawn from
    /// --seed: a compacted topic deletes their keys. Needs --keys or --key-space.
    #[arg(long, value_name = "P", value_parser = crate::args::share, allow_negative_numbers = true)]
    pub tombstones: Option<f64>,

    /// Write every key's last acknowledged value (a CRC-32C, or null for a tombstone) to FILE
    /// when the run ends: what `kbench consume --latest-values FILE` checks a (compacted) topic
    /// against. Needs keyed records and acks.
    #[arg(long, value_name = "FILE", conflicts_with = "find_max_rate")]
    pub latest_values: Option<PathBuf>,

    /// A topic config for a topic the run creates, KEY=VALUE (kafka-topics' --config), e.g.
    /// cleanup.policy=compact; repeatable. A topic that exists keeps its own.
    #[arg(long = "topic-config", value_name = "KEY=VALUE", value_parser = crate::args::topic_config)]
    pub topic_configs: Vec<(String, String)>,

    /// File whose lines (split by --payload-delimiter) are the record values, chosen at random.
    #[arg(long)]
    pub payload_file: Option<PathBuf>,

    /// Each record's value is its index in the run in decimal ("0", "1", …), as Kafka 4.x's
    /// kafka-producer-perf-test --payload-monotonic (each repetition counts from 0 again; not with
    /// --agents).
    #[arg(long, conflicts_with_all = ["payload_file", "record_size"])]
    pub payload_monotonic: bool,

    /// The number of records to treat as warmup; these initial records will not be included in
    /// steady-state statistics. An additional summary line will be printed describing the
    /// steady-state statistics. (default: 0). Kafka 4.x's flag (KIP-1052); a negative value is
    /// 0. With --repetitions, each repetition's first N records; not with --find-max-rate or
    /// --agents.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = warmup_records, conflicts_with = "find_max_rate")]
    pub warmup_records: Option<u64>,

    /// At the end, print the run's figures as Kafka's tool prints its producer's metrics
    /// (`Metric Name   Value`): under Java's names (producer-metrics) where the figure means the
    /// same, in kbench-producer-metrics where it is kbench's own.
    #[arg(long)]
    pub print_metrics: bool,

    /// Values generated from this Avro schema (.avsc), Protobuf file (.proto) or JSON Schema (with
    /// $schema, or *.schema.json), seeded, and written in Confluent's wire format (magic byte,
    /// schema id, Protobuf's message indexes, the encoded value) as Confluent's serializers write
    /// them. The schema is
    /// registered in the Schema Registry named by -X schema.registry.url=URL (subject from
    /// value.subject.name.strategy, default TopicNameStrategy: TOPIC-value;
    /// basic.auth.user.info=USER:PASSWORD; auto.register.schemas=false to look it up instead), or
    /// written with the id -X use.schema.id=ID. Lengths, ranges and value sets from the schema's
    /// `arg.properties` (Confluent's avro-random-generator's annotation). --schema-values distinct
    /// values are generated before the load; each record takes one at random.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["payload_file", "record_size", "payload_monotonic"])]
    pub value_schema: Option<PathBuf>,

    /// Keys generated from this schema (.avsc, .proto or JSON Schema), as --value-schema makes
    /// values: one per key number of --keys (which must give a count: round-robin:N, random:N or
    /// zipf:N:S), registered as TOPIC-key (key.subject.name.strategy).
    #[arg(long, value_name = "FILE")]
    pub key_schema: Option<PathBuf>,

    /// With a .proto --key-schema: the message to generate (default: the file's first message).
    #[arg(long, value_name = "NAME", requires = "key_schema")]
    pub key_message: Option<String>,

    /// The Schema Registry for --value-schema and --key-schema (the same as -X
    /// schema.registry.url=URL).
    #[arg(long, value_name = "URL")]
    pub schema_registry_url: Option<String>,

    #[command(flatten)]
    pub schema: crate::args::SchemaValueArgs,

    /// Delimiter between payloads in --payload-file (default: a newline).
    #[arg(long)]
    pub payload_delimiter: Option<String>,

    /// Throttle to about this many records/s; -1 (the default) means unthrottled.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_throughput)]
    pub throughput: Option<f64>,

    /// Stop after this long even if --num-records were not all sent (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// A rate ramp, e.g. '0..100000/s over 60s': the rate moves linearly; the run ends with it.
    #[arg(long, value_parser = LoadShape::parse_ramp, conflicts_with_all = ["throughput", "steps", "bursts", "scenario", "find_max_rate"])]
    pub ramp: Option<LoadShape>,

    /// Rate steps, e.g. '1000,5000,10000/s every 30s': each rate held in turn.
    #[arg(long, value_parser = LoadShape::parse_steps, conflicts_with_all = ["throughput", "bursts", "scenario", "find_max_rate"])]
    pub steps: Option<LoadShape>,

    /// Bursts over --throughput for --duration, e.g. '50000/s for 1s every 10s'.
    #[arg(long, requires_all = ["throughput", "duration"], conflicts_with_all = ["scenario", "find_max_rate"])]
    pub bursts: Option<String>,

    /// A scenario file (kbench's YAML): phases, each a duration and a rate or a ramp.
    #[arg(long, conflicts_with_all = ["throughput", "find_max_rate"])]
    pub scenario: Option<PathBuf>,

    /// acks: 0, 1 or all (-1). Default: all, as Kafka's producer.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_acks)]
    pub acks: Option<kbench_client::Acks>,

    /// Compression: none, gzip, snappy, lz4 or zstd.
    #[arg(long, value_parser = parse_compression)]
    pub compression: Option<Compression>,

    /// Upper bound of a record batch in bytes (batch.size). Default 16384.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub batch_size: Option<usize>,

    /// How long a batch may wait for more records, in ms (linger.ms). Default 5.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative_u64)]
    pub linger_ms: Option<u64>,

    /// Requests in flight per broker connection. Default 5.
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub max_in_flight: Option<usize>,

    /// Partitions when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub partitions: Option<i32>,

    /// Replication factor when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i16)]
    pub replication_factor: Option<i16>,

    /// Produce to this partition only (default: round-robin per batch over all partitions).
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative_i32)]
    pub partition: Option<i32>,

    #[command(flatten)]
    pub pins: crate::args::PinArgs,

    /// Client property, Java or librdkafka name (repeatable): -X linger.ms=10
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub property: Vec<String>,

    /// Producer properties, as kafka-producer-perf-test takes them: --producer-props acks=1 linger.ms=5
    /// (Kafka 4.x's name, KIP-1147: --command-property).
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE", visible_alias = "command-property")]
    pub producer_props: Vec<String>,

    /// A properties file, as the Kafka tools take it (security.protocol, ssl.*, and any producer
    /// property); -X and --producer-props override it. Repeatable.
    #[arg(
        long = "producer.config",
        visible_alias = "command-config",
        value_name = "FILE"
    )]
    pub producer_config: Vec<PathBuf>,

    /// Progress line interval in ms (kafka-producer-perf-test's unit, default 5000); "5s" also works.
    #[arg(long, value_parser = parse_interval_ms)]
    pub reporting_interval: Option<Duration>,

    #[command(flatten)]
    pub output: crate::args::OutputArgs,

    /// Stamp every record (producer id, sequence, CRC-32C of the value, in a `kbench-verify`
    /// header) and read the topic back after the run: lost, duplicated, reordered, corrupted and
    /// unexpected records land in the result (`verification`); exit code 5 when any was lost,
    /// reordered or corrupted.
    #[arg(long, conflicts_with = "find_max_rate")]
    pub verify: bool,

    /// Produce in transactions under this `transactional.id` (kafka-producer-perf-test's flag):
    /// InitProducerId at the transaction coordinator, AddPartitionsToTxn, and EndTxn as each
    /// transaction ends. Implies enable.idempotence=true. The broker must offer EndTxn.
    #[arg(long, value_name = "ID")]
    pub transactional_id: Option<String>,

    /// How long each transaction stays open before it is committed, in ms (default 3000, as
    /// kafka-producer-perf-test).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=900_000))]
    pub transaction_duration_ms: Option<u64>,

    /// The share of transactions aborted on purpose as they end, 0 to 1 (kgo-verifier's flag),
    /// drawn from --seed: a `read_committed` reader must see none of their records (with
    /// --verify, the read-back checks exactly that). Only with --transactional-id.
    #[arg(long, value_name = "P", value_parser = crate::args::share, allow_negative_numbers = true)]
    pub transaction_abort_rate: Option<f64>,

    /// Seed for the payload generator (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Run the measured phase this many times (same topic, same connections); the result keeps each
    /// repetition's figures for `kbench compare` (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub repetitions: Option<usize>,

    #[command(flatten)]
    pub slo: crate::args::SloArgs,

    /// Search for the highest rate the target sustains: short throttled steps, doubling from
    /// 10000 records/s, then bisecting; each step is reported and the result is the chosen step's.
    #[arg(long, conflicts_with_all = ["throughput", "duration", "repetitions"])]
    pub find_max_rate: bool,

    /// --find-max-rate: each step's length (default 5s).
    #[arg(long, value_parser = parse_duration, requires = "find_max_rate")]
    pub step_duration: Option<Duration>,

    /// --find-max-rate: at most this many steps (default 12).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize, requires = "find_max_rate")]
    pub max_steps: Option<usize>,
}

#[derive(Debug, Args)]
pub struct QuickstartArgs {
    /// How long to produce.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Where to write the result document (default: kbench-results/quickstart-<time>.json).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Everything resolved from the command line, before any connection is made.
pub(crate) struct Plan {
    pub(crate) connection: ConnectionSettings,
    pub(crate) pins: Pins,
    pub(crate) spec: ProduceSpec,
    pub(crate) slo: Option<Vec<kbench_bench::slo::Condition>>,
    /// `--key-schema`: the keys to prepare before the load, into `spec.key_values`.
    pub(crate) key_schema: Option<ValueSchemaSpec>,
    /// `--value-schema`: what to prepare before the load (registry I/O), into `spec.payload`.
    pub(crate) value_schema: Option<ValueSchemaSpec>,
}

/// Flags and properties → the spec: properties first (`-X`, then `--producer-props`), explicit flags
/// over them, everything else the spec's default. An error names the flag or property.
pub(crate) fn plan(args: &ProduceArgs) -> Result<Plan, String> {
    let mut client = ProducerProperties::default();
    let properties = crate::args::client_properties(
        &args.producer_config,
        &[
            ("-X", &args.property),
            ("--producer-props", &args.producer_props),
        ],
        |source, k, v| client.apply(source, k, v),
    )?;
    client.finish().map_err(|e| e.to_string())?;
    if let Some(bs) = &args.bootstrap_server {
        client.connection.bootstrap_servers = Some(bs.clone());
    }
    let producer = &mut client.producer;
    set(&mut producer.acks, args.acks);
    set(&mut producer.compression, args.compression);
    set(&mut producer.batch_size, args.batch_size);
    set(
        &mut producer.linger,
        args.linger_ms.map(Duration::from_millis),
    );
    set(&mut producer.max_in_flight, args.max_in_flight);
    if let Some(id) = &args.transactional_id {
        if id.is_empty() {
            return Err("--transactional-id: must not be empty".into());
        }
        producer.transactional_id = Some(id.clone());
    }
    if producer.transactional_id.is_none() {
        for (given, flag) in [
            (
                args.transaction_duration_ms.is_some(),
                "--transaction-duration-ms",
            ),
            (
                args.transaction_abort_rate.is_some(),
                "--transaction-abort-rate",
            ),
        ] {
            if given {
                return Err(format!(
                    "{flag}: only with --transactional-id (or -X transactional.id=…)"
                ));
            }
        }
    }
    let pins = args.pins.pins(ProduceSpec::APIS)?;
    let compression = client.producer.compression;
    if let Some(v) = pins.get(ApiKey::Produce)
        && v < compression.min_produce_version()
    {
        return Err(format!(
            "--pin produce={v} with --compression {}: {} needs Produce v{} or later (KIP-110)",
            compression.name(),
            compression.name(),
            compression.min_produce_version()
        ));
    }
    let mut spec = ProduceSpec {
        properties,
        producer: client.producer.clone(),
        ..ProduceSpec::default()
    };
    if let Some(path) = &args.payload_file {
        let delimiter = args.payload_delimiter.as_deref().unwrap_or("\\n");
        spec.payload = Payload::Lines(read_payloads(path, delimiter)?);
        spec.payload_file = Some(path.display().to_string());
    } else if args.payload_monotonic {
        spec.payload = Payload::Monotonic;
    } else if let Some(size) = &args.record_size {
        spec.payload = match size {
            RecordSize::Span(s) if s.min == s.max => Payload::Random { size: s.min },
            RecordSize::Span(s) => Payload::Uniform {
                min: s.min,
                max: s.max,
            },
            // One size is a fixed size, whatever its weight.
            RecordSize::Weighted(d) if d.buckets().len() == 1 => Payload::Random {
                size: d.buckets()[0].size,
            },
            RecordSize::Weighted(d) => Payload::Weighted {
                sizes: d.clone(),
                random_ratio: None,
            },
        };
    }
    set(&mut spec.keys, args.keys);
    if let Some(n) = args.key_space {
        spec.keys = Keys::Random { count: n };
    }
    set(&mut spec.tombstones, args.tombstones);
    spec.latest_values = args.latest_values.is_some();
    spec.topic_configs = args.topic_configs.clone();
    if spec.keys == Keys::None {
        for (given, flag) in [
            (args.tombstones.is_some(), "--tombstones"),
            (args.latest_values.is_some(), "--latest-values"),
        ] {
            if given {
                return Err(format!(
                    "{flag}: needs keyed records (--keys or --key-space)"
                ));
            }
        }
    }
    set(&mut spec.topic, args.topic.clone());
    set(&mut spec.num_records, args.num_records);
    set(&mut spec.partitions, args.partitions);
    set(&mut spec.replication_factor, args.replication_factor);
    set(&mut spec.reporting_interval, args.reporting_interval);
    set(&mut spec.timeline_interval, args.output.timeline_interval);
    set(&mut spec.repetitions, args.repetitions);
    set(&mut spec.seed, args.seed);
    spec.verify = args.verify;
    set(
        &mut spec.transaction_duration,
        args.transaction_duration_ms.map(Duration::from_millis),
    );
    set(
        &mut spec.transaction_abort_rate,
        args.transaction_abort_rate,
    );
    spec.duration = args.duration;
    spec.partition = args.partition;
    spec.throughput = args.throughput.filter(|t| *t > 0.0);
    spec.shape = match (&args.ramp, &args.steps, &args.bursts, &args.scenario) {
        (Some(s), ..) | (_, Some(s), ..) => Some(s.clone()),
        (_, _, Some(b), _) => {
            let base = spec.throughput.take().unwrap_or(0.0);
            let total = args.duration.unwrap_or_default();
            Some(LoadShape::parse_bursts(b, base, total).map_err(|e| format!("--bursts {e}"))?)
        }
        (_, _, _, Some(path)) => Some(Scenario::read(path).map_err(|e| format!("--scenario {e}"))?),
        _ => None,
    };
    // A shape ends the run; the record count only bounds it when given.
    if spec.shape.is_some() && args.num_records.is_none() {
        spec.num_records = u64::MAX;
    }
    set(&mut spec.warmup_records, args.warmup_records);
    spec.limits = args.limits.limits();
    // The spec is the gate; its warm-up refusal is said in kafka-producer-perf-test's words.
    spec.validate().map_err(|e| match e.field {
        "warmup_records" => WARMUP_NOT_FEWER.to_string(),
        _ => spec_error(&e),
    })?;
    let slo = args.slo.conditions("produce")?;
    let (value_schema, key_schema) = schemas(args, &client.serializer, &spec)?;
    Ok(Plan {
        connection: client.connection,
        pins,
        spec,
        slo,
        value_schema,
        key_schema,
    })
}

/// `--value-schema`, `--key-schema` and the serializer's properties: the files read, the rest
/// checked when they are prepared. The serializer's properties without a schema are refused: they
/// would do nothing.
fn schemas(
    args: &ProduceArgs,
    serializer: &std::collections::BTreeMap<String, String>,
    spec: &ProduceSpec,
) -> Result<(Option<ValueSchemaSpec>, Option<ValueSchemaSpec>), String> {
    if args.value_schema.is_none() && args.key_schema.is_none() {
        if args.schema_registry_url.is_some() {
            return Err("--schema-registry-url: only with --value-schema or --key-schema".into());
        }
        if let Some(key) = serializer.keys().next() {
            return Err(format!(
                "{key}: a serializer property; only with --value-schema or --key-schema FILE"
            ));
        }
        return Ok((None, None));
    }
    let mut serializer = serializer.clone();
    if let Some(url) = &args.schema_registry_url {
        serializer.insert("schema.registry.url".into(), url.clone());
    }
    let read = |path: &PathBuf, flag: &str, role, message: &Option<String>, pool| {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{flag} {file}: {e}"))?;
        Ok::<_, String>(ValueSchemaSpec {
            file,
            text,
            topic: spec.topic.clone(),
            serializer: serializer.clone(),
            pool,
            seed: spec.seed,
            message: message.clone(),
            role,
            template: None,
            hints: Vec::new(),
        })
    };
    let value = match &args.value_schema {
        Some(path) => {
            Some(
                args.schema
                    .value_spec(path, &spec.topic, serializer.clone(), spec.seed)?,
            )
        }
        None => None,
    };
    let key = match &args.key_schema {
        Some(path) if spec.keys.count() == 0 => {
            return Err(format!(
                "--key-schema {}: needs --keys with a count (round-robin:N, random:N or zipf:N:S): N keys are generated from it",
                path.display()
            ));
        }
        Some(path) => Some(read(
            path,
            "--key-schema",
            kbench_bench::schema::Role::Key,
            &args.key_message,
            spec.keys.count() as usize,
        )?),
        None => None,
    };
    Ok((value, key))
}

/// kafka-producer-perf-test's error for a warm-up as long as the test, after the flag's name.
const WARMUP_NOT_FEWER: &str = "--warmup-records: The value for --warmup-records must be strictly fewer than the number of records in the test, --num-records.";

/// `--warmup-records`: a whole number; a negative one is 0, as Kafka's tool takes it.
fn warmup_records(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) => Ok(n.clamp(0, u64::MAX as i128) as u64),
        Err(_) => Err("expected a whole number".into()),
    }
}

fn read_payloads(path: &Path, delimiter: &str) -> Result<Vec<Bytes>, String> {
    let text = kbench_client::input::read(path, kbench_client::input::PAYLOAD)
        .map_err(|e| format!("--payload-file {}: {e}", path.display()))?;
    let delimiter = delimiter.replace("\\n", "\n").replace("\\t", "\t");
    if delimiter.is_empty() {
        return Err("--payload-delimiter: must not be empty".into());
    }
    let text = String::from_utf8(text)
        .map_err(|_| format!("--payload-file {}: not UTF-8 text", path.display()))?;
    let lines: Vec<Bytes> = text
        .split(delimiter.as_str())
        .filter(|l| !l.is_empty())
        .map(|l| Bytes::copy_from_slice(l.as_bytes()))
        .collect();
    if lines.is_empty() {
        return Err(format!(
            "--payload-file {}: no payloads in it",
            path.display()
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_records_as_kafka_s_tool_takes_them() {
        assert_eq!(warmup_records("-5"), Ok(0));
        assert_eq!(warmup_records("7"), Ok(7));
        assert!(warmup_records("x").is_err());
        let args = |warmup: u64, records: Option<u64>| ProduceArgs {
            warmup_records: Some(warmup),
            num_records: records,
            ..ProduceArgs::default()
        };
        assert_eq!(
            plan(&args(10, Some(10))).err().as_deref(),
            Some(WARMUP_NOT_FEWER)
        );
        assert_eq!(
            plan(&args(9, Some(10))).map(|p| p.spec.warmup_records).ok(),
            Some(9)
        );
        // Against the default record count when --num-records is not given.
        assert!(plan(&args(1_000_000, None)).is_err());
        assert_eq!(
            plan(&args(0, Some(1))).map(|p| p.spec.warmup_records).ok(),
            Some(0)
        );
    }
}
