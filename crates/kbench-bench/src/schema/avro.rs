//! Avro values generated from a schema (`.avsc`): every type of the specification — primitives,
//! records (nested, recursive), enums, arrays, maps, unions, fixed — and its logical types (decimal,
//! uuid, date, time, timestamps, local timestamps, duration), drawn from a seeded generator so that a
//! run is reproducible. Encoding is apache-avro's (`to_avro_datum`, which also checks each value
//! against the schema); only the generator is kbench's.
//!
//! Lengths, ranges and value sets come from the schema's `arg.properties`, the annotation of
//! Confluent's avro-random-generator (which the Datagen connector and kloadgen read too):
//! `"length": N` or `{"min": A, "max": B}` (strings, bytes, arrays, maps; max exclusive),
//! `"range": {"min": A, "max": B}` (numbers; max exclusive), `"options": [...]` (any type: one of
//! them). Without them: strings and bytes of 8 to 16, arrays and maps of 1 to 4 items, numbers over
//! their whole range, dates and times around 2026.

use std::collections::HashMap;

use apache_avro::types::Value;
use apache_avro::{Days, Decimal, Duration, Millis, Months, Schema, Uuid};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value as Json;

/// Past this depth of nested records, a recursive schema takes its way out: a union's `null` (or
/// any branch that does not recurse), an empty array or map.
const MAX_DEPTH: usize = 8;
/// 2026-01-01T00:00:00Z in milliseconds, the middle of the generated times.
const EPOCH_2026_MS: i64 = 1_767_225_600_000;
/// The longest string, bytes or fixed a value may hold, and the most items of an array or map:
/// a larger hint is refused when the schema is read.
pub const MAX_LENGTH: u64 = 1 << 20;
pub const MAX_ITEMS: u64 = 10_000;
const YEAR_MS: i64 = 365 * 86_400_000;

/// Why a schema cannot be generated from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AvroError {
    #[error("not an Avro schema: {0}")]
    Parse(String),
    #[error("{path}: {reason}")]
    Unsupported { path: String, reason: String },
    #[error("a generated value does not encode (kbench's bug): {0}")]
    Encode(String),
    #[error("{count} values would hold more than {limit} bytes: ask for fewer (--schema-values)")]
    TooLarge { count: usize, limit: usize },
}

/// A length or a count: `min..max`, max exclusive (as avro-random-generator reads them).
#[derive(Debug, Clone, Copy)]
struct Span {
    min: u64,
    max: u64,
}

impl Span {
    fn draw(self, rng: &mut SmallRng) -> usize {
        if self.max <= self.min + 1 {
            self.min as usize
        } else {
            rng.random_range(self.min..self.max) as usize
        }
    }
}

/// A number's range, `min..max` (max exclusive), in the type's own terms.
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

#[derive(Debug, Clone)]
enum Kind {
    Null,
    Boolean,
    Int(Option<Range>),
    Long(Option<Range>),
    Float(Option<Range>),
    Double(Option<Range>),
    Bytes(Span),
    String(Span),
    Fixed(usize),
    Enum(Vec<String>),
    Array(Box<Node>, Span),
    Map(Box<Node>, Span),
    /// Index into `Generator::records`.
    Record(usize),
    Union(Vec<Node>),
    Date,
    TimeMillis,
    TimeMicros,
    TimestampMillis,
    TimestampMicros,
    LocalTimestampMillis,
    LocalTimestampMicros,
    Uuid,
    /// A `fixed` of 16 bytes of logical type uuid: written as the fixed.
    FixedUuid,
    /// Unscaled digits at most `precision`; `size` for a fixed, `None` for bytes.
    Decimal {
        precision: u32,
        size: Option<usize>,
    },
    Duration,
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    /// `arg.properties.options`, as JSON; one is chosen and read as the node's type.
    options: Option<Vec<Json>>,
}

#[derive(Debug, Clone)]
struct Record {
    fields: Vec<(String, Node)>,
}

/// A schema ready to generate from: its nodes compiled once, and apache-avro's parse to encode.
#[derive(Debug, Clone)]
pub struct Generator {
    schema: Schema,
    root: Node,
    records: Vec<Record>,
    /// The schema's full name (a named root), for the record-name subject strategies.
    full_name: Option<String>,
    /// Per record: how many more records deep its smallest value goes (`None`: no finite value
    /// has it). Past [`MAX_DEPTH`] each union takes its branch of the lowest rank, so that a
    /// recursive schema ends.
    ranks: Vec<Option<u32>>,
}

impl Generator {
    /// Compile `text`, an Avro schema in JSON.
    pub fn new(text: &str) -> Result<Generator, AvroError> {
        Schema::parse_str(text).map_err(|e| AvroError::Parse(e.to_string()))?;
        let json: Json = serde_json::from_str(text).map_err(|e| AvroError::Parse(e.to_string()))?;
        // apache-avro 0.21 reads a `fixed` of logical type uuid as its string uuid, and writes it
        // length-prefixed, where the specification writes the 16 bytes alone: it encodes with
        // that logical type taken off (the bytes are the same), and the generator makes the
        // fixed's 16 bytes a version-4 uuid.
        let mut plain = json.clone();
        strip_fixed_uuid(&mut plain);
        let schema = Schema::parse(&plain).map_err(|e| AvroError::Parse(e.to_string()))?;
        let mut c = Compiler {
            names: HashMap::new(),
            records: Vec::new(),
        };
        let root = c.node(&json, "", "$")?;
        let full_name = match &json {
            Json::Object(o) => o
                .get("name")
                .and_then(Json::as_str)
                .map(|n| full_name(n, o.get("namespace").and_then(Json::as_str).unwrap_or(""))),
            _ => None,
        };
        let mut g = Generator {
            schema,
            root,
            records: c.records,
            full_name,
            ranks: Vec::new(),
        };
        g.ranks = g.rank_records();
        if g.rank(&g.root).is_none() {
            return Err(AvroError::Unsupported {
                path: "$".into(),
                reason: "no finite value has this schema (a record that always contains itself, with no null, array, map or other branch on the way out)".into(),
            });
        }
        Ok(g)
    }

    /// The schema as apache-avro parsed it.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The root's full name, when it is a named type (record, enum, fixed).
    pub fn full_name(&self) -> Option<&str> {
        self.full_name.as_deref()
    }

    /// One value.
    pub fn value(&self, rng: &mut SmallRng) -> Value {
        self.generate(&self.root, rng, 0)
    }

    /// `count` values' Avro binary encodings (no framing), from `seed`.
    pub fn encoded(&self, count: usize, seed: u64) -> Result<Vec<Vec<u8>>, AvroError> {
        self.encoded_within(count, seed, usize::MAX)
    }

    /// The same, refused once the values hold more than `limit` bytes.
    pub fn encoded_within(
        &self,
        count: usize,
        seed: u64,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, AvroError> {
        let mut rng = SmallRng::seed_from_u64(seed);
        super::collect_within(
            count,
            limit,
            || {
                apache_avro::to_avro_datum(&self.schema, self.value(&mut rng))
                    .map_err(|e| AvroError::Encode(e.to_string()))
            },
            || AvroError::TooLarge { count, limit },
        )
    }

    /// A JSON document encoded with the schema (`--value-template`): plain JSON (a record as an
    /// object, an enum or a UUID as a string, bytes as a string), or Avro's JSON encoding, whose
    /// union values are wrapped in an object naming their branch (`{"string": "x"}`), as
    /// kafka-avro-console-producer reads it.
    pub fn encode_json(&self, doc: &serde_json::Value) -> Result<Vec<u8>, String> {
        let plain = apache_avro::to_value(doc)
            .and_then(|v| v.resolve(&self.schema))
            .map_err(|e| e.to_string());
        let value = match plain {
            Ok(v) => v,
            Err(first) => apache_avro::to_value(unwrap_unions(doc.clone()))
                .and_then(|v| v.resolve(&self.schema))
                .map_err(|_| format!("does not match the schema: {first}"))?,
        };
        apache_avro::to_avro_datum(&self.schema, value).map_err(|e| e.to_string())
    }

    /// Each record's rank, to a fixed point: a record is finite once all its fields are.
    fn rank_records(&self) -> Vec<Option<u32>> {
        let mut ranks: Vec<Option<u32>> = vec![None; self.records.len()];
        loop {
            let mut changed = false;
            for i in 0..self.records.len() {
                if ranks[i].is_some() {
                    continue;
                }
                let fields: Option<Vec<u32>> = self.records[i]
                    .fields
                    .iter()
                    .map(|(_, f)| rank_with(f, &ranks))
                    .collect();
                if let Some(f) = fields {
                    ranks[i] = Some(1 + f.into_iter().max().unwrap_or(0));
                    changed = true;
                }
            }
            if !changed {
                return ranks;
            }
        }
    }

    fn rank(&self, node: &Node) -> Option<u32> {
        rank_with(node, &self.ranks)
    }

    fn generate(&self, node: &Node, rng: &mut SmallRng, depth: usize) -> Value {
        if let Some(options) = &node.options
            && let Some(v) = options.get(rng.random_range(0..options.len()))
            && let Some(v) = Self::option_value(node, v)
        {
            return v;
        }
        match &node.kind {
            Kind::Null => Value::Null,
            Kind::Boolean => Value::Boolean(rng.random()),
            Kind::Int(r) => Value::Int(match r {
                Some(r) => draw_int(rng, r, i32::MIN as f64, i32::MAX as f64) as i32,
                None => rng.random(),
            }),
            Kind::Long(r) => Value::Long(match r {
                Some(r) => draw_int(rng, r, i64::MIN as f64, i64::MAX as f64),
                None => rng.random(),
            }),
            Kind::Float(r) => {
                let r = r.unwrap_or(Range {
                    min: -1e6,
                    max: 1e6,
                });
                Value::Float(rng.random_range(r.min..r.max.max(r.min + f64::EPSILON)) as f32)
            }
            Kind::Double(r) => {
                let r = r.unwrap_or(Range {
                    min: -1e9,
                    max: 1e9,
                });
                Value::Double(rng.random_range(r.min..r.max.max(r.min + f64::EPSILON)))
            }
            Kind::Bytes(s) => Value::Bytes((0..s.draw(rng)).map(|_| rng.random()).collect()),
            Kind::String(s) => {
                let n = s.draw(rng);
                Value::String(text(rng, n))
            }
            Kind::Fixed(n) => Value::Fixed(*n, (0..*n).map(|_| rng.random()).collect()),
            Kind::Enum(symbols) => {
                let i = rng.random_range(0..symbols.len());
                Value::Enum(i as u32, symbols[i].clone())
            }
            Kind::Array(items, s) => {
                let n = if depth >= MAX_DEPTH || self.rank(items).is_none() {
                    0
                } else {
                    s.draw(rng)
                };
                Value::Array(
                    (0..n)
                        .map(|_| self.generate(items, rng, depth + 1))
                        .collect(),
                )
            }
            Kind::Map(values, s) => {
                let n = if depth >= MAX_DEPTH || self.rank(values).is_none() {
                    0
                } else {
                    s.draw(rng)
                };
                Value::Map(
                    (0..n)
                        .map(|i| {
                            // Distinct keys, so that the count holds.
                            (
                                format!("{}{i}", text(rng, 6)),
                                self.generate(values, rng, depth + 1),
                            )
                        })
                        .collect(),
                )
            }
            Kind::Record(i) => Value::Record(
                self.records[*i]
                    .fields
                    .iter()
                    .map(|(name, f)| (name.clone(), self.generate(f, rng, depth + 1)))
                    .collect(),
            ),
            Kind::Union(branches) => {
                // Only branches with a finite value; past the depth cap, the one that ends soonest.
                let finite: Vec<(usize, u32)> = branches
                    .iter()
                    .enumerate()
                    .filter_map(|(i, b)| Some((i, self.rank(b)?)))
                    .collect();
                let i = if depth >= MAX_DEPTH {
                    finite.iter().min_by_key(|(_, r)| *r).map_or(0, |(i, _)| *i)
                } else {
                    finite[rng.random_range(0..finite.len())].0
                };
                Value::Union(
                    i as u32,
                    Box::new(self.generate(&branches[i], rng, depth + 1)),
                )
            }
            Kind::Date => Value::Date(
                ((EPOCH_2026_MS + rng.random_range(-YEAR_MS..YEAR_MS)) / 86_400_000) as i32,
            ),
            Kind::TimeMillis => Value::TimeMillis(rng.random_range(0..86_400_000)),
            Kind::TimeMicros => Value::TimeMicros(rng.random_range(0..86_400_000_000)),
            Kind::TimestampMillis => Value::TimestampMillis(around_2026(rng)),
            Kind::TimestampMicros => Value::TimestampMicros(around_2026(rng) * 1000),
            Kind::LocalTimestampMillis => Value::LocalTimestampMillis(around_2026(rng)),
            Kind::LocalTimestampMicros => Value::LocalTimestampMicros(around_2026(rng) * 1000),
            Kind::Uuid => Value::Uuid(Uuid::from_bytes(uuid_v4(rng))),
            Kind::FixedUuid => Value::Fixed(16, uuid_v4(rng).to_vec()),
            Kind::Decimal { precision, size } => {
                // An unscaled value of at most `precision` digits (and at most 18, an i64's).
                let digits = (*precision).min(18);
                let bound = 10i64.pow(digits);
                let unscaled = rng.random_range(-(bound - 1)..bound);
                Value::Decimal(Decimal::from(twos_complement(unscaled, *size)))
            }
            Kind::Duration => Value::Duration(Duration::new(
                Months::new(rng.random_range(0..24)),
                Days::new(rng.random_range(0..31)),
                Millis::new(rng.random_range(0..86_400_000)),
            )),
        }
    }

    /// An `options` entry as the node's value (`None` when it does not fit, so that a bad option
    /// is refused when the schema is compiled, never here).
    fn option_value(node: &Node, v: &Json) -> Option<Value> {
        Some(match (&node.kind, v) {
            (Kind::Null, Json::Null) => Value::Null,
            (Kind::Boolean, Json::Bool(b)) => Value::Boolean(*b),
            (Kind::Int(_), Json::Number(n)) => Value::Int(i32::try_from(n.as_i64()?).ok()?),
            (Kind::Long(_), Json::Number(n)) => Value::Long(n.as_i64()?),
            (Kind::Float(_), Json::Number(n)) => Value::Float(n.as_f64()? as f32),
            (Kind::Double(_), Json::Number(n)) => Value::Double(n.as_f64()?),
            (Kind::String(_), Json::String(s)) => Value::String(s.clone()),
            (Kind::Bytes(_), Json::String(s)) => Value::Bytes(s.as_bytes().to_vec()),
            (Kind::Enum(symbols), Json::String(s)) => {
                Value::Enum(symbols.iter().position(|x| x == s)? as u32, s.clone())
            }
            _ => return None,
        })
    }
}

/// A schema parsed for encoding and decoding: apache-avro's parse, a `fixed` uuid read as the
/// fixed it is written as (see [`Generator::new`]).
pub fn parse_for_codec(text: &str) -> Result<Schema, AvroError> {
    let mut json: Json = serde_json::from_str(text).map_err(|e| AvroError::Parse(e.to_string()))?;
    strip_fixed_uuid(&mut json);
    Schema::parse(&json).map_err(|e| AvroError::Parse(e.to_string()))
}

/// How many records deep `node`'s smallest value goes, given the records' ranks.
fn rank_with(node: &Node, ranks: &[Option<u32>]) -> Option<u32> {
    match &node.kind {
        Kind::Record(i) => ranks[*i],
        Kind::Union(branches) => branches.iter().filter_map(|b| rank_with(b, ranks)).min(),
        // An array or a map may be empty; anything else is a value of its own.
        _ => Some(0),
    }
}

/// Take `"logicalType": "uuid"` off every `fixed` (see [`Generator::new`]).
fn strip_fixed_uuid(json: &mut Json) {
    match json {
        Json::Object(o) => {
            if o.get("type").and_then(Json::as_str) == Some("fixed")
                && o.get("logicalType").and_then(Json::as_str) == Some("uuid")
            {
                o.remove("logicalType");
            }
            o.values_mut().for_each(strip_fixed_uuid);
        }
        Json::Array(a) => a.iter_mut().for_each(strip_fixed_uuid),
        _ => {}
    }
}

/// A uniform integer in `r`, clamped to the type.
fn draw_int(rng: &mut SmallRng, r: &Range, lo: f64, hi: f64) -> i64 {
    let min = r.min.clamp(lo, hi).ceil() as i64;
    let max = r.max.clamp(lo, hi).ceil() as i64;
    if max <= min {
        min
    } else {
        rng.random_range(min..max)
    }
}

/// Random bytes with a version-4 uuid's version and variant bits.
fn uuid_v4(rng: &mut SmallRng) -> [u8; 16] {
    let mut b: [u8; 16] = rng.random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

fn around_2026(rng: &mut SmallRng) -> i64 {
    EPOCH_2026_MS + rng.random_range(-YEAR_MS..YEAR_MS)
}

/// Letters and digits.
fn text(rng: &mut SmallRng, len: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// `v` big-endian two's complement: the fewest bytes (a bytes decimal) or exactly `size`.
fn twos_complement(v: i64, size: Option<usize>) -> Vec<u8> {
    let full = v.to_be_bytes();
    match size {
        Some(n) if n >= 8 => {
            let fill = if v < 0 { 0xff } else { 0 };
            let mut out = vec![fill; n - 8];
            out.extend_from_slice(&full);
            out
        }
        Some(n) => full[8 - n..].to_vec(),
        None => {
            let mut start = 0;
            while start < 7 {
                let (b, next) = (full[start], full[start + 1]);
                if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
                    start += 1;
                } else {
                    break;
                }
            }
            full[start..].to_vec()
        }
    }
}

fn full_name(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    }
}

/// The JSON schema walked once into nodes; named types (records, enums, fixed) by full name.
struct Compiler {
    names: HashMap<String, Node>,
    records: Vec<Record>,
}

impl Compiler {
    fn node(&mut self, json: &Json, namespace: &str, path: &str) -> Result<Node, AvroError> {
        let bad = |reason: String| AvroError::Unsupported {
            path: path.to_string(),
            reason,
        };
        match json {
            Json::String(name) => self.named_or_primitive(name, namespace, None, path),
            Json::Array(branches) => Ok(Node {
                kind: Kind::Union(
                    branches
                        .iter()
                        .enumerate()
                        .map(|(i, b)| self.node(b, namespace, &format!("{path}[{i}]")))
                        .collect::<Result<_, _>>()?,
                ),
                options: None,
            }),
            Json::Object(o) => {
                let ty = o.get("type").ok_or_else(|| bad("no \"type\"".into()))?;
                let args = o.get("arg.properties");
                let length = span(args.and_then(|a| a.get("length")), path)?;
                let range = range(args.and_then(|a| a.get("range")), path)?;
                let options = args
                    .and_then(|a| a.get("options"))
                    .map(|v| {
                        v.as_array()
                            .filter(|a| !a.is_empty())
                            .cloned()
                            .ok_or_else(|| bad("arg.properties.options: a non-empty list".into()))
                    })
                    .transpose()?;
                let logical = o.get("logicalType").and_then(Json::as_str);
                let ns = o
                    .get("namespace")
                    .and_then(Json::as_str)
                    .unwrap_or(namespace);
                let ty_name = match ty {
                    Json::String(t) => t.as_str(),
                    // {"type": {...}} or {"type": [...]}: the inner type, hints kept.
                    other => {
                        let mut n = self.node(other, ns, path)?;
                        apply_hints(&mut n, length, range, path)?;
                        n.options = options.or(n.options);
                        self.check_options(&n, path)?;
                        return Ok(n);
                    }
                };
                let kind = match (ty_name, logical) {
                    ("int", Some("date")) => Kind::Date,
                    ("int", Some("time-millis")) => Kind::TimeMillis,
                    ("long", Some("time-micros")) => Kind::TimeMicros,
                    ("long", Some("timestamp-millis")) => Kind::TimestampMillis,
                    ("long", Some("timestamp-micros")) => Kind::TimestampMicros,
                    ("long", Some("local-timestamp-millis")) => Kind::LocalTimestampMillis,
                    ("long", Some("local-timestamp-micros")) => Kind::LocalTimestampMicros,
                    ("string", Some("uuid")) => Kind::Uuid,
                    ("fixed", Some("uuid")) if o.get("size").and_then(Json::as_u64) == Some(16) => {
                        self.register(o, ns, Kind::FixedUuid, path)?
                    }
                    ("bytes", Some("decimal")) => Kind::Decimal {
                        precision: precision(o, path)?,
                        size: None,
                    },
                    ("fixed", Some("decimal")) => {
                        let size = fixed_size(o, path)?;
                        let precision = precision(o, path)?;
                        // A fixed of n bytes holds floor(log10(2^(8n-1) - 1)) digits.
                        let most = ((8 * size - 1) as f64 * 2f64.log10()).floor() as u32;
                        if precision > most {
                            return Err(bad(format!(
                                "decimal precision {precision} does not fit a fixed of {size} bytes (at most {most})"
                            )));
                        }
                        self.register(
                            o,
                            ns,
                            Kind::Decimal {
                                precision,
                                size: Some(size),
                            },
                            path,
                        )?
                    }
                    ("fixed", Some("duration")) => self.register(o, ns, Kind::Duration, path)?,
                    ("record" | "error", _) => return self.record(o, ns, path),
                    ("enum", _) => {
                        let symbols: Vec<String> = o
                            .get("symbols")
                            .and_then(Json::as_array)
                            .map(|s| {
                                s.iter()
                                    .filter_map(|x| x.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        if symbols.is_empty() {
                            return Err(bad("an enum with no symbols".into()));
                        }
                        self.register(o, ns, Kind::Enum(symbols), path)?
                    }
                    ("fixed", _) => {
                        let size = fixed_size(o, path)?;
                        self.register(o, ns, Kind::Fixed(size), path)?
                    }
                    ("array", _) => {
                        let items = o
                            .get("items")
                            .ok_or_else(|| bad("an array with no \"items\"".into()))?;
                        Kind::Array(
                            Box::new(self.node(items, ns, &format!("{path}[]"))?),
                            items_span(length, path)?,
                        )
                    }
                    ("map", _) => {
                        let values = o
                            .get("values")
                            .ok_or_else(|| bad("a map with no \"values\"".into()))?;
                        Kind::Map(
                            Box::new(self.node(values, ns, &format!("{path}{{}}"))?),
                            items_span(length, path)?,
                        )
                    }
                    // Any other logical type on a primitive is read as the primitive, as the
                    // specification says of unknown logical types.
                    (name, _) => {
                        let mut n = self.named_or_primitive(name, ns, None, path)?;
                        apply_hints(&mut n, length, range, path)?;
                        n.options = options;
                        self.check_options(&n, path)?;
                        return Ok(n);
                    }
                };
                let n = Node { kind, options };
                self.check_options(&n, path)?;
                Ok(n)
            }
            other => Err(bad(format!("{other} is not a type"))),
        }
    }

    fn check_options(&self, n: &Node, path: &str) -> Result<(), AvroError> {
        let Some(options) = &n.options else {
            return Ok(());
        };
        for o in options {
            if Generator::option_value(n, o).is_none() {
                return Err(AvroError::Unsupported {
                    path: path.into(),
                    reason: format!("arg.properties.options: {o} is not a value of this type"),
                });
            }
        }
        Ok(())
    }

    fn named_or_primitive(
        &mut self,
        name: &str,
        namespace: &str,
        length: Option<Span>,
        path: &str,
    ) -> Result<Node, AvroError> {
        let text_span = length.unwrap_or(Span { min: 8, max: 17 });
        let kind = match name {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "int" => Kind::Int(None),
            "long" => Kind::Long(None),
            "float" => Kind::Float(None),
            "double" => Kind::Double(None),
            "bytes" => Kind::Bytes(text_span),
            "string" => Kind::String(text_span),
            _ => {
                let full = full_name(name, namespace);
                return self
                    .names
                    .get(&full)
                    .or_else(|| self.names.get(name))
                    .cloned()
                    .ok_or_else(|| AvroError::Unsupported {
                        path: path.into(),
                        reason: format!("unknown type {name:?}"),
                    });
            }
        };
        Ok(Node {
            kind,
            options: None,
        })
    }

    /// A named type's node, kept under its full name for later references.
    fn register(
        &mut self,
        o: &serde_json::Map<String, Json>,
        ns: &str,
        kind: Kind,
        path: &str,
    ) -> Result<Kind, AvroError> {
        let name = o
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| AvroError::Unsupported {
                path: path.into(),
                reason: "a named type with no \"name\"".into(),
            })?;
        self.names.insert(
            full_name(name, ns),
            Node {
                kind: kind.clone(),
                options: None,
            },
        );
        Ok(kind)
    }

    fn record(
        &mut self,
        o: &serde_json::Map<String, Json>,
        ns: &str,
        path: &str,
    ) -> Result<Node, AvroError> {
        let name = o
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| AvroError::Unsupported {
                path: path.into(),
                reason: "a record with no \"name\"".into(),
            })?;
        let full = full_name(name, ns);
        // The record's own namespace for its fields' names.
        let inner_ns = full
            .rsplit_once('.')
            .map(|(n, _)| n)
            .unwrap_or("")
            .to_string();
        let index = self.records.len();
        self.records.push(Record { fields: Vec::new() });
        let node = Node {
            kind: Kind::Record(index),
            options: None,
        };
        // Registered before its fields, so that a field may name the record itself.
        self.names.insert(full.clone(), node.clone());
        let mut fields = Vec::new();
        for f in o
            .get("fields")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let fname = f.get("name").and_then(Json::as_str).unwrap_or("?");
            let fpath = format!("{path}.{fname}");
            let ty = f.get("type").ok_or_else(|| AvroError::Unsupported {
                path: fpath.clone(),
                reason: "a field with no \"type\"".into(),
            })?;
            let mut n = self.node(ty, &inner_ns, &fpath)?;
            // Hints on the field itself apply to its type.
            if let Some(args) = f.get("arg.properties") {
                let wrapped = serde_json::json!({ "type": ty, "arg.properties": args });
                if ty.is_string() {
                    n = self.node(&wrapped, &inner_ns, &fpath)?;
                } else if let Some(opts) = args.get("options").and_then(Json::as_array) {
                    n.options = Some(opts.clone());
                    self.check_options(&n, &fpath)?;
                }
            }
            fields.push((fname.to_string(), n));
        }
        self.records[index].fields = fields;
        Ok(node)
    }
}

fn span(v: Option<&Json>, path: &str) -> Result<Option<Span>, AvroError> {
    let bad = || AvroError::Unsupported {
        path: path.into(),
        reason: format!(
            "arg.properties.length: a count, or {{\"min\": A, \"max\": B}} with A < B, at most {MAX_LENGTH}"
        ),
    };
    match v {
        None => Ok(None),
        Some(Json::Number(n)) => {
            let n = n.as_u64().filter(|n| *n <= MAX_LENGTH).ok_or_else(bad)?;
            Ok(Some(Span { min: n, max: n + 1 }))
        }
        Some(Json::Object(o)) => {
            let min = o.get("min").map_or(Some(0), Json::as_u64).ok_or_else(bad)?;
            let max = o.get("max").and_then(Json::as_u64).ok_or_else(bad)?;
            if max <= min || max > MAX_LENGTH + 1 {
                return Err(bad());
            }
            Ok(Some(Span { min, max }))
        }
        Some(_) => Err(bad()),
    }
}

/// `length` and `range` onto the node they fit (a length on an array or map is its item count);
/// a range checked against the type's own.
fn apply_hints(
    n: &mut Node,
    length: Option<Span>,
    range: Option<Range>,
    path: &str,
) -> Result<(), AvroError> {
    let bad = |reason: String| AvroError::Unsupported {
        path: path.into(),
        reason,
    };
    if let Some(l) = length {
        match &mut n.kind {
            Kind::String(s) | Kind::Bytes(s) => *s = l,
            Kind::Array(_, s) | Kind::Map(_, s) => {
                if l.max > MAX_ITEMS + 1 {
                    return Err(bad(format!(
                        "arg.properties.length: at most {MAX_ITEMS} items"
                    )));
                }
                *s = l
            }
            _ => {
                return Err(bad(
                    "arg.properties.length: only on a string, bytes, array or map".into(),
                ));
            }
        }
    }
    if let Some(r) = range {
        let (lo, hi) = match n.kind {
            Kind::Int(_) => (i32::MIN as f64, i32::MAX as f64 + 1.0),
            Kind::Long(_) => (i64::MIN as f64, i64::MAX as f64),
            Kind::Float(_) => (f32::MIN as f64, f32::MAX as f64),
            Kind::Double(_) => (-1e300, 1e300),
            _ => {
                return Err(bad(
                    "arg.properties.range: only on an int, long, float or double".into(),
                ));
            }
        };
        if r.min < lo || r.max > hi {
            return Err(bad(format!(
                "arg.properties.range: {{\"min\": {}, \"max\": {}}} is outside the type's values",
                r.min, r.max
            )));
        }
        n.kind = match n.kind {
            Kind::Int(_) => Kind::Int(Some(r)),
            Kind::Long(_) => Kind::Long(Some(r)),
            Kind::Float(_) => Kind::Float(Some(r)),
            _ => Kind::Double(Some(r)),
        };
    }
    Ok(())
}

/// An array's or map's item count: the hint (at most [`MAX_ITEMS`]) or 1 to 4.
fn items_span(length: Option<Span>, path: &str) -> Result<Span, AvroError> {
    match length {
        Some(l) if l.max > MAX_ITEMS + 1 => Err(AvroError::Unsupported {
            path: path.into(),
            reason: format!("arg.properties.length: at most {MAX_ITEMS} items"),
        }),
        Some(l) => Ok(l),
        None => Ok(Span { min: 1, max: 5 }),
    }
}

fn range(v: Option<&Json>, path: &str) -> Result<Option<Range>, AvroError> {
    let bad = || AvroError::Unsupported {
        path: path.into(),
        reason: "arg.properties.range: {\"min\": A, \"max\": B} with A < B".into(),
    };
    match v {
        None => Ok(None),
        Some(Json::Object(o)) => {
            let min = o.get("min").and_then(Json::as_f64).ok_or_else(bad)?;
            let max = o.get("max").and_then(Json::as_f64).ok_or_else(bad)?;
            if max <= min || !(max - min).is_finite() {
                return Err(bad());
            }
            Ok(Some(Range { min, max }))
        }
        Some(_) => Err(bad()),
    }
}

fn fixed_size(o: &serde_json::Map<String, Json>, path: &str) -> Result<usize, AvroError> {
    o.get("size")
        .and_then(Json::as_u64)
        .filter(|s| (1..=MAX_LENGTH).contains(s))
        .map(|s| s as usize)
        .ok_or_else(|| AvroError::Unsupported {
            path: path.into(),
            reason: format!("a fixed needs a \"size\" from 1 to {MAX_LENGTH} (kbench's limit)"),
        })
}

fn precision(o: &serde_json::Map<String, Json>, path: &str) -> Result<u32, AvroError> {
    o.get("precision")
        .and_then(Json::as_u64)
        .filter(|p| *p > 0)
        .map(|p| p as u32)
        .ok_or_else(|| AvroError::Unsupported {
            path: path.into(),
            reason: "a decimal with no positive \"precision\"".into(),
        })
}

/// Avro's JSON encoding read as plain JSON: an object of one key naming a type (a primitive, or a
/// name with a dot or a capital, as named types are written) is the union branch's value.
fn unwrap_unions(doc: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    const PRIMITIVES: [&str; 8] = [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    ];
    match doc {
        Value::Object(map) if map.len() == 1 => {
            let (k, v) = map.into_iter().next().expect("one entry");
            let names_a_type = PRIMITIVES.contains(&k.as_str())
                || matches!(k.as_str(), "array" | "map")
                || k.contains('.')
                || k.starts_with(|c: char| c.is_ascii_uppercase());
            if names_a_type {
                unwrap_unions(v)
            } else {
                Value::Object([(k, unwrap_unions(v))].into_iter().collect())
            }
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, unwrap_unions(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(unwrap_unions).collect()),
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type and logical type of the specification, nested and recursive.
    pub const EVERY_TYPE: &str = include_str!("../../tests/data/every_type.avsc");

    fn round_trip(g: &Generator, seed: u64, n: usize) -> Vec<Value> {
        g.encoded(n, seed)
            .unwrap()
            .iter()
            .map(|bytes| {
                let v = apache_avro::from_avro_datum(g.schema(), &mut &bytes[..], None).unwrap();
                assert!(v.validate(g.schema()));
                v
            })
            .collect()
    }

    #[test]
    fn every_type_generates_encodes_and_decodes() {
        let g = Generator::new(EVERY_TYPE).unwrap();
        assert_eq!(g.full_name(), Some("kbench.test.EveryType"));
        let values = round_trip(&g, 1, 500);
        // Both branches of the optional field, and the list's recursion, are reached.
        let field = |v: &Value, name: &str| match v {
            Value::Record(fs) => fs.iter().find(|(n, _)| n == name).unwrap().1.clone(),
            _ => panic!("not a record"),
        };
        let branches: std::collections::HashSet<u32> = values
            .iter()
            .map(|v| match field(v, "maybe") {
                Value::Union(i, _) => i,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(branches.len(), 3, "null, string and record branches");
        for v in &values {
            let Value::String(s) = field(v, "code") else {
                panic!()
            };
            assert_eq!(s.len(), 4, "length hint");
            let Value::Int(age) = field(v, "age") else {
                panic!()
            };
            assert!((18..65).contains(&age), "range hint: {age}");
            let Value::String(c) = field(v, "country") else {
                panic!()
            };
            assert!(["NL", "FR", "DE"].contains(&c.as_str()), "options hint");
            let Value::Array(tags) = field(v, "tags") else {
                panic!()
            };
            assert!((2..4).contains(&tags.len()), "array length hint");
        }
    }

    #[test]
    fn a_seed_gives_the_same_values() {
        // The same values; a map's entries may be written in another order (apache-avro keeps
        // them in a HashMap), so the decoded values are compared, not the bytes.
        let g = Generator::new(EVERY_TYPE).unwrap();
        let (a, b, c) = (
            round_trip(&g, 7, 50),
            round_trip(&g, 7, 50),
            round_trip(&g, 8, 50),
        );
        assert!(a == b, "seed 7 twice gave different values");
        assert!(a != c, "seeds 7 and 8 gave the same values");
    }

    #[test]
    fn bad_schemas_are_refused_naming_the_place() {
        let cases = [
            ("{\"type\":\"record\"", "not an Avro schema"),
            (
                r#"{"type":"record","name":"L","fields":[{"name":"next","type":"L"}]}"#,
                "always contains itself",
            ),
            (
                r#"{"type":"record","name":"R","fields":[{"name":"s","type":{"type":"string","arg.properties":{"length":{"min":5,"max":2}}}}]}"#,
                "$.s: arg.properties.length",
            ),
            (
                r#"{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"int","arg.properties":{"options":["x"]}}}]}"#,
                "$.n: arg.properties.options: \"x\"",
            ),
        ];
        for (schema, says) in cases {
            let e = Generator::new(schema).unwrap_err().to_string();
            assert!(e.contains(says), "{schema}: {e}");
        }
    }

    /// The specification writes a fixed as its bytes alone, a uuid fixed too (apache-avro 0.21
    /// would write a length-prefixed string), a duration in 12 and a decimal fixed in its size.
    #[test]
    fn fixed_types_are_written_as_their_bytes_alone() {
        for (ty, len) in [
            (
                r#"{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}"#,
                16,
            ),
            (
                r#"{"type":"fixed","name":"D","size":12,"logicalType":"duration"}"#,
                12,
            ),
            (
                r#"{"type":"fixed","name":"M","size":8,"logicalType":"decimal","precision":10}"#,
                8,
            ),
            (r#"{"type":"fixed","name":"F","size":5}"#, 5),
        ] {
            let g = Generator::new(ty).unwrap();
            for v in g.encoded(20, 1).unwrap() {
                assert_eq!(v.len(), len, "{ty}");
            }
        }
    }

    /// A tree whose every branch is a record still ends: past the depth cap each union takes the
    /// branch that ends soonest.
    #[test]
    fn recursion_through_unions_of_records_ends() {
        let expr = r#"{"type":"record","name":"E","fields":[{"name":"op","type":[
            {"type":"record","name":"Add","fields":[{"name":"l","type":"E"},{"name":"r","type":"E"}]},
            {"type":"record","name":"Lit","fields":[{"name":"v","type":"long"}]}]}]}"#;
        let g = Generator::new(expr).unwrap();
        assert_eq!(round_trip(&g, 3, 200).len(), 200);
        // Arrays of a record with no finite value are always empty; the record is still refused
        // where it is required.
        let never = r#"{"type":"record","name":"R","fields":[{"name":"a","type":[
            {"type":"record","name":"A","fields":[{"name":"b","type":"R"}]}]}]}"#;
        assert!(
            Generator::new(never)
                .unwrap_err()
                .to_string()
                .contains("no finite value")
        );
    }

    #[test]
    fn hints_out_of_bounds_are_refused() {
        for (schema, says) in [
            (
                r#"{"type":"string","arg.properties":{"length":18446744073709551615}}"#,
                "length",
            ),
            (
                r#"{"type":"fixed","name":"F","size":1000000000000}"#,
                "size",
            ),
            (
                r#"{"type":"int","arg.properties":{"range":{"min":3e9,"max":4e9}}}"#,
                "outside",
            ),
            (
                r#"{"type":"double","arg.properties":{"range":{"min":-1e308,"max":1e308}}}"#,
                "range",
            ),
            (
                r#"{"type":"array","items":"int","arg.properties":{"length":{"min":1,"max":1000000}}}"#,
                "items",
            ),
            (
                r#"{"type":{"type":"int"},"arg.properties":{"options":["x"]}}"#,
                "options",
            ),
            (
                r#"{"type":"boolean","arg.properties":{"length":3}}"#,
                "only on",
            ),
        ] {
            let e = Generator::new(schema).unwrap_err().to_string();
            assert!(e.contains(says), "{schema}: {e}");
        }
        let big = Generator::new(r#"{"type":"string","arg.properties":{"length":1000}}"#).unwrap();
        assert!(matches!(
            big.encoded_within(100, 1, 50_000),
            Err(AvroError::TooLarge { .. })
        ));
    }

    #[test]
    fn decimals_fit_their_bytes() {
        assert_eq!(twos_complement(1, None), vec![1]);
        assert_eq!(twos_complement(-1, None), vec![0xff]);
        assert_eq!(twos_complement(128, None), vec![0, 128]);
        assert_eq!(twos_complement(-129, None), vec![0xff, 0x7f]);
        assert_eq!(twos_complement(-2, Some(10)).len(), 10);
        assert_eq!(twos_complement(300, Some(3)), vec![0, 1, 44]);
    }
}
