"""What dispatch writes for a run of CommitLog records, worked out in one pass over a segment.

    scanned = scan_segment(segment.buffer, position, stop, readable, max_records, rules)
    batch = DispatchBatch.of(scanned, segment.file_from_offset, position)

A scan walks the records of one mapped segment from `position` and gives, per (topic, queue),
the packed ConsumeQueue entries of its committed or non-transactional messages, and for the
index every UNIQ_KEY and KEYS word of the others but rolled-back ones, hashed as IndexFile
keys (`topic#key`). No per-record object reaches Python: the native scan (sidewinder._native)
does it without the GIL, so the broker's loop thread runs meanwhile.

A scan stops at `max_records`, before a record that does not end by `stop`, at `readable`,
and before any record it leaves to the reference reader (reput's `_read_segment` and the
dispatchers' one-record path): the blank tail, bytes that are no record, and the odd message
(a property name found inside another, a TAGS or key that is not UTF-8, a DELAY that is not
plain digits). `scan_segment_py` is the reference of the native scan: the same tuple for
every input (tests/store/test_dispatch_scan.py compares them, and fuzzes both).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sidewinder.common.native import implementation
from sidewinder.protocol.message import tags_code
from sidewinder.protocol.record import (
    BORNHOST_V6_BIT,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    STOREHOST_V6_BIT,
    TRANSACTION_TYPE_MASK,
    MessageSysFlag,
)
from sidewinder.store.index_file import TopicKeyHasher

# Why a scan stopped.
STOPPED = 0  # at `max_records`, or before a record that ends past `stop`
EXHAUSTED = 1  # at `readable`: the segment has nothing more yet
DEFERRED = 2  # before a record the reference reader takes (see the module's doc)

SCHEDULE_TOPIC = b"SCHEDULE_TOPIC_XXXX"
_CQ_ENTRY = struct.Struct(">qiq")  # phy offset, size, tags code (consume_queue.CQ_ENTRY)
_HEAD = struct.Struct(">iiiiiqqiq")  # total .. bornTimestamp: 48 bytes, the same for every host
_STORE_TS = struct.Struct(">q")
_TAIL = struct.Struct(">i")  # BODYLENGTH, after reconsumeTimes and preparedTransactionOffset
_COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
_ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
_TAGS = b"TAGS\x01"
_DELAY = b"DELAY\x01"
_KEYS = b"KEYS\x01"
# Offsets and timestamps at or past this (or negative) are corrupt: such a record is deferred,
# so no sum here leaves an int64.
SANE_LIMIT = 1 << 62
_HASHER = TopicKeyHasher()
_UNIQ_KEY = b"UNIQ_KEY\x01"

# (topic, queue id, grown to, first queue offset, entries, one run, packed entries, max phy
# offset): `grown to` is one past the last queue offset of any record of the queue; the entries
# are its committed or non-transactional messages'; `one run` says their queue offsets follow
# each other; the max phy offset is where the last entry's record ends.
QueueRun = tuple[bytes, int, int, int, int, bool, bytes, int]
# (why it stopped, segment position after the last record taken, records taken, the last one's
# store timestamp, queue runs in order of first appearance, packed index_file.KEY_ENTRY keys)
ScanResult = tuple[int, int, int, int, list[QueueRun], bytes]


@dataclass(frozen=True, slots=True)
class ScanRules:
    """What a scan works out besides the records: the delay levels' milliseconds (level 1
    first: a delayed message's entry holds the time it is due), and whether to hash keys."""

    delay_levels_ms: tuple[int, ...] = ()
    keys: bool = False

    @classmethod
    def of(cls, delay_levels: dict[int, int], keys: bool) -> ScanRules:
        top = max(delay_levels, default=0)
        return cls(tuple(delay_levels.get(level, 1000) for level in range(1, top + 1)), keys)


@dataclass(frozen=True, slots=True)
class DispatchBatch:
    """A scan's records, for the dispatchers (CommitLog offsets absolute)."""

    start: int  # CommitLog offset of the first record
    end: int  # where the last one ends
    count: int
    last_store_timestamp: int
    queues: list[QueueRun]
    keys: bytes  # index_file.KEY_ENTRY per index key, in record order
    deferred: bool = False  # it stopped before a record the reference reader takes

    @classmethod
    def of(cls, scanned: ScanResult, segment_start: int, position: int) -> DispatchBatch:
        status, end, count, last_ts, queues, keys = scanned
        start, end = segment_start + position, segment_start + end
        return cls(start, end, count, last_ts, queues, keys, status == DEFERRED)


class _Deferred(Exception):
    """A message the reference reader takes (see the module's doc)."""


def _value(props: bytes, needle: bytes) -> bytes | None:
    """The value of the last property named by `needle` (its name and \\x01), None when
    absent: a match inside another name or a value (BIZ_KEYS, ...) is passed over, as
    decode_properties passes it."""
    at = props.rfind(needle)
    while at > 0 and props[at - 1] != 2:
        at = props.rfind(needle, 0, at)
    if at < 0:
        return None
    start = at + len(needle)
    end = props.find(b"\x02", start)
    return props[start:] if end < 0 else props[start:end]


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Deferred from None


def _tags_code(props: bytes, topic: bytes, store_ts: int, levels: Sequence[int]) -> int:
    """The ConsumeQueue tags code (dispatchers.ConsumeQueueDispatcher.cq_tags_code)."""
    tags = _value(props, _TAGS)
    code = tags_code(_utf8(tags)) if tags else 0
    if topic == SCHEDULE_TOPIC:
        delay = _value(props, _DELAY)
        if delay is not None and not (delay.isdigit() and delay.isascii()):
            raise _Deferred
        level = 0
        if delay is not None:
            # Past 18 digits it is past every level (and int() refuses 4,300 digits).
            level = len(levels) if len(delay.lstrip(b"0")) > 18 else min(int(delay), len(levels))
        if level > 0:
            code = store_ts + levels[level - 1]
    return code


def _key_hashes(props: bytes, topic: bytes) -> list[int]:
    """The index hash of each UNIQ_KEY and KEYS word (IndexDispatcher.keys)."""
    uniq = _value(props, _UNIQ_KEY)
    words = _value(props, _KEYS)
    keys = [uniq] if uniq else []
    if words:
        keys += [word for word in words.split(b" ") if word]
    if not keys:
        return []
    if not topic.isascii():
        _utf8(topic)
    for key in keys:
        if not key.isascii():
            _utf8(key)
    return [_HASHER.key_hash(topic, key) for key in keys]


def scan_segment_py(
    data: Any,
    position: int,
    stop: int,
    readable: int,
    max_records: int,
    rules: ScanRules,
) -> ScanResult:
    """The reference scan of one segment (`data`: its buffer); see the module's doc."""
    view = memoryview(data)
    if position < 0 or not position <= readable <= len(view) or max_records < 0:
        raise ValueError(
            f"cannot scan {len(view)} bytes from {position} to {readable}, {max_records} records"
        )
    runs: dict[tuple[bytes, int], list[Any]] = {}  # QueueRun's fields, entries as a list
    keys: list[int] = []
    count = last_ts = 0
    status = EXHAUSTED
    levels = rules.delay_levels_ms
    while position < readable:
        if count >= max_records:
            status = STOPPED
            break
        parsed = _parse(view, position, readable)
        if parsed is None:
            status = DEFERRED
            break
        end, queue_id, queue_offset, phy, sys_flag, store_ts, topic, props = parsed
        if end > stop:
            status = STOPPED
            break
        transaction = sys_flag & TRANSACTION_TYPE_MASK
        entry = None
        hashes: list[int] = []
        try:
            if not transaction or transaction == _COMMIT:
                code = _tags_code(props, topic, store_ts, levels)
                entry = _CQ_ENTRY.pack(phy, end - position, code)
            if rules.keys and transaction != _ROLLBACK:
                hashes = _key_hashes(props, topic)
        except _Deferred:
            status = DEFERRED
            break
        run = runs.get((topic, queue_id))
        if run is None:
            run = runs[(topic, queue_id)] = [topic, queue_id, 0, 0, 0, True, [], 0]
        run[2] = queue_offset + 1
        if entry is not None:
            if not run[4]:
                run[3] = queue_offset
            elif queue_offset != run[3] + run[4]:
                run[5] = False
            run[4] += 1
            run[6].append(entry)
            run[7] = phy + end - position
        for h in hashes:
            keys += (h, phy, store_ts)
        count += 1
        last_ts = store_ts
        position = end
    queues = [
        (topic, queue_id, grown, first, n, one_run, b"".join(entries), max_phy)
        for topic, queue_id, grown, first, n, one_run, entries, max_phy in runs.values()
    ]
    packed = struct.pack(f"<{len(keys)}q", *keys)
    return status, position, count, last_ts, queues, packed


def _parse(
    view: memoryview, position: int, readable: int
) -> tuple[int, int, int, int, int, int, bytes, bytes] | None:
    """(end, queue id, queue offset, phy offset, sysflag, store timestamp, topic, properties)
    of the V1 or V2 record at `position`, any hosts; None for anything else."""
    if position + _HEAD.size > readable:
        return None
    total, magic, _, queue_id, _, queue_offset, phy, sys_flag, _ = _HEAD.unpack_from(view, position)
    if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2) or total <= 0:
        return None
    end = position + total
    if end > readable:
        return None
    at = position + _HEAD.size + (20 if sys_flag & BORNHOST_V6_BIT else 8)
    topic_len_size = 2 if magic == MESSAGE_MAGIC_V2 else 1
    if at + 8 > end:
        return None
    (store_ts,) = _STORE_TS.unpack_from(view, at)
    if not (
        0 <= queue_offset < SANE_LIMIT and 0 <= phy < SANE_LIMIT and 0 <= store_ts < SANE_LIMIT
    ):
        return None
    at += 8 + (20 if sys_flag & STOREHOST_V6_BIT else 8) + 12
    if at + 4 > end:
        return None
    (body_len,) = _TAIL.unpack_from(view, at)
    topic_at = at + 4 + body_len
    if body_len < 0 or topic_at + topic_len_size > end:
        return None
    topic_len = view[topic_at] if topic_len_size == 1 else view[topic_at] << 8 | view[topic_at + 1]
    topic_at += topic_len_size
    props_at = topic_at + topic_len + 2
    if props_at > end or props_at + (view[props_at - 2] << 8 | view[props_at - 1]) != end:
        return None
    topic = bytes(view[topic_at : topic_at + topic_len])
    return end, queue_id, queue_offset, phy, sys_flag, store_ts, topic, bytes(view[props_at:end])


# The extension's when it is in use (common/native.py): the same tuple, without the GIL.
scan_segment = implementation("scan_segment", scan_segment_py)
