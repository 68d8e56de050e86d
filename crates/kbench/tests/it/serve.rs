//! `kbench serve` over real HTTP, driving real runs against a real broker.

use crate::common;
use crate::rest_proxy_double;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::{TestBroker, runtime, wait_until};
use serde_json::{Value, json};

const PASSWORD: &str = "pw-never-shown-7f3a9c";
const TOKEN: &str = "token-never-shown-51b2";

/// A `kbench serve` child on a free loopback port, killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(extra: &[&str], env_token: Option<&str>) -> Server {
        let envs: Vec<(&str, &str)> = env_token.map(|t| ("KBENCH_TOKEN", t)).into_iter().collect();
        let (child, base) = common::start_serve(extra, &envs);
        Server { child, base }
    }
}

impl Server {
    /// A server whose cluster is never reachable (127.0.0.1:1): every run against it fails or is
    /// refused before any load.
    fn unreachable_cluster(results: &Path) -> Server {
        Server::start(
            &[
                "--bootstrap-server",
                "127.0.0.1:1",
                "--results-dir",
                results.to_str().unwrap(),
            ],
            None,
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn results_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kbench-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The seed's example payload, with type KAFKA_NATIVE and a password that must never come back.
fn seed_payload() -> Value {
    json!({
        "type": "KAFKA_NATIVE",
        "minBatchIntervalMs": 100,
        "maxBatchIntervalMs": 100,
        "minMessagePayloadSizeBytes": 180000,
        "maxMessagePayloadSizeBytes": 180000,
        "parallelProducers": 4,
        "gatherLatencies": true,
        "kafkaRestUri": "XXX",
        "kafkaUserName": "XXX",
        "kafkaUserPassword": PASSWORD,
        "kafkaTopic": "latency-test-topic-1",
        "valueSchemaId": "7",
        "kafkaConsumerGroup": "consumer-group-b0d0b161-a981-47bf-9cd5-28b43cc5f0c3",
        "kafkaConsumerId": "consumer-310efdb8-ac48-41cb-a3b9-50b6b8d7c37e",
        "minMessagesPerBatch": 4,
        "maxMessagesPerBatch": 4,
        "consumeTimeoutMs": 10,
        "consumeMaxBytesMs": 5000000,
        "commitInterval": "PT10S"
    })
}

struct Http {
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
    token: Option<String>,
}

impl Http {
    fn new() -> Http {
        Http {
            client: reqwest::Client::new(),
            rt: runtime(),
            token: None,
        }
    }

    /// Send a request; the status and the raw body text.
    fn send(&self, method: &str, url: &str, body: Option<&str>) -> (u16, String) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .client
            .request(method, url)
            .timeout(Duration::from_secs(60));
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        self.rt.block_on(async {
            let r = req.send().await.expect("HTTP request");
            let status = r.status().as_u16();
            (status, r.text().await.expect("body"))
        })
    }

    fn json(&self, method: &str, url: &str, body: Option<&Value>) -> (u16, Value, String) {
        let body = body.map(|b| b.to_string());
        let (status, text) = self.send(method, url, body.as_deref());
        let v = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, v, text)
    }
}

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

fn is_iso_duration(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("PT") else {
        return false;
    };
    let mut rest = rest;
    for unit in ['H', 'M'] {
        if let Some((n, r)) = rest.split_once(unit)
            && !n.is_empty()
            && n.chars().all(|c| c.is_ascii_digit())
        {
            rest = r;
        }
    }
    match rest.strip_suffix('S') {
        Some(n) => {
            !n.is_empty()
                && n.parse::<f64>().is_ok()
                && n.chars().all(|c| c.is_ascii_digit() || c == '.')
        }
        None => rest.is_empty() && s != "PT",
    }
}

fn is_iso_instant(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() >= 20
        && s.ends_with('Z')
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
}

fn check_stats(name: &str, stats: &Value, expected_samples: u64) {
    let keys: Vec<&String> = stats.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "totalLatenciesGathered",
            "minRequestDurationMs",
            "maxRequestDurationMs",
            "avgRequestDurationMs",
            "medianRequestTimeMs",
            "percentilesMs"
        ],
        "{name}"
    );
    assert_eq!(
        stats["totalLatenciesGathered"].as_u64(),
        Some(expected_samples),
        "{name}"
    );
    let p = &stats["percentilesMs"];
    let ladder: Vec<f64> = ["50.0", "80.0", "90.0", "95.0", "98.0", "99.0"]
        .iter()
        .map(|k| ms(&p[*k]))
        .collect();
    assert!(
        ladder.windows(2).all(|w| w[0] <= w[1]),
        "{name}: {ladder:?}"
    );
    let (min, max, median) = (
        ms(&stats["minRequestDurationMs"]),
        ms(&stats["maxRequestDurationMs"]),
        ms(&stats["medianRequestTimeMs"]),
    );
    assert!(
        min <= median && median <= max && ladder[5] <= max,
        "{name}: {stats}"
    );
    assert!(min > 0.0, "{name}: {stats}");
}

/// The seed payload against kbench's embedded broker (named by the server's --bootstrap-server) and
/// against the upstream Tansu binary (named by the payload's kafkaBootstrapServers).
#[test]
fn the_seed_payload_runs_and_stops_with_the_seed_stats() {
    for kind in common::BROKERS {
        seed_payload_runs_on(kind);
    }
}

fn seed_payload_runs_on(kind: common::BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = results_dir(&format!("seed-{kind:?}"));
    let mut payload = seed_payload();
    let mut flags = vec!["--results-dir", dir.to_str().unwrap()];
    match kind {
        common::BrokerKind::Embedded => flags.extend(["--bootstrap-server", &broker.addr]),
        common::BrokerKind::Standalone => {
            payload["kafkaBootstrapServers"] = json!(broker.addr);
        }
    }
    let server = Server::start(&flags, None);
    let http = Http::new();
    let url = format!("{}/pub-sub-demo", server.base);
    let mut seen = Vec::new();

    let (status, body, raw) = http.json("POST", &url, Some(&payload));
    assert_eq!(status, 200, "{raw}");
    seen.push(raw);
    let id = body["id"].as_str().unwrap().to_string();

    // A second start while the first runs is refused, not a silent kill.
    let (status, _, raw) = http.json("POST", &url, Some(&payload));
    assert_eq!(status, 409, "{raw}");
    seen.push(raw);

    // Running until at least 100 records (25 batches of 4) were produced.
    let produced_so_far = |http: &Http| {
        let (_, live, _) = http.json("GET", &url, None);
        live["stats"]["totalProducedMessages"].as_u64().unwrap_or(0)
    };
    wait_until("100 records produced", Duration::from_secs(60), || {
        produced_so_far(&http) >= 100
    });
    let (status, live, raw) = http.json("GET", &url, None);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(live["status"], "running");
    assert_eq!(live["config"]["kafkaTopic"], "latency-test-topic-1");
    assert!(live["config"].get("kafkaUserPassword").is_none());
    assert!(live["stats"]["totalProducedMessages"].as_u64().unwrap() > 0);
    seen.push(raw);

    let (status, stats, raw) = http.json("DELETE", &url, None);
    assert_eq!(status, 200, "{raw}");
    seen.push(raw.clone());
    let keys: Vec<&String> = stats.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "totalProducedMessages",
            "totalConsumedMessages",
            "totalFailedMessages",
            "producerStats",
            "wholeTripStats",
            "taskStartTime",
            "taskKillTime",
            "taskDuration"
        ]
    );
    let produced = stats["totalProducedMessages"].as_u64().unwrap();
    let consumed = stats["totalConsumedMessages"].as_u64().unwrap();
    let failed = stats["totalFailedMessages"].as_u64().unwrap();
    // 4 producers × 4 records every 100 ms for about 3 s.
    assert!(produced >= 100, "{raw}");
    assert_eq!(produced % 4, 0, "whole batches of 4: {raw}");
    assert_eq!(failed, 0, "{raw}");
    // Drained: every acknowledged (= produced − failed) record was consumed.
    assert_eq!(consumed, produced - failed, "{raw}");
    // One duration per produce request (4 records each), one whole trip per record.
    check_stats("producerStats", &stats["producerStats"], produced / 4);
    check_stats("wholeTripStats", &stats["wholeTripStats"], consumed);
    for k in ["taskStartTime", "taskKillTime"] {
        let s = stats[k].as_str().unwrap();
        assert!(is_iso_instant(s), "{k}: {s}");
    }
    let d = stats["taskDuration"].as_str().unwrap();
    assert!(is_iso_duration(d), "{d}");

    // The result was written before the answer, with the kbench result document inside.
    let file = dir.join(format!("{id}.json"));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("result file")).unwrap();
    assert_eq!(doc["kind"], "e2e");
    assert_eq!(doc["records_lost"], 0, "{kind:?}: {doc}");
    assert_eq!(doc["records_late"], 0, "{kind:?}: {doc}");
    assert_eq!(doc["records_duplicated"], 0);
    assert_eq!(
        doc["pub_sub_demo"]["totalProducedMessages"].as_u64(),
        Some(produced)
    );
    let (_, _, runs) = http.json("GET", &format!("{}/v1/runs/{id}", server.base), None);
    seen.push(runs);
    seen.push(std::fs::read_to_string(&file).unwrap());
    for text in &seen {
        assert!(!text.contains(PASSWORD), "password leaked: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_input_gets_its_status_and_names_its_field() {
    let dir = results_dir("bad");
    // A bootstrap that is never contacted: every request here is refused before any load.
    let server = Server::unreachable_cluster(&dir);
    let http = Http::new();
    let url = format!("{}/pub-sub-demo", server.base);

    let (status, body) = http.send("POST", &url, Some("{\"type\": "));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("malformed JSON"), "{body}");

    let with = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut p = seed_payload();
        f(p.as_object_mut().unwrap());
        p
    };
    let cases: Vec<(Value, &str, u16)> = vec![
        (
            with(&|p| {
                p.remove("kafkaTopic");
            }),
            "kafkaTopic",
            400,
        ),
        (
            with(&|p| {
                p.insert("parallelProducers".into(), json!("four"));
            }),
            "parallelProducers",
            400,
        ),
        (
            with(&|p| {
                p.insert("minMessagesPerBatch".into(), json!(-1));
            }),
            "minMessagesPerBatch",
            400,
        ),
        (
            with(&|p| {
                p.insert("minBatchIntervalMs".into(), json!(500));
            }),
            "minBatchIntervalMs",
            400,
        ),
        (
            with(&|p| {
                p.insert("minMessagePayloadSizeBytes".into(), json!(200000));
            }),
            "minMessagePayloadSizeBytes",
            400,
        ),
        (
            with(&|p| {
                p.insert("commitInterval".into(), json!("10 seconds"));
            }),
            "commitInterval",
            400,
        ),
        (
            with(&|p| {
                p.insert("runDuration".into(), json!("P1M"));
            }),
            "runDuration",
            400,
        ),
        (
            with(&|p| {
                p.insert("type".into(), json!("KAFKA_SOMETHING"));
            }),
            "type",
            400,
        ),
        (
            with(&|p| {
                p.insert("kafkaBootstrapServers".into(), json!("nohost"));
            }),
            "kafkaBootstrapServers",
            400,
        ),
        (
            with(&|p| {
                p.insert("type".into(), json!("KAFKA_REST_PROXY"));
            }),
            "kafkaRestUri",
            400,
        ),
        (
            with(&|p| {
                p.insert("type".into(), json!("KAFKA_REST_PROXY"));
                p.insert("kafkaRestUri".into(), json!("http://127.0.0.1:1"));
                p.insert("valueSchemaId".into(), json!("seven"));
            }),
            "valueSchemaId",
            400,
        ),
    ];
    for (payload, field, want) in cases {
        let (status, body, raw) = http.json("POST", &url, Some(&payload));
        assert_eq!(status, want, "{field}: {raw}");
        assert!(raw.contains(field), "{field}: {raw}");
        if want == 400 {
            assert_eq!(body["field"], field, "{raw}");
        }
        assert!(!raw.contains(PASSWORD), "{raw}");
    }

    // Nothing ran, so there is nothing to stop or show.
    assert_eq!(http.send("DELETE", &url, None).0, 404);
    assert_eq!(http.send("GET", &url, None).0, 404);

    // A valid payload against a broker that is not there: an error to the request, naming it.
    for _ in 0..2 {
        let (status, _, raw) = http.json("POST", &url, Some(&seed_payload()));
        assert_eq!(status, 502, "{raw}");
        assert!(raw.contains("127.0.0.1:1"), "{raw}");
        assert!(!raw.contains(PASSWORD), "{raw}");
    }
    let (status, live, raw) = http.json("GET", &url, None);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(live["status"], "failed", "{raw}");

    // /v1: unknown fields are an error; unknown ids are 404.
    let runs = format!("{}/v1/runs", server.base);
    let (status, body, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "e2e", "producerz": 2})),
    );
    assert_eq!(status, 400, "{raw}");
    assert_eq!(body["field"], "producerz", "{raw}");
    let (status, body, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "e2e", "producers": -2})),
    );
    assert_eq!(status, 400, "{raw}");
    assert_eq!(body["field"], "producers", "{raw}");
    let (status, body, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "e2e", "batch_interval": "9..1ms"})),
    );
    assert_eq!(status, 400, "{raw}");
    assert_eq!(body["field"], "batch_interval", "{raw}");
    // Hostile values: each a 400 naming its field; nothing starts.
    for (body, field) in [
        (
            json!({"workload": "produce", "num_records": 1, "record_size": 99_999_999_999u64}),
            "record_size",
        ),
        (
            json!({"workload": "produce", "record_size": 2_000_000_000u64}),
            "record_size",
        ),
        (
            json!({"workload": "produce", "throughput": 1e-20}),
            "throughput",
        ),
        (
            json!({"workload": "produce", "throughput": 5e-324}),
            "throughput",
        ),
        (
            json!({"workload": "produce", "partitions": 1_000_000}),
            "partitions",
        ),
        (json!({"workload": "produce", "slo": "p99<"}), "slo"),
        (
            json!({"workload": "e2e", "slo": "fetch_latency.p99<1ms"}),
            "slo",
        ),
        (json!({"workload": "produce", "slo": 5}), "slo"),
        (json!({"workload": "produce", "keys": "hash"}), "keys"),
        (
            json!({"workload": "e2e", "duration": "18446744073709551615s"}),
            "duration",
        ),
        (json!({"workload": "e2e", "producers": 10_001}), "producers"),
        (
            json!({"workload": "e2e", "consume_wait": "99999999999999999s"}),
            "consume_wait",
        ),
        (json!({"workload": "e2e", "topic": "a b"}), "topic"),
    ] {
        let (status, answer, raw) = http.json("POST", &runs, Some(&body));
        assert_eq!(status, 400, "{body}: {raw}");
        assert_eq!(answer["field"], field, "{body}: {raw}");
    }
    // Secrets in every form stay out of every answer: URL userinfo, a numeric password quoted by a
    // parse error, credentials in a bootstrap address.
    const SECRET: &str = "sekrit-31337";
    let mut with_url_secret = seed_payload();
    with_url_secret["type"] = json!("KAFKA_REST_PROXY");
    with_url_secret["kafkaRestUri"] = json!(format!("http://me:{SECRET}@127.0.0.1:1"));
    with_url_secret["restFormat"] = json!("json");
    let (status, _, raw) = http.json("POST", &url, Some(&with_url_secret));
    assert_eq!(status, 502, "{raw}");
    assert!(!raw.contains(SECRET), "{raw}");
    let (_, _, raw) = http.json("GET", &url, None);
    assert!(!raw.contains(SECRET), "{raw}");
    let mut numeric = seed_payload();
    numeric["kafkaUserPassword"] = json!(31337_31337u64);
    let (status, answer, raw) = http.json("POST", &url, Some(&numeric));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(answer["field"], "kafkaUserPassword", "{raw}");
    assert!(!raw.contains("3133731337"), "{raw}");
    let mut creds = seed_payload();
    creds["kafkaBootstrapServers"] = json!(format!("me:{SECRET}@127.0.0.1:9092"));
    let (status, answer, raw) = http.json("POST", &url, Some(&creds));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(answer["field"], "kafkaBootstrapServers", "{raw}");
    assert!(!raw.contains(SECRET), "{raw}");
    let mut huge = seed_payload();
    huge["minMessagePayloadSizeBytes"] = json!(60_000_000);
    huge["maxMessagePayloadSizeBytes"] = json!(60_000_000);
    huge["minMessagesPerBatch"] = json!(1_000_000);
    huge["maxMessagesPerBatch"] = json!(1_000_000);
    let (status, answer, raw) = http.json("POST", &url, Some(&huge));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(answer["field"], "maxMessagePayloadSizeBytes", "{raw}");
    let (status, body, raw) = http.json("POST", &runs, Some(&json!({"producers": 2})));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(body["field"], "workload", "{raw}");
    let (status, body, raw) = http.json("POST", &runs, Some(&json!({"workload": "sweep"})));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(body["field"], "workload", "{raw}");
    assert_eq!(http.send("GET", &format!("{runs}/nope"), None).0, 404);
    assert_eq!(http.send("DELETE", &format!("{runs}/nope"), None).0, 404);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_token_is_required_when_set() {
    let dir = results_dir("token");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], Some(TOKEN));
    let mut http = Http::new();
    let url = format!("{}/v1/runs", server.base);
    let (status, body) = http.send("GET", &url, None);
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains(TOKEN));
    http.token = Some("wrong".into());
    assert_eq!(http.send("GET", &url, None).0, 401);
    http.token = Some(TOKEN.into());
    let (status, body) = http.send("GET", &url, None);
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains(TOKEN));
    let (status, doc, _) = http.json("GET", &format!("{}/v1/openapi.json", server.base), None);
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.0.3");
    assert!(doc["paths"]["/v1/runs/{id}"]["delete"].is_object());
    assert!(doc["security"].is_array(), "a token: security declared");
    // The scheme's name is case-insensitive (RFC 7235).
    let (status, _) = raw_request(
        &server.base,
        &format!(
            "GET /v1/runs HTTP/1.1\r\nHost: {}\r\nAuthorization: bearer {TOKEN}\r\nConnection: close\r\n\r\n",
            host_of(&server.base)
        ),
    );
    assert_eq!(status, 200);
    let _ = std::fs::remove_dir_all(dir);

    // The token from a file (a flag is visible in `ps`).
    let dir = results_dir("token-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let server = Server::start(
        &[
            "--results-dir",
            dir.to_str().unwrap(),
            "--token-file",
            file.to_str().unwrap(),
        ],
        None,
    );
    let mut http = Http::new();
    let url = format!("{}/v1/runs", server.base);
    assert_eq!(http.send("GET", &url, None).0, 401);
    http.token = Some(TOKEN.into());
    assert_eq!(http.send("GET", &url, None).0, 200);
    let _ = std::fs::remove_dir_all(dir);
}

/// `host:port` of a base URL.
fn host_of(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// Send raw bytes and read the answer's status (0 when the connection was closed unanswered) and
/// text.
fn raw_request(base: &str, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host_of(base)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

/// No web page can start a run: a form or text/plain POST (which a browser sends cross-site without
/// asking) is refused, any request with an Origin not allowed is refused, and a Host that is not this
/// server's (DNS rebinding) is refused. OpenAPI declares no security without a token.
#[test]
fn web_pages_cannot_reach_the_api() {
    let dir = results_dir("guard");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let host = host_of(&server.base);
    let body = seed_payload().to_string();
    let post = |headers: &str| {
        raw_request(
            &server.base,
            &format!(
                "POST /pub-sub-demo HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let (status, answer) = post(&format!(
        "Host: {host}\r\nContent-Type: text/plain\r\nOrigin: http://evil.example\r\n"
    ));
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("cross-origin"), "{answer}");
    let (status, answer) = post(&format!("Host: {host}\r\nContent-Type: text/plain\r\n"));
    assert_eq!(status, 415, "{answer}");
    let (status, answer) = post("Host: evil.example\r\nContent-Type: application/json\r\n");
    assert_eq!(status, 421, "{answer}");
    assert!(answer.contains("evil.example"), "{answer}");
    // A method a route does not take is a 405, whatever the body's type.
    let (status, answer) = raw_request(
        &server.base,
        &format!(
            "POST /v1/runs/some-id HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 405, "{answer}");
    // Nothing started.
    assert_eq!(
        Http::new()
            .send("GET", &format!("{}/pub-sub-demo", server.base), None)
            .0,
        404
    );
    let (_, doc, _) = Http::new().json("GET", &format!("{}/v1/openapi.json", server.base), None);
    assert!(
        doc.get("security").is_none(),
        "no token: no security declared"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// 1 000 idle connections and a client that sends its headers a byte at a time do not keep a normal
/// request from being served; the slow client is cut off (loopback only, bounded in time).
#[test]
fn idle_and_slow_clients_do_not_deny_service() {
    use std::io::{Read, Write};
    let dir = results_dir("slowloris");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let host = host_of(&server.base);
    let idle: Vec<std::net::TcpStream> = (0..1000)
        .filter_map(|_| std::net::TcpStream::connect(&host).ok())
        .collect();
    assert!(
        idle.len() >= 900,
        "only {} idle connections opened",
        idle.len()
    );
    let mut slow = std::net::TcpStream::connect(&host).unwrap();
    slow.write_all(b"GET /v1/runs HTTP/1.1\r\nHo").unwrap();
    // A normal request is served meanwhile.
    let (status, _) = Http::new().send("GET", &format!("{}/v1/runs", server.base), None);
    assert_eq!(status, 200);
    // A body shorter than its Content-Length is given up on, with an answer.
    let (status, answer) = raw_request(
        &server.base,
        &format!(
            "POST /v1/runs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"work"
        ),
    );
    assert!(status == 408 || status == 400, "{answer}");
    // The slow client is closed, not served, and not kept.
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut rest = Vec::new();
    // Closed by the server: the end of the stream (or a reset), not this read's own time-out.
    match slow.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the slow connection was kept open: {e}"),
    }
    let text = String::from_utf8_lossy(&rest);
    assert!(!text.contains("200 OK"), "{text}");
    drop(idle);
    let _ = std::fs::remove_dir_all(dir);
}

/// 100 API clients at once, while a run fails against an unreachable cluster: every request is
/// answered with its own status (no 5xx, no dropped connection), and the server answers afterwards.
#[test]
fn a_hundred_concurrent_clients_are_answered_while_a_run_fails() {
    let dir = results_dir("hundred");
    let server = Server::unreachable_cluster(&dir);
    let http = Http::new();
    let runs = format!("{}/v1/runs", server.base);
    let (status, _, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "produce", "num_records": 1000})),
    );
    assert!(
        status == 201 || status == 202 || status == 502,
        "{status} {raw}"
    );
    let base = server.base.clone();
    let answers: Vec<(String, u16)> = http.rt.block_on(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..100 {
            let client = client.clone();
            let base = base.clone();
            tasks.spawn(async move {
                let mut got = Vec::new();
                for round in 0..5 {
                    let (what, req) = match (i + round) % 5 {
                        0 => ("list", client.get(format!("{base}/v1/runs"))),
                        1 => ("openapi", client.get(format!("{base}/v1/openapi.json"))),
                        2 => ("unknown", client.get(format!("{base}/v1/runs/no-such-run"))),
                        3 => (
                            "malformed",
                            client
                                .post(format!("{base}/v1/runs"))
                                .header("Content-Type", "application/json")
                                .body("{\"workload\": "),
                        ),
                        _ => ("metrics", client.get(format!("{base}/metrics"))),
                    };
                    let status = match req.send().await {
                        Ok(r) => {
                            let s = r.status().as_u16();
                            let _ = r.bytes().await;
                            s
                        }
                        Err(_) => 0,
                    };
                    got.push((what.to_string(), status));
                }
                got
            });
        }
        let mut all = Vec::new();
        while let Some(r) = tasks.join_next().await {
            all.extend(r.unwrap());
        }
        all
    });
    assert_eq!(answers.len(), 500);
    for (what, status) in &answers {
        let expected: &[u16] = match what.as_str() {
            "unknown" => &[404],
            "malformed" => &[400],
            _ => &[200],
        };
        assert!(expected.contains(status), "{what}: {status}");
    }
    // The run failed (or was refused) and the server still answers.
    let (status, list, _) = http.json("GET", &runs, None);
    assert_eq!(status, 200, "{list}");
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

fn wait_finished(http: &Http, url: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, run, raw) = http.json("GET", url, None);
        assert_eq!(status, 200, "{raw}");
        if run["status"] != "running" && run["status"] != "stopping" {
            return run;
        }
        assert!(Instant::now() < deadline, "run did not finish: {raw}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The embedded broker a server starts does not keep every run's records for its life: a finished
/// run's topic is deleted from it.
#[test]
fn finished_runs_leave_nothing_on_the_servers_embedded_broker() {
    let dir = results_dir("forget");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let http = Http::new();
    let runs = format!("{}/v1/runs", server.base);
    let (status, created, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "produce", "num_records": 5000, "topic": "forget-me"})),
    );
    assert_eq!(status, 201, "{raw}");
    let id = created["id"].as_str().unwrap();
    let run = wait_finished(&http, &format!("{runs}/{id}"));
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["result"]["target"]["embedded_broker"], true);
    let addr = run["result"]["target"]["bootstrap_servers"]
        .as_str()
        .unwrap()
        .to_string();
    let rt = runtime();
    let code = rt.block_on(async {
        let c = kbench_client::Cluster::connect(kbench_client::ClusterConfig::new(
            vec![addr],
            "kbench-test",
            Default::default(),
        ))
        .await
        .unwrap();
        c.metadata("forget-me").await.unwrap().0
    });
    assert_eq!(code, 3, "UNKNOWN_TOPIC_OR_PARTITION: the topic was deleted");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn v1_runs_finish_persist_and_survive_a_restart() {
    let broker = TestBroker::start();
    let dir = results_dir("v1");
    let args = [
        "--bootstrap-server",
        broker.addr.as_str(),
        "--results-dir",
        dir.to_str().unwrap(),
    ];
    let http = Http::new();
    let (e2e_id, produce_id) = {
        let server = Server::start(&args, None);
        let runs = format!("{}/v1/runs", server.base);
        let (status, created, raw) = http.json(
            "POST",
            &runs,
            Some(&json!({"workload": "e2e", "producers": 2, "duration": "2s", "batch_interval": "5..15ms", "topic": "v1-e2e", "slo": "lost==0,p99<60s"})),
        );
        assert_eq!(status, 201, "{raw}");
        let e2e_id = created["id"].as_str().unwrap().to_string();
        let run = wait_finished(&http, &format!("{runs}/{e2e_id}"));
        assert_eq!(run["status"], "finished", "{run}");
        let doc = &run["result"];
        assert_eq!(doc["kind"], "e2e");
        assert!(doc["records_acked"].as_u64().unwrap() > 0);
        assert_eq!(doc["records_consumed"], doc["records_acked"]);
        assert_eq!(doc["records_lost"], 0);
        assert_eq!(doc["slo"]["passed"], true, "{}", doc["slo"]);
        assert_eq!(doc["slo"]["checks"].as_array().unwrap().len(), 2);

        let (status, created, raw) = http.json(
            "POST",
            &runs,
            Some(&json!({"workload": "produce", "num_records": 20000, "record_size": 100, "acks": "1", "topic": "v1-produce", "keys": "round-robin:50", "slo": "records_per_sec>=1000000000000,failed==0"})),
        );
        assert_eq!(status, 201, "{raw}");
        let produce_id = created["id"].as_str().unwrap().to_string();
        let run = wait_finished(&http, &format!("{runs}/{produce_id}"));
        assert_eq!(run["status"], "finished", "{run}");
        assert_eq!(run["result"]["records_acked"], 20000);
        assert_eq!(run["result"]["settings"]["keys"], "round-robin:50");
        // An SLO missed is said in the result; the run itself finished.
        assert_eq!(
            run["result"]["slo"]["passed"], false,
            "{}",
            run["result"]["slo"]
        );
        let (status, list, _) = http.json("GET", &runs, None);
        assert_eq!(status, 200);
        assert_eq!(list["runs"].as_array().unwrap().len(), 2);
        (e2e_id, produce_id)
    };
    // A new server on the same results directory still has both.
    let server = Server::start(&args, None);
    for id in [&e2e_id, &produce_id] {
        assert!(Path::new(&dir).join(format!("{id}.json")).exists());
        let (status, run, raw) = http.json("GET", &format!("{}/v1/runs/{id}", server.base), None);
        assert_eq!(status, 200, "{raw}");
        assert_eq!(run["status"], "finished");
        assert!(run["result"]["records_acked"].as_u64().unwrap() > 0);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_seed_payload_unchanged_through_the_rest_proxy_double() {
    let broker = TestBroker::start();
    let double = rest_proxy_double::RestProxyDouble::start(
        &broker.addr,
        rest_proxy_double::Faults {
            basic_auth: Some(("XXX".into(), PASSWORD.into())),
            ..Default::default()
        },
    );
    let dir = results_dir("rest");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let http = Http::new();
    let url = format!("{}/pub-sub-demo", server.base);
    let mut payload = seed_payload();
    payload["type"] = json!("KAFKA_REST_PROXY");
    payload["kafkaRestUri"] = json!(double.url);
    let mut seen = Vec::new();
    let (status, body, raw) = http.json("POST", &url, Some(&payload));
    assert_eq!(status, 200, "{raw}");
    seen.push(raw);
    let id = body["id"].as_str().unwrap().to_string();
    wait_until("40 records produced", Duration::from_secs(60), || {
        let (_, live, _) = http.json("GET", &url, None);
        live["stats"]["totalProducedMessages"].as_u64().unwrap_or(0) >= 40
    });
    let (status, stats, raw) = http.json("DELETE", &url, None);
    assert_eq!(status, 200, "{raw}");
    seen.push(raw.clone());
    let produced = stats["totalProducedMessages"].as_u64().unwrap();
    assert!(produced >= 40, "{raw}");
    assert_eq!(stats["totalFailedMessages"], 0, "{raw}");
    assert_eq!(
        stats["totalConsumedMessages"].as_u64(),
        Some(produced),
        "{raw}"
    );
    check_stats("producerStats", &stats["producerStats"], produced / 4);
    check_stats("wholeTripStats", &stats["wholeTripStats"], produced);
    let seen_by_double = double.seen();
    assert_eq!(
        seen_by_double
            .records_written
            .load(std::sync::atomic::Ordering::Relaxed),
        produced
    );
    assert_eq!(
        seen_by_double
            .unauthorized
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(double.live_instances(), 0);
    let file = std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap();
    let doc: Value = serde_json::from_str(&file).unwrap();
    assert_eq!(doc["rest_proxy"]["value_schema_id"], 7);
    assert_eq!(doc["rest_proxy"]["format"], "avro");
    seen.push(file);
    for text in &seen {
        assert!(!text.contains(PASSWORD), "password leaked: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn stopping_the_server_writes_the_active_run_first() {
    let broker = TestBroker::start();
    let dir = results_dir("sigterm");
    let mut server = Server::start(
        &[
            "--bootstrap-server",
            &broker.addr,
            "--results-dir",
            dir.to_str().unwrap(),
        ],
        None,
    );
    let http = Http::new();
    let (status, created, raw) = http.json(
        "POST",
        &format!("{}/v1/runs", server.base),
        Some(&json!({"workload": "e2e", "batch_interval": "10ms", "topic": "sigterm"})),
    );
    assert_eq!(status, 201, "{raw}");
    let id = created["id"].as_str().unwrap().to_string();
    let run = format!("{}/v1/runs/{id}", server.base);
    wait_until("records acknowledged", Duration::from_secs(60), || {
        let (_, r, _) = http.json("GET", &run, None);
        r["live"]["records_acked"].as_u64().unwrap_or(0) > 0
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let mut status = None;
    wait_until("the server stopping", Duration::from_secs(90), || {
        status = server.child.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap())
            .unwrap();
    assert_eq!(doc["kind"], "e2e");
    assert!(doc["records_acked"].as_u64().unwrap() > 0);
    assert_eq!(doc["records_lost"], 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// Thousands of producers through the API: the start is answered, the run produces, a DELETE stops
/// it with every record accounted for, and the next run is accepted (2 000 producers once left the
/// POST unanswered for minutes and the producers running after the DELETE).
#[test]
fn thousands_of_producers_start_stop_and_leave_the_server_free() {
    let dir = results_dir("fleet");
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let http = Http::new();
    let runs = format!("{}/v1/runs", server.base);
    let (status, created, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "e2e", "producers": 2000, "topic": "fleet"})),
    );
    assert_eq!(status, 201, "{raw}");
    let url = format!("{runs}/{}", created["id"].as_str().unwrap());
    wait_until("records produced", Duration::from_secs(60), || {
        let (_, run, _) = http.json("GET", &url, None);
        run["live"]["records_produced"].as_u64().unwrap_or(0) > 0
    });
    // The API answers while the run is busy.
    assert_eq!(http.send("GET", &runs, None).0, 200);
    let (status, stopped, raw) = http.json("DELETE", &url, None);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(stopped["status"], "finished", "{raw}");
    let r = &stopped["result"];
    let n = |f: &str| r[f].as_u64().unwrap_or_else(|| panic!("{f} in {r}"));
    assert_eq!(
        n("records_produced"),
        n("records_acked") + n("records_failed")
    );
    // A finished run's live figures are frozen at its end and are the result's own.
    let live = &stopped["live"];
    for f in [
        "records_produced",
        "records_acked",
        "records_failed",
        "records_consumed",
    ] {
        assert_eq!(live[f], r[f], "live {f}: {live} vs the result");
    }
    assert_eq!(live["elapsed_s"], r["duration_s"], "{live}");
    // Nothing keeps producing: the next run starts and finishes.
    let (status, created, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "produce", "num_records": 1000, "topic": "after-fleet"})),
    );
    assert_eq!(status, 201, "{raw}");
    let run = wait_finished(
        &http,
        &format!("{runs}/{}", created["id"].as_str().unwrap()),
    );
    assert_eq!(run["status"], "finished", "{run}");
    assert_eq!(run["live"]["records_acked"], 1000, "{run}");
    assert_eq!(run["live"]["records_failed"], 0, "{run}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs through the API reach a TLS cluster: with the server's own properties (-X) for its default
/// cluster, and with a body's `properties` for a cluster the body names; a bad property is a 400
/// naming `properties`.
#[test]
fn runs_reach_a_tls_cluster_with_the_servers_or_the_bodys_properties() {
    let dir = results_dir("tls");
    let tmp = common::TempDir::new("serve-tls");
    let pki = common::tls::Pki::new(tmp.path());
    let broker = common::tls::TlsBroker::start(tmp.path(), &pki.server, None);
    let ca = format!("ssl.ca.location={}", pki.ca.display());
    let server = Server::start(
        &[
            "--results-dir",
            dir.to_str().unwrap(),
            "--bootstrap-server",
            &broker.addr,
            "-X",
            "security.protocol=SSL",
            "-X",
            &ca,
        ],
        None,
    );
    let http = Http::new();
    let runs = format!("{}/v1/runs", server.base);
    for body in [
        json!({"workload": "produce", "num_records": 2000, "topic": "tls-server"}),
        json!({"workload": "produce", "num_records": 2000, "topic": "tls-body",
               "bootstrap_servers": broker.addr,
               "properties": {"security.protocol": "SSL", "ssl.ca.location": pki.ca.to_str().unwrap()}}),
    ] {
        let (status, created, raw) = http.json("POST", &runs, Some(&body));
        assert_eq!(status, 201, "{raw}");
        let run = wait_finished(
            &http,
            &format!("{runs}/{}", created["id"].as_str().unwrap()),
        );
        assert_eq!(run["status"], "finished", "{run}");
        assert_eq!(run["result"]["records_acked"], 2000, "{run}");
        assert_eq!(run["result"]["target"]["security_protocol"], "SSL", "{run}");
    }
    // The body's own cluster without properties is plaintext: the TLS port refuses it, and the run
    // fails naming the address.
    let (status, created, raw) = http.json(
        "POST",
        &runs,
        Some(&json!({"workload": "produce", "num_records": 10, "bootstrap_servers": broker.addr})),
    );
    assert_eq!(status, 201, "{raw}");
    let run = wait_finished(
        &http,
        &format!("{runs}/{}", created["id"].as_str().unwrap()),
    );
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        run["error"].as_str().unwrap().contains(&broker.addr),
        "{run}"
    );
    for props in [
        json!({"acks": "1"}),
        json!({"ssl.truststore.location": "/x/truststore.jks"}),
        json!({"security.protocol": 7}),
    ] {
        let (status, answer, raw) = http.json(
            "POST",
            &runs,
            Some(&json!({"workload": "produce", "properties": props})),
        );
        assert_eq!(status, 400, "{raw}");
        assert_eq!(answer["field"], "properties", "{raw}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `/pub-sub-demo` KAFKA_NATIVE towards a SASL cluster: the payload's kafkaUserName /
/// kafkaUserPassword are the SASL credentials, asked for by the payload (`securityProtocol`,
/// `saslMechanism`) or by the server's own `-X`; the password never comes back.
#[test]
fn pub_sub_demo_authenticates_with_the_payloads_credentials() {
    let user = format!("alice:{PASSWORD}");
    let broker = TestBroker::embedded_with(&["--sasl-user", &user]);
    let dir = results_dir("pub-sub-sasl");
    let mut seen = Vec::new();
    let payload = |extra: Value| {
        let mut p = seed_payload();
        p["kafkaUserName"] = json!("alice");
        p["minMessagePayloadSizeBytes"] = json!(1000);
        p["maxMessagePayloadSizeBytes"] = json!(1000);
        p["kafkaTopic"] = json!("pub-sub-sasl");
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let run = |server: &Server, body: &Value, seen: &mut Vec<String>| -> Value {
        let http = Http::new();
        let url = format!("{}/pub-sub-demo", server.base);
        let (status, _, raw) = http.json("POST", &url, Some(body));
        assert_eq!(status, 200, "{raw}");
        seen.push(raw);
        wait_until("20 records produced", Duration::from_secs(60), || {
            let (_, live, raw) = http.json("GET", &url, None);
            seen.push(raw);
            live["stats"]["totalProducedMessages"].as_u64().unwrap_or(0) >= 20
        });
        let (status, stats, raw) = http.json("DELETE", &url, None);
        assert_eq!(status, 200, "{raw}");
        seen.push(raw);
        stats
    };
    // The payload asks for SASL, towards its own cluster.
    let server = Server::start(&["--results-dir", dir.to_str().unwrap()], None);
    let body = payload(json!({
        "kafkaBootstrapServers": broker.addr,
        "securityProtocol": "SASL_PLAINTEXT",
        "saslMechanism": "SCRAM-SHA-256",
    }));
    let stats = run(&server, &body, &mut seen);
    assert_eq!(stats["totalFailedMessages"], 0, "{stats}");
    assert_eq!(
        stats["totalConsumedMessages"], stats["totalProducedMessages"],
        "{stats}"
    );
    // A wrong password: the start fails (502) naming mechanism and user, not the password.
    let http = Http::new();
    let url = format!("{}/pub-sub-demo", server.base);
    let mut wrong = body.clone();
    wrong["kafkaUserPassword"] = json!("wrong-pw-pubsub");
    let (status, _, raw) = http.json("POST", &url, Some(&wrong));
    assert_eq!(status, 502, "{raw}");
    assert!(
        raw.contains("SCRAM-SHA-256") && raw.contains("alice"),
        "{raw}"
    );
    assert!(!raw.contains("wrong-pw-pubsub"), "{raw}");
    // SASL towards the server's embedded (plaintext) broker is refused, naming the field.
    let mut embedded = body.clone();
    embedded
        .as_object_mut()
        .unwrap()
        .remove("kafkaBootstrapServers");
    let (status, answer, raw) = http.json("POST", &url, Some(&embedded));
    assert_eq!(status, 400, "{raw}");
    assert_eq!(answer["field"], "securityProtocol", "{raw}");
    // A /v1 run's properties carry SASL as the CLI's -X do; the JAAS line is masked in answers.
    let runs = format!("{}/v1/runs", server.base);
    let jaas = format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"{PASSWORD}\";"
    );
    let (status, created, raw) = http.json(
        "POST",
        &runs,
        Some(
            &json!({"workload": "produce", "num_records": 2000, "topic": "v1-sasl",
            "bootstrap_servers": broker.addr,
            "properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                           "sasl.jaas.config": jaas}}),
        ),
    );
    assert_eq!(status, 201, "{raw}");
    seen.push(raw);
    let v1 = wait_finished(
        &http,
        &format!("{runs}/{}", created["id"].as_str().unwrap()),
    );
    assert_eq!(v1["status"], "finished", "{v1}");
    assert_eq!(v1["result"]["records_acked"], 2000, "{v1}");
    assert_eq!(
        v1["result"]["target"]["sasl_mechanism"], "SCRAM-SHA-512",
        "{v1}"
    );
    seen.push(v1.to_string());
    drop(server);

    // The server's own -X asks for SASL; the payload's credentials are used.
    let server = Server::start(
        &[
            "--results-dir",
            dir.to_str().unwrap(),
            "--bootstrap-server",
            &broker.addr,
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=SCRAM-SHA-512",
            "-X",
            "sasl.username=nobody",
            "-X",
            "sasl.password=not-this-one",
        ],
        None,
    );
    let stats = run(&server, &payload(json!({})), &mut seen);
    assert_eq!(stats["totalFailedMessages"], 0, "{stats}");
    let mut mechanisms = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        seen.push(text.clone());
        let doc: Value = serde_json::from_str(&text).unwrap();
        if doc["kind"] != "e2e" {
            continue;
        }
        assert_eq!(
            doc["target"]["security_protocol"], "SASL_PLAINTEXT",
            "{doc}"
        );
        mechanisms.push(
            doc["target"]["sasl_mechanism"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    mechanisms.sort();
    assert_eq!(mechanisms, ["SCRAM-SHA-256", "SCRAM-SHA-512"]);
    for text in &seen {
        assert!(!text.contains(PASSWORD), "password leaked: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
