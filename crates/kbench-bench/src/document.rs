//! The gate every result document passes before `kbench report` or `kbench compare` reads it: a
//! known `kind`, a `schema_version` this build can read, and every figure a non-negative finite
//! number. A document that fails is refused with one error naming the field, never rendered or
//! compared with a wrong number in it (a records/s of −1e300 called an "improvement").
//!
//! It answers with the document's [`Kind`]: compare then reads typed views of each kind's samples,
//! report and the server's run index dispatch on it. The settings, environment and target blocks
//! are the writer's own and are not judged here.

use serde_json::Value;

use crate::result::{Kind, SCHEMA_VERSION};

/// Fields that hold a figure wherever they appear: a non-negative finite number, or null.
const FIGURES: &[&str] = &[
    "records_per_sec",
    "mb_per_sec",
    "records_sent",
    "records_acked",
    "records_failed",
    "records_unsent",
    "records_consumed",
    "client_cpu_us_per_record",
    "ns_per_record",
    "ns_per_record_reps",
    "cpu_us_per_msg",
    "msgs_per_sec",
    "duration_s",
    "a_median",
    "b_median",
    "ratio",
    "ci_low",
    "ci_high",
];

/// Blocks that describe how a run was set up, not what it measured.
const NOT_FIGURES: &[&str] = &["settings", "environment", "target", "config", "spec"];

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("not a kbench result document (not a JSON object)")]
    NotAnObject,
    #[error("not a kbench result document (no \"kind\")")]
    NoKind,
    #[error("\"kind\" is {0:?}: not a kind kbench writes (one of {kinds})", kinds = kinds())]
    UnknownKind(String),
    #[error("no \"schema_version\"")]
    NoSchemaVersion,
    #[error(
        "\"schema_version\" is {0}: this kbench reads version {SCHEMA_VERSION} (a newer kbench wrote it?)"
    )]
    Newer(String),
    #[error(
        "\"schema_version\" is {0}: this kbench reads version {SCHEMA_VERSION}, and an older kbench wrote this one (run it again, or read it with the kbench that wrote it)"
    )]
    Older(u64),
    #[error("\"{field}\" is {value}: a figure is a non-negative finite number")]
    Figure { field: String, value: String },
    #[error("\"kind\" is {found}: a {expected} document was expected")]
    OtherKind { found: Kind, expected: Kind },
    #[error("does not read as a {kind} document: {reason}")]
    Shape { kind: Kind, reason: String },
}

/// Every kind's name, for the message that refuses an unknown one.
fn kinds() -> String {
    Kind::ALL.map(Kind::name).join(", ")
}

/// Check a parsed document and say which kind it is; the error names the first field that is
/// wrong. Only this build's schema version passes: a document is read as the types it was
/// written from, and an older version's fields are not this version's.
pub fn check(doc: &Value) -> Result<Kind, DocumentError> {
    let obj = doc.as_object().ok_or(DocumentError::NotAnObject)?;
    let name = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(DocumentError::NoKind)?;
    let kind = Kind::from_name(name).ok_or_else(|| DocumentError::UnknownKind(name.to_string()))?;
    match obj.get("schema_version") {
        None => return Err(DocumentError::NoSchemaVersion),
        Some(v) => match v.as_u64() {
            Some(n) if n == u64::from(SCHEMA_VERSION) => {}
            Some(n) if (1..u64::from(SCHEMA_VERSION)).contains(&n) => {
                return Err(DocumentError::Older(n));
            }
            _ => return Err(DocumentError::Newer(v.to_string())),
        },
    }
    walk(doc, "", false)?;
    Ok(kind)
}

/// JSON writes a NaN figure as null; a document's type reads it back as NaN (`deserialize_with`).
pub fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Read `doc` as the type its kind is written from, through the gate: a document of another kind,
/// schema version or shape is refused, naming what is wrong.
pub fn read_as<D: serde::de::DeserializeOwned>(
    doc: &Value,
    expected: Kind,
) -> Result<D, DocumentError> {
    let found = check(doc)?;
    if found != expected {
        return Err(DocumentError::OtherKind { found, expected });
    }
    D::deserialize(doc).map_err(|e| DocumentError::Shape {
        kind: expected,
        reason: e.to_string(),
    })
}

fn walk(v: &Value, path: &str, figure: bool) -> Result<(), DocumentError> {
    match v {
        Value::Object(map) => {
            for (k, inner) in map {
                if NOT_FIGURES.contains(&k.as_str()) {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(inner, &p, FIGURES.contains(&k.as_str()) || is_latency(k))?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                walk(inner, &format!("{path}[{i}]"), figure)?;
            }
            Ok(())
        }
        Value::Null => Ok(()),
        Value::Number(n) if figure => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
            _ => Err(DocumentError::Figure {
                field: path.to_string(),
                value: n.to_string(),
            }),
        },
        other if figure => Err(DocumentError::Figure {
            field: path.to_string(),
            value: other.to_string(),
        }),
        _ => Ok(()),
    }
}

/// `latency_p99_us`, `latency_avg_ms` and the like.
fn is_latency(key: &str) -> bool {
    key.starts_with("latency_") && (key.ends_with("_us") || key.ends_with("_ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn produce(rps: Value) -> Value {
        json!({"schema_version": 3, "kind": "produce", "settings": {"throughput": -1},
               "repetitions": [{"records_per_sec": rps, "latency_p99_us": 12}]})
    }

    #[test]
    fn a_well_formed_document_passes_and_settings_are_not_judged() {
        assert_eq!(check(&produce(json!(1000.5))), Ok(Kind::Produce));
        assert_eq!(check(&produce(Value::Null)), Ok(Kind::Produce));
    }

    #[test]
    fn a_negative_or_non_numeric_figure_is_named() {
        match check(&produce(json!(-1e300))).unwrap_err() {
            DocumentError::Figure { field, value } => {
                assert_eq!(field, "repetitions[0].records_per_sec");
                assert!(value.starts_with('-'), "{value}");
            }
            e => panic!("{e}"),
        }
        let e = check(&produce(json!("fast"))).unwrap_err().to_string();
        assert!(
            e.contains("repetitions[0].records_per_sec") && e.contains("\"fast\""),
            "{e}"
        );
    }

    #[test]
    fn unknown_kinds_and_versions_are_refused() {
        let e = check(&json!({"schema_version": 3, "kind": "nonsense"})).unwrap_err();
        assert!(matches!(e, DocumentError::UnknownKind(_)));
        let e = check(&json!({"schema_version": 999, "kind": "produce"})).unwrap_err();
        assert!(e.to_string().contains("999"), "{e}");
        let e = check(&json!({"schema_version": 2, "kind": "produce"})).unwrap_err();
        assert_eq!(e, DocumentError::Older(2));
        let e = e.to_string();
        assert!(
            e.contains("is 2") && e.contains(&format!("version {SCHEMA_VERSION}")),
            "{e}"
        );
        assert_eq!(
            check(&json!({"kind": "produce"})),
            Err(DocumentError::NoSchemaVersion)
        );
        assert_eq!(
            check(&json!({"schema_version": 3})),
            Err(DocumentError::NoKind)
        );
        assert_eq!(check(&json!([1])), Err(DocumentError::NotAnObject));
    }

    #[test]
    fn figures_in_arrays_are_checked_element_by_element() {
        let doc = json!({"schema_version": SCHEMA_VERSION, "kind": "codec",
                         "cells": [{"label": "x", "ns_per_record_reps": [1.0, -2.0]}]});
        let e = check(&doc).unwrap_err().to_string();
        assert!(e.contains("cells[0].ns_per_record_reps[1]"), "{e}");
    }
}
