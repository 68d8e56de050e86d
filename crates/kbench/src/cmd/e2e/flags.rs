//! `kbench e2e`'s flags, and the one conversion of flags into the spec (the spec's `validate()` the
//! gate); the REST Proxy driver's settings from its flags.
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use kbench_bench::e2e::{CommitMode, E2eMode, E2eSpec, ReplySpec, RestApi, RestSpec, Span};
use kbench_bench::spec::parse_positive_span;
use kbench_client::Acks;
use kbench_wire::Compression;

use crate::args::{
    parse_count_span, parse_duration, parse_interval_span, positive_i32, positive_usize, set,
    spec_error,
};

#[derive(Debug, Args, Default)]
pub struct E2eArgs {
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

    /// With --agents: the agent that runs the consumer (default: the first); the producers are
    /// split over the others.
    #[arg(long, value_name = "URL")]
    pub consumer_agent: Option<String>,

    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,

    /// Kafka bootstrap servers, host:port[,host:port…]. Without it, kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Topic; created when missing (default kbench-e2e).
    #[arg(long)]
    pub topic: Option<String>,

    /// Partitions when the topic is created (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub partitions: Option<i32>,

    /// Parallel producers, each with its own connection (default 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_usize)]
    pub producers: Option<usize>,

    /// Wait before each producer's next batch, a range inclusive at both ends: 100..100ms (the
    /// default), 5..50ms, 1s.
    #[arg(long, value_parser = parse_interval_span)]
    pub batch_interval: Option<Span<u64>>,

    /// Each record's value size in bytes, a range: 1024 (the default), 100..2000.
    #[arg(long, value_parser = parse_positive_span)]
    pub payload_size: Option<Span<usize>>,

    /// Values generated from this Avro (.avsc), Protobuf (.proto) or JSON Schema file, as
    /// `kbench produce --value-schema` makes them: registered in --schema-registry-url (or -X
    /// schema.registry.url=URL; subject and credentials from -X value.subject.name.strategy,
    /// basic.auth.user.info, …), or written with -X use.schema.id=ID; framed in Confluent's wire
    /// format. With a registry, the consumer decodes every value it reads (`value_decoding`).
    #[arg(long, value_name = "FILE", conflicts_with = "payload_size")]
    pub value_schema: Option<PathBuf>,

    #[command(flatten)]
    pub schema: crate::args::SchemaValueArgs,

    /// Records per produce request, a range: 1 (the default), 4, 1..10.
    #[arg(long, value_parser = parse_count_span)]
    pub messages_per_batch: Option<Span<usize>>,

    /// Consumer commits: `sync` (the default: after every poll, awaited) or an interval for
    /// asynchronous commits (10s).
    #[arg(long)]
    pub commit: Option<CommitMode>,

    /// How long a poll (Fetch) may wait for data (fetch.max.wait.ms; default 10ms).
    #[arg(long, value_parser = parse_duration)]
    pub consume_wait: Option<Duration>,

    /// Fetch max bytes per poll (default 52428800).
    #[arg(long, allow_negative_numbers = true, value_parser = positive_i32)]
    pub consume_max_bytes: Option<i32>,

    /// Load phase length (e.g. 30s); without it, runs until Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Records to send in all, split over the producers; the load ends when each has sent its
    /// share (or at --duration, whichever comes first).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::args::positive_u64)]
    pub num_records: Option<u64>,

    /// After the producers stop, wait at most this long for the consumer to catch up (default 10s).
    #[arg(long, value_parser = parse_duration)]
    pub drain: Option<Duration>,

    /// acks: 0, 1 or all (-1; the default).
    #[arg(long, allow_negative_numbers = true)]
    pub acks: Option<Acks>,

    /// Compression: none (the default), gzip, snappy, lz4 or zstd.
    #[arg(long)]
    pub compression: Option<Compression>,

    /// Consumer group id (default: a fresh kbench-e2e-<id> per run).
    #[arg(long)]
    pub group: Option<String>,

    /// Consumer client id (default: a fresh kbench-consumer-<id> per run); with --consumers N,
    /// member k is <id>-k.
    #[arg(long)]
    pub consumer_id: Option<String>,

    /// Members of the run's consumer group (default 1, at most 100): each a consumer of its own,
    /// reading the partitions the group assigns it; records read again across a handover are
    /// counted duplicated. With --group-instance-id ID, member k is ID-k. Not through a REST
    /// Proxy, nor over --agents.
    #[arg(long, value_name = "N")]
    pub consumers: Option<usize>,

    /// The consumer's group protocol (Java's group.protocol): classic (JoinGroup, SyncGroup,
    /// Heartbeat; the default) or consumer (KIP-848's ConsumerGroupHeartbeat, where the broker
    /// serves it).
    #[arg(long, value_name = "classic|consumer", value_parser = parse_group_protocol)]
    pub group_protocol: Option<kbench_client::config::GroupProtocol>,

    /// The consumer's group.instance.id (KIP-345): a static member, which the coordinator keeps
    /// through a restart within its session. Checked as Kafka checks it; not through a REST
    /// Proxy.
    #[arg(long, value_name = "ID", value_parser = parse_group_instance_id)]
    pub group_instance_id: Option<String>,

    /// The consumers' session (Java's session.timeout.ms; default 45s): how long the coordinator
    /// waits for a member that stopped heartbeating (`--fault at=T consumer-crash=1`) before it
    /// hands on its partitions. Classic protocol only.
    #[arg(long, value_parser = parse_duration)]
    pub session_timeout: Option<Duration>,

    /// The consumers' heartbeat interval (Java's heartbeat.interval.ms; default 3s), below the
    /// session. Classic protocol only.
    #[arg(long, value_parser = parse_duration)]
    pub heartbeat_interval: Option<Duration>,

    /// The consumers' assignors, in order of preference (Java's partition.assignment.strategy:
    /// range, roundrobin, cooperative-sticky; default range). cooperative-sticky alone rebalances
    /// incrementally (KIP-429): a member reads on the partitions it keeps. Classic protocol only.
    #[arg(long, value_name = "LIST", value_parser = parse_assignors)]
    pub partition_assignment_strategy: Option<Assignors>,

    /// Run only part of the pipe: consumer-and-producers (the default), producers, consumer.
    #[arg(long)]
    pub mode: Option<E2eMode>,

    #[command(flatten)]
    pub pins: crate::args::PinArgs,

    /// Progress line interval, e.g. 5s (the default; 0 for none).
    #[arg(long, value_parser = parse_duration)]
    pub reporting_interval: Option<Duration>,

    #[command(flatten)]
    pub output: crate::args::OutputArgs,

    #[command(flatten)]
    pub slo: crate::args::SloArgs,

    /// Seed for intervals, sizes and counts (default: random; printed and stored in the result).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Stamp every record (producer, sequence, CRC-32C of the value, in a `kbench-verify` header)
    /// and check each as the consumer reads it: lost, duplicated, reordered, corrupted and
    /// unexpected records against what the broker acknowledged land in the result
    /// (`verification`); exit code 5 when any was lost, reordered or corrupted.
    #[arg(long)]
    pub verify: bool,

    /// Request-reply through your application: the records written are requests, each with a
    /// correlation id in a header; your application answers each on this topic, copying the id;
    /// kbench's consumer reads the replies (positioned before the first request) and reports
    /// request → reply latency, requests answered and unanswered, replies unmatched and duplicated.
    #[arg(long, value_name = "TOPIC")]
    pub reply_topic: Option<String>,

    /// The request header that carries the correlation id (default kafka_correlationId, Spring
    /// Kafka's, which a @SendTo listener copies into its reply). Requests also carry
    /// kafka_replyTopic.
    #[arg(long, value_name = "NAME")]
    pub correlation_header: Option<String>,

    /// Where a reply carries the id back: header:NAME (default: the correlation header) or
    /// json:PATH, a field of the reply's JSON value (json:meta.correlationId).
    #[arg(long, value_name = "SOURCE")]
    pub reply_correlation: Option<kbench_bench::e2e::Correlation>,

    /// Your application's consumer group: its lag on the request topic (latest offsets against
    /// its committed offsets) is sampled every timeline interval, so a slow service shows as lag.
    #[arg(long, value_name = "GROUP")]
    pub app_group: Option<String>,

    /// How to reach Kafka: `kafka` (the Kafka protocol; the default) or `rest-proxy` (a Kafka REST
    /// Proxy, --rest-url).
    #[arg(long, value_parser = ["kafka", "rest-proxy"])]
    pub via: Option<String>,

    /// REST Proxy base URL (http:// or https://), with --via rest-proxy.
    #[arg(long)]
    pub rest_url: Option<String>,

    /// Embedded format through the REST Proxy: avro (the seed's schema; the default), protobuf or
    /// jsonschema (the seed's record in that schema language), json or binary.
    #[arg(long)]
    pub rest_format: Option<kbench_rest::RestFormat>,

    /// REST produce API: v2 (the default), v3 (one request per record) or v3-stream (one chunked
    /// request per batch).
    #[arg(long)]
    pub rest_api: Option<RestApi>,

    /// Value schema id for avro, protobuf or jsonschema (otherwise --schema-registry registers the
    /// seed schema).
    #[arg(long)]
    pub value_schema_id: Option<i64>,

    /// Schema Registry URL (the same as -X schema.registry.url=URL): with --value-schema, where its
    /// schema is registered and the consumer finds schemas by id; with --via rest-proxy and avro,
    /// where the seed's schema is registered as <topic>-value.
    #[arg(long, visible_alias = "schema-registry-url", value_name = "URL")]
    pub schema_registry: Option<String>,

    /// Trust this CA certificate (PEM) for an https REST Proxy / Schema Registry.
    #[arg(long)]
    pub rest_ca_cert: Option<PathBuf>,

    /// HTTP basic user for the REST Proxy (the password comes from KBENCH_REST_PASSWORD).
    #[arg(long)]
    pub rest_user: Option<String>,

    /// HTTP basic password for the REST Proxy; from the environment only, never echoed.
    #[arg(
        long = "rest-password-from-env",
        env = "KBENCH_REST_PASSWORD",
        hide_env_values = true,
        hide = true
    )]
    pub rest_password: Option<String>,
}

/// Flags → the spec: every flag not given keeps [`E2eSpec::default`]'s value. An error names the flag.
pub(crate) fn spec_from(args: &E2eArgs) -> Result<E2eSpec, String> {
    let mut spec = E2eSpec::default();
    set(&mut spec.topic, args.topic.clone());
    set(&mut spec.partitions, args.partitions);
    set(&mut spec.producers, args.producers);
    set(&mut spec.batch_interval_ms, args.batch_interval);
    spec.verify = args.verify;
    set(&mut spec.payload_size, args.payload_size);
    set(&mut spec.messages_per_batch, args.messages_per_batch);
    set(&mut spec.commit, args.commit);
    set(&mut spec.consumer.fetch_max_wait, args.consume_wait);
    set(
        &mut spec.consumer.fetch_max_bytes,
        args.consume_max_bytes.map(|b| b as usize),
    );
    set(&mut spec.drain, args.drain);
    set(&mut spec.producer.acks, args.acks);
    set(&mut spec.producer.compression, args.compression);
    set(&mut spec.group_id, args.group.clone());
    set(&mut spec.consumer_id, args.consumer_id.clone());
    set(&mut spec.consumers, args.consumers);
    set(&mut spec.consumer.group_protocol, args.group_protocol);
    set(&mut spec.consumer.session_timeout, args.session_timeout);
    set(
        &mut spec.consumer.assignors,
        args.partition_assignment_strategy.clone().map(|a| a.0),
    );
    set(
        &mut spec.consumer.heartbeat_interval,
        args.heartbeat_interval,
    );
    if let Some(id) = &args.group_instance_id {
        spec.consumer.group_instance_id = Some(id.clone());
    }
    set(&mut spec.mode, args.mode);
    set(&mut spec.seed, args.seed);
    set(&mut spec.timeline_interval, args.output.timeline_interval);
    spec.duration = args.duration;
    spec.records = args.num_records;
    spec.rest = rest_from(args)?;
    spec.reply = ReplySpec::of(
        args.reply_topic.as_deref(),
        args.correlation_header.as_deref(),
        args.reply_correlation.clone(),
        args.app_group.as_deref(),
    )
    .map_err(|e| spec_error(&e))?;
    spec.limits = args.limits.limits();
    spec.validate().map_err(|e| spec_error(&e))?;
    Ok(spec)
}

/// `--value-schema` and the serializer's `-X` properties: the schema file read (prepared later,
/// before the load), and the consumer's registry. Serializer properties without a schema are for
/// the consumer (a consumer-only run decoding another producer's values): they need a registry.
pub(crate) fn value_schema(
    args: &E2eArgs,
    serializer: &std::collections::BTreeMap<String, String>,
    spec: &mut E2eSpec,
) -> Result<Option<kbench_bench::schema::ValueSchemaSpec>, String> {
    let mut serializer = serializer.clone();
    if spec.rest.is_none()
        && let Some(url) = &args.schema_registry
    {
        serializer.insert("schema.registry.url".into(), url.clone());
    }
    if serializer.is_empty() && args.value_schema.is_none() {
        return Ok(None);
    }
    if args.value_schema.is_some() && !spec.mode.has_producers() {
        return Err(
            "--value-schema: nothing is produced in consumer-only mode (-X schema.registry.url=URL alone decodes what is read)".into(),
        );
    }
    if spec.rest.is_some() {
        let key = serializer.keys().next().cloned().unwrap_or_default();
        return Err(format!(
            "-X {key}: not with --via rest-proxy (--rest-format, --value-schema-id and --schema-registry choose what it sends)"
        ));
    }
    let Some(path) = &args.value_schema else {
        // Without a schema, a registry is for a consumer-only run decoding another producer's
        // values: beside kbench's own producers it would count their random bytes undecodable.
        if !serializer.contains_key("schema.registry.url") || spec.mode.has_producers() {
            let key = serializer.keys().next().cloned().unwrap_or_default();
            return Err(format!(
                "{key}: a serializer property; only with --value-schema FILE, or with --mode consumer and a schema.registry.url to decode what another producer writes"
            ));
        }
        spec.deserializer = serializer;
        return Ok(None);
    };
    if serializer.contains_key("schema.registry.url") && spec.mode.has_consumer() {
        spec.deserializer = serializer.clone();
    }
    args.schema
        .value_spec(path, &spec.topic, serializer, spec.seed)
        .map(Some)
}

/// The REST Proxy driver's settings from the flags; an error names the flag.
fn rest_from(args: &E2eArgs) -> Result<Option<RestSpec>, String> {
    if args.via.as_deref() != Some("rest-proxy") {
        if args.rest_url.is_some() {
            return Err("--rest-url: only with --via rest-proxy".into());
        }
        if args.value_schema_id.is_some() {
            return Err(
                "--value-schema-id: only with --via rest-proxy (with --value-schema, give -X use.schema.id=ID)"
                    .into(),
            );
        }
        return Ok(None);
    }
    let url = args
        .rest_url
        .clone()
        .ok_or("--via rest-proxy needs --rest-url URL")?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "--rest-url {:?}: must start with http:// or https://",
            kbench_rest::redact_url(&url)
        ));
    }
    if args.bootstrap_server.is_some() {
        return Err(
            "--bootstrap-server: not used with --via rest-proxy (the proxy reaches Kafka)".into(),
        );
    }
    let basic_auth = match (&args.rest_user, &args.rest_password) {
        (Some(u), Some(p)) => Some((u.clone(), p.clone())),
        (Some(u), None) => Some((u.clone(), String::new())),
        (None, Some(_)) => return Err("KBENCH_REST_PASSWORD is set but --rest-user is not".into()),
        (None, None) => None,
    };
    let ca_cert_pem = match &args.rest_ca_cert {
        Some(path) => Some(
            kbench_client::input::read(path, kbench_client::input::SECRET_FILE)
                .map_err(|e| format!("--rest-ca-cert {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let mut rest = RestSpec::new(&url);
    if basic_auth.is_some() {
        rest.proxy.basic_auth = basic_auth;
    }
    rest.proxy.ca_cert_pem = ca_cert_pem;
    set(&mut rest.format, args.rest_format);
    set(&mut rest.api, args.rest_api);
    rest.value_schema_id = args.value_schema_id;
    rest.schema_registry = args.schema_registry.clone();
    if args.value_schema.is_some() {
        return Err(
            "--value-schema: not with --via rest-proxy (--rest-format chooses what it sends: the seed's record as avro, protobuf, jsonschema, json or binary)".into(),
        );
    }
    Ok(Some(rest))
}

fn parse_group_instance_id(s: &str) -> Result<String, String> {
    let mut c = kbench_client::ConsumerSettings::default();
    c.apply("--group-instance-id", "group.instance.id", s)
        .map_err(|e| e.to_string())?;
    Ok(c.group_instance_id.unwrap_or_default())
}

fn parse_group_protocol(s: &str) -> Result<kbench_client::config::GroupProtocol, String> {
    let mut c = kbench_client::ConsumerSettings::default();
    c.apply("--group-protocol", "group.protocol", s)
        .map_err(|e| e.to_string())?;
    Ok(c.group_protocol)
}

/// `--partition-assignment-strategy`'s assignors, in order of preference.
#[derive(Debug, Clone)]
pub struct Assignors(pub Vec<kbench_client::assignor::Assignor>);

/// `--partition-assignment-strategy`: assignor names, comma-separated, as Java takes them.
fn parse_assignors(s: &str) -> Result<Assignors, String> {
    kbench_client::assignor::Assignor::parse_list(s).map(Assignors)
}
