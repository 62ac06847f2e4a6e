"""What a send's body and properties say: a batch body's messages, the WAIT property.

    entries = decode_batch(body)        # [(flag, body, properties)], or BatchError raised
    rest, wait = strip_wait(properties)

Both as RocketMQ 4.9 reads them (MessageDecoder.decodes; WAIT unless it says "false").
"""

from __future__ import annotations

import struct

from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.message import MessageConst, property_value

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen


class MessageIllegal(SidewinderError):
    code = ResponseCode.MESSAGE_ILLEGAL


class BatchError(MessageIllegal):
    """A SEND_BATCH_MESSAGE body that does not decode."""


def decode_batch(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(flag, body, properties) of each message of a batch body (MessageDecoder.decodes)."""
    messages = []
    at = 0
    while at < len(data):
        if at + _BATCH_HEAD.size > len(data):
            raise BatchError(f"batch entry at byte {at} is truncated")
        total, _, _, flag, body_len = _BATCH_HEAD.unpack_from(data, at)
        body_at = at + _BATCH_HEAD.size
        props_len_at = body_at + body_len
        if body_len < 0 or props_len_at + 2 > len(data):
            raise BatchError(f"batch entry at byte {at} has a bad body length {body_len}")
        (props_len,) = struct.unpack_from(">h", data, props_len_at)
        end = props_len_at + 2 + props_len
        if props_len < 0 or end > len(data) or (total and at + total != end):
            raise BatchError(f"batch entry at byte {at} does not add up")
        messages.append((flag, data[body_at:props_len_at], data[props_len_at + 2 : end]))
        at = end
    return messages


def strip_wait(properties: str) -> tuple[str, bool]:
    """The properties less WAIT, and whether the producer waits for the flush (RocketMQ: unless
    WAIT is "false"). A plain message is stored without it, as RocketMQ 4.9 stores it."""
    at = properties.find("WAIT\x01")
    while at > 0 and properties[at - 1] != "\x02":  # the tail of another name
        at = properties.find("WAIT\x01", at + 1)
    if at == -1:
        return properties, True
    end = properties.find("\x02", at)
    if end == -1:
        value = properties[at + 5 :]
        rest = properties[: max(at - 1, 0)]
    else:
        value = properties[at + 5 : end]
        rest = properties[:at] + properties[end + 1 :]
    if "WAIT\x01" in rest:  # another one: all go, the first one says
        rest, _ = strip_wait(rest)
    return rest, value.lower() != "false"


def waits(properties: bytes) -> bool:
    wait = property_value(properties, MessageConst.WAIT_STORE_MSG_OK)
    return wait is None or wait.lower() != "false"


def unavailable(remark: str) -> str:
    """SERVICE_NOT_AVAILABLE's remark for a send the store did not take."""
    return (
        "service not available now. It may be caused by one of the following reasons: "
        f"the broker's disk is full, messages are put to the slave, message store has been "
        f"shut down, etc. ({remark})"
    )
