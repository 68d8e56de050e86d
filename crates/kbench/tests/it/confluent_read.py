"""The read loop the confluent-kafka reader scripts share: librdkafka (confluent-kafka's consumer)
reads a topic from the earliest offset in a group of its own until `expected` records arrived (or
60 s passed), each value goes through `deserialize`, and what decoded is handed to `on_value`.
"""
import json
import time

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.serialization import MessageField, SerializationContext


def read_all(bootstrap, topic, group, expected, deserialize, on_value, deserialize_key=None):
    """A summary: records read, decoded and failed, the first errors, the schema ids seen; with
    `deserialize_key`, the keys decoded too (`keys_decoded`, `distinct_keys`)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    summary = {"read": 0, "decoded": 0, "failed": 0, "errors": [], "schema_ids": [],
               "keys_decoded": 0, "distinct_keys": 0}
    ids, keys = set(), set()
    deadline = time.time() + 60
    while summary["read"] < expected and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                summary["errors"].append(str(msg.error()))
            continue
        summary["read"] += 1
        raw = msg.value()
        ids.add(int.from_bytes(raw[1:5], "big"))
        try:
            if deserialize_key is not None:
                key = deserialize_key(msg.key(), SerializationContext(topic, MessageField.KEY))
                summary["keys_decoded"] += 1
                keys.add(json.dumps(key, sort_keys=True))
            value = deserialize(raw, SerializationContext(topic, MessageField.VALUE))
        except Exception as e:  # noqa: BLE001 - every failure is counted and one is shown
            summary["failed"] += 1
            if len(summary["errors"]) < 3:
                summary["errors"].append(repr(e))
            continue
        summary["decoded"] += 1
        on_value(value)
    consumer.close()
    summary["schema_ids"] = sorted(ids)
    summary["distinct_keys"] = len(keys)
    return summary
