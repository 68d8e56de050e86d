//! A PostgreSQL server of the tests' own: Debian's server (`initdb`, `pg_ctl`) started in a
//! temporary folder on a free port, trusting local connections as the user `kbench`, stopped when
//! dropped. [`PgServer::shared`] is one server for a whole test binary (a database per test, from
//! [`PgServer::database`]), stopped when the binary ends, however it ends: a watchdog process
//! stops it once the test process is gone. Shared by kbench-bench's store tests and kbench's CLI
//! tests (`#[path]`). PostgreSQL refuses to run as root: as root, the server runs as `nobody`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// Who runs the server's commands, when the tests run as root.
    run_as: Option<&'static str>,
}

impl PgServer {
    /// One server for the whole test binary.
    pub fn shared() -> &'static PgServer {
        static SERVER: OnceLock<PgServer> = OnceLock::new();
        SERVER.get_or_init(PgServer::start)
    }

    /// A server of its own: initialised, started and ready for connections.
    pub fn start() -> PgServer {
        let bin = server_bin();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kbench-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the server's folder");
        // SAFETY: geteuid has no preconditions.
        let run_as = (unsafe { libc::geteuid() } == 0).then_some("nobody");
        if run_as.is_some() {
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown to nobody");
        }
        let port = free_port();
        let mut server = PgServer {
            dir,
            bin,
            port,
            run_as,
        };
        let data = server.data();
        server.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "kbench",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
        );
        server.watch();
        // Started on another port if the free one was taken meanwhile.
        for attempt in 0..3 {
            if attempt > 0 {
                server.port = free_port();
            }
            let options = format!(
                "-k {} -p {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                server.dir.display(),
                server.port
            );
            let log = server.dir.join("server.log");
            let started = server
                .command("pg_ctl")
                .args(["-D", data.to_str().unwrap(), "-o", &options])
                .args(["-l", log.to_str().unwrap(), "-w", "-t", "60", "start"])
                .output()
                .expect("pg_ctl");
            if started.status.success() {
                return server;
            }
            let _ = server
                .command("pg_ctl")
                .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
                .output();
            eprintln!(
                "pg_ctl start on port {}: {}{}",
                server.port,
                String::from_utf8_lossy(&started.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!("the test's PostgreSQL server did not start (see above)");
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// One of the server's programs, as the user that runs it.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(program);
                cmd
            }
            None => Command::new(program),
        };
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A watchdog: once this process is gone, the server is stopped and its folder removed.
    fn watch(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = match self.run_as {
            Some(user) => format!("runuser -u {user} -- '{}'", pg_ctl.display()),
            None => format!("'{}'", pg_ctl.display()),
        };
        // In the background of a shell that ends at once (waited for): the watchdog outlives it.
        let script = format!(
            "(while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} -D '{data}' -m immediate stop; rm -rf '{dir}') &",
            pid = std::process::id(),
            data = self.data().display(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("the server's watchdog");
    }

    /// The URL of a database of the server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://kbench@127.0.0.1:{}/{database}", self.port)
    }

    /// A new, empty database, named after `name` and unique in the server: its URL.
    pub fn database(&self, name: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let database = format!("{name}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.sql("postgres", &format!("CREATE DATABASE {database}"));
        self.url(&database)
    }

    /// Run SQL in a database, as the superuser `kbench` (psql; it fails the test if it fails).
    pub fn sql(&self, database: &str, sql: &str) {
        let port = self.port.to_string();
        self.run(
            "psql",
            &[
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "kbench",
                "-d",
                database,
                "-c",
                sql,
            ],
        );
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl")
            .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The folder of PostgreSQL's server programs: `initdb`'s, on PATH or Debian's
/// /usr/lib/postgresql/VERSION/bin (the newest).
fn server_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("initdb"))
        .find(|p| p.is_file());
    let debian = || {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let version = e.file_name().to_str()?.parse().ok()?;
                let initdb = e.path().join("bin/initdb");
                initdb.is_file().then_some((version, initdb))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, p)| p)
    };
    let initdb = on_path.or_else(debian).unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server (initdb, pg_ctl; Debian package postgresql) is not installed: run scripts/install-test-tools"
        )
    });
    // Debian links its programs into PATH one by one: pg_ctl and psql are beside the real one.
    let initdb = std::fs::canonicalize(&initdb).unwrap_or(initdb);
    initdb.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
