"""getMessage: read a run of a ConsumeQueue and gather the records it points at.

    got = get_message(queue, commit_log.files, offset, 32, limits)
    got.status, got.next_begin_offset, got.message_count
    body = got.body()        # the records, back to back, in one join of mapped slices
    got.messages             # one view per record (tests, tools): walked from the parts

The queue's entries are read as one slice of its mapped file and unpacked with `iter_unpack`,
no object per entry; records lying back to back in a CommitLog segment are kept as one slice
("part"), so a pull's body is a single `bytes.join` over a few views of mapped memory.
RocketMQ's rules on how much one call returns (DefaultMessageStore.getMessage and
isTheBatchFull, for messages in memory) hold as before: see `get_message`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from sidewinder.store.consume_queue import BLANK_ENTRY_SIZE, CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from sidewinder.store.mapped_file_queue import MappedFileQueue

# RocketMQ scans at most this many bytes of a queue per call (or maxMsgNums entries, if more).
SCAN_BYTES = 16000
_TOTAL_SIZE = struct.Struct(">i")  # every record opens with its own length


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
    # Whole records as views of mapped memory, in queue order; records back to back in the
    # CommitLog share one view.
    parts: list[memoryview] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0

    def body(self) -> bytes:
        """The records back to back: what a pull's response body carries."""
        return b"".join(self.parts)

    @property
    def messages(self) -> list[memoryview]:
        """One view per record, split at each record's own length field."""
        views = []
        for part in self.parts:
            at = 0
            while at < len(part):
                (size,) = _TOTAL_SIZE.unpack_from(part, at)
                views.append(part[at : at + size])
                at += size
        return views


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
    if result.message_count:
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
    """Collect the records `entries` point at into `result`; the queue offset scanned to."""
    parts = result.parts
    count = total = 0
    scanned = offset
    buffer = memoryview(b"")
    segment_start = segment_end = -1  # the CommitLog segment `buffer` maps, global offsets
    run_start = run_end = 0  # the records gathered but not yet cut out of `buffer`
    for phy, size, tags in CQ_ENTRY.iter_unpack(entries):
        if count >= max_count:
            break
        if (tags_codes is None or tags in tags_codes) and not (
            size == BLANK_ENTRY_SIZE and phy == 0 and tags == 0
        ):
            if not segment_start <= phy < segment_end:
                segment = commit_log.find(phy)
                if segment is None:  # cleaned up under the reader
                    result.status = GetStatus.MESSAGE_WAS_REMOVING
                    break
                if run_end > run_start:
                    parts.append(buffer[run_start:run_end])
                buffer = segment.buffer
                segment_start = segment.file_from_offset
                segment_end = segment_start + commit_log.file_size
                run_start = run_end = phy - segment_start
            start = phy - segment_start
            if record_filter is not None and not record_filter(buffer[start : start + size]):
                scanned += 1
                continue
            if count and total + size > max_bytes:
                break
            if start != run_end:  # not right after the previous record: cut a new part
                if run_end > run_start:
                    parts.append(buffer[run_start:run_end])
                run_start = start
            run_end = start + size
            count += 1
            total += size
        scanned += 1
    if run_end > run_start:
        parts.append(buffer[run_start:run_end])
    result.message_count = count
    result.buffer_total_size = total
    return scanned
