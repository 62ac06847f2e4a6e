"""TimerWheel: RocketMQ 5's time wheel file (`<storePathRootDir>/timerwheel`).

    wheel = TimerWheel(root / "timerwheel", slots_total=7 * 86400, precision_ms=1000)
    slot = wheel.get_slot(time_ms)          # Slot(-1, -1, -1) when nothing is due then
    wheel.put_slot(time_ms, first_pos, last_pos, num)

`slots_total * 2` slots of 32 bytes, big-endian: time / precision 8 · first TimerLog position 8 ·
last TimerLog position 8 · count 4 · magic 4. A slot is found by time / precision modulo the
slot count; it holds the time it was written for, so a slot left from an earlier turn of the
wheel reads as empty. RocketMQ keeps the wheel in memory and copies it to the map when it
flushes; here the map is written directly, so a killed process loses nothing it wrote, and a
flush is one fdatasync.

The file is sparse (RocketMQ's setLength), so a page of it may have no block behind it: on a
full disk a write there, or on tmpfs even a read, would be a SIGBUS that kills the broker. A
page is therefore given its block (`posix_fallocate`, DiskFullError when there is no room)
before its first write in this run, and a page that is still a hole is read as empty slots
without touching the map.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from sidewinder.store.mapped_file import allocate

SLOT = struct.Struct(">qqqii")
SLOT_SIZE = SLOT.size  # 32
IGNORE = -2
PAGE = 4096  # a multiple of SLOT_SIZE: no slot straddles two pages


@dataclass(frozen=True, slots=True)
class Slot:
    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.time_ms == -1


EMPTY = Slot(-1, -1, -1)
_HOLE = Slot(0, 0, 0)  # what a slot in a page with no block reads as


class TimerWheelError(OSError):
    """A timerwheel file of the wrong size (another slot count)."""


class TimerWheel:
    def __init__(self, path: Path, slots_total: int, precision_ms: int) -> None:
        self.path = path
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.length = slots_total * 2 * SLOT_SIZE
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(self._fd).st_size
            if size not in (0, self.length):
                raise TimerWheelError(f"{path} is {size} bytes; {self.length} expected")
            if size == 0:
                os.ftruncate(self._fd, self.length)  # sparse, as RocketMQ's setLength
            self._map = mmap.mmap(self._fd, self.length, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        # Pages known to have a block, so that each is checked or allocated once per run.
        self._backed = bytearray(-(-self.length // PAGE))

    def _page_is_backed(self, page: int) -> bool:
        if self._backed[page]:
            return True
        try:
            data_at = os.lseek(self._fd, page * PAGE, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: nothing but holes from here to the end
                raise
            return False
        if data_at >= (page + 1) * PAGE:
            return False
        self._backed[page] = 1
        return True

    def reserve(self, time_ms: int) -> None:
        """Give the page of `time_ms`'s slot its block, or raise DiskFullError: called before
        anything else of an enqueue is written, so a full disk leaves no half-made timer."""
        page = self.slot_index(time_ms) * SLOT_SIZE // PAGE
        if not self._backed[page]:
            allocate(self._fd, page * PAGE, PAGE, self.path)
            self._backed[page] = 1

    def slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def raw_slot(self, time_ms: int) -> Slot:
        at = self.slot_index(time_ms) * SLOT_SIZE
        if not self._page_is_backed(at // PAGE):
            return _HOLE
        ticks, first, last, num, magic = SLOT.unpack_from(self._map, at)
        return Slot(ticks * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        slot = self.raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return EMPTY
        return slot

    def put_slot(
        self, time_ms: int, first_pos: int, last_pos: int, num: int = 0, magic: int = 0
    ) -> None:
        self.reserve(time_ms)
        SLOT.pack_into(
            self._map,
            self.slot_index(time_ms) * SLOT_SIZE,
            time_ms // self.precision_ms,
            first_pos,
            last_pos,
            num,
            magic,
        )

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, *, force: bool) -> None:
        """Recovery's correction: a slot of this time gets the positions not IGNOREd; another
        turn's slot is replaced when `force` (reviseSlot)."""
        slot = self.raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            if force:
                self.put_slot(time_ms, last_pos if first_pos == IGNORE else first_pos, last_pos)
            return
        self.put_slot(
            time_ms,
            slot.first_pos if first_pos == IGNORE else first_pos,
            slot.last_pos if last_pos == IGNORE else last_pos,
            slot.num,
            slot.magic,
        )

    def count_from(self, time_ms: int, slots: int) -> int:
        """Timers in the `slots` slots from `time_ms` (getAllNum, over a window)."""
        return sum(self.get_slot(time_ms + i * self.precision_ms).num for i in range(slots))

    def flush(self) -> None:
        """Make the slots written so far durable. Blocking."""
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self._map.close()
        os.close(self._fd)
        self._fd = -1
