//! `--value-schema`: values generated from an Avro schema, registered in a Schema Registry (the
//! test double, `common/schema_registry_double.rs`) and written in Confluent's wire format — read
//! back by parts that are not kbench's: librdkafka (confluent-kafka's consumer) fetches them and
//! confluent-kafka's `AvroDeserializer` decodes every one through the registry (`read_avro.py`).

use std::time::Duration;

use serde_json::Value;

use crate::common::{Cmd, TempDir, TestBroker, result_json, text};
use crate::schema_registry_double::{RegistryOptions, SchemaRegistryDouble};

fn every_type() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kbench-bench/tests/data/every_type.avsc")
        .display()
        .to_string()
}

/// Run one of the confluent-kafka scripts beside this file with `args`; its standard output.
fn confluent_kafka(script: &str, args: &[&str]) -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../target/tools/python/bin/python");
    assert!(
        python.is_file(),
        "confluent-kafka is not installed at {}: run scripts/install-test-tools (scripts/test does)",
        python.display()
    );
    let out = std::process::Command::new(python)
        .arg(root.join("tests/it").join(script))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "confluent-kafka ({script} {args:?}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// confluent-kafka's reading of `topic` (see `read_avro.py`).
fn read_with_confluent_kafka(
    bootstrap: &str,
    topic: &str,
    registry: &str,
    user_info: &str,
    expected: u64,
) -> Value {
    let out = confluent_kafka(
        "read_avro.py",
        &[bootstrap, topic, registry, user_info, &expected.to_string()],
    );
    serde_json::from_slice(&out).expect("the reader's JSON")
}

#[test]
fn avro_values_through_the_registry_are_read_by_confluent_kafka() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions {
        basic_auth: Some(("kbench".into(), "s3cr3t-pw".into())),
        register_delay: Duration::from_millis(200),
    });
    let dir = TempDir::new("schemas");
    let json = std::path::PathBuf::from(dir.file("avro.json"));
    let topic = "avro-every-type";
    let out = Cmd::on("produce", &broker)
        .topic(topic)
        .args(&[
            "--num-records",
            "2000",
            "--partitions",
            "2",
            "--schema-values",
            "300",
        ])
        .arg("--value-schema")
        .arg(every_type())
        .arg("-X")
        .arg(format!("schema.registry.url={}", registry.url))
        .args(&["-X", "basic.auth.user.info=kbench:s3cr3t-pw"])
        .json(&json)
        .ok(Duration::from_secs(120));
    let err = text(&out.stderr);
    assert!(
        err.contains("300 values from")
            && err.contains("subject avro-every-type-value, registered"),
        "{err}"
    );
    let doc = result_json(&json);
    let raw = std::fs::read_to_string(&json).unwrap();
    assert!(
        !raw.contains("s3cr3t-pw") && !err.contains("s3cr3t-pw"),
        "the password shows"
    );
    let vs = &doc["settings"]["value_schema"];
    assert_eq!(vs["format"], "avro", "{vs}");
    assert_eq!(vs["subject"], "avro-every-type-value");
    assert_eq!(vs["schema_id_from"], "registered");
    assert_eq!(vs["pool"], 300);
    assert!(vs["encode_ns_per_value"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["records_acked"], 2000, "{}", doc["records_acked"]);
    assert_eq!(
        registry
            .subjects()
            .get("avro-every-type-value")
            .map(Vec::len),
        Some(1)
    );
    let id = vs["schema_id"].as_u64().unwrap();

    let read =
        read_with_confluent_kafka(&broker.addr, topic, &registry.url, "kbench:s3cr3t-pw", 2000);
    assert_eq!(read["read"], 2000, "{read}");
    assert_eq!(read["decoded"], 2000, "{read}");
    assert_eq!(read["failed"], 0, "{read}");
    assert_eq!(read["schema_ids"], serde_json::json!([id]), "{read}");
    // The hints, as the decoder sees them.
    assert_eq!(read["code_lengths"], serde_json::json!([4]), "{read}");
    assert_eq!(
        read["countries"],
        serde_json::json!(["DE", "FR", "NL"]),
        "{read}"
    );
    let ages: Vec<u64> = serde_json::from_value(read["ages"].clone()).unwrap();
    assert!(ages.iter().all(|a| (18..65).contains(a)), "{ages:?}");
    assert_eq!(read["suits"].as_array().unwrap().len(), 4, "{read}");
    assert_eq!(read["fields"].as_array().unwrap().len(), 31, "{read}");

    // kbench reads them back too, each value decoded with the schema its id names.
    let consumed = std::path::PathBuf::from(dir.file("consume.json"));
    Cmd::on("consume", &broker)
        .topic(topic)
        .args(&["--messages", "2000"])
        .arg("-X")
        .arg(format!("schema.registry.url={}", registry.url))
        .args(&["-X", "basic.auth.user.info=kbench:s3cr3t-pw"])
        .json(&consumed)
        .ok(Duration::from_secs(60));
    let d = &result_json(&consumed)["value_decoding"];
    assert_eq!(d["decoded"], 2000, "{d}");
    assert_eq!(d["schema_ids"][id.to_string()], 2000, "{d}");

    // A second run under auto.register.schemas=false looks the schema up: the same id, no new
    // version.
    let out = Cmd::on("produce", &broker)
        .topic(topic)
        .args(&["--num-records", "100"])
        .arg("--value-schema")
        .arg(every_type())
        .arg("--schema-registry-url")
        .arg(&registry.url)
        .args(&[
            "-X",
            "basic.auth.user.info=kbench:s3cr3t-pw",
            "-X",
            "auto.register.schemas=false",
        ])
        .ok(Duration::from_secs(60));
    assert!(
        text(&out.stderr).contains(&format!(
            "schema id {id}, subject avro-every-type-value, looked up"
        )),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        registry
            .subjects()
            .get("avro-every-type-value")
            .map(Vec::len),
        Some(1)
    );
}

/// Bad schema input is one error naming the file, property or subject, exit 2, before any load
/// (no embedded broker started).
#[test]
fn bad_schema_input_is_one_error_before_any_load() {
    let registry = SchemaRegistryDouble::start(RegistryOptions {
        basic_auth: Some(("kbench".into(), "right".into())),
        register_delay: Duration::from_millis(50),
    });
    // The subject's earlier version has a required field this schema lacks a default for.
    registry.preload(
        "taken-value",
        r#"{"type":"record","name":"EveryType","namespace":"kbench.test","fields":[{"name":"x","type":"int"}]}"#,
    );
    let dir = TempDir::new("bad-schemas");
    let broken = dir.file("broken.avsc");
    std::fs::write(
        &broken,
        r#"{"type":"record","name":"R","fields":[{"name":"a"}]}"#,
    )
    .unwrap();
    let url = format!("schema.registry.url={}", registry.url);
    let produce = |topic: &str| {
        Cmd::new("produce")
            .topic(topic)
            .args(&["--num-records", "10"])
            .arg("--value-schema")
    };
    produce("t").arg(&broken).refused("--value-schema");
    produce("t")
        .arg(dir.file("missing.avsc"))
        .refused("--value-schema");
    produce("t")
        .arg(every_type())
        .refused("needs a Schema Registry to register it (--schema-registry-url URL");
    produce("t")
        .arg(every_type())
        .args(&["-X", &url, "-X", "basic.auth.user.info=kbench:wrong"])
        .refused("HTTP 401");
    produce("taken")
        .arg(every_type())
        .args(&["-X", &url, "-X", "basic.auth.user.info=kbench:right"])
        .refused("subject \"taken-value\": ");
    produce("taken")
        .arg(every_type())
        .args(&["-X", &url, "-X", "basic.auth.user.info=kbench:right"])
        .refused("incompatible");
    produce("fresh")
        .arg(every_type())
        .args(&[
            "-X",
            &url,
            "-X",
            "basic.auth.user.info=kbench:right",
            "-X",
            "auto.register.schemas=false",
        ])
        .refused("40401");
    produce("t")
        .arg(every_type())
        .args(&["-X", "use.schema.id=x"])
        .refused("use.schema.id");
    produce("t")
        .arg(every_type())
        .args(&["-X", "value.subject.name.strategy=Nope"])
        .refused("value.subject.name.strategy");
    Cmd::new("produce")
        .args(&["--num-records", "10", "-X", &url])
        .refused("schema.registry.url: a serializer property; only with --value-schema");
    Cmd::new("produce")
        .args(&["--num-records", "10", "--key-schema"])
        .arg(every_type())
        .refused("--key-schema");
    Cmd::new("produce")
        .args(&[
            "--num-records",
            "10",
            "--schema-registry-url",
            "http://127.0.0.1:1",
        ])
        .refused("--schema-registry-url: only with --value-schema or --key-schema");
    produce("t")
        .arg(every_type())
        .args(&[
            "-X",
            "use.schema.id=3",
            "--schema-hint",
            "EveryType.code=length:1..2",
        ])
        .refused("--schema-hint EveryType.code: for a .proto schema");
    produce("t")
        .arg(every_type_proto())
        .args(&[
            "-X",
            "use.schema.id=3",
            "--schema-hint",
            "Everything.nope=length:1..2",
        ])
        .refused("--schema-hint Everything.nope=length:1..2: no field");
    // A .proto under a subject whose schema is Avro: the registry's 409.
    produce("taken")
        .arg(every_type_proto())
        .args(&["-X", &url, "-X", "basic.auth.user.info=kbench:right"])
        .refused("different schema type");
    // Nothing was registered by the refused runs but the preloaded subject.
    assert_eq!(registry.subjects().len(), 1, "{:?}", registry.subjects());
}

/// The other way: librdkafka and confluent-kafka's `AvroSerializer` write (`write_avro.py`), kbench
/// reads with `-X schema.registry.url`: every value decodes with the schema its id names, and the
/// values that are not Avro are counted by why, never a failed run (exit 5 only with --verify).
#[test]
fn kbench_decodes_what_confluent_kafka_wrote_and_counts_what_it_cannot() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions {
        basic_auth: Some(("reader".into(), "pw-for-reading".into())),
        register_delay: Duration::from_millis(100),
    });
    let topic = "avro-from-confluent";
    confluent_kafka(
        "write_avro.py",
        &[
            &broker.addr,
            topic,
            &registry.url,
            "reader:pw-for-reading",
            "1500",
        ],
    );
    let id = registry.subjects()[&format!("{topic}-value")][0] as u64;
    let dir = TempDir::new("decode");
    let json = std::path::PathBuf::from(dir.file("consume.json"));
    let consume = || {
        Cmd::on("consume", &broker)
            .topic(topic)
            .args(&["--messages", "1503", "--timeout", "10000"])
            .arg("-X")
            .arg(format!("schema.registry.url={}", registry.url))
            .args(&["-X", "basic.auth.user.info=reader:pw-for-reading"])
    };
    let out = consume().json(&json).ok(Duration::from_secs(60));
    let said = text(&out.stdout);
    assert!(
        said.contains("1500 of 1503") && said.contains("2 without Confluent's framing"),
        "{said}"
    );
    assert!(!said.contains("pw-for-reading"));
    let doc = result_json(&json);
    let d = &doc["value_decoding"];
    assert_eq!(d["decoded"], 1500, "{d}");
    assert_eq!(d["not_framed"], 2, "{d}");
    assert_eq!(d["unknown_schema"], 1, "{d}");
    assert_eq!(d["not_decoded"], 0, "{d}");
    assert_eq!(d["schema_ids"][id.to_string()], 1500, "{d}");
    assert_eq!(d["schema_ids"]["9999"], 1, "{d}");
    assert!(
        !std::fs::read_to_string(&json)
            .unwrap()
            .contains("pw-for-reading")
    );
    // The schema was asked for once, however many values named it.
    let asked = registry
        .requests()
        .iter()
        .filter(|r| *r == &format!("GET /schemas/ids/{id}"))
        .count();
    assert_eq!(asked, 1, "{:?}", registry.requests());
    // With --verify, values that do not decode fail the run (exit 5).
    let out = consume().arg("--verify").run(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    // A deserializer setting without a registry is refused.
    Cmd::on("consume", &broker)
        .topic(topic)
        .args(&["-X", "basic.auth.user.info=reader:x"])
        .refused("give -X schema.registry.url=URL");
}

fn every_type_proto() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kbench-bench/tests/data/every_type.proto")
        .display()
        .to_string()
}

/// `--value-schema FILE.proto`: registered as PROTOBUF, written with Confluent's message indexes,
/// read back by confluent-kafka's ProtobufDeserializer with classes protoc compiled from the same
/// file (not kbench's parser), the file's first message and a later one (`--value-message`); kbench's
/// consumer decodes them too.
#[test]
fn protobuf_values_are_read_by_confluent_kafka_with_protocs_classes() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions::default());
    let dir = TempDir::new("schemas-proto");
    for (topic, message, records) in [
        ("proto-every-type", None, 1000u64),
        ("proto-tree", Some("kbench.test.Tree"), 200),
    ] {
        let json = std::path::PathBuf::from(dir.file(&format!("{topic}.json")));
        let mut cmd = Cmd::on("produce", &broker)
            .topic(topic)
            .args(&[
                "--num-records",
                &records.to_string(),
                "--schema-values",
                "400",
            ])
            .arg("--value-schema")
            .arg(every_type_proto())
            .arg("--schema-registry-url")
            .arg(&registry.url);
        if let Some(m) = message {
            cmd = cmd.args(&["--value-message", m]);
        }
        cmd.json(&json).ok(Duration::from_secs(120));
        let doc = result_json(&json);
        let vs = &doc["settings"]["value_schema"];
        assert_eq!(vs["format"], "protobuf", "{vs}");
        let full = message.unwrap_or("kbench.test.Everything");
        assert_eq!(vs["message"], full, "{vs}");
        assert_eq!(vs["subject"], format!("{topic}-value"), "{vs}");
        assert_eq!(doc["records_acked"], records, "{}", doc["records_acked"]);
        let id = vs["schema_id"].as_u64().unwrap();

        let python_name = full.trim_start_matches("kbench.test.");
        let out = confluent_kafka(
            "read_proto.py",
            &[
                &broker.addr,
                topic,
                &every_type_proto(),
                python_name,
                &records.to_string(),
            ],
        );
        let read: Value = serde_json::from_slice(&out).expect("the reader's JSON");
        assert_eq!(read["read"], records, "{read}");
        assert_eq!(read["decoded"], records, "{read}");
        assert_eq!(read["schema_ids"], serde_json::json!([id]), "{read}");
        if message.is_none() {
            // Every field of Everything was set in some value, each branch of the oneof taken,
            // and every enum value drawn.
            assert_eq!(read["fields_set"].as_array().unwrap().len(), 27, "{read}");
            assert_eq!(
                read["oneof"],
                serde_json::json!(["nested", "number", "text"]),
                "{read}"
            );
            assert_eq!(read["colours"], serde_json::json!([0, 1, 2, 5]), "{read}");
        }

        // kbench reads them back too: each value decoded with the .proto its id names.
        let consumed = std::path::PathBuf::from(dir.file(&format!("{topic}-consume.json")));
        Cmd::on("consume", &broker)
            .topic(topic)
            .args(&["--messages", &records.to_string()])
            .arg("-X")
            .arg(format!("schema.registry.url={}", registry.url))
            .json(&consumed)
            .ok(Duration::from_secs(60));
        let d = &result_json(&consumed)["value_decoding"];
        assert_eq!(d["decoded"], records, "{d}");
        assert_eq!(d["not_decoded"], 0, "{d}");
    }
    let subjects = registry.subjects();
    assert_eq!(
        subjects.get("proto-every-type-value").map(Vec::len),
        Some(1)
    );
}

/// `--value-schema FILE.schema.json`: documents generated from a JSON Schema, registered as JSON,
/// and every one validated against the schema by confluent-kafka's JSONDeserializer (Python's
/// jsonschema); `--key-schema` keys from an Avro schema, read by its AvroDeserializer; kbench's
/// consumer parses the values back.
#[test]
fn json_schema_values_are_validated_by_confluent_kafka() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions::default());
    let dir = TempDir::new("schemas-json");
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kbench-bench/tests/data/every_type.schema.json")
        .display()
        .to_string();
    let topic = "json-every-type";
    let key_schema = dir.file("key.avsc");
    std::fs::write(
        &key_schema,
        r#"{"type":"record","name":"OrderKey","fields":[{"name":"id","type":"string"},{"name":"region","type":"int"}]}"#,
    )
    .unwrap();
    let json = std::path::PathBuf::from(dir.file("json.json"));
    Cmd::on("produce", &broker)
        .topic(topic)
        .args(&["--num-records", "1000", "--schema-values", "300"])
        .args(&["--value-schema", &schema])
        .args(&["-X", &format!("schema.registry.url={}", registry.url)])
        .args(&["-X", "value.subject.name.strategy=RecordNameStrategy"])
        // Keys from an Avro schema: 50 of them, each record taking one at random.
        .args(&["--key-schema", &key_schema, "--keys", "random:50"])
        .json(&json)
        .ok(Duration::from_secs(120));
    let doc = result_json(&json);
    let vs = &doc["settings"]["value_schema"];
    assert_eq!(vs["format"], "json", "{vs}");
    // RecordNameStrategy names the schema's title, as Confluent's JSON serializer does.
    assert_eq!(vs["subject"], "Order", "{vs}");
    let id = vs["schema_id"].as_u64().unwrap();
    let ks = &doc["settings"]["key_schema"];
    assert_eq!(ks["format"], "avro", "{ks}");
    assert_eq!(ks["subject"], "json-every-type-key", "{ks}");
    assert_eq!(ks["pool"], 50, "{ks}");
    let out = confluent_kafka(
        "read_json_schema.py",
        &[&broker.addr, topic, &schema, "1000", &registry.url],
    );
    let read: Value = serde_json::from_slice(&out).expect("the reader's JSON");
    assert_eq!(read["read"], 1000, "{read}");
    assert_eq!(read["decoded"], 1000, "{read}");
    assert_eq!(read["schema_ids"], serde_json::json!([id]), "{read}");
    assert_eq!(
        read["payments"],
        serde_json::json!(["card", "iban"]),
        "{read}"
    );
    assert_eq!(read["keys_seen"].as_array().unwrap().len(), 15, "{read}");
    assert_eq!(read["keys_decoded"], 1000, "{read}");
    assert_eq!(read["distinct_keys"], 50, "{read}");

    let consumed = std::path::PathBuf::from(dir.file("consume.json"));
    Cmd::on("consume", &broker)
        .topic(topic)
        .args(&["--messages", "1000"])
        .args(&["-X", &format!("schema.registry.url={}", registry.url)])
        .json(&consumed)
        .ok(Duration::from_secs(60));
    let d = &result_json(&consumed)["value_decoding"];
    assert_eq!(d["decoded"], 1000, "{d}");
}

/// `kbench e2e --value-schema` on `bootstrap`: the producers send schema values, the consumer
/// decodes every one it reads with the schema its id names (`value_decoding`) while it times the
/// trips, and confluent-kafka's AvroDeserializer reads the same records back.
fn e2e_schema_values_are_decoded(bootstrap: &str, name: &str) {
    let registry = SchemaRegistryDouble::start(RegistryOptions {
        basic_auth: Some(("kbench".into(), "e2e-s3cr3t".into())),
        register_delay: Duration::from_millis(100),
    });
    let dir = TempDir::new(name);
    let topic = "e2e-avro";
    let json = std::path::PathBuf::from(dir.file("e2e.json"));
    let out = Cmd::new("e2e")
        .args(&["--bootstrap-server", bootstrap])
        .topic(topic)
        .args(&[
            "--partitions",
            "2",
            "--num-records",
            "400",
            "--schema-values",
            "100",
        ])
        .args(&["--batch-interval", "0..5ms", "--messages-per-batch", "1..8"])
        .args(&["--reporting-interval", "0", "--verify"])
        .arg("--value-schema")
        .arg(every_type())
        .args(&["--schema-registry-url", &registry.url])
        .args(&["-X", "basic.auth.user.info=kbench:e2e-s3cr3t"])
        .json(&json)
        .ok(Duration::from_secs(120));
    let said = text(&out.stdout);
    let raw = std::fs::read_to_string(&json).unwrap();
    for shown in [&said, &text(&out.stderr), &raw] {
        assert!(!shown.contains("e2e-s3cr3t"), "the password shows: {shown}");
    }
    assert!(said.contains("values from"), "{said}");
    assert!(said.contains("Values decoded through"), "{said}");
    let doc = result_json(&json);
    let vs = &doc["settings"]["value_schema"];
    assert_eq!(vs["format"], "avro", "{vs}");
    assert_eq!(vs["subject"], "e2e-avro-value", "{vs}");
    let id = vs["schema_id"].as_u64().unwrap();
    assert_eq!(doc["records_consumed"], 400, "{doc}");
    let d = &doc["value_decoding"];
    assert_eq!(d["decoded"], 400, "{d}");
    assert_eq!(d["schema_ids"][id.to_string()], 400, "{d}");
    assert_eq!(doc["verification"]["ok"], true, "{}", doc["verification"]);
    let read = read_with_confluent_kafka(bootstrap, topic, &registry.url, "kbench:e2e-s3cr3t", 400);
    assert_eq!(read["decoded"], 400, "{read}");
}

/// [`e2e_schema_values_are_decoded`] on the embedded broker; bad input refused before any load.
#[test]
fn e2e_sends_schema_values_and_its_consumer_decodes_them() {
    let broker = TestBroker::start();
    e2e_schema_values_are_decoded(&broker.addr, "schemas-e2e");
    let registry = SchemaRegistryDouble::start(RegistryOptions::default());

    // Refused before any load, naming the flag.
    Cmd::on("e2e", &broker)
        .args(&["--mode", "consumer", "--duration", "1s"])
        .arg("--value-schema")
        .arg(every_type())
        .refused("--value-schema: nothing is produced in consumer-only mode");
    Cmd::on("e2e", &broker)
        .args(&["--duration", "1s", "-X", "basic.auth.user.info=a:b"])
        .refused("basic.auth.user.info: a serializer property");
    // A registry without a schema beside kbench's own producers: their bytes are not framed.
    Cmd::on("e2e", &broker)
        .args(&["--duration", "1s", "--schema-registry-url", &registry.url])
        .refused("only with --value-schema FILE, or with --mode consumer");
    Cmd::on("e2e", &broker)
        .args(&["--duration", "1s", "--value-schema-id", "3"])
        .refused("--value-schema-id: only with --via rest-proxy");
}

/// [`e2e_schema_values_are_decoded`] on librdkafka's mock cluster (three brokers, the topic's
/// leaders spread): the producers' batches, the consumer's Fetches and confluent-kafka's reader
/// all meet another Kafka implementation.
#[test]
fn e2e_sends_schema_values_decoded_on_librdkafka_mock_cluster() {
    let mock = crate::mock::Mock::new(3);
    mock.topic("e2e-avro", 2);
    e2e_schema_values_are_decoded(&mock.bootstrap, "schemas-e2e-mock");
}

/// `kbench omb --value-schema`: an OMB workload of two topics sends schema values in place of its
/// payload, the schema registered under each topic's subject (one id), and the subscriptions'
/// consumers decode every value through the registry the driver's commonConfig names.
#[test]
fn omb_workload_sends_schema_values_decoded_by_its_consumers() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions::default());
    let dir = TempDir::new("schemas-omb");
    let workload = dir.file("workload.yaml");
    std::fs::write(
        &workload,
        "name: schema values\ntopics: 2\npartitionsPerTopic: 2\nmessageSize: 100\n\
         subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\n\
         producerRate: 400\ntestDurationMinutes: 0.05\nwarmupDurationMinutes: 0\n",
    )
    .unwrap();
    let driver = dir.file("driver.yaml");
    std::fs::write(
        &driver,
        format!(
            "name: Kafka\nreplicationFactor: 1\ncommonConfig: |\n  schema.registry.url={}\nproducerConfig: |\n  acks=all\n",
            registry.url
        ),
    )
    .unwrap();
    let (omb_path, json) = (dir.file("omb.json"), dir.file("kbench.json"));
    let out = Cmd::on("omb", &broker)
        .arg(&workload)
        .args(&["--driver", &driver, "--reporting-interval", "1s"])
        .arg("--value-schema")
        .arg(every_type())
        .args(&["--schema-values", "50", "-o", &omb_path, "--json", &json])
        .ok(Duration::from_secs(120));
    let err = text(&out.stderr);
    assert!(
        err.contains("not applied: messageSize 100: the values come from --value-schema"),
        "{err}"
    );
    let doc = result_json(std::path::Path::new(&json));
    let vs = &doc["settings"]["value_schema"];
    let topics: Vec<String> = doc["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(vs["subject"], format!("{}-value", topics[0]), "{vs}");
    let subjects = registry.subjects();
    for t in &topics {
        assert!(subjects.contains_key(&format!("{t}-value")), "{subjects:?}");
    }
    let acked = doc["records_acked"].as_u64().unwrap();
    assert!(acked > 0, "{doc}");
    let d = &doc["consumed"]["value_decoding"];
    assert_eq!(d["decoded"], doc["consumed"]["records"], "{d}");
    assert_eq!(d["decoded"], acked, "{d}");
    assert_eq!(d["not_decoded"], 0, "{d}");
}

/// `--value-template`: the records are the file's JSON documents (plain JSON and Avro's JSON
/// encoding) encoded with the schema, read back by confluent-kafka's AvroDeserializer; a document
/// that does not match is one error naming it, before any load.
#[test]
fn template_documents_are_encoded_and_read_by_confluent_kafka() {
    let broker = TestBroker::start();
    let registry = SchemaRegistryDouble::start(RegistryOptions::default());
    let dir = TempDir::new("schemas-template");
    let schema = dir.file("order.avsc");
    std::fs::write(
        &schema,
        r#"{"type":"record","name":"Order","namespace":"shop","fields":[
            {"name":"id","type":"long"},
            {"name":"note","type":["null","string"]},
            {"name":"colour","type":{"type":"enum","name":"Colour","symbols":["RED","BLUE"]}}]}"#,
    )
    .unwrap();
    let template = dir.file("orders.jsonl");
    std::fs::write(
        &template,
        "{\"id\":1,\"note\":null,\"colour\":\"RED\"}\n\
         {\"id\":2,\"note\":{\"string\":\"gift\"},\"colour\":\"BLUE\"}\n\
         {\"id\":3,\"note\":\"plain\",\"colour\":\"BLUE\"}\n",
    )
    .unwrap();
    let json = std::path::PathBuf::from(dir.file("produce.json"));
    Cmd::on("produce", &broker)
        .topic("template-orders")
        .args(&["--num-records", "300", "--value-schema", &schema])
        .args(&["--value-template", &template])
        .args(&["--schema-registry-url", &registry.url])
        .json(&json)
        .ok(Duration::from_secs(60));
    let vs = &result_json(&json)["settings"]["value_schema"];
    assert_eq!(vs["pool"], 3, "{vs}");
    assert_eq!(vs["template"], template.as_str(), "{vs}");
    let read = read_with_confluent_kafka(&broker.addr, "template-orders", &registry.url, "", 300);
    assert_eq!(read["decoded"], 300, "{read}");
    assert_eq!(read["fields"], serde_json::json!(["colour", "id", "note"]));
    assert_eq!(
        read["notes"],
        serde_json::json!(["'gift'", "'plain'", "None"]),
        "{read}"
    );

    std::fs::write(&template, "{\"id\":1,\"note\":null,\"colour\":\"GREEN\"}\n").unwrap();
    Cmd::on("produce", &broker)
        .topic("template-orders")
        .args(&["--num-records", "10", "--value-schema", &schema])
        .args(&["--value-template", &template])
        .args(&["--schema-registry-url", &registry.url])
        .refused("--value-template");
}
