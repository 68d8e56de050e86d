use super::*;

pub(crate) fn seed_payload() -> Value {
    json!({
        "type": "KAFKA_NATIVE",
        "minBatchIntervalMs": 100, "maxBatchIntervalMs": 100,
        "minMessagePayloadSizeBytes": 180000, "maxMessagePayloadSizeBytes": 180000,
        "parallelProducers": 4, "gatherLatencies": true,
        "kafkaRestUri": "XXX", "kafkaUserName": "XXX", "kafkaUserPassword": "XXX",
        "kafkaTopic": "latency-test-topic-1", "valueSchemaId": "7",
        "kafkaConsumerGroup": "g", "kafkaConsumerId": "c",
        "minMessagesPerBatch": 4, "maxMessagesPerBatch": 4,
        "consumeTimeoutMs": 10, "consumeMaxBytesMs": 5000000, "commitInterval": "PT10S",
        "someFieldFromTheFuture": 1
    })
}

/// The smallest payload the seed service accepted: its required fields.
pub(crate) fn minimal_payload() -> Value {
    json!({
        "type": "KAFKA_NATIVE",
        "minBatchIntervalMs": 100, "maxBatchIntervalMs": 100,
        "minMessagePayloadSizeBytes": 1024, "maxMessagePayloadSizeBytes": 1024,
        "parallelProducers": 1, "kafkaTopic": "kbench-e2e",
        "minMessagesPerBatch": 1, "maxMessagesPerBatch": 1
    })
}

pub(crate) fn spec_of_payload(p: Value) -> E2eSpec {
    spec_of(&from_value::<PubSubConfig>(p).unwrap(), Limits::default())
        .unwrap()
        .0
}

#[test]
fn the_seed_payload_parses_and_maps() {
    let c: PubSubConfig = from_value(seed_payload()).unwrap();
    let (spec, bootstrap) = spec_of(&c, Limits::default()).unwrap();
    assert!(bootstrap.is_none());
    assert_eq!(spec.producers, 4);
    assert_eq!(spec.payload_size, Span::fixed(180_000));
    assert_eq!(spec.commit, CommitMode::Interval(Duration::from_secs(10)));
    assert_eq!(spec.group_id, "g");
    assert_eq!(spec.consumer.fetch_max_wait, Duration::from_millis(10));
    assert!(
        public_config(&seed_payload())
            .get("kafkaUserPassword")
            .is_none()
    );
}

#[test]
fn bad_fields_are_named() {
    let mut p = seed_payload();
    p.as_object_mut().unwrap().remove("kafkaTopic");
    let e = from_value::<PubSubConfig>(p).err().unwrap();
    assert_eq!(e.field.as_deref(), Some("kafkaTopic"));
    let mut p = seed_payload();
    p["parallelProducers"] = json!(-1);
    assert_eq!(
        from_value::<PubSubConfig>(p)
            .err()
            .unwrap()
            .field
            .as_deref(),
        Some("parallelProducers")
    );
    for (field, value, named) in [
        ("minBatchIntervalMs", json!(500), "minBatchIntervalMs"),
        ("parallelProducers", json!(0), "parallelProducers"),
        ("kafkaTopic", json!("a b"), "kafkaTopic"),
        (
            "maxMessagesPerBatch",
            json!(2_000_000),
            "maxMessagesPerBatch",
        ),
    ] {
        let mut p = seed_payload();
        p[field] = value;
        let c: PubSubConfig = from_value(p).unwrap();
        assert_eq!(
            spec_of(&c, Limits::default())
                .err()
                .unwrap()
                .field
                .as_deref(),
            Some(named),
            "{field}"
        );
    }
}
