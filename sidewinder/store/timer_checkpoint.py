"""TimerCheckpoint: `<storePathRootDir>/config/timercheck`, one OS page, as RocketMQ 5's.

    cp = TimerCheckpoint(root / "config" / "timercheck")
    cp.last_read_time_ms, cp.last_timer_log_flush_pos, cp.last_timer_queue_offset
    cp.dequeued = Dequeued(slot_ms, done, phy_offset)  # ours, written at once
    cp.flush()

RocketMQ's fields, big-endian longs: lastReadTimeMs @0, lastTimerLogFlushPos @8,
lastTimerQueueOffset @16, masterTimerQueueOffset @24, dataVersion (stateVersion @32, timestamp
@40, counter @48). Ours follow at @64, where RocketMQ reads nothing: how far the slot being
delivered got (its time, how many of its units are delivered, and the CommitLog end after the
last of them), which is what makes delivery exactly once across a kill (see broker/timer.py).

Every assignment goes straight into the map, so a killed process loses none of it; `flush`
(fdatasync) makes it survive a power cut too.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from sidewinder.store.mapped_file import allocate

PAGE = 4096
_OURS = struct.Struct(">qqq")
_OURS_AT = 64


@dataclass(frozen=True, slots=True)
class Dequeued:
    slot_ms: int = 0
    done: int = 0
    phy_offset: int = 0


class TimerCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.existed = path.exists() and path.stat().st_size > 0
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(self._fd).st_size < PAGE:
                # Its block now: a write into a hole on a full disk would be a SIGBUS.
                allocate(self._fd, 0, PAGE, path)
            self._map = mmap.mmap(self._fd, PAGE, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self._fd)
            raise

    def _get(self, index: int) -> int:
        return int(struct.unpack_from(">q", self._map, index * 8)[0])

    def _set(self, index: int, value: int) -> None:
        struct.pack_into(">q", self._map, index * 8, value)

    @property
    def last_read_time_ms(self) -> int:
        return self._get(0)

    @last_read_time_ms.setter
    def last_read_time_ms(self, value: int) -> None:
        self._set(0, value)

    @property
    def last_timer_log_flush_pos(self) -> int:
        return self._get(1)

    @last_timer_log_flush_pos.setter
    def last_timer_log_flush_pos(self, value: int) -> None:
        self._set(1, value)

    @property
    def last_timer_queue_offset(self) -> int:
        return self._get(2)

    @last_timer_queue_offset.setter
    def last_timer_queue_offset(self, value: int) -> None:
        self._set(2, value)
        # A master's own progress is the master offset too (RocketMQ's prepareTimerCheckPoint).
        self._set(3, value)

    @property
    def dequeued(self) -> Dequeued:
        return Dequeued(*_OURS.unpack_from(self._map, _OURS_AT))

    @dequeued.setter
    def dequeued(self, value: Dequeued) -> None:
        _OURS.pack_into(self._map, _OURS_AT, value.slot_ms, value.done, value.phy_offset)

    def next_data_version(self) -> None:
        """DataVersion.nextVersion: a slave compares it to know the checkpoint moved."""
        # Only its own fields: the loop writes the read time meanwhile, from another thread.
        self._set(5, int(time.time() * 1000))
        self._set(6, self._get(6) + 1)

    def flush(self) -> None:
        """Blocking: run it off the event loop."""
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self._map.close()
        os.close(self._fd)
        self._fd = -1
