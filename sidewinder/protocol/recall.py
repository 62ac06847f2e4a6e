"""RocketMQ 5's recall of a timer message (RECALL_MESSAGE, 370): the handle a send's reply
carries for a message held by the timer, and the request that cancels its delivery.

The handle is URL-safe base64 of "v1 <topic> <brokerName> <deliver ms> <message id>", where the
deliver time is the timer slot's time plus one (RocketMQ rounds the slot down) and the id is
the message's UNIQ_KEY:

    handle = recall_handle("Orders", "broker-a", 1_700_000_001_001, "7F00...")
    RecallMessageRequestHeader(topic="Orders", recall_handle=handle, producer_group="P")
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from sidewinder.protocol.headers import CommandHeader, wire

ILLEGAL_OPERATION = 604  # RocketMQ 5's code for a recall it cannot do
RECALL_TAG = "_RECALL_TAG_"  # the tag of the delete marker a recall stores
_VERSION_1 = "v1"


class RecallHandleError(ValueError):
    """A handle that does not decode; the message is RocketMQ's remark for it."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str  # as the handle carries it: RocketMQ parses it only when it checks the time
    message_id: str

    def encode(self) -> str:
        raw = " ".join((_VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def decode(cls, handle: str | None) -> RecallHandle:
        if not handle:
            raise RecallHandleError("recall handle is invalid")
        try:
            raw = base64.urlsafe_b64decode(_padded(handle)).decode()
        except (binascii.Error, ValueError):
            raise RecallHandleError("recall handle is invalid") from None
        items = raw.split(" ")
        if items[0] != _VERSION_1 or len(items) < 5:
            raise RecallHandleError("recall handle is invalid")
        return cls(items[1], items[2], items[3], items[4])


def _padded(handle: str) -> str:
    # Java's URL decoder takes a handle with or without its padding.
    return handle + "=" * (-len(handle) % 4)


def recall_handle(topic: str, broker_name: str, deliver_ms: int, message_id: str) -> str:
    return RecallHandle(topic, broker_name, str(deliver_ms), message_id).encode()


@dataclass(slots=True)
class RecallMessageRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    recall_handle: str = wire("recallHandle", required=True)
    producer_group: str | None = wire("producerGroup")
    broker_name: str | None = wire("bname")


@dataclass(slots=True)
class RecallMessageResponseHeader(CommandHeader):
    msg_id: str = wire("msgId", required=True)
