"""GroupCommit and its syncers: release in bulk, time out on a stalled disk, fail loudly.

GroupCommit's own rules run on the reference syncer (a Python thread) over a disk that can be
made to stall or fail; the Rust syncer, which has no such seam, runs on real files, a pipe (an
fdatasync refused with EINVAL) and a closed descriptor, and both kinds must give a store the
same answers (tests/store run the store on each).
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from sidewinder.common.native import NATIVE
from sidewinder.store.flush import (
    FlushError,
    GroupCommit,
    NativeSyncer,
    SyncPlan,
    ThreadSyncer,
)


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

    def plan(self) -> SyncPlan:
        end = self.end
        return [7], lambda: end

    def sync(self, fd: int) -> None:
        assert fd == 7
        self.threads.add(threading.current_thread().name)
        self.started.set()
        self.stalled.wait(10)
        if self.error is not None:
            raise self.error
        self.syncs += 1

    def group_commit(self, on_flushed: Callable[[int], None] | None = None) -> GroupCommit:
        syncer = ThreadSyncer("store-group-commit", self.sync)
        return GroupCommit(self.plan, on_flushed, syncer=syncer)


def test_waiters_are_released_by_the_flush_that_covers_them() -> None:
    disk = Disk()
    flushed: list[int] = []

    async def run() -> None:
        commit = disk.group_commit(flushed.append)
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


def test_a_put_nobody_waits_for_during_a_flush_gets_a_flush_of_its_own() -> None:
    """WAIT=false puts (the timer's and the schedule's deliveries) wake the group commit while
    a round is under way: another round follows, though no waiter asks for it, or they stay
    unflushed, so undispatched and unseen by consumers, until some later put."""
    disk = Disk()
    flushed: list[int] = []

    async def run() -> None:
        commit = disk.group_commit(flushed.append)
        commit.start()
        disk.stalled.clear()
        disk.end = 100
        commit.wake()
        assert await asyncio.to_thread(disk.started.wait, 5)
        disk.end = 200  # appended while the round that planned 100 syncs
        commit.wake()
        disk.stalled.set()
        for _ in range(500):
            if commit.flushed_offset == 200:
                break
            await asyncio.sleep(0.01)
        assert flushed == [100, 200] and disk.syncs == 2
        await commit.stop()

    uvloop.run(run())


def test_a_stalled_flush_times_waiters_out_and_a_later_one_releases_the_rest() -> None:
    disk = Disk()

    async def run() -> None:
        commit = disk.group_commit()
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
        commit = disk.group_commit()
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


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
def test_the_native_syncer_syncs_real_files_and_reports_refusals(tmp_path: Path) -> None:
    files = [os.open(tmp_path / f"segment{n}", os.O_RDWR | os.O_CREAT) for n in range(2)]
    read_end, write_end = os.pipe()
    closed = 1_000_000  # past any descriptor this process has open

    async def run() -> list[OSError | None]:
        loop = asyncio.get_running_loop()
        outcomes: list[OSError | None] = []
        round_done = asyncio.Event()

        def done(error: OSError | None) -> None:
            outcomes.append(error)
            round_done.set()

        syncer = NativeSyncer("store-group-commit", NATIVE.Syncer)
        syncer.start(loop, done)
        for fds in (files, [], [read_end], [closed], files):
            for fd in files:
                os.pwrite(fd, b"x" * 1000, 0)
            round_done.clear()
            syncer.sync(fds)
            await asyncio.wait_for(round_done.wait(), 5)
        await syncer.stop()
        return outcomes

    try:
        outcomes = uvloop.run(run())
    finally:
        for fd in (*files, read_end, write_end):
            os.close(fd)
    assert outcomes[0] is None and outcomes[1] is None and outcomes[4] is None
    assert isinstance(outcomes[2], OSError) and outcomes[2].errno == errno.EINVAL
    assert isinstance(outcomes[3], OSError) and outcomes[3].errno == errno.EBADF


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
def test_a_native_group_commit_fails_every_waiter_when_the_sync_is_refused() -> None:
    read_end, write_end = os.pipe()  # fdatasync on a pipe: EINVAL, as a refusing disk's EIO

    async def run() -> None:
        commit = GroupCommit(
            lambda: ([read_end], lambda: 10), syncer=NativeSyncer("gc", NATIVE.Syncer)
        )
        commit.start()
        waiters = [commit.durable(10, 5.0), commit.durable(10, 5.0)]
        for waiter in waiters:
            with pytest.raises(FlushError, match="flush failed"):
                await waiter
        with pytest.raises(FlushError, match="read-only"):
            await commit.durable(20, 5.0)
        await commit.stop()

    try:
        uvloop.run(run())
    finally:
        os.close(read_end)
        os.close(write_end)


def test_stop_answers_the_round_under_way_and_times_out_the_rest() -> None:
    disk = Disk()

    async def run() -> None:
        commit = disk.group_commit()
        commit.start()
        disk.stalled.clear()
        disk.end = 10
        covered = commit.durable(10, 60.0)
        assert await asyncio.to_thread(disk.started.wait, 5)
        disk.end = 20
        uncovered = commit.durable(20, 60.0)  # behind the stalled round: no round for it
        stopping = asyncio.ensure_future(commit.stop())
        await asyncio.sleep(0.05)
        disk.stalled.set()
        await stopping
        assert await covered is True
        assert await uncovered is False

    uvloop.run(run())


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
def test_the_native_syncer_answers_a_round_asked_right_before_stop(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "segment", os.O_RDWR | os.O_CREAT)

    async def run() -> list[OSError | None]:
        outcomes: list[OSError | None] = []
        syncer = NativeSyncer("store-group-commit", NATIVE.Syncer)
        syncer.start(asyncio.get_running_loop(), outcomes.append)
        os.pwrite(fd, b"x" * 1000, 0)
        syncer.sync([fd])
        await syncer.stop()  # no turn of the loop in between
        return outcomes

    try:
        assert uvloop.run(run()) == [None]
    finally:
        os.close(fd)
