"""Read a topic kbench wrote with --value-schema, as a Confluent application would: librdkafka
(confluent-kafka's consumer) fetches it, confluent-kafka's AvroDeserializer decodes each value
through the Schema Registry named. Prints a JSON summary for the Rust test.

usage: read_avro.py BOOTSTRAP TOPIC REGISTRY_URL USER:PASSWORD EXPECTED
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

bootstrap, topic, registry, user_info, expected = sys.argv[1:6]
expected = int(expected)
conf = {"url": registry}
if user_info:
    conf["basic.auth.user.info"] = user_info
deserializer = AvroDeserializer(SchemaRegistryClient(conf))
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "read-avro",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
})
consumer.subscribe([topic])
summary = {"read": 0, "decoded": 0, "failed": 0, "errors": [], "schema_ids": [],
           "fields": None, "code_lengths": [], "ages": [], "countries": [], "suits": []}
ids = set()
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
    if summary["fields"] is None:
        summary["fields"] = sorted(value.keys())
    summary["code_lengths"].append(len(value["code"]))
    summary["ages"].append(value["age"])
    summary["countries"].append(value["country"])
    summary["suits"].append(value["suit"])
consumer.close()
summary["schema_ids"] = sorted(ids)
for k in ("code_lengths", "ages", "countries", "suits"):
    summary[k] = sorted(set(summary[k]))
print(json.dumps(summary))
