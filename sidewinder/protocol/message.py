"""Message-level wire facts shared by store, broker and client: properties, ids, tag codes."""

from __future__ import annotations

import functools
import operator
import socket
import struct
from collections.abc import Mapping

from sidewinder.common.native import implementation

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "  # KEYS holds several keys separated by spaces


class MessageConst:
    """Property names RocketMQ 4.x gives meaning to (MessageConst.java)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    CLUSTER = "CLUSTER"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    # Request-reply (DefaultMQProducer.request, MessageUtil.createReplyMessage).
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    MESSAGE_TYPE = "MSG_TYPE"
    # RocketMQ 5's timer messages: what a producer sets (one of the first three)...
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    # ...and what the broker adds.
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"


REPLY_MESSAGE_FLAG = "reply"  # MSG_TYPE of a reply (MixAll.REPLY_MESSAGE_FLAG)


def reply_topic(cluster: str) -> str:
    """Where replies to requests stored in `cluster` go (MixAll.getReplyTopic)."""
    return f"{cluster}_REPLY_TOPIC"


def encode_properties(properties: Mapping[str, str], *, trailing: bool = True) -> bytes:
    """`k\\x01v\\x02` per pair, UTF-8, as Java's messageProperties2String writes it; without
    the last separator (`trailing=False`) as a 4.9 broker stores them."""
    text = "".join(
        f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"
        for name, value in properties.items()
    )
    return (text if trailing else text[:-1] if text else text).encode()


def decode_properties(data: bytes | bytearray | memoryview) -> dict[str, str]:
    """The inverse of encode_properties; like Java, a pair without its separator is skipped."""
    properties: dict[str, str] = {}
    for pair in bytes(data).decode(errors="surrogateescape").split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            properties[name] = value
    return properties


def property_value(data: bytes | bytearray | memoryview, name: str) -> str | None:
    """One property's value without decoding the rest (hot paths ask for one key)."""
    raw = bytes(data)
    needle = name.encode() + b"\x01"
    start = 0
    while (at := raw.find(needle, start)) != -1:
        if at == 0 or raw[at - 1] == 2:  # a whole name, not the tail of another
            end = raw.find(b"\x02", at)
            return raw[at + len(needle) : end if end != -1 else len(raw)].decode(
                errors="surrogateescape"
            )
        start = at + 1
    return None


def without_property(data: bytes, name: str) -> bytes:
    """`data` less the property `name`, the other pairs untouched (byte for byte, in order), with
    no decoding: the send path drops WAIT from nearly every message this way."""
    needle = name.encode() + b"\x01"
    start = 0
    while (at := data.find(needle, start)) != -1:
        if at and data[at - 1] != 2:  # the tail of another name
            start = at + 1
            continue
        end = data.find(b"\x02", at)
        if end == -1:  # the last pair: its separator is the one before it
            return data[: max(at - 1, 0)]
        data = data[:at] + data[end + 1 :]
        start = at
    return data


# 31**k mod 2**32, newest power last: a hash is one C-level sum over the code units.
_POWERS_31 = [pow(31, k, 1 << 32) for k in range(1024)]
_POWERS_31.reverse()


def java_string_hash_py(text: str) -> int:
    """Java's `String.hashCode()`: 31-polynomial over UTF-16 code units, as a signed int32."""
    if text.isascii():
        units: bytes | list[int] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", errors="surrogatepass")
        units = [unit for (unit,) in struct.iter_unpack(">H", raw)]
    n = len(units)
    if n <= len(_POWERS_31):
        h = sum(map(operator.mul, units, _POWERS_31[len(_POWERS_31) - n :])) & 0xFFFFFFFF
    else:
        h = 0
        for unit in units:
            h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tags code of a message: its TAGS' hashCode, 0 without tags."""
    return java_string_hash(tags) if tags else 0


def encode_offset_msg_id(host: bytes, port: int, phy_offset: int) -> str:
    """The broker's msgId: store host (4 or 16 address bytes) + port + CommitLog offset, hex."""
    if len(host) not in (4, 16):
        raise ValueError(f"a store host address has 4 or 16 bytes, not {len(host)}")
    return (host + struct.pack(">iq", port, phy_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(host, port, phy_offset) of a 32-hex (IPv4) or 56-hex (IPv6) offsetMsgId."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"msgId {msg_id!r} is not hex") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"msgId {msg_id!r} has {len(raw)} bytes, not 16 (IPv4) or 28 (IPv6)")
    family = socket.AF_INET if len(raw) == 16 else socket.AF_INET6
    address_len = len(raw) - 12
    port, phy_offset = struct.unpack_from(">iq", raw, address_len)
    return socket.inet_ntop(family, raw[:address_len]), port, phy_offset


# The Rust extension's when it is in use (common/native.py): the same answer for every str
# (tests/protocol/test_message.py compares them).
java_string_hash = implementation("java_string_hash", java_string_hash_py)
