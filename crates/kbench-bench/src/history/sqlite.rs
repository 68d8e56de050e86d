//! The results store in one SQLite file (the `rusqlite` crate, SQLite compiled in). The schema's
//! version is the file's `user_version`; writers take the file's write lock for one transaction
//! each and wait for one another (WAL, busy timeout).

use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, TransactionBehavior, params};

use super::{Backend, Benchmark, Recording, SCHEMA_VERSION, SampleRow, newer_schema};

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

const _: () = assert!(MIGRATIONS.len() == SCHEMA_VERSION as usize);

/// How long a writer waits for another's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Run `step` until it does not fail for another connection's lock, within [`BUSY_TIMEOUT`]:
/// for the few steps SQLite fails at once, without waiting in its busy handler.
fn when_free<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match step() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done,
        }
    }
}

/// An open SQLite store.
pub(super) struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    /// Open (creating, with its folder) the store at `path`, migrating its schema forward.
    pub(super) fn open(path: &str) -> Result<Sqlite, String> {
        if path.is_empty() {
            return Err("no path given".into());
        }
        let path = std::path::Path::new(path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let conn = Connection::open(path).map_err(|e| e.to_string())?;
        let mut store = Sqlite { conn };
        store.prepare().map_err(|e| e.to_string())?;
        store.migrate()?;
        Ok(store)
    }

    fn prepare(&mut self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers never block the writer; one writer at a time, the others wait. Switching a
        // new file to WAL while another connection does the same can fail at once, without the
        // busy handler (SQLite's way out of a lock cycle): try again until the timeout.
        when_free(|| {
            self.conn
                .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        })?;
        self.conn.execute_batch("PRAGMA foreign_keys = ON")
    }

    /// Bring the schema up to [`SCHEMA_VERSION`], one transaction per version.
    fn migrate(&mut self) -> Result<(), String> {
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| e.to_string())?;
            let version: u32 = tx
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|e| e.to_string())?;
            if version > SCHEMA_VERSION {
                return Err(newer_schema(version));
            }
            if version == SCHEMA_VERSION {
                return Ok(());
            }
            tx.execute_batch(MIGRATIONS[version as usize])
                .and_then(|_| tx.execute_batch(&format!("PRAGMA user_version = {}", version + 1)))
                .and_then(|_| tx.commit())
                .map_err(|e| format!("migrating to schema {}: {e}", version + 1))?;
        }
    }
}

impl Backend for Sqlite {
    fn schema_version(&self) -> Result<u32, String> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| e.to_string())
    }

    fn write(&mut self, rec: &Recording) -> Result<Vec<bool>, String> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        let mut new = Vec::new();
        let result = (|| -> rusqlite::Result<()> {
            tx.execute(
                "INSERT OR IGNORE INTO document (digest, body) VALUES (?1, ?2)",
                params![rec.digest, rec.text],
            )?;
            for cell in &rec.cells {
                tx.execute(
                    "INSERT OR IGNORE INTO benchmark (key, kind, cell, target) VALUES (?1, ?2, ?3, ?4)",
                    params![cell.key, rec.kind, cell.cell, rec.target],
                )?;
                let benchmark: i64 = tx.query_row(
                    "SELECT id FROM benchmark WHERE key = ?1",
                    [&cell.key],
                    |r| r.get(0),
                )?;
                let fresh = tx.execute(
                    "INSERT OR IGNORE INTO run (benchmark_id, digest, started_at, stored_at, build_label, kbench_version, source)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![benchmark, rec.digest, rec.started_at, rec.stored_at, rec.build_label, rec.kbench_version, rec.source],
                )? == 1;
                if fresh {
                    let run = tx.last_insert_rowid();
                    for m in &cell.metrics {
                        for (repetition, value) in &m.samples {
                            tx.execute(
                                "INSERT INTO sample (run_id, metric, better, repetition, value) VALUES (?1, ?2, ?3, ?4, ?5)",
                                params![run, m.metric, m.better, repetition, value],
                            )?;
                        }
                    }
                }
                new.push(fresh);
            }
            Ok(())
        })();
        result
            .and_then(|_| tx.commit())
            .map_err(|e| e.to_string())?;
        Ok(new)
    }

    fn benchmarks(&self) -> Result<Vec<Benchmark>, String> {
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
        read().map_err(|e| e.to_string())
    }

    fn samples(&self, benchmark_id: i64, metric: &str) -> Result<Vec<SampleRow>, String> {
        let read = || -> rusqlite::Result<Vec<SampleRow>> {
            let mut q = self.conn.prepare(
                "SELECT r.id, r.started_at, r.build_label, r.kbench_version, s.better, s.value
                 FROM run r JOIN sample s ON s.run_id = r.id
                 WHERE r.benchmark_id = ?1 AND s.metric = ?2
                 ORDER BY r.started_at, r.id, s.repetition",
            )?;
            q.query_map(params![benchmark_id, metric], |r| {
                Ok(SampleRow {
                    run_id: r.get(0)?,
                    started_at: r.get(1)?,
                    build_label: r.get(2)?,
                    kbench_version: r.get(3)?,
                    better: r.get(4)?,
                    value: r.get(5)?,
                })
            })?
            .collect()
        };
        read().map_err(|e| e.to_string())
    }
}
