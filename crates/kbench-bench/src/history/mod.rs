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
//! The store is one SQLite file, no server, or a PostgreSQL database given a `postgres://` URL, a
//! team's shared store ([`Store::open`]); the same tables in both. Its schema is versioned and
//! migrated forward on open; a store written by a newer kbench is refused, naming both versions.
//! Each document is stored in one transaction, and storing it is idempotent: two writers at once
//! lose nothing, and the same document stored twice (or by two writers at once) is one run.
//!
//! This module reads a document into what is stored ([`Recording`]) and a series out of what was
//! stored, once; the backends (`sqlite`, `postgres`) only write and read rows. No password of a
//! URL ever reaches an error or a log: the store is named by [`masked`].

mod check;
mod postgres;
mod sqlite;

use std::time::SystemTime;

pub use check::{Change, Since, changes, time_of};

use serde::Serialize;

use crate::compare::{Better, cells_of};

/// The schema this build writes; each backend's migrations bring an older store up to it.
pub const SCHEMA_VERSION: u32 = 1;

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

/// An open results store: an SQLite file, or a PostgreSQL database.
pub struct Store {
    backend: Box<dyn Backend>,
    /// The store as errors name it (a URL's password masked).
    location: String,
}

impl Store {
    /// Open the store at `location`, migrating its schema forward: a `postgres://` (or
    /// `postgresql://`) URL is a PostgreSQL database, anything else an SQLite file (created, with
    /// its folder, if absent).
    pub fn open(location: &str) -> Result<Store, HistoryError> {
        let named = masked(location);
        let fail = |error: String| HistoryError::Store {
            location: named.clone(),
            error,
        };
        let backend: Box<dyn Backend> = if is_postgres(location) {
            Box::new(postgres::Postgres::open(location).map_err(fail)?)
        } else {
            Box::new(sqlite::Sqlite::open(location).map_err(fail)?)
        };
        Ok(Store {
            backend,
            location: named,
        })
    }

    /// The store as it is named in errors and messages: its path, or its URL without the password.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn fail(&self, error: impl std::fmt::Display) -> HistoryError {
        HistoryError::Store {
            location: self.location.clone(),
            error: error.to_string(),
        }
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<u32, HistoryError> {
        self.backend.schema_version().map_err(|e| self.fail(e))
    }

    /// Store one result document (its JSON text): a run of each of its cells, with every metric's
    /// samples. The document goes through the gate first; one it refuses is not stored.
    pub fn record(&mut self, text: &str, meta: &RunMeta) -> Result<Stored, HistoryError> {
        let recording = Recording::of(text, meta)?;
        let new = self.backend.write(&recording).map_err(|e| self.fail(e))?;
        Ok(Stored {
            runs: recording
                .cells
                .into_iter()
                .zip(new)
                .map(|(cell, new)| (cell.key, new))
                .collect(),
        })
    }

    /// Every benchmark stored, with its run count and metrics, in the order first stored.
    pub fn benchmarks(&self) -> Result<Vec<Benchmark>, HistoryError> {
        self.backend.benchmarks().map_err(|e| self.fail(e))
    }

    /// The benchmark a user named: its key (or a prefix of at least 4 digits naming one).
    pub fn find(&self, key: &str) -> Result<Benchmark, HistoryError> {
        let all = self.benchmarks()?;
        let found: Vec<&Benchmark> = all
            .iter()
            .filter(|b| key.len() >= 4 && b.key.starts_with(key))
            .collect();
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(HistoryError::Document(format!(
                "--benchmark {key}: no benchmark in {} has that key (`kbench history list` shows them)",
                self.location
            ))),
            many => Err(HistoryError::Document(format!(
                "--benchmark {key}: {} benchmarks start with it; give more digits",
                many.len()
            ))),
        }
    }

    /// One metric of one benchmark, run by run, oldest first (by start time, then as stored).
    pub fn series(&self, benchmark: &Benchmark, metric: &str) -> Result<Series, HistoryError> {
        let rows = self
            .backend
            .samples(benchmark.id, metric)
            .map_err(|e| self.fail(e))?;
        let Some(better) = rows.first().map(|r| r.better.clone()) else {
            return Err(HistoryError::Document(format!(
                "--metric {metric}: benchmark {} has no such metric (it has {})",
                benchmark.key,
                benchmark.metrics.join(", ")
            )));
        };
        let mut points: Vec<Point> = Vec::new();
        for row in rows {
            match points.last_mut() {
                Some(p) if p.run_id == row.run_id => p.samples.push(row.value),
                _ => points.push(Point {
                    run_id: row.run_id,
                    started_at: row.started_at,
                    build_label: row.build_label,
                    kbench_version: row.kbench_version,
                    samples: vec![row.value],
                }),
            }
        }
        Ok(Series {
            metric: metric.to_string(),
            better: if better == "higher" {
                Better::Higher
            } else {
                Better::Lower
            },
            points,
        })
    }
}

/// What a backend does: keep a [`Recording`]'s rows, read them back. Its errors are the sentence
/// after `--store LOCATION: `, and never hold a password.
trait Backend: Send {
    fn schema_version(&self) -> Result<u32, String>;
    /// Store the document and a run of each cell (in one transaction, each run once): whether
    /// each cell's run is new, in the recording's order.
    fn write(&mut self, recording: &Recording) -> Result<Vec<bool>, String>;
    fn benchmarks(&self) -> Result<Vec<Benchmark>, String>;
    /// One metric's samples of one benchmark's runs, ordered by the run's start, its id, and the
    /// repetition; none if no run has that metric.
    fn samples(&self, benchmark_id: i64, metric: &str) -> Result<Vec<SampleRow>, String>;
}

/// One sample as stored, beside its run.
struct SampleRow {
    run_id: i64,
    started_at: String,
    build_label: Option<String>,
    kbench_version: String,
    better: String,
    value: f64,
}

/// A document read into what the store keeps: the document once, and a run of each cell.
struct Recording {
    /// The document as JSON writes it compactly: the same document from a file (pretty) and from
    /// a run (`--store`) is one run.
    text: String,
    digest: String,
    kind: &'static str,
    target: String,
    started_at: String,
    stored_at: String,
    kbench_version: String,
    build_label: Option<String>,
    source: Option<String>,
    cells: Vec<CellRun>,
}

/// One cell's run: its benchmark, and every metric's finite samples by repetition.
struct CellRun {
    key: String,
    cell: String,
    metrics: Vec<MetricSamples>,
}

struct MetricSamples {
    metric: String,
    /// `higher` or `lower`.
    better: &'static str,
    /// (repetition, value), the repetitions whose value is finite.
    samples: Vec<(i64, f64)>,
}

impl Recording {
    fn of(text: &str, meta: &RunMeta) -> Result<Recording, HistoryError> {
        let doc: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| HistoryError::Document(format!("not a result document: {e}")))?;
        let kind =
            crate::document::check(&doc).map_err(|e| HistoryError::Document(e.to_string()))?;
        let cells = cells_of(kind, &doc).map_err(|e| HistoryError::Document(e.to_string()))?;
        let target = meta.target_label.clone().unwrap_or_else(|| target_of(&doc));
        let stored_at = crate::result::rfc3339(SystemTime::now());
        let started_at = doc["start_time"]
            .as_str()
            .map_or_else(|| stored_at.clone(), str::to_string);
        let kbench_version = doc["environment"]["kbench_version"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let text =
            serde_json::to_string(&doc).map_err(|e| HistoryError::Document(e.to_string()))?;
        let cells = cells
            .into_iter()
            .map(|(cell, metrics)| CellRun {
                key: benchmark_key(kind.name(), &cell, &target),
                cell,
                metrics: metrics
                    .into_iter()
                    .map(|(metric, (better, values))| MetricSamples {
                        metric,
                        better: match better {
                            Better::Higher => "higher",
                            Better::Lower => "lower",
                        },
                        samples: (0..).zip(values).filter(|(_, v)| v.is_finite()).collect(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Recording {
            digest: document_digest(&text),
            text,
            kind: kind.name(),
            target,
            started_at,
            stored_at,
            kbench_version,
            build_label: meta.build_label.clone(),
            source: meta.source.clone(),
            cells,
        })
    }
}

/// Whether a store's location is a PostgreSQL URL.
pub fn is_postgres(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A store's location as it may be shown: a URL's password (`user:***@`, `password=***`)
/// masked; a path as it is.
pub fn masked(location: &str) -> String {
    if !is_postgres(location) {
        return location.to_string();
    }
    let Some((scheme, rest)) = location.split_once("://") else {
        return location.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => format!("{userinfo}@{hosts}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if name.eq_ignore_ascii_case("password") => {
                        format!("{name}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// The message for a store whose schema is newer than this build reads.
fn newer_schema(version: u32) -> String {
    format!(
        "schema version {version} was written by a newer kbench; this one reads up to {SCHEMA_VERSION}"
    )
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

    #[test]
    fn a_urls_password_is_never_shown() {
        for (url, shown) in [
            (
                "postgres://kbench:s3cret@db:5432/h",
                "postgres://kbench:***@db:5432/h",
            ),
            (
                "postgresql://u:p@w@db/h?sslmode=disable",
                "postgresql://u:***@db/h?sslmode=disable",
            ),
            (
                "postgres://kbench@db/h?password=s3cret&x=1",
                "postgres://kbench@db/h?password=***&x=1",
            ),
            ("postgres://db:5432", "postgres://db:5432"),
            ("results/h.db", "results/h.db"),
        ] {
            assert_eq!(masked(url), shown);
        }
        let e = Store::open("postgres://kbench:s3cret@127.0.0.1:1/h")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("--store postgres://kbench:***@127.0.0.1:1/h: ") && !e.contains("s3cret"),
            "{e}"
        );
    }
}
