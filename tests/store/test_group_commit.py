"""GroupCommit on its own flush thread: release in bulk, time out on a stalled disk, fail loudly."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest
import uvloop

from sidewinder.store.flush import FlushError, GroupCommit


class Disk:
    """What the flush thread syncs: an end offset that appends move, a sync that can stall or
    fail as a real disk does."""

    def __init__(self) -> None:
        self.end = 0
        self.syncs = 0
        self.started = threading.Event()  # a flush has read how far it syncs
        self.stalled = threading.Event()
        self.stalled.set()
        self.error: OSError | None = None
        self.threads: set[str] = set()

    def flush(self) -> int:
        self.threads.add(threading.current_thread().name)
        end = self.end
        self.started.set()
        self.stalled.wait(10)
        if self.error is not None:
            raise self.error
        self.syncs += 1
        return end


def test_waiters_are_released_by_the_flush_that_covers_them() -> None:
    disk = Disk()
    flushed: list[int] = []

    async def run() -> None:
        commit = GroupCommit(disk.flush, flushed.append)
        commit.start()
        disk.stalled.clear()  # the first flush holds until 64 waiters queue behind it
        disk.end = 100
        first = commit.durable(100, 5.0)
        assert await asyncio.to_thread(disk.started.wait, 5)
        waiters = []
        for n in range(1, 65):
            disk.end = 100 + n * 10
            waiters.append(commit.durable(disk.end, 5.0))
        disk.stalled.set()
        assert await first is True
        assert await asyncio.gather(*waiters) == [True] * 64
        assert commit.flushed_offset == 740
        # Two syncs: the one under way when they queued, then one for all of them.
        assert disk.syncs == 2 and flushed == [100, 740]
        # Covered already: answered without a flush.
        assert await commit.durable(740, 5.0) is True and disk.syncs == 2
        await commit.stop()

    uvloop.run(run())
    assert disk.threads == {"store-group-commit"}


def test_a_stalled_flush_times_waiters_out_and_a_later_one_releases_the_rest() -> None:
    disk = Disk()

    async def run() -> None:
        commit = GroupCommit(disk.flush)
        commit.start()
        disk.stalled.clear()
        disk.end = 10
        early = commit.durable(10, 0.05)
        patient = commit.durable(10, 5.0)
        assert await early is False  # syncFlushTimeout passed while the disk stalled
        assert not patient.done()
        disk.stalled.set()
        assert await patient is True
        await commit.stop()

    uvloop.run(run())


def test_a_failed_flush_fails_every_waiter_and_every_later_one() -> None:
    disk = Disk()

    async def run() -> None:
        commit = GroupCommit(disk.flush)
        commit.start()
        disk.error = OSError(errno.EIO, "Input/output error")
        disk.end = 10
        waiters = [commit.durable(10, 5.0), commit.durable(10, 5.0)]
        for waiter in waiters:
            with pytest.raises(FlushError, match="flush failed"):
                await waiter
        assert isinstance(commit.error, OSError)
        with pytest.raises(FlushError, match="read-only"):
            await commit.durable(20, 5.0)
        await commit.stop()

    uvloop.run(run())
