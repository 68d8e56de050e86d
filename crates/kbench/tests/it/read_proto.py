"""Read a topic kbench wrote with --value-schema FILE.proto, as a Confluent application would: protoc
(grpcio-tools' build of it) compiles the .proto into Python classes, librdkafka (confluent-kafka's
consumer) fetches the topic, and confluent-kafka's ProtobufDeserializer decodes each value after
its schema id and message indexes. Prints a JSON summary for the Rust test.

usage: read_proto.py BOOTSTRAP TOPIC PROTO_FILE MESSAGE EXPECTED
"""
import importlib
import json
import os
import shutil
import sys
import tempfile

from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from grpc_tools import protoc
import grpc_tools

from confluent_read import read_all

bootstrap, topic, proto_file, message, expected = sys.argv[1:6]
expected = int(expected)
out = tempfile.mkdtemp(prefix="kbench-proto-")
try:
    shutil.copy(proto_file, os.path.join(out, "value.proto"))
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = protoc.main(["protoc", f"-I{out}", f"-I{well_known}", f"--python_out={out}", "value.proto"])
    if code != 0:
        sys.exit(f"protoc failed: {code}")
    sys.path.insert(0, out)
    module = importlib.import_module("value_pb2")
    cls = module
    for part in message.split("."):
        cls = getattr(cls, part)
    deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    fields, oneof, colours = set(), set(), set()

    def note(value):
        for field, _ in value.ListFields():
            fields.add(field.name)
        if value.DESCRIPTOR.oneofs_by_name.get("choice"):
            which = value.WhichOneof("choice")
            if which:
                oneof.add(which)
        if "colour" in value.DESCRIPTOR.fields_by_name:
            colours.add(value.colour)

    summary = read_all(bootstrap, topic, "read-proto", expected, deserializer, note)
    summary["fields_set"] = sorted(fields)
    summary["oneof"] = sorted(oneof)
    summary["colours"] = sorted(colours)
    print(json.dumps(summary))
finally:
    shutil.rmtree(out, ignore_errors=True)
