"""The dispatch loop: CommitLog records become ConsumeQueue entries and index keys (RocketMQ's
ReputMessageService), driven from the event loop.

    loop = DispatchLoop(reput, dispatch_thread, commit_log, queues, disk, limit=lambda: end)
    task = asyncio.create_task(loop.run())
    loop.wakeup.set()                 # after an append or a flush
    await loop.caught_up(0.5)         # a reader right after a write sees it

Each round dispatches up to `limit()` (the flushed offset under SYNC_FLUSH), on the dispatch
thread, or on the loop itself for a few records when the thread is idle; then it tells the
arrival listeners (long polling, timers) which queues grew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from sidewinder.common.deadline import expire_after
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.disk_space import ALLOCATION_RETRY_S, DiskSpace
from sidewinder.store.dispatch_thread import DispatchThread
from sidewinder.store.reput import QueueGrowth, Reput

log = structlog.get_logger(__name__)

DISPATCH_PAUSE_S = 0.001
# Up to this much CommitLog to dispatch, the loop dispatches it itself when it can without
# blocking (DispatchThread): an unloaded send's one record costs less there than a hand-off.
INLINE_DISPATCH_BYTES = 16 << 10

ArrivalListener = Callable[[str, int, int], None]  # topic, queue id, new max queue offset


class DispatchLoop:
    def __init__(
        self,
        reput: Reput,
        thread: DispatchThread,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        disk: DiskSpace,
        *,
        limit: Callable[[], int],
    ) -> None:
        self._reput, self._thread = reput, thread
        self._commit_log, self._queues, self._disk = commit_log, queues, disk
        self._limit = limit
        self.wakeup = asyncio.Event()
        self.arrival_listeners: list[ArrivalListener] = []
        self._catch_up: list[tuple[int, asyncio.Future[None]]] = []
        self.inline_dispatches = 0  # rounds the loop dispatched itself
        self.error: BaseException | None = None
        # After a recovery that could not finish dispatching (a full disk), puts wait until
        # dispatch catches up: only complete ConsumeQueues give the next queue offsets.
        self.queue_offsets_pending = False
        self.running = False  # the store's: set by its start and shutdown

    async def run(self) -> None:
        reput = self._reput
        while True:
            await self.wakeup.wait()
            # A moment's pause gathers the appends of many puts into one round (RocketMQ's
            # reput thread sleeps 1 ms between rounds too): fewer thread hand-offs per message.
            await asyncio.sleep(DISPATCH_PAUSE_S)
            self.wakeup.clear()
            limit = self._limit()
            if limit <= reput.offset:
                self._release_caught_up()
                continue
            try:
                grown = await self._dispatch(limit)
            except Exception as exc:
                # A record the queues cannot take is our bug; stop taking puts, loudly.
                self.error = exc
                log.error("store.dispatch_failed", reput_offset=reput.offset, error=repr(exc))
                return
            self._release_caught_up()
            for (topic, queue_id), max_offset in grown.items():
                name = topic.decode("utf-8", "surrogateescape")
                for listener in self.arrival_listeners:
                    listener(name, queue_id, max_offset)
            if reput.blocked is not None:
                # A queue or index file found no room: puts stop; try again in a while.
                self._disk.allocation_failed(reput.blocked)
                await asyncio.sleep(ALLOCATION_RETRY_S)
                self.wakeup.set()
                continue
            if self.queue_offsets_pending and reput.offset >= self._commit_log.max_offset:
                self._commit_log.queue_offsets = {
                    key: q.max_offset for key, q in self._queues.queues.items()
                }
                self.queue_offsets_pending = False
                log.info("store.recovery_dispatch_done", offset=reput.offset)
            if reput.offset < self._limit():
                self.wakeup.set()

    async def _dispatch(self, limit: int) -> QueueGrowth:
        """One round up to `limit`: on the loop when it is short and the thread idle."""
        reput = self._reput
        if limit - reput.offset <= INLINE_DISPATCH_BYTES:
            with self._thread.try_lock() as held:
                if held:
                    grown = reput.dispatch_inline(limit)
                    if grown is not None:
                        self.inline_dispatches += 1
                        return grown
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, reput.dispatch_until, limit)

    def _release_caught_up(self) -> None:
        if not self._catch_up:
            return
        waiting = []
        for target, future in self._catch_up:
            if self._reput.offset >= target:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((target, future))
        self._catch_up = waiting

    @property
    def is_caught_up(self) -> bool:
        """Everything appended so far is dispatched (or dispatch is not running): what
        `caught_up` would not wait for."""
        return self._reput.offset >= self._limit() or not self.running

    async def caught_up(self, timeout_s: float = 0.5) -> None:
        """Wait (briefly) until everything appended before this call is dispatched, so a
        reader right after a write sees it, as it would on a RocketMQ broker whose reput keeps
        pace; gives up quietly after `timeout_s`."""
        if self.is_caught_up:
            return
        target = self._limit()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._catch_up.append((target, future))
        self.wakeup.set()
        expiry = expire_after(future, timeout_s)  # the pull goes on, with what there is
        try:
            await future
        finally:
            expiry.cancel()
