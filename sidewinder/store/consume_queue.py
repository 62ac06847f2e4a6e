"""ConsumeQueue files: `consumequeue/{topic}/{queueId}/{20-digit byte offset}`, 20-byte entries.

Entry: CommitLog offset (int64) · record size (int32) · tags code (int64; for
SCHEDULE_TOPIC_XXXX the deliver time). Queue offset N lives at byte N * 20 of the queue's files.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sidewinder.store.mapped_file import MappedFile
from sidewinder.store.mapped_file_queue import MappedFileQueue

CQ_ENTRY = struct.Struct(">qiq")
CQ_ENTRY_SIZE = CQ_ENTRY.size  # 20
_PHY = struct.Struct(">q")
# Blocks a queue file gets ahead of its entries (a default file is 5.7 MB, mostly unwritten).
ALLOCATION_STEP = 64 << 10
# A queue that starts above offset 0 has its first file padded with these (fillPreBlank).
BLANK_ENTRY_SIZE = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class CQEntry:
    queue_offset: int
    phy_offset: int
    size: int
    tags_code: int

    @property
    def is_blank(self) -> bool:
        return self.phy_offset == 0 and self.size == BLANK_ENTRY_SIZE and self.tags_code == 0


def encode_entry(
    buffer: bytearray | memoryview, position: int, *, phy_offset: int, size: int, tags_code: int
) -> None:
    CQ_ENTRY.pack_into(buffer, position, phy_offset, size, tags_code)


def file_name(first_queue_offset: int) -> str:
    return f"{first_queue_offset * CQ_ENTRY_SIZE:020d}"


def iter_entries(
    data: bytes | bytearray | memoryview, first_queue_offset: int
) -> Iterator[CQEntry]:
    """The written entries of one file, stopping at the first unwritten (all-zero) slot."""
    view = memoryview(data)
    for n in range(len(view) // CQ_ENTRY_SIZE):
        phy_offset, size, tags_code = CQ_ENTRY.unpack_from(view, n * CQ_ENTRY_SIZE)
        if size == 0 and phy_offset == 0 and tags_code == 0:
            return
        yield CQEntry(first_queue_offset + n, phy_offset, size, tags_code)


def read_queue(queue_dir: Path) -> Iterator[CQEntry]:
    """Every written entry of one queue, across its files in order, blanks included."""
    # Only segment names: a `.creating` file is a segment a crash interrupted being made.
    segments = (p for p in queue_dir.iterdir() if p.name.isdigit())
    for path in sorted(segments, key=lambda p: int(p.name)):
        start = int(path.name)
        if start % CQ_ENTRY_SIZE:
            raise ValueError(f"{path}: file offset {start} is not a multiple of {CQ_ENTRY_SIZE}")
        yield from iter_entries(path.read_bytes(), start // CQ_ENTRY_SIZE)


class ConsumeQueueGapError(RuntimeError):
    """An entry would leave a hole in the queue: a dispatch bug, never written."""


class ConsumeQueue:
    """One queue's entries as mapped files: put at a queue offset, read by queue offset."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size % CQ_ENTRY_SIZE:
            raise ValueError(f"mappedFileSizeConsumeQueue {file_size} is not a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(
            root / topic / str(queue_id), file_size, allocation_step=ALLOCATION_STEP
        )
        self.max_phy_offset = 0  # just past the last entry's message in the CommitLog
        # The first entry whose message the CommitLog still holds (RocketMQ's minLogicOffset).
        self.min_logic_offset = 0

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Set the end after the last written entry (the files' positions start at 0)."""
        end = self.files.min_offset
        for segment in self.files.files:
            readable = segment.buffer[: segment.data_end]
            written = sum(1 for _ in iter_entries(readable, 0)) * CQ_ENTRY_SIZE
            end = segment.file_from_offset + written
            if written < segment.size:
                break
        self.files.set_positions(end)
        last = self.entry(self.max_offset - 1) if self.max_offset else None
        self.max_phy_offset = last.phy_offset + last.size if last and not last.is_blank else 0

    def truncate_dirty(self, commitlog_end: int) -> int:
        """Drop tail entries whose message does not lie wholly before `commitlog_end`."""
        end = self.max_offset
        while end > self.min_offset:
            last = self.entry(end - 1)
            if last is None or last.is_blank or last.phy_offset + last.size <= commitlog_end:
                break
            end -= 1
        if end != self.max_offset:
            self.files.set_positions(end * CQ_ENTRY_SIZE)
            last = self.entry(end - 1) if end > self.min_offset else None
            self.max_phy_offset = last.phy_offset + last.size if last and not last.is_blank else 0
        return end

    @property
    def min_offset(self) -> int:
        return max(self.files.min_offset // CQ_ENTRY_SIZE, self.min_logic_offset)

    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Move the minimum to the first entry of the first file whose message is not gone, or
        past the last entry when every message is gone (RocketMQ 5's correctMinOffset; 4.9
        leaves it at removed messages, which 4.9's getMessage skips and ours does not)."""
        files = self.files.files
        if not files:
            return
        last = self.entry(self.max_offset - 1) if self.max_offset else None
        if last is not None and not last.is_blank and last.phy_offset < min_phy_offset:
            self.min_logic_offset = self.max_offset
            return
        first = files[0]
        for position in range(0, first.wrote_position, CQ_ENTRY_SIZE):
            phy, _, _ = CQ_ENTRY.unpack_from(first.buffer, position)
            if phy >= min_phy_offset:
                self.min_logic_offset = (first.file_from_offset + position) // CQ_ENTRY_SIZE
                return

    def drop_expired(self, min_phy_offset: int) -> list[MappedFile]:
        """Take out leading files whose every message lies below `min_phy_offset` (the last file
        always stays); the caller destroys them once no reader can hold them."""
        files = self.files.files
        expired = 0
        for segment in files[:-1]:
            (last_phy,) = _PHY.unpack_from(segment.buffer, segment.size - CQ_ENTRY_SIZE)
            if last_phy >= min_phy_offset:
                break
            expired += 1
        return self.files.drop_head(expired)

    @property
    def max_offset(self) -> int:
        """The queue offset the next message gets."""
        return self.files.max_offset // CQ_ENTRY_SIZE

    def put(self, queue_offset: int, phy_offset: int, size: int, tags_code: int) -> bool:
        """Write one entry; False when it is already there (a repeated dispatch)."""
        at = queue_offset * CQ_ENTRY_SIZE
        if not self.files.files:
            self._first_file_at(at)
        end = self.files.max_offset
        if at < end:
            return False
        if at > end:
            raise ConsumeQueueGapError(
                f"{self.topic}/{self.queue_id}: entry {queue_offset} "
                f"after {end // CQ_ENTRY_SIZE} entries"
            )
        segment = self.files.writable_file()
        encode_entry(
            segment.buffer,
            segment.wrote_position,
            phy_offset=phy_offset,
            size=size,
            tags_code=tags_code,
        )
        segment.wrote_position += CQ_ENTRY_SIZE
        self.max_phy_offset = phy_offset + size
        return True

    def has_room(self, queue_offset: int, count: int) -> bool:
        """Whether `count` entries from `queue_offset` follow the last one in the last file,
        in room already allocated: `reserve` would then make no file and no syscall."""
        files = self.files.files
        if not files:
            return False
        last = files[-1]
        if queue_offset * CQ_ENTRY_SIZE != last.file_from_offset + last.wrote_position:
            return False
        needed = last.wrote_position + count * CQ_ENTRY_SIZE
        return needed <= last.size and needed <= last.allocated_to

    def reserve(self, queue_offset: int, count: int) -> int | None:
        """Room for `count` entries from `queue_offset` in the last file, allocated
        (DiskFullError if the disk has none): how many leading ones are there already (a
        repeated dispatch). None when they need a file made (but a new queue's first),
        or do not follow the last entry: then `put` them one by one, which makes files and
        refuses gaps."""
        at = queue_offset * CQ_ENTRY_SIZE
        if not self.files.files:
            if at % self.files.file_size:
                return None
            self._first_file_at(at)  # an empty file: nothing readers see
        last = self.files.files[-1]
        end = last.file_from_offset + last.wrote_position  # files.max_offset (never pooled)
        if at > end:
            return None
        present = min((end - at) // CQ_ENTRY_SIZE, count)
        needed = last.wrote_position + (count - present) * CQ_ENTRY_SIZE
        if needed > last.size:
            return None
        if needed > last.allocated_to:
            last.ensure_allocated(needed + ALLOCATION_STEP)
        return present

    def write_reserved(self, entries: bytes, max_phy_offset: int) -> None:
        """Write packed entries after the last one, into room `reserve` made."""
        last = self.files.files[-1]
        at = last.wrote_position
        last.mapping[at : at + len(entries)] = entries  # the map: no view made per write
        last.wrote_position = at + len(entries)
        self.max_phy_offset = max_phy_offset

    def _first_file_at(self, at: int) -> None:
        # A queue whose first entry is not 0 (its head was cleaned up elsewhere) starts in the
        # file holding that entry, padded before it with blank entries, as RocketMQ pads it.
        start = at - at % self.files.file_size
        segment = self.files.writable_file(start)
        segment.ensure_allocated(at - start + ALLOCATION_STEP)  # the padding, then the entry
        for position in range(0, at - start, CQ_ENTRY_SIZE):
            encode_entry(segment.buffer, position, phy_offset=0, size=BLANK_ENTRY_SIZE, tags_code=0)
        segment.wrote_position = at - start

    def entry(self, queue_offset: int) -> CQEntry | None:
        at = queue_offset * CQ_ENTRY_SIZE
        segment = self.files.find(at)
        if segment is None or at >= segment.end_offset:
            return None
        phy, size, tags = CQ_ENTRY.unpack_from(segment.buffer, at - segment.file_from_offset)
        return CQEntry(queue_offset, phy, size, tags)

    def entries(self, queue_offset: int, stop: int) -> memoryview:
        """The entries from `queue_offset` up to `stop` as one view of the mapped file, for
        `CQ_ENTRY.iter_unpack`: cut short at the end of the file holding `queue_offset` and at
        the end of what is written (empty when that file is gone or holds nothing there)."""
        at = queue_offset * CQ_ENTRY_SIZE
        segment = self.files.find(at)
        if segment is None:
            return memoryview(b"")
        base = segment.file_from_offset
        end = min(stop * CQ_ENTRY_SIZE, segment.end_offset)
        return segment.buffer[at - base : end - base]

    def flush(self) -> int:
        return self.files.flush()

    def close(self) -> None:
        self.files.close()


class ConsumeQueueTable:
    """Every (topic, queue) ConsumeQueue under consumequeue/, created on first use."""

    def __init__(self, root: Path, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.name.isdigit():
                    queue = self.get(topic_dir.name, int(queue_dir.name))
                    queue.load()
                    queue.recover()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = ConsumeQueue(self.root, topic, queue_id, self.file_size)
        return queue

    def flush(self) -> None:
        for queue in self.queues.values():
            queue.flush()

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
        self.queues.clear()

    def drop(self, which: Callable[[tuple[str, int]], bool]) -> list[tuple[str, int]]:
        """Close and delete the queues `which` picks, and a topic's directory once it has no
        queue left; returns their keys. Blocking: the dispatch thread's, which owns them."""
        keys = [key for key in self.queues if which(key)]
        for key in keys:
            queue = self.queues.pop(key)
            queue.close()
            shutil.rmtree(queue.files.directory, ignore_errors=True)
        for topic in {topic for topic, _ in keys}:
            if not any(t == topic for t, _ in self.queues):
                shutil.rmtree(self.root / topic, ignore_errors=True)
        return keys
