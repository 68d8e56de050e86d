//! TLS on every Kafka connection, against real parts: the embedded broker (`kbench broker`) behind
//! stunnel, which terminates TLS with certificates from a private CA made here (rcgen). Tansu 0.6's
//! own TLS listener is not wired, so stunnel is how a TLS target runs locally (README: "A TLS
//! target on your machine").

use std::path::Path;
use std::time::Duration;

use crate::common::tls::{Pki, TlsBroker};
use crate::common::{Cmd, TempDir, result_json, text};

fn produce(addr: &str, props: &[String], json: &Path, records: &str) -> std::process::Output {
    let mut args = vec![
        "--bootstrap-server".to_string(),
        addr.to_string(),
        "--num-records".into(),
        records.into(),
        "--topic".into(),
        "tls".into(),
    ];
    for p in props {
        args.push("-X".into());
        args.push(p.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Cmd::new("produce")
        .args(&args)
        .json(json)
        .run(Duration::from_secs(120))
}

fn ssl(ca: &Path) -> Vec<String> {
    vec![
        "security.protocol=SSL".into(),
        format!("ssl.ca.location={}", ca.display()),
    ]
}

#[test]
fn produce_over_tls_with_a_private_ca_and_every_refusal_named() {
    let dir = TempDir::new("tls");
    let pki = Pki::new(dir.path());
    let broker = TlsBroker::start(dir.path(), &pki.server, None);

    // With the CA: every record acknowledged, and on the broker (read back in plaintext).
    let json = dir.path().join("ok.json");
    let out = produce(&broker.addr, &ssl(&pki.ca), &json, "20000");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert_eq!(doc["records_acked"], 20000, "{doc}");
    assert_eq!(doc["target"]["security_protocol"], "SSL", "{doc}");

    // Java's names give the same.
    let java = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.truststore.location={}", pki.ca.display()),
        "ssl.truststore.type=PEM".into(),
    ];
    let out = produce(&broker.addr, &java, &dir.path().join("java.json"), "1000");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Without the CA: refused before any load, naming the address and the reason.
    let out = produce(
        &broker.addr,
        &["security.protocol=SSL".to_string()],
        &dir.path().join("no-ca.json"),
        "1000",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains(&broker.addr) && err.contains("unknown CA"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("records sent"));

    // Plaintext to a TLS port: an error, not a hang.
    let out = produce(&broker.addr, &[], &dir.path().join("plain.json"), "1000");
    assert_ne!(out.status.code(), Some(0));

    // A JKS store is refused with the way to convert it.
    let out = produce(
        &broker.addr,
        &[
            "security.protocol=SSL".to_string(),
            "ssl.truststore.location=/etc/kafka/truststore.jks".into(),
        ],
        &dir.path().join("jks.json"),
        "1000",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("keytool"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_name_mismatch_is_refused_unless_the_check_is_turned_off() {
    let dir = TempDir::new("tls-name");
    let pki = Pki::new(dir.path());
    let broker = TlsBroker::start(dir.path(), &pki.wrong_name, None);
    let out = produce(
        &broker.addr,
        &ssl(&pki.ca),
        &dir.path().join("a.json"),
        "1000",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("name mismatch") && err.contains("127.0.0.1"),
        "{err}"
    );

    let mut off = ssl(&pki.ca);
    off.push("ssl.endpoint.identification.algorithm=".into());
    let json = dir.path().join("b.json");
    let out = produce(&broker.addr, &off, &json, "1000");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("host-name verification is off"),
        "a warning: {}",
        text(&out.stderr)
    );
    assert_eq!(result_json(&json)["records_acked"], 1000);
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let dir = TempDir::new("mtls");
    let pki = Pki::new(dir.path());
    let broker = TlsBroker::start(dir.path(), &pki.server, Some(&pki.ca));
    let out = produce(
        &broker.addr,
        &ssl(&pki.ca),
        &dir.path().join("a.json"),
        "1000",
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains(&broker.addr),
        "{}",
        text(&out.stderr)
    );

    // librdkafka's names, from a properties file (--producer.config, as the Kafka tools take it).
    let config = dir.path().join("client.properties");
    std::fs::write(
        &config,
        format!(
            "# as a librdkafka or Java client would have it\nsecurity.protocol=SSL\nssl.ca.location={}\nssl.certificate.location={}\nssl.key.location={}\n",
            pki.ca.display(),
            pki.client.0.display(),
            pki.client.1.display()
        ),
    )
    .unwrap();
    let json = dir.path().join("b.json");
    let out = Cmd::new("produce")
        .args(&[
            "--bootstrap-server",
            &broker.addr,
            "--num-records",
            "5000",
            "--producer.config",
            config.to_str().unwrap(),
        ])
        .json(&json)
        .run(Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(result_json(&json)["records_acked"], 5000);
}

#[test]
fn e2e_over_tls_loses_nothing() {
    let dir = TempDir::new("tls-e2e");
    let pki = Pki::new(dir.path());
    let broker = TlsBroker::start(dir.path(), &pki.server, None);
    let json = dir.path().join("e2e.json");
    let out = Cmd::new("e2e")
        .args(&[
            "--bootstrap-server",
            &broker.addr,
            "--producers",
            "4",
            "--batch-interval",
            "20ms",
            "--duration",
            "3s",
            "-X",
            "security.protocol=SSL",
            "-X",
            &format!("ssl.ca.location={}", pki.ca.display()),
        ])
        .json(&json)
        .run(Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = result_json(&json);
    assert!(doc["records_acked"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["records_lost"], 0, "{doc}");
    assert_eq!(doc["records_acked"], doc["records_consumed"], "{doc}");
}

/// The tier-1 sweep over TLS, its cells in their own processes too (the properties are passed on).
#[test]
fn sweep_cells_run_over_tls_also_isolated() {
    let dir = TempDir::new("tls-sweep");
    let pki = Pki::new(dir.path());
    let broker = TlsBroker::start(dir.path(), &pki.server, None);
    let ca = format!("ssl.ca.location={}", pki.ca.display());
    for isolate in [false, true] {
        let json = dir.path().join(format!("sweep-{isolate}.json"));
        let mut args = vec![
            "--quick",
            "--bootstrap-server",
            &broker.addr,
            "--produce-versions",
            "9",
            "--fetch-versions",
            "12",
            "--seed",
            "1",
            "-X",
            "security.protocol=SSL",
            "-X",
            &ca,
        ];
        if isolate {
            args.push("--isolate");
        }
        let out = Cmd::new("sweep")
            .args(&args)
            .json(&json)
            .run(Duration::from_secs(300));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let doc = result_json(&json);
        let cells = doc["cells"].as_array().unwrap();
        assert!(!cells.is_empty(), "{doc}");
        for c in cells {
            assert_eq!(c["status"], "completed", "{c}");
        }
        assert_eq!(doc["settings"]["security_protocol"], "SSL", "{doc}");
    }
}
