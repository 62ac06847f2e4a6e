"""Headers and bodies of the calls a broker forwards to its clients for mqadmin: offset resets
(222 -> 220), consumer status (223 -> 221), running info (307) and consuming one message
directly (309). Broker and client both use them, so they live beside the other wire types.

    header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
    body = reset_offset_body({MessageQueue("T", "broker-a", 0): 42})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sidewinder.protocol import body
from sidewinder.protocol.body import ObjectKey
from sidewinder.protocol.headers import CommandHeader, wire

# MQVersion.Version ordinals below which RocketMQ refuses to call a client.
V3_0_7_SNAPSHOT = 28
V3_1_8_SNAPSHOT = 62


class QueueKey(NamedTuple):
    """A MessageQueue as a map key on the wire (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def object_key(self) -> ObjectKey:
        return ObjectKey(brokerName=self.broker_name, queueId=self.queue_id, topic=self.topic)


@dataclass(slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str = wire("topic", required=True)
    group: str = wire("group", required=True)
    timestamp: int = wire("timestamp", required=True, long=True)
    is_force: bool = wire("isForce", required=True)


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str = wire("topic", required=True)
    group: str = wire("group", required=True)
    client_addr: str | None = wire("clientAddr")


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    client_id: str = wire("clientId", required=True)
    jstack_enable: bool | None = wire("jstackEnable")


@dataclass(slots=True)
class ConsumeMessageDirectlyRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    client_id: str | None = wire("clientId")
    msg_id: str | None = wire("msgId")
    broker_name: str | None = wire("brokerName")


def offset_table_json(offsets: dict[QueueKey, int]) -> dict[Any, int]:
    """A Map<MessageQueue, Long> as fastjson writes it: object keys."""
    return {q.object_key(): offset for q, offset in sorted(offsets.items())}


def reset_offset_body(offsets: dict[QueueKey, int], *, for_cpp: bool = False) -> bytes:
    """ResetOffsetBody, or ResetOffsetBodyForC (a list, as the C++ client reads it) when the
    admin request came from a C++ client, as RocketMQ decides it."""
    if for_cpp:
        listed = [
            {"brokerName": q.broker_name, "offset": o, "queueId": q.queue_id, "topic": q.topic}
            for q, o in sorted(offsets.items())
        ]
        return body.dumps({"offsetTable": listed}).encode()
    return body.dumps({"offsetTable": offset_table_json(offsets)}).encode()


def parse_offset_table(data: bytes, field: str = "offsetTable") -> dict[QueueKey, int]:
    """A Map<MessageQueue, Long> from a body: object keys (ResetOffsetBody,
    GetConsumerStatusBody) or the C++ list form."""
    if not data:
        return {}
    pairs = body.object_keyed_pairs(data, field)
    if not pairs:
        loaded = body.loads(data).get(field)
        if isinstance(loaded, list):
            pairs = [(e, e.get("offset")) for e in loaded if isinstance(e, dict)]
    table: dict[QueueKey, int] = {}
    for key, value in pairs:
        if isinstance(key, dict) and value is not None:
            queue = QueueKey(str(key["topic"]), str(key["brokerName"]), int(key["queueId"]))
            table[queue] = int(value)
    return table


def consumer_status_body(
    consumer_table: dict[str, dict[QueueKey, int]] | None = None,
    queue_table: dict[QueueKey, int] | None = None,
) -> bytes:
    """GetConsumerStatusBody: a client's own table (221) or the broker's per client (223)."""
    return body.dumps(
        {
            "consumerTable": {
                client: offset_table_json(table) for client, table in (consumer_table or {}).items()
            },
            "messageQueueTable": offset_table_json(queue_table or {}),
        }
    ).encode()
