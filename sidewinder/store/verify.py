"""Offline checks of a RocketMQ-format store directory, and walks over what it holds.

`verify_store` checks every CommitLog record (layout and body CRC, offsets continuous across
segments, blank tails), that every ConsumeQueue entry points at a record of its topic, queue,
offset, size and tags code, and that every IndexFile entry points at a record holding a key with
that hash, with chains that only run backwards. It stops at the first problem and names the file
and offset. Everything is read through read-only mmaps, so a store of any size can be checked.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sidewinder.protocol.message import KEY_SEPARATOR, MessageConst, tags_code
from sidewinder.protocol.record import BlankRecord, MessageRecord, RecordError, decode_record
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import CQEntry, read_queue
from sidewinder.store.index_file import (
    IndexFileView,
    index_file_size,
    index_key,
    index_key_hash,
)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


class StoreProblem(Exception):
    """The first thing wrong with a store: which file, which offset, what."""

    def __init__(self, path: Path, offset: int, message: str) -> None:
        super().__init__(f"{path} @ {offset}: {message}")
        self.path = path
        self.offset = offset


@dataclass
class VerifyReport:
    segments: int = 0
    records: int = 0
    bytes: int = 0
    consume_queues: int = 0
    cq_entries: int = 0
    index_files: int = 0
    index_entries: int = 0
    topics: dict[str, int] = field(default_factory=dict)


@contextmanager
def mapped(path: Path) -> Iterator[memoryview]:
    """A read-only view of a whole file (empty files give an empty view)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        try:
            yield view
        finally:
            view.release()
            # A caller may still hold a record viewing this map; then it unmaps with that view.
            with contextlib.suppress(BufferError):
                mm.close()


def commitlog_segments(commitlog_dir: Path) -> list[Path]:
    segments = sorted(
        (p for p in commitlog_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    if not segments:
        raise StoreProblem(commitlog_dir, 0, "no CommitLog segments")
    return segments


def iter_records(
    commitlog_dir: Path, *, check_crc: bool = True
) -> Iterator[tuple[Path, MessageRecord]]:
    """Every message record in offset order, checking the layout as it goes."""
    segments = commitlog_segments(commitlog_dir)
    segment_size = segments[0].stat().st_size
    expected = int(segments[0].name)
    for path in segments:
        base = int(path.name)
        if base != expected:
            raise StoreProblem(path, base, f"segment starts at {base}, expected {expected}")
        if path.stat().st_size != segment_size:
            raise StoreProblem(
                path, base, f"segment is {path.stat().st_size} bytes, the first is {segment_size}"
            )
        with mapped(path) as view:
            pos = 0
            while True:
                try:
                    record = decode_record(view, pos, check_crc=check_crc)
                except RecordError as exc:
                    raise StoreProblem(path, base + pos, exc.reason) from None
                if record is None or isinstance(record, BlankRecord):
                    break
                if record.phy_offset != base + pos:
                    raise StoreProblem(
                        path, base + pos, f"record says PHYSICALOFFSET {record.phy_offset}"
                    )
                yield path, record
                pos += record.total_size
        expected = base + segment_size


def record_index_hashes(record: MessageRecord) -> set[int]:
    props = record.properties()
    keys = [k for k in props.get(MessageConst.KEYS, "").split(KEY_SEPARATOR) if k]
    uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        keys.append(uniq)
    return {index_key_hash(index_key(record.topic, key)) for key in keys}


@dataclass(frozen=True, slots=True)
class _Summary:
    topic: str
    queue_id: int
    queue_offset: int
    total_size: int
    tags_code: int
    store_timestamp: int
    index_hashes: frozenset[int]

    @classmethod
    def of(cls, record: MessageRecord) -> _Summary:
        return cls(
            record.topic,
            record.queue_id,
            record.queue_offset,
            record.total_size,
            tags_code(record.properties().get(MessageConst.TAGS)),
            record.store_timestamp,
            frozenset(record_index_hashes(record)),
        )


def verify_store(
    root: Path, config: StoreConfig | None = None, commitlog_dir: Path | None = None
) -> VerifyReport:
    """Check a store directory; raises StoreProblem at the first inconsistency."""
    config = config or StoreConfig(
        store_path_root_dir=root, store_path_commit_log=root / "commitlog"
    )
    commitlog_dir = commitlog_dir or config.store_path_commit_log
    report = VerifyReport()
    # Record views die with their mmap: keep what the CQ and index checks compare.
    records: dict[int, _Summary] = {}
    for _, record in iter_records(commitlog_dir):
        records[record.phy_offset] = _Summary.of(record)
        report.records += 1
        report.bytes += record.total_size
        report.topics[record.topic] = report.topics.get(record.topic, 0) + 1
    segments = commitlog_segments(commitlog_dir)
    report.segments = len(segments)
    # Entries below the first segment point at messages cleanup removed: stale, not wrong.
    min_phy = int(segments[0].name) if segments else 0
    _verify_consume_queues(root / "consumequeue", records, report, min_phy)
    _verify_index(root / "index", config, records, report, min_phy)
    return report


def _verify_consume_queues(
    cq_root: Path, records: dict[int, _Summary], report: VerifyReport, min_phy: int
) -> None:
    if not cq_root.is_dir():
        return
    for topic_dir in sorted(cq_root.iterdir()):
        for queue_dir in sorted(topic_dir.iterdir()):
            report.consume_queues += 1
            for entry in read_queue(queue_dir):
                if entry.is_blank or entry.phy_offset < min_phy:
                    continue
                _check_cq_entry(queue_dir, topic_dir.name, int(queue_dir.name), entry, records)
                report.cq_entries += 1


def _check_cq_entry(
    queue_dir: Path, topic: str, queue_id: int, entry: CQEntry, records: dict[int, _Summary]
) -> None:
    where = entry.queue_offset
    record = records.get(entry.phy_offset)
    if record is None:
        raise StoreProblem(
            queue_dir,
            where,
            f"entry points at CommitLog offset {entry.phy_offset}, where no record starts",
        )
    if (record.topic, record.queue_id, record.queue_offset) != (topic, queue_id, where):
        raise StoreProblem(
            queue_dir,
            where,
            f"entry points at a record of {record.topic} "
            f"queue {record.queue_id} offset "
            f"{record.queue_offset}",
        )
    if record.total_size != entry.size:
        raise StoreProblem(
            queue_dir, where, f"entry size {entry.size} != record size {record.total_size}"
        )
    # Delayed messages keep their deliver time where others keep the tags hash.
    if topic != SCHEDULE_TOPIC and entry.tags_code != record.tags_code:
        raise StoreProblem(
            queue_dir,
            where,
            f"tags code {entry.tags_code} != hash of the record's TAGS {record.tags_code}",
        )


def _verify_index(
    index_dir: Path,
    config: StoreConfig,
    records: dict[int, _Summary],
    report: VerifyReport,
    min_phy: int,
) -> None:
    if not index_dir.is_dir():
        return
    expected_size = index_file_size(config.max_hash_slot_num, config.max_index_num)
    for path in sorted(p for p in index_dir.iterdir() if p.name.isdigit()):
        if path.stat().st_size != expected_size:
            raise StoreProblem(
                path,
                0,
                f"index file of {path.stat().st_size} bytes; "
                f"maxHashSlotNum/maxIndexNum say {expected_size}",
            )
        report.index_files += 1
        with mapped(path) as view:
            index = IndexFileView(view, config.max_hash_slot_num)
            for number in range(1, index.header.index_count):
                entry = index.entry(number)
                if entry.phy_offset < min_phy:
                    continue
                record = records.get(entry.phy_offset)
                if record is None:
                    raise StoreProblem(
                        path,
                        number,
                        f"index entry points at CommitLog offset "
                        f"{entry.phy_offset}, where no record starts",
                    )
                if entry.key_hash not in record.index_hashes:
                    raise StoreProblem(
                        path, number, f"key hash {entry.key_hash} is none of the record's keys"
                    )
                if not 0 <= entry.prev_index < number:
                    raise StoreProblem(path, number, f"chain runs forward to {entry.prev_index}")
                report.index_entries += 1
