"""TimerStore: the timer log, the time wheel and their checkpoint as one (RocketMQ 5's
TimerMessageStore, its files and its bookkeeping; moving messages is the caller's).

    timers = TimerStore(root, precision_ms=1000, log_file_size=100 << 20, roll_window_slots=...)
    timers.recover(now_ms, queue_offset_after)   # blocking: off the event loop
    timers.move_write_time(now_ms)
    timers.enqueue(phy_offset, size, deliver_ms, topic, queue_offset)  # one timer-topic entry
    while (slot_ms := timers.due_slot()) is not None:
        for position, unit in timers.units_of(slot_ms): ...          # oldest first
        timers.advance()
    timers.flush()                               # blocking: timerFlushIntervalMs
    timers.commit_log_floor()                    # CommitLog cleanup keeps what pending units read
    for f in timers.drop_delivered_files(): f.destroy()   # destroy off the event loop

Invariant (RocketMQ's): units are written only into slots at or after `write_time_ms` and
slots are read only before it, so a slot being delivered never grows.

Recovery (after any stop): units after the last flushed position (less one file, as RocketMQ)
are walked again and each slot's last position revised, so the wheel agrees with the log even
if the wheel lost writes; the log is cut at the first unit that is not whole. The timer topic's
next queue offset is the one after the last unit's message: each timer-topic entry gets exactly
one unit. Delivery restarts at the checkpoint's read time, never more than the wheel's span
ago.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sidewinder.store.mapped_file import MappedFile
from sidewinder.store.timer_checkpoint import Dequeued, TimerCheckpoint
from sidewinder.store.timer_log import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    UNIT_SIZE,
    TimerLog,
    TimerUnit,
    java_string_hash,
)
from sidewinder.store.timer_wheel import IGNORE, TimerWheel

TIMER_WHEEL_TTL_DAYS = 7
TIMER_BLANK_SLOTS = 60
PASS_CHUNK = 4096  # delivered units passed over per tick (pass_delivered)
DAY_S = 86_400


class TimerStore:
    def __init__(
        self,
        root: Path,
        *,
        precision_ms: int = 1000,
        log_file_size: int = 100 << 20,
        roll_window_slots: int = 2 * DAY_S,
    ) -> None:
        self.precision_ms = precision_ms
        # A fixed number of slots whatever the precision, as RocketMQ's.
        self.slots_total = TIMER_WHEEL_TTL_DAYS * DAY_S
        if not 2 <= roll_window_slots <= self.slots_total - TIMER_BLANK_SLOTS:
            roll_window_slots = self.slots_total - TIMER_BLANK_SLOTS
        self.roll_window_slots = roll_window_slots
        self.wheel = TimerWheel(root / "timerwheel", self.slots_total, precision_ms)
        self.log = TimerLog(root / "timerlog", log_file_size)
        self.checkpoint = TimerCheckpoint(root / "config" / "timercheck")
        self.read_time_ms = 0
        self.write_time_ms = 0
        self.queue_offset = 0  # the next timer-topic entry to enqueue
        # Slot -> the earliest due time of the messages enqueued into it already due: they go
        # out a slot or more after their time, which the read time alone does not tell.
        self.late: dict[int, int] = {}
        # Every unit below this timer log position is delivered (its slot was read): what
        # cleanup of the timer log and of the CommitLog may go up to.
        self.pending_from = 0

    def floor(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    # -- start ---------------------------------------------------------------------------------
    def recover(self, now_ms: int, queue_offset_after: Callable[[TimerUnit], int | None]) -> int:
        """Recover the log and the wheel, and where enqueue and dequeue resume; the log's end.
        `queue_offset_after(unit)`: the timer-topic queue offset after the unit's message (None
        when it cannot be read). Blocking."""
        self.log.load()
        start = max(self.checkpoint.last_timer_log_flush_pos - self.log.file_size, 0)
        last: list[TimerUnit] = []

        def revise(position: int, unit: TimerUnit) -> None:
            self.wheel.revise_slot(unit.delayed_time_ms, IGNORE, position, force=True)
            last[:] = [unit]

        end = self.log.recover(start, revise)
        after = queue_offset_after(last[0]) if last else None
        self.queue_offset = after if after is not None else self.checkpoint.last_timer_queue_offset
        earliest = self.floor(now_ms) - (self.slots_total - TIMER_BLANK_SLOTS) * self.precision_ms
        if self.checkpoint.existed:
            self.read_time_ms = max(self.checkpoint.last_read_time_ms, earliest)
        else:
            self.read_time_ms = self.floor(now_ms)  # nothing before this start to look at
        self.checkpoint.last_read_time_ms = self.read_time_ms
        self.write_time_ms = self.floor(now_ms)
        # Messages enqueued late before the stop sit in slots up to now, due at any time since
        # the read time: until those slots are read, nothing later counts as put.
        self.late = {self.write_time_ms: self.read_time_ms}
        self.pending_from = 0
        self.pass_delivered(limit=None)
        return end

    # -- enqueue -------------------------------------------------------------------------------
    def move_write_time(self, now_ms: int) -> None:
        self.write_time_ms = max(self.write_time_ms, self.floor(now_ms))

    def enqueue(
        self,
        phy_offset: int,
        size: int,
        deliver_ms: int,
        real_topic: str,
        queue_offset: int,
        *,
        delete: bool = False,
    ) -> int:
        """Add the timer message at `phy_offset` (timer-topic entry `queue_offset`) to the
        wheel (doEnqueue); its unit's position. One already due goes into the slot being
        written, delivered a tick later: RocketMQ puts such a message at once, without a
        unit, and a crash before its next checkpoint puts it again. `delete`: a delete marker
        (TIMER_DEL_UNIQKEY), its unit marked MAGIC_DELETE."""
        write = self.write_time_ms
        delayed = max(self.floor(deliver_ms), write)
        if delayed > deliver_ms:
            self.late[delayed] = min(self.late.get(delayed, deliver_ms), deliver_ms)
        magic = MAGIC_DEFAULT | (MAGIC_DELETE if delete else 0)
        window_ms = self.roll_window_slots * self.precision_ms
        if delayed - write >= window_ms:
            # Beyond the window: parked in a slot inside it, then written to the CommitLog
            # again when that slot comes round, and enqueued afresh.
            magic |= MAGIC_ROLL
            if delayed - write - window_ms < self.roll_window_slots // 3 * self.precision_ms:
                delayed = write + self.roll_window_slots // 2 * self.precision_ms
            else:
                delayed = write + window_ms
        self.wheel.reserve(delayed)
        slot = self.wheel.get_slot(delayed)
        position = self.log.append(
            TimerUnit(
                slot.last_pos,
                magic,
                write,
                delayed - write,
                phy_offset,
                size,
                java_string_hash(real_topic),
            )
        )
        first = position if slot.first_pos == -1 else slot.first_pos
        self.wheel.put_slot(delayed, first, position, slot.num + 1, slot.magic)
        self.queue_offset = queue_offset + 1
        return position

    # -- dequeue -------------------------------------------------------------------------------
    def due_slot(self) -> int | None:
        """The next slot to deliver, once the write time has passed it."""
        return self.read_time_ms if self.read_time_ms < self.write_time_ms else None

    def units_of(self, slot_ms: int) -> list[tuple[int, TimerUnit]]:
        """The slot's units, oldest first (the log links each to the one before)."""
        slot = self.wheel.get_slot(slot_ms)
        units: list[tuple[int, TimerUnit]] = []
        position = slot.last_pos
        while position >= 0:
            unit = self.log.unit_at(position)
            if unit is None:
                break
            units.append((position, unit))
            position = unit.prev_pos
        units.reverse()
        return units

    def delivered_before_ms(self) -> int:
        """Every message enqueued that is due before this time has been put: the read time, or
        earlier while a message enqueued late waits in a slot not yet read."""
        return min([self.read_time_ms, *self.late.values()])

    def delivered(self, slot_ms: int, done: int, phy_end: int) -> None:
        """`done` units of the slot are delivered, the last ending at CommitLog `phy_end`:
        written at once, so a kill between two deliveries repeats neither."""
        self.checkpoint.dequeued = Dequeued(slot_ms, done, phy_end)

    def advance(self) -> None:
        self.late.pop(self.read_time_ms, None)
        self.read_time_ms += self.precision_ms
        self.checkpoint.last_read_time_ms = self.read_time_ms
        self.checkpoint.dequeued = Dequeued(self.read_time_ms, 0, 0)
        self.pass_delivered()

    # -- what is still needed ------------------------------------------------------------------
    def pass_delivered(self, limit: int | None = PASS_CHUNK) -> None:
        """Move `pending_from` past the units whose slots are read (before the read time), up
        to `limit` of them (a big slot's are passed over the next ticks, not in one)."""
        passed = 0
        while limit is None or passed < limit:
            found = self.log.next_unit(self.pending_from)
            if found is None:
                self.pending_from = max(self.pending_from, self.log.max_offset)
                return
            position, unit = found
            if unit.delayed_time_ms >= self.read_time_ms:
                self.pending_from = position
                return
            self.pending_from = position + UNIT_SIZE
            passed += 1

    def commit_log_floor(self) -> int | None:
        """The lowest CommitLog offset a pending unit reads, None when none is pending. Units
        are appended in the timer topic's order, so CommitLog order: the first pending one's
        is the lowest."""
        found = self.log.next_unit(self.pending_from)
        return None if found is None else found[1].phy_offset

    def drop_delivered_files(self) -> list[MappedFile]:
        """Take the timer log files wholly below `pending_from` out of the log (never the
        last); the caller destroys them, off the event loop. Nothing reads them again: slots
        read are never read again, and recovery starts at the last flush or the first file."""
        return self.log.drop_below(self.pending_from)

    # -- flush ---------------------------------------------------------------------------------
    def flush(self) -> None:
        """Make the log, the wheel and the checkpoint durable (TimerFlushService). Blocking."""
        flushed = self.log.flush()
        self.wheel.flush()
        self.checkpoint.last_timer_log_flush_pos = flushed
        self.checkpoint.last_timer_queue_offset = self.queue_offset
        self.checkpoint.next_data_version()
        self.checkpoint.flush()

    def close(self) -> None:
        self.flush()
        self.log.close()
        self.wheel.close()
        self.checkpoint.close()
