"""MessageStore: the store's async edge over the synchronous CommitLog, queues and index.

    store = MessageStore(config, store_host=Host(ip, port))
    await store.start()                          # lock, recover, start flush and dispatch
    result = await store.put_message(message)    # PUT_OK only once durable under SYNC_FLUSH
    got = store.get_messages("T", 0, offset, 32) # FOUND + views of mapped memory
    await store.shutdown()                       # flush, checkpoint, clean-shutdown marker

Appends happen on the event loop (a memcpy into the map); every fdatasync and every dispatch
batch runs on an executor thread. Under SYNC_FLUSH nothing is dispatched (visible to consumers)
beyond the flushed offset.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import Protocol

import structlog

from sidewinder.common.deadline import expire_after
from sidewinder.protocol.batch_record import BatchToStore
from sidewinder.protocol.message import KEY_SEPARATOR, MessageConst, property_value
from sidewinder.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    Host,
    MessageRecord,
    MessageToStore,
)
from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.cleanup import Cleanup
from sidewinder.store.commit_log import AppendResult, AppendStatus, CommitLog, QueueKey
from sidewinder.store.config import BrokerRole, FlushDiskType, StoreConfig
from sidewinder.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueueTable, CQEntry
from sidewinder.store.disk_space import ALLOCATION_RETRY_S, DiskSpace
from sidewinder.store.dispatch_thread import DispatchThread
from sidewinder.store.dispatchers import parse_delay_levels, store_dispatchers
from sidewinder.store.flush import FlushError, GroupCommit, PeriodicFlush, SyncPlan
from sidewinder.store.get_message import GetLimits, GetResult, GetStatus, get_message
from sidewinder.store.index_service import IndexService
from sidewinder.store.mapped_file import DiskFullError
from sidewinder.store.recovery import RecoveryReport, recover
from sidewinder.store.reput import Reput
from sidewinder.store.run_markers import CommitLogDirLock, RunMarkers
from sidewinder.store.stats import StoreStats, disk_used_ratio
from sidewinder.store.transient_pool import TransientStorePool

log = structlog.get_logger(__name__)

DISPATCH_PAUSE_S = 0.001
# Up to this much CommitLog to dispatch, the loop dispatches it itself when it can without
# blocking (DispatchThread): an unloaded send's one record costs less there than a hand-off.
INLINE_DISPATCH_BYTES = 16 << 10
_TOPIC_NAME = attrgetter("topic_name")


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


# The puts that are in the CommitLog whatever else went wrong: their producer gets the ids.
STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)


class ReplicaAcks(Protocol):
    """A SYNC_MASTER's slaves, as the store sees them (the broker's HA service gives them)."""

    def slave_ok(self, end_offset: int) -> bool:
        """A slave is connected and not further behind than haSlaveFallbehindMax."""
        ...

    def replicated(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """True once a slave has the CommitLog up to `end_offset`; False after `timeout_s`."""
        ...


# Not frozen: a frozen dataclass's __init__ costs a microsecond per put.
@dataclass(slots=True)
class PutResult:
    status: PutStatus
    append: AppendResult | None = None
    remark: str = ""


@dataclass(slots=True)
class AppendedMany:
    """What append_many did: the offsets of the items appended (the first of those given; a
    batch's first record's), and why the rest were not (status and remark)."""

    status: PutStatus
    phy_offsets: list[int]
    queue_offsets: list[int]
    end_offset: int = 0  # where the last appended record ends in the CommitLog
    remark: str = ""


ArrivalListener = Callable[[str, int, int], None]  # topic, queue id, new max queue offset
# The lowest CommitLog offset a reader still needs (None: none): cleanup keeps it.
CommitLogFloor = Callable[[], int | None]


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        *,
        store_host: Host,
        owner: str = "a store",
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        topic_size_buckets: bool = False,
    ) -> None:
        """`owner` names this store to another that finds its CommitLog directory taken;
        `topic_size_buckets`: keep per-topic message size histograms (`stats.topics`, for
        metrics) beside the per-topic totals, which are always kept."""
        self.config = config
        self.topic_size_buckets = topic_size_buckets
        self.clock = clock  # milliseconds: every record's STORETIMESTAMP
        root = config.store_path_root_dir
        self.markers = RunMarkers(root)
        self.commit_log_lock = CommitLogDirLock(
            config.store_path_commit_log, f"{owner} (storePathRootDir {root})"
        )
        self.sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.is_slave = config.broker_role is BrokerRole.SLAVE
        # SYNC_MASTER: a put that waits is acknowledged once a slave has it too.
        self.sync_master = config.broker_role is BrokerRole.SYNC_MASTER
        self.replica_acks: ReplicaAcks | None = None
        # A slave's CommitLog may end inside a record its master has not finished sending;
        # readers and dispatch see only the whole records before it.
        self.replicated_end = 0
        # RocketMQ uses the pool only for an ASYNC_FLUSH master, and ignores it otherwise.
        self.pool = (
            TransientStorePool(config.transient_store_pool_size, config.mapped_file_size_commit_log)
            if config.transient_store_pool_enable
            and not self.sync_flush
            and config.broker_role is not BrokerRole.SLAVE
            else None
        )
        self.commit_log = CommitLog(
            config.store_path_commit_log,
            segment_size=config.mapped_file_size_commit_log,
            max_message_size=config.max_message_size,
            store_host=store_host,
            pool=self.pool,
        )
        self.queues = ConsumeQueueTable(
            root / "consumequeue", config.mapped_file_size_consume_queue
        )
        self.index = (
            IndexService(root / "index", config.max_hash_slot_num, config.max_index_num)
            if config.message_index_enable
            else None
        )
        self.dispatchers = store_dispatchers(
            self.queues, self.index, parse_delay_levels(config.message_delay_level)
        )
        self.checkpoint = StoreCheckpoint(root / "checkpoint")
        # One thread each, so flushes stay in order and dispatch stays in CommitLog order.
        self._flush_executor = ThreadPoolExecutor(1, thread_name_prefix="store-flush")
        self._dispatch_executor = DispatchThread()
        self._allocate_executor = ThreadPoolExecutor(1, thread_name_prefix="store-allocate")
        self.commit_log.files.preallocate(
            self._allocate_executor,
            warm=config.warm_maped_file_enable,
            # RocketMQ syncs while warming under SYNC_FLUSH, to avoid one huge writeback later.
            sync_every_bytes=config.flush_least_pages_when_warm_maped_file * 4096
            if self.sync_flush
            else 0,
        )
        self.disk = DiskSpace()
        self.commit_log.files.before_create = lambda size: self.disk.check_room(
            config.store_path_commit_log, size
        )
        # After a recovery that could not finish dispatching (a full disk), puts wait until
        # dispatch catches up: only complete ConsumeQueues give the next queue offsets.
        self._queue_offsets_pending = False
        self._dispatch_wakeup = asyncio.Event()
        self.group_commit = GroupCommit(
            self._commit_log_sync_plan,
            on_flushed=lambda _: self._dispatch_wakeup.set(),
        )
        self.periodic_flush = PeriodicFlush(
            self._flush_commit_log,
            self._dirty_bytes,
            self._flush_executor,
            interval_ms=config.flush_interval_commit_log,
            least_pages=config.flush_commit_log_least_pages,
            thorough_interval_ms=config.flush_commit_log_thorough_interval,
        )
        self.pool_commit = PeriodicFlush(
            self.commit_log.commit,
            self._uncommitted_bytes,
            self._flush_executor,
            interval_ms=config.commit_interval_commit_log,
            least_pages=config.commit_commit_log_least_pages,
            thorough_interval_ms=config.commit_commit_log_thorough_interval,
            after=self._dispatch_wakeup.set,
        )
        self.reput = Reput(self.commit_log, self.dispatchers)
        self.inline_dispatches = 0  # rounds the loop dispatched itself
        self._queues_flushed_at = 0  # Reput.dispatched when the queues were last flushed
        self._checkpointed_physic = 0  # the CommitLog stamp the checkpoint file last got
        self.queue_flush = PeriodicFlush(
            self._flush_queues,
            self._undurable_queue_bytes,
            self._dispatch_executor,
            interval_ms=config.flush_interval_consume_queue,
            least_pages=config.flush_consume_queue_least_pages,
            thorough_interval_ms=config.flush_consume_queue_thorough_interval,
        )
        self.recovery: RecoveryReport | None = None
        self._catch_up: list[tuple[int, asyncio.Future[None]]] = []
        self.stats = StoreStats(size_buckets=topic_size_buckets)
        self._stats_task: asyncio.Task[None] | None = None
        self.cleanup = Cleanup(
            config,
            self.commit_log,
            self.queues,
            self.index,
            file_executor=self._flush_executor,
            queue_executor=self._dispatch_executor,
            disk=self.disk,
            dispatched_to=lambda: self.reput.offset,
            keep_from=self._commit_log_floor,
        )
        self.commit_log_floors: list[CommitLogFloor] = []
        self._cleanup_task: asyncio.Task[None] | None = None
        self._dispatch_task: asyncio.Task[None] | None = None
        self.arrival_listeners: list[ArrivalListener] = []
        # Called once per append call (a received chunk of sends), after the bytes are in the
        # CommitLog: replication wakes its senders here.
        self.append_listeners: list[Callable[[], None]] = []
        self.running = False
        self.crashed_last_time = False
        self.dispatch_error: BaseException | None = None

    def _commit_log_floor(self) -> int | None:
        floors = [
            floor for floor in (hook() for hook in self.commit_log_floors) if floor is not None
        ]
        return min(floors, default=None)

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.markers.lock()
        try:
            # Before the abort file: a store refused here must leave its root as it was.
            self.commit_log_lock.acquire()
        except BaseException:
            self.markers.release()
            raise
        self.crashed_last_time = self.markers.mark_running()
        self._say_where_the_commit_log_is()
        try:
            await loop.run_in_executor(self._dispatch_executor, self._load_and_recover)
        except BaseException:
            self.commit_log.close()
            self.queues.close()
            if self.index is not None:
                self.index.close()
            self._flush_executor.shutdown()
            self._dispatch_executor.shutdown()
            self._allocate_executor.shutdown()
            self.commit_log_lock.release()
            self.markers.release()
            raise
        self.group_commit.flushed_offset = self.commit_log.max_offset
        self.replicated_end = self.commit_log.max_offset
        assert self.recovery is not None
        self._queue_offsets_pending = not self.recovery.dispatched_all
        await loop.run_in_executor(self._flush_executor, self._check_disk_at_start)
        self.commit_log.files.prepare_next()
        if self.sync_flush:
            self.group_commit.start()
        else:
            self.periodic_flush.start()
        if self.pool is not None:
            self.pool_commit.start()
        self.queue_flush.start()
        self._dispatch_task = loop.create_task(self._dispatch_loop(), name="store-dispatch")
        self._stats_task = loop.create_task(self._sample_stats(), name="store-stats")
        self._cleanup_task = loop.create_task(self._clean_periodically(), name="store-cleanup")
        self.running = True
        self._dispatch_wakeup.set()

    def _say_where_the_commit_log_is(self) -> None:
        root = self.config.store_path_root_dir.resolve()
        commit_log = self.config.store_path_commit_log.resolve()
        log.info("store.commitlog", path=str(commit_log), store_path_root_dir=str(root))
        if not commit_log.is_relative_to(root):
            log.warning(
                "store.commitlog_outside_root",
                path=str(commit_log),
                store_path_root_dir=str(root),
                hint="set storePathCommitLog to give each broker its own CommitLog",
            )

    def _load_and_recover(self) -> None:
        self.checkpoint = StoreCheckpoint.open(self.checkpoint.path)
        self.recovery = recover(
            self.commit_log,
            self.queues,
            self.index,
            self.reput,
            self.checkpoint,
            crashed=self.crashed_last_time,
            check_crc=self.config.check_crc_on_recover,
            index_safe=self.config.message_index_enable and self.config.message_index_safe,
        )

    def _check_disk_at_start(self) -> None:
        """Say at once when the store starts on a full disk (it serves reads, refuses puts).
        Blocking."""
        ratio = max(
            disk_used_ratio(self.config.store_path_commit_log), disk_used_ratio(self.queues.root)
        )
        self.disk.judge_ratio(ratio)
        last = self.commit_log.files.last_file
        if last is not None and not last.is_full:
            try:
                last.ensure_allocated()  # perhaps sparse: RocketMQ's are, and older ours
            except DiskFullError as exc:
                self.disk.allocation_failed(exc)

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        for task in (self._dispatch_task, self._stats_task, self._cleanup_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.group_commit.stop()
        await self.periodic_flush.stop()
        await self.pool_commit.stop()
        await self.queue_flush.stop()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._flush_executor, self.commit_log.commit)
        # A slave's tail may be part of a record: its dispatch stops before it.
        limit = self.replicated_end if self.is_slave else None
        await loop.run_in_executor(self._dispatch_executor, self.reput.dispatch_all, None, limit)
        await loop.run_in_executor(self._flush_executor, self._close_files)
        self._flush_executor.shutdown()
        self._dispatch_executor.shutdown()
        self._allocate_executor.shutdown()
        self.commit_log_lock.release()
        self.markers.release()

    def _close_files(self) -> None:
        self.cleanup.close()
        self._flush_commit_log()
        self._flush_queues()
        self.commit_log.close()
        if self.pool is not None:
            self.pool.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()
        if self._flush_error() is None:
            self.markers.mark_clean_shutdown()

    async def _clean_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.clean_resource_interval / 1000)
            try:
                await self.cleanup.run_once()
            except OSError as exc:
                # A file that would not go is retried next round; say so, keep serving.
                log.error("store.cleanup_failed", error=str(exc))

    async def _sample_stats(self) -> None:
        while True:
            self.stats.sample()
            await asyncio.sleep(1)

    # -- puts ----------------------------------------------------------------------------------
    async def put_message(self, message: MessageToStore, *, wait: bool | None = None) -> PutResult:
        """Append one message; durable per flushDiskType. `wait` (default: the message's WAIT
        property) is whether to answer only once flushed, under SYNC_FLUSH; a caller that
        stores the message without its WAIT property says what the producer asked for."""
        started = time.perf_counter()
        result = self._append(message)
        if (
            result.status is PutStatus.PUT_OK
            and self.acknowledges_late
            and (_wants_wait(message) if wait is None else wait)
        ):
            result = await self._await_settled(result)
        self._count(result, started, message.topic_name)
        return result

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Append a batch for one (topic, queue) as consecutive records (see put_message)."""
        started = time.perf_counter()
        result = self._append(messages)
        if (
            result.status is PutStatus.PUT_OK
            and self.acknowledges_late
            and _wants_wait(messages[0])
        ):
            result = await self._await_settled(result)
        self._count(result, started, messages[0].topic_name)
        return result

    def illegal(self, message: MessageToStore) -> str:
        """Why the store cannot take `message` ("" when it can): append_many's precondition."""
        return self.commit_log.illegal(message)

    def append_many(self, messages: Sequence[MessageToStore | BatchToStore]) -> AppendedMany:
        """Append the sends of one received chunk (any topics and queues, each checked with
        `illegal`, a batch send as one BatchToStore) in one pass; no waiting. Under SYNC_FLUSH,
        a caller that owes its producer durability awaits `durable(end_offset)` once for them
        all."""
        started = time.perf_counter()
        failure = self._write_failure()
        if failure:
            self.stats.put_failed_times += len(messages)
            return AppendedMany(PutStatus.SERVICE_NOT_AVAILABLE, [], [], remark=failure)
        phys, offsets, error = self.commit_log.put_many(messages, self.clock())
        appended = AppendedMany(PutStatus.PUT_OK, phys, offsets)
        if error is not None:
            appended.status = PutStatus.SERVICE_NOT_AVAILABLE
            appended.remark = self.disk.allocation_failed(error)
            self.stats.put_failed_times += len(messages) - len(phys)
        elif self.disk.allocation_remark:
            self.disk.allocation_succeeded()  # space is back
        if phys:
            appended.end_offset = phys[-1] + messages[len(phys) - 1].record_size
            if self.sync_flush:
                self.group_commit.wake()
            else:
                self._dispatch_wakeup.set()
            for listener in self.append_listeners:
                listener()
            stored = messages if len(phys) == len(messages) else messages[: len(phys)]
            size = count = 0
            for message in stored:
                size += message.record_size
                count += message.count  # a BatchToStore holds many
            elapsed_ms = (time.perf_counter() - started) * 1000
            self.stats.record_put(count, size, elapsed_ms, puts=len(phys))
            self._count_topics(stored, count, size)
        return appended

    def _count_topics(
        self, stored: Sequence[MessageToStore | BatchToStore], count: int, size: int
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

    @property
    def acknowledges_late(self) -> bool:
        """Whether a put that waits (WAIT=true) is answered only once `settled`: SYNC_FLUSH
        (on disk) or SYNC_MASTER (on a slave)."""
        return self.sync_flush or self.sync_master

    def settled(self, end_offset: int) -> asyncio.Future[PutStatus]:
        """What a waiting producer is told about the CommitLog up to `end_offset`: PUT_OK once
        it is on disk (SYNC_FLUSH) and on a slave (SYNC_MASTER), both waited for at once, as
        RocketMQ combines them; FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT (the slave's outcome
        wins when both fail) or SLAVE_NOT_AVAILABLE (no slave, or one too far behind) else.
        FlushError after a disk error. Callers answer from a callback: no task per put."""
        loop = asyncio.get_running_loop()
        settled: asyncio.Future[PutStatus] = loop.create_future()
        timeout_s = self.config.sync_flush_timeout / 1000
        parts: list[tuple[asyncio.Future[bool], PutStatus]] = []
        if self.sync_flush:
            parts.append(
                (self.group_commit.durable(end_offset, timeout_s), PutStatus.FLUSH_DISK_TIMEOUT)
            )
        slave_status = PutStatus.PUT_OK
        if self.sync_master:
            acks = self.replica_acks
            if acks is None or not acks.slave_ok(end_offset):
                slave_status = PutStatus.SLAVE_NOT_AVAILABLE
            else:
                parts.append(
                    (acks.replicated(end_offset, timeout_s), PutStatus.FLUSH_SLAVE_TIMEOUT)
                )
        outcome = [slave_status]
        remaining = [len(parts)]

        def one_done(part: asyncio.Future[bool], failed_as: PutStatus) -> None:
            if settled.done():
                return
            error = part.exception()
            if error is not None:
                settled.set_exception(error)
                return
            if not part.result() and (
                outcome[0] is PutStatus.PUT_OK or failed_as is PutStatus.FLUSH_SLAVE_TIMEOUT
            ):
                outcome[0] = failed_as
            remaining[0] -= 1
            if remaining[0] == 0:
                settled.set_result(outcome[0])

        if not parts:
            settled.set_result(slave_status)
        for part, failed_as in parts:
            part.add_done_callback(lambda done, failed_as=failed_as: one_done(done, failed_as))
        return settled

    def durable(self, end_offset: int) -> asyncio.Future[bool]:
        """Done with True once the CommitLog up to `end_offset` is on disk, False after
        syncFlushTimeout; FlushError after a disk error. Under ASYNC_FLUSH: done at once."""
        if not self.sync_flush:
            future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            future.set_result(True)
            return future
        return self.group_commit.durable(end_offset, self.config.sync_flush_timeout / 1000)

    def _append(self, messages: Sequence[MessageToStore] | MessageToStore) -> PutResult:
        failure = self._write_failure()
        if failure:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=failure)
        try:
            if isinstance(messages, MessageToStore):
                append = self.commit_log.put(messages, self.clock())
            else:
                append = self.commit_log.put_batch(messages, self.clock())
        except DiskFullError as exc:
            # No segment to write to: a refusal the producer can retry elsewhere, not a crash.
            remark = self.disk.allocation_failed(exc)
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=remark)
        if self.disk.allocation_remark:
            self.disk.allocation_succeeded()  # space is back
        if append.status is AppendStatus.MESSAGE_ILLEGAL:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, append, append.remark)
        if self.sync_flush:
            self.group_commit.wake()  # WAIT=false puts too: flushed soon, not waited for
        else:
            self._dispatch_wakeup.set()
        for listener in self.append_listeners:
            listener()
        return PutResult(PutStatus.PUT_OK, append)

    async def _await_settled(self, result: PutResult) -> PutResult:
        append = result.append
        assert append is not None
        try:
            status = await self.settled(append.phy_offset + append.size)
        except FlushError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, append, str(exc))
        if status is PutStatus.PUT_OK:
            return result
        return PutResult(status, append, self.settle_remark(status))

    def settle_remark(self, status: PutStatus) -> str:
        timeout = self.config.sync_flush_timeout
        if status is PutStatus.FLUSH_DISK_TIMEOUT:
            return f"not flushed within syncFlushTimeout {timeout} ms"
        if status is PutStatus.FLUSH_SLAVE_TIMEOUT:
            return f"no slave confirmed it within syncFlushTimeout {timeout} ms"
        if status is PutStatus.SLAVE_NOT_AVAILABLE:
            return "no slave is connected, or the slave is too far behind (haSlaveFallbehindMax)"
        return ""

    def _count(self, result: PutResult, started: float, topic: str) -> None:
        append = result.append
        if result.status is PutStatus.PUT_OK and append is not None:
            self.stats.record_put(append.count, append.size, (time.perf_counter() - started) * 1000)
            self.stats.record_topic_put(topic, append.count, append.size)
        else:
            self.stats.put_failed_times += 1

    def _write_failure(self) -> str:
        if not self.running:
            return "the store is not running"
        if self.is_slave:
            return "the broker is a slave: it takes messages from its master only"
        error = self._flush_error()
        if error is not None:
            return f"the store is read-only after a disk error: {error}"
        if self.dispatch_error is not None:
            return f"the store stopped dispatching: {self.dispatch_error}"
        blocked = self.reput.blocked
        if blocked is not None:
            return f"disk full: messages are stored but cannot be dispatched: {blocked}"
        if self._queue_offsets_pending:
            return "disk full: recovery has not finished writing the ConsumeQueues"
        return self.disk.refusal()

    def _flush_error(self) -> BaseException | None:
        return (
            self.group_commit.error
            or self.periodic_flush.error
            or self.pool_commit.error
            or self.queue_flush.error
        )

    def _commit_log_sync_plan(self) -> SyncPlan:
        """Group commit's round (see _flush_commit_log)."""
        stamp = self.commit_log.last_store_timestamp
        fds, mark_flushed = self.commit_log.files.sync_plan()

        def finish() -> int:
            flushed = mark_flushed()
            checkpoint = self.checkpoint
            checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, stamp)
            return flushed

        return fds, finish

    def _flush_commit_log(self) -> int:
        # Read before the sync: every record stamped up to it is written, so the sync covers it.
        stamp = self.commit_log.last_store_timestamp
        flushed = self.commit_log.flush()
        self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, stamp)
        return flushed

    def _flush_queues(self) -> int:
        """Flush ConsumeQueues and index, then the checkpoint (FlushConsumeQueueService)."""
        dispatched, stamp = self.reput.dispatched, self.reput.last_store_timestamp
        self.queues.flush()
        if self.index is not None:
            self.index.flush()
            self.checkpoint.index_msg_timestamp = max(self.checkpoint.index_msg_timestamp, stamp)
        self.checkpoint.logics_msg_timestamp = max(self.checkpoint.logics_msg_timestamp, stamp)
        physic = self.checkpoint.physic_msg_timestamp
        self.checkpoint.flush()
        self._checkpointed_physic = physic
        self._queues_flushed_at = dispatched
        return dispatched

    def _uncommitted_bytes(self) -> int:
        return self.commit_log.files.uncommitted_bytes

    def _undurable_queue_bytes(self) -> int:
        queued = (self.reput.dispatched - self._queues_flushed_at) * CQ_ENTRY_SIZE
        if queued == 0 and self.checkpoint.physic_msg_timestamp > self._checkpointed_physic:
            # Nothing new in the queues, but the CommitLog flushed since the checkpoint was
            # written: a byte's worth of work, so the checkpoint follows (flushConsumeQueue-
            # LeastPages 0 writes it every round, as RocketMQ's does).
            return 1
        return queued

    def _dirty_bytes(self) -> int:
        return self.commit_log.max_offset - self.commit_log.files.flushed_offset

    @property
    def flush_behind_bytes(self) -> int:
        """CommitLog bytes written but not yet on disk (RocketMQ's flushBehindBytes)."""
        return max(self._dirty_bytes(), 0)

    @property
    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet dispatched to the queues and index (dispatchBehindBytes)."""
        return max(self.commit_log.max_offset - self.reput.offset, 0)

    # -- dispatch ------------------------------------------------------------------------------
    @property
    def dispatch_limit(self) -> int:
        """How far consumers may see: the flushed offset under SYNC_FLUSH, else the end (on
        a slave, the end of the whole records its master sent)."""
        end = self.replicated_end if self.is_slave else self.commit_log.max_offset
        if self.sync_flush:
            return min(self.group_commit.flushed_offset, end)
        return end

    def append_replicated(self, offset: int, data: bytes) -> None:
        """A slave's append of CommitLog bytes from its master, at `offset` (ReplicationError
        when that is not where the CommitLog ends); dispatch builds the queues from them."""
        self.commit_log.append_replicated(offset, data)
        self.replicated_end = self.commit_log.whole_records_end(self.replicated_end)
        if self.sync_flush:
            self.group_commit.wake()
        else:
            self._dispatch_wakeup.set()

    async def _dispatch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._dispatch_wakeup.wait()
            # A moment's pause gathers the appends of many puts into one round (RocketMQ's
            # reput thread sleeps 1 ms between rounds too): fewer thread hand-offs per message.
            await asyncio.sleep(DISPATCH_PAUSE_S)
            self._dispatch_wakeup.clear()
            limit = self.dispatch_limit
            if limit <= self.reput.offset:
                self._release_caught_up()
                continue
            try:
                grown = None
                if limit - self.reput.offset <= INLINE_DISPATCH_BYTES:
                    with self._dispatch_executor.try_lock() as held:
                        if held:
                            grown = self.reput.dispatch_inline(limit)
                if grown is None:
                    grown = await loop.run_in_executor(
                        self._dispatch_executor, self.reput.dispatch_until, limit
                    )
                else:
                    self.inline_dispatches += 1
            except Exception as exc:
                # A record the queues cannot take is our bug; stop taking puts, loudly.
                self.dispatch_error = exc
                log.error("store.dispatch_failed", reput_offset=self.reput.offset, error=repr(exc))
                return
            self._release_caught_up()
            for (topic, queue_id), max_offset in grown.items():
                name = topic.decode("utf-8", "surrogateescape")
                for listener in self.arrival_listeners:
                    listener(name, queue_id, max_offset)
            if self.reput.blocked is not None:
                # A queue or index file found no room: puts stop; try again in a while.
                self.disk.allocation_failed(self.reput.blocked)
                await asyncio.sleep(ALLOCATION_RETRY_S)
                self._dispatch_wakeup.set()
                continue
            if self._queue_offsets_pending and self.reput.offset >= self.commit_log.max_offset:
                self.commit_log.queue_offsets = {
                    key: q.max_offset for key, q in self.queues.queues.items()
                }
                self._queue_offsets_pending = False
                log.info("store.recovery_dispatch_done", offset=self.reput.offset)
            if self.reput.offset < self.dispatch_limit:
                self._dispatch_wakeup.set()

    def _release_caught_up(self) -> None:
        if not self._catch_up:
            return
        waiting = []
        for target, future in self._catch_up:
            if self.reput.offset >= target:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((target, future))
        self._catch_up = waiting

    async def caught_up(self, timeout_s: float = 0.5) -> None:
        """Wait (briefly) until everything appended before this call is dispatched, so a
        reader right after a write sees it, as it would on a RocketMQ broker whose reput keeps
        pace; gives up quietly after `timeout_s`."""
        target = self.dispatch_limit
        if self.reput.offset >= target or not self.running:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._catch_up.append((target, future))
        self._dispatch_wakeup.set()
        expiry = expire_after(future, timeout_s)  # the pull goes on, with what there is
        try:
            await future
        finally:
            expiry.cancel()

    # -- reads ---------------------------------------------------------------------------------
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        tags_codes: frozenset[int] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        """Up to `max_count` whole records from queue offset `offset` (RocketMQ's getMessage,
        see get_message.py).

        `tags_codes` filters by the ConsumeQueue's tags hash; `record_filter`, when given, is
        asked about each record that passes (SQL92 filters read its properties)."""
        started = time.perf_counter()
        queue = self.queues.queues.get((topic, queue_id))
        if queue is None:
            result = GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        else:
            result = get_message(
                queue,
                self.commit_log.files,
                offset,
                max_count,
                GetLimits(
                    self.config.max_transfer_bytes_on_message_in_memory,
                    self.config.max_transfer_count_on_message_in_memory,
                ),
                tags_codes,
                record_filter,
            )
        self.stats.record_get(len(result.messages), (time.perf_counter() - started) * 1000)
        return result

    def commit_log_data(self, phy_offset: int, max_bytes: int) -> bytes | None:
        """A copy of up to `max_bytes` of the CommitLog from `phy_offset`, within its segment
        and what readers may see (what a master streams to its slave: RocketMQ's
        getCommitLogData); None when nothing is there yet or the segment is gone."""
        segment = self.commit_log.files.find(phy_offset)
        if segment is None:
            return None
        start = phy_offset - segment.file_from_offset
        end = min(segment.read_position, start + max_bytes)
        if end <= start:
            return None
        try:
            return bytes(segment.buffer[start:end])
        except ValueError:  # cleanup unmapped it meanwhile
            return None

    def record_bytes(self, phy_offset: int, size: int) -> memoryview | None:
        """The stored record at `phy_offset` as a view of mapped memory (for replies)."""
        segment = self.commit_log.files.find(phy_offset)
        if segment is None or phy_offset + size > segment.end_offset:
            return None
        start = phy_offset - segment.file_from_offset
        return segment.buffer[start : start + size]

    async def delete_topic(self, topic: str) -> None:
        """Forget a topic's queues and their files (cleanUnusedTopic); its CommitLog records
        stay until cleanup. Runs on the dispatch thread, which owns the queues."""
        await self._drop_queues(lambda key: key[0] == topic)

    async def clean_unused_topics(self, keep: Collection[str]) -> list[str]:
        """Drop the queues of every topic not in `keep` (mqadmin cleanUnusedTopic: topics a
        broker no longer has a config for); returns the topics dropped."""
        dropped = await self._drop_queues(lambda key: key[0] not in keep)
        return sorted({topic for topic, _ in dropped})

    async def clean_expired_consume_queues(self, keep: Collection[str] = ()) -> list[QueueKey]:
        """Drop the queues whose every message lies below the CommitLog's minimum (mqadmin
        cleanExpiredCQ); an empty queue stays, as RocketMQ keeps one it may have just made."""
        min_phy = self.min_phy_offset

        def expired(key: QueueKey) -> bool:
            queue = self.queues.queues[key]
            return key[0] not in keep and 0 < queue.max_phy_offset <= min_phy

        return await self._drop_queues(expired)

    async def _drop_queues(self, which: Callable[[QueueKey], bool]) -> list[QueueKey]:
        def drop() -> list[QueueKey]:
            keys = [k for k in self.queues.queues if which(k)]
            for key in keys:
                queue = self.queues.queues.pop(key)
                queue.close()
                shutil.rmtree(queue.files.directory, ignore_errors=True)
            for topic in {topic for topic, _ in keys}:
                if not any(t == topic for t, _ in self.queues.queues):
                    shutil.rmtree(self.queues.root / topic, ignore_errors=True)
            return keys

        keys = await asyncio.get_running_loop().run_in_executor(self._dispatch_executor, drop)
        for key in keys:
            # The next message of a dropped queue starts it again at offset 0, as in RocketMQ.
            self.commit_log.queue_offsets.pop(key, None)
        if keys:
            log.info("store.queues_dropped", queues=len(keys))
        return keys

    def delete_files_manually(self) -> None:
        """Expired CommitLog segments go over the next cleanup rounds, whatever the hour."""
        self.cleanup.delete_files_manually()

    def consume_queue_slice(
        self, topic: str, queue_id: int, index: int, count: int
    ) -> tuple[int, int, list[CQEntry] | None] | None:
        """(min offset, max offset, entries from `index`) of a queue, for mqadmin queryCq:
        at most `count` entries, none past the file holding `index`; the entries are None when
        `index` is not in the queue, and the whole answer None when the queue does not exist."""
        queue = self.queues.queues.get((topic, queue_id))
        if queue is None:
            return None
        low, high = queue.min_offset, queue.max_offset
        if not low <= index < high:
            return low, high, None
        view = queue.entries(index, min(high, index + count))
        entries = [
            CQEntry(index + n, phy, size, tags)
            for n, (phy, size, tags) in enumerate(CQ_ENTRY.iter_unpack(view))
        ]
        return low, high, entries

    def lookup_message_by_offset(self, phy_offset: int) -> MessageRecord | None:
        return self.commit_log.record_at(phy_offset)

    def query_message(
        self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0, end_ms: int = 2**63 - 1
    ) -> list[MessageRecord]:
        """Messages whose KEYS or UNIQ_KEY is `key`, checked against the real message."""
        if self.index is None:
            return []
        found = []
        for phy in self.index.query(topic, key, max_count * 4, begin_ms, end_ms):
            record = self.commit_log.record_at(phy)
            if record is None or record.topic != topic:
                continue
            props = record.properties()
            keys = props.get(MessageConst.KEYS, "").split(KEY_SEPARATOR)
            if key in keys or props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
                found.append(record)
            if len(found) >= max_count:
                break
        return found

    def queue_entry(self, topic: str, queue_id: int, queue_offset: int) -> CQEntry | None:
        """One ConsumeQueue entry (where the message is, its size, its tags code)."""
        queue = self.queues.queues.get((topic, queue_id))
        return queue.entry(queue_offset) if queue else None

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.queues.queues.get((topic, queue_id))
        return queue.min_offset if queue else 0

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.queues.queues.get((topic, queue_id))
        return queue.max_offset if queue else 0

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.files.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """STORETIMESTAMP of the message at a queue offset; -1 when there is none."""
        queue = self.queues.queues.get((topic, queue_id))
        entry = queue.entry(queue_offset) if queue else None
        if entry is None or entry.is_blank:
            return -1
        return self.commit_log.store_timestamp_at(entry.phy_offset)

    def earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue, or of the whole CommitLog; -1 if none."""
        if topic is None:
            return self.commit_log.store_timestamp_at(self.min_phy_offset)
        return self.store_time_at(topic, queue_id, self.min_offset_in_queue(topic, queue_id))

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The queue offset whose store time is `timestamp_ms`, else the nearest one.

        RocketMQ's getOffsetInQueueByTime: a binary search over the queue (skipping entries
        whose message was cleaned up); on no exact hit, the closer of the neighbours, the
        earlier one on a tie. 0 for an empty or unknown queue.
        """
        queue = self.queues.queues.get((topic, queue_id))
        if queue is None or queue.max_offset == queue.min_offset:
            return 0
        low, high = queue.min_offset, queue.max_offset - 1
        left = right = -1
        left_time = right_time = -1
        while low <= high:
            mid = (low + high) // 2
            entry = queue.entry(mid)
            if entry is None:
                return 0
            if entry.is_blank or entry.phy_offset < self.min_phy_offset:
                low, left = mid + 1, mid
                continue
            stamp = self.commit_log.store_timestamp_at(entry.phy_offset)
            if stamp < 0:
                return 0
            if stamp == timestamp_ms:
                return mid
            if stamp > timestamp_ms:
                high, right, right_time = mid - 1, mid, stamp
            else:
                low, left, left_time = mid + 1, mid, stamp
        if left_time == -1:
            return right if right >= 0 else left
        if right_time == -1:
            return left
        return right if abs(timestamp_ms - left_time) > abs(timestamp_ms - right_time) else left

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's store part, under RocketMQ's key names."""
        info = self.stats.runtime_info()
        commit_log_ratio = repr(disk_used_ratio(self.config.store_path_commit_log))
        info["commitLogDiskRatio"] = commit_log_ratio
        info[f"commitLogDiskRatio_{self.config.store_path_commit_log}"] = commit_log_ratio
        info["consumeQueueDiskRatio"] = repr(disk_used_ratio(self.queues.root))
        info["commitLogMinOffset"] = str(self.min_phy_offset)
        info["commitLogMaxOffset"] = str(self.max_phy_offset)
        info["dispatchBehindBytes"] = str(max(self.max_phy_offset - self.reput.offset, 0))
        info["dispatchMaxBuffer"] = "0"
        info["pageCacheLockTimeMills"] = "0"
        info["remainHowManyDataToFlush"] = f"{self._dirty_bytes()} B"
        info["earliestMessageTimeStamp"] = str(self.earliest_message_time())
        info["remainTransientStoreBufferNumbs"] = str(
            self.pool.available if self.pool is not None else 2**31 - 1
        )
        return info

    # -- the CommitLog's limits, for callers that check a send before appending it ----------------
    @property
    def max_message_size(self) -> int:
        """maxMessageSize: the largest message (or batch) the CommitLog takes."""
        return self.commit_log.max_message_size

    def largest_record(self) -> int:
        """The largest record (or batch of records) an append takes: maxMessageSize, and what a
        segment holds besides its blank end."""
        files = self.commit_log.files
        return min(self.commit_log.max_message_size, files.file_size - END_FILE_MIN_BLANK_LENGTH)

    def segment_room(self) -> int:
        """Bytes the next append has in the CommitLog's segment: what the current one has left,
        or a whole segment's when there is none or it is full (the append makes the next)."""
        files = self.commit_log.files
        last = files.last_file
        return files.file_size if last is None or last.is_full else last.remaining


def _wants_wait(message: MessageToStore) -> bool:
    """The WAIT property: a producer may ask not to wait for the flush (default: wait)."""
    wait = property_value(message.properties, MessageConst.WAIT_STORE_MSG_OK)
    return wait is None or wait.lower() != "false"
