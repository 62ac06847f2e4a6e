"""What the store's flush services flush: the CommitLog, the TransientStorePool's commits, the
ConsumeQueues with the index, and the checkpoint after them.

    flushes = StoreFlushes(config, commit_log, queues, index, reput, checkpoint, ...)
    flushes.start(pooled=pool is not None)   # group commit or the timer, per flushDiskType
    flushes.error()                          # the first disk error: the store turns read-only
    await flushes.stop()

Each plan reads the store time of what it covers before its fdatasync, so the checkpoint never
claims more than is on disk (RocketMQ's FlushRealTimeService and FlushConsumeQueueService).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from sidewinder.common.histogram import Buckets
from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import FlushDiskType, StoreConfig
from sidewinder.store.consume_queue import CQ_ENTRY_SIZE, ConsumeQueueTable
from sidewinder.store.flush import GroupCommit, PeriodicFlush, SyncPlan
from sidewinder.store.index_service import IndexService
from sidewinder.store.reput import Reput


@dataclass(frozen=True, slots=True)
class FlushTimings:
    """The flush services' histograms, for metrics."""

    commit_log_seconds: Buckets  # group commit rounds (SYNC_FLUSH) or timer runs
    consume_queue_seconds: Buckets
    group_commit_bytes: Buckets  # per round: CommitLog bytes made durable
    group_commit_waiters: Buckets  # per round: waiting puts released


class StoreFlushes:
    """The four flush services and the plans they run."""

    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        reput: Reput,
        *,
        checkpoint: StoreCheckpoint,
        flush_executor: Executor,
        queue_executor: Executor,
        wake_dispatch: Callable[[], None],
    ) -> None:
        self._commit_log, self._queues, self._index, self._reput = commit_log, queues, index, reput
        self.checkpoint = checkpoint  # replaced by the one read at start
        self.sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._queues_flushed_at = 0  # Reput.dispatched when the queues were last flushed
        self._checkpointed_physic = 0  # the CommitLog stamp the checkpoint file last got
        self.group_commit = GroupCommit(
            self._commit_log_sync_plan, on_flushed=lambda _: wake_dispatch()
        )
        self.periodic_flush = PeriodicFlush(
            self.flush_commit_log,
            self.dirty_bytes,
            flush_executor,
            interval_ms=config.flush_interval_commit_log,
            least_pages=config.flush_commit_log_least_pages,
            thorough_interval_ms=config.flush_commit_log_thorough_interval,
        )
        self.pool_commit = PeriodicFlush(
            commit_log.commit,
            lambda: commit_log.files.uncommitted_bytes,
            flush_executor,
            interval_ms=config.commit_interval_commit_log,
            least_pages=config.commit_commit_log_least_pages,
            thorough_interval_ms=config.commit_commit_log_thorough_interval,
            after=wake_dispatch,
        )
        self.queue_flush = PeriodicFlush(
            self.flush_queues,
            self._undurable_queue_bytes,
            queue_executor,
            interval_ms=config.flush_interval_consume_queue,
            least_pages=config.flush_consume_queue_least_pages,
            thorough_interval_ms=config.flush_consume_queue_thorough_interval,
        )

    def start(self, *, pooled: bool) -> None:
        if self.sync_flush:
            self.group_commit.start()
        else:
            self.periodic_flush.start()
        if pooled:
            self.pool_commit.start()
        self.queue_flush.start()

    async def stop(self) -> None:
        await self.group_commit.stop()
        await self.periodic_flush.stop()
        await self.pool_commit.stop()
        await self.queue_flush.stop()

    def error(self) -> BaseException | None:
        """The first disk error a flush met (the store is read-only after it)."""
        return (
            self.group_commit.error
            or self.periodic_flush.error
            or self.pool_commit.error
            or self.queue_flush.error
        )

    def timings(self) -> FlushTimings:
        commit = self.group_commit
        return FlushTimings(
            commit.round_seconds if self.sync_flush else self.periodic_flush.seconds,
            self.queue_flush.seconds,
            commit.round_bytes,
            commit.round_waiters,
        )

    def dirty_bytes(self) -> int:
        return self._commit_log.max_offset - self._commit_log.files.flushed_offset

    def _commit_log_sync_plan(self) -> SyncPlan:
        """Group commit's round (see flush_commit_log)."""
        stamp = self._commit_log.last_store_timestamp
        fds, mark_flushed = self._commit_log.files.sync_plan()

        def finish() -> int:
            flushed = mark_flushed()
            checkpoint = self.checkpoint
            checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, stamp)
            return flushed

        return fds, finish

    def flush_commit_log(self) -> int:
        # Read before the sync: every record stamped up to it is written, so the sync covers it.
        stamp = self._commit_log.last_store_timestamp
        flushed = self._commit_log.flush()
        self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, stamp)
        return flushed

    def flush_queues(self) -> int:
        """Flush ConsumeQueues and index, then the checkpoint (FlushConsumeQueueService)."""
        dispatched, stamp = self._reput.dispatched, self._reput.last_store_timestamp
        checkpoint = self.checkpoint
        self._queues.flush()
        if self._index is not None:
            self._index.flush()
            checkpoint.index_msg_timestamp = max(checkpoint.index_msg_timestamp, stamp)
        checkpoint.logics_msg_timestamp = max(checkpoint.logics_msg_timestamp, stamp)
        physic = checkpoint.physic_msg_timestamp
        checkpoint.flush()
        self._checkpointed_physic = physic
        self._queues_flushed_at = dispatched
        return dispatched

    def _undurable_queue_bytes(self) -> int:
        queued = (self._reput.dispatched - self._queues_flushed_at) * CQ_ENTRY_SIZE
        if queued == 0 and self.checkpoint.physic_msg_timestamp > self._checkpointed_physic:
            # Nothing new in the queues, but the CommitLog flushed since the checkpoint was
            # written: a byte's worth of work, so the checkpoint follows (flushConsumeQueue-
            # LeastPages 0 writes it every round, as RocketMQ's does).
            return 1
        return queued
