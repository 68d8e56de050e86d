//! Schema-encoded record values: values generated from a schema, encoded, and framed in Confluent's
//! wire format for a Schema Registry (`--value-schema`). `avro`, `proto` and `json` are the
//! generators (an `.avsc`, a `.proto`, a JSON Schema); this module the choice between them, the
//! framing and the subject names.

pub mod avro;
pub mod decode;
pub mod json;
pub mod proto;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kbench_rest::{RestConfig, RestProxy};

/// The default number of distinct values generated before the load (each record takes one at
/// random, as kafka-producer-perf-test takes a `--payload-file` line).
pub const DEFAULT_POOL: usize = 1000;
/// The most distinct values a run may generate (each is held in memory).
pub const MAX_POOL: usize = 1_000_000;
/// The most bytes the pool may hold (as a `--payload-file`).
pub const MAX_POOL_BYTES: usize = 256 << 20;

/// The serializer's properties kbench reads.
const KNOWN: [&str; 9] = [
    "key.subject.name.strategy",
    "schema.registry.url",
    "schema.registry.ssl.truststore.location",
    "basic.auth.user.info",
    "basic.auth.credentials.source",
    "value.subject.name.strategy",
    "auto.register.schemas",
    "use.latest.version",
    "use.schema.id",
];

/// What `--value-schema` asks for: the schema, where it is registered and how, and how many
/// distinct values to make.
#[derive(Debug, Clone)]
pub struct ValueSchemaSpec {
    /// The schema file, as named (for messages and the result).
    pub file: String,
    pub text: String,
    pub topic: String,
    /// The serializer's properties as given (`schema.registry.url`, `basic.auth.user.info`,
    /// `value.subject.name.strategy`, `auto.register.schemas`, `use.schema.id`, …).
    pub serializer: BTreeMap<String, String>,
    pub pool: usize,
    pub seed: u64,
    /// Protobuf: the message of the file to generate (`--value-message`; default its first).
    pub message: Option<String>,
    /// Whether the values are record values or keys (`--key-schema`): the subject's suffix and
    /// the strategy property.
    pub role: Role,
    /// `--value-template FILE`: JSON documents encoded with the schema in place of generated
    /// values (the file's name, its text); the pool is its documents.
    pub template: Option<(String, String)>,
    /// Protobuf: `--schema-hint FIELD=KIND:SPEC`, as given (length, range, values, size).
    pub hints: Vec<(String, String)>,
}

/// What a schema's values become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    Value,
    Key,
}

impl Role {
    /// `value` or `key`: the subject's suffix (`TOPIC-key`) and the properties' prefix.
    pub fn name(self) -> &'static str {
        match self {
            Role::Value => "value",
            Role::Key => "key",
        }
    }
}

/// The generator a schema file asks for, by its extension: `.proto` is Protobuf, anything else
/// Avro.
enum Generator {
    Avro(Box<avro::Generator>),
    Protobuf(proto::Generator),
    Json(json::Generator),
}

/// Whether a schema file is a JSON Schema: it names its `$schema`, or its name ends in
/// `.schema.json` (an Avro schema is JSON too, and may end in `.json`).
pub fn is_json_schema(file: &str, text: &str) -> bool {
    file.to_ascii_lowercase().ends_with(".schema.json")
        || serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("$schema").is_some())
}

impl Generator {
    fn of(spec: &ValueSchemaSpec) -> Result<Generator, String> {
        let is_proto = std::path::Path::new(&spec.file)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("proto"));
        if is_proto {
            return proto::Generator::new(&spec.text, spec.message.as_deref(), &spec.hints)
                .map(Generator::Protobuf);
        }
        if let Some((field, _)) = spec.hints.first() {
            return Err(format!(
                "--schema-hint {field}: for a .proto schema (an Avro schema's hints are its fields' arg.properties, a JSON Schema's its keywords)"
            ));
        }
        if let Some(m) = &spec.message {
            return Err(format!(
                "--value-message {m}: for a .proto schema; Avro and JSON schemas have one root"
            ));
        }
        if is_json_schema(&spec.file, &spec.text) {
            return match spec.template {
                Some(_) => json::Generator::for_documents(&spec.text),
                None => json::Generator::new(&spec.text),
            }
            .map(Generator::Json);
        }
        avro::Generator::new(&spec.text)
            .map(|g| Generator::Avro(Box::new(g)))
            .map_err(|e| e.to_string())
    }

    /// The registry's `schemaType` (absent for Avro) and the result's format name.
    fn schema_type(&self) -> (Option<&'static str>, &'static str) {
        match self {
            Generator::Avro(_) => (None, "avro"),
            Generator::Protobuf(_) => (Some("PROTOBUF"), "protobuf"),
            Generator::Json(_) => (Some("JSON"), "json"),
        }
    }

    /// The name RecordNameStrategy uses: the record's or the message's full name.
    fn full_name(&self) -> Option<&str> {
        match self {
            Generator::Avro(g) => g.full_name(),
            Generator::Protobuf(g) => Some(g.full_name()),
            Generator::Json(g) => g.full_name(),
        }
    }

    /// `count` values, each with what goes between the schema id and it (Protobuf's message
    /// indexes), from `seed`; refused past `limit` bytes.
    fn encoded_within(
        &self,
        count: usize,
        seed: u64,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, String> {
        match self {
            Generator::Avro(g) => g
                .encoded_within(count, seed, limit)
                .map_err(|e| e.to_string()),
            Generator::Protobuf(g) => {
                let prefix = g.prefix();
                let values = g.encoded_within(count, seed, limit)?;
                Ok(values
                    .into_iter()
                    .map(|v| [prefix.as_slice(), &v].concat())
                    .collect())
            }
            Generator::Json(g) => g.encoded_within(count, seed, limit),
        }
    }
}

impl Generator {
    /// Each JSON document encoded (`--value-template`), with what goes before it (Protobuf's
    /// message indexes); refused past `limit` bytes, or at the first document that does not match
    /// the schema, by its number.
    fn encode_documents(
        &self,
        docs: &[serde_json::Value],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, String> {
        let validator = match self {
            Generator::Json(g) => Some(g.validator()?),
            _ => None,
        };
        let mut docs_left = docs.iter().enumerate();
        collect_within(
            docs.len(),
            limit,
            || {
                let (i, doc) = docs_left.next().expect("one per document");
                match (self, &validator) {
                    (Generator::Avro(g), _) => g.encode_json(doc),
                    (Generator::Protobuf(g), _) => g.encode_json(doc),
                    (Generator::Json(_), Some(v)) => json::Generator::encode_json(v, doc),
                    (Generator::Json(_), None) => unreachable!("compiled above"),
                }
                .map_err(|e| format!("document {}: {e}", i + 1))
            },
            || format!("its documents hold more than {limit} bytes"),
        )
    }
}

/// The documents of a `--value-template` file: JSON Lines (one document a line; blank lines and
/// lines starting with `#` or `//` skipped), or one JSON array of documents.
pub fn documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return match serde_json::from_str::<serde_json::Value>(trimmed) {
            Ok(serde_json::Value::Array(docs)) if !docs.is_empty() => Ok(docs),
            Ok(_) => Err("an empty array".into()),
            Err(e) => Err(format!("not a JSON array: {e}")),
        };
    }
    let mut docs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("//") {
            continue;
        }
        docs.push(
            serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", n + 1))?,
        );
    }
    if docs.is_empty() {
        return Err("no documents in it".into());
    }
    Ok(docs)
}

/// How the values were made, for the result document's settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ValueSchema {
    /// `avro`, `protobuf` or `json` (JSON Schema).
    pub format: String,
    /// Protobuf: the message generated (its full name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub file: String,
    /// The registry, without credentials; `None` with `use.schema.id` and no registry.
    pub registry: Option<String>,
    pub subject: Option<String>,
    pub schema_id: u32,
    /// `registered`, `looked up` (auto.register.schemas=false) or `given` (use.schema.id).
    pub schema_id_from: String,
    /// Distinct values generated before the load (or the template's documents); each record
    /// takes one at random.
    pub pool: usize,
    /// `--value-template`: the file whose JSON documents were encoded, not generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Protobuf: the `--schema-hint`s (`FIELD=KIND:SPEC`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// Generating and encoding one value, averaged over the pool (done before the load: none of
    /// the measured phase's CPU is encoding).
    pub encode_ns_per_value: f64,
    pub mean_value_bytes: f64,
}

/// The values, framed, and how they were made.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub values: Vec<Bytes>,
    pub schema: ValueSchema,
}

/// Why `--value-schema` cannot run: one message naming the file, property or subject.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// Where a schema's id came from: the id, how it was found, and the subject.
struct Found {
    id: u32,
    from: &'static str,
    subject: Option<String>,
    registry: Option<String>,
}

/// Parse the schema and find its id (register it, look it up, or take the one given).
async fn find(spec: &ValueSchemaSpec) -> Result<(Generator, Found), SchemaError> {
    let file = &spec.file;
    let flag = format!("--{}-schema", spec.role.name());
    let props = &spec.serializer;
    if let Some(key) = props.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(SchemaError(format!(
            "{key}: not a serializer property kbench reads (it reads {})",
            KNOWN.join(", ")
        )));
    }
    let generator = Generator::of(spec).map_err(|e| SchemaError(format!("{flag} {file}: {e}")))?;
    let (schema_type, _) = generator.schema_type();
    let bool_prop = |key: &str, default: bool| -> Result<bool, SchemaError> {
        match props.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(SchemaError(format!("{key}: {v:?} is not true or false"))),
        }
    };
    if bool_prop("use.latest.version", false)? {
        return Err(SchemaError(
            "use.latest.version: not supported (kbench generates from the --value-schema file; register it, or give use.schema.id)".into(),
        ));
    }
    let auto_register = bool_prop("auto.register.schemas", true)?;
    let strategy_key = format!("{}.subject.name.strategy", spec.role.name());
    let strategy = match props.get(&strategy_key) {
        Some(s) => {
            SubjectStrategy::parse(s).map_err(|e| SchemaError(format!("{strategy_key}: {e}")))?
        }
        None => SubjectStrategy::Topic,
    };
    let given_id = props
        .get("use.schema.id")
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| SchemaError(format!("use.schema.id: {v:?} is not a schema id")))
        })
        .transpose()?;
    let registry = match props.get("schema.registry.url") {
        Some(url) => Some(registry(url, props)?),
        None => None,
    };
    let subject = || {
        strategy.subject(&spec.topic, generator.full_name(), spec.role).ok_or_else(|| {
            SchemaError(format!(
                "{strategy_key}: {strategy:?} needs a named schema (a record, enum or fixed); {file} has none"
            ))
        })
    };
    let (schema_id, from, subject) = match (given_id, &registry) {
        (Some(id), _) => (id, "given", None),
        (None, None) => {
            return Err(SchemaError(format!(
                "{flag} {file}: needs a Schema Registry to register it (--schema-registry-url URL, or the serializer property schema.registry.url=URL), or the id it has there (use.schema.id=ID)"
            )));
        }
        (None, Some((client, url))) => {
            let subject = subject()?;
            let answer = if auto_register {
                client
                    .register_schema(url, &subject, &spec.text, schema_type)
                    .await
            } else {
                client
                    .lookup_schema(url, &subject, &spec.text, schema_type)
                    .await
            };
            let id = answer.map_err(|e| {
                SchemaError(format!(
                    "schema registry: subject {subject:?}: {}",
                    registry_reason(&e)
                ))
            })?;
            let id = u32::try_from(id).map_err(|_| {
                SchemaError(format!("schema registry {url}: {id} is not a schema id"))
            })?;
            let from = if auto_register {
                "registered"
            } else {
                "looked up"
            };
            (id, from, Some(subject))
        }
    };
    let registry = registry.map(|(_, url)| url);
    Ok((
        generator,
        Found {
            id: schema_id,
            from,
            subject,
            registry,
        },
    ))
}

/// The id `spec`'s schema has under its subject (registered, looked up, or given), without
/// generating values: for a further topic of a run whose values were prepared for the first.
pub async fn schema_id(spec: &ValueSchemaSpec) -> Result<u32, SchemaError> {
    find(spec).await.map(|(_, found)| found.id)
}

/// Parse the schema, find its id (register it, look it up, or take the one given), then generate
/// and frame the pool of values: everything before any load, so that bad input stops the run at
/// once.
pub async fn prepare(spec: &ValueSchemaSpec) -> Result<Prepared, SchemaError> {
    let file = &spec.file;
    let flag = format!("--{}-schema", spec.role.name());
    if !(1..=MAX_POOL).contains(&spec.pool) {
        return Err(SchemaError(format!(
            "--schema-values: {} (1 to {MAX_POOL})",
            spec.pool
        )));
    }
    let (generator, found) = find(spec).await?;
    let (_, format) = generator.schema_type();
    let Found {
        id: schema_id,
        from,
        subject,
        registry,
    } = found;
    let started = Instant::now();
    let encoded = match &spec.template {
        None => generator
            .encoded_within(spec.pool, spec.seed, MAX_POOL_BYTES)
            .map_err(|e| SchemaError(format!("{flag} {file}: {e}")))?,
        Some((name, text)) => {
            let tflag = format!("--{}-template {name}", spec.role.name());
            let docs = documents(text).map_err(|e| SchemaError(format!("{tflag}: {e}")))?;
            if docs.len() > MAX_POOL {
                return Err(SchemaError(format!(
                    "{tflag}: {} documents (at most {MAX_POOL})",
                    docs.len()
                )));
            }
            generator
                .encode_documents(&docs, MAX_POOL_BYTES)
                .map_err(|e| SchemaError(format!("{tflag}: {e} ({file})")))?
        }
    };
    let took = started.elapsed();
    let pool = encoded.len();
    let values: Vec<Bytes> = encoded
        .iter()
        .map(|e| Bytes::from(frame(schema_id, e)))
        .collect();
    let mean = values.iter().map(Bytes::len).sum::<usize>() as f64 / values.len() as f64;
    Ok(Prepared {
        schema: ValueSchema {
            format: format.into(),
            message: match &generator {
                Generator::Protobuf(g) => Some(g.full_name().to_string()),
                Generator::Avro(_) | Generator::Json(_) => None,
            },
            file: file.clone(),
            registry,
            subject,
            schema_id,
            schema_id_from: from.into(),
            pool,
            template: spec.template.as_ref().map(|(name, _)| name.clone()),
            hints: spec.hints.iter().map(|(f, h)| format!("{f}={h}")).collect(),
            encode_ns_per_value: took.as_nanos() as f64 / pool as f64,
            mean_value_bytes: mean,
        },
        values,
    })
}

/// The registry's client, from Confluent's property names: `basic.auth.user.info` (with
/// `basic.auth.credentials.source` USER_INFO, or URL for credentials in the URL) and
/// `schema.registry.ssl.truststore.location` (a PEM file here, as librdkafka's `ssl.ca.location`).
pub(crate) fn registry(
    url: &str,
    props: &BTreeMap<String, String>,
) -> Result<(RestProxy, String), SchemaError> {
    let source = props
        .get("basic.auth.credentials.source")
        .map(|s| s.trim().to_ascii_uppercase());
    let basic_auth = match (source.as_deref(), props.get("basic.auth.user.info")) {
        (Some("URL"), _) => None,
        (None | Some("USER_INFO"), Some(info)) => {
            let (user, password) = info
                .split_once(':')
                .ok_or_else(|| SchemaError("basic.auth.user.info: USER:PASSWORD".into()))?;
            Some((user.to_string(), password.to_string()))
        }
        (None | Some("USER_INFO"), None) => None,
        (Some(other), _) => {
            return Err(SchemaError(format!(
                "basic.auth.credentials.source: {other:?} (USER_INFO or URL)"
            )));
        }
    };
    let ca_cert_pem = match props.get("schema.registry.ssl.truststore.location") {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            SchemaError(format!(
                "schema.registry.ssl.truststore.location {path}: {e}"
            ))
        })?),
        None => None,
    };
    if let Some(key) = props.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(SchemaError(format!(
            "{key}: not a serializer property kbench reads (it reads {})",
            KNOWN.join(", ")
        )));
    }
    let client = RestProxy::new(RestConfig {
        url: url.to_string(),
        basic_auth,
        timeout: Duration::from_secs(30),
        ca_cert_pem,
    })
    .map_err(|e| SchemaError(format!("schema.registry.url: {e}")))?;
    // Credentials in the URL are the client's basic auth now; the URL kept has none.
    let base = client.base_url().to_string();
    Ok((client, base))
}

/// The registry's own words: its error code and message, and what the code means.
pub(crate) fn registry_reason(e: &kbench_rest::RestError) -> String {
    let meaning = match e.code() {
        Some(40401) => " (no such subject)",
        Some(40403) => " (the schema is not registered under this subject)",
        Some(409) => " (incompatible with the subject's earlier versions)",
        Some(42201) => " (the registry finds the schema invalid)",
        Some(401) => " (check basic.auth.user.info)",
        Some(403) => " (this user may not register or read the subject)",
        _ => "",
    };
    format!("{e}{meaning}")
}

/// `count` values from `next`, refused with `too_big` once they hold more than `limit` bytes: the
/// pool loop every generator shares.
pub(crate) fn collect_within<E>(
    count: usize,
    limit: usize,
    mut next: impl FnMut() -> Result<Vec<u8>, E>,
    too_big: impl FnOnce() -> E,
) -> Result<Vec<Vec<u8>>, E> {
    let mut total = 0usize;
    let mut out = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let v = next()?;
        total = total.saturating_add(v.len());
        if total > limit {
            return Err(too_big());
        }
        out.push(v);
    }
    Ok(out)
}

/// The pool's refusal, as every generator says it.
pub(crate) fn too_big(count: usize, limit: usize) -> String {
    format!("{count} values would hold more than {limit} bytes: ask for fewer (--schema-values)")
}

/// Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), then the encoded
/// value — what `KafkaAvroSerializer` and confluent-kafka's `AvroSerializer` write.
pub fn frame(schema_id: u32, encoded: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + encoded.len());
    out.push(0);
    out.extend_from_slice(&schema_id.to_be_bytes());
    out.extend_from_slice(encoded);
    out
}

/// How a value schema's subject is named (Confluent's `value.subject.name.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectStrategy {
    /// `TopicNameStrategy`: `<topic>-value`, the default.
    #[default]
    Topic,
    /// `RecordNameStrategy`: the record's full name.
    Record,
    /// `TopicRecordNameStrategy`: `<topic>-<record full name>`.
    TopicRecord,
}

impl SubjectStrategy {
    /// Java's class names (with or without their package) and kbench's short names.
    pub fn parse(s: &str) -> Result<SubjectStrategy, String> {
        let name = s.rsplit('.').next().unwrap_or(s);
        match name {
            "TopicNameStrategy" | "topic" => Ok(SubjectStrategy::Topic),
            "RecordNameStrategy" | "record" => Ok(SubjectStrategy::Record),
            "TopicRecordNameStrategy" | "topic-record" => Ok(SubjectStrategy::TopicRecord),
            _ => Err(format!(
                "{s:?}: one of TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy (or topic, record, topic-record)"
            )),
        }
    }

    /// The subject of a value's (or key's) schema for `topic`; `None` when the strategy needs a
    /// record name and the schema's root has none.
    pub fn subject(self, topic: &str, record: Option<&str>, role: Role) -> Option<String> {
        match self {
            SubjectStrategy::Topic => Some(format!("{topic}-{}", role.name())),
            SubjectStrategy::Record => record.map(String::from),
            SubjectStrategy::TopicRecord => record.map(|r| format!("{topic}-{r}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--value-template`: the documents of `template` encoded with `schema`, written with id 9.
    fn templated(file: &str, schema: &str, template: &str) -> Result<Prepared, SchemaError> {
        let spec = ValueSchemaSpec {
            file: file.into(),
            text: schema.into(),
            topic: "t".into(),
            serializer: [("use.schema.id".to_string(), "9".to_string())].into(),
            pool: DEFAULT_POOL,
            seed: 1,
            message: None,
            role: Role::Value,
            template: Some(("docs.jsonl".into(), template.into())),
            hints: Vec::new(),
        };
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(prepare(&spec))
    }

    #[test]
    fn template_documents_are_encoded_in_each_format() {
        // Avro: plain JSON and Avro's JSON encoding (a union's branch named), read back.
        let avsc = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
            {"name":"id","type":{"type":"string","logicalType":"uuid"}},
            {"name":"n","type":"int"},
            {"name":"note","type":["null","string"]},
            {"name":"colour","type":{"type":"enum","name":"Colour","symbols":["RED","BLUE"]}},
            {"name":"tags","type":{"type":"array","items":"string"}}]}"#;
        let docs = r#"# two orders
{"id":"1481531d-ccc9-46d9-a56f-5b67459c0537","n":1,"note":null,"colour":"RED","tags":[]}
{"id":"1481531d-ccc9-46d9-a56f-5b67459c0538","n":2,"note":{"string":"gift"},"colour":"BLUE","tags":["a","b"]}
"#;
        let p = templated("o.avsc", avsc, docs).unwrap();
        assert_eq!((p.values.len(), p.schema.pool), (2, 2));
        assert_eq!(p.schema.template.as_deref(), Some("docs.jsonl"));
        let schema = avro::parse_for_codec(avsc).unwrap();
        let mut second = &p.values[1][5..];
        let v = apache_avro::from_avro_datum(&schema, &mut second, None).unwrap();
        let apache_avro::types::Value::Record(fields) = v else {
            panic!("{v:?}")
        };
        assert_eq!(fields[1].1, apache_avro::types::Value::Int(2));
        assert_eq!(
            fields[2].1,
            apache_avro::types::Value::Union(
                1,
                Box::new(apache_avro::types::Value::String("gift".into()))
            )
        );
        let bad = templated("o.avsc", avsc, &format!("{docs}{{\"n\":\"x\"}}\n")).unwrap_err();
        assert!(
            bad.0.contains("--value-template docs.jsonl: document 3"),
            "{bad}"
        );

        // Protobuf: its JSON mapping, after the message indexes.
        let proto = "syntax = \"proto3\";\npackage p;\nenum Colour { RED = 0; BLUE = 1; }\n\
                     message Order { string id = 1; int64 count = 2; Colour colour = 3; repeated string tags = 4; }";
        let p = templated(
            "o.proto",
            proto,
            r#"[{"id":"a","count":"5","colour":"BLUE","tags":["x"]},{"id":"b"}]"#,
        )
        .unwrap();
        let pool = proto::compile(proto).unwrap();
        for v in &p.values {
            proto::decode(&pool, &v[5..]).unwrap();
        }
        assert!(
            templated("o.proto", proto, r#"{"id":"a","nope":1}"#)
                .unwrap_err()
                .0
                .contains("document 1")
        );

        // JSON Schema: each document validated, then written as it is.
        let schema = r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["id"],"properties":{"id":{"type":"string","pattern":"^o-"}}}"#;
        let p = templated("o.schema.json", schema, "{\"id\":\"o-1\"}\n").unwrap();
        assert_eq!(&p.values[0][5..], br#"{"id":"o-1"}"#);
        let bad = templated("o.schema.json", schema, "{\"id\":\"x\"}\n").unwrap_err();
        assert!(bad.0.contains("document 1: is not valid"), "{bad}");
        assert!(
            templated("o.schema.json", schema, "\n# nothing\n")
                .unwrap_err()
                .0
                .contains("no documents")
        );
    }

    #[test]
    fn framing_and_subjects_are_confluents() {
        assert_eq!(frame(258, b"x"), vec![0, 0, 0, 1, 2, b'x']);
        let s = |n: &str| SubjectStrategy::parse(n).unwrap();
        assert_eq!(
            s("io.confluent.kafka.serializers.subject.TopicNameStrategy").subject(
                "t",
                None,
                Role::Value
            ),
            Some("t-value".into())
        );
        assert_eq!(
            s("RecordNameStrategy").subject("t", Some("a.B"), Role::Value),
            Some("a.B".into())
        );
        assert_eq!(
            s("topic-record").subject("t", Some("a.B"), Role::Value),
            Some("t-a.B".into())
        );
        assert_eq!(s("record").subject("t", None, Role::Value), None);
        assert_eq!(
            s("TopicNameStrategy").subject("t", None, Role::Key),
            Some("t-key".into())
        );
        assert!(
            SubjectStrategy::parse("Nope")
                .unwrap_err()
                .contains("TopicNameStrategy")
        );
    }
}
