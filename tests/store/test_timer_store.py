"""The timer log, the time wheel and their checkpoint: real files, restarts, cut tails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from sidewinder.store.timer_checkpoint import Dequeued, TimerCheckpoint
from sidewinder.store.timer_log import (
    BLANK_MAGIC,
    MAGIC_DEFAULT,
    MAGIC_ROLL,
    UNIT_SIZE,
    TimerLog,
    TimerUnit,
    java_string_hash,
)
from sidewinder.store.timer_store import TimerStore
from sidewinder.store.timer_wheel import TimerWheel

NOW = 1_700_000_000_000  # a whole second


def _open(root: Path, log_file_size: int = 4096) -> TimerStore:
    return TimerStore(root, precision_ms=1000, log_file_size=log_file_size)


def _recover(timers: TimerStore, now_ms: int = NOW) -> int:
    # A unit's "message" is numbered by its phy offset: its queue offset is that number.
    return timers.recover(now_ms, lambda unit: unit.phy_offset + 1)


def test_rocketmq_constants_and_layout() -> None:
    assert UNIT_SIZE == 52
    assert BLANK_MAGIC == (0xBBCCDDEE ^ 1880681594) - 2**32  # a negative Java int
    assert java_string_hash("a") == 97 and java_string_hash("ab") == 97 * 31 + 98


def test_units_chain_per_slot_and_survive_a_restart(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    for i, delay_ms in enumerate([3000, 1000, 3000, 3500, 1000]):
        timers.enqueue(1000 + i, 100, NOW + delay_ms, "T", i)
    assert timers.queue_offset == 5
    assert [u.phy_offset for _, u in timers.units_of(NOW + 3000)] == [1000, 1002, 1003]
    assert [u.phy_offset for _, u in timers.units_of(NOW + 1000)] == [1001, 1004]
    assert timers.wheel.get_slot(NOW + 3000).num == 3
    timers.close()

    again = _open(tmp_path)
    _recover(again, NOW + 500)
    assert again.queue_offset == 1005  # after the last unit's message
    assert again.read_time_ms == NOW  # from the checkpoint
    assert [u.phy_offset for _, u in again.units_of(NOW + 3000)] == [1000, 1002, 1003]
    again.close()


def test_slots_are_delivered_only_once_their_time_has_passed(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    timers.enqueue(7, 100, NOW + 1000, "T", 0)
    timers.move_write_time(NOW + 999)
    assert timers.due_slot() is None  # the current second is being written
    timers.move_write_time(NOW + 1000)
    assert timers.due_slot() == NOW  # past, empty
    timers.advance()
    assert timers.due_slot() is None  # slot NOW+1000 is being written still
    timers.move_write_time(NOW + 2000)
    assert timers.due_slot() == NOW + 1000
    assert [u.phy_offset for _, u in timers.units_of(NOW + 1000)] == [7]
    timers.close()


def test_a_past_time_goes_to_the_slot_being_written(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    timers.move_write_time(NOW + 5000)
    timers.enqueue(9, 100, NOW - 60_000, "T", 0)
    assert [u.phy_offset for _, u in timers.units_of(NOW + 5000)] == [9]
    timers.close()


def test_beyond_the_roll_window_a_unit_rolls(tmp_path: Path) -> None:
    timers = TimerStore(tmp_path, precision_ms=1000, log_file_size=4096, roll_window_slots=600)
    _recover(timers)
    timers.enqueue(1, 100, NOW + 3_600_000, "T", 0)
    (_, unit), *_ = timers.units_of(NOW + 600_000)
    assert unit.magic == MAGIC_DEFAULT | MAGIC_ROLL and unit.rolls
    timers.close()


def test_units_cross_files_with_blanks(tmp_path: Path) -> None:
    timers = _open(tmp_path, log_file_size=UNIT_SIZE * 3 + 20)  # 3 units, then a blank
    _recover(timers)
    for i in range(10):
        timers.enqueue(i, 10, NOW + 2000, "T", i)
    assert len(list((tmp_path / "timerlog").iterdir())) == 4
    assert [u.phy_offset for _, u in timers.units_of(NOW + 2000)] == list(range(10))
    timers.close()
    again = _open(tmp_path, log_file_size=UNIT_SIZE * 3 + 20)
    _recover(again)
    assert again.queue_offset == 10
    again.enqueue(10, 10, NOW + 2000, "T", 10)
    assert [u.phy_offset for _, u in again.units_of(NOW + 2000)] == list(range(11))
    again.close()


def test_a_torn_unit_is_cut_and_the_wheel_revised(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    for i in range(3):
        timers.enqueue(i, 10, NOW + 2000, "T", i)
    timers.close()
    # A unit whose write a kill cut: its size (written last) never landed.
    log = TimerLog(tmp_path / "timerlog", 4096)
    log.load()
    segment = log.files.files[0]
    segment.buffer[3 * UNIT_SIZE + 4 : 4 * UNIT_SIZE] = b"\x07" * (UNIT_SIZE - 4)
    log.close()
    again = _open(tmp_path)
    assert _recover(again) == 3 * UNIT_SIZE
    assert again.queue_offset == 3
    position = again.enqueue(3, 10, NOW + 2000, "T", 3)
    assert position == 3 * UNIT_SIZE
    assert [u.phy_offset for _, u in again.units_of(NOW + 2000)] == [0, 1, 2, 3]
    again.close()


def test_the_wheel_is_rebuilt_from_the_log_when_it_lost_writes(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    for i in range(4):
        timers.enqueue(i, 10, NOW + 1000 * (i % 2 + 1), "T", i)
    timers.close()
    (tmp_path / "timerwheel").unlink()  # a wheel that never reached the disk
    again = _open(tmp_path)
    _recover(again)
    assert [u.phy_offset for _, u in again.units_of(NOW + 1000)] == [0, 2]
    assert [u.phy_offset for _, u in again.units_of(NOW + 2000)] == [1, 3]
    again.close()


def test_checkpoint_layout_is_rocketmqs(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(path)
    cp.last_read_time_ms = NOW
    cp.last_timer_log_flush_pos = 520
    cp.last_timer_queue_offset = 17
    cp.dequeued = Dequeued(NOW, 3, 4096)
    cp.next_data_version()
    cp.flush()
    cp.close()
    data = path.read_bytes()
    assert len(data) == 4096
    longs = [int.from_bytes(data[i : i + 8], "big", signed=True) for i in range(0, 88, 8)]
    assert longs[:4] == [NOW, 520, 17, 17] and longs[6] == 1
    assert longs[8:11] == [NOW, 3, 4096]
    assert TimerCheckpoint(path).dequeued == Dequeued(NOW, 3, 4096)


def test_wheel_size_and_another_turn_reads_empty(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "timerwheel", 7 * 86_400, 1000)
    assert (tmp_path / "timerwheel").stat().st_size == 7 * 86_400 * 2 * 32
    wheel.put_slot(NOW, 0, 52, 2)
    turn = 7 * 86_400 * 2 * 1000
    assert wheel.get_slot(NOW).last_pos == 52
    assert wheel.get_slot(NOW + turn).empty  # same index, another turn
    wheel.close()


def test_a_killed_writer_loses_no_unit(tmp_path: Path) -> None:
    """SIGKILL a process enqueueing without ever flushing: what it wrote into the maps is all
    there after recovery, log and wheel alike."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from sidewinder.store.timer_store import TimerStore
        timers = TimerStore(Path({str(tmp_path)!r}), precision_ms=1000, log_file_size=1 << 16)
        timers.recover({NOW}, lambda unit: unit.phy_offset + 1)
        i = 0
        while True:
            timers.enqueue(i, 10, {NOW} + 1000 * (1 + i % 5), "T", i)
            i += 1
            if i == 2000:
                print("ready", flush=True)
        """
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    writer.send_signal(signal.SIGKILL)
    writer.wait(10)
    timers = _open(tmp_path, log_file_size=1 << 16)
    _recover(timers)
    count = timers.queue_offset
    assert count >= 2000
    got = sorted(u.phy_offset for s in range(5) for _, u in timers.units_of(NOW + 1000 * (1 + s)))
    assert got == list(range(count))
    timers.close()


def test_an_rocketmq_unit_reads_back(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog", 4096)
    log.load()
    unit = TimerUnit(-1, MAGIC_DEFAULT, NOW, 3000, 123, 456, java_string_hash("T"))
    assert log.append(unit) == 0
    assert log.unit_at(0) == unit
    log.close()


def _deliver_until(timers: TimerStore, now_ms: int) -> None:
    timers.move_write_time(now_ms)
    while timers.due_slot() is not None:
        timers.advance()


def test_delivered_timer_log_files_go_and_those_with_pending_units_stay(tmp_path: Path) -> None:
    timers = _open(tmp_path)  # 4096-byte files: 78 units each
    _recover(timers)
    timers.enqueue(500, 100, NOW + 20_000, "T", 0)  # due long after the rest, in the first file
    for i in range(1, 300):
        timers.enqueue(500 + i, 100, NOW + 1000 + i % 5 * 1000, "T", i)
    assert len(timers.log.files.files) == 4
    assert timers.commit_log_floor() == 500
    _deliver_until(timers, NOW + 10_000)  # all but the first unit
    assert timers.drop_delivered_files() == []  # the first file holds that one
    assert timers.commit_log_floor() == 500
    timers.close()

    again = _open(tmp_path)
    _recover(again, NOW + 10_500)
    assert again.commit_log_floor() == 500  # found again by recovery's walk
    _deliver_until(again, NOW + 30_000)
    assert again.commit_log_floor() is None  # nothing pending
    dropped = again.drop_delivered_files()
    assert [f.file_from_offset for f in dropped] == [0, 4096, 8192]  # never the last
    for f in dropped:
        f.destroy()
    assert sorted(p.name for p in (tmp_path / "timerlog").iterdir()) == [f"{12288:020d}"]
    again.enqueue(900, 100, NOW + 40_000, "T", 300)
    assert again.commit_log_floor() == 900
    again.close()

    third = _open(tmp_path)  # a log that starts past its deleted files recovers as before
    _recover(third, NOW + 30_500)
    assert third.queue_offset == 901
    assert [u.phy_offset for _, u in third.units_of(NOW + 40_000)] == [900]
    assert third.commit_log_floor() == 900
    third.close()


def test_a_delete_marker_s_unit_carries_rocketmq_s_delete_magic(tmp_path: Path) -> None:
    timers = _open(tmp_path)
    _recover(timers)
    timers.enqueue(7, 100, NOW + 1000, "T", 0)
    timers.enqueue(8, 100, NOW + 1000, "T", 1, delete=True)
    timers.enqueue(9, 100, NOW + 3 * 86_400_000, "T", 2, delete=True)  # beyond the window
    timers.close()
    again = _open(tmp_path)
    _recover(again)
    (_, kept), (_, marker) = again.units_of(NOW + 1000)
    assert (kept.magic, kept.deletes) == (MAGIC_DEFAULT, False)
    assert (marker.magic, marker.deletes) == (MAGIC_DEFAULT | 4, True)
    rolling = again.log.unit_at(2 * UNIT_SIZE)
    assert rolling is not None and rolling.rolls and not rolling.deletes  # moved on, as any roll
    again.close()
