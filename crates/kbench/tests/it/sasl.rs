//! SASL on every Kafka connection, against real parts: the embedded broker with `--sasl-user`
//! (Tansu's SASL stack; SCRAM-SHA-256/512, PLAIN, OAUTHBEARER), stunnel in front for SASL_SSL, and
//! librdkafka as an independent client reading what kbench wrote with the same credentials.

use crate::common;
use crate::librdkafka;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::tls::{Pki, TlsBroker};
use crate::common::{Cmd, TempDir, TestBroker, result_json, runtime, text, wait_until};
use kbench_client::{Cluster, ClusterConfig, ConnectionSettings};
use kbench_wire::Pins;

const PASSWORD: &str = "pw-sasl-never-shown-3e9d";
const TOKEN: &str = "bearer-never-shown-88af";

fn sasl_broker() -> TestBroker {
    let user = format!("alice:{PASSWORD}");
    TestBroker::embedded_with(&["--sasl-user", &user, "--sasl-oauth-token", TOKEN])
}

fn produce(addr: &str, topic: &str, props: &[String], json: &Path) -> std::process::Output {
    let mut cmd = Cmd::new("produce")
        .args(&["--bootstrap-server", addr, "--num-records", "5000"])
        .topic(topic)
        .json(json);
    for p in props {
        cmd = cmd.arg("-X").arg(p);
    }
    cmd.run(Duration::from_secs(120))
}

fn sasl(mechanism: &str, user: &str, password: &str) -> Vec<String> {
    vec![
        "security.protocol=SASL_PLAINTEXT".into(),
        format!("sasl.mechanism={mechanism}"),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ]
}

/// Records on the broker for `topic`, read by kbench's client authenticated as `props` say.
fn count_on_broker(addr: &str, topic: &str, props: &[String]) -> usize {
    let mut settings = ConnectionSettings::default();
    for p in props {
        let (k, v) = p.split_once('=').unwrap();
        settings.apply("-X", k, v).unwrap();
    }
    settings.finish().unwrap();
    let config = ClusterConfig {
        client_id: "sasl-reader".into(),
        ..settings.cluster_config(vec![addr.to_string()], Pins::default())
    };
    runtime().block_on(async {
        let cluster = Cluster::connect(config).await.expect("connect with SASL");
        common::fetch_all(&cluster, topic, 0).await.len()
    })
}

#[test]
fn every_mechanism_produces_and_the_records_read_back() {
    let broker = sasl_broker();
    let dir = TempDir::new("sasl-mechanisms");
    let token_file = dir.file("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("SCRAM-SHA-256", sasl("SCRAM-SHA-256", "alice", PASSWORD)),
        // Java's names: a JAAS line instead of sasl.username / sasl.password.
        (
            "SCRAM-SHA-512",
            vec![
                "security.protocol=SASL_PLAINTEXT".into(),
                "sasl.mechanism=SCRAM-SHA-512".into(),
                format!(
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"{PASSWORD}\";"
                ),
            ],
        ),
        ("PLAIN", sasl("PLAIN", "alice", PASSWORD)),
        (
            "OAUTHBEARER",
            vec![
                "security.protocol=SASL_PLAINTEXT".into(),
                "sasl.mechanism=OAUTHBEARER".into(),
                format!("sasl.oauthbearer.token.endpoint.url=file://{token_file}"),
            ],
        ),
    ];
    for (mechanism, props) in &cases {
        let topic = format!("sasl-{}", mechanism.to_lowercase());
        let json = dir.path().join(format!("{topic}.json"));
        let out = produce(&broker.addr, &topic, props, &json);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{mechanism}: {}",
            text(&out.stderr)
        );
        let doc = result_json(&json);
        assert_eq!(doc["records_acked"], 5000, "{mechanism}: {doc}");
        assert_eq!(doc["target"]["security_protocol"], "SASL_PLAINTEXT");
        assert_eq!(doc["target"]["sasl_mechanism"], *mechanism);
        let written = std::fs::read_to_string(&json).unwrap();
        let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
        for shown in [&written, &printed] {
            assert!(
                !shown.contains(PASSWORD) && !shown.contains(TOKEN),
                "{shown}"
            );
        }
        assert_eq!(
            count_on_broker(
                &broker.addr,
                &topic,
                &sasl("SCRAM-SHA-256", "alice", PASSWORD)
            ),
            5000,
            "{mechanism}"
        );
    }
    // librdkafka, an independent client, reads what kbench wrote with the same PLAIN credentials.
    let read = librdkafka::read_with(
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", PASSWORD),
        ],
        &broker.addr,
        "sasl-plain",
        1,
        5000,
        Duration::from_millis(500),
        Duration::from_secs(60),
    );
    assert_eq!(read.len(), 5000);
}

/// Run a produce that must be refused: non-zero, with no load started (the helper's limit catches
/// a hang), naming what `needles` say and never a password or token.
fn refused(addr: &str, props: &[String], needles: &[&str]) {
    let dir = TempDir::new("sasl-refused");
    let out = produce(addr, "refused", props, &dir.path().join("r.json"));
    let stderr = text(&out.stderr);
    let all = format!("{}{stderr}", text(&out.stdout));
    assert_ne!(out.status.code(), Some(0), "{all}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} missing in: {stderr}");
    }
    assert!(!all.contains("records sent"), "load ran: {all}");
    assert!(
        !all.contains(PASSWORD) && !all.contains(TOKEN) && !all.contains("wrong-pw-5"),
        "{all}"
    );
}

#[test]
fn bad_credentials_and_mechanisms_are_refused_before_any_load() {
    let broker = sasl_broker();
    refused(
        &broker.addr,
        &sasl("SCRAM-SHA-256", "alice", "wrong-pw-5"),
        &["SCRAM-SHA-256", "alice", "wrong password", &broker.addr],
    );
    refused(
        &broker.addr,
        &sasl("SCRAM-SHA-512", "mallory", PASSWORD),
        &["SCRAM-SHA-512", "mallory", "no such user"],
    );
    refused(
        &broker.addr,
        &sasl("PLAIN", "alice", "wrong-pw-5"),
        &["PLAIN", "alice", "refused"],
    );
    let dir = TempDir::new("sasl-token");
    let bad = dir.file("bad-token");
    std::fs::write(&bad, "not-the-token").unwrap();
    refused(
        &broker.addr,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=OAUTHBEARER".into(),
            format!("sasl.oauthbearer.token.file={bad}"),
        ],
        &["OAUTHBEARER", "invalid_token"],
    );
    // Refused by kbench itself: no Kerberos, a missing password, SASL settings without SASL.
    refused(
        &broker.addr,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=GSSAPI".into(),
        ],
        &["sasl.mechanism", "GSSAPI"],
    );
    refused(
        &broker.addr,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=SCRAM-SHA-256".into(),
            "sasl.username=alice".into(),
        ],
        &["sasl.password", "alice"],
    );
    refused(
        &broker.addr,
        &["sasl.mechanism=PLAIN".into()],
        &["security.protocol", "SASL_PLAINTEXT"],
    );
    // No SASL towards a broker that wants it: the connection is closed, and the error says why.
    refused(&broker.addr, &[], &["security.protocol=SASL_PLAINTEXT"]);

    // SASL towards a broker without it: named, not hung.
    let plain = TestBroker::start();
    refused(
        &plain.addr,
        &sasl("SCRAM-SHA-256", "alice", PASSWORD),
        &["SCRAM-SHA-256", "alice", "SASL enabled"],
    );
}

#[test]
fn sasl_ssl_with_the_properties_file_a_java_client_uses() {
    let dir = TempDir::new("sasl-ssl");
    let pki = Pki::new(dir.path());
    let user = format!("alice:{PASSWORD}");
    let broker = TlsBroker::start_with(dir.path(), &pki.server, None, &["--sasl-user", &user]);
    let config = dir.path().join("client.properties");
    std::fs::write(
        &config,
        format!(
            "# as a Java client has it\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"alice\" \\\n    password=\"{PASSWORD}\";\nssl.truststore.location={}\nssl.truststore.type=PEM\n",
            pki.ca.display()
        ),
    )
    .unwrap();
    let json = dir.path().join("r.json");
    let out = Cmd::new("produce")
        .args(&["--bootstrap-server", &broker.addr, "--num-records", "5000"])
        .args(&["--producer.config", config.to_str().unwrap()])
        .topic("sasl-ssl")
        .json(&json)
        .run(Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 5000, "{doc}");
    assert_eq!(doc["target"]["security_protocol"], "SASL_SSL");
    assert_eq!(doc["target"]["sasl_mechanism"], "SCRAM-SHA-512");
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(!written.contains(PASSWORD), "{written}");

    // e2e over SASL_SSL: producers and the group consumer authenticate; nothing lost.
    let json = dir.path().join("e2e.json");
    let out = Cmd::new("e2e")
        .args(&["--bootstrap-server", &broker.addr, "--duration", "3s"])
        .args(&["--command-config", config.to_str().unwrap()])
        .topic("sasl-e2e")
        .json(&json)
        .run(Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["records_lost"], 0, "{doc}");
    assert!(doc["records_consumed"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["target"]["security_protocol"], "SASL_SSL");
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(!written.contains(PASSWORD), "{written}");
}

#[test]
fn sasl_credentials_are_secrets_in_debug_output() {
    let mut s = ConnectionSettings::default();
    s.apply("-X", "security.protocol", "SASL_PLAINTEXT")
        .unwrap();
    s.apply("-X", "sasl.mechanism", "PLAIN").unwrap();
    s.apply("-X", "sasl.username", "alice").unwrap();
    s.apply("-X", "sasl.password", PASSWORD).unwrap();
    s.finish().unwrap();
    let config = s.cluster_config(vec!["127.0.0.1:1".into()], Pins::default());
    let shown = format!(
        "{s:?} {config:?} {:?}",
        Arc::clone(s.sasl.as_ref().unwrap())
    );
    assert!(!shown.contains(PASSWORD), "{shown}");
}

/// A raw Kafka connection: one request, one response, no re-authentication of its own.
struct Raw {
    stream: std::net::TcpStream,
    correlation_id: i32,
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            stream,
            correlation_id: 0,
        }
    }

    fn call<Req: kafka_protocol::protocol::Encodable, Resp: kafka_protocol::protocol::Decodable>(
        &mut self,
        api: kbench_wire::ApiKey,
        version: i16,
        body: &Req,
    ) -> std::io::Result<Resp> {
        use std::io::{Read, Write};
        self.correlation_id += 1;
        let mut out = bytes::BytesMut::new();
        let client = kafka_protocol::protocol::StrBytes::from_static_str("raw");
        kbench_wire::encode_request(&mut out, api, version, self.correlation_id, &client, body)
            .unwrap();
        self.stream.write_all(&out)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame)?;
        Ok(kbench_wire::decode_response(api, version, self.correlation_id, frame.into()).unwrap())
    }

    fn metadata(&mut self) -> std::io::Result<()> {
        self.call::<_, kafka_protocol::messages::MetadataResponse>(
            kbench_wire::ApiKey::Metadata,
            9,
            &kafka_protocol::messages::MetadataRequest::default(),
        )
        .map(|_| ())
    }

    fn plain(
        &mut self,
        user: &str,
        password: &str,
    ) -> kafka_protocol::messages::SaslAuthenticateResponse {
        use kafka_protocol::messages::*;
        let h: SaslHandshakeResponse = self
            .call(
                kbench_wire::ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default()
                    .with_mechanism(kafka_protocol::protocol::StrBytes::from_static_str("PLAIN")),
            )
            .unwrap();
        assert_eq!(h.error_code, 0);
        self.call(
            kbench_wire::ApiKey::SaslAuthenticate,
            1,
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(format!("\0{user}\0{password}").into_bytes().into()),
        )
        .unwrap()
    }
}

/// The embedded broker enforces the session lifetime it gives (KIP-368) and accepts
/// re-authentication on the same connection; kbench re-authenticates through a long run.
#[test]
fn sessions_end_at_their_lifetime_unless_the_client_reauthenticates() {
    let user = format!("alice:{PASSWORD}");
    let dir = TempDir::new("sasl-reauth");
    let log = dir.path().join("broker.log");
    let broker = TestBroker::embedded_logging(
        &[
            "--sasl-user",
            &user,
            "--sasl-session-lifetime-ms",
            "1000",
            "--log-reauthentication",
        ],
        &log,
    );
    let reauthentications = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("re-authentication accepted")
            .count()
    };
    // A client that does not re-authenticate loses its connection after the lifetime.
    let mut raw = Raw::connect(&broker.addr);
    let auth = raw.plain("alice", PASSWORD);
    assert_eq!(auth.error_code, 0);
    assert_eq!(auth.session_lifetime_ms, 1000);
    let authenticated = Instant::now();
    raw.metadata().expect("within the lifetime");
    // Asked again and again until the broker ends the session; it must not end it early.
    wait_until(
        "the broker ends the session at its lifetime",
        Duration::from_secs(30),
        || raw.metadata().is_err(),
    );
    // Timed from the answer's arrival, later than the broker's own start of the lifetime: a loaded
    // machine may take a few hundred ms to deliver it, so only an end well before the lifetime fails.
    let lasted = authenticated.elapsed();
    assert!(
        lasted >= Duration::from_millis(500),
        "the session ended after {lasted:?} of its 1000 ms"
    );
    // One that does carries on past several lifetimes (re-authenticating every 250 ms for 2 s); a
    // wrong password on re-authentication is refused.
    let mut raw = Raw::connect(&broker.addr);
    assert_eq!(raw.plain("alice", PASSWORD).error_code, 0);
    let began = Instant::now();
    let mut rounds = 0;
    while began.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(raw.plain("alice", PASSWORD).error_code, 0, "round {rounds}");
        rounds += 1;
        raw.metadata().expect("re-authenticated");
    }
    assert_ne!(raw.plain("alice", "wrong-pw-5").error_code, 0);
    assert_eq!(reauthentications(), rounds);

    // kbench over 4 s with a 1 s lifetime: it re-authenticates on its connection (not merely
    // reconnecting when closed), and nothing fails.
    let json = dir.path().join("r.json");
    let mut props = sasl("SCRAM-SHA-256", "alice", PASSWORD);
    props.push("linger.ms=1".into());
    let mut cmd = Cmd::new("produce")
        .args(&["--bootstrap-server", &broker.addr, "--num-records", "8000"])
        .args(&["--throughput", "2000"])
        .topic("reauth")
        .json(&json);
    for p in &props {
        cmd = cmd.arg("-X").arg(p);
    }
    let out = cmd.run(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 8000, "{doc}");
    assert_eq!(doc["records_failed"], 0, "{doc}");
    let seen = reauthentications() - rounds;
    assert!(
        seen >= 3,
        "{seen} re-authentications in a 4 s run with a 1 s lifetime"
    );
}
