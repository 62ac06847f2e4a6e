"""The store's one way into the CommitLog, and the puts built on it.

    appender.append_many(records)            # many MessageToStore / BatchToStore, no waiting
    await appender.put(message, wait=None)   # one message (or a batch for one queue), settled

Every append goes through `_write`: CommitLog.put_many, then group commit or the dispatch loop
is woken and the append listeners (replication) are told. A put refused before it is written
(not running, a slave, read-only after a disk error, a full disk) says why in its remark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from operator import attrgetter

from sidewinder.protocol.batch_record import BatchToStore
from sidewinder.protocol.record import MessageToStore
from sidewinder.store.acknowledge import (
    Acknowledger,
    AppendedMany,
    PutResult,
    PutStatus,
    wants_wait,
)
from sidewinder.store.commit_log import AppendResult, AppendStatus, CommitLog, RecordWriter
from sidewinder.store.disk_space import DiskSpace
from sidewinder.store.dispatch_loop import DispatchLoop
from sidewinder.store.flush_plans import StoreFlushes
from sidewinder.store.message_run import MessageRun
from sidewinder.store.reput import Reput
from sidewinder.store.stats import StoreStats

_TOPIC_NAME = attrgetter("topic_name")


class Appender:
    def __init__(
        self,
        commit_log: CommitLog,
        *,
        acks: Acknowledger,
        flushes: StoreFlushes,
        dispatch: DispatchLoop,
        reput: Reput,
        disk: DiskSpace,
        stats: StoreStats,
        clock: Callable[[], int],
        is_slave: bool,
    ) -> None:
        self._commit_log, self._acks, self._flushes = commit_log, acks, flushes
        self._group_commit = flushes.group_commit
        self._dispatch, self._reput, self._disk = dispatch, reput, disk
        self._wake_dispatch = dispatch.wakeup.set
        self.stats, self.clock, self.is_slave = stats, clock, is_slave
        self.sync_flush = flushes.sync_flush
        # Called once per append call (a received chunk of sends), after the bytes are in the
        # CommitLog: replication wakes its senders here.
        self.append_listeners: list[Callable[[], None]] = []
        self.running = False  # the store's: set by its start and shutdown

    def append_many(
        self, messages: Sequence[MessageToStore | BatchToStore | MessageRun]
    ) -> AppendedMany:
        """MessageStore.append_many: write, count, no waiting."""
        started = time.perf_counter()
        failure = self.write_failure()
        if failure:
            self.stats.put_failed_times += len(messages)
            return AppendedMany(PutStatus.SERVICE_NOT_AVAILABLE, [], [], remark=failure)
        phys, offsets, remark = self._write(messages, self.clock())
        if remark:
            appended = AppendedMany(PutStatus.SERVICE_NOT_AVAILABLE, phys, offsets, remark=remark)
            self.stats.put_failed_times += len(messages) - len(phys)
        else:
            appended = AppendedMany(PutStatus.PUT_OK, phys, offsets)
        if phys:
            appended.end_offset = phys[-1] + messages[len(phys) - 1].record_size
            stored = messages if len(phys) == len(messages) else messages[: len(phys)]
            size = count = 0
            for message in stored:
                size += message.record_size
                count += message.count  # a BatchToStore holds many
            elapsed_ms = (time.perf_counter() - started) * 1000
            self.stats.record_put(count, size, elapsed_ms, puts=len(phys))
            self._count_topics(stored, count, size)
        return appended

    def append_encoded(self, write: RecordWriter) -> tuple[int, int, str]:
        """MessageStore.append_encoded: CommitLog.put_encoded, then what `_write` does after
        an append. Returns the first and end physical offsets written (-1 for none) and why
        the writer was stopped ("" when it was not)."""
        failure = self.write_failure()
        if failure:
            return -1, -1, failure
        first, end, error = self._commit_log.put_encoded(write, self.clock())
        remark = ""
        if error is not None:
            remark = self._disk.allocation_failed(error)
        elif self._disk.allocation_remark:
            self._disk.allocation_succeeded()
        if end > first:
            self._wrote()
        return first, end, remark

    def count_encoded(self, topics: Sequence[tuple[str, int, int, int]], elapsed_ms: float) -> None:
        """Count what append_encoded stored: (topic, messages, bytes, puts) per topic (a batch
        send is one put)."""
        count = size = puts = 0
        for topic, messages, length, sends in topics:
            self.stats.record_topic_put(topic, messages, length, sends)
            count += messages
            size += length
            puts += sends
        self.stats.record_put(count, size, elapsed_ms, puts=puts)

    def _write(
        self, items: Sequence[MessageToStore | BatchToStore | MessageRun], stamp: int
    ) -> tuple[list[int], list[int], str]:
        """The one way into the CommitLog: append, wake flush or dispatch, tell listeners.
        Returns the physical and queue offsets of the items appended, and why the rest were
        not ("" when all were)."""
        phys, offsets, error = self._commit_log.put_many(items, stamp)
        remark = ""
        if error is not None:
            remark = self._disk.allocation_failed(error)
        elif self._disk.allocation_remark:
            self._disk.allocation_succeeded()  # space is back
        if phys:
            self._wrote()
        return phys, offsets, remark

    def _wrote(self) -> None:
        """After an append: wake the flush (or the dispatch) and the listeners."""
        if self.sync_flush:
            self._group_commit.wake()  # WAIT=false puts too: flushed soon, not waited for
        else:
            self._wake_dispatch()
        for listener in self.append_listeners:
            listener()

    def _count_topics(
        self, stored: Sequence[MessageToStore | BatchToStore | MessageRun], count: int, size: int
    ) -> None:
        """Per-topic put counts for a received chunk (`count` messages of `size` bytes): one
        update when, as nearly always, its messages share a topic (found by a C-level pass, no
        Python per message)."""
        topics = set(map(_TOPIC_NAME, stored))
        if len(topics) == 1:
            self.stats.record_topic_put(topics.pop(), count, size, len(stored))
            return
        for topic in topics:
            mine = [m for m in stored if m.topic_name == topic]
            self.stats.record_topic_put(
                topic, sum(m.count for m in mine), sum(m.record_size for m in mine), len(mine)
            )

    async def put(
        self, item: MessageToStore | Sequence[MessageToStore], wait: bool | None
    ) -> PutResult:
        """MessageStore.put_message (a message) and put_messages (a batch for one queue, as
        a MessageRun): the same write, then `await_settled` when the producer waits (by the
        first message's WAIT property unless `wait` says); counted once settled."""
        started = time.perf_counter()
        first = item if isinstance(item, MessageToStore) else item[0]
        result = self._append_one(item)
        if (
            result.status is PutStatus.PUT_OK
            and self._acks.acknowledges_late
            and (wants_wait(first) if wait is None else wait)
        ):
            result = await self._acks.await_settled(result)
        append = result.append
        if result.status is PutStatus.PUT_OK and append is not None:
            self.stats.record_put(append.count, append.size, (time.perf_counter() - started) * 1000)
            self.stats.record_topic_put(first.topic_name, append.count, append.size)
        else:
            self.stats.put_failed_times += 1
        return result

    def _append_one(self, item: MessageToStore | Sequence[MessageToStore]) -> PutResult:
        failure = self.write_failure()
        if failure:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=failure)
        written: MessageToStore | MessageRun
        if isinstance(item, MessageToStore):
            written, problem = item, self._commit_log.illegal(item)
        else:
            written = MessageRun(item)  # ValueError: not one queue
            problem = self._commit_log.illegal_run(item)
        if problem:
            illegal = AppendResult(AppendStatus.MESSAGE_ILLEGAL, remark=problem)
            return PutResult(PutStatus.MESSAGE_ILLEGAL, illegal, problem)
        stamp = self.clock()
        phys, offsets, remark = self._write((written,), stamp)
        if remark:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=remark)
        phy = phys[0]
        if isinstance(written, MessageRun):
            count, each = written.count, tuple(written.phys)
        else:
            count, each = 1, (phy,)
        append = AppendResult(
            AppendStatus.PUT_OK,
            phy,
            written.record_size,
            offsets[0],
            count,
            stamp,
            each,
            self._commit_log.store_host,
        )
        return PutResult(PutStatus.PUT_OK, append)

    def write_failure(self) -> str:
        """Why no put is taken now ("" when puts are)."""
        if not self.running:
            return "the store is not running"
        if self.is_slave:
            return "the broker is a slave: it takes messages from its master only"
        error = self._flushes.error()
        if error is not None:
            return f"the store is read-only after a disk error: {error}"
        if self._dispatch.error is not None:
            return f"the store stopped dispatching: {self._dispatch.error}"
        blocked = self._reput.blocked
        if blocked is not None:
            return f"disk full: messages are stored but cannot be dispatched: {blocked}"
        if self._dispatch.queue_offsets_pending:
            return "disk full: recovery has not finished writing the ConsumeQueues"
        return self._disk.refusal()
