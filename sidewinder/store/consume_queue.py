"""ConsumeQueue files: `consumequeue/{topic}/{queueId}/{20-digit byte offset}`, 20-byte entries.

Entry: CommitLog offset (int64) · record size (int32) · tags code (int64; for
SCHEDULE_TOPIC_XXXX the deliver time). Queue offset N lives at byte N * 20 of the queue's files.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CQ_ENTRY = struct.Struct(">qiq")
CQ_ENTRY_SIZE = CQ_ENTRY.size  # 20
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
    for path in sorted(queue_dir.iterdir(), key=lambda p: int(p.name)):
        start = int(path.name)
        if start % CQ_ENTRY_SIZE:
            raise ValueError(f"{path}: file offset {start} is not a multiple of {CQ_ENTRY_SIZE}")
        yield from iter_entries(path.read_bytes(), start // CQ_ENTRY_SIZE)
