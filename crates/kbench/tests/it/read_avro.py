"""Read a topic kbench wrote with --value-schema, as a Confluent application would: librdkafka
(confluent-kafka's consumer) fetches it, confluent-kafka's AvroDeserializer decodes each value
through the Schema Registry named. Prints a JSON summary for the Rust test.

usage: read_avro.py BOOTSTRAP TOPIC REGISTRY_URL USER:PASSWORD EXPECTED
"""
import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer

from confluent_read import read_all

bootstrap, topic, registry, user_info, expected = sys.argv[1:6]
conf = {"url": registry}
if user_info:
    conf["basic.auth.user.info"] = user_info
deserializer = AvroDeserializer(SchemaRegistryClient(conf))
seen = {"fields": None, "code_lengths": set(), "ages": set(), "countries": set(), "suits": set()}


def note(value):
    if seen["fields"] is None:
        seen["fields"] = sorted(value.keys())
    if "code" not in value:  # not every_type.avsc (a --value-template test's schema)
        seen["notes"] = sorted(set(seen.get("notes", [])) | {repr(value.get("note"))})
        return
    seen["code_lengths"].add(len(value["code"]))
    seen["ages"].add(value["age"])
    seen["countries"].add(value["country"])
    seen["suits"].add(value["suit"])


summary = read_all(bootstrap, topic, "read-avro", int(expected), deserializer, note)
summary["fields"] = seen["fields"]
summary["notes"] = seen.get("notes", [])
for k in ("code_lengths", "ages", "countries", "suits"):
    summary[k] = sorted(seen[k])
print(json.dumps(summary))
