//! The results store: every result document kept, run after run, so that a change between builds
//! is found in the series rather than by comparing the right two runs by hand.
//!
//! A **benchmark** is what makes two runs comparable: the document's kind, its cell (the settings
//! that change its figures, the same label `kbench compare` matches on: [`crate::compare::cells_of`])
//! and the target (a label the user gives, or the bootstrap servers, `embedded` for kbench's own
//! broker, `none` for the codec bench). Its key is a short SHA-256 of the three. A document with
//! several cells (a sweep, the codec bench) is a run of each.
//!
//! A **run** keeps the build under test (`--build-label`, by default the git commit the command was
//! run in), kbench's own version, when it started, and every metric's samples: a run's repetitions
//! are kept one by one, never averaged away. The document itself is kept whole, once per content.
//!
//! The store is SQLite, one file, no server ([`Store::open`]). Its schema is versioned and migrated
//! forward on open; a store written by a newer kbench is refused, naming both versions. Writers
//! take the file's write lock for one transaction each and wait for one another (WAL, busy
//! timeout): two writers at once lose nothing. Storing the same document twice stores it once.

mod check;
mod sqlite;

pub use check::{Change, Since, changes, time_of};
pub use sqlite::{SCHEMA_VERSION, Store};

use serde::Serialize;

use crate::compare::Better;

/// What the store could not do: one sentence naming the store or the document.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("--store {location}: {error}")]
    Store { location: String, error: String },
    #[error("{0}")]
    Document(String),
}

/// Who ran it, on what: what a run records beside its document.
#[derive(Debug, Clone, Default)]
pub struct RunMeta {
    /// The build under test (`--build-label`; the git commit by default).
    pub build_label: Option<String>,
    /// The target's label (`--target-label`), instead of the document's bootstrap servers.
    pub target_label: Option<String>,
    /// Where the document came from (a file imported), for `history show`.
    pub source: Option<String>,
}

/// A benchmark: one cell of one kind against one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Benchmark {
    pub id: i64,
    /// 12 hex digits of SHA-256 over kind, cell and target.
    pub key: String,
    pub kind: String,
    /// The readable label of the settings that make runs comparable.
    pub cell: String,
    pub target: String,
    /// Runs stored, and the metrics they have.
    pub runs: u64,
    pub metrics: Vec<String>,
}

/// What storing one document did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The benchmark's key and whether this run is new (false: that document was stored before).
    pub runs: Vec<(String, bool)>,
}

/// One run's samples of one metric, in a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub run_id: i64,
    pub started_at: String,
    pub build_label: Option<String>,
    pub kbench_version: String,
    /// Every repetition's value, in the order run.
    pub samples: Vec<f64>,
}

/// A metric's runs, oldest first, with the direction that is better.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub metric: String,
    pub better: Better,
    pub points: Vec<Point>,
}

/// The key of a benchmark: 12 hex digits of SHA-256 over its kind, cell and target.
pub fn benchmark_key(kind: &str, cell: &str, target: &str) -> String {
    let text = format!("{kind}\n{cell}\n{target}");
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A document's own content digest (whole SHA-256, hex): the same file imported twice is one run.
pub fn document_digest(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The target a document ran against, as a benchmark names it.
pub fn target_of(doc: &serde_json::Value) -> String {
    let (embedded, bootstrap) = match doc.get("target") {
        Some(t) => (&t["embedded_broker"], &t["bootstrap_servers"]),
        None => (&doc["embedded_broker"], &doc["bootstrap_servers"]),
    };
    if embedded == true {
        "embedded".into()
    } else if let Some(b) = bootstrap.as_str().filter(|b| !b.is_empty()) {
        b.to_string()
    } else {
        "none".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_short_stable_and_tell_targets_apart() {
        let a = benchmark_key("produce", "produce acks=all", "embedded");
        assert_eq!(a.len(), 12);
        assert_eq!(a, benchmark_key("produce", "produce acks=all", "embedded"));
        assert_ne!(a, benchmark_key("produce", "produce acks=all", "b:9092"));
    }

    #[test]
    fn targets_are_named_from_either_shape() {
        let run = serde_json::json!({"target": {"embedded_broker": false, "bootstrap_servers": "b:9092"}});
        assert_eq!(target_of(&run), "b:9092");
        let sweep =
            serde_json::json!({"embedded_broker": true, "bootstrap_servers": "127.0.0.1:1"});
        assert_eq!(target_of(&sweep), "embedded");
        assert_eq!(target_of(&serde_json::json!({"kind": "codec"})), "none");
    }
}
