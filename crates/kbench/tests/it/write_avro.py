"""Write Avro records as a Confluent application would, for kbench to read back: librdkafka
(confluent-kafka's producer) and confluent-kafka's AvroSerializer, registering the schema in the
registry named; then two values without Confluent's framing and one framed with a schema id the
registry does not have.

usage: write_avro.py BOOTSTRAP TOPIC REGISTRY_URL USER:PASSWORD COUNT
"""
import datetime
import decimal
import sys
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCHEMA = """{"type": "record", "name": "Payment", "namespace": "shop", "fields": [
  {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "REFUNDED"]}},
  {"name": "note", "type": ["null", "string"]},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "extra", "type": {"type": "map", "values": "long"}},
  {"name": "card", "type": {"type": "record", "name": "Card", "fields": [
    {"name": "last4", "type": "string"}, {"name": "expiry", "type": {"type": "int", "logicalType": "date"}}]}}
]}"""

bootstrap, topic, registry, user_info, count = sys.argv[1:6]
conf = {"url": registry}
if user_info:
    conf["basic.auth.user.info"] = user_info
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result(30)
serializer = AvroSerializer(SchemaRegistryClient(conf), SCHEMA)
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
ctx = SerializationContext(topic, MessageField.VALUE)
states = ["NEW", "PAID", "REFUNDED"]
for i in range(int(count)):
    value = {
        "id": uuid.UUID(int=i + 1),
        "amount": decimal.Decimal(i) / 100,
        "at": datetime.datetime(2026, 12, 4, tzinfo=datetime.timezone.utc),
        "state": states[i % 3],
        "note": None if i % 2 else f"note {i}",
        "tags": [f"t{i % 7}"] * (i % 3),
        "extra": {"k": i},
        "card": {"last4": f"{i % 10000:04d}", "expiry": datetime.date(2027, 1 + i % 12, 1)},
    }
    producer.produce(topic, serializer(value, ctx))
producer.produce(topic, b"plain text, not Avro")
producer.produce(topic, b"\x00\x01")
producer.produce(topic, b"\x00\x00\x00\x27\x0f" + b"\x02")  # schema id 9999
left = producer.flush(30)
sys.exit(1 if left else 0)
