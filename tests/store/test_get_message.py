"""get_message reads a run of entries in one slice and cuts out the records it points at; what it
returns must be what the entry-by-entry reading it replaced returned (kept here as the oracle),
for any layout: records across CommitLog segments, queue files ending mid-scan, blank entries,
tags and SQL92-style filters, byte and count limits, messages cleaned up under the reader."""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidewinder.common.native import NATIVE
from sidewinder.protocol.message import encode_properties, tags_code
from sidewinder.protocol.record import Host, MessageToStore, decode_record
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from sidewinder.store.get_message import (
    GetLimits,
    GetResult,
    GetStatus,
    gather_run_py,
    get_message,
)
from sidewinder.store.mapped_file_queue import MappedFileQueue
from tests.hot_path import IMPLEMENTATIONS, using

HOST = Host(b"\x7f\x00\x00\x01", 10911)
TAGS = ("TagA", "TagB", "TagC")
SEGMENT = 4096  # a few records per CommitLog segment
RecordFilter = Callable[[memoryview], bool]


def oracle(
    queue: ConsumeQueue,
    commit_log: MappedFileQueue,
    offset: int,
    max_count: int,
    limits: GetLimits,
    tags_codes: frozenset[int] | None,
    record_filter: RecordFilter | None,
) -> tuple[GetStatus, int, int, int, list[bytes]]:
    """MessageStore._get as it was before get_message: one entry, one view at a time."""
    low, high = queue.min_offset, queue.max_offset
    if high == 0:
        return GetStatus.NO_MESSAGE_IN_QUEUE, 0, low, high, []
    if offset < low:
        return GetStatus.OFFSET_TOO_SMALL, low, low, high, []
    if offset == high:
        return GetStatus.OFFSET_OVERFLOW_ONE, offset, low, high, []
    if offset > high:
        return GetStatus.OFFSET_OVERFLOW_BADLY, high, low, high, []
    status = GetStatus.NO_MATCHED_MESSAGE
    messages: list[memoryview] = []
    max_count = min(max_count, limits.max_count)
    per_file = queue.files.file_size // CQ_ENTRY_SIZE
    stop = min(
        high, offset + max(16000 // CQ_ENTRY_SIZE, max_count), (offset // per_file + 1) * per_file
    )
    scanned = offset
    total = 0
    while scanned < stop and len(messages) < max_count:
        entry = queue.entry(scanned)
        if entry is None:
            break
        if not entry.is_blank and (tags_codes is None or entry.tags_code in tags_codes):
            segment = commit_log.find(entry.phy_offset)
            if segment is None:
                status = GetStatus.MESSAGE_WAS_REMOVING
                break
            start = entry.phy_offset - segment.file_from_offset
            view = segment.buffer[start : start + entry.size]
            if record_filter is not None and not record_filter(view):
                scanned += 1
                continue
            if messages and total + len(view) > limits.max_bytes:
                break
            messages.append(view)
            total += len(view)
        scanned += 1
    if messages:
        status = GetStatus.FOUND
    return status, scanned, low, high, [bytes(m) for m in messages]


def observed(got: GetResult) -> tuple[GetStatus, int, int, int, list[bytes]]:
    messages = [bytes(m) for m in got.messages]
    assert got.buffer_total_size == sum(map(len, messages))
    assert got.body() == b"".join(messages)
    assert got.count == len(messages)
    return got.status, got.next_begin_offset, got.min_offset, got.max_offset, messages


def observed_joined(got: GetResult) -> tuple[GetStatus, int, int, int, bytes, int]:
    """A joined read: the body and count stand in for the views."""
    assert not got.messages and got.buffer_total_size == len(got.body())
    return (
        got.status,
        got.next_begin_offset,
        got.min_offset,
        got.max_offset,
        got.body(),
        got.count,
    )


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, object]:
    """Messages in the CommitLog, and which of them the queue under test holds."""
    count = draw(st.integers(1, 60))
    return {
        "sizes": draw(st.lists(st.integers(0, 700), min_size=count, max_size=count)),
        "tags": draw(st.lists(st.sampled_from(TAGS), min_size=count, max_size=count)),
        "in_queue": draw(st.lists(st.booleans(), min_size=count, max_size=count)),
        "first_offset": draw(st.sampled_from([0, 0, 3, 11])),  # above 0: blank entries first
        "entries_per_file": draw(st.sampled_from([5, 8, 1000])),
        "removed_at": draw(st.none() | st.integers(0, 60)),  # an entry past the CommitLog
        "min_logic_offset": draw(st.integers(0, 4)),
        "segment": draw(st.sampled_from([SEGMENT, 16 * SEGMENT])),  # runs within one, or not
    }


def build(root: Path, layout: dict[str, object]) -> tuple[CommitLog, ConsumeQueue]:
    segment = layout["segment"]
    assert isinstance(segment, int)
    log = CommitLog(
        root / "commitlog", segment_size=segment, max_message_size=2048, store_host=HOST
    )
    queue = ConsumeQueue(root / "cq", "T", 0, 20 * layout["entries_per_file"])  # type: ignore[operator]
    at = layout["first_offset"]
    assert isinstance(at, int)
    for n, (size, tag, held) in enumerate(
        zip(layout["sizes"], layout["tags"], layout["in_queue"], strict=True)  # type: ignore[call-overload]
    ):
        message = MessageToStore(
            topic=b"T",
            queue_id=0,
            body=bytes([n]) * size,
            properties=encode_properties({"TAGS": tag}),
            born_host=HOST,
            store_host=HOST,
        )
        put = log.put(message)
        if n == layout["removed_at"]:
            queue.put(at, 100 * SEGMENT, put.size, tags_code(tag))  # no such segment
            at += 1
        if held:
            queue.put(at, put.phy_offset, put.size, tags_code(tag))
            at += 1
    queue.min_logic_offset = min(layout["min_logic_offset"], queue.max_offset)  # type: ignore[type-var]
    return log, queue


@settings(max_examples=150, deadline=None)
@given(
    layout=layouts(),
    reads=st.lists(
        st.tuples(
            st.integers(0, 80),  # queue offset
            st.sampled_from([1, 2, 7, 32, 1000]),  # maxMsgNums
            st.sampled_from([1, 700, 2000, 256 * 1024]),  # maxTransferBytesOnMessageInMemory
            st.sampled_from([3, 32]),  # maxTransferCountOnMessageInMemory
            st.sampled_from([None, ("TagA",), ("TagB", "TagC")]),
            st.sampled_from([0, 2, 3]),  # a record filter keeping what hashes to non-zero mod n
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_get_message_returns_what_entry_by_entry_reading_returned(
    layout: dict[str, object], reads: list[tuple[int, int, int, int, tuple[str, ...] | None, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log, queue = build(Path(tmp), layout)
        try:
            for offset, max_count, max_bytes, count_limit, tags, modulus in reads:
                limits = GetLimits(max_bytes, count_limit)
                codes = frozenset(map(tags_code, tags)) if tags is not None else None
                keep: RecordFilter | None = (
                    (lambda view, m=modulus: zlib.crc32(view) % m != 0) if modulus else None
                )
                args = (queue, log.files, offset, max_count, limits, codes, keep)
                expected = oracle(*args)
                assert observed(get_message(*args)) == expected
                if keep is None:  # a pull's read: the body joined as it is cut out
                    status, next_begin, low, high, records = expected
                    want = (status, next_begin, low, high, b"".join(records), len(records))
                    for leg in IMPLEMENTATIONS if NATIVE is not None else ("python",):
                        with using(leg):
                            joined = get_message(*args, joined=True)
                        assert observed_joined(joined) == want, leg
        finally:
            queue.close()
            log.close()


def test_a_batch_spanning_two_segments_is_every_record_in_queue_order(tmp_path: Path) -> None:
    log = CommitLog(
        tmp_path / "commitlog", segment_size=SEGMENT, max_message_size=2048, store_host=HOST
    )
    queue = ConsumeQueue(tmp_path / "cq", "T", 0, 20 * 1000)
    bodies = [bytes([n]) * 500 for n in range(12)]  # about 7 records fill a segment
    phys = []
    for n, body in enumerate(bodies):
        put = log.put(MessageToStore(b"T", 0, body, b"", born_host=HOST, store_host=HOST))
        queue.put(n, put.phy_offset, put.size, 0)
        phys.append(put.phy_offset)
    assert phys[-1] // SEGMENT == 1 and phys[0] // SEGMENT == 0
    got = get_message(queue, log.files, 0, 32, GetLimits(256 * 1024, 32))
    assert got.status is GetStatus.FOUND and got.next_begin_offset == 12
    assert [decode_record(m).body for m in got.messages] == bodies  # type: ignore[union-attr]
    queue.close()
    log.close()


def test_a_pull_limited_by_bytes_stops_before_the_record_that_would_overflow(
    tmp_path: Path,
) -> None:
    log = CommitLog(
        tmp_path / "commitlog", segment_size=1 << 16, max_message_size=4096, store_host=HOST
    )
    queue = ConsumeQueue(tmp_path / "cq", "T", 0, 20 * 1000)
    for n in range(10):
        put = log.put(MessageToStore(b"T", 0, bytes(1000), b"", born_host=HOST, store_host=HOST))
        queue.put(n, put.phy_offset, put.size, 0)
    size = put.size
    got = get_message(queue, log.files, 2, 32, GetLimits(3 * size + size // 2, 32))
    assert (len(got.messages), got.next_begin_offset) == (3, 5)
    assert got.buffer_total_size == 3 * size
    all_but_one = get_message(queue, log.files, 2, 32, GetLimits(8 * size - 1, 32))
    assert (len(all_but_one.messages), all_but_one.next_begin_offset) == (7, 9)
    every = get_message(queue, log.files, 2, 32, GetLimits(8 * size, 32))
    assert (len(every.messages), every.next_begin_offset) == (8, 10)
    exact = get_message(queue, log.files, 2, 32, GetLimits(3 * size, 32))
    assert (len(exact.messages), exact.next_begin_offset) == (3, 5)  # a record may just fit
    # The first record goes whatever the limit.
    one = get_message(queue, log.files, 0, 32, GetLimits(1, 32))
    assert (len(one.messages), one.next_begin_offset) == (1, 1)
    queue.close()
    log.close()


@settings(max_examples=400, deadline=None)
@given(
    entries=st.binary(max_size=300)
    | st.lists(
        st.tuples(
            st.integers(-5, 1200) | st.sampled_from([0, 2**63 - 1, -(2**63)]),
            st.integers(-3, 300) | st.sampled_from([0x7FFFFFFF, -(2**31)]),
            st.sampled_from([0, 1, 2, -1, 2**63 - 1]),
        ),
        max_size=20,
    ).map(lambda rows: b"".join(CQ_ENTRY.pack(*row) for row in rows)),
    segment=st.binary(max_size=900),
    segment_start=st.sampled_from([0, 100, 1000]),
    span=st.sampled_from([0, 300, 900, 5000]),
    max_count=st.integers(0, 40),
    max_bytes=st.integers(0, 2000),
    tags=st.none() | st.frozensets(st.sampled_from([0, 1, 2, -1, 2**63 - 1])),
    count=st.integers(0, 3),
    total=st.integers(0, 500),
)
def test_gather_run_gives_its_reference_answer_for_any_bytes(
    entries: bytes,
    segment: bytes,
    segment_start: int,
    span: int,
    max_count: int,
    max_bytes: int,
    tags: frozenset[int] | None,
    count: int,
    total: int,
) -> None:
    """The Rust gather reads untrusted-looking entries (any offsets, sizes and tags, partial
    tails) exactly as the reference does, never outside the segment."""
    if NATIVE is None:
        pytest.skip("sidewinder._native is not loaded (SIDEWINDER_NATIVE=0?)")
    args = (entries, segment, segment_start, segment_start + span, max_count, max_bytes, tags)
    assert NATIVE.gather_run(*args, count, total) == gather_run_py(*args, count, total)
    assert NATIVE.gather_run(memoryview(entries), memoryview(segment), *args[2:], count, total) == (
        gather_run_py(*args, count, total)
    )
