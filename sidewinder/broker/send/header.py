"""What the frame decoder reads of a SEND_MESSAGE_V2 JSON header, straight from its bytes.

    fields = send_v2_fields(header_bytes)
    # (opaque, flag, topic, queueId, sysFlag, bornTimestamp, flag, reconsumeTimes, properties),
    # or None: the header is not a plain SEND_MESSAGE_V2 one, decode it in full (slow path)
    request = send_v2_fields(header_bytes, SendRequest, head, tail)
    # the same fields as a SendRequest, between head's and tail's: no tuple rebuilt per message

`send_v2_fields_py` is the reference: the full JSON decode (remoting.codec) then the ext fields
read as plain decimals (`digits`), as the route step's fast path takes them. The Rust extension's
`send_v2_fields` parses only what a plain header holds and gives None for anything unusual
(a key it does not expect, a repeated key, a value that is not a string, an escape it does not
take); where it gives a tuple, it is the reference's (tests/broker/send/test_header.py fuzzes
both with generated headers and the mutated real frames of the wire captures).
`send_batch_fields` is the same for a SEND_BATCH_MESSAGE header (the same short field names).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar, overload

from sidewinder.common.native import implementation
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.codec import FrameError, decode_json_header

SendV2Fields = tuple[int, int, str, int, int, int, int, int, str]
Header = bytes | bytearray | memoryview
T = TypeVar("T", bound=tuple[Any, ...])
INT32_DIGITS = 9  # every number of up to 9 digits fits an int32; longer ones take the slow path
INT64_DIGITS = 18
_INTEGER = re.compile(r"[+-]?\d+")  # protocol.headers' rule for a number


def digits(text: str | None, width: int) -> int | None:
    """A non-negative decimal of at most `width` ASCII digits, else None (for the slow path to
    accept or refuse with its own remark)."""
    if text and len(text) <= width and text.isdigit() and text.isascii():
        return int(text)
    return None


@overload
def send_v2_fields_py(header: Header) -> SendV2Fields | None: ...
@overload
def send_v2_fields_py(
    header: Header, into: type[T], head: tuple[Any, ...], tail: tuple[Any, ...]
) -> T | None: ...
def send_v2_fields_py(
    header: Header,
    into: type[tuple[Any, ...]] | None = None,
    head: tuple[Any, ...] | None = None,
    tail: tuple[Any, ...] | None = None,
) -> tuple[Any, ...] | None:
    """The reference: what the frame decoder reads, after a full decode of the header. Given
    `into` (a tuple type), `head` and `tail`: `into`'s tuple of the fields between those (the
    send pipeline's request, made in one go)."""
    command = _decoded(header, RequestCode.SEND_MESSAGE_V2)
    fields = None if command is None else _fields(command)
    if fields is None:
        return None
    whole = (head or ()) + fields + (tail or ())
    return whole if into is None else tuple.__new__(into, whole)


def send_batch_fields_py(header: Header) -> SendV2Fields | None:
    """send_v2_fields's tuple for a SEND_BATCH_MESSAGE header (the same short field names; the
    body holds the messages), read the reference's way."""
    command = _decoded(header, RequestCode.SEND_BATCH_MESSAGE)
    return None if command is None else _fields(command)


def _decoded(header: bytes | bytearray | memoryview, code: int) -> RemotingCommand | None:
    try:
        command = decode_json_header(header)
    except FrameError:
        return None
    return command if command.code == code else None


def _fields(command: RemotingCommand) -> SendV2Fields | None:
    """The tuple of a send's decoded header: every field the fast path needs, numbers as
    `digits`."""
    ext = command.ext_fields
    if ext is None or "a" not in ext or "c" not in ext:
        return None
    # Numbers the fast path does not use but the generic decode parses (and refuses when they
    # do not): defaultTopicQueueNums, and maxReconsumeTimes when there.
    if digits(ext.get("d"), INT32_DIGITS) is None or (
        "l" in ext and digits(ext["l"], INT32_DIGITS) is None
    ):
        return None
    topic = ext.get("b")
    queue_id = digits(ext.get("e"), INT32_DIGITS)
    sys_flag = digits(ext.get("f"), INT32_DIGITS)
    born_timestamp = digits(ext.get("g"), INT64_DIGITS)
    flag = digits(ext.get("h"), INT32_DIGITS)
    reconsume = digits(ext.get("j", "0"), INT32_DIGITS)
    if (
        topic is None
        or queue_id is None
        or sys_flag is None
        or born_timestamp is None
        or flag is None
        or reconsume is None
    ):
        return None
    return (
        command.opaque,
        command.flag,
        topic,
        queue_id,
        sys_flag,
        born_timestamp,
        flag,
        reconsume,
        ext.get("i") or "",
    )


send_v2_fields = implementation("send_v2_fields", send_v2_fields_py)
send_batch_fields = implementation("send_batch_fields", send_batch_fields_py)
