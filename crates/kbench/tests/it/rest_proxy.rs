//! The REST Proxy driver against the REST Proxy test double (tests/it/common/rest_proxy_double.rs),
//! which forwards to a real embedded broker: counts are real.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Cmd, TestBroker, n, result_json, run, text};
use crate::rest_proxy_double::{Faults, RestProxyDouble};
use serde_json::Value;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kbench-rest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `kbench e2e --via rest-proxy` with the given extra flags; the exit code, stderr and the result.
fn e2e(
    double: &RestProxyDouble,
    name: &str,
    extra: &[&str],
) -> (Option<i32>, String, Option<Value>) {
    let dir = tmp(name);
    let json = dir.join("r.json");
    let mut args = vec![
        "e2e",
        "--via",
        "rest-proxy",
        "--rest-url",
        &double.url,
        "--topic",
        name,
        "--reporting-interval",
        "0s",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args, Duration::from_secs(90));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc = json.exists().then(|| result_json(&json));
    let _ = std::fs::remove_dir_all(dir);
    (out.status.code(), stderr, doc)
}

fn reconciles(doc: &Value) {
    assert_eq!(
        n(doc, "records_produced"),
        n(doc, "records_acked") + n(doc, "records_failed"),
        "{doc}"
    );
    assert_eq!(n(doc, "records_consumed"), n(doc, "records_acked"), "{doc}");
    assert_eq!(n(doc, "records_lost"), 0);
    assert_eq!(n(doc, "records_duplicated"), 0);
}

#[test]
fn avro_through_v2_with_schema_registration_counts_every_record() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(&broker.addr, Faults::default());
    let (code, stderr, doc) = e2e(
        &double,
        "rest-avro",
        &[
            "--producers",
            "2",
            "--duration",
            "3s",
            "--batch-interval",
            "20ms",
            "--messages-per-batch",
            "1..4",
            "--payload-size",
            "100..1000",
            "--schema-registry",
            &double.url,
            "--commit",
            "sync",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let doc = doc.unwrap();
    reconciles(&doc);
    let acked = n(&doc, "records_acked");
    assert!(acked > 100, "{doc}");
    let seen = double.seen();
    // Real counts: what kbench says was acknowledged is what the double wrote to the broker.
    assert_eq!(seen.records_written.load(Ordering::Relaxed), acked);
    assert_eq!(seen.records_served.load(Ordering::Relaxed), acked);
    assert_eq!(
        *seen.schemas_registered.lock().unwrap(),
        vec!["rest-avro-value".to_string()]
    );
    // One instance, deleted at the end; commits with explicit offsets only.
    assert_eq!(seen.instances_created.load(Ordering::Relaxed), 1);
    assert_eq!(seen.instances_deleted.load(Ordering::Relaxed), 1);
    assert_eq!(double.live_instances(), 0);
    assert!(seen.commits.load(Ordering::Relaxed) > 0);
    assert_eq!(seen.empty_commits.load(Ordering::Relaxed), 0);
    let last = seen.last_commit.lock().unwrap().clone();
    assert_eq!(last, vec![("rest-avro".to_string(), 0, acked as i64)]);
    let rest = &doc["rest_proxy"];
    assert_eq!(rest["format"], "avro");
    assert_eq!(rest["api"], "v2");
    assert_eq!(rest["instances_created"], 1);
    assert!(rest["time_to_first_record_ms"].as_f64().unwrap() > 0.0);
    assert!(rest["records_per_get"]["count"].as_u64().unwrap() > 0);
    assert!(doc["clock"].as_str().unwrap().contains("occurred_at"));
    assert_eq!(doc["whole_trip"]["count"].as_u64(), Some(acked));
    // The seed schema was already registered (id 7): registration answers with its id.
    assert_eq!(rest["value_schema_id"], 7);
}

/// `--rest-format protobuf` and `jsonschema`: the seed's record registered in that schema format
/// (schemaType PROTOBUF, JSON), each value sent as JSON and encoded by the proxy with the id —
/// every record read back and counted, through v2 and v3.
#[test]
fn protobuf_and_json_schema_formats_register_the_seed_record_and_count_every_record() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(&broker.addr, Faults::default());
    for (format, api) in [("protobuf", "v2"), ("jsonschema", "v3")] {
        let name = format!("rest-{format}");
        let (code, stderr, doc) = e2e(
            &double,
            &name,
            &[
                "--rest-format",
                format,
                "--rest-api",
                api,
                "--duration",
                "2s",
                "--batch-interval",
                "20ms",
                "--messages-per-batch",
                "1..3",
                "--schema-registry",
                &double.url,
            ],
        );
        let doc = doc.unwrap();
        assert_eq!(code, Some(0), "{format}: {stderr} {doc}");
        reconciles(&doc);
        assert!(n(&doc, "records_acked") > 20, "{doc}");
        assert_eq!(doc["rest_proxy"]["format"], format);
        assert!(doc["rest_proxy"]["value_schema_id"].as_i64().unwrap() > 7);
        assert!(
            double
                .seen()
                .schemas_registered
                .lock()
                .unwrap()
                .contains(&format!("{name}-value"))
        );
    }
    // Without an id or a registry: one error, before any load.
    let (code, stderr, _) = e2e(
        &double,
        "rest-protobuf-no-id",
        &["--rest-format", "protobuf", "--duration", "1s"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("value schema id"), "{stderr}");
}

#[test]
fn v3_single_and_streaming_in_json_and_binary() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(&broker.addr, Faults::default());
    for (api, format) in [("v3", "json"), ("v3-stream", "binary"), ("v2", "binary")] {
        let name = format!("rest-{api}-{format}");
        let (code, stderr, doc) = e2e(
            &double,
            &name,
            &[
                "--rest-api",
                api,
                "--rest-format",
                format,
                "--duration",
                "2s",
                "--batch-interval",
                "20ms",
                "--messages-per-batch",
                "3",
            ],
        );
        assert_eq!(code, Some(0), "{api} {format}: {stderr}");
        let doc = doc.unwrap();
        reconciles(&doc);
        assert!(n(&doc, "records_acked") > 30, "{doc}");
        assert_eq!(doc["rest_proxy"]["api"], api);
        if api == "v3" {
            // One HTTP request per record.
            assert_eq!(n(&doc, "produce_requests"), n(&doc, "records_acked"));
        } else {
            assert_eq!(n(&doc, "produce_requests") * 3, n(&doc, "records_produced"));
        }
    }
    assert!(double.seen().v3_requests.load(Ordering::Relaxed) > 0);

    // Asynchronous commits, every 500 ms, with explicit offsets.
    let before = double.seen().commits.load(Ordering::Relaxed);
    let (code, stderr, doc) = e2e(
        &double,
        "rest-async-commit",
        &[
            "--rest-format",
            "json",
            "--duration",
            "2s",
            "--batch-interval",
            "20ms",
            "--commit",
            "500ms",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let doc = doc.unwrap();
    reconciles(&doc);
    let commits = double.seen().commits.load(Ordering::Relaxed) - before;
    assert_eq!(commits, n(&doc, "commits"));
    assert!(
        (2..=8).contains(&commits),
        "{commits} commits in 2 s at 500 ms"
    );
    assert_eq!(double.seen().empty_commits.load(Ordering::Relaxed), 0);
}

#[test]
fn per_record_errors_in_a_200_are_failed_records() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(
        &broker.addr,
        Faults {
            record_error_every: Some(7),
            ..Faults::default()
        },
    );
    let (code, _, doc) = e2e(
        &double,
        "rest-errors",
        &[
            "--duration",
            "2s",
            "--batch-interval",
            "10ms",
            "--messages-per-batch",
            "4",
            "--rest-format",
            "json",
        ],
    );
    assert_eq!(code, Some(1), "failed records make exit 1");
    let doc = doc.unwrap();
    reconciles(&doc);
    let refused = double.seen().records_refused.load(Ordering::Relaxed);
    assert!(refused > 0);
    assert_eq!(n(&doc, "records_failed"), refused);
    let errors = doc["errors"].as_object().unwrap();
    assert!(errors.keys().any(|k| k.contains("50002")), "{errors:?}");
}

#[test]
fn throttles_are_backed_off_and_counted_and_a_dropped_connection_fails_its_records() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(
        &broker.addr,
        Faults {
            throttle_next: 3,
            ..Faults::default()
        },
    );
    let (code, stderr, doc) = e2e(
        &double,
        "rest-429",
        &[
            "--duration",
            "2s",
            "--batch-interval",
            "20ms",
            "--rest-format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let doc = doc.unwrap();
    reconciles(&doc);
    assert_eq!(doc["rest_proxy"]["throttled_429"], 3);
    assert_eq!(n(&doc, "records_failed"), 0);

    double.set_faults(Faults {
        drop_next: 1,
        ..Faults::default()
    });
    let (code, _, doc) = e2e(
        &double,
        "rest-drop",
        &[
            "--duration",
            "2s",
            "--batch-interval",
            "20ms",
            "--messages-per-batch",
            "2",
            "--rest-format",
            "json",
        ],
    );
    assert_eq!(code, Some(1));
    let doc = doc.unwrap();
    reconciles(&doc);
    assert_eq!(double.seen().dropped.load(Ordering::Relaxed), 1);
    assert_eq!(n(&doc, "records_failed"), 2, "{doc}");
}

#[test]
fn an_expired_instance_is_counted_recreated_and_deleted() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(
        &broker.addr,
        Faults {
            expire_next_poll: true,
            ..Faults::default()
        },
    );
    let (code, stderr, doc) = e2e(
        &double,
        "rest-40403",
        &[
            "--duration",
            "2s",
            "--batch-interval",
            "20ms",
            "--rest-format",
            "json",
        ],
    );
    // The new instance is positioned where the old one got to: the records produced while no
    // instance existed are read, none lost.
    let doc = doc.unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(doc["rest_proxy"]["instances_expired_40403"], 1, "{doc}");
    assert_eq!(doc["rest_proxy"]["instances_created"], 2);
    assert_eq!(double.seen().instances_deleted.load(Ordering::Relaxed), 1);
    assert_eq!(double.live_instances(), 0);
    reconciles(&doc);
    assert_eq!(n(&doc, "records_late"), 0, "{doc}");
}

/// A real proxy's v2 instance joins its group lazily, on the first polls, and with
/// `auto.offset.reset=latest` would start at the end *as of the join*: records produced meanwhile
/// would never be read. kbench waits for the assignment and seeks to the offsets it took before the
/// first record was sent. The seed's shape, with a join that takes 2 s.
#[test]
fn records_produced_while_the_instance_joins_are_consumed() {
    let broker = TestBroker::start();
    for karapace in [false, true] {
        let double = RestProxyDouble::start(
            &broker.addr,
            Faults {
                karapace,
                join_after: Duration::from_secs(2),
                ..Faults::default()
            },
        );
        let topic = format!("rest-join-{karapace}");
        let (code, stderr, doc) = e2e(
            &double,
            &topic,
            &[
                "--producers",
                "4",
                "--batch-interval",
                "100ms",
                "--messages-per-batch",
                "4",
                "--payload-size",
                "1000",
                "--duration",
                "3s",
                "--rest-format",
                "json",
                "--commit",
                "10s",
            ],
        );
        assert_eq!(code, Some(0), "karapace {karapace}: {stderr}");
        let doc = doc.unwrap();
        reconciles(&doc);
        assert_eq!(n(&doc, "records_late"), 0, "{doc}");
        let seen = double.seen();
        assert!(
            seen.joining_polls.load(Ordering::Relaxed) > 0,
            "the join was lazy"
        );
        assert_eq!(seen.seeks.load(Ordering::Relaxed), 1, "positioned once");
        assert_eq!(
            seen.records_served.load(Ordering::Relaxed),
            n(&doc, "records_acked")
        );
    }
}

#[test]
fn karapace_ways_are_handled() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(
        &broker.addr,
        Faults {
            karapace: true,
            join_after: Duration::from_millis(800),
            ..Faults::default()
        },
    );
    // No v3: said clearly, before any load.
    let (code, stderr, doc) = e2e(
        &double,
        "rest-k3",
        &[
            "--rest-api",
            "v3",
            "--rest-format",
            "json",
            "--duration",
            "1s",
        ],
    );
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("this proxy has no v3 produce API"),
        "{stderr}"
    );
    assert!(doc.is_none());
    assert_eq!(double.seen().produce_requests.load(Ordering::Relaxed), 0);

    // v2: offsets without error_code are successes; [] while joining; time to first record apart.
    let (code, stderr, doc) = e2e(
        &double,
        "rest-k2",
        &[
            "--duration",
            "3s",
            "--batch-interval",
            "20ms",
            "--rest-format",
            "json",
            "--consume-wait",
            "100ms",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let doc = doc.unwrap();
    reconciles(&doc);
    assert_eq!(n(&doc, "records_failed"), 0);
    assert!(doc["rest_proxy"]["empty_gets"].as_u64().unwrap() >= 1);
    assert!(
        doc["rest_proxy"]["time_to_first_record_ms"]
            .as_f64()
            .unwrap()
            >= 800.0,
        "{doc}"
    );
    assert_eq!(double.seen().empty_commits.load(Ordering::Relaxed), 0);
}

#[test]
fn basic_auth_is_sent_and_a_wrong_url_is_one_clear_error() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(
        &broker.addr,
        Faults {
            basic_auth: Some(("kbench".into(), "s3cret-never-shown".into())),
            ..Faults::default()
        },
    );
    // Without credentials: 401 before any load.
    let (code, stderr, _) = e2e(
        &double,
        "rest-auth0",
        &["--duration", "1s", "--rest-format", "json"],
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("401"), "{stderr}");
    // With them (the password from the environment only).
    let dir = tmp("rest-auth");
    let json = dir.join("r.json");
    let out = common::kbench()
        .args([
            "e2e",
            "--via",
            "rest-proxy",
            "--rest-url",
            &double.url,
            "--rest-user",
            "kbench",
            "--rest-format",
            "json",
            "--duration",
            "1s",
            "--batch-interval",
            "20ms",
            "--topic",
            "rest-auth",
            "--json",
            json.to_str().unwrap(),
        ])
        .env("KBENCH_REST_PASSWORD", "s3cret-never-shown")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(!written.contains("s3cret-never-shown"));
    assert!(!text(&out.stdout).contains("s3cret-never-shown"));
    assert!(!text(&out.stderr).contains("s3cret-never-shown"));
    let _ = std::fs::remove_dir_all(dir);

    // Nothing listening.
    let out = Cmd::new("e2e")
        .args(&[
            "--via",
            "rest-proxy",
            "--rest-url",
            "http://127.0.0.1:1",
            "--rest-format",
            "json",
            "--duration",
            "1s",
        ])
        .run(Duration::from_secs(60));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    // Not a URL.
    let out = run(
        &["e2e", "--via", "rest-proxy", "--rest-url", "localhost:8082"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--rest-url"));
}

#[test]
fn https_with_a_private_ca() {
    let broker = TestBroker::start();
    let (double, ca_pem) = RestProxyDouble::start_tls(&broker.addr, Faults::default());
    assert!(double.url.starts_with("https://"));
    let dir = tmp("rest-tls-ca");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    // Trusted: the whole run over TLS.
    let (code, stderr, doc) = e2e(
        &double,
        "rest-tls",
        &[
            "--rest-ca-cert",
            ca.to_str().unwrap(),
            "--rest-format",
            "json",
            "--duration",
            "2s",
            "--batch-interval",
            "20ms",
            "--schema-registry",
            &double.url,
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let doc = doc.unwrap();
    reconciles(&doc);
    assert!(n(&doc, "records_acked") > 20);
    // Not trusted: one clear error before any load.
    let before = double.seen().produce_requests.load(Ordering::Relaxed);
    let (code, stderr, doc) = e2e(
        &double,
        "rest-tls-untrusted",
        &["--rest-format", "json", "--duration", "1s"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(doc.is_none());
    assert!(stderr.contains(&double.url), "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
    assert_eq!(
        double.seen().produce_requests.load(Ordering::Relaxed),
        before
    );
    // An unreadable CA file names the flag.
    let (code, stderr, _) = e2e(
        &double,
        "rest-tls-nofile",
        &["--rest-ca-cert", "/nonexistent/ca.pem"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--rest-ca-cert"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// CPU time of this process (the test double's threads; the broker is another process), µs.
fn own_cpu_us() -> u64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(u.ru_utime) + us(u.ru_stime)
}

/// The benchmark in docs/PERFORMANCE.md: how many requests and records kbench drives through the
/// double, with each side's CPU per request. Not a test (it asserts only that the runs were clean):
///
///   cargo test --release -p kbench --test it -- --ignored --nocapture rest_ceiling
#[test]
#[ignore]
fn rest_ceiling() {
    let broker = TestBroker::start();
    let double = RestProxyDouble::start(&broker.addr, Faults::default());
    let reps = 3;
    println!(
        "| records per request | requests/s | records/s | kbench CPU µs/request | double CPU µs/request | failed |"
    );
    println!("|---|---|---|---|---|---|");
    /// requests/s, records/s, kbench CPU µs/request, double CPU µs/request, failed records.
    type Row = (f64, f64, f64, f64, u64);
    for per_request in ["1", "10"] {
        let mut rows: Vec<Row> = Vec::new();
        for rep in 0..reps {
            let cpu0 = own_cpu_us();
            let (code, stderr, doc) = e2e(
                &double,
                &format!("rest-ceiling-{per_request}-{rep}"),
                &[
                    "--mode",
                    "producers",
                    "--producers",
                    "8",
                    "--batch-interval",
                    "0ms",
                    "--messages-per-batch",
                    per_request,
                    "--payload-size",
                    "1024",
                    "--rest-format",
                    "json",
                    "--duration",
                    "10s",
                ],
            );
            let double_cpu = own_cpu_us() - cpu0;
            assert_eq!(code, Some(0), "{stderr}");
            let doc = doc.unwrap();
            let secs = doc["duration_s"].as_f64().unwrap();
            let requests = n(&doc, "produce_requests") as f64;
            let kbench_cpu = (doc["client_cpu_user_s"].as_f64().unwrap()
                + doc["client_cpu_sys_s"].as_f64().unwrap())
                * 1e6;
            rows.push((
                requests / secs,
                n(&doc, "records_acked") as f64 / secs,
                kbench_cpu / requests,
                double_cpu as f64 / requests,
                n(&doc, "records_failed"),
            ));
        }
        let med = |f: &dyn Fn(&Row) -> f64| {
            let mut v: Vec<f64> = rows.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            format!("{:.0} ({:.0}–{:.0})", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        println!(
            "| {per_request} | {} | {} | {} | {} | {} |",
            med(&|r| r.0),
            med(&|r| r.1),
            med(&|r| r.2),
            med(&|r| r.3),
            rows.iter().map(|r| r.4).sum::<u64>()
        );
    }
}
