"""Flushing the CommitLog: SYNC_FLUSH group commit and the ASYNC_FLUSH timer.

Each runs its fdatasyncs off the event loop, in order: group commit on a thread of its own (a
syncer), the timer on an executor's. Group commit: every waiter whose end offset one round of
fdatasyncs covers is released by it, so N concurrent producers cost about one disk sync per
round, not N. An fdatasync error is never swallowed: it fails every waiter and is kept in
`error`, and the store turns read-only.
"""

from __future__ import annotations

import asyncio
import functools
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol, cast

import structlog

from sidewinder.common.histogram import Buckets
from sidewinder.common.native import implementation

log = structlog.get_logger(__name__)

PAGE = 4096
STOP_WAIT_S = 30  # a sync under way finishes first at stop (a dying disk: not forever)

# What one group-commit round syncs: the file descriptors, and what to call on the loop once
# they are synced (it marks them flushed and returns the flushed offset).
SyncPlan = tuple[list[int], Callable[[], int]]
SyncDone = Callable[[OSError | None], None]
# Bucket bounds of what each flush round records (the broker's metrics read them).
FLUSH_SECONDS_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
ROUND_BYTES_BOUNDS = (4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20)
ROUND_WAITERS_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class FlushError(OSError):
    """The disk refused a flush; the store is read-only from then on."""


class Syncer(Protocol):
    """Runs rounds of fdatasyncs on a thread of its own, one round at a time; `done` is called
    on the loop after each, with the error that stopped it, if any."""

    def start(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None: ...

    def sync(self, fds: list[int]) -> None: ...

    async def stop(self) -> None: ...


class ThreadSyncer:
    """The reference syncer: a Python thread, asked through a queue, answering with one
    call_soon_threadsafe. It takes the GIL to start a round and again after the fdatasync,
    waiting each time for the loop's thread to let it go."""

    def __init__(self, name: str, sync: Callable[[int], None] = os.fdatasync) -> None:
        self._name = name
        self._sync = sync
        self._asks: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(loop, done), name=self._name, daemon=True
        )
        self._thread.start()

    def sync(self, fds: list[int]) -> None:
        self._asks.put(fds)

    def _run(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None:
        while (fds := self._asks.get()) is not None:
            error: OSError | None = None
            try:
                for fd in fds:
                    self._sync(fd)
            except OSError as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(done, error)
            except RuntimeError:
                return  # the loop is closed: the store is gone

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._asks.put(None)
            await asyncio.get_running_loop().run_in_executor(None, thread.join, STOP_WAIT_S)


class NativeSyncer:
    """The Rust syncer (`native_class`: sidewinder._native.Syncer): its thread never takes the
    GIL, so a round starts at once and ends with an eventfd the loop watches."""

    def __init__(self, name: str, native_class: Any) -> None:
        self._name = name
        self._native_class = native_class
        self._eventfd = -1
        self._native: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: SyncDone | None = None

    def start(self, loop: asyncio.AbstractEventLoop, done: SyncDone) -> None:
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._native = self._native_class(self._eventfd, self._name)
        self._loop, self._done = loop, done
        loop.add_reader(self._eventfd, self._ready)

    def sync(self, fds: list[int]) -> None:
        self._native.sync(fds)

    def _ready(self) -> None:
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            return
        errno = self._native.outcome()
        if errno is not None and self._done is not None:
            self._done(OSError(errno, os.strerror(errno)) if errno else None)

    async def stop(self) -> None:
        native, loop = self._native, self._loop
        if native is None or loop is None:
            return
        # The thread answers a round under way first; the reader stays to take that answer.
        stopped = await loop.run_in_executor(None, native.stop, STOP_WAIT_S)
        loop.remove_reader(self._eventfd)
        if stopped:
            self._ready()  # an answer the loop had not read yet
            os.close(self._eventfd)
        # Else the thread is still in an fdatasync and writes the eventfd when it returns:
        # the descriptor stays open (a closed one could be reused by a file by then).
        self._native = None


def _native_syncer(native_class: Any) -> Callable[[str], Syncer]:
    return functools.partial(NativeSyncer, native_class=native_class)


# A group commit's syncer, made from its thread's name: the Rust one when the extension is in
# use (common/native.py), else the reference.
default_syncer = implementation(
    "Syncer", cast("Callable[[str], Syncer]", ThreadSyncer), _native_syncer
)


class GroupCommit:
    """SYNC_FLUSH waiters released in bulk by each round of fdatasyncs.

    Waiters queue in put order, and puts append in that order, so their end offsets (and,
    with one timeout for all, their deadlines) only grow: releasing and expiring both take
    from the head. One timer watches the head's deadline, so a stalled disk still times
    waiters out while an fdatasync hangs.

    A round is planned on the loop (`plan`: which files, and what marks them flushed after),
    synced by the syncer's thread, and finished on the loop: an unloaded SYNC_FLUSH ack costs
    two thread hand-offs and two turns of the loop. Nothing else flushes the CommitLog while
    the store runs under SYNC_FLUSH.
    """

    def __init__(
        self,
        plan: Callable[[], SyncPlan],
        on_flushed: Callable[[int], None] | None = None,
        *,
        syncer: Syncer | None = None,
        thread_name: str = "store-group-commit",
    ) -> None:
        self._plan = plan
        # Told after every flush, waited on or not (the dispatcher follows the flushed offset).
        self._on_flushed = on_flushed
        self._waiters: deque[tuple[int, float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._syncer = syncer if syncer is not None else default_syncer(thread_name)
        self._started = False
        self._asked = False  # a round is under way; its answer asks again if needed
        # A wake() during a round: the appends it asks for may be past what the round planned,
        # so another round follows, waiters or not (the dispatcher follows the flushed offset).
        self._again = False
        self._finish: Callable[[], int] | None = None
        self.flushed_offset = 0
        self.flushes = 0
        self.error: BaseException | None = None
        # Per round, not per waiter: how long its fdatasyncs took (from asking), how many
        # CommitLog bytes it made durable, and how many waiting puts it released.
        self.round_seconds = Buckets(FLUSH_SECONDS_BOUNDS)
        self.round_bytes = Buckets(ROUND_BYTES_BOUNDS)
        self.round_waiters = Buckets(ROUND_WAITERS_BOUNDS)
        self._round_started = 0.0

    def start(self) -> None:
        self._syncer.start(asyncio.get_running_loop(), self._synced)
        self._started = True

    async def wait_flushed(self, end_offset: int, timeout_s: float) -> bool:
        """True once everything before `end_offset` is durable; False after `timeout_s`."""
        return await self.durable(end_offset, timeout_s)

    def durable(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """wait_flushed as a future, for callers that answer from a callback (no task)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if self.error is not None:
            future.set_exception(
                FlushError(f"the store is read-only after a flush error: {self.error}")
            )
        elif end_offset <= self.flushed_offset:
            future.set_result(True)
        else:
            self._waiters.append((end_offset, loop.time() + timeout_s, future))
            if self._timer is None:
                self._arm(loop)
            self.wake()
        return future

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._waiters:
            self._timer = loop.call_at(self._waiters[0][1], self._expire)

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiters = self._waiters
        while waiters and waiters[0][1] <= now:
            future = waiters.popleft()[2]
            if not future.done():
                future.set_result(False)
        self._arm(loop)

    def wake(self) -> None:
        """Ask for a flush without waiting for it (a put whose WAIT property is false)."""
        if self._asked:
            self._again = True
        elif self.error is None and self._started:
            self._asked = True
            self._again = False
            self._round_started = time.perf_counter()
            fds, self._finish = self._plan()
            self._syncer.sync(fds)

    def _synced(self, error: OSError | None) -> None:
        finish, self._finish = self._finish, None
        if error is not None:
            self._fail(error)
        elif finish is not None:
            self._flushed(finish())

    def _flushed(self, flushed: int) -> None:
        self._asked = False
        self.flushes += 1
        self.round_seconds.observe(time.perf_counter() - self._round_started)
        self.round_bytes.observe(max(flushed - self.flushed_offset, 0))
        self.flushed_offset = max(self.flushed_offset, flushed)
        if self._on_flushed is not None:
            self._on_flushed(self.flushed_offset)
        waiters = self._waiters
        waiting = len(waiters)
        while waiters and waiters[0][0] <= self.flushed_offset:
            future = waiters.popleft()[2]
            if not future.done():
                future.set_result(True)
        self.round_waiters.observe(waiting - len(waiters))
        if waiters or self._again:
            self.wake()  # appends arrived during that flush: go again

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        log.error("store.flush_failed", error=str(exc), waiters=len(self._waiters))
        for _, _, future in self._waiters:
            if not future.done():
                future.set_exception(FlushError(f"flush failed: {exc}"))
        self._waiters.clear()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._started:
            self._started = False
            await self._syncer.stop()
        # Waiters no round covered: not durable as far as they can tell (FLUSH_DISK_TIMEOUT);
        # the store's last flush at shutdown may yet make them so.
        while self._waiters:
            future = self._waiters.popleft()[2]
            if not future.done():
                future.set_result(False)


class PeriodicFlush:
    """ASYNC_FLUSH: flush every `interval_ms` when at least `least_pages` pages are dirty, and
    regardless of that every `thorough_interval_ms` (RocketMQ's FlushRealTimeService)."""

    def __init__(
        self,
        flush: Callable[[], int],
        dirty_bytes: Callable[[], int],
        executor: Executor,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        after: Callable[[], None] | None = None,
    ) -> None:
        self._flush = flush
        self._after = after  # told on the loop after each run
        self._dirty_bytes = dirty_bytes
        self._executor = executor
        self.interval_s = interval_ms / 1000
        self.least_bytes = least_pages * PAGE
        self.thorough_s = thorough_interval_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.flushes = 0
        self.seconds = Buckets(FLUSH_SECONDS_BOUNDS)  # per run: how long its flush took

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="periodic-flush")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_thorough = time.monotonic()
        while True:
            await asyncio.sleep(self.interval_s)
            dirty = self._dirty_bytes()
            thorough = time.monotonic() - last_thorough >= self.thorough_s
            if dirty <= 0 or (dirty < self.least_bytes and not thorough):
                continue
            started = time.perf_counter()
            try:
                await loop.run_in_executor(self._executor, self._flush)
            except OSError as exc:
                self.error = exc
                log.error("store.flush_failed", error=str(exc))
                return
            self.seconds.observe(time.perf_counter() - started)
            self.flushes += 1
            if self._after is not None:
                self._after()
            if thorough:
                last_thorough = time.monotonic()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
