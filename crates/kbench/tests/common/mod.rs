//! Shared by the integration tests: the real `kbench` binary, and a real embedded broker (`kbench
//! broker` in a child process) that each test starts itself and that dies with the test.

#![allow(dead_code)]

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
pub fn run(args: &[&str], limit: Duration) -> Output {
    let mut child = kbench()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kbench");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "kbench {args:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `kbench broker` child process on a free loopback port, killed on drop.
pub struct TestBroker {
    child: Child,
    pub addr: String,
}

impl TestBroker {
    pub fn start() -> TestBroker {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = kbench()
            .args(["broker", "--quiet", "--listen", &addr])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn kbench broker");
        let broker = TestBroker { child, addr };
        let rt = runtime();
        let started = Instant::now();
        while rt.block_on(broker.connect_with(Pins::default())).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "broker did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        broker
    }

    pub async fn connect_with(&self, pins: Pins) -> Result<Cluster, kbench_client::ClientError> {
        Cluster::connect(ClusterConfig {
            bootstrap: vec![self.addr.clone()],
            client_id: "kbench-test".into(),
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            max_in_flight: 5,
            pins,
        })
        .await
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
        if offset >= fetched.high_watermark {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "fetch did not reach the high watermark"
        );
    }
}

/// Parse a result document written with --json.
pub fn result_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result file")).expect("result JSON")
}
