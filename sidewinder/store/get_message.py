"""getMessage: read a run of a ConsumeQueue and cut out the records it points at.

    got = get_message(queue, commit_log.files, offset, 32, limits)
    got.status, got.next_begin_offset, got.messages   # one view of mapped memory per record
    body = got.body()                                 # a pull's body: one join of those views
    got = get_message(queue, commit_log.files, offset, 32, limits, joined=True)
    got.count, got.body()                             # the body only, joined as it is cut out

The queue's run of entries is one slice of its mapped file, unpacked by `iter_unpack` (no
entry object, no file lookup per entry); the CommitLog segment is looked up once per segment
the records lie in, not once per record. (Measured and left out: cutting the views in bulk
with `map` over slices was no faster than this loop; merging records that lie back to back
into one view slowed the common case, queues written interleaved.) RocketMQ's rules on how
much one call returns (DefaultMessageStore.getMessage and isTheBatchFull, for messages in
memory) hold as before: see `get_message`.

A pull wants only the body: `joined=True` cuts the records out straight into it, one segment at
a time, by `gather_run` (the Rust extension's, or its reference `gather_run_py`), and leaves
`messages` empty. A record an entry points at that does not lie wholly in its mapped segment (a
broken entry) is stepped over on both paths.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from sidewinder.common.native import implementation
from sidewinder.store.consume_queue import BLANK_ENTRY_SIZE, CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from sidewinder.store.mapped_file_queue import MappedFileQueue

_PHY = struct.Struct(">q")  # an entry's CommitLog offset, its first field
# RocketMQ scans at most this many bytes of a queue per call (or maxMsgNums entries, if more).
SCAN_BYTES = 16000


class GetStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int = 0
    max_offset: int = 0
    messages: list[memoryview] = field(default_factory=list)  # whole records, mapped memory
    joined: bytes | None = None  # the records back to back, when asked for in one piece
    joined_count: int = 0

    @property
    def count(self) -> int:
        """How many records were found."""
        return self.joined_count if self.joined is not None else len(self.messages)

    @property
    def buffer_total_size(self) -> int:
        return len(self.joined) if self.joined is not None else sum(map(len, self.messages))

    def body(self) -> bytes:
        """The records back to back: what a pull's response body carries."""
        return self.joined if self.joined is not None else b"".join(self.messages)


@dataclass(slots=True)  # not frozen: one per call, and a frozen __init__ is slow
class GetLimits:
    """maxTransferBytesOnMessageInMemory, maxTransferCountOnMessageInMemory."""

    max_bytes: int
    max_count: int


def get_message(
    queue: ConsumeQueue,
    commit_log: MappedFileQueue,
    offset: int,
    max_count: int,
    limits: GetLimits,
    tags_codes: frozenset[int] | None = None,
    record_filter: Callable[[memoryview], bool] | None = None,
    joined: bool = False,
) -> GetResult:
    """Up to `max_count` records from queue offset `offset` (RocketMQ's getMessage).

    The scan covers at most max(16000 bytes of entries, `max_count` entries), and never goes
    past the end of the queue file holding `offset`. Blank entries and entries whose tags code
    is not in `tags_codes` are stepped over; `record_filter` (SQL92) is asked about each record
    that passes. The batch is full at `max_count` (capped by limits.max_count) records, or when
    the next record would take the bytes over limits.max_bytes (the first record always goes).
    `joined` (without `record_filter`): the records as one body, not views.
    """
    low, high = queue.min_offset, queue.max_offset
    if high == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, low, high)
    if offset < low:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, low, low, high)
    if offset == high:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, low, high)
    if offset > high:
        # RocketMQ 4.9.7 sends a consumer past the end back to the end (observed with the
        # reference bench: offset 50 of a 3-message queue answers nextBeginOffset 3).
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, high, low, high)
    max_count = min(max_count, limits.max_count)
    per_file = queue.files.file_size // CQ_ENTRY_SIZE
    stop = min(
        high,
        offset + max(SCAN_BYTES // CQ_ENTRY_SIZE, max_count),
        (offset // per_file + 1) * per_file,
    )
    result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, low, high)
    entries = queue.entries(offset, stop)
    if joined and record_filter is None:
        result.next_begin_offset = _gather_joined(
            result, entries, offset, commit_log, max_count, limits.max_bytes, tags_codes
        )
    else:
        result.next_begin_offset = _gather(
            result,
            entries,
            offset,
            commit_log,
            max_count,
            limits.max_bytes,
            tags_codes,
            record_filter,
        )
    if result.count:
        result.status = GetStatus.FOUND
    return result


def gather_run_py(
    entries: memoryview | bytes,
    segment: memoryview | bytes,
    segment_start: int,
    segment_end: int,
    max_count: int,
    max_bytes: int,
    tags_codes: frozenset[int] | None,
    count: int,
    total: int,
) -> tuple[int, int, int, bool, bytes]:
    """The records `entries` point at in one CommitLog segment, joined: (entries scanned,
    count, total bytes, stopped at an entry outside [segment_start, segment_end), body).

    `count` and `total` come in as what earlier segments of the same batch took; the batch
    rules are `_gather`'s. Whole 20-byte entries only are read."""
    pieces: list[bytes | memoryview] = []
    scanned = 0
    whole = len(entries) - len(entries) % CQ_ENTRY_SIZE
    for phy, size, tags in CQ_ENTRY.iter_unpack(entries[:whole]):
        if count >= max_count:
            break
        if (tags_codes is None or tags in tags_codes) and not (
            size == BLANK_ENTRY_SIZE and phy == 0 and tags == 0
        ):
            if not segment_start <= phy < segment_end:
                return scanned, count, total, True, b"".join(pieces)
            start = phy - segment_start
            if size > 0 and start + size <= len(segment):
                if count and total + size > max_bytes:
                    break
                pieces.append(segment[start : start + size])
                count += 1
                total += size
        scanned += 1
    return scanned, count, total, False, b"".join(pieces)


gather_run = implementation("gather_run", gather_run_py)


def _gather_joined(
    result: GetResult,
    entries: memoryview,
    offset: int,
    commit_log: MappedFileQueue,
    max_count: int,
    max_bytes: int,
    tags_codes: frozenset[int] | None,
) -> int:
    """`_gather`'s records as one body in `result.joined`; the queue offset scanned to."""
    bodies: list[bytes] = []
    count = total = 0
    scanned = offset
    at = 0
    # The segment of the first entry, likely the whole batch's; none (an empty range) when it
    # is gone or the entries are empty: the first wanted entry then says which to look up.
    segment = commit_log.find(_PHY.unpack_from(entries)[0]) if len(entries) >= 8 else None
    while True:
        buffer, start = (segment.buffer, segment.file_from_offset) if segment else (b"", 0)
        step, count, total, outside, body = gather_run(
            entries[at:],
            buffer,
            start,
            start + commit_log.file_size if segment else 0,
            max_count,
            max_bytes,
            tags_codes,
            count,
            total,
        )
        if body:
            bodies.append(body)
        scanned += step
        at += step * CQ_ENTRY_SIZE
        if not outside:
            break
        segment = commit_log.find(_PHY.unpack_from(entries, at)[0])
        if segment is None:  # cleaned up under the reader
            result.status = GetStatus.MESSAGE_WAS_REMOVING
            break
    result.joined = bodies[0] if len(bodies) == 1 else b"".join(bodies)
    result.joined_count = count
    return scanned


def _gather(
    result: GetResult,
    entries: memoryview,
    offset: int,
    commit_log: MappedFileQueue,
    max_count: int,
    max_bytes: int,
    tags_codes: frozenset[int] | None,
    record_filter: Callable[[memoryview], bool] | None,
) -> int:
    """Cut out the records `entries` point at into `result`; the queue offset scanned to.

    The CommitLog segment is looked up only when a record lies outside the last one found."""
    messages = result.messages
    total = 0
    scanned = offset
    buffer = memoryview(b"")
    segment_start = segment_end = -1  # the CommitLog segment `buffer` maps, global offsets
    for phy, size, tags in CQ_ENTRY.iter_unpack(entries):
        if len(messages) >= max_count:
            break
        if (tags_codes is None or tags in tags_codes) and not (
            size == BLANK_ENTRY_SIZE and phy == 0 and tags == 0
        ):
            if not segment_start <= phy < segment_end:
                segment = commit_log.find(phy)
                if segment is None:  # cleaned up under the reader
                    result.status = GetStatus.MESSAGE_WAS_REMOVING
                    break
                buffer = segment.buffer
                segment_start = segment.file_from_offset
                segment_end = segment_start + commit_log.file_size
            start = phy - segment_start
            if not (size > 0 and start + size <= len(buffer)):  # a broken entry
                scanned += 1
                continue
            view = buffer[start : start + size]
            if record_filter is not None and not record_filter(view):
                scanned += 1
                continue
            if messages and total + size > max_bytes:
                break
            messages.append(view)
            total += size
        scanned += 1
    return scanned
