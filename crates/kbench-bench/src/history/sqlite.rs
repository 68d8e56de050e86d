//! The results store in one SQLite file (the `rusqlite` crate, SQLite compiled in).

use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{
    Benchmark, HistoryError, Point, RunMeta, Series, Stored, benchmark_key, document_digest,
    target_of,
};
use crate::compare::{Better, cells_of};

/// The schema this build writes; [`MIGRATIONS`] bring an older store up to it.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Each schema version's statements, in order: version N is `MIGRATIONS[N - 1]`.
const MIGRATIONS: &[&str] = &["
    CREATE TABLE benchmark (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        cell TEXT NOT NULL,
        target TEXT NOT NULL
    );
    CREATE TABLE document (
        digest TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );
    CREATE TABLE run (
        id INTEGER PRIMARY KEY,
        benchmark_id INTEGER NOT NULL REFERENCES benchmark(id),
        digest TEXT NOT NULL REFERENCES document(digest),
        started_at TEXT NOT NULL,
        stored_at TEXT NOT NULL,
        build_label TEXT,
        kbench_version TEXT NOT NULL,
        source TEXT,
        UNIQUE (benchmark_id, digest)
    );
    CREATE TABLE sample (
        run_id INTEGER NOT NULL REFERENCES run(id),
        metric TEXT NOT NULL,
        better TEXT NOT NULL,
        repetition INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, metric, repetition)
    );
    CREATE INDEX run_by_benchmark ON run (benchmark_id, started_at, id);
"];

/// How long a writer waits for another's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open results store.
pub struct Store {
    conn: Connection,
    location: String,
}

impl Store {
    /// Open (creating) the store at `location`, a file path, migrating its schema forward.
    pub fn open(location: &str) -> Result<Store, HistoryError> {
        let fail = |error: String| HistoryError::Store {
            location: location.to_string(),
            error,
        };
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            return Err(fail(
                "PostgreSQL stores are not in this build yet; give a file path (SQLite)".into(),
            ));
        }
        if location.is_empty() {
            return Err(fail("no path given".into()));
        }
        let path = std::path::Path::new(location);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        let mut store = Store {
            conn,
            location: location.to_string(),
        };
        store.prepare().map_err(|e| fail(e.to_string()))?;
        store.migrate()?;
        Ok(store)
    }

    fn fail(&self, error: impl std::fmt::Display) -> HistoryError {
        store_error(&self.location, error)
    }

    fn prepare(&mut self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers never block the writer; one writer at a time, the others wait.
        self.conn
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        self.conn.execute_batch("PRAGMA foreign_keys = ON")
    }

    /// Bring the schema up to [`SCHEMA_VERSION`], one transaction per version.
    fn migrate(&mut self) -> Result<(), HistoryError> {
        let location = self.location.clone();
        let fail = |e: String| store_error(&location, e);
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| fail(e.to_string()))?;
            let version: u32 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|e| fail(e.to_string()))?;
            if version > SCHEMA_VERSION {
                return Err(fail(format!(
                    "schema version {version} was written by a newer kbench; this one reads up to {SCHEMA_VERSION}"
                )));
            }
            if version == SCHEMA_VERSION {
                return Ok(());
            }
            tx.execute_batch(MIGRATIONS[version as usize])
                .and_then(|_| tx.execute_batch(&format!("PRAGMA user_version = {}", version + 1)))
                .and_then(|_| tx.commit())
                .map_err(|e| fail(format!("migrating to schema {}: {e}", version + 1)))?;
        }
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<u32, HistoryError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.fail(e))
    }

    /// Store one result document (its JSON text): a run of each of its cells, with every metric's
    /// samples. The document goes through the gate first; one it refuses is not stored.
    pub fn record(&mut self, text: &str, meta: &RunMeta) -> Result<Stored, HistoryError> {
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
        let version = doc["environment"]["kbench_version"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        // The document as JSON writes it compactly: the same document from a file (pretty) and
        // from a run (`--store`) is one run.
        let text =
            serde_json::to_string(&doc).map_err(|e| HistoryError::Document(e.to_string()))?;
        let digest = document_digest(&text);
        let location = self.location.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| store_error(&location, e))?;
        let mut stored = Stored { runs: Vec::new() };
        let result = (|| -> rusqlite::Result<()> {
            tx.execute(
                "INSERT OR IGNORE INTO document (digest, body) VALUES (?1, ?2)",
                params![digest, text],
            )?;
            for (cell, metrics) in &cells {
                let key = benchmark_key(kind.name(), cell, &target);
                tx.execute(
                    "INSERT OR IGNORE INTO benchmark (key, kind, cell, target) VALUES (?1, ?2, ?3, ?4)",
                    params![key, kind.name(), cell, target],
                )?;
                let benchmark: i64 =
                    tx.query_row("SELECT id FROM benchmark WHERE key = ?1", [&key], |r| {
                        r.get(0)
                    })?;
                let new = tx.execute(
                    "INSERT OR IGNORE INTO run (benchmark_id, digest, started_at, stored_at, build_label, kbench_version, source)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![benchmark, digest, started_at, stored_at, meta.build_label, version, meta.source],
                )? == 1;
                if new {
                    let run = tx.last_insert_rowid();
                    for (metric, (better, samples)) in metrics {
                        for (i, v) in samples.iter().enumerate().filter(|(_, v)| v.is_finite()) {
                            tx.execute(
                                "INSERT INTO sample (run_id, metric, better, repetition, value) VALUES (?1, ?2, ?3, ?4, ?5)",
                                params![run, metric, better_name(*better), i as i64, v],
                            )?;
                        }
                    }
                }
                stored.runs.push((key, new));
            }
            Ok(())
        })();
        result
            .and_then(|_| tx.commit())
            .map_err(|e| store_error(&location, e))?;
        Ok(stored)
    }

    /// Every benchmark stored, with its run count and metrics, in the order first stored.
    pub fn benchmarks(&self) -> Result<Vec<Benchmark>, HistoryError> {
        let read = || -> rusqlite::Result<Vec<Benchmark>> {
            let mut q = self.conn.prepare(
                "SELECT b.id, b.key, b.kind, b.cell, b.target,
                        (SELECT COUNT(*) FROM run r WHERE r.benchmark_id = b.id)
                 FROM benchmark b ORDER BY b.id",
            )?;
            let mut out: Vec<Benchmark> = q
                .query_map([], |r| {
                    Ok(Benchmark {
                        id: r.get(0)?,
                        key: r.get(1)?,
                        kind: r.get(2)?,
                        cell: r.get(3)?,
                        target: r.get(4)?,
                        runs: r.get::<_, i64>(5)? as u64,
                        metrics: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut m = self.conn.prepare(
                "SELECT DISTINCT s.metric FROM sample s JOIN run r ON r.id = s.run_id
                 WHERE r.benchmark_id = ?1 ORDER BY s.metric",
            )?;
            for b in &mut out {
                b.metrics = m
                    .query_map([b.id], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
            }
            Ok(out)
        };
        read().map_err(|e| self.fail(e))
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
        let read = || -> rusqlite::Result<Option<Series>> {
            let better: Option<String> = self
                .conn
                .query_row(
                    "SELECT s.better FROM sample s JOIN run r ON r.id = s.run_id
                     WHERE r.benchmark_id = ?1 AND s.metric = ?2 LIMIT 1",
                    params![benchmark.id, metric],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(better) = better else {
                return Ok(None);
            };
            let mut q = self.conn.prepare(
                "SELECT r.id, r.started_at, r.build_label, r.kbench_version, s.value
                 FROM run r JOIN sample s ON s.run_id = r.id
                 WHERE r.benchmark_id = ?1 AND s.metric = ?2
                 ORDER BY r.started_at, r.id, s.repetition",
            )?;
            let mut points: Vec<Point> = Vec::new();
            let rows = q.query_map(params![benchmark.id, metric], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, f64>(4)?,
                ))
            })?;
            for row in rows {
                let (run_id, started_at, build_label, kbench_version, value) = row?;
                match points.last_mut() {
                    Some(p) if p.run_id == run_id => p.samples.push(value),
                    _ => points.push(Point {
                        run_id,
                        started_at,
                        build_label,
                        kbench_version,
                        samples: vec![value],
                    }),
                }
            }
            Ok(Some(Series {
                metric: metric.to_string(),
                better: if better == "higher" {
                    Better::Higher
                } else {
                    Better::Lower
                },
                points,
            }))
        };
        read().map_err(|e| self.fail(e))?.ok_or_else(|| {
            HistoryError::Document(format!(
                "--metric {metric}: benchmark {} has no such metric (it has {})",
                benchmark.key,
                benchmark.metrics.join(", ")
            ))
        })
    }
}

/// The store's error: `--store LOCATION: …`.
fn store_error(location: &str, error: impl std::fmt::Display) -> HistoryError {
    HistoryError::Store {
        location: location.to_string(),
        error: error.to_string(),
    }
}

fn better_name(b: Better) -> &'static str {
    match b {
        Better::Higher => "higher",
        Better::Lower => "lower",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A produce document with one repetition per value of `rates`.
    fn produce(start: &str, rates: &[f64]) -> String {
        let reps: Vec<serde_json::Value> = rates
            .iter()
            .map(|r| {
                serde_json::json!({"duration_s": 1.0, "records_acked": 10, "records_failed": 0,
                    "records_per_sec": r, "mb_per_sec": r / 1000.0, "client_cpu_us_per_record": 2.0,
                    "latency_p50_us": 100, "latency_p99_us": 900})
            })
            .collect();
        serde_json::json!({
            "schema_version": crate::result::SCHEMA_VERSION, "kind": "produce",
            "environment": {"kbench_version": "9.9.9", "hostname": "h", "cores": 2, "os": "linux", "arch": "x86_64"},
            "target": {"bootstrap_servers": "127.0.0.1:9", "embedded_broker": true, "security_protocol": "PLAINTEXT"},
            "start_time": start,
            "settings": {"compression": "none", "acks": "all", "record_size": 100, "batch_size": 16384,
                "linger_ms": 5, "throughput": -1, "partitions": 1},
            "repetitions": reps,
        })
        .to_string()
    }

    /// A folder of its own, removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_store() -> (TempDir, String) {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kbench-history-{}-{n}", std::process::id()));
        let path = dir.join("sub").join("h.db").display().to_string();
        (TempDir(dir), path)
    }

    #[test]
    fn a_run_is_stored_once_with_every_repetition_and_read_back_in_order() {
        let (_dir, path) = temp_store();
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let meta = RunMeta {
            build_label: Some("abc".into()),
            ..RunMeta::default()
        };
        let second = produce("2026-01-02T00:00:00Z", &[200.0, 210.0, 190.0]);
        let first = produce("2026-01-01T00:00:00Z", &[100.0]);
        let stored = store.record(&second, &meta).unwrap();
        assert_eq!(stored.runs.len(), 1);
        assert!(stored.runs[0].1);
        store.record(&first, &RunMeta::default()).unwrap();
        // The same document again is the same run.
        assert!(!store.record(&second, &meta).unwrap().runs[0].1);
        let all = store.benchmarks().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].runs, 2);
        assert_eq!(all[0].target, "embedded");
        assert!(all[0].metrics.contains(&"records_per_sec".to_string()));
        let b = store.find(&all[0].key[..6]).unwrap();
        let s = store.series(&b, "records_per_sec").unwrap();
        assert_eq!(s.better, Better::Higher);
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[0].samples, vec![100.0]);
        assert_eq!(s.points[1].samples, vec![200.0, 210.0, 190.0]);
        assert_eq!(s.points[1].build_label.as_deref(), Some("abc"));
        assert_eq!(s.points[1].kbench_version, "9.9.9");
        let e = store.series(&b, "nope").unwrap_err().to_string();
        assert!(
            e.contains("--metric nope") && e.contains("records_per_sec"),
            "{e}"
        );
        // Reopening migrates nothing and keeps everything.
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.benchmarks().unwrap()[0].runs, 2);
    }

    #[test]
    fn a_store_from_a_newer_kbench_and_a_bad_document_are_refused_by_name() {
        let (_dir, path) = temp_store();
        let mut store = Store::open(&path).unwrap();
        let e = store.record("{}", &RunMeta::default()).unwrap_err();
        assert!(e.to_string().contains("kind"), "{e}");
        store
            .conn
            .execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
        drop(store);
        let e = Store::open(&path).err().unwrap().to_string();
        assert!(e.starts_with(&format!("--store {path}")), "{e}");
        assert!(e.contains("newer kbench"), "{e}");
        let e = Store::open("postgres://x/y").err().unwrap().to_string();
        assert!(e.contains("PostgreSQL"), "{e}");
    }

    #[test]
    fn two_writers_at_once_lose_nothing() {
        let (_dir, path) = temp_store();
        Store::open(&path).unwrap();
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut store = Store::open(&path).unwrap();
                    for i in 0..40 {
                        let doc = produce(&format!("2026-01-01T00:{w}{i:02}:00Z"), &[i as f64]);
                        store.record(&doc, &RunMeta::default()).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.benchmarks().unwrap()[0].runs, 80);
    }
}
