//! JSON Schema values (`--value-schema FILE.json` with `$schema`): documents generated from the
//! schema's own constraints — `type` (one or a list), `enum`, `const`, `properties` and `required`,
//! `items`, `minItems`/`maxItems`, `minLength`/`maxLength`, `minimum`/`maximum` (and their exclusive
//! forms), `format` (date-time, date, time, uuid, email, uri), `oneOf`/`anyOf` (one branch), local
//! `$ref`s (`#/definitions/…`, `#/$defs/…`) — from a seed. A keyword the generator cannot honour
//! (`pattern`, `allOf`, `not`, `if`, `multipleOf`, `uniqueItems`, …) is refused, naming its path:
//! a value that might not match the schema is never written.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value};

/// Nested objects and arrays deeper than this take only what is required (a recursive schema ends).
const MAX_DEPTH: usize = 8;
/// Deeper than this a schema has no finite value (a required property that contains itself).
const HARD_DEPTH: usize = 64;
/// Default length of a string, and items of an array, without bounds.
const DEFAULT_LENGTH: (u64, u64) = (8, 16);
const DEFAULT_ITEMS: (u64, u64) = (1, 4);
/// The most characters or items a bound may ask for.
const MAX_LENGTH: u64 = 1 << 20;
const MAX_ITEMS: u64 = 10_000;

/// Keywords refused wherever they appear: the generator cannot promise to meet them.
const REFUSED: [&str; 13] = [
    "pattern",
    "patternProperties",
    "allOf",
    "not",
    "if",
    "multipleOf",
    "uniqueItems",
    "contains",
    "prefixItems",
    "dependentSchemas",
    "dependentRequired",
    "propertyNames",
    "minProperties",
];

/// Documents of one JSON Schema.
pub struct Generator {
    root: Value,
    title: Option<String>,
}

impl Generator {
    pub fn new(text: &str) -> Result<Generator, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        if !root.is_object() {
            return Err("is not a JSON Schema object".into());
        }
        check(&root, "$")?;
        let title = root
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_string);
        let g = Generator { root, title };
        // A schema with no finite value fails here, not during the load.
        g.value(&mut SmallRng::seed_from_u64(0))?;
        Ok(g)
    }

    /// For documents given (`--value-template`), not generated: any JSON Schema the validator
    /// compiles, whatever its keywords.
    pub fn for_documents(text: &str) -> Result<Generator, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        super::decode::json_validator(text)?;
        let title = root
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Generator { root, title })
    }

    /// The schema's validator, for [`Generator::encode_json`].
    pub fn validator(&self) -> Result<jsonschema::Validator, String> {
        super::decode::json_validator_of(&self.root)
    }

    /// A JSON document checked against the schema (`--value-template`) and written as it is.
    pub fn encode_json(validator: &jsonschema::Validator, doc: &Value) -> Result<Vec<u8>, String> {
        if let Err(e) = validator.validate(doc) {
            return Err(format!(
                "is not valid at {:?}: {e}",
                e.instance_path().as_str()
            ));
        }
        serde_json::to_vec(doc).map_err(|e| e.to_string())
    }

    /// The schema's `title`: the name RecordNameStrategy uses, as Confluent's JSON serializer does.
    pub fn full_name(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// One document.
    pub fn value(&self, rng: &mut SmallRng) -> Result<Value, String> {
        self.generate(&self.root, rng, 0, "$")
    }

    /// `count` documents as JSON text, from `seed`; refused once they hold more than `limit` bytes.
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
            || serde_json::to_vec(&self.value(&mut rng)?).map_err(|e| e.to_string()),
            || super::too_big(count, limit),
        )
    }

    /// The schema a local `$ref` names.
    fn resolve<'a>(&'a self, reference: &str, path: &str) -> Result<&'a Value, String> {
        let pointer = reference
            .strip_prefix('#')
            .ok_or_else(|| format!("{path}: $ref {reference:?}: only local references (#/…)"))?;
        self.root
            .pointer(pointer)
            .ok_or_else(|| format!("{path}: $ref {reference:?}: not found in the schema"))
    }

    fn generate(
        &self,
        schema: &Value,
        rng: &mut SmallRng,
        depth: usize,
        path: &str,
    ) -> Result<Value, String> {
        if depth > HARD_DEPTH {
            return Err(format!(
                "{path}: the schema has no finite value (a required property contains itself)"
            ));
        }
        let s = match schema {
            Value::Bool(true) => return Ok(Value::Null),
            Value::Object(s) => s,
            _ => return Err(format!("{path}: a schema that admits no value")),
        };
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            return self.generate(self.resolve(r, path)?, rng, depth + 1, path);
        }
        if let Some(c) = s.get("const") {
            return Ok(c.clone());
        }
        if let Some(options) = s.get("enum").and_then(Value::as_array) {
            if options.is_empty() {
                return Err(format!("{path}: an empty enum"));
            }
            return Ok(options[rng.random_range(0..options.len())].clone());
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(branches) = s.get(key).and_then(Value::as_array) {
                if branches.is_empty() {
                    return Err(format!("{path}: an empty {key}"));
                }
                // Deep down, the first branch that is not an object or array (if any) ends
                // recursion sooner.
                let deep = depth >= MAX_DEPTH;
                let pick = branches
                    .iter()
                    .position(|b| deep && !matches!(type_of(b), Some("object" | "array")))
                    .unwrap_or_else(|| rng.random_range(0..branches.len()));
                return self.generate(
                    &branches[pick],
                    rng,
                    depth + 1,
                    &format!("{path}.{key}[{pick}]"),
                );
            }
        }
        let kind = match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(types)) => {
                let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                if names.is_empty() {
                    return Err(format!("{path}: an empty type list"));
                }
                let deep = depth >= MAX_DEPTH;
                match names.iter().find(|t| deep && **t == "null") {
                    Some(t) => t.to_string(),
                    None => names[rng.random_range(0..names.len())].to_string(),
                }
            }
            None if s.contains_key("properties") => "object".into(),
            None if s.contains_key("items") => "array".into(),
            None => "string".into(),
            Some(other) => return Err(format!("{path}: type {other} is not a type name")),
        };
        match kind.as_str() {
            "null" => Ok(Value::Null),
            "boolean" => Ok(Value::Bool(rng.random())),
            "integer" => integer(s, rng, path),
            "number" => number(s, rng, path),
            "string" => string(s, rng, path),
            "array" => {
                let (min, max) = bounds(s, "minItems", "maxItems", DEFAULT_ITEMS, MAX_ITEMS, path)?;
                let n = if depth >= MAX_DEPTH {
                    min
                } else {
                    rng.random_range(min..=max)
                };
                let items = s.get("items").unwrap_or(&Value::Bool(true));
                (0..n)
                    .map(|i| self.generate(items, rng, depth + 1, &format!("{path}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array)
            }
            "object" => {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut out = Map::new();
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (name, prop) in props {
                        let needed = required.contains(&name.as_str());
                        if !needed && (depth >= MAX_DEPTH || !rng.random_bool(0.8)) {
                            continue;
                        }
                        let v = self.generate(prop, rng, depth + 1, &format!("{path}.{name}"))?;
                        out.insert(name.clone(), v);
                    }
                }
                if let Some(missing) = required.iter().find(|r| !out.contains_key(**r)) {
                    return Err(format!(
                        "{path}: {missing:?} is required but has no schema under properties"
                    ));
                }
                Ok(Value::Object(out))
            }
            other => Err(format!("{path}: type {other:?} is not a JSON Schema type")),
        }
    }
}

/// A schema's single `type`, if it names one.
fn type_of(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

/// Refuse what cannot be honoured, anywhere in the schema, naming the path.
fn check(schema: &Value, path: &str) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if let Some(k) = REFUSED.iter().find(|k| map.contains_key(**k)) {
                return Err(format!(
                    "{path}: {k} is not something kbench can generate values for (remove it, or give a template)"
                ));
            }
            for (k, v) in map {
                // Values of these keywords are data, not schemas.
                if matches!(k.as_str(), "enum" | "const" | "examples" | "default") {
                    continue;
                }
                check(v, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

/// `min..=max` from two keywords, or the default; checked.
fn bounds(
    s: &Map<String, Value>,
    min_key: &str,
    max_key: &str,
    default: (u64, u64),
    cap: u64,
    path: &str,
) -> Result<(u64, u64), String> {
    let read = |k: &str| -> Result<Option<u64>, String> {
        match s.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("{path}: {k} must be a whole number of at least 0")),
        }
    };
    let (min, max) = (read(min_key)?, read(max_key)?);
    let (min, max) = match (min, max) {
        (None, None) => default,
        (Some(a), None) => (a, a.max(default.1)),
        (None, Some(b)) => (default.0.min(b), b),
        (Some(a), Some(b)) => (a, b),
    };
    if min > max {
        return Err(format!("{path}: {min_key} {min} is above {max_key} {max}"));
    }
    if max > cap {
        return Err(format!(
            "{path}: {max_key} {max} is above kbench's limit {cap}"
        ));
    }
    Ok((min, max))
}

fn integer(s: &Map<String, Value>, rng: &mut SmallRng, path: &str) -> Result<Value, String> {
    let read = |k: &str| s.get(k).and_then(Value::as_f64);
    let mut lo = read("minimum").map_or(-1_000_000_000i64, |v| v.ceil() as i64);
    let mut hi = read("maximum").map_or(1_000_000_000i64, |v| v.floor() as i64);
    if let Some(v) = read("exclusiveMinimum") {
        lo = lo.max(v.floor() as i64 + 1);
    }
    if let Some(v) = read("exclusiveMaximum") {
        hi = hi.min(v.ceil() as i64 - 1);
    }
    if read("minimum").is_some() && read("maximum").is_none() {
        hi = lo.saturating_add(1_000_000_000);
    }
    if read("maximum").is_some() && read("minimum").is_none() {
        lo = hi.saturating_sub(1_000_000_000);
    }
    if lo > hi {
        return Err(format!("{path}: no integer between the bounds"));
    }
    Ok(Value::from(rng.random_range(lo..=hi)))
}

fn number(s: &Map<String, Value>, rng: &mut SmallRng, path: &str) -> Result<Value, String> {
    let read = |k: &str| s.get(k).and_then(Value::as_f64);
    let lo = read("minimum").or(read("exclusiveMinimum")).unwrap_or(-1e6);
    let hi = read("maximum")
        .or(read("exclusiveMaximum"))
        .unwrap_or(lo.max(0.0) + 1e6);
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(format!("{path}: no number between the bounds"));
    }
    // Exclusive bounds: the open interval (random_range's upper end is open already).
    let mut v = rng.random_range(lo..hi);
    if read("exclusiveMinimum").is_some() && v <= lo {
        v = (lo + hi) / 2.0;
    }
    Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
}

fn string(s: &Map<String, Value>, rng: &mut SmallRng, path: &str) -> Result<Value, String> {
    if let Some(format) = s.get("format").and_then(Value::as_str) {
        let secs = rng.random_range(1_500_000_000u64..1_900_000_000);
        let stamp =
            crate::result::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        let text = match format {
            "date-time" => stamp,
            "date" => stamp[..10].to_string(),
            "time" => format!("{}Z", &stamp[11..19]),
            "uuid" => uuid::Builder::from_random_bytes(rng.random())
                .into_uuid()
                .to_string(),
            "email" => format!("{}@example.com", letters(rng, 8)),
            "uri" => format!("https://example.com/{}", letters(rng, 8)),
            // Another format is an annotation a validator may ignore; a plain string is made.
            _ => return plain(s, rng, path),
        };
        return Ok(Value::String(text));
    }
    plain(s, rng, path)
}

fn plain(s: &Map<String, Value>, rng: &mut SmallRng, path: &str) -> Result<Value, String> {
    let (min, max) = bounds(
        s,
        "minLength",
        "maxLength",
        DEFAULT_LENGTH,
        MAX_LENGTH,
        path,
    )?;
    let n = rng.random_range(min..=max) as usize;
    Ok(Value::String(letters(rng, n)))
}

fn letters(rng: &mut SmallRng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(rng.random_range(b'a'..=b'z')))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: &str = include_str!("../../tests/data/every_type.schema.json");

    #[test]
    fn every_keyword_is_met_and_a_seed_repeats() {
        let g = Generator::new(EVERY).unwrap();
        assert_eq!(g.full_name(), Some("Order"));
        let values = g.encoded_within(300, 3, usize::MAX).unwrap();
        assert_eq!(g.encoded_within(300, 3, usize::MAX).unwrap(), values);
        let mut kinds = std::collections::BTreeSet::new();
        for v in &values {
            let d: Value = serde_json::from_slice(v).unwrap();
            let id = d["id"].as_str().unwrap();
            assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 4);
            let qty = d["quantity"].as_i64().unwrap();
            assert!((1..=100).contains(&qty), "{qty}");
            let code = d["code"].as_str().unwrap();
            assert!((3..=5).contains(&code.len()), "{code}");
            assert!(["NL", "FR", "DE"].contains(&d["country"].as_str().unwrap()));
            assert_eq!(d["version"], 2);
            let lines = d["lines"].as_array().unwrap();
            assert!((1..=3).contains(&lines.len()));
            kinds.insert(d["payment"].get("iban").is_some());
        }
        // Both branches of the oneOf are taken.
        assert_eq!(kinds.len(), 2);
    }

    #[test]
    fn what_cannot_be_generated_is_refused_with_its_path() {
        let e = Generator::new(
            r#"{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}"#,
        )
        .err()
        .unwrap();
        assert!(e.contains("$.properties.a: pattern"), "{e}");
        let e = Generator::new(
            r##"{"$defs":{"n":{"type":"object","required":["next"],"properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        )
        .err()
        .unwrap();
        assert!(e.contains("no finite value"), "{e}");
        assert!(Generator::new("[1]").is_err());
        let e = Generator::new(r#"{"type":"string","minLength":5,"maxLength":2}"#)
            .err()
            .unwrap();
        assert!(e.contains("minLength 5 is above maxLength 2"), "{e}");
    }
}
