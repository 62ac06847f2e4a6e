"""The pieces of the send path that serve a whole received chunk at once (SendProcessor.take_batch):
WAIT taken out of a send's properties without decoding them, and answering from a pre-encoded
reply template.

The template gives, byte for byte, the frame the generic path encodes for the same successful
reply (tests/broker/test_send_batch.py compares the two); anything else (a refusal, a timeout, a
header that is not JSON) is answered the generic way.
"""

from __future__ import annotations

import struct

import orjson

from sidewinder.protocol.codes import CURRENT_VERSION, SerializeType
from sidewinder.protocol.message import encode_offset_msg_id
from sidewinder.protocol.record import Host

_PREFIX = struct.Struct(">ii")
_JSON_TYPE = SerializeType.JSON << 24
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


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
    if "WAIT\x01" in rest:  # another one: all go, the first one says (as on the slow path)
        rest, _ = strip_wait(rest)
    return rest, value.lower() != "false"


class SendReplyFrames:
    """Encoded SUCCESS replies to SEND_MESSAGE_V2, four numbers filled into a template."""

    def __init__(self, region: str, trace_on: bool, store_host: Host) -> None:
        self.key = (region, trace_on)
        host_hex = encode_offset_msg_id(store_host.address, store_host.port, 0)[:-16]
        tail = orjson.dumps({"MSG_REGION": region, "TRACE_ON": "true" if trace_on else "false"})
        header = (
            b'{"code":0,"extFields":{"msgId":"'
            + host_hex.encode()
            + b'%016X","queueId":"%d","queueOffset":"%d",'
            + tail[1:-1].replace(b"%", b"%%")
            + b'},"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON",'
            + b'"version":'
            + str(CURRENT_VERSION).encode()
            + b"}"
        )
        self._header = header

    def success(self, opaque: int, phy_offset: int, queue_id: int, queue_offset: int) -> bytes:
        header = self._header % (phy_offset, queue_id, queue_offset, opaque)
        return _PREFIX.pack(4 + len(header), _JSON_TYPE | len(header)) + header
