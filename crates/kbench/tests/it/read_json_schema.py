"""Read a topic kbench wrote with --value-schema FILE.schema.json, as a Confluent application would:
librdkafka (confluent-kafka's consumer) fetches the topic, and confluent-kafka's JSONDeserializer
reads each value after its schema id and validates it against the schema (Python's jsonschema, not
kbench's code). Prints a JSON summary for the Rust test.

usage: read_json_schema.py BOOTSTRAP TOPIC SCHEMA_FILE EXPECTED [REGISTRY_URL]
With REGISTRY_URL, each record's key is read too, with confluent-kafka's AvroDeserializer.
"""
import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer

from confluent_read import read_all

bootstrap, topic, schema_file, expected = sys.argv[1:5]
with open(schema_file) as f:
    deserializer = JSONDeserializer(f.read())
keys, payments = set(), set()


def note(value):
    keys.update(value.keys())
    payments.update(value["payment"].keys())


key_reader = None
if len(sys.argv) > 5:
    key_reader = AvroDeserializer(SchemaRegistryClient({"url": sys.argv[5]}))
summary = read_all(bootstrap, topic, "read-json-schema", int(expected), deserializer, note,
                   key_reader)
summary["keys_seen"] = sorted(keys)
summary["payments"] = sorted(payments)
print(json.dumps(summary))
