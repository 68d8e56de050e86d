//! Shared by the integration tests: the real `kbench` binary, and a real embedded broker (`kbench
//! broker` in a child process) that each test starts itself and that dies with the test.

#![allow(dead_code)]

pub mod tls;

use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::records::{Record, RecordBatchDecoder};
use kbench_client::{Cluster, ClusterConfig};
use kbench_wire::Pins;

/// The kbench binary under test.
pub fn kbench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kbench"));
    c.stdin(Stdio::null());
    c
}

/// Run kbench to completion with a time limit; a hang fails the test instead of stalling CI.
/// Both pipes are read while it runs: a run that prints more than a pipe holds never waits on us.
pub fn run(args: &[&str], limit: Duration) -> Output {
    use std::io::Read;
    let mut child = kbench()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kbench");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Output {
                status,
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
            };
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kbench {args:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.join().unwrap_or_default()),
                String::from_utf8_lossy(&err.join().unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Which broker a test runs against: kbench's own embedded one, or one that is not kbench's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// `kbench broker`: Tansu 0.6.0 from crates.io, embedded in kbench, node id 0.
    Embedded,
    /// The upstream `tansu broker` binary (0.6.0, built from upstream commit 510f3e2; installed by
    /// scripts/install-test-tools), node id 111: an independent broker.
    Standalone,
}

/// Both kinds, for the tests that must hold against each.
pub const BROKERS: [BrokerKind; 2] = [BrokerKind::Embedded, BrokerKind::Standalone];

/// A broker child process on a free loopback port, killed on drop.
pub struct TestBroker {
    child: Child,
    pub addr: String,
    pub kind: BrokerKind,
}

/// A free loopback port (free now; the broker binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// The upstream Tansu binary: `KBENCH_TANSU_BIN`, else `target/tools/tansu`.
pub fn standalone_tansu() -> std::path::PathBuf {
    let path = std::env::var_os("KBENCH_TANSU_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/tansu")
        });
    assert!(
        path.is_file(),
        "the standalone Tansu broker is not installed at {}: run scripts/install-test-tools (scripts/test does)",
        path.display()
    );
    path
}

impl TestBroker {
    /// kbench's embedded broker.
    pub fn start() -> TestBroker {
        Self::of(BrokerKind::Embedded)
    }

    /// The upstream Tansu binary.
    pub fn standalone() -> TestBroker {
        Self::of(BrokerKind::Standalone)
    }

    pub fn of(kind: BrokerKind) -> TestBroker {
        Self::with(kind, &[])
    }

    /// kbench's embedded broker with more `kbench broker` flags (e.g. `--sasl-user`).
    pub fn embedded_with(flags: &[&str]) -> TestBroker {
        Self::with(BrokerKind::Embedded, flags)
    }

    /// kbench's embedded broker with more flags, its stderr written to `log`.
    pub fn embedded_logging(flags: &[&str], log: &std::path::Path) -> TestBroker {
        Self::start_inner(BrokerKind::Embedded, flags, Some(log))
    }

    fn with(kind: BrokerKind, flags: &[&str]) -> TestBroker {
        Self::start_inner(kind, flags, None)
    }

    fn start_inner(kind: BrokerKind, flags: &[&str], log: Option<&std::path::Path>) -> TestBroker {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut command = match kind {
            BrokerKind::Embedded => {
                let mut c = kbench();
                c.args(["broker", "--quiet", "--listen", &addr]);
                c.args(flags);
                c
            }
            BrokerKind::Standalone => {
                let url = format!("tcp://{addr}");
                let mut c = Command::new(standalone_tansu());
                c.args([
                    "broker",
                    "--silent",
                    "--listener-url",
                    &url,
                    "--advertised-listener-url",
                    &url,
                    "--storage-engine",
                    "memory://tansu/",
                ]);
                c.stdin(Stdio::null());
                // Dies with the test process, however that ends.
                unsafe {
                    use std::os::unix::process::CommandExt;
                    c.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                c
            }
        };
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("broker log")),
            None => Stdio::inherit(),
        };
        let child = command
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn the {kind:?} broker: {e}"));
        let broker = TestBroker { child, addr, kind };
        let rt = runtime();
        let started = Instant::now();
        while rt.block_on(broker.connect_with(Pins::default())).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the {kind:?} broker did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        broker
    }

    pub async fn connect_with(&self, pins: Pins) -> Result<Cluster, kbench_client::ClientError> {
        Cluster::connect(ClusterConfig {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            ..ClusterConfig::new(vec![self.addr.clone()], "kbench-test", pins)
        })
        .await
    }
}

impl TestBroker {
    /// Kill the broker now (SIGKILL), as a crash would.
    /// The broker process's id (to pause it with SIGSTOP, say).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The broker's process, to signal and reap.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The versions of `api` this broker and kbench share (from the broker's ApiVersions), so that
    /// a test does not pin the broker's own ranges and break on its upgrade.
    pub fn shared_versions(&self, api: kbench_wire::ApiKey) -> std::ops::RangeInclusive<i16> {
        let cluster = runtime()
            .block_on(self.connect_with(Pins::default()))
            .expect("connect");
        let broker = cluster
            .bootstrap_ranges()
            .get(api)
            .expect("the broker speaks it");
        let shared = broker.intersect(&kbench_wire::kbench_range(api));
        shared.min..=shared.max
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Read every record of one partition from offset 0 to the high watermark with Fetch, decoded by
/// kafka-protocol's own decoder (the oracle).
pub async fn fetch_all(cluster: &Cluster, topic: &str, partition: i32) -> Vec<Record> {
    let (_, layout) = cluster.metadata(topic).await.expect("metadata");
    let mut records = Vec::new();
    let mut offset = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fetched = cluster
            .fetch(&layout, partition, offset, 4 * 1024 * 1024, 100)
            .await
            .expect("fetch");
        let mut bytes = fetched.records;
        if !bytes.is_empty() {
            for set in RecordBatchDecoder::decode_all(&mut bytes).expect("decode batches") {
                for r in set.records {
                    if r.offset >= offset {
                        offset = r.offset + 1;
                        records.push(r);
                    }
                }
            }
        }
        if fetched.high_watermark >= 0 && offset >= fetched.high_watermark {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "fetch did not reach the high watermark"
        );
    }
}

/// Parse a result document written with --json.
/// A result document's whole-number `field`; the test fails, showing the document, when it is
/// missing or not a whole number.
pub fn n(v: &serde_json::Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

pub fn result_json(path: &std::path::Path) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("result file"))
            .expect("result JSON");
    reads_as_its_type(&doc);
    doc
}

/// A produce, consume or e2e document kbench wrote reads back as the type it was written from
/// (a merged distributed document is assembled from the agents' and is not one of them).
fn reads_as_its_type(doc: &serde_json::Value) {
    if doc.get("distributed").is_some() {
        return;
    }
    let read = match doc["kind"].as_str() {
        Some("produce") => {
            serde_json::from_value::<kbench_bench::ResultDocument>(doc.clone()).map(drop)
        }
        Some("consume") => {
            serde_json::from_value::<kbench_bench::consume::ConsumeResultDocument>(doc.clone())
                .map(drop)
        }
        Some("e2e") => {
            serde_json::from_value::<kbench_bench::result::E2eResultDocument>(doc.clone()).map(drop)
        }
        _ => Ok(()),
    };
    if let Err(e) = read {
        panic!("a {} document does not read as its type: {e}", doc["kind"]);
    }
}

/// A temporary folder of one test, removed when dropped: also when the test fails.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A fresh, empty folder named after the test.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "kbench-{name}-{}-{:x}",
            std::process::id(),
            kbench_bench::spec::random_seed() & 0xffff_ffff
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// A file in the folder, as a string for a command line.
    pub fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // A failed test's files are kept: the path is in its output.
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Poll `condition` until it holds. Only a hang fails: after `timeout` the test panics naming `what`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < timeout,
            "hung: {what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kbench serve --listen 127.0.0.1:0 EXTRA…` with `envs` (and no KBENCH_TOKEN unless given):
/// the child and its base URL, read from its first line.
pub fn start_serve(extra: &[&str], envs: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = kbench();
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("KBENCH_TOKEN")
        .stdout(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn kbench serve");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("first line");
    let base = line
        .trim()
        .rsplit_once("listening on ")
        .map(|(_, a)| a.to_string())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, base)
}

/// A kbench command line, built from the flags most tests share.
pub struct Cmd {
    args: Vec<String>,
}

impl Cmd {
    /// `kbench SUBCOMMAND`.
    pub fn new(subcommand: &str) -> Cmd {
        Cmd {
            args: vec![subcommand.to_string()],
        }
    }

    /// `kbench SUBCOMMAND --bootstrap-server BROKER`.
    pub fn on(subcommand: &str, broker: &TestBroker) -> Cmd {
        Cmd::new(subcommand)
            .arg("--bootstrap-server")
            .arg(&broker.addr)
    }

    pub fn arg(mut self, a: impl AsRef<str>) -> Cmd {
        self.args.push(a.as_ref().to_string());
        self
    }

    pub fn args(mut self, a: &[&str]) -> Cmd {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }

    /// `--topic TOPIC`.
    pub fn topic(self, topic: &str) -> Cmd {
        self.args(&["--topic", topic])
    }

    /// `--json PATH`: where the result document goes.
    pub fn json(self, path: &std::path::Path) -> Cmd {
        self.args(&["--json", path.to_str().expect("UTF-8 path")])
    }

    /// Run it, killed (and the test failed) if it hangs past `limit`.
    pub fn run(&self, limit: Duration) -> Output {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        run(&args, limit)
    }

    /// Run it and require bad input's answer: exit 2, stderr naming `says`, and no embedded broker
    /// started (refused before any load).
    pub fn refused(&self, says: &str) {
        let out = self.run(Duration::from_secs(60));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{:?}: {err}", self.args);
        assert!(err.contains(says), "{:?}: {err}", self.args);
        assert!(
            !err.contains("started an embedded"),
            "{:?}: {err}",
            self.args
        );
    }

    /// Run it, calling `at_line` with each line it prints on stdout as it prints it (on this
    /// thread: a fault can be injected when the run has reached a given point, not at a guessed
    /// time); killed (and the test failed) if it runs past `limit`.
    pub fn run_watching(&self, limit: Duration, mut at_line: impl FnMut(&str)) -> Output {
        use std::io::{BufRead, Read};
        let mut child = kbench()
            .args(&self.args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kbench");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        let started = Instant::now();
        let mut out = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(line) => {
                    at_line(&line);
                    out.extend_from_slice(line.as_bytes());
                    out.push(b'\n');
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let err = err_reader.join().unwrap_or_default();
                panic!(
                    "kbench {:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                    self.args,
                    text(&out),
                    text(&err)
                );
            }
        }
        let _ = reader.join();
        let status = child.wait().expect("wait");
        let stderr = err_reader.join().unwrap_or_default();
        Output {
            status,
            stdout: out,
            stderr,
        }
    }

    /// Run it and require exit 0; the output.
    pub fn ok(&self, limit: Duration) -> Output {
        let out = self.run(limit);
        assert!(
            out.status.success(),
            "kbench {:?} failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
            self.args,
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    }
}

/// Assert that `sizes` (each record's value length) follow `weights` (size, share): every size
/// is one of them, and each size's count is within 4 binomial standard deviations of its share of
/// the records (a statistical check: a correct generator fails it about once in 16 000 runs per
/// bucket).
pub fn assert_sizes_follow(sizes: &[usize], weights: &[(usize, f64)]) {
    let n = sizes.len() as f64;
    for s in sizes {
        assert!(
            weights.iter().any(|(w, _)| w == s),
            "a record of {s} bytes, not one of {weights:?}"
        );
    }
    for (size, share) in weights {
        let count = sizes.iter().filter(|s| *s == size).count() as f64;
        let sigma = (n * share * (1.0 - share)).sqrt();
        assert!(
            (count - n * share).abs() <= 4.0 * sigma,
            "{size} B: {count} of {n} records, expected {} ± {}",
            n * share,
            4.0 * sigma
        );
    }
}
