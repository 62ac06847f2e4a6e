"""RocketMQ 5's gRPC protocol (apache.rocketmq.v2, rocketmq-proto 2.0.4): its message classes
and enums, built at import from the descriptors in `descriptors.py`, in a descriptor pool of
our own.

A pool of our own, not protobuf's default one: a program that also imports the stock Python
client (which registers the same proto files, from a newer protos revision) must not fail on
duplicate symbols. The classes are protobuf's own, so they parse and serialize as generated
code would; they are typed `Any` (protobuf's Python classes are made at run time).
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    timestamp_pb2,
)
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from sidewinder.proxy.grpc_protocol import descriptors

PACKAGE = "apache.rocketmq.v2"
SERVICE_NAME = f"{PACKAGE}.MessagingService"

POOL = descriptor_pool.DescriptorPool()
for _known in (duration_pb2, timestamp_pb2):
    POOL.Add(descriptor_pb2.FileDescriptorProto.FromString(_known.DESCRIPTOR.serialized_pb))
for _encoded in (descriptors.DEFINITION, descriptors.SERVICE, descriptors.ADMIN):
    POOL.Add(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(_encoded)))


def message_class(name: str) -> Any:
    """The class of message `name` of the package (e.g. "SendMessageRequest")."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


def enum(name: str) -> Any:
    """The enum `name` of the package: `.Value("OK")`, `.Name(20000)`, attributes."""
    return EnumTypeWrapper(POOL.FindEnumTypeByName(f"{PACKAGE}.{name}"))


SERVICE = POOL.FindServiceByName(SERVICE_NAME)
Duration = message_factory.GetMessageClass(POOL.FindMessageTypeByName("google.protobuf.Duration"))
Timestamp = message_factory.GetMessageClass(POOL.FindMessageTypeByName("google.protobuf.Timestamp"))
_made: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """`grpc_protocol.SendMessageRequest`, `grpc_protocol.Code`: any message or enum of the
    package by its proto name."""
    made = _made.get(name)
    if made is None:
        try:
            made = message_class(name)
        except KeyError:
            try:
                made = enum(name)
            except KeyError:
                raise AttributeError(f"apache.rocketmq.v2 has no {name}") from None
        _made[name] = made
    return made
