"""A full disk, for real (a small tmpfs): refusals instead of SIGBUS, reads go on, puts resume.

Before these fixes a write into a page of a sparse segment with no block behind it killed the
process (SIGBUS); these tests would then crash their pytest worker rather than fail politely.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from sidewinder.common.fileio import write_atomic
from sidewinder.protocol.record import decode_record
from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.config import FlushDiskType, StoreConfig
from sidewinder.store.mapped_file import DiskFullError, MappedFile
from sidewinder.store.message_store import GetStatus, MessageStore, PutStatus
from tests.small_disk import fill, free_bytes, small_disk
from tests.store.small_store import HOST, message, store_config

PAGE = 4096


def full_disk_config(root: Path, **extra: object) -> StoreConfig:
    return store_config(
        root,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        clean_resource_interval=200,
        **extra,
    )


async def put_until_refused(store: MessageStore, topic: str, limit: int = 100_000) -> int:
    """Put 2 KiB messages to queue 0 until the store refuses; the number acknowledged."""
    for n in range(limit):
        result = await store.put_message(message(topic, 0, n, size=2048))
        if result.status is not PutStatus.PUT_OK:
            assert result.status is PutStatus.SERVICE_NOT_AVAILABLE, result
            assert "disk full" in result.remark, result.remark
            return n
    raise AssertionError(f"{limit} puts and the disk is not full")


async def read_all(store: MessageStore, topic: str, count: int) -> list[bytes]:
    await store.caught_up(5)
    bodies: list[bytes] = []
    offset = 0
    while offset < count:
        got = store.get_messages(topic, 0, offset, 32)
        assert got.status is GetStatus.FOUND, (offset, got.status)
        bodies += [bytes(decode_record(view, 0).body) for view in got.messages]
        offset = got.next_begin_offset
    return bodies


async def until_put_ok(store: MessageStore, topic: str, n: int, seconds: float = 10) -> int:
    """Retry one put until the store takes it; its queue offset."""
    deadline = time.monotonic() + seconds
    while True:
        result = await store.put_message(message(topic, 0, n, size=2048))
        if result.status is PutStatus.PUT_OK:
            assert result.append is not None
            return result.append.queue_offset
        assert time.monotonic() < deadline, f"puts did not resume: {result.remark}"
        await asyncio.sleep(0.1)


def test_a_file_without_room_is_refused_and_not_left_behind(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", mib=4) as disk:
        with pytest.raises(DiskFullError, match="disk full"):
            MappedFile(disk / MappedFile.name_for(0), 8 << 20)
        assert os.listdir(disk) == []
        made = MappedFile(disk / MappedFile.name_for(0), 1 << 20)
        assert made.allocated_to == 1 << 20
        # Its blocks are taken now, not when the pages are first written.
        assert os.stat(made.path).st_blocks * 512 >= 1 << 20
        made.close()


def test_metadata_and_checkpoint_writes_keep_the_last_good_file(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", mib=1) as disk:
        table = disk / "config" / "topics.json"
        write_atomic(table, '{"old": true}')
        checkpoint = StoreCheckpoint(disk / "checkpoint", 1, 2, 3)
        checkpoint.flush()
        fill(disk)
        with pytest.raises(OSError):
            write_atomic(table, "x" * (2 << 20))
        assert table.read_text() == '{"old": true}'
        assert not table.with_name("topics.json.tmp").exists()
        fresh = StoreCheckpoint(disk / "checkpoint2", 4, 5, 6)
        fresh.flush()  # no room for a new one: logged, nothing left behind, no exception
        assert not (disk / "checkpoint2").exists()
        checkpoint.physic_msg_timestamp = 7
        checkpoint.flush()  # rewritten in place: its block is already there
        assert StoreCheckpoint.open(disk / "checkpoint").physic_msg_timestamp == 7


def test_filling_the_disk_refuses_puts_serves_reads_and_resumes(tmp_path: Path) -> None:
    async def scenario(disk: Path) -> None:
        root = disk / "store"
        # No forced cleanup: every acknowledged message must stay readable.
        store = MessageStore(
            full_disk_config(root, clean_file_forcibly_enable=False), store_host=HOST
        )
        await store.start()
        try:
            acked = await put_until_refused(store, "Fill")
            assert acked > 1000
            # Refused again, at once, while the disk stays full; the store still runs.
            again = await store.put_message(message("Fill", 0, acked, size=2048))
            assert again.status is PutStatus.SERVICE_NOT_AVAILABLE
            bodies = await read_all(store, "Fill", acked)
            assert bodies == [bytes(message("Fill", 0, n, size=2048).body) for n in range(acked)]
            assert store.get_messages("Fill", 0, 0, 32).status is GetStatus.FOUND
            (disk / "ballast").unlink()  # an operator frees space
            assert await until_put_ok(store, "Fill", acked) == acked
        finally:
            await store.shutdown()

    with small_disk(tmp_path / "disk", mib=16) as disk:
        fill(disk, leave_bytes=9 << 20)
        asyncio.run(scenario(disk))


def test_forced_cleanup_frees_a_full_disk_by_itself(tmp_path: Path) -> None:
    """RocketMQ's contract with cleanFileForciblyEnable (the default): above the limits the
    oldest segments go, expired or not, and puts go on without an operator."""

    async def scenario(disk: Path) -> None:
        store = MessageStore(full_disk_config(disk / "store"), store_host=HOST)
        await store.start()
        try:
            acked = await put_until_refused(store, "Forced")
            await until_put_ok(store, "Forced", acked, seconds=15)
            assert store.min_phy_offset > 0  # the oldest segments went
        finally:
            await store.shutdown()

    with small_disk(tmp_path / "disk", mib=16) as disk:
        asyncio.run(scenario(disk))


def sparsify(segment: Path, written: int, junk: bytes) -> None:
    """Rewrite a segment as RocketMQ leaves one: blocks only for what was written (here with
    a torn record after it, in the same page), a hole after."""
    data = segment.read_bytes()[:written] + junk
    fresh = segment.with_name("sparse")
    fd = os.open(fresh, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, len(segment.read_bytes()))
    os.pwrite(fd, data, 0)
    os.close(fd)
    os.replace(fresh, segment)


def test_restart_on_a_full_disk_with_a_sparse_segment_and_lost_queues(tmp_path: Path) -> None:
    """The restart that died of SIGBUS: recovery cuts a torn tail in a sparse segment on a
    full disk. It must start, refuse puts until there is room, then continue the queue."""

    # No forced cleanup: every acknowledged message must stay readable.
    config = full_disk_config(root := tmp_path / "disk" / "store", clean_file_forcibly_enable=False)

    async def first_run(root: Path) -> int:
        store = MessageStore(config, store_host=HOST)
        await store.start()
        for n in range(1200):
            assert (await store.put_message(message("Sparse", 0, n, size=2048))).status is (
                PutStatus.PUT_OK
            )
        end = store.max_phy_offset
        await store.shutdown()
        return end

    async def second_run(root: Path, disk: Path) -> None:
        store = MessageStore(config, store_host=HOST)
        await store.start()
        try:
            assert store.recovery is not None and store.recovery.crashed
            refused = await store.put_message(message("Sparse", 0, 1200, size=2048))
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert "disk full" in refused.remark
            (disk / "ballast").unlink()
            # The queues are rebuilt once there is room; the queue goes on where it was.
            assert await until_put_ok(store, "Sparse", 1200) == 1200
            bodies = await read_all(store, "Sparse", 1201)
            assert bodies[:1200] == [
                bytes(message("Sparse", 0, n, size=2048).body) for n in range(1200)
            ]
        finally:
            await store.shutdown()

    with small_disk(tmp_path / "disk", mib=16) as disk:
        root = disk / "store"
        end = asyncio.run(first_run(root))
        segments = sorted((root / "commitlog").iterdir())
        assert len(segments) >= 3  # full ones and the one being written
        # The one a RocketMQ broker (or an older ours) made ahead, sparse, and left there.
        ahead = segments[-1].with_name(MappedFile.name_for(int(segments[-1].name) + (1 << 20)))
        with open(ahead, "wb") as made_ahead:
            made_ahead.truncate(1 << 20)
        segments.append(ahead)
        data = [path for path in segments if int(path.name) < end]
        last = data[-1]
        sparsify(last, end - int(last.name), junk=last.read_bytes()[:200])  # a torn header copy
        for older in data[:-1]:
            # Only the blank tail's 8-byte header written, the rest of the tail a hole.
            sparsify(older, len(older.read_bytes().rstrip(b"\0")), junk=b"")
        for prepared in segments:
            if int(prepared.name) > end:
                sparsify(prepared, 0, junk=b"")  # made ahead, never written: all hole
        # The queues are lost: dispatch must rebuild them, and has no room to.
        for path in sorted((root / "consumequeue").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (root / "abort").touch()
        fill(disk)
        assert free_bytes(disk) < 64 << 10
        asyncio.run(second_run(root, disk))


def test_no_room_for_a_queue_file_pauses_dispatch_and_puts_until_there_is(tmp_path: Path) -> None:
    """The CommitLog segment has room, a new ConsumeQueue file has none: puts stop (what is
    acknowledged stays readable once dispatched), and all goes on once space is back."""

    async def scenario(disk: Path) -> None:
        store = MessageStore(full_disk_config(disk / "store"), store_host=HOST)
        await store.start()
        try:
            for n in range(10):
                assert (await store.put_message(message("Q", 0, n, size=100))).status is (
                    PutStatus.PUT_OK
                )
            await store.caught_up(5)
            ballast = fill(disk)
            acked = 10
            refusal = ""
            for n in range(10, 2000):
                result = await store.put_message(message("Q", 0, n, size=100))
                if result.status is not PutStatus.PUT_OK:
                    refusal = result.remark
                    break
                acked += 1
                await asyncio.sleep(0.002)  # let dispatch run
            assert "disk full" in refusal and "dispatched" in refusal, refusal
            assert acked < 2000
            assert (await read_all(store, "Q", 10))[:10]  # what was dispatched is served
            ballast.unlink()
            assert await until_put_ok(store, "Q", acked) == acked
            bodies = await read_all(store, "Q", acked + 1)
            assert bodies[:acked] == [
                bytes(message("Q", 0, n, size=100).body) for n in range(acked)
            ]
            assert bodies[acked] == bytes(message("Q", 0, acked, size=2048).body)
        finally:
            await store.shutdown()

    with small_disk(tmp_path / "disk", mib=16) as disk:
        asyncio.run(scenario(disk))


def test_a_timer_wheel_on_a_full_disk_reads_holes_as_empty_and_refuses_writes(
    tmp_path: Path,
) -> None:
    # On tmpfs even a read of a page with no block takes one: on a full disk a SIGBUS, which
    # killed the broker's timer tick the moment its clock reached an untouched page.
    from sidewinder.store.timer_wheel import SLOT_SIZE, TimerWheel

    now = 1_700_000_000_000
    page_of_slots = PAGE // SLOT_SIZE * 1000  # the milliseconds one page of slots covers
    with small_disk(tmp_path / "disk", mib=4) as disk:
        wheel = TimerWheel(disk / "timerwheel", slots_total=3600, precision_ms=1000)
        wheel.put_slot(now, 7, 9, 2)
        ballast = fill(disk)
        assert free_bytes(disk) < PAGE
        later = now + 3 * page_of_slots  # a page no write has touched
        for at in range(later, later + page_of_slots, 1000):
            assert wheel.get_slot(at).empty
        assert wheel.get_slot(now).num == 2  # a page with its block still reads
        with pytest.raises(DiskFullError, match="timerwheel"):
            wheel.put_slot(later, 1, 1, 1)
        ballast.unlink()
        wheel.put_slot(later, 1, 1, 1)
        assert wheel.get_slot(later).num == 1
        wheel.close()


def test_a_timer_enqueue_on_a_full_disk_writes_nothing_and_succeeds_later(
    tmp_path: Path,
) -> None:
    from sidewinder.store.timer_store import TimerStore
    from sidewinder.store.timer_wheel import SLOT_SIZE

    now = 1_700_000_000_000
    with small_disk(tmp_path / "disk", mib=4) as disk:
        timers = TimerStore(disk / "timer", precision_ms=1000, log_file_size=4096)
        timers.recover(now, lambda unit: unit.phy_offset + 1)
        timers.enqueue(100, 50, now + 2000, "T", 0)
        ballast = fill(disk)
        far = now + 2 * PAGE // SLOT_SIZE * 1000  # its slot is in a page with no block
        with pytest.raises(DiskFullError):
            timers.enqueue(200, 50, far, "T", 1)
        assert timers.queue_offset == 1
        assert timers.units_of(far) == []
        ballast.unlink()
        timers.enqueue(200, 50, far, "T", 1)
        assert [u.phy_offset for _, u in timers.units_of(far)] == [200]
        assert [u.phy_offset for _, u in timers.units_of(now + 2000)] == [100]
        timers.close()


def test_rocketmq_5_disk_ratio_keys_lower_where_puts_stop_and_are_held_to_90(
    tmp_path: Path,
) -> None:
    """diskSpaceWarningLevelRatio from broker.conf: 50 stops puts on a disk about 60 % used;
    95 is held to 90, as RocketMQ 5 holds it, so the same disk takes puts."""

    async def first_put(root: Path, ratio: str) -> tuple[PutStatus, str]:
        config = StoreConfig.from_properties(
            {
                **store_config(root).model_dump(by_alias=True),
                "diskSpaceWarningLevelRatio": ratio,
                "diskSpaceCleanForciblyRatio": "40",
                "cleanFileForciblyEnable": "false",
            }
        )
        store = MessageStore(config, store_host=HOST)
        await store.start()
        try:
            result = await store.put_message(message("Ratio", 0, 0))
            return result.status, result.remark
        finally:
            await store.shutdown()

    with small_disk(tmp_path / "disk", mib=16) as disk:
        fill(disk, leave_bytes=6 << 20)
        status, remark = asyncio.run(first_put(disk / "low", "50"))
        assert status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "above 50%" in remark, remark
        status, remark = asyncio.run(first_put(disk / "high", "95"))
        assert status is PutStatus.PUT_OK, remark
