"""Read a topic kbench wrote with --value-schema FILE.schema.json, as a Confluent application would:
librdkafka (confluent-kafka's consumer) fetches the topic, and confluent-kafka's JSONDeserializer
reads each value after its schema id and validates it against the schema (Python's jsonschema, not
kbench's code). Prints a JSON summary for the Rust test.

usage: read_json_schema.py BOOTSTRAP TOPIC SCHEMA_FILE EXPECTED
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

bootstrap, topic, schema_file, expected = sys.argv[1:5]
expected = int(expected)
with open(schema_file) as f:
    schema_str = f.read()
deserializer = JSONDeserializer(schema_str)
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "read-json-schema",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
})
consumer.subscribe([topic])
summary = {"read": 0, "decoded": 0, "failed": 0, "errors": [], "schema_ids": [],
           "keys_seen": [], "payments": []}
ids, keys, payments = set(), set(), set()
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
        value = deserializer(raw, SerializationContext(topic, MessageField.VALUE))
    except Exception as e:  # noqa: BLE001 - every failure is counted and one is shown
        summary["failed"] += 1
        if len(summary["errors"]) < 3:
            summary["errors"].append(repr(e))
        continue
    summary["decoded"] += 1
    keys.update(value.keys())
    payments.update(value["payment"].keys())
consumer.close()
summary["schema_ids"] = sorted(ids)
summary["keys_seen"] = sorted(keys)
summary["payments"] = sorted(payments)
print(json.dumps(summary))
