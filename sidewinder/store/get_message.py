"""getMessage: read a run of a ConsumeQueue and cut out the records it points at.

    got = get_message(queue, commit_log.files, offset, 32, limits)
    got.status, got.next_begin_offset, got.messages   # one view of mapped memory per record
    body = got.body()                                 # a pull's body: one join of those views

The queue's run of entries is one slice of its mapped file, unpacked by `iter_unpack` (no
entry object, no file lookup per entry); the CommitLog segment is looked up once per segment
the records lie in, not once per record. (Measured and left out: cutting the views in bulk
with `map` over slices was no faster than this loop; merging records that lie back to back
into one view slowed the common case, queues written interleaved.) RocketMQ's rules on how
much one call returns (DefaultMessageStore.getMessage and isTheBatchFull, for messages in
memory) hold as before: see `get_message`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from sidewinder.store.consume_queue import BLANK_ENTRY_SIZE, CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from sidewinder.store.mapped_file_queue import MappedFileQueue

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

    @property
    def buffer_total_size(self) -> int:
        return sum(map(len, self.messages))

    def body(self) -> bytes:
        """The records back to back: what a pull's response body carries."""
        return b"".join(self.messages)


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
) -> GetResult:
    """Up to `max_count` records from queue offset `offset` (RocketMQ's getMessage).

    The scan covers at most max(16000 bytes of entries, `max_count` entries), and never goes
    past the end of the queue file holding `offset`. Blank entries and entries whose tags code
    is not in `tags_codes` are stepped over; `record_filter` (SQL92) is asked about each record
    that passes. The batch is full at `max_count` (capped by limits.max_count) records, or when
    the next record would take the bytes over limits.max_bytes (the first record always goes).
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
    result.next_begin_offset = _gather(
        result, entries, offset, commit_log, max_count, limits.max_bytes, tags_codes, record_filter
    )
    if result.messages:
        result.status = GetStatus.FOUND
    return result


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
