//! The results store, the same tests on both stores: an SQLite file, and a database of a
//! PostgreSQL server the test starts itself (Debian's `initdb` and `pg_ctl`; one server for the
//! binary, a database per test). Each test body takes the store's location; `history_sqlite::`
//! and `history_postgres::` run it on each. Then what only a server can do wrong: unreachable,
//! read-only, not allowed.

#[path = "support/postgres_server.rs"]
mod postgres_server;

use kbench_bench::compare::Better;
use kbench_bench::history::{RunMeta, SCHEMA_VERSION, Store};
use postgres_server::PgServer;

/// A store: where it is, and how to reach behind kbench's back.
enum Location {
    /// The file, in a folder removed with it.
    Sqlite {
        path: String,
        _dir: TempDir,
    },
    Postgres(String),
}

impl Location {
    fn sqlite() -> Location {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kbench-history-{}-{n}", std::process::id()));
        let path = dir.join("sub").join("h.db").display().to_string();
        Location::Sqlite {
            path,
            _dir: TempDir(dir),
        }
    }

    fn postgres() -> Location {
        Location::Postgres(PgServer::shared().database("history"))
    }

    fn url(&self) -> &str {
        match self {
            Location::Sqlite { path, .. } => path,
            Location::Postgres(url) => url,
        }
    }

    /// Mark the store as written by a kbench of schema `version`.
    fn set_schema_version(&self, version: u32) {
        match self {
            Location::Sqlite { path, .. } => rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(&format!("PRAGMA user_version = {version}"))
                .unwrap(),
            Location::Postgres(url) => PgServer::shared().sql(
                database_of(url),
                &format!("UPDATE kbench_schema SET version = {version}"),
            ),
        }
    }
}

fn database_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

/// A folder of its own, removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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
        "schema_version": kbench_bench::result::SCHEMA_VERSION, "kind": "produce",
        "environment": {"kbench_version": "9.9.9", "hostname": "h", "cores": 2, "os": "linux", "arch": "x86_64"},
        "target": {"bootstrap_servers": "127.0.0.1:9", "embedded_broker": true, "security_protocol": "PLAINTEXT"},
        "start_time": start,
        "settings": {"compression": "none", "acks": "all", "record_size": 100, "batch_size": 16384,
            "linger_ms": 5, "throughput": -1, "partitions": 1},
        "repetitions": reps,
    })
    .to_string()
}

/// Each test body, on an SQLite file and on a PostgreSQL database.
macro_rules! on_both_stores {
    ($($test:ident),* $(,)?) => {
        mod history_sqlite {
            $(#[test]
            fn $test() {
                super::$test(&super::Location::sqlite());
            })*
        }
        mod history_postgres {
            $(#[test]
            fn $test() {
                super::$test(&super::Location::postgres());
            })*
        }
    };
}

on_both_stores!(
    a_run_is_stored_once_with_every_repetition_and_read_back_in_order,
    a_store_from_a_newer_kbench_and_a_bad_document_are_refused_by_name,
    writers_at_once_lose_nothing_and_store_a_document_once,
    a_store_is_used_from_inside_an_async_runtime,
);

fn a_run_is_stored_once_with_every_repetition_and_read_back_in_order(at: &Location) {
    let mut store = Store::open(at.url()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(store.benchmarks().unwrap().is_empty());
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
    // The same document again is the same run, pretty or compact.
    assert!(!store.record(&second, &meta).unwrap().runs[0].1);
    let pretty: serde_json::Value = serde_json::from_str(&second).unwrap();
    let pretty = serde_json::to_string_pretty(&pretty).unwrap();
    assert!(!store.record(&pretty, &meta).unwrap().runs[0].1);
    let all = store.benchmarks().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].runs, 2);
    assert_eq!(all[0].kind, "produce");
    assert_eq!(all[0].target, "embedded");
    assert_eq!(all[0].key, stored.runs[0].0);
    assert!(all[0].metrics.contains(&"records_per_sec".to_string()));
    let mut sorted = all[0].metrics.clone();
    sorted.sort();
    assert_eq!(all[0].metrics, sorted, "metrics in byte order");
    let b = store.find(&all[0].key[..6]).unwrap();
    let s = store.series(&b, "records_per_sec").unwrap();
    assert_eq!(s.better, Better::Higher);
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[0].samples, vec![100.0]);
    assert_eq!(s.points[0].started_at, "2026-01-01T00:00:00Z");
    assert_eq!(s.points[1].samples, vec![200.0, 210.0, 190.0]);
    assert_eq!(s.points[1].build_label.as_deref(), Some("abc"));
    assert_eq!(s.points[1].kbench_version, "9.9.9");
    assert_eq!(
        store.series(&b, "latency_p99_us").unwrap().better,
        Better::Lower
    );
    let e = store.series(&b, "nope").unwrap_err().to_string();
    assert!(
        e.contains("--metric nope") && e.contains("records_per_sec"),
        "{e}"
    );
    let e = store.find("ffffffff").unwrap_err().to_string();
    assert!(e.contains("--benchmark ffffffff"), "{e}");
    // Reopening migrates nothing and keeps everything.
    drop(store);
    let store = Store::open(at.url()).unwrap();
    assert_eq!(store.benchmarks().unwrap()[0].runs, 2);
}

fn a_store_from_a_newer_kbench_and_a_bad_document_are_refused_by_name(at: &Location) {
    let mut store = Store::open(at.url()).unwrap();
    let e = store.record("{}", &RunMeta::default()).unwrap_err();
    assert!(e.to_string().contains("kind"), "{e}");
    let e = store.record("not json", &RunMeta::default()).unwrap_err();
    assert!(e.to_string().contains("not a result document"), "{e}");
    drop(store);
    at.set_schema_version(SCHEMA_VERSION + 1);
    let e = Store::open(at.url()).err().unwrap().to_string();
    assert!(e.starts_with(&format!("--store {}: ", at.url())), "{e}");
    assert!(
        e.contains(&format!(
            "schema version {} was written by a newer kbench; this one reads up to {SCHEMA_VERSION}",
            SCHEMA_VERSION + 1
        )),
        "{e}"
    );
}

/// Writers at once, on a store none of them has opened yet: each stores documents of its own and
/// the same shared ones. Nothing is lost, and each shared document is one run, new to one writer.
fn writers_at_once_lose_nothing_and_store_a_document_once(at: &Location) {
    const WRITERS: usize = 4;
    const OWN: usize = 15;
    const SHARED: usize = 10;
    let url = at.url().to_string();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&url).unwrap();
                let mut fresh_shared = 0;
                for i in 0..OWN.max(SHARED) {
                    if i < OWN {
                        let doc = produce(&format!("2026-01-01T0{w}:{i:02}:00Z"), &[i as f64]);
                        assert!(store.record(&doc, &RunMeta::default()).unwrap().runs[0].1);
                    }
                    if i < SHARED {
                        let doc = produce(&format!("2026-02-01T00:{i:02}:00Z"), &[1.0, 2.0]);
                        if store.record(&doc, &RunMeta::default()).unwrap().runs[0].1 {
                            fresh_shared += 1;
                        }
                    }
                }
                fresh_shared
            })
        })
        .collect();
    let fresh_shared: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(
        fresh_shared, SHARED,
        "each shared document new to one writer"
    );
    let store = Store::open(&url).unwrap();
    let all = store.benchmarks().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].runs as usize, WRITERS * OWN + SHARED);
    let series = store.series(&all[0], "records_per_sec").unwrap();
    assert_eq!(series.points.len(), WRITERS * OWN + SHARED);
    let samples: usize = series.points.iter().map(|p| p.samples.len()).sum();
    assert_eq!(samples, WRITERS * OWN + 2 * SHARED);
}

/// The workloads store their result from inside their async runtime.
fn a_store_is_used_from_inside_an_async_runtime(at: &Location) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut store = Store::open(at.url()).unwrap();
        let doc = produce("2026-01-01T00:00:00Z", &[5.0]);
        assert!(store.record(&doc, &RunMeta::default()).unwrap().runs[0].1);
        assert_eq!(store.benchmarks().unwrap()[0].runs, 1);
        drop(store);
    });
}

#[test]
fn history_postgres_unreachable_or_misnamed_is_one_error_without_the_password() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://kbench:s3cret@127.0.0.1:{port}/history");
    let e = Store::open(&url).err().unwrap().to_string();
    assert!(
        e.starts_with(&format!(
            "--store postgres://kbench:***@127.0.0.1:{port}/history: error connecting to server"
        )),
        "{e}"
    );
    assert!(!e.contains("s3cret") && !e.contains('\n'), "{e}");
    let e = Store::open("postgresql://kbench:s3cret@127.0.0.1:port/history")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with(
            "--store postgresql://kbench:***@127.0.0.1:port/history: invalid connection string"
        ),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
    let server = PgServer::shared();
    let e = Store::open(&server.url("no_such_database"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("database \"no_such_database\" does not exist"),
        "{e}"
    );
}

#[test]
fn history_postgres_read_only_or_not_allowed_is_one_error_naming_the_store() {
    let server = PgServer::shared();
    let url = server.database("history_ro");
    let db = database_of(&url).to_string();
    let doc = produce("2026-01-01T00:00:00Z", &[5.0]);
    Store::open(&url)
        .unwrap()
        .record(&doc, &RunMeta::default())
        .unwrap();

    // A role that may read the store but not write it (its password is never shown).
    server.sql(
        &db,
        "CREATE ROLE reader LOGIN PASSWORD 'pw'; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader",
    );
    let reader = url.replace("kbench@", "reader:s3cret@");
    let shown = url.replace("kbench@", "reader:***@");
    let mut store = Store::open(&reader).unwrap();
    assert_eq!(store.benchmarks().unwrap()[0].runs, 1);
    let other = produce("2026-01-02T00:00:00Z", &[6.0]);
    let e = store
        .record(&other, &RunMeta::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("--store {shown}: permission denied for table document")
    );
    drop(store);
    // A role that may not even read it.
    server.sql(&db, "CREATE ROLE stranger LOGIN");
    let e = Store::open(&url.replace("kbench@", "stranger@"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.ends_with(": permission denied for table kbench_schema"),
        "{e}"
    );

    // A read-only database: read, not written.
    server.sql(
        "postgres",
        &format!("ALTER DATABASE {db} SET default_transaction_read_only = on"),
    );
    let mut store = Store::open(&url).unwrap();
    assert_eq!(store.benchmarks().unwrap()[0].runs, 1);
    let e = store
        .record(&other, &RunMeta::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("--store {url}: cannot execute INSERT in a read-only transaction")
    );
    // A new read-only database cannot be made a store.
    let fresh = server.database("history_ro_new");
    server.sql(
        "postgres",
        &format!(
            "ALTER DATABASE {} SET default_transaction_read_only = on",
            database_of(&fresh)
        ),
    );
    let e = Store::open(&fresh).err().unwrap().to_string();
    assert_eq!(
        e,
        format!(
            "--store {fresh}: migrating to schema 1: cannot execute CREATE TABLE in a read-only transaction"
        )
    );
}
