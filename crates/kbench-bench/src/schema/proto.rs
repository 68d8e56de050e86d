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
}

impl Generator {
    /// The file's message `name` (its full or short name), or its first message.
    pub fn new(text: &str, name: Option<&str>) -> Result<Generator, String> {
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
        Ok(Generator { message, indexes })
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
        let mut budget = MAX_NODES;
        message(&self.message, rng, 0, &mut budget)
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
    rng: &mut SmallRng,
    depth: usize,
    budget: &mut usize,
) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    *budget = budget.saturating_sub(1);
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
        if let Some(v) = field_value(&field, rng, depth, budget) {
            m.set_field(&field, v);
        }
    }
    m
}

/// A field's value; `None` for a message field past [`MAX_DEPTH`] (left unset).
fn field_value(
    field: &FieldDescriptor,
    rng: &mut SmallRng,
    depth: usize,
    budget: &mut usize,
) -> Option<Value> {
    let deep = depth >= MAX_DEPTH || *budget == 0;
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return None;
        };
        let (k, v) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        // At most one entry: prost-reflect holds a map in a HashMap, whose order would make the
        // same seed's bytes differ from run to run.
        let n = if deep { 0 } else { rng.random_range(0..=1) };
        let mut map = std::collections::HashMap::new();
        for _ in 0..n {
            let key = map_key(&k.kind(), rng);
            if let Some(value) = single(&v.kind(), rng, depth + 1, budget) {
                map.insert(key, value);
            }
        }
        return Some(Value::Map(map));
    }
    if field.is_list() {
        let n = if deep {
            0
        } else {
            rng.random_range(0..=MAX_ITEMS).min(*budget)
        };
        *budget = budget.saturating_sub(n);
        let items = (0..n)
            .filter_map(|_| single(&field.kind(), rng, depth + 1, budget))
            .collect();
        return Some(Value::List(items));
    }
    single(&field.kind(), rng, depth + 1, budget)
}

fn single(kind: &Kind, rng: &mut SmallRng, depth: usize, budget: &mut usize) -> Option<Value> {
    Some(match kind {
        Kind::Double => Value::F64(rng.random_range(-1e6..1e6)),
        Kind::Float => Value::F32(rng.random_range(-1e6f32..1e6)),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(rng.random()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(rng.random()),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(rng.random()),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(rng.random()),
        Kind::Bool => Value::Bool(rng.random()),
        Kind::String => Value::String(text(rng)),
        Kind::Bytes => {
            let n = rng.random_range(0..=MAX_LENGTH);
            Value::Bytes((0..n).map(|_| rng.random::<u8>()).collect())
        }
        Kind::Enum(e) => Value::EnumNumber(enum_number(e, rng)),
        Kind::Message(_) if depth > MAX_DEPTH || *budget == 0 => return None,
        Kind::Message(m) => Value::Message(message(m, rng, depth, budget)),
    })
}

fn map_key(kind: &Kind, rng: &mut SmallRng) -> MapKey {
    match kind {
        Kind::Bool => MapKey::Bool(rng.random()),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(rng.random()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(rng.random()),
        Kind::Uint32 | Kind::Fixed32 => MapKey::U32(rng.random()),
        Kind::Uint64 | Kind::Fixed64 => MapKey::U64(rng.random()),
        _ => MapKey::String(text(rng)),
    }
}

fn enum_number(e: &EnumDescriptor, rng: &mut SmallRng) -> i32 {
    use rand::seq::IndexedRandom;
    let values: Vec<i32> = e.values().map(|v| v.number()).collect();
    // An enum has at least one value (the compiler refuses an empty one).
    values.choose(rng).copied().unwrap_or(0)
}

/// Up to [`MAX_LENGTH`] letters and digits.
fn text(rng: &mut SmallRng) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let n = rng.random_range(0..=MAX_LENGTH);
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
        let g = Generator::new(EVERY, None).unwrap();
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
        let g = Generator::new(EVERY, Some("Inner")).unwrap();
        assert_eq!(g.full_name(), "kbench.test.Everything.Inner");
        assert_eq!(g.indexes, vec![0, 0]);
        let g = Generator::new(EVERY, Some("kbench.test.Tree")).unwrap();
        assert_eq!(g.indexes, vec![1]);
        assert!(
            Generator::new(EVERY, Some("Nope"))
                .err()
                .unwrap()
                .contains("kbench.test.Tree")
        );
        let after_map = "syntax = \"proto3\"; message O { map<string, int32> m = 1; message A { int32 x = 1; } }";
        let e = Generator::new(after_map, Some("A")).err().unwrap();
        assert!(e.contains("differ between Confluent's clients"), "{e}");
        assert_eq!(Generator::new(after_map, None).unwrap().indexes, vec![0]);
        let twice =
            "syntax = \"proto3\"; message A { message Item {} } message B { message Item {} }";
        let e = Generator::new(twice, Some("Item")).err().unwrap();
        assert!(e.contains("A.Item, B.Item"), "{e}");
        assert!(
            Generator::new("syntax = \"proto3\"; message {", None)
                .err()
                .unwrap()
                .contains("does not compile")
        );
    }
}
