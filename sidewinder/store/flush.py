"""Flushing the CommitLog: SYNC_FLUSH group commit and the ASYNC_FLUSH timer.

Each runs `flush()` (an fdatasync) off the event loop, in order: group commit on a thread of its
own, the timer on an executor's. Group commit: every waiter whose end offset one fdatasync covers
is released by it, so N concurrent producers cost about one disk sync per round, not N. An
fdatasync error is never swallowed: it fails every waiter and is kept in `error`, and the store
turns read-only.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor

import structlog

log = structlog.get_logger(__name__)

PAGE = 4096


class FlushError(OSError):
    """The disk refused a flush; the store is read-only from then on."""


class GroupCommit:
    """SYNC_FLUSH waiters released in bulk by each fdatasync.

    Waiters queue in put order, and puts append in that order, so their end offsets (and,
    with one timeout for all, their deadlines) only grow: releasing and expiring both take
    from the head. One timer watches the head's deadline, so a stalled disk still times
    waiters out while an fdatasync hangs.

    The fdatasyncs run on a thread of their own, asked directly from the loop and answering
    with one call_soon_threadsafe: an unloaded SYNC_FLUSH ack then costs two thread hand-offs
    and two turns of the loop, where an executor round trip behind an asyncio task took five
    turns. Nothing else flushes the CommitLog while the store runs under SYNC_FLUSH.
    """

    def __init__(
        self,
        flush: Callable[[], int],
        on_flushed: Callable[[int], None] | None = None,
        *,
        thread_name: str = "store-group-commit",
    ) -> None:
        self._flush = flush
        # Told after every flush, waited on or not (the dispatcher follows the flushed offset).
        self._on_flushed = on_flushed
        self._waiters: deque[tuple[int, float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._thread_name = thread_name
        self._thread: threading.Thread | None = None
        self._asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: flush; False: stop
        self._asked = False  # a flush is asked for or running; its answer asks again if needed
        self._loop: asyncio.AbstractEventLoop | None = None
        self.flushed_offset = 0
        self.flushes = 0
        self.error: BaseException | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._flush_when_asked, name=self._thread_name)
        self._thread.daemon = True
        self._thread.start()

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
        if not self._asked and self.error is None and self._thread is not None:
            self._asked = True
            self._asks.put(True)

    def _flush_when_asked(self) -> None:
        """The flush thread: one fdatasync per ask, each answered on the loop."""
        loop = self._loop
        assert loop is not None
        while self._asks.get():
            try:
                flushed = self._flush()
            except OSError as exc:
                answer: Callable[[], None] = functools.partial(self._fail, exc)
            else:
                answer = functools.partial(self._flushed, flushed)
            try:
                loop.call_soon_threadsafe(answer)
            except RuntimeError:
                return  # the loop is closed: the store is gone

    def _flushed(self, flushed: int) -> None:
        self._asked = False
        self.flushes += 1
        self.flushed_offset = max(self.flushed_offset, flushed)
        if self._on_flushed is not None:
            self._on_flushed(self.flushed_offset)
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.flushed_offset:
            future = waiters.popleft()[2]
            if not future.done():
                future.set_result(True)
        if waiters:
            self.wake()  # appends arrived during that flush: go again

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        log.error("store.flush_failed", error=str(exc), waiters=len(self._waiters))
        for _, _, future in self._waiters:
            if not future.done():
                future.set_exception(FlushError(f"flush failed: {exc}"))
        self._waiters.clear()
        self._asks.put(False)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        thread, self._thread = self._thread, None
        if thread is not None:
            self._asks.put(False)
            # A flush under way finishes first (it may be stuck on a dying disk: not forever).
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)


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
            try:
                await loop.run_in_executor(self._executor, self._flush)
            except OSError as exc:
                self.error = exc
                log.error("store.flush_failed", error=str(exc))
                return
            self.flushes += 1
            if self._after is not None:
                self._after()
            if thorough:
                last_thorough = time.monotonic()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
