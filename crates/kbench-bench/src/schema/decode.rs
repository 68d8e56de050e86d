//! Reading schema-encoded values back (`kbench consume -X schema.registry.url=URL`): each value's
//! Confluent framing read, the schema its id names fetched from the registry once, and the value
//! decoded with it (Avro; Protobuf after its message indexes; JSON validated against its JSON
//! Schema) — as Confluent's deserializers do, except that a value that does not decode is
//! counted, never a failed run. The decoding runs on the consumer's loop; a schema not yet known
//! holds its values aside until the loop has asked the registry, which it does after each fetch
//! answer: at most one answer's values are held (`fetch.max.bytes`).

use std::collections::{BTreeMap, HashMap};

use apache_avro::Schema;
use bytes::Bytes;

use super::{SchemaError, registry_reason};

/// The most distinct schema ids a read asks the registry for: values of any further id (random
/// bytes that happen to start with 0, say) are counted as of an unknown schema unasked, so that the
/// read loop never waits on the registry more than this many times.
pub const MAX_SCHEMA_IDS: usize = 16;

/// What reading the values back found (the result's `value_decoding` block).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DecodeReport {
    /// The registry, without credentials.
    pub registry: String,
    /// Values that decoded with the schema their id names.
    pub decoded: u64,
    /// Values without Confluent's framing (no magic byte 0, or shorter than 5 bytes), null ones
    /// included.
    pub not_framed: u64,
    /// Framed values whose schema id the registry does not have (or not as Avro).
    pub unknown_schema: u64,
    /// Framed values of a known schema that do not decode with it (or leave bytes over).
    pub not_decoded: u64,
    /// Values per schema id seen.
    pub schema_ids: BTreeMap<u32, u64>,
    /// The first reason a value did not decode, for the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

impl DecodeReport {
    /// Values that did not decode, whatever the reason.
    pub fn failed(&self) -> u64 {
        self.not_framed + self.unknown_schema + self.not_decoded
    }

    /// Another reader's counts added (a run with several consumers).
    pub fn merge(&mut self, other: &DecodeReport) {
        self.decoded += other.decoded;
        self.not_framed += other.not_framed;
        self.unknown_schema += other.unknown_schema;
        self.not_decoded += other.not_decoded;
        for (id, n) in &other.schema_ids {
            *self.schema_ids.entry(*id).or_default() += n;
        }
        if self.first_failure.is_none() {
            self.first_failure.clone_from(&other.first_failure);
        }
    }

    /// The summary line: values decoded of those read, per schema id, and why the rest did not.
    pub fn line(&self) -> String {
        let ids: Vec<String> = self
            .schema_ids
            .iter()
            .map(|(id, n)| format!("schema {id}: {n}"))
            .collect();
        format!(
            "Values decoded through {}: {} of {} ({}); {} without Confluent's framing, {} of a schema the registry does not have, {} that do not decode with theirs.{}",
            self.registry,
            self.decoded,
            self.decoded + self.failed(),
            if ids.is_empty() {
                "no schema ids".into()
            } else {
                ids.join(", ")
            },
            self.not_framed,
            self.unknown_schema,
            self.not_decoded,
            self.first_failure
                .as_ref()
                .map(|f| format!(" First: {f}."))
                .unwrap_or_default()
        )
    }
}

/// A schema from the registry, ready to decode with.
pub enum ReadSchema {
    Avro(Schema),
    /// The compiled `.proto`: a value's message indexes name its message.
    Protobuf(prost_reflect::DescriptorPool),
    /// A JSON Schema: each value is parsed as JSON and validated against it (as Confluent's
    /// `JSONDeserializer` does); one that is not valid does not decode.
    Json(Box<jsonschema::Validator>),
}

/// The decoder the consumer's loop feeds.
pub struct Decoding {
    schemas: HashMap<u32, Result<ReadSchema, String>>,
    pending: HashMap<u32, Vec<Bytes>>,
    report: DecodeReport,
}

impl Decoding {
    pub fn new(registry: &str) -> Decoding {
        Decoding {
            schemas: HashMap::new(),
            pending: HashMap::new(),
            report: DecodeReport {
                registry: registry.to_string(),
                ..DecodeReport::default()
            },
        }
    }

    /// One record's value.
    pub fn value(&mut self, value: Option<&[u8]>) {
        let Some(v) = value.filter(|v| v.len() >= 5 && v[0] == 0) else {
            self.report.not_framed += 1;
            self.fail(|| "a value without Confluent's framing (magic byte 0, schema id)".into());
            return;
        };
        let id = u32::from_be_bytes([v[1], v[2], v[3], v[4]]);
        *self.report.schema_ids.entry(id).or_default() += 1;
        match self.schemas.get(&id) {
            Some(schema) => decode(&mut self.report, id, schema.as_ref(), &v[5..]),
            None if self.schemas.len() + self.pending.len() >= MAX_SCHEMA_IDS
                && !self.pending.contains_key(&id) =>
            {
                self.report.unknown_schema += 1;
                self.fail(|| {
                    format!(
                        "schema {id}: not asked for (more than {MAX_SCHEMA_IDS} schema ids met)"
                    )
                });
            }
            None => self
                .pending
                .entry(id)
                .or_default()
                .push(Bytes::copy_from_slice(&v[5..])),
        }
    }

    /// Schema ids met and not yet asked for.
    pub fn missing(&self) -> Vec<u32> {
        self.pending.keys().copied().collect()
    }

    /// The registry's answer for `id` (an error: why there is no schema to decode with — the
    /// registry has none, it is not Avro, it does not parse, the registry could not be asked), and
    /// the values held for it decoded.
    pub fn learn(&mut self, id: u32, schema: Result<ReadSchema, String>) {
        for v in self.pending.remove(&id).unwrap_or_default() {
            decode(&mut self.report, id, schema.as_ref(), &v);
        }
        self.schemas.insert(id, schema);
    }

    fn fail(&mut self, why: impl FnOnce() -> String) {
        fail(&mut self.report, why);
    }

    /// What was found; values still held (the run ended before the registry answered) count as
    /// of an unknown schema.
    pub fn report(mut self) -> DecodeReport {
        for (_, held) in self.pending.drain() {
            self.report.unknown_schema += held.len() as u64;
        }
        self.report
    }
}

fn decode(report: &mut DecodeReport, id: u32, schema: Result<&ReadSchema, &String>, datum: &[u8]) {
    let schema = match schema {
        Ok(ReadSchema::Avro(s)) => s,
        Ok(ReadSchema::Json(validator)) => {
            let why = match serde_json::from_slice::<serde_json::Value>(datum) {
                Ok(v) => validator.validate(&v).err().map(|e| {
                    format!(
                        "schema {id}: not valid at {:?}: {e}",
                        e.instance_path().as_str()
                    )
                }),
                Err(e) => Some(format!("schema {id}: not JSON: {e}")),
            };
            match why {
                None => report.decoded += 1,
                Some(why) => {
                    report.not_decoded += 1;
                    fail(report, || why);
                }
            }
            return;
        }
        Ok(ReadSchema::Protobuf(pool)) => {
            match super::proto::decode(pool, datum) {
                Ok(()) => report.decoded += 1,
                Err(e) => {
                    report.not_decoded += 1;
                    fail(report, || format!("schema {id}: {e}"));
                }
            }
            return;
        }
        Err(why) => {
            report.unknown_schema += 1;
            fail(report, || format!("schema {id}: {why}"));
            return;
        }
    };
    let mut rest = datum;
    match apache_avro::from_avro_datum(schema, &mut rest, None) {
        Ok(_) if rest.is_empty() => report.decoded += 1,
        Ok(_) => {
            report.not_decoded += 1;
            let left = rest.len();
            fail(report, || {
                format!("schema {id}: {left} bytes left over after the value")
            });
        }
        Err(e) => {
            report.not_decoded += 1;
            fail(report, || format!("schema {id}: {e}"));
        }
    }
}

fn fail(report: &mut DecodeReport, why: impl FnOnce() -> String) {
    if report.first_failure.is_none() {
        report.first_failure = Some(why());
    }
}

/// The registry the consumer asks for schemas by id.
pub struct RegistryReader {
    client: kbench_rest::RestProxy,
    base: String,
}

impl RegistryReader {
    /// From the deserializer's properties (`schema.registry.url`, `basic.auth.user.info`, …).
    pub fn new(props: &BTreeMap<String, String>) -> Result<RegistryReader, SchemaError> {
        let url = props
            .get("schema.registry.url")
            .ok_or_else(|| SchemaError("schema.registry.url: missing".into()))?;
        let (client, base) = super::registry(url, props)?;
        Ok(RegistryReader { client, base })
    }

    /// The registry, without credentials.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Schema `id`, parsed for decoding; or why there is none to decode with (the registry has
    /// none, it is not Avro, it does not parse, the registry did not answer): counted, never a
    /// failed read.
    pub async fn schema(&self, id: u32) -> Result<ReadSchema, String> {
        match self.client.schema_by_id(&self.base, i64::from(id)).await {
            Ok(None) => Err("not in the registry".into()),
            Ok(Some((Some(kind), text))) if kind == "PROTOBUF" => super::proto::compile(&text)
                .map(ReadSchema::Protobuf)
                .map_err(|e| format!("the registry's .proto {e}")),
            Ok(Some((Some(kind), text))) if kind == "JSON" => json_validator(&text)
                .map(|v| ReadSchema::Json(Box::new(v)))
                .map_err(|e| format!("the registry's JSON Schema {e}")),
            Ok(Some((Some(kind), _))) if kind != "AVRO" => Err(format!(
                "a {kind} schema (kbench decodes Avro, Protobuf and JSON)"
            )),
            Ok(Some((_, text))) => super::avro::parse_for_codec(&text)
                .map(ReadSchema::Avro)
                .map_err(|e| format!("the registry's schema does not parse here: {e}")),
            Err(e) => Err(format!(
                "the registry did not answer: {}",
                registry_reason(&e)
            )),
        }
    }
}

/// A JSON Schema's validator (its own `$schema` draft, or the latest).
pub fn json_validator(text: &str) -> Result<jsonschema::Validator, String> {
    let schema: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
    json_validator_of(&schema)
}

/// A JSON Schema's validator that never fetches: a `$ref` outside the schema (an `http://` or
/// `file://` document) makes it fail to compile, rather than block the read loop on a fetch or read
/// a local file a registry's schema names.
pub fn json_validator_of(schema: &serde_json::Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_retriever(NoExternalRefs)
        .build(schema)
        .map_err(|e| format!("does not compile: {e}"))
}

/// Refuses every external reference.
struct NoExternalRefs;

impl jsonschema::Retrieve for NoExternalRefs {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "{}: kbench does not fetch external references",
            uri.as_str()
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole answer's values of a schema not yet known wait for it, however many; then decode.
    #[test]
    fn values_wait_for_their_schema_then_decode() {
        let text = r#"{"type":"record","name":"R","fields":[{"name":"n","type":"long"}]}"#;
        let g = crate::schema::avro::Generator::new(text).unwrap();
        let framed: Vec<Vec<u8>> = g
            .encoded(50_000, 1)
            .unwrap()
            .iter()
            .map(|v| crate::schema::frame(3, v))
            .collect();
        let mut d = Decoding::new("http://registry");
        for v in &framed {
            d.value(Some(v));
        }
        d.value(None);
        d.value(Some(b"\x00\x00\x00\x00\x04\xff"));
        assert_eq!(d.missing().len(), 2);
        d.learn(
            3,
            Ok(ReadSchema::Avro(
                crate::schema::avro::parse_for_codec(text).unwrap(),
            )),
        );
        d.learn(4, Err("not in the registry".into()));
        let mut last = framed[0].clone();
        last.push(0); // a byte left over
        d.value(Some(&last));
        let r = d.report();
        assert_eq!(r.decoded, 50_000, "{r:?}");
        assert_eq!(
            (r.not_framed, r.unknown_schema, r.not_decoded),
            (1, 1, 1),
            "{r:?}"
        );
        assert_eq!(r.schema_ids.get(&3), Some(&50_001));
    }

    /// A JSON Schema value decodes when it is JSON and valid against its schema.
    #[test]
    fn json_values_are_validated() {
        let v = json_validator(
            r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["a"],"properties":{"a":{"type":"integer","maximum":9}}}"#,
        )
        .unwrap();
        let mut d = Decoding::new("http://registry");
        d.learn(7, Ok(ReadSchema::Json(Box::new(v))));
        for value in [&br#"{"a":1}"#[..], br#"{"a":10}"#, br#"{"b":1}"#, b"nope"] {
            d.value(Some(&crate::schema::frame(7, value)));
        }
        let r = d.report();
        assert_eq!((r.decoded, r.not_decoded), (1, 3), "{r:?}");
        assert!(r.first_failure.unwrap().contains("/a"));
        assert!(json_validator("{").unwrap_err().contains("not JSON"));
        let external = json_validator(r#"{"$ref":"http://127.0.0.1:9/other.json"}"#).unwrap_err();
        assert!(external.contains("does not fetch"), "{external}");
    }

    /// Past 16 distinct ids, values are counted unasked.
    #[test]
    fn only_so_many_schema_ids_are_asked_for() {
        let mut d = Decoding::new("http://registry");
        for id in 0u32..40 {
            d.value(Some(&crate::schema::frame(id, &[2])));
        }
        assert_eq!(d.missing().len(), MAX_SCHEMA_IDS);
        let r = d.report();
        assert_eq!(r.unknown_schema, 40, "{r:?}");
        assert!(r.first_failure.unwrap().contains("not asked for"));
    }
}
