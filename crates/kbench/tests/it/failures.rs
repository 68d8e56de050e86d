//! Bad input and failures: one clear error naming the flag or address, a non-zero exit, no panic,
//! no hang, and every record accounted for when a broker dies mid-run.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

fn assert_clean_failure(out: &std::process::Output, names: &str) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "expected failure for {names}");
    assert!(err.contains(names), "error should name {names:?}:\n{err}");
    assert!(!err.contains("panicked"), "no panic:\n{err}");
    assert!(
        err.lines().filter(|l| l.contains("error")).count() == 1,
        "one error:\n{err}"
    );
}

#[test]
fn unreachable_bootstrap_server_fails_naming_the_address() {
    let out = Cmd::new("produce")
        .args(&["--bootstrap-server", "127.0.0.1:1", "--num-records", "10"])
        .run(Duration::from_secs(60));
    assert_clean_failure(&out, "127.0.0.1:1");
}

#[test]
fn bad_flags_each_get_one_error_naming_the_flag() {
    let long_client_id = format!("client.id={}", "x".repeat(40_000));
    let cases: [(&[&str], &str); 26] = [
        // Hostile values: each one clear error (exit 2) naming the flag, before any broker starts.
        (
            &["produce", "--record-size", "99999999999"],
            "--record-size",
        ),
        (&["produce", "--throughput", "1e-20"], "--throughput"),
        (
            &["produce", "--duration", "18446744073709551615s"],
            "--duration",
        ),
        (&["produce", "--partitions", "1000000"], "--partitions"),
        (&["produce", "--topic", "a b"], "--topic"),
        (
            &[
                "produce",
                "--batch-size",
                "1073741824",
                "--max-in-flight",
                "1000",
            ],
            "--record-size, --batch-size, --max-in-flight",
        ),
        (
            &["produce", "--pin", "apiversions=0"],
            "ApiVersions cannot be pinned",
        ),
        (&["produce", "--pin", "fetch=4"], "does not use Fetch"),
        (
            &["produce", "--pin", "produce=7", "--pin", "produce=8"],
            "pinned twice",
        ),
        (
            &["e2e", "--consume-wait", "99999999999999999s"],
            "--consume-wait",
        ),
        (&["e2e", "--producers", "100000"], "--producers"),
        (&["codec", "--noise-threshold", "NaN"], "--noise-threshold"),
        (&["produce", "--num-records", "-5"], "--num-records"),
        (&["produce", "--compression", "brotli"], "--compression"),
        (&["produce", "-X", "nosuch=1"], "nosuch"),
        // Longer than a request header's string: the property named, not a broker.
        (&["produce", "-X", &long_client_id], "client.id"),
        (&["produce", "--acks", "2"], "--acks"),
        (&["produce", "--pin", "produce=x"], "--pin"),
        (&["produce", "--throughput", "0"], "--throughput"),
        // Malformed addresses: exit 2 naming the flag, never a connection attempt.
        (
            &["produce", "--bootstrap-server", "::::"],
            "--bootstrap-server",
        ),
        (
            &["produce", "--bootstrap-server", "host:99999"],
            "--bootstrap-server",
        ),
        (
            &["e2e", "--bootstrap-server", "a:1,b:2,,c:3"],
            "--bootstrap-server",
        ),
        (&["produce", "--bootstrap-server", ""], "--bootstrap-server"),
        // The limits themselves can be set: lower here, so a modest run is refused by them.
        (
            &[
                "produce",
                "--max-record-size",
                "1KiB",
                "--record-size",
                "2000",
            ],
            "--record-size",
        ),
        (
            &["e2e", "--memory-budget", "1MiB", "--producers", "100"],
            "--producers",
        ),
        (
            &["produce", "--max-record-size", "12parsecs"],
            "--max-record-size",
        ),
    ];
    for (args, names) in cases {
        let out = run(args, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_clean_failure(&out, names);
        assert!(
            !text(&out.stderr).contains("embedded"),
            "no broker is started for bad input"
        );
    }
}

/// Result paths are checked before any load (a folder, a place nothing can be written, two flags
/// naming one file): one error naming the flag, exit 2, no broker started, no run lost to its
/// output. A written result is whole: no temporary file is left beside it.
#[test]
fn result_paths_are_checked_before_the_run() {
    let dir = TempDir::new("paths");
    let d = dir.path().display().to_string();
    let same = format!("{d}/x.json");
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["produce", "--json", &d], "--json"),
        (vec!["produce", "--json", "/proc/kbench-x.json"], "--json"),
        (
            vec!["produce", "--json", &same, "--histogram-log", &same],
            "--json and --histogram-log both name",
        ),
        (vec!["e2e", "--json", &d], "--json"),
        (vec!["consume", "--histogram-log", &d], "--histogram-log"),
    ];
    for (args, names) in cases {
        let out = run(&args, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_clean_failure(&out, names);
        assert!(
            !text(&out.stderr).contains("embedded"),
            "{args:?}: no broker is started for a bad output path"
        );
    }
    let out = Cmd::new("produce")
        .args(&["--num-records", "10", "--json", &same])
        .run(Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["x.json".to_string()], "only the result is left");
}

/// Every file kbench reads has a size cap for its kind: `/dev/zero` given as any input is one error
/// naming the file (or its flag), exit 2, before any broker starts — never read until the OOM
/// killer ends it. A YAML file of nothing but `[` is refused by its nesting, not parsed for seconds.
#[test]
fn inputs_without_bounds_are_refused_naming_the_file() {
    let dir = TempDir::new("bounds");
    let nested = dir.file("nested.yaml");
    std::fs::write(&nested, "[".repeat(200_000)).unwrap();
    let omb = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/omb/1-topic-4-partitions-100b.yaml"
    );
    let cases: [(&[&str], &str); 10] = [
        (
            &["produce", "--producer.config", "/dev/zero"],
            "/dev/zero: larger than 1 MiB",
        ),
        (
            &["consume", "--consumer.config", "/dev/zero"],
            "/dev/zero: larger than 1 MiB",
        ),
        (
            &["produce", "--payload-file", "/dev/zero"],
            "--payload-file /dev/zero: larger than 256 MiB",
        ),
        (
            &["produce", "--scenario", "/dev/zero"],
            "--scenario /dev/zero: larger than 1 MiB",
        ),
        (&["omb", "/dev/zero"], "/dev/zero: larger than 1 MiB"),
        (
            &["omb", omb, "--drivers", "/dev/zero"],
            "/dev/zero: larger than 1 MiB",
        ),
        (&["omb", &nested], "nested more than 64 levels deep"),
        (
            &["compare", "/dev/zero", "/dev/zero"],
            "/dev/zero: larger than 256 MiB",
        ),
        (
            &["report", "/dev/zero", "-o", &dir.file("r.html")],
            "/dev/zero: larger than 256 MiB",
        ),
        (
            &["serve", "--token-file", "/dev/zero"],
            "--token-file /dev/zero: larger than 1 MiB",
        ),
    ];
    for (args, says) in cases {
        let out = run(args, Duration::from_secs(60));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_clean_failure(&out, says);
        assert!(
            !text(&out.stderr).contains("embedded"),
            "{args:?}: refused before any load"
        );
    }
}

/// `kbench broker` on a port in use: one error naming `--listen` and the address, exit 2, and no
/// "listening on" line before it.
#[test]
fn a_broker_on_a_port_in_use_names_the_address() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let out = run(&["broker", "--listen", &addr], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_clean_failure(&out, &format!("--listen {addr}"));
    assert!(
        !text(&out.stderr).contains("listening on"),
        "{}",
        text(&out.stderr)
    );
}

/// A properties file as Java writes and reads them: a byte-order mark, `key value` and `key: value`
/// separators, `\uXXXX` escapes and a continued line all read as `java.util.Properties` reads
/// them (the result's settings say what was applied); a line with no value names its line.
#[test]
fn properties_files_read_as_java_reads_them() {
    let dir = TempDir::new("props");
    let good = dir.file("producer.properties");
    std::fs::write(
        &good,
        "\u{feff}# written by a Java tool\nacks all\nclient.id = k\\u00e9nch\nlinger.ms:\\\n    5\n",
    )
    .unwrap();
    let result = dir.file("p.json");
    Cmd::new("produce")
        .args(&["--num-records", "10", "--producer.config", &good])
        .json(std::path::Path::new(&result))
        .ok(Duration::from_secs(60));
    let doc = result_json(std::path::Path::new(&result));
    let props = &doc["settings"]["properties"];
    assert_eq!(props["acks"], "all", "{props}");
    assert_eq!(props["client.id"], "k\u{e9}nch", "{props}");
    assert_eq!(props["linger.ms"], "5", "{props}");
    let bad = dir.file("bad.properties");
    std::fs::write(&bad, "acks=all\n\nbatch.size\n").unwrap();
    Cmd::new("produce")
        .args(&["--producer.config", &bad])
        .refused(&format!("{bad} line 3: batch.size: no value"));
}

/// `--duration` ends a throttled run whatever the rate: 3 records at one per 100 s would take 200 s;
/// the run ends at its 2 s duration (the limit below only says "hung").
#[test]
fn duration_ends_a_slow_throttled_run() {
    let dir = TempDir::new("slow");
    let json = dir.path().join("slow.json");
    let out = Cmd::new("produce")
        .args(&[
            "--throughput",
            "0.01",
            "--num-records",
            "3",
            "--duration",
            "2s",
        ])
        .json(&json)
        .ok(Duration::from_secs(60));
    assert!(text(&out.stdout).contains("records sent"));
    let doc = result_json(&json);
    assert_eq!(
        doc["records_sent"], 1,
        "only the first record was due within 2 s"
    );
    assert_eq!(doc["records_acked"], 1);
}

/// A broker that dies for good does not hold a run with a `--duration` past it: what is in flight
/// gets a bounded grace (not the 120 s delivery timeout), and is then counted failed with the reason.
#[test]
fn duration_holds_when_the_broker_dies() {
    let mut broker = TestBroker::start();
    let dir = TempDir::new("dead-broker");
    let json = dir.path().join("dead.json");
    let mut child = spawn_until(
        &[
            "produce",
            "--bootstrap-server",
            &broker.addr,
            "--throughput",
            "2000",
            "--duration",
            "4s",
            "--reporting-interval",
            "500",
            "--json",
            json.to_str().unwrap(),
        ],
        "records sent",
    );
    broker.kill();
    // Well under the 120 s delivery timeout: only a hang fails.
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert!(!status.success(), "records failed");
    let doc = result_json(&json);
    let sent = doc["records_sent"].as_u64().unwrap();
    let failed = doc["records_failed"].as_u64().unwrap();
    assert_eq!(sent, doc["records_acked"].as_u64().unwrap() + failed);
    assert!(failed > 0, "{doc}");
}

#[test]
fn secrets_given_as_properties_never_appear_in_output() {
    let out = run(
        &["produce", "-X", "sasl.password=hunter2"],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(!text(&out.stderr).contains("hunter2"));
    assert!(!text(&out.stdout).contains("hunter2"));
}

/// Start a long throttled produce (1 000 000 records at 20 000/s: about 50 s) against the embedded
/// broker and return once records flow (the first progress line): the child, the broker's pid (from
/// kbench's own announcement on stderr) and the rest of stderr.
fn start_long_run(
    json: &std::path::Path,
) -> (
    std::process::Child,
    i32,
    BufReader<std::process::ChildStderr>,
) {
    let mut child = kbench()
        .args([
            "produce",
            "--num-records",
            "1000000",
            "--throughput",
            "20000",
            "--reporting-interval",
            "500",
            "-X",
            "delivery.timeout.ms=5000",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let pid: i32 = line
        .rsplit("child process ")
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no broker pid in {line:?}"));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut progress = String::new();
    while !progress.contains("records sent") {
        progress.clear();
        assert!(
            stdout.read_line(&mut progress).unwrap() > 0,
            "kbench ended before its first progress line"
        );
    }
    // Keep draining stdout so that kbench never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (child, pid, stderr)
}

/// Start kbench and return once a stdout line contains `marker`; the rest of stdout is drained so
/// that kbench never blocks on a full pipe. Stderr is discarded.
fn spawn_until(args: &[&str], marker: &str) -> std::process::Child {
    let mut child = kbench()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains(marker) {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "kbench ended before a line with {marker:?}"
        );
    }
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    child
}

fn wait_with_limit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("kbench did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The broker process ends (no orphan): a generous limit, only a hang fails.
fn assert_gone_soon(pid: i32) {
    wait_until(
        &format!("broker {pid} ending"),
        Duration::from_secs(30),
        || !alive(pid),
    );
}

fn alive(pid: i32) -> bool {
    // A zombie is not alive: read its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
        .unwrap_or(false)
}

#[test]
fn killed_embedded_broker_ends_the_run_with_every_record_accounted_for() {
    let dir = TempDir::new("kill");
    let json = dir.path().join("killed.json");
    let (mut child, broker_pid, mut stderr) = start_long_run(&json);
    unsafe { libc::kill(broker_pid, libc::SIGKILL) };
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(!status.success(), "a killed broker is a failed run");
    assert!(rest.contains("embedded broker exited"), "{rest}");
    assert!(!rest.contains("panicked"), "{rest}");
    let doc = result_json(&json);
    let sent = doc["records_sent"].as_u64().unwrap();
    let acked = doc["records_acked"].as_u64().unwrap();
    let failed = doc["records_failed"].as_u64().unwrap();
    assert!(sent > 0 && sent < 1_000_000, "stopped mid-run: {sent}");
    assert_eq!(sent, acked + failed, "sent = acked + failed");
    assert!(doc["aborted"].as_str().unwrap().contains("embedded broker"));
}

#[test]
fn interrupt_stops_the_run_and_the_embedded_broker() {
    let dir = TempDir::new("int");
    let json = dir.path().join("interrupted.json");
    let (mut child, broker_pid, _stderr) = start_long_run(&json);
    assert!(alive(broker_pid));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130));
    let doc = result_json(&json);
    assert_eq!(
        doc["records_sent"].as_u64().unwrap(),
        doc["records_acked"].as_u64().unwrap() + doc["records_failed"].as_u64().unwrap()
    );
    assert_gone_soon(broker_pid);
}

#[test]
fn killed_kbench_takes_its_embedded_broker_with_it() {
    let dir = TempDir::new("sigkill");
    let (mut child, broker_pid, _stderr) = start_long_run(&dir.path().join("x.json"));
    child.kill().unwrap();
    let _ = child.wait();
    assert_gone_soon(broker_pid);
}

/// Thousands of producers connect in a start-up of their own, before any sends (connected one by one
/// under load, 3 000 took two minutes past a 2 s duration): the result counts the start-up apart, the
/// measured phase lasts the duration asked for, and the whole run ends within the test's minute.
/// (That they start *together* is not checked here: no figure in the result records it.)
#[test]
fn thousands_of_producers_connect_in_a_start_up_of_their_own_and_the_run_ends_in_time() {
    let dir = TempDir::new("fleet");
    let json = dir.path().join("fleet.json");
    let out = Cmd::new("e2e")
        .args(&["--producers", "3000", "--duration", "2s"])
        .json(&json)
        .run(Duration::from_secs(60));
    assert_ne!(out.status.code(), Some(101), "{}", text(&out.stderr));
    let doc = result_json(&json);
    let n = |f: &str| doc[f].as_u64().unwrap_or_else(|| panic!("{f} in {doc}"));
    assert_eq!(
        n("records_produced"),
        n("records_acked") + n("records_failed")
    );
    let startup = doc["startup_s"].as_f64().unwrap_or_else(|| panic!("{doc}"));
    assert!(startup > 0.0, "{doc}");
    let measured = doc["duration_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{doc}"));
    assert!(
        measured >= 1.9,
        "the measured phase lasts the 2 s asked for: {doc}"
    );
    assert!(text(&out.stdout).contains("start-up"));
}

/// SIGINT ends a run of thousands of producers promptly, whether it lands while they connect or
/// while they send, with every record accounted for.
#[test]
fn interrupt_ends_a_run_of_thousands_of_producers() {
    let dir = TempDir::new("fleet-int");
    let json = dir.path().join("fleet.json");
    let mut child = spawn_until(
        &[
            "e2e",
            "--producers",
            "3000",
            "--duration",
            "10m",
            "--json",
            json.to_str().unwrap(),
        ],
        "kbench e2e:",
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // Only a hang fails: the duration is 10 minutes.
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert!(
        matches!(status.code(), Some(130) | Some(1)),
        "interrupted, or records failed: {status:?}"
    );
    if json.exists() {
        let doc = result_json(&json);
        let n = |f: &str| doc[f].as_u64().unwrap();
        assert_eq!(
            n("records_produced"),
            n("records_acked") + n("records_failed")
        );
    }
}

/// A "broker" whose ApiVersions answer claims 2^31 − 1 API entries in a few bytes: kbench says the
/// response could not be decoded and exits 1 — it is not aborted by an allocation of that many
/// entries (kafka-protocol allocates by the count it reads; kbench's allocator reserves such
/// capacities lazily, kbench_wire::alloc).
#[test]
fn a_response_claiming_billions_of_entries_is_an_error_not_an_abort() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut s) = stream else { return };
            let mut size = [0u8; 4];
            if s.read_exact(&mut size).is_err() {
                continue;
            }
            let mut req = vec![0u8; i32::from_be_bytes(size) as usize];
            if s.read_exact(&mut req).is_err() {
                continue;
            }
            // Request header: api key (2), version (2), correlation id (4).
            let version = i16::from_be_bytes([req[2], req[3]]);
            let mut body = req[4..8].to_vec(); // correlation id; ApiVersions answers header v0
            body.extend_from_slice(&0i16.to_be_bytes()); // error_code
            if version >= 3 {
                body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // compact array: 2^31 − 1
            } else {
                body.extend_from_slice(&i32::MAX.to_be_bytes());
            }
            let mut frame = (body.len() as i32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            let _ = s.write_all(&frame);
        }
    });
    let out = Cmd::new("produce")
        .args(&["--bootstrap-server", &addr, "--num-records", "10"])
        .run(Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&addr), "{err}");
    assert!(!err.contains("memory allocation"), "{err}");
}

/// Ctrl-C while e2e's consumer joins its group (the upstream Tansu binary holds a JoinGroup for
/// half the session timeout: 23 s) is the user's stop: exit 130, as consume exits there, never 1.
#[test]
fn interrupt_during_the_group_join_exits_130() {
    let broker = TestBroker::standalone();
    let mut child = spawn_until(
        &[
            "e2e",
            "--bootstrap-server",
            &broker.addr,
            "--topic",
            "join-interrupted",
            "--duration",
            "10s",
        ],
        "kbench e2e:",
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// One SIGTERM or one SIGINT ends every long-running kbench process cleanly, exit 0, as a container
/// runtime, Kubernetes and systemd (one SIGTERM, then SIGKILL) and a user (one Ctrl-C) expect:
/// `kbench broker` plain and with SASL after serving an authenticated client (each once needed a
/// second signal, and the SASL one survived four), `kbench agent` and `kbench serve` idle (a run
/// they hold is stopped and written first: serve's `stopping_the_server_writes_the_active_run_first`).
/// The limit only catches a hang; a second signal is never sent.
#[test]
fn one_sigterm_or_sigint_ends_the_broker_the_agent_and_the_server() {
    fn ends_on_one(child: &mut std::process::Child, signal: i32, what: &str) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = wait_with_limit(child, Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "{what} after signal {signal}");
    }
    let mut plain = TestBroker::embedded_with(&[]);
    Cmd::new("produce")
        .args(&["--bootstrap-server", &plain.addr, "--num-records", "1000"])
        .topic("one-signal")
        .ok(Duration::from_secs(60));
    ends_on_one(plain.child(), libc::SIGTERM, "kbench broker");
    let mut sasl = TestBroker::embedded_with(&["--sasl-user", "u:secret-one-signal"]);
    let mut cmd = Cmd::new("produce")
        .args(&["--bootstrap-server", &sasl.addr, "--num-records", "1000"])
        .topic("one-signal");
    for p in [
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=SCRAM-SHA-256",
        "sasl.username=u",
        "sasl.password=secret-one-signal",
    ] {
        cmd = cmd.arg("-X").arg(p);
    }
    cmd.ok(Duration::from_secs(60));
    ends_on_one(sasl.child(), libc::SIGINT, "kbench broker --sasl-user");
    let dir = TempDir::new("one-signal");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut agent = kbench()
        .args([
            "agent",
            "--listen",
            &addr,
            "--results-dir",
            &dir.file("agent"),
        ])
        .env_remove("KBENCH_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn kbench agent");
    wait_until("the agent listens", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    ends_on_one(&mut agent, libc::SIGTERM, "kbench agent");
    let (mut server, _) = start_serve(&["--results-dir", &dir.file("serve")], &[]);
    ends_on_one(&mut server, libc::SIGINT, "kbench serve");
}

/// A listener that takes connections and never answers: the kernel completes the handshake, the
/// bytes sent are never read. Held open for the rest of the test binary's life.
fn silent_socket() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(64).collect();
        std::thread::sleep(Duration::from_secs(3600));
        drop(held);
    });
    addr
}

/// A bootstrap list whose first address takes the connection and never answers: the next is tried
/// once socket.connection.setup.timeout.ms has passed (librdkafka delivered this in 0.1 s; kbench
/// gave up with "no answer within 12 s"), the address passed over is named, and librdkafka reads
/// every record back.
#[test]
fn a_bootstrap_server_that_never_answers_is_passed_over_for_the_next() {
    let silent = silent_socket();
    let broker = TestBroker::start();
    let out = Cmd::new("produce")
        .args(&[
            "--bootstrap-server",
            &format!("{silent},{}", broker.addr),
            "--num-records",
            "1000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "-X",
            "socket.connection.setup.timeout.ms=1000",
        ])
        .topic("bootstrap-walk")
        .run(Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("bootstrap server {silent} skipped"))
            && err.contains("socket.connection.setup.timeout.ms"),
        "{err}"
    );
    // The warning, written to a pipe, carries no terminal colour codes.
    assert!(!err.contains('\u{1b}'), "{err:?}");
    let read = crate::librdkafka::read(
        &broker.addr,
        "bootstrap-walk",
        1,
        1000,
        Duration::from_millis(300),
        Duration::from_secs(60),
    );
    assert_eq!(read.len(), 1000);
}

/// Against an address that never answers, the error gives the time the setting names (2 s was
/// said as "4 s") and names the setting.
#[test]
fn a_silent_broker_is_given_up_on_within_the_connection_setup_timeout_it_names() {
    let silent = silent_socket();
    let out = Cmd::new("produce")
        .args(&[
            "--bootstrap-server",
            &silent,
            "--num-records",
            "10",
            "-X",
            "socket.connection.setup.timeout.ms=1500",
        ])
        .run(Duration::from_secs(60));
    assert_clean_failure(&out, &silent);
    let err = text(&out.stderr);
    assert!(
        err.contains("within 1500 ms (socket.connection.setup.timeout.ms)"),
        "{err}"
    );
}

/// The first SIGTERM ends e2e and e2e-latency while they connect (to a broker that never answers,
/// with a setup timeout of a minute): at once, exit 130 as an interrupt before the load (they waited
/// out ApiVersions' 30 s request timeout first).
#[test]
fn sigterm_while_connecting_ends_e2e_and_e2e_latency_at_once() {
    let silent = silent_socket();
    for command in ["e2e", "e2e-latency"] {
        let mut args = vec![
            command,
            "--bootstrap-server",
            &silent,
            "--topic",
            "never-reached",
            "-X",
            "socket.connection.setup.timeout.ms=60000",
        ];
        if command == "e2e-latency" {
            args.extend([
                "--num-records",
                "10",
                "--producer-acks",
                "1",
                "--record-size",
                "100",
            ]);
        }
        let mut child = kbench()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait_with_limit(&mut child, Duration::from_secs(10));
        assert_eq!(status.code(), Some(130), "{command}: {status:?}");
    }
}

/// A result path that cannot be written says why (for /proc/version, "No such file or directory"
/// alone: what failed is the file kbench makes beside it), and a count past u64 says its bound.
#[test]
fn a_path_that_cannot_be_written_and_a_count_too_large_say_why() {
    let out = run(
        &["produce", "--json", "/proc/version"],
        Duration::from_secs(30),
    );
    assert_clean_failure(
        &out,
        "--json /proc/version: cannot write there: no file can be made in /proc",
    );
    let out = run(
        &["produce", "--num-records", "18446744073709551616"],
        Duration::from_secs(30),
    );
    assert_clean_failure(&out, "too large (at most 18446744073709551615)");
}

/// `-X enable.idempotence=true` against a broker that serves no InitProducerId (librdkafka's mock
/// with the API turned off): the error names the property the user gave, not a flag that does not
/// exist (`--enable-idempotence`).
#[test]
fn a_property_refused_by_the_broker_is_named_as_given() {
    let mock = crate::mock::Mock::new(1);
    mock.cluster
        .apiversion(rdkafka::types::RDKafkaApiKey::InitProducerId, None, None)
        .unwrap();
    mock.topic("no-idempotence", 1);
    let out = Cmd::new("produce")
        .args(&[
            "--bootstrap-server",
            &mock.bootstrap,
            "--num-records",
            "10",
            "-X",
            "enable.idempotence=true",
        ])
        .topic("no-idempotence")
        .run(Duration::from_secs(60));
    assert_clean_failure(&out, "enable.idempotence: ");
    assert!(
        !text(&out.stderr).contains("--enable-idempotence"),
        "{}",
        text(&out.stderr)
    );
}

/// A consume whose broker dies times out with errors behind it, exits 1, and says so in one line
/// (it printed kafka-consumer-perf-test's time-out warning, as after a clean time-out, and nothing
/// about why it failed).
#[test]
fn a_consume_whose_broker_died_says_why_it_failed() {
    let mut broker = TestBroker::start();
    let out = Cmd::on("produce", &broker)
        .args(&["--num-records", "1000"])
        .topic("dies-under-consume")
        .run(Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = TempDir::new("consume-broker-dies");
    let err_path = dir.path().join("stderr");
    let mut child = kbench()
        .args([
            "consume",
            "--bootstrap-server",
            &broker.addr,
            "--topic",
            "dies-under-consume",
            "--messages",
            "100000000",
            "--timeout",
            "3000",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    broker.kill();
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("kbench: the run failed: "), "{err}");
}
