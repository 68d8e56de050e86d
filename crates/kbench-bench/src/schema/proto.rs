//! Protobuf values from a `.proto` file at run time (`--value-schema FILE.proto`): protox compiles
//! the file (imports of Google's well-known types resolved from protox's copies), prost-reflect
//! builds and encodes dynamic messages, and the generator here draws each field's value from a
//! seed — every scalar type, enums, nested and recursive messages, `repeated`, `map` (at most one
//! entry, so that a seed's bytes are the same every run) and `oneof` (one field of each chosen at
//! random). Confluent's framing for Protobuf adds the message indexes
//! (the message's path in the file) after the schema id.

use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, EnumDescriptor, FieldDescriptor, Kind, MapKey,
    MessageDescriptor, Value,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The name the schema's text is compiled under.
const FILE_NAME: &str = "kbench-value.proto";
/// Nested messages deeper than this are left unset (a recursive message ends).
const MAX_DEPTH: usize = 6;
/// Elements of a `repeated` field, at most (a `map` gets at most one entry).
const MAX_ITEMS: usize = 4;
/// Messages, list elements and map entries one value may hold: past this, lists and maps stay
/// empty and message fields unset (a message with several repeated fields of its own type would
/// otherwise grow as (4k)^6).
const MAX_NODES: usize = 10_000;
/// A `string` or `bytes` field's length, at most.
const MAX_LENGTH: usize = 16;

/// The `.proto` text as its only file.
struct Source(String);

impl FileResolver for Source {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == FILE_NAME {
            File::from_source(name, &self.0)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// Compile a `.proto`'s text: the descriptor pool holding it (and the well-known types it imports).
pub fn compile(text: &str) -> Result<DescriptorPool, String> {
    let mut resolver = ChainFileResolver::new();
    resolver.add(Source(text.to_string()));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    compiler
        .open_file(FILE_NAME)
        .map_err(|e| format!("does not compile: {e}"))?;
    Ok(compiler.descriptor_pool())
}

/// The messages of the compiled file, top-level ones first, each with its nested ones after it.
fn messages(pool: &DescriptorPool) -> Vec<MessageDescriptor> {
    fn walk(m: MessageDescriptor, out: &mut Vec<MessageDescriptor>) {
        let children: Vec<_> = m.child_messages().filter(|c| !c.is_map_entry()).collect();
        out.push(m);
        for c in children {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    if let Some(file) = pool.get_file_by_name(FILE_NAME) {
        for m in file.messages() {
            walk(m, &mut out);
        }
    }
    out
}

/// A message's path in its file, as Confluent's framing writes it: its index among the top-level
/// messages, then among each parent's nested messages — counting a `map` field's synthetic entry
/// messages as the descriptors do (Python's and Go's serializers), or not (Java's, which reads the
/// registered text).
fn indexes_counting(message: &MessageDescriptor, map_entries: bool) -> Vec<i32> {
    let mut path = Vec::new();
    let mut at = message.clone();
    loop {
        let (siblings, parent): (Vec<MessageDescriptor>, _) = match at.parent_message() {
            Some(p) => (
                p.child_messages()
                    .filter(|c| map_entries || !c.is_map_entry())
                    .collect(),
                Some(p),
            ),
            None => (at.parent_file().messages().collect(), None),
        };
        let i = siblings
            .iter()
            .position(|s| s.full_name() == at.full_name())
            .unwrap_or(0);
        path.push(i as i32);
        match parent {
            Some(p) => at = p,
            None => break,
        }
    }
    path.reverse();
    path
}

/// A message's path in its file as the descriptors count it (map entries included).
pub fn message_indexes(message: &MessageDescriptor) -> Vec<i32> {
    indexes_counting(message, true)
}

/// Confluent's message-index prefix: the count, then each index, as zigzag varints; the common
/// case `[0]` (the first message) is the single byte 0.
pub fn index_prefix(indexes: &[i32]) -> Vec<u8> {
    fn zigzag(out: &mut Vec<u8>, v: i32) {
        let mut n = ((v << 1) ^ (v >> 31)) as u32;
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    if indexes == [0] {
        return vec![0];
    }
    let mut out = Vec::new();
    zigzag(&mut out, indexes.len() as i32);
    for i in indexes {
        zigzag(&mut out, *i);
    }
    out
}

/// Read a message-index prefix off `bytes`: the indexes and the bytes after them.
pub fn read_index_prefix(bytes: &[u8]) -> Option<(Vec<i32>, &[u8])> {
    fn varint(bytes: &[u8], at: &mut usize) -> Option<i32> {
        let mut n = 0u32;
        for shift in (0..35).step_by(7) {
            let b = *bytes.get(*at)?;
            *at += 1;
            n |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(((n >> 1) as i32) ^ -((n & 1) as i32));
            }
        }
        None
    }
    let mut at = 0;
    let count = varint(bytes, &mut at)?;
    if count == 0 {
        return Some((vec![0], &bytes[at..]));
    }
    if !(1..=32).contains(&count) {
        return None;
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        indexes.push(varint(bytes, &mut at)?);
    }
    Some((indexes, &bytes[at..]))
}

/// The message `indexes` names in `pool`'s compiled file.
pub fn message_at(pool: &DescriptorPool, indexes: &[i32]) -> Option<MessageDescriptor> {
    let file = pool.get_file_by_name(FILE_NAME)?;
    let (first, rest) = indexes.split_first()?;
    let mut m = file.messages().nth(usize::try_from(*first).ok()?)?;
    for i in rest {
        let child = m.child_messages().nth(usize::try_from(*i).ok()?)?;
        m = child;
    }
    Some(m)
}

/// Values of one message of a `.proto`.
pub struct Generator {
    message: MessageDescriptor,
    indexes: Vec<i32>,
    /// `--schema-hint`s, by the field's full name.
    hints: Hints,
}

/// `--schema-hint FIELD=KIND:SPEC`, by the field's full name (`package.Message.field`).
pub type Hints = std::collections::HashMap<String, FieldHint>;

/// What a `--schema-hint` says of a field (a `.proto` has nowhere to say it): its string or bytes
/// length, its numbers' range, the values it takes, or how many items a repeated or map field has.
#[derive(Debug, Clone, Default)]
pub struct FieldHint {
    length: Option<(usize, usize)>,
    range: Option<(f64, f64)>,
    values: Option<Vec<Value>>,
    size: Option<(usize, usize)>,
}

/// The longest a hinted string or bytes may be (as an Avro hint's).
const MAX_HINTED_LENGTH: usize = 1 << 20;
/// The most items a hinted repeated or map field may have (as an Avro hint's).
const MAX_HINTED_SIZE: usize = 10_000;
/// The string and bytes one value may hold in all: past this, strings and bytes are cut short (a
/// repeated field of long strings would otherwise hold gigabytes).
const MAX_VALUE_BYTES: usize = 16 << 20;

/// What one value may still take: messages and items, and string and bytes.
struct Budget {
    nodes: usize,
    bytes: usize,
}

impl Generator {
    /// The file's message `name` (its full or short name), or its first message, with `hints`
    /// (`FIELD=KIND:SPEC`, as given).
    pub fn new(
        text: &str,
        name: Option<&str>,
        hints: &[(String, String)],
    ) -> Result<Generator, String> {
        let pool = compile(text)?;
        let all = messages(&pool);
        let message = match name {
            None => all.first().cloned().ok_or("has no message")?,
            Some(n) => {
                let short: Vec<&MessageDescriptor> = all.iter().filter(|m| m.name() == n).collect();
                if all.iter().all(|m| m.full_name() != n) && short.len() > 1 {
                    return Err(format!(
                        "--value-message {n}: several messages have that name ({}): give the full name",
                        short
                            .iter()
                            .map(|m| m.full_name().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                all.iter()
                    .find(|m| m.full_name() == n || m.name() == n)
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "has no message {n:?} (it has {})",
                            all.iter()
                                .map(|m| m.full_name().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?
            }
        };
        let indexes = message_indexes(&message);
        if indexes != indexes_counting(&message, false) {
            return Err(format!(
                "message {}: its message indexes differ between Confluent's clients (a map field of its parent is declared before it: Python and Go count the map's entry type, Java does not); declare it before its parent's map fields, or at the top level",
                message.full_name()
            ));
        }
        let hints = parse_hints(&pool, hints)?;
        Ok(Generator {
            message,
            indexes,
            hints,
        })
    }

    /// The message's full name (RecordNameStrategy's subject).
    pub fn full_name(&self) -> &str {
        self.message.full_name()
    }

    /// The message-index prefix of every value.
    pub fn prefix(&self) -> Vec<u8> {
        index_prefix(&self.indexes)
    }

    /// A JSON document encoded as the message (`--value-template`): Protobuf's JSON mapping
    /// (field names as written or in lowerCamelCase, enums by name, 64-bit integers as strings or
    /// numbers, bytes in base64, Timestamps as RFC 3339), after the message indexes.
    pub fn encode_json(&self, doc: &serde_json::Value) -> Result<Vec<u8>, String> {
        let m = DynamicMessage::deserialize(self.message.clone(), doc)
            .map_err(|e| format!("is not a {}: {e}", self.message.full_name()))?;
        Ok([self.prefix(), m.encode_to_vec()].concat())
    }

    /// One message.
    pub fn value(&self, rng: &mut SmallRng) -> DynamicMessage {
        let mut budget = Budget {
            nodes: MAX_NODES,
            bytes: MAX_VALUE_BYTES,
        };
        message(&self.message, &self.hints, rng, 0, &mut budget)
    }

    /// `count` messages' encodings (no framing), from `seed`; refused once they hold more than
    /// `limit` bytes.
    pub fn encoded_within(
        &self,
        count: usize,
        seed: u64,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut rng = SmallRng::seed_from_u64(seed);
        super::collect_within(
            count,
            limit,
            || Ok(self.value(&mut rng).encode_to_vec()),
            || super::too_big(count, limit),
        )
    }
}

fn message(
    desc: &MessageDescriptor,
    hints: &Hints,
    rng: &mut SmallRng,
    depth: usize,
    budget: &mut Budget,
) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    budget.nodes = budget.nodes.saturating_sub(1);
    if desc.full_name() == "google.protobuf.Timestamp" {
        // A time a reader can show: between 2001 and 2033.
        m.set_field_by_name(
            "seconds",
            Value::I64(rng.random_range(1_000_000_000..2_000_000_000)),
        );
        m.set_field_by_name("nanos", Value::I32(rng.random_range(0..1_000_000_000)));
        return m;
    }
    // Of each oneof (not proto3's synthetic ones for `optional`), one field.
    let chosen: Vec<String> = desc
        .oneofs()
        .filter(|o| !o.is_synthetic())
        .filter_map(|o| {
            let fields: Vec<FieldDescriptor> = o.fields().collect();
            let pick = rng.random_range(0..fields.len().max(1));
            fields.get(pick).map(|f| f.full_name().to_string())
        })
        .collect();
    for field in desc.fields() {
        if let Some(o) = field.containing_oneof()
            && !o.is_synthetic()
            && !chosen.iter().any(|c| c == field.full_name())
        {
            continue;
        }
        if let Some(v) = field_value(&field, hints, rng, depth, budget) {
            m.set_field(&field, v);
        }
    }
    m
}

/// A field's value; `None` for a message field past [`MAX_DEPTH`] (left unset).
fn field_value(
    field: &FieldDescriptor,
    hints: &Hints,
    rng: &mut SmallRng,
    depth: usize,
    budget: &mut Budget,
) -> Option<Value> {
    let deep = depth >= MAX_DEPTH || budget.nodes == 0;
    let hint = hints.get(field.full_name());
    let size = hint.and_then(|h| h.size);
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return None;
        };
        let (k, v) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        // At most one entry: prost-reflect holds a map in a HashMap, whose order would make the
        // same seed's bytes differ from run to run.
        let n = match (deep, size) {
            (true, _) => 0,
            (false, Some((lo, hi))) => rng.random_range(lo..=hi).min(budget.nodes),
            (false, None) => rng.random_range(0..=1),
        };
        budget.nodes = budget.nodes.saturating_sub(n);
        let mut map = std::collections::HashMap::new();
        for _ in 0..n {
            let key = map_key(&k.kind(), rng);
            if let Some(value) = single(&v.kind(), None, hints, rng, depth + 1, budget) {
                map.insert(key, value);
            }
        }
        return Some(Value::Map(map));
    }
    if field.is_list() {
        let (lo, hi) = size.unwrap_or((0, MAX_ITEMS));
        let n = if deep {
            0
        } else {
            rng.random_range(lo..=hi).min(budget.nodes)
        };
        budget.nodes = budget.nodes.saturating_sub(n);
        let items = (0..n)
            .filter_map(|_| single(&field.kind(), hint, hints, rng, depth + 1, budget))
            .collect();
        return Some(Value::List(items));
    }
    single(&field.kind(), hint, hints, rng, depth + 1, budget)
}

fn single(
    kind: &Kind,
    hint: Option<&FieldHint>,
    hints: &Hints,
    rng: &mut SmallRng,
    depth: usize,
    budget: &mut Budget,
) -> Option<Value> {
    use rand::seq::IndexedRandom;
    if let Some(values) = hint.and_then(|h| h.values.as_ref()) {
        return values.choose(rng).cloned();
    }
    let length = || hint.and_then(|h| h.length).unwrap_or((0, MAX_LENGTH));
    if let Some((lo, hi)) = hint.and_then(|h| h.range) {
        let x = if lo == hi {
            lo
        } else {
            rng.random_range(lo..=hi)
        };
        let whole = x.round();
        return Some(match kind {
            Kind::Double => Value::F64(x),
            Kind::Float => Value::F32(x as f32),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(whole as i32),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(whole as i64),
            Kind::Uint32 | Kind::Fixed32 => Value::U32(whole as u32),
            _ => Value::U64(whole as u64),
        });
    }
    Some(match kind {
        Kind::Double => Value::F64(rng.random_range(-1e6..1e6)),
        Kind::Float => Value::F32(rng.random_range(-1e6f32..1e6)),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(rng.random()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(rng.random()),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(rng.random()),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(rng.random()),
        Kind::Bool => Value::Bool(rng.random()),
        Kind::String => {
            let (lo, hi) = length();
            let n = rng.random_range(lo..=hi).min(budget.bytes);
            budget.bytes -= n;
            Value::String(text(rng, n))
        }
        Kind::Bytes => {
            let (lo, hi) = length();
            let n = rng.random_range(lo..=hi);
            Value::Bytes((0..n).map(|_| rng.random::<u8>()).collect())
        }
        Kind::Enum(e) => Value::EnumNumber(enum_number(e, rng)),
        Kind::Message(_) if depth > MAX_DEPTH || budget.nodes == 0 => return None,
        Kind::Message(m) => Value::Message(message(m, hints, rng, depth, budget)),
    })
}

/// `--schema-hint FIELD=KIND:SPEC` pairs, each checked against the field it names (by its full
/// name, or `Message.field`): `length:MIN..MAX` (string, bytes), `range:MIN..MAX` (numbers),
/// `values:A,B,…` (strings, numbers, bools, enum names), `size:MIN..MAX` (repeated, map).
fn parse_hints(pool: &DescriptorPool, given: &[(String, String)]) -> Result<Hints, String> {
    let mut hints = Hints::new();
    for (name, spec) in given {
        let said = format!("--schema-hint {name}={spec}");
        let field = find_field(pool, name)
            .map_err(|many| {
                format!("{said}: several fields have that name ({many}): give the full name")
            })?
            .ok_or_else(|| {
                format!("{said}: no field {name:?} in the file (name it Message.field or package.Message.field)")
            })?;
        let (kind, arg) = spec
            .split_once(':')
            .ok_or_else(|| format!("{said}: KIND:SPEC, KIND one of length, range, values, size"))?;
        let hint = hints.entry(field.full_name().to_string()).or_default();
        let repeated = field.is_list() || field.is_map();
        let span = |arg: &str, most: usize| -> Result<(usize, usize), String> {
            let (lo, hi) = arg.split_once("..").unwrap_or((arg, arg));
            match (lo.trim().parse::<usize>(), hi.trim().parse::<usize>()) {
                (Ok(lo), Ok(hi)) if lo <= hi && hi <= most => Ok((lo, hi)),
                _ => Err(format!(
                    "{said}: MIN..MAX, whole numbers, MIN ≤ MAX ≤ {most}"
                )),
            }
        };
        let twice = |given: bool| {
            if given {
                Err(format!("{said}: {kind} is given twice for {name}"))
            } else {
                Ok(())
            }
        };
        let numeric = matches!(
            field.kind(),
            Kind::Double
                | Kind::Float
                | Kind::Int32
                | Kind::Sint32
                | Kind::Sfixed32
                | Kind::Int64
                | Kind::Sint64
                | Kind::Sfixed64
                | Kind::Uint32
                | Kind::Fixed32
                | Kind::Uint64
                | Kind::Fixed64
        );
        match kind {
            "size" if repeated => {
                twice(hint.size.is_some())?;
                hint.size = Some(span(arg, MAX_HINTED_SIZE)?);
            }
            "length" if !field.is_map() && matches!(field.kind(), Kind::String | Kind::Bytes) => {
                twice(hint.length.is_some())?;
                hint.length = Some(span(arg, MAX_HINTED_LENGTH)?);
            }
            "range" if !field.is_map() && numeric => {
                twice(hint.range.is_some())?;
                let (lo, hi) = arg.split_once("..").unwrap_or((arg, arg));
                let (lo, hi) = match (lo.trim().parse::<f64>(), hi.trim().parse::<f64>()) {
                    (Ok(lo), Ok(hi)) if lo <= hi && (hi - lo).is_finite() => (lo, hi),
                    _ => return Err(format!("{said}: MIN..MAX, numbers, MIN ≤ MAX")),
                };
                // The largest doubles below 2^63 and 2^64: i64's and u64's ends a double holds.
                let (whole, least, most) = match field.kind() {
                    Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                        (true, f64::from(i32::MIN), f64::from(i32::MAX))
                    }
                    Kind::Uint32 | Kind::Fixed32 => (true, 0.0, f64::from(u32::MAX)),
                    Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => (
                        true,
                        -9_223_372_036_854_775_808.0,
                        9_223_372_036_854_774_784.0,
                    ),
                    Kind::Uint64 | Kind::Fixed64 => (true, 0.0, 18_446_744_073_709_549_568.0),
                    Kind::Float => (false, f64::from(f32::MIN), f64::from(f32::MAX)),
                    _ => (false, f64::MIN, f64::MAX),
                };
                if whole && (lo.fract() != 0.0 || hi.fract() != 0.0) {
                    return Err(format!(
                        "{said}: whole numbers for a {:?} field",
                        field.kind()
                    ));
                }
                if lo < least || hi > most {
                    return Err(format!(
                        "{said}: outside the field's {:?} type ({least}..{most})",
                        field.kind()
                    ));
                }
                hint.range = Some((lo, hi));
            }
            "values" if !field.is_map() => {
                let values = arg
                    .split(',')
                    .map(|v| typed(&field.kind(), v.trim()))
                    .collect::<Option<Vec<Value>>>()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| format!("{said}: each value must be a {:?}", field.kind()))?;
                twice(hint.values.is_some())?;
                hint.values = Some(values);
            }
            "size" | "length" | "range" | "values" => {
                return Err(format!(
                    "{said}: {kind} does not apply to a {}{:?} field",
                    if field.is_map() {
                        "map "
                    } else if field.is_list() {
                        "repeated "
                    } else {
                        ""
                    },
                    field.kind()
                ));
            }
            _ => {
                return Err(format!(
                    "{said}: {kind:?} is not a hint (length, range, values, size)"
                ));
            }
        }
        if hint.values.is_some() && (hint.length.is_some() || hint.range.is_some()) {
            return Err(format!(
                "{said}: values names every value {name} takes; not with length or range"
            ));
        }
    }
    Ok(hints)
}

/// A field by its full name (`package.Message.field`) or `Message.field`; a short name two
/// messages share names none (`Err`: their full names).
fn find_field(pool: &DescriptorPool, name: &str) -> Result<Option<FieldDescriptor>, String> {
    let Some((message, field)) = name.rsplit_once('.') else {
        return Ok(None);
    };
    if let Some(m) = pool.get_message_by_name(message) {
        return Ok(m.get_field_by_name(field));
    }
    let found: Vec<FieldDescriptor> = pool
        .all_messages()
        .filter(|m| m.name() == message)
        .filter_map(|m| m.get_field_by_name(field))
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        many => Err(many
            .iter()
            .map(|f| f.full_name().to_string())
            .collect::<Vec<_>>()
            .join(", ")),
    }
}

/// One of a `values:` hint's values as the field's type.
fn typed(kind: &Kind, v: &str) -> Option<Value> {
    Some(match kind {
        Kind::String => Value::String(v.to_string()),
        Kind::Bytes => Value::Bytes(v.as_bytes().to_vec().into()),
        Kind::Bool => Value::Bool(v.parse().ok()?),
        Kind::Double => Value::F64(v.parse().ok()?),
        Kind::Float => Value::F32(v.parse().ok()?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(v.parse().ok()?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(v.parse().ok()?),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(v.parse().ok()?),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(v.parse().ok()?),
        Kind::Enum(e) => Value::EnumNumber(e.get_value_by_name(v)?.number()),
        Kind::Message(_) => return None,
    })
}

fn map_key(kind: &Kind, rng: &mut SmallRng) -> MapKey {
    match kind {
        Kind::Bool => MapKey::Bool(rng.random()),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(rng.random()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(rng.random()),
        Kind::Uint32 | Kind::Fixed32 => MapKey::U32(rng.random()),
        Kind::Uint64 | Kind::Fixed64 => MapKey::U64(rng.random()),
        _ => {
            let n = rng.random_range(0..=MAX_LENGTH);
            MapKey::String(text(rng, n))
        }
    }
}

fn enum_number(e: &EnumDescriptor, rng: &mut SmallRng) -> i32 {
    use rand::seq::IndexedRandom;
    let values: Vec<i32> = e.values().map(|v| v.number()).collect();
    // An enum has at least one value (the compiler refuses an empty one).
    values.choose(rng).copied().unwrap_or(0)
}

/// `n` letters and digits.
fn text(rng: &mut SmallRng, n: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..n)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// Decode `bytes` (after the schema id) as the message its index prefix names in `pool`.
pub fn decode(pool: &DescriptorPool, bytes: &[u8]) -> Result<(), String> {
    let (indexes, body) =
        read_index_prefix(bytes).ok_or("no message indexes after the schema id")?;
    let desc = message_at(pool, &indexes)
        .ok_or_else(|| format!("no message at indexes {indexes:?} in the schema"))?;
    DynamicMessage::decode(desc, body).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: &str = include_str!("../../tests/data/every_type.proto");

    #[test]
    fn indexes_are_confluents() {
        assert_eq!(index_prefix(&[0]), vec![0]);
        // [1]: count 1, index 1, zigzag: 2, 2.
        assert_eq!(index_prefix(&[1]), vec![2, 2]);
        assert_eq!(index_prefix(&[1, 0, 2]), vec![6, 2, 0, 4]);
        for path in [vec![0], vec![1], vec![1, 0, 2], vec![70]] {
            let mut framed = index_prefix(&path);
            framed.push(0xAA);
            assert_eq!(read_index_prefix(&framed), Some((path, &[0xAA][..])));
        }
    }

    #[test]
    fn every_field_kind_is_generated_and_decodes() {
        let g = Generator::new(EVERY, None, &[]).unwrap();
        assert_eq!(g.full_name(), "kbench.test.Everything");
        let values = g.encoded_within(500, 7, usize::MAX).unwrap();
        let pool = compile(EVERY).unwrap();
        let desc = pool.get_message_by_name("kbench.test.Everything").unwrap();
        let mut set = std::collections::BTreeSet::new();
        for v in &values {
            let m = DynamicMessage::decode(desc.clone(), v.as_slice()).unwrap();
            for (f, _) in m.fields() {
                set.insert(f.name().to_string());
            }
            let mut framed = g.prefix();
            framed.extend_from_slice(v);
            decode(&pool, &framed).unwrap();
        }
        // Every field of the message was set in some value (each oneof's fields included).
        for f in desc.fields() {
            assert!(set.contains(f.name()), "{} never set", f.name());
        }
        // Seeded: the same values again.
        assert_eq!(g.encoded_within(500, 7, usize::MAX).unwrap(), values);
    }

    #[test]
    fn a_nested_message_is_found_by_name_with_its_path() {
        let g = Generator::new(EVERY, Some("Inner"), &[]).unwrap();
        assert_eq!(g.full_name(), "kbench.test.Everything.Inner");
        assert_eq!(g.indexes, vec![0, 0]);
        let g = Generator::new(EVERY, Some("kbench.test.Tree"), &[]).unwrap();
        assert_eq!(g.indexes, vec![1]);
        assert!(
            Generator::new(EVERY, Some("Nope"), &[])
                .err()
                .unwrap()
                .contains("kbench.test.Tree")
        );
        let after_map = "syntax = \"proto3\"; message O { map<string, int32> m = 1; message A { int32 x = 1; } }";
        let e = Generator::new(after_map, Some("A"), &[]).err().unwrap();
        assert!(e.contains("differ between Confluent's clients"), "{e}");
        assert_eq!(
            Generator::new(after_map, None, &[]).unwrap().indexes,
            vec![0]
        );
        let twice =
            "syntax = \"proto3\"; message A { message Item {} } message B { message Item {} }";
        let e = Generator::new(twice, Some("Item"), &[]).err().unwrap();
        assert!(e.contains("A.Item, B.Item"), "{e}");
        assert!(
            Generator::new("syntax = \"proto3\"; message {", None, &[])
                .err()
                .unwrap()
                .contains("does not compile")
        );
    }

    /// `--schema-hint`s hold in every value; a hint that does not fit its field is one error.
    #[test]
    fn hints_bound_lengths_ranges_values_and_sizes() {
        let text = "syntax = \"proto3\";\npackage h;\nenum Colour { RED = 0; GREEN = 1; BLUE = 2; }\n\
                    message M { string name = 1; int64 age = 2; Colour colour = 3; repeated string tags = 4; double score = 5; }";
        let hint = |f: &str, h: &str| (f.to_string(), h.to_string());
        let g = Generator::new(
            text,
            None,
            &[
                hint("M.name", "length:3..5"),
                hint("h.M.age", "range:18..99"),
                hint("M.colour", "values:GREEN,BLUE"),
                hint("M.tags", "size:2..3"),
                hint("M.tags", "values:x,y"),
                hint("M.score", "range:0.5..1.5"),
            ],
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..300 {
            let bytes = g.value(&mut rng).encode_to_vec();
            let m = DynamicMessage::decode(g.message.clone(), bytes.as_slice()).unwrap();
            let name = m.get_field_by_name("name").unwrap();
            assert!((3..=5).contains(&name.as_str().unwrap().len()), "{m:?}");
            let age = m.get_field_by_name("age").unwrap().as_i64().unwrap();
            assert!((18..=99).contains(&age), "{age}");
            let colour = m
                .get_field_by_name("colour")
                .unwrap()
                .as_enum_number()
                .unwrap();
            assert!(colour == 1 || colour == 2, "{colour}");
            let tags = m.get_field_by_name("tags").unwrap();
            let tags = tags.as_list().unwrap();
            assert!((2..=3).contains(&tags.len()), "{tags:?}");
            assert!(tags.iter().all(|t| matches!(t.as_str(), Some("x" | "y"))));
            let score = m.get_field_by_name("score").unwrap().as_f64().unwrap();
            assert!((0.5..=1.5).contains(&score), "{score}");
        }
        for (h, says) in [
            (hint("M.nope", "length:1..2"), "no field"),
            (hint("M.age", "length:1..2"), "does not apply"),
            (hint("M.colour", "values:PURPLE"), "each value must be"),
            (hint("M.name", "size:1..2"), "does not apply"),
            (hint("M.age", "range:9..1"), "MIN ≤ MAX"),
            (hint("M.age", "often:1"), "is not a hint"),
            (hint("M.score", "range:-1e308..1e308"), "MIN ≤ MAX"),
            (hint("M.age", "range:0.5..0.9"), "whole numbers"),
            (hint("M.age", "range:0..1e19"), "outside the field's"),
            (hint("M.tags", "size:0..10001"), "MIN ≤ MAX ≤ 10000"),
        ] {
            let e = Generator::new(text, None, std::slice::from_ref(&h))
                .err()
                .unwrap();
            assert!(
                e.contains("--schema-hint") && e.contains(says),
                "{h:?}: {e}"
            );
        }
    }
}
