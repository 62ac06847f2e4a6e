"""TimerLog: RocketMQ 5's append-only log of timer entries (`<storePathRootDir>/timerlog/`).

    log = TimerLog(root / "timerlog", file_size=100 << 20)
    log.load()
    end = log.recover(from_offset, on_unit=lambda pos, unit: ...)  # after a crash, see below
    pos = log.append(TimerUnit(prev_pos=-1, magic=MAGIC_DEFAULT, ...))
    unit = log.unit_at(pos)

Each unit is 52 bytes, big-endian, as RocketMQ 5's TimerLog writes them: size 4 · prev pos 8
(the unit before it in the same wheel slot, -1 for none) · magic 4 · write time 8 · delay 4 (ms
after the write time) · CommitLog offset 8 · size in the CommitLog 4 · Java hash of the real
topic 4 · reserved 8. A unit that would not fit before a file's end gives way to a blank (size =
what is left, 8 zero bytes, BLANK_MAGIC) and goes to the next file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sidewinder.store.mapped_file import MappedFile
from sidewinder.store.mapped_file_queue import MappedFileQueue

UNIT = struct.Struct(">iqiqiqiiq")
UNIT_SIZE = UNIT.size  # 52
_BLANK = struct.Struct(">iqi")
MIN_BLANK_LEN = _BLANK.size  # 16
# Java's `0xBBCCDDEE ^ 1880681586 + 8`: + binds first; the int literal is negative in Java.
BLANK_MAGIC = ((0xBBCCDDEE ^ (1880681586 + 8)) + 2**31) % 2**32 - 2**31
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 2, 4
# Sparse files, allocated as units arrive (a 100 MiB file whole for a few timers is waste).
_ALLOCATION_STEP = 1 << 20


def magic_ok(magic: int) -> bool:
    return (magic | 0xF) == 0xF


def java_string_hash(text: str) -> int:
    """String.hashCode of `text` (RocketMQ keeps the real topic's, for its timer metrics)."""
    value = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


@dataclass(frozen=True, slots=True)
class TimerUnit:
    prev_pos: int
    magic: int
    write_time_ms: int
    delay_ms: int  # after write_time_ms: the slot this unit sits in
    phy_offset: int  # the timer message in the CommitLog
    size: int
    topic_hash: int = 0

    @property
    def delayed_time_ms(self) -> int:
        return self.write_time_ms + self.delay_ms

    @property
    def rolls(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def deletes(self) -> bool:
        """A delete marker (TIMER_DEL_UNIQKEY): it cancels a message of its slot; a rolling
        one is only moved on, as any roll."""
        return bool(self.magic & MAGIC_DELETE) and not self.rolls


class TimerLog:
    def __init__(self, directory: Path, file_size: int) -> None:
        if file_size < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError(f"mappedFileSizeTimerLog {file_size} cannot hold one unit")
        self.files = MappedFileQueue(directory, file_size, allocation_step=_ALLOCATION_STEP)
        self.file_size = file_size

    def load(self) -> None:
        self.files.load()

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def append(self, unit: TimerUnit) -> int:
        """Write `unit` at the end; its global position. A write torn by a kill leaves a size
        that is not UNIT_SIZE or a bad magic, which recovery stops at: the size goes last."""
        segment = self.files.writable_file()
        if segment.remaining < UNIT_SIZE + MIN_BLANK_LEN:
            blank = _BLANK.pack(segment.remaining, 0, BLANK_MAGIC)
            segment.ensure_allocated(segment.wrote_position + len(blank))
            segment.buffer[segment.wrote_position : segment.wrote_position + len(blank)] = blank
            segment.wrote_position = segment.size
            segment = self.files.writable_file()
        at = segment.wrote_position
        data = UNIT.pack(
            UNIT_SIZE,
            unit.prev_pos,
            unit.magic,
            unit.write_time_ms,
            unit.delay_ms,
            unit.phy_offset,
            unit.size,
            unit.topic_hash,
            0,
        )
        segment.buffer[at + 4 : at + UNIT_SIZE] = data[4:]
        segment.buffer[at : at + 4] = data[:4]
        segment.wrote_position = at + UNIT_SIZE
        segment.committed_position = segment.wrote_position
        return segment.file_from_offset + at

    def unit_at(self, position: int) -> TimerUnit | None:
        segment = self.files.find(position)
        if segment is None:
            return None
        at = position - segment.file_from_offset
        if at + UNIT_SIZE > segment.size:
            return None
        size, prev, magic, write_ms, delay, phy, phy_size, topic_hash, _ = UNIT.unpack_from(
            segment.buffer, at
        )
        if size != UNIT_SIZE or not magic_ok(magic):
            return None
        return TimerUnit(prev, magic, write_ms, delay, phy, phy_size, topic_hash)

    def next_unit(self, position: int) -> tuple[int, TimerUnit] | None:
        """The first unit at or after `position` (past the blank that closes a file) and its
        position; None at the log's end."""
        while True:
            files = self.files.files
            if not files:
                return None
            position = max(position, files[0].file_from_offset)
            segment = self.files.find(position)
            if segment is None:
                return None
            at = position - segment.file_from_offset
            full = segment.wrote_position >= segment.size
            unit = self.unit_at(position) if at + UNIT_SIZE <= segment.wrote_position else None
            if unit is not None:
                return position, unit
            if not full:
                return None  # the end of what is written
            position = segment.file_from_offset + segment.size

    def drop_below(self, position: int) -> list[MappedFile]:
        """Take out the files wholly below `position` (never the last); the caller deletes
        them (RocketMQ 5's deleteExpiredFileByOffsetForTimerLog)."""
        files = self.files.files
        count = sum(1 for f in files if f.file_from_offset + f.size <= position)
        return self.files.drop_head(count)

    def recover(self, from_offset: int, on_unit: Callable[[int, TimerUnit], None]) -> int:
        """Walk the units from the file holding `from_offset` (RocketMQ: the last flushed
        position less one file), calling `on_unit(position, unit)` for each, up to the first
        that is not whole; cut the log there and return that end (recoverAndRevise)."""
        files = self.files.files
        if not files:
            return 0
        index = max(
            (i for i, f in enumerate(files) if f.file_from_offset <= from_offset), default=0
        )
        end = files[index].file_from_offset
        for segment in files[index:]:
            position, stop = 0, False
            limit = min(segment.data_end, segment.size)
            while position + MIN_BLANK_LEN <= limit:
                size, _, magic = _BLANK.unpack_from(segment.buffer, position)
                if magic == BLANK_MAGIC:
                    position = segment.size
                    break
                if size != UNIT_SIZE or not magic_ok(magic) or position + UNIT_SIZE > limit:
                    stop = True
                    break
                unit = self.unit_at(segment.file_from_offset + position)
                assert unit is not None
                on_unit(segment.file_from_offset + position, unit)
                position += UNIT_SIZE
            end = segment.file_from_offset + position
            if stop or position < segment.size:
                break
        self.files.set_positions(end)
        for segment in self.files.files:
            segment.committed_position = segment.wrote_position
        return end

    def flush(self) -> int:
        """fdatasync what was appended; the flushed offset. Blocking."""
        for segment in self.files.files:
            wrote = segment.wrote_position  # before the sync: appends go on meanwhile
            if wrote > segment.flushed_position:
                segment.sync()
                segment.flushed_position = wrote
        return self.files.flushed_offset

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_offset

    def close(self) -> None:
        self.files.close()
