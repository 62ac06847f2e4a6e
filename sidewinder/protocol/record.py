"""The CommitLog record layout of RocketMQ 4.x, byte for byte (also the body of PULL_MESSAGE,
QUERY_MESSAGE and VIEW_MESSAGE_BY_ID replies, so the client decodes what the store writes).

    TOTALSIZE 4 | MAGICCODE 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 | PHYSICALOFFSET 8
    | SYSFLAG 4 | BORNTIMESTAMP 8 | BORNHOST 8 (20 if IPv6) | STORETIMESTAMP 8
    | STOREHOSTADDRESS 8 (20 if IPv6) | RECONSUMETIMES 4 | PREPARED TRANSACTION OFFSET 8
    | BODYLENGTH 4 + BODY | TOPICLENGTH 1 (2 with the V2 magic) + TOPIC | PROPERTIESLENGTH 2 + PROPS

All integers are big-endian and signed, as Java writes them. A segment's unused tail starts with a
blank record: TOTALSIZE = the bytes left, MAGICCODE = BLANK_MAGIC. Decoding returns views into
the buffer it was given, never copies.
"""

from __future__ import annotations

import mmap
import socket
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any, ClassVar

from sidewinder.common.native import implementation
from sidewinder.protocol.message import decode_properties, encode_properties

MESSAGE_MAGIC = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477  # 0xDAA320AB: 5.x, 2-byte topic length for topics over 127 bytes
BLANK_MAGIC = -875286124  # 0xCBD43194
# A segment must keep room for a blank record's TOTALSIZE and MAGICCODE after its last message.
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_LENGTH_V1 = 127
MAX_PROPERTIES_LENGTH = 32767


class MessageSysFlag(IntFlag):
    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80


# Plain ints for masking: an IntFlag complement would drop the bits the enum does not name.
TRANSACTION_TYPE_MASK = 0xC
HOSTS_V6_MASK = 0x30
BORNHOST_V6_BIT = int(MessageSysFlag.BORNHOST_V6)
STOREHOST_V6_BIT = int(MessageSysFlag.STOREHOST_V6)
# The 4.9.8 client records its compression in bits 8-10 (ZLIB 0x300); 4.x only writes ZLIB.
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4, COMPRESSION_ZSTD, COMPRESSION_ZLIB = 0x100, 0x200, 0x300

# TOTALSIZE .. SYSFLAG, then BORNTIMESTAMP: everything before the first host.
_HEAD = struct.Struct(">iiiiiqqiq")
_HOST_V4 = struct.Struct(">4si")
_HOST_V6 = struct.Struct(">16si")
_STORE_TS = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPARED TRANSACTION OFFSET, BODYLENGTH
_I32 = struct.Struct(">i")
# Everything up to BODYLENGTH when both hosts are IPv4 (one pack_into for the common case).
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_U16 = struct.Struct(">H")
_BLANK = struct.Struct(">ii")

QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
STORE_TIMESTAMP_POSITION_V4 = 56


class RecordError(ValueError):
    """Bytes at a position are not a valid record: the message says which field and why."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"bad record at byte {position}: {reason}")
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Host:
    """A socket address as records store it: raw address bytes (4 or 16) and port."""

    address: bytes
    port: int

    @property
    def is_v6(self) -> bool:
        return len(self.address) == 16

    def __str__(self) -> str:
        family = socket.AF_INET6 if self.is_v6 else socket.AF_INET
        return f"{socket.inet_ntop(family, self.address)}:{self.port}"


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC: java.util.zip.CRC32 of the stored body, masked to a positive int."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One decoded record. `body`, `topic_bytes` and `properties_bytes` view the source buffer."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    phy_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: Host
    store_timestamp: int
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    body: memoryview
    topic_bytes: memoryview
    properties_bytes: memoryview

    @property
    def topic(self) -> str:
        return bytes(self.topic_bytes).decode("utf-8", "surrogateescape")

    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_bytes)

    def crc_ok(self) -> bool:
        return body_crc(self.body) == self.body_crc

    def uncompressed_body(self) -> bytes:
        """The body the producer sent: inflated when the COMPRESSED flag is set.

        4.x clients compress with zlib and mark it 0x300 or (before 4.9.8) not at all;
        LZ4 and ZSTD are 5.x types this store does not inflate. A gzip body (what RocketMQ 5's
        proxy stores for a 5.x client's GZIP encoding) inflates too.
        """
        if not self.sys_flag & int(MessageSysFlag.COMPRESSED):
            return bytes(self.body)
        kind = self.sys_flag & COMPRESSION_TYPE_MASK
        if kind not in (0, COMPRESSION_ZLIB):
            raise ValueError(
                f"compression type {kind:#x} of message at {self.phy_offset} is not zlib"
            )
        return zlib.decompress(self.body, ZLIB_OR_GZIP)


ZLIB_OR_GZIP = 47  # zlib's wbits: a zlib or a gzip header, detected


@dataclass(frozen=True, slots=True)
class BlankRecord:
    """The end-of-segment filler: `total_size` bytes to the end of the file."""

    total_size: int


def host_length(sys_flag: int, flag_bit: int) -> int:
    return 20 if sys_flag & flag_bit else 8


def record_size(
    *, body_len: int, topic_len: int, properties_len: int, sys_flag: int = 0, v2: bool = False
) -> int:
    """TOTALSIZE of a record with these variable parts (calMsgLength in CommitLog.java)."""
    return (
        4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_length(sys_flag, BORNHOST_V6_BIT)
        + 8
        + host_length(sys_flag, STOREHOST_V6_BIT)
        + 4
        + 8
        + 4
        + body_len
        + (2 if v2 else 1)
        + topic_len
        + 2
        + properties_len
    )


# A record of IPv4 hosts, a V1 topic and nothing in its body, topic or properties.
_FIXED_V4_SIZE = record_size(body_len=0, topic_len=0, properties_len=0)


# Not frozen: a frozen dataclass's __init__ (a setattr call per field) tripled the cost of
# making one, and every send makes one. Treat it as immutable all the same: its record size
# and stored SYSFLAG are worked out at construction (dataclasses.replace makes a new one).
@dataclass(slots=True)
class MessageToStore:
    """What the store needs of an incoming message; queue and physical offsets come at append.

    Its record size and stored SYSFLAG are worked out once, at construction: the append path
    asks for them several times per message.
    """

    topic: bytes
    queue_id: int
    body: bytes | memoryview
    properties: bytes
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = Host(b"\x7f\x00\x00\x01", 0)
    store_host: Host = Host(b"\x7f\x00\x00\x01", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # sys_flag with the IPv6 bits set from the hosts themselves.
    stored_sys_flag: int = field(init=False, repr=False, compare=False)
    record_size: int = field(init=False, repr=False, compare=False)
    topic_name: str = field(init=False, repr=False, compare=False)
    # One record (a BatchToStore, which the CommitLog's append takes beside these, is many).
    batch: ClassVar[bool] = False
    count: ClassVar[int] = 1

    def __post_init__(self) -> None:
        flag = int(self.sys_flag) & ~HOSTS_V6_MASK
        # record_size() spelled out: this runs for every message put.
        size = _FIXED_V4_SIZE + len(self.body) + len(self.topic) + len(self.properties)
        if len(self.born_host.address) == 16:
            flag |= 0x10  # BORNHOST_V6
            size += 12
        if len(self.store_host.address) == 16:
            flag |= 0x20  # STOREHOST_V6
            size += 12
        if len(self.topic) > MAX_TOPIC_LENGTH_V1:
            size += 1
        self.stored_sys_flag = flag
        self.record_size = size
        # surrogateescape: any bytes decode, and the same way MessageRecord.topic does.
        self.topic_name = self.topic.decode("utf-8", "surrogateescape")

    @property
    def uses_v2(self) -> bool:
        return len(self.topic) > MAX_TOPIC_LENGTH_V1

    def size(self) -> int:
        return self.record_size


def message_from_record(
    record: MessageRecord,
    *,
    topic: str,
    queue_id: int,
    properties: Mapping[str, str] | bytes,
    **changes: Any,
) -> MessageToStore:
    """A stored message put again elsewhere (a due delayed message, a committed half message, a
    retry): the same body, flags, hosts and times, a new topic, queue and properties."""
    fields: dict[str, Any] = {
        "topic": topic.encode(),
        "queue_id": queue_id,
        "body": bytes(record.body),
        "properties": properties
        if isinstance(properties, bytes)
        else encode_properties(properties, trailing=False),
        "flag": record.flag,
        "sys_flag": record.sys_flag,
        "born_timestamp": record.born_timestamp,
        "born_host": record.born_host,
        "store_host": record.store_host,
        "reconsume_times": record.reconsume_times,
        "prepared_transaction_offset": record.prepared_transaction_offset,
    }
    fields.update(changes)
    return MessageToStore(**fields)


def encode_record_py(
    message: MessageToStore,
    buffer: bytearray | memoryview,
    position: int,
    *,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
) -> int:
    """Write one record into `buffer` at `position`; returns its size. The caller checks room.

    The reference of the extension's encode_record, which writes the same bytes from the
    message's fields and also refuses a buffer too small for the record (IndexError) before
    writing anything."""
    properties = message.properties
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties of {len(properties)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    sys_flag = message.stored_sys_flag
    size = message.record_size
    body = message.body
    topic = message.topic
    born, store = message.born_host, message.store_host
    v2 = len(topic) > MAX_TOPIC_LENGTH_V1
    if not sys_flag & HOSTS_V6_MASK:
        # The common case in one pack: every fixed field up to BODYLENGTH.
        _FIXED_V4.pack_into(
            buffer,
            position,
            size,
            MESSAGE_MAGIC_V2 if v2 else MESSAGE_MAGIC,
            zlib.crc32(body) & 0x7FFFFFFF,
            message.queue_id,
            message.flag,
            queue_offset,
            phy_offset,
            sys_flag,
            message.born_timestamp,
            born.address,
            born.port,
            store_timestamp,
            store.address,
            store.port,
            message.reconsume_times,
            message.prepared_transaction_offset,
            len(body),
        )
        pos = position + _FIXED_V4.size
    else:
        _HEAD.pack_into(
            buffer,
            position,
            size,
            MESSAGE_MAGIC_V2 if v2 else MESSAGE_MAGIC,
            zlib.crc32(body) & 0x7FFFFFFF,
            message.queue_id,
            message.flag,
            queue_offset,
            phy_offset,
            sys_flag,
            message.born_timestamp,
        )
        pos = _pack_host(buffer, position + _HEAD.size, born)
        _STORE_TS.pack_into(buffer, pos, store_timestamp)
        pos = _pack_host(buffer, pos + 8, store)
        _TAIL.pack_into(
            buffer, pos, message.reconsume_times, message.prepared_transaction_offset, len(body)
        )
        pos += _TAIL.size
    end = pos + len(body)
    buffer[pos:end] = body
    pos = end
    if v2:
        _U16.pack_into(buffer, pos, len(topic))
        pos += 2
    else:
        buffer[pos] = len(topic)
        pos += 1
    end = pos + len(topic)
    buffer[pos:end] = topic
    _U16.pack_into(buffer, end, len(properties))
    pos = end + 2
    end = pos + len(properties)
    buffer[pos:end] = properties
    if end - position != size:
        raise AssertionError(f"encoded {end - position} bytes of a {size}-byte record")
    return size


def _encode_record_natively(encode: Callable[..., int]) -> Callable[..., int]:
    """The extension's encode_record, which takes the record's fields, called as the reference."""

    def encode_record(
        message: MessageToStore,
        buffer: bytearray | memoryview,
        position: int,
        *,
        queue_offset: int,
        phy_offset: int,
        store_timestamp: int,
    ) -> int:
        born, store = message.born_host, message.store_host
        return encode(
            buffer,
            position,
            message.topic,
            message.queue_id,
            message.body,
            message.properties,
            message.flag,
            message.stored_sys_flag,
            message.born_timestamp,
            born.address,
            born.port,
            store_timestamp,
            store.address,
            store.port,
            message.reconsume_times,
            message.prepared_transaction_offset,
            queue_offset,
            phy_offset,
        )

    return encode_record


# What writers call: the extension's encoder when it is in use (common/native.py), byte for
# byte as the reference (tests/store/test_message_codec.py compares them).
encode_record = implementation("encode_record", encode_record_py, _encode_record_natively)


def encode_blank(buffer: bytearray | memoryview, position: int, total_size: int) -> None:
    _BLANK.pack_into(buffer, position, total_size, BLANK_MAGIC)


def _pack_host(buffer: bytearray | memoryview, pos: int, host: Host) -> int:
    layout = _HOST_V6 if host.is_v6 else _HOST_V4
    layout.pack_into(buffer, pos, host.address, host.port)
    return pos + layout.size


def _unpack_host(view: memoryview, pos: int, v6: bool) -> tuple[Host, int]:
    layout = _HOST_V6 if v6 else _HOST_V4
    address, port = layout.unpack_from(view, pos)
    return Host(address, port), pos + layout.size


def _frame(view: memoryview, position: int) -> tuple[int, int] | int | None:
    """The checks every reader makes first: (total size, magic) of a message that fits, the
    blank tail's size as an int, or None where nothing was written; RecordError otherwise."""
    limit = len(view)
    if position + 8 > limit:
        return None
    total, magic = _BLANK.unpack_from(view, position)
    if magic == BLANK_MAGIC:
        if total < END_FILE_MIN_BLANK_LENGTH or position + total > limit:
            raise RecordError(position, f"blank record of {total} bytes does not fit")
        return total
    if total == 0 and magic == 0:
        return None
    if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        raise RecordError(position, f"magic code {magic & 0xFFFFFFFF:#010x}")
    if total <= 0 or position + total > limit:
        raise RecordError(position, f"total size {total} runs past the {limit}-byte buffer")
    return total, magic


Buffer = bytes | bytearray | memoryview | mmap.mmap


def decode_record(
    buffer: Buffer, position: int = 0, *, check_crc: bool = False
) -> MessageRecord | BlankRecord | None:
    """The record at `position`: a message, the blank tail, or None where nothing was written.

    Raises RecordError for bytes that are neither (a torn or corrupt record), naming the field.
    """
    view = memoryview(buffer)
    framed = _frame(view, position)
    if framed is None:
        return None
    if isinstance(framed, int):
        return BlankRecord(framed)
    total_size, magic = framed
    try:
        return _decode_message(view, position, total_size, magic, check_crc)
    except struct.error as exc:
        raise RecordError(position, f"truncated: {exc}") from None


def message_records(buffer: Buffer) -> list[MessageRecord]:
    """The whole message records at the start of `buffer` (a pull, pop or query reply's body),
    up to the first thing that is not one."""
    records, at = [], 0
    while at < len(buffer):
        record = decode_record(buffer, at)
        if not isinstance(record, MessageRecord):
            break
        records.append(record)
        at += record.total_size
    return records


def _decode_message(
    view: memoryview, position: int, total_size: int, magic: int, check_crc: bool
) -> MessageRecord:
    end = position + total_size
    (_, _, crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts) = _HEAD.unpack_from(
        view, position
    )
    pos = position + _HEAD.size
    born_host, pos = _unpack_host(view, pos, bool(sys_flag & BORNHOST_V6_BIT))
    (store_ts,) = _STORE_TS.unpack_from(view, pos)
    store_host, pos = _unpack_host(view, pos + 8, bool(sys_flag & STOREHOST_V6_BIT))
    reconsume, prepared, body_len = _TAIL.unpack_from(view, pos)
    pos += _TAIL.size
    if body_len < 0 or pos + body_len > end:
        raise RecordError(position, f"body length {body_len} runs past the record")
    body = view[pos : pos + body_len]
    pos += body_len
    if magic == MESSAGE_MAGIC_V2:
        (topic_len,) = _U16.unpack_from(view, pos)
        pos += 2
    else:
        topic_len = view[pos]
        pos += 1
    topic = view[pos : pos + topic_len]
    pos += topic_len
    (props_len,) = _U16.unpack_from(view, pos)
    pos += 2
    properties = view[pos : pos + props_len]
    pos += props_len
    if pos != end:
        raise RecordError(position, f"fields end at {pos - position}, total size says {total_size}")
    record = MessageRecord(
        total_size,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        phy_offset,
        sys_flag,
        born_ts,
        born_host,
        store_ts,
        store_host,
        reconsume,
        prepared,
        body,
        topic,
        properties,
    )
    if check_crc and not record.crc_ok():
        raise RecordError(position, f"body CRC {body_crc(body)} != stored {crc}")
    return record


_SCAN_HEAD = struct.Struct(">iiiiiqqi")  # TOTALSIZE .. SYSFLAG
_BORN_TS_AT = _SCAN_HEAD.size  # 44
# With two IPv4 hosts, every fixed field a scan needs in one unpack (hosts and the rest skipped).
_SCAN_V4 = struct.Struct(">iiiiiqqi8x8xq8x12xi")


ScannedRecord = tuple[int, int, bytes, int, int, int, int, memoryview]


def scan_record(view: memoryview, position: int, *, check_crc: bool) -> ScannedRecord | int | None:
    """Recovery's and dispatch's lean read of the record at `position` (no MessageRecord).

    Returns (total size, PHYSICALOFFSET, topic bytes, queue id, queue offset, sysflag,
    STORETIMESTAMP, properties view) for a sound message, the blank record's size as an int,
    None where nothing was written; raises RecordError otherwise (decode_record's rules).
    """
    framed = _frame(view, position)
    if framed is None or isinstance(framed, int):
        return framed
    total, magic = framed
    try:
        (_, _, crc, queue_id, _, queue_offset, phy, sys_flag, store_ts, body_len) = (
            _SCAN_V4.unpack_from(view, position)
        )
        if sys_flag & HOSTS_V6_MASK:
            stamp_at = position + _BORN_TS_AT + 8 + (20 if sys_flag & BORNHOST_V6_BIT else 8)
            (store_ts,) = _STORE_TS.unpack_from(view, stamp_at)
            at = stamp_at + 8 + (20 if sys_flag & STOREHOST_V6_BIT else 8) + 12
            (body_len,) = _I32.unpack_from(view, at)
            body_at = at + 4
        else:
            body_at = position + _SCAN_V4.size
        topic_at = body_at + body_len
        if magic == MESSAGE_MAGIC_V2:
            (topic_len,) = _U16.unpack_from(view, topic_at)
            topic_at += 2
        else:
            topic_len = view[topic_at]
            topic_at += 1
        (props_len,) = _U16.unpack_from(view, topic_at + topic_len)
    except (struct.error, IndexError):
        raise RecordError(position, "truncated") from None
    if body_len < 0 or topic_at + topic_len + 2 + props_len != position + total:
        raise RecordError(position, f"fields do not add up to total size {total}")
    if (
        check_crc
        and zlib.crc32(view[body_at : topic_at - (2 if magic == MESSAGE_MAGIC_V2 else 1)])
        & 0x7FFFFFFF
        != crc
    ):
        raise RecordError(position, "body CRC mismatch")
    props_at = topic_at + topic_len + 2
    return (
        total,
        phy,
        bytes(view[topic_at : topic_at + topic_len]),
        queue_id,
        queue_offset,
        sys_flag,
        store_ts,
        view[props_at : props_at + props_len],
    )
