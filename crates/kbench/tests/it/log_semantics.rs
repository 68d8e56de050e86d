//! The log's own semantics: what a compacted topic must keep (`--key-space`, `--tombstones`,
//! `produce --latest-values FILE`, `consume --latest-values FILE`). No broker here compacts: both
//! Tansu brokers take `cleanup.policy=compact` and keep every record, and librdkafka's mock
//! cluster has no compaction. So the check is shown on logs that carry every write — the
//! duplicates a compacted log would have dropped —, where a key's last record is still its last
//! write; librdkafka reads the same log and finds, key by key, the record the file names.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::{BROKERS, BrokerKind, Cmd, TempDir, TestBroker, n, result_json, text};
use crate::librdkafka;

const LIMIT: Duration = Duration::from_secs(120);

/// On both Tansu brokers: 20 000 records over 500 keys, a fifth of them tombstones, into a topic
/// created `cleanup.policy=compact`; the file names every key's last write, `consume
/// --latest-values` finds each one there (exit 0), and librdkafka agrees key by key. Then 300
/// more writes over the same keys: the old file no longer describes the log, and the check fails
/// (exit 5), counting the keys whose last record moved.
#[test]
fn every_keys_last_write_is_found_and_a_log_that_moved_on_is_caught_on_both_brokers() {
    for kind in BROKERS {
        latest_values_on(kind);
    }
}

fn latest_values_on(kind: BrokerKind) {
    let broker = TestBroker::of(kind);
    let dir = TempDir::new("latest-values");
    let topic = "compacted";
    let file = dir.path().join("latest.json");
    let produced = dir.path().join("produce.json");
    let out = Cmd::on("produce", &broker)
        .topic(topic)
        .args(&[
            "--partitions",
            "3",
            "--num-records",
            "20000",
            "--key-space",
            "500",
            "--tombstones",
            "0.2",
            "--seed",
            "11",
            "--topic-config",
            "cleanup.policy=compact",
            "--latest-values",
        ])
        .arg(file.to_str().unwrap())
        .json(&produced)
        .ok(LIMIT);
    let err = text(&out.stderr);
    assert!(err.contains("500 keys"), "{kind:?}: {err}");
    let doc = result_json(&produced);
    assert_eq!(doc["settings"]["tombstones"], 0.2);
    assert_eq!(
        doc["settings"]["topic_configs"],
        serde_json::json!(["cleanup.policy=compact"])
    );
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let keys = expected["keys"].as_object().unwrap();
    let deleted = keys
        .values()
        .filter(|v| v["value_crc32c"].is_null())
        .count();
    assert_eq!(keys.len(), 500);
    // A fifth of 20 000 writes are tombstones: about a fifth of the keys end deleted.
    assert!((50..=150).contains(&deleted), "{deleted} of 500 deleted");

    let consume = |name: &str, messages: &str| {
        let json = dir.path().join(name);
        let out = Cmd::on("consume", &broker)
            .topic(topic)
            // Assigned, from offset 0: no group to wait for.
            .args(&["--partition", "0,1,2", "--offset", "0"])
            .args(&[
                "--messages",
                messages,
                "--timeout",
                "3000",
                "--latest-values",
            ])
            .arg(file.to_str().unwrap())
            .json(&json)
            .run(LIMIT);
        (out, result_json(&json))
    };
    let (out, doc) = consume("consume.json", "20000");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{kind:?}: {stdout}");
    let l = &doc["latest_values"];
    assert_eq!(l["ok"], true, "{l}");
    assert_eq!(
        (n(l, "matched"), n(l, "keys_deleted")),
        (500, deleted as u64)
    );
    assert!(stdout.contains("Latest values OK: 500 keys"), "{stdout}");

    // librdkafka, key by key: the last record of each key is the one the file names.
    let read = librdkafka::read(
        &broker.addr,
        topic,
        3,
        20_000,
        Duration::from_millis(300),
        LIMIT,
    );
    let mut last: HashMap<Vec<u8>, &librdkafka::Read> = HashMap::new();
    for r in &read {
        let key = r.key.clone().expect("every record keyed");
        if last.get(&key).is_none_or(|p| p.offset < r.offset) {
            last.insert(key, r);
        }
    }
    assert_eq!(last.len(), 500);
    for (key, want) in keys {
        let r = last[key.as_bytes()];
        assert_eq!(
            (i64::from(r.partition), r.offset),
            (
                want["partition"].as_i64().unwrap(),
                want["offset"].as_i64().unwrap()
            ),
            "key {key}"
        );
        let crc = r
            .value
            .as_ref()
            .map(|v| format!("{:08x}", crc32c::crc32c(v)));
        assert_eq!(crc.as_deref(), want["value_crc32c"].as_str(), "key {key}");
    }

    // More writes of the same keys: the file is out of date, and the check says so.
    Cmd::on("produce", &broker)
        .topic(topic)
        .args(&["--num-records", "300", "--key-space", "500", "--seed", "12"])
        .ok(LIMIT);
    let (out, doc) = consume("consume-moved.json", "20300");
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stdout));
    let l = &doc["latest_values"];
    assert_eq!(l["ok"], false, "{l}");
    let moved = n(l, "stale") + n(l, "resurrected");
    // 300 draws over 500 keys touch about 225 of them.
    assert!((150..=300).contains(&moved), "{l}");
    assert_eq!(n(l, "matched") + moved, 500, "{l}");
}

/// On librdkafka's mock cluster (3 brokers; it has no CreateTopics, so the topic is made there):
/// the same check, a second implementation's offsets.
#[test]
fn every_keys_last_write_is_found_on_librdkafka_mock_cluster() {
    let mock = rdkafka::mocking::MockCluster::new(3).expect("mock cluster");
    mock.create_topic("compacted", 3, 1).expect("mock topic");
    let bootstrap = mock.bootstrap_servers();
    let dir = TempDir::new("latest-values-mock");
    let file = dir.path().join("latest.json");
    Cmd::new("produce")
        .args(&["--bootstrap-server", &bootstrap])
        .topic("compacted")
        .args(&[
            "--pin",
            "metadata=8",
            "--num-records",
            "10000",
            "--key-space",
            "300",
            "--tombstones",
            "0.3",
            "--latest-values",
        ])
        .arg(file.to_str().unwrap())
        .ok(LIMIT);
    // Assign mode: the three partitions from offset 0.
    check_latest_values(
        &bootstrap,
        &file,
        &dir.path().join("consume.json"),
        &[
            "--partition",
            "0,1,2",
            "--offset",
            "0",
            "--messages",
            "10000",
            "--timeout",
            "3000",
        ],
    );
    // Three members of one group, each reading its own partition, check together: one check
    // over every key, whichever member read it.
    let doc = check_latest_values(
        &bootstrap,
        &file,
        &dir.path().join("group.json"),
        &[
            "--group",
            "latest-values",
            "--consumers",
            "3",
            "--messages",
            "1000000",
            "--timeout",
            "4000",
        ],
    );
    let members = doc["group"]["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    assert!(
        members.iter().all(|m| n(m, "records") > 0),
        "{}",
        doc["group"]
    );
}

/// `consume --latest-values FILE` of the mock's `compacted` topic with `args`, to `json`: every
/// one of the 300 keys' last writes found. The result.
fn check_latest_values(
    bootstrap: &str,
    file: &std::path::Path,
    json: &std::path::Path,
    args: &[&str],
) -> serde_json::Value {
    let out = Cmd::new("consume")
        .args(&["--bootstrap-server", bootstrap])
        .topic("compacted")
        .args(&["--pin", "metadata=8,fetch=12"])
        .args(args)
        .args(&["--latest-values", file.to_str().unwrap()])
        .json(json)
        .run(LIMIT);
    let doc = result_json(json);
    let l = &doc["latest_values"];
    assert_eq!(out.status.code(), Some(0), "{l}\n{}", text(&out.stderr));
    assert_eq!(
        (l["ok"].clone(), n(l, "matched")),
        (true.into(), 300),
        "{l}"
    );
    doc
}

/// Bad input, one clear error each.
#[test]
fn latest_values_and_tombstones_refuse_what_cannot_work() {
    Cmd::new("produce")
        .args(&["--tombstones", "0.1"])
        .refused("--tombstones");
    Cmd::new("produce")
        .args(&["--latest-values", "/tmp/x.json"])
        .refused("--latest-values");
    Cmd::new("produce")
        .args(&["--key-space", "10", "--tombstones", "2"])
        .refused("--tombstones");
    Cmd::new("produce")
        .args(&["--key-space", "10", "--keys", "random:5"])
        .refused("--key-space");
    Cmd::new("produce")
        .args(&[
            "--key-space",
            "10",
            "--latest-values",
            "/tmp/x.json",
            "--acks",
            "0",
        ])
        .refused("--latest-values");
    Cmd::new("produce")
        .args(&["--topic-config", "compact"])
        .refused("--topic-config");
    let dir = TempDir::new("latest-values-bad");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"kind\": \"something else\"}").unwrap();
    Cmd::new("consume")
        .args(&["--latest-values", bad.to_str().unwrap()])
        .refused("--latest-values");
    std::fs::write(
        &bad,
        "{\"kind\":\"kbench-latest-values\",\"topic\":\"other\",\"keys\":{},\"uncertain\":[]}",
    )
    .unwrap();
    Cmd::new("consume")
        .args(&["--topic", "mine", "--latest-values", bad.to_str().unwrap()])
        .refused("--latest-values");
}
