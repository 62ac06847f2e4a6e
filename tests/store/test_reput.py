"""Reput over a real CommitLog: batches go whole, or record by record when a dispatcher cannot
take one, and a full disk stops dispatch exactly at the first record it could not write."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import (
    Host,
    MessageRecord,
    MessageToStore,
    decode_record,
    encode_record,
)
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.consume_queue import ConsumeQueueTable, read_queue
from sidewinder.store.dispatch_scan import DispatchBatch
from sidewinder.store.dispatchers import (
    ConsumeQueueDispatcher,
    DispatchRecord,
    store_dispatchers,
)
from sidewinder.store.index_service import IndexService
from sidewinder.store.mapped_file import DiskFullError
from sidewinder.store.reput import Reput

HOST = Host(b"\x7f\x00\x00\x01", 10911)


class Recorder:
    """A dispatcher that notes which records (of `offsets`) it was given, and runs out of room
    at `full_at` (a CommitLog offset) until told otherwise."""

    def __init__(self, offsets: list[int]) -> None:
        self.offsets = offsets
        self.seen: list[int] = []
        self.full_at = -1
        self._batch: DispatchBatch | None = None

    def prepare(self, batch: DispatchBatch) -> bool:
        if batch.start <= self.full_at < batch.end:
            raise DiskFullError(28, "disk full: test")
        self._batch = batch
        return True

    def fits(self, batch: DispatchBatch) -> bool:
        return True

    def write_prepared(self) -> None:
        assert self._batch is not None
        batch = self._batch
        self.seen += [offset for offset in self.offsets if batch.start <= offset < batch.end]

    def dispatch(self, record: DispatchRecord) -> None:
        if record[1] == self.full_at:
            raise DiskFullError(28, "disk full: test")
        self.seen.append(record[1])


def commit_log(root: Path, count: int) -> tuple[CommitLog, list[int]]:
    log = CommitLog(
        root / "commitlog", segment_size=64 << 10, max_message_size=4 << 20, store_host=HOST
    )
    log.load()
    offsets = []
    for n in range(count):
        props = encode_properties({"UNIQ_KEY": f"{n:032X}", "TAGS": "TagA"}, trailing=False)
        message = MessageToStore(
            topic=b"T",
            queue_id=n % 2,
            body=bytes(1000),
            properties=props,
            born_host=HOST,
            store_host=HOST,
        )
        offsets.append(log.put(message).phy_offset)
    return log, offsets


@pytest.mark.usefixtures("hot_path")
def test_a_full_disk_stops_dispatch_at_the_first_record_without_room(tmp_path: Path) -> None:
    log, offsets = commit_log(tmp_path, 150)  # three 64 KiB segments, blank tails between
    queues = ConsumeQueueTable(tmp_path / "consumequeue", 1000 * 20)
    recorder = Recorder(offsets)
    reput = Reput(log, [ConsumeQueueDispatcher(queues, {}), recorder])
    recorder.full_at = offsets[40]
    grown = reput.dispatch_until(log.max_offset, max_records=100)
    assert isinstance(reput.blocked, DiskFullError)
    assert reput.offset == offsets[40] and reput.dispatched == 40
    assert recorder.seen == offsets[:40]
    assert grown == {(b"T", 0): 20, (b"T", 1): 20}
    recorder.full_at = -1
    reput.dispatch_all()
    assert reput.blocked is None and reput.offset == log.max_offset
    assert recorder.seen == offsets  # each record once, in order
    for queue_id in (0, 1):
        entries = list(read_queue(tmp_path / "consumequeue" / "T" / str(queue_id)))
        assert [e.phy_offset for e in entries] == offsets[queue_id::2]
    queues.close()
    log.close()


def test_records_with_ipv6_hosts_or_a_long_topic_are_read_as_the_full_decoder_reads_them(
    tmp_path: Path,
) -> None:
    # Written with encode_record: the store refuses a topic over 127 bytes, but a RocketMQ 5
    # CommitLog holds them (the V2 magic), and the lean reader hands them to scan_record.
    segment = bytearray(64 << 10)
    v6 = Host(bytes(15) + b"\x01", 10911)
    topics = [b"T", b"L" * 200]
    position = 0
    for n in range(40):
        props = encode_properties({"TAGS": f"tag{n % 3}", "KEYS": f"k{n}"}, trailing=False)
        message = MessageToStore(
            topic=topics[n % 2],
            queue_id=0,
            body=bytes(n * 50),
            properties=props,
            born_host=v6 if n % 3 else HOST,
            store_host=v6 if n % 5 else HOST,
        )
        position += encode_record(
            message, segment, position, queue_offset=n // 2, phy_offset=position, store_timestamp=n
        )
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(segment)
    log = CommitLog(
        tmp_path / "commitlog", segment_size=64 << 10, max_message_size=4 << 20, store_host=HOST
    )
    log.load()
    assert log.recover() == position
    records, exhausted = Reput(log, [Recorder([])]).read(log.max_offset, 1000)
    assert exhausted and len(records) == 40
    for record in records:
        decoded = decode_record(segment, record[1])
        assert isinstance(decoded, MessageRecord)
        assert record == (
            decoded.total_size,
            decoded.phy_offset,
            bytes(decoded.topic_bytes),
            decoded.queue_id,
            decoded.queue_offset,
            decoded.sys_flag,
            decoded.store_timestamp,
            bytes(decoded.properties_bytes),
        )
    log.close()


@pytest.mark.usefixtures("hot_path")
def test_records_the_scan_leaves_to_the_reference_do_not_end_the_round(tmp_path: Path) -> None:
    # Every third message has tags that are not UTF-8: each goes alone through the one-record
    # path, and the same call scans on after it, so one call still dispatches the lot.
    log = CommitLog(
        tmp_path / "commitlog", segment_size=1 << 20, max_message_size=4 << 20, store_host=HOST
    )
    log.load()
    offsets = []
    for n in range(60):
        tags = b"\xff\xfe" if n % 3 == 0 else b"TagA"
        message = MessageToStore(
            topic=b"T",
            queue_id=0,
            body=bytes(100),
            properties=b"TAGS\x01" + tags,
            born_host=HOST,
            store_host=HOST,
        )
        offsets.append(log.put(message).phy_offset)
    queues = ConsumeQueueTable(tmp_path / "consumequeue", 1000 * 20)
    reput = Reput(log, [ConsumeQueueDispatcher(queues, {})])
    grown = reput.dispatch_until(log.max_offset)
    assert reput.offset == log.max_offset and reput.dispatched == 60
    assert grown == {(b"T", 0): 60}
    entries = list(read_queue(tmp_path / "consumequeue" / "T" / "0"))
    assert [e.phy_offset for e in entries] == offsets
    queues.close()
    log.close()


def _stores(root: Path) -> tuple[ConsumeQueueTable, IndexService, Reput, CommitLog, list[int]]:
    log, offsets = commit_log(root, 150)  # three 64 KiB segments, blank tails between
    queues = ConsumeQueueTable(root / "consumequeue", 1000 * 20)
    index = IndexService(root / "index", hash_slot_num=100, max_index_num=400)
    index.load()
    return queues, index, Reput(log, store_dispatchers(queues, index, {})), log, offsets


@pytest.mark.usefixtures("hot_path")
def test_the_loop_dispatches_inline_only_what_makes_no_file_and_no_room(tmp_path: Path) -> None:
    """dispatch_inline writes what dispatch_until would, byte for byte, but leaves (None,
    nothing written) every round that would make a queue or index file or allocate room, or
    that starts at a segment's blank tail: those go to the dispatch thread."""
    inline_root, thread_root = tmp_path / "inline", tmp_path / "thread"
    queues, index, reput, log, offsets = _stores(inline_root)
    assert reput.dispatch_inline(log.max_offset, max_records=4) is None  # no queue files yet
    assert reput.offset == 0 and not (inline_root / "consumequeue" / "T").exists()
    reput.dispatch_until(offsets[2], max_records=2)  # the thread makes both queues' files
    inline = 0
    while reput.offset < log.max_offset:
        before = reput.offset
        grown = reput.dispatch_inline(log.max_offset, max_records=3)
        if grown is None:
            assert reput.offset == before  # nothing written
            reput.dispatch_until(log.max_offset, max_records=3)
        else:
            inline += 1
            assert grown and reput.offset > before
    assert inline > 10  # most rounds; segment tails and new index room went to the thread
    assert index.files and index.files[-1].index_count == 151  # a key each, after a blank one

    thread_queues, thread_index, thread_reput, thread_log, _ = _stores(thread_root)
    thread_reput.dispatch_all()
    assert thread_index.files[-1].index_count == 151
    for part in ("consumequeue/T/0", "consumequeue/T/1", "index"):
        ours = sorted(p for p in (inline_root / part).iterdir())
        theirs = sorted(p for p in (thread_root / part).iterdir())
        if part == "index":  # named by the time each was made; entry counts checked above
            assert len(ours) == len(theirs)
        else:
            assert [p.name for p in ours] == [p.name for p in theirs]
            assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]
    for store in (queues, thread_queues):
        store.close()
    for service in (index, thread_index):
        service.close()
    log.close()
    thread_log.close()
