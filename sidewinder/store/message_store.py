"""MessageStore: the store's facade, its async edge over the synchronous CommitLog, queues
and index.

    store = MessageStore(config, store_host=Host(ip, port))
    await store.start()                            # lock, recover, start flush and dispatch
    appended = store.append_many(records)          # MessageToStore and BatchToStore, no wait
    status = await store.settled(appended.end_offset)  # PUT_OK once durable (SYNC_FLUSH)
    got = store.get_messages("T", 0, offset, 32)   # FOUND + views of mapped memory
    await store.shutdown()                         # flush, checkpoint, clean-shutdown marker

Appends happen on the event loop (a memcpy into the map); every fdatasync and every dispatch
batch runs on an executor thread. Under SYNC_FLUSH nothing is dispatched (visible to consumers)
beyond the flushed offset. The parts are private: assembly.py makes and wires them,
append.py is the one way into the CommitLog, acknowledge.py answers producers, flush_plans.py
says what each flush covers, dispatch_loop.py feeds the queues and index, queries.py reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence

import structlog

from sidewinder.protocol.batch_record import BatchToStore
from sidewinder.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    Host,
    MessageRecord,
    MessageToStore,
)
from sidewinder.store.acknowledge import (
    STORED,
    AppendedMany,
    PutResult,
    PutStatus,
    ReplicaAcks,
)
from sidewinder.store.assembly import assemble
from sidewinder.store.commit_log import QueueKey, RecordWriter
from sidewinder.store.config import BrokerRole, FlushDiskType, StoreConfig
from sidewinder.store.consume_queue import CQEntry
from sidewinder.store.dispatch_loop import ArrivalListener
from sidewinder.store.flush_plans import FlushTimings
from sidewinder.store.get_message import GetResult, GetStatus
from sidewinder.store.message_run import MessageRun
from sidewinder.store.recovery import RecoveryReport
from sidewinder.store.stats import StoreStats

__all__ = [
    "STORED",
    "AppendedMany",
    "GetResult",
    "GetStatus",
    "MessageRun",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "ReplicaAcks",
]

log = structlog.get_logger(__name__)

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
        self.stats = StoreStats(size_buckets=topic_size_buckets)
        self.sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.is_slave = config.broker_role is BrokerRole.SLAVE
        # A slave's CommitLog may end inside a record its master has not finished sending;
        # readers and dispatch see only the whole records before it.
        self.replicated_end = 0
        self._floors: list[CommitLogFloor] = []
        parts = assemble(
            config,
            store_host=store_host,
            owner=owner,
            stats=self.stats,
            keep_from=self._commit_log_floor,
            dispatch_limit=lambda: self.dispatch_limit,
            clock=clock,
        )
        self._parts = parts
        self._commit_log, self._queues, self._reput = parts.commit_log, parts.queues, parts.reput
        self._flushes, self._group_commit = parts.flushes, parts.flushes.group_commit
        self._dispatch, self._queries, self._acks = parts.dispatch, parts.queries, parts.acks
        self._appender = parts.appender
        self.arrival_listeners: list[ArrivalListener] = self._dispatch.arrival_listeners
        # Told once per append call, after the bytes are in the CommitLog (replication).
        self.append_listeners: list[Callable[[], None]] = self._appender.append_listeners
        self._recovery: RecoveryReport | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.running = False
        self.crashed_last_time = False

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        loop, parts = asyncio.get_running_loop(), self._parts
        parts.markers.lock()
        try:
            # Before the abort file: a store refused here must leave its root as it was.
            parts.commit_log_lock.acquire()
        except BaseException:
            parts.markers.release()
            raise
        self.crashed_last_time = parts.markers.mark_running()
        parts.say_where_the_commit_log_is()
        try:
            self._recovery = await loop.run_in_executor(
                parts.dispatch_thread, lambda: parts.recover(crashed=self.crashed_last_time)
            )
        except BaseException:
            parts.close_maps()
            parts.release()
            raise
        self._group_commit.flushed_offset = self._commit_log.max_offset
        self.replicated_end = self._commit_log.max_offset
        self._dispatch.queue_offsets_pending = not self._recovery.dispatched_all
        await loop.run_in_executor(parts.flush_executor, parts.check_disk_at_start)
        self._commit_log.files.prepare_next()
        self._flushes.start(pooled=parts.pool is not None)
        self._tasks = [
            loop.create_task(self._dispatch.run(), name="store-dispatch"),
            loop.create_task(self.stats.sample_every_second(), name="store-stats"),
            loop.create_task(parts.cleanup.run_periodically(), name="store-cleanup"),
        ]
        self.running = self._dispatch.running = self._appender.running = True
        self._dispatch.wakeup.set()

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = self._dispatch.running = self._appender.running = False
        for task in self._tasks:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._flushes.stop()
        loop, parts = asyncio.get_running_loop(), self._parts
        await loop.run_in_executor(parts.flush_executor, self._commit_log.commit)
        # A slave's tail may be part of a record: its dispatch stops before it.
        limit = self.replicated_end if self.is_slave else None
        await loop.run_in_executor(parts.dispatch_thread, self._reput.dispatch_all, None, limit)
        await loop.run_in_executor(parts.flush_executor, parts.close_files)
        parts.release()

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds: every record's STORETIMESTAMP."""
        return self._appender.clock

    @clock.setter
    def clock(self, clock: Callable[[], int]) -> None:
        self._appender.clock = clock

    @property
    def recovery(self) -> RecoveryReport | None:
        """What recovery found at start (None before it)."""
        return self._recovery

    def flush_timings(self) -> FlushTimings:
        return self._flushes.timings()

    def add_commit_log_floor(self, floor: CommitLogFloor) -> None:
        """Cleanup keeps the CommitLog from the lowest offset any floor names."""
        self._floors.append(floor)

    def _commit_log_floor(self) -> int | None:
        floors = [floor for floor in (hook() for hook in self._floors) if floor is not None]
        return min(floors, default=None)

    # -- appends (append.py) ------------------------------------------------------------------
    def write_failure(self) -> str:
        """Why the store takes no message now ("" when it does): not running, a slave, a disk
        or dispatch error. RocketMQ checks this before a message's size."""
        return self._appender.write_failure()

    def illegal(self, message: MessageToStore) -> str:
        """Why the store cannot take `message` ("" when it can): append_many's precondition."""
        return self._commit_log.illegal(message)

    def illegal_batch(self, record_total: int) -> str:
        """Why the store cannot take a batch whose records total `record_total` bytes."""
        return self._commit_log.illegal_batch(record_total)

    def append_many(
        self, messages: Sequence[MessageToStore | BatchToStore | MessageRun]
    ) -> AppendedMany:
        """Append the sends of one received chunk (any topics and queues, each checked with
        `illegal`, a batch send as one BatchToStore, or as one MessageRun when its messages were
        built one by one) in one pass; no waiting. A caller that owes
        its producers an acknowledgement awaits `settled(end_offset)` once for them all."""
        return self._appender.append_many(messages)

    def append_encoded(self, write: RecordWriter) -> tuple[int, int, str]:
        """Records encoded by `write` straight into the CommitLog (CommitLog.put_encoded: a
        writer that keeps to what `illegal` allows), no waiting: the first and end physical
        offsets written (-1: none) and why the writer was stopped or not called ("" if not).
        The caller counts what it stored with `count_encoded`."""
        return self._appender.append_encoded(write)

    def count_encoded(self, topics: Sequence[tuple[str, int, int, int]], elapsed_ms: float) -> None:
        self._appender.count_encoded(topics, elapsed_ms)

    # Plain functions handing back the Appender's coroutine: no second frame per put.
    def put_message(
        self, message: MessageToStore, *, wait: bool | None = None
    ) -> Coroutine[None, None, PutResult]:
        """Append one message and wait until it is settled (append_many + settled). `wait`
        (default: the message's WAIT property) is whether to answer only once settled; a
        caller that stores the message without its WAIT property says what the producer
        asked for."""
        return self._appender.put(message, wait)

    def put_messages(self, messages: Sequence[MessageToStore]) -> Coroutine[None, None, PutResult]:
        """Append a batch for one (topic, queue) as consecutive records in one segment (see
        put_message); its first message's WAIT property decides the wait."""
        return self._appender.put(messages, None)

    # -- acknowledgement -----------------------------------------------------------------------
    @property
    def acknowledges_late(self) -> bool:
        """Whether a put that waits (WAIT=true) is answered only once `settled`: SYNC_FLUSH
        (on disk) or SYNC_MASTER (on a slave)."""
        return self._acks.acknowledges_late

    @property
    def replica_acks(self) -> ReplicaAcks | None:
        return self._acks.replica_acks

    @replica_acks.setter
    def replica_acks(self, acks: ReplicaAcks | None) -> None:
        self._acks.replica_acks = acks

    def settled(self, end_offset: int) -> asyncio.Future[PutStatus]:
        """What a waiting producer is told about the CommitLog up to `end_offset` (see
        acknowledge.py): PUT_OK, or why not; FlushError after a disk error."""
        return self._acks.settled(end_offset)

    def settle_remark(self, status: PutStatus) -> str:
        return self._acks.settle_remark(status)

    # -- room in the CommitLog -----------------------------------------------------------------
    @property
    def max_message_size(self) -> int:
        """maxMessageSize: the largest body (or batch body) the store takes."""
        return self._commit_log.max_message_size

    def largest_record(self) -> int:
        """The largest record (or run of a batch's records) an append can take: maxMessageSize
        and the allowance for headers, or less when a segment (less its end-of-file blank) is
        smaller."""
        file_size = self._commit_log.files.file_size
        return min(self._commit_log.max_record_size, file_size - END_FILE_MIN_BLANK_LENGTH)

    def segment_room(self) -> int:
        """Bytes the next append has in the current CommitLog segment: what the last one has
        left, or a whole segment when there is none or it is full."""
        files = self._commit_log.files
        last = files.last_file
        if last is None or last.is_full:
            return files.file_size
        return last.remaining

    # -- dispatch ------------------------------------------------------------------------------
    @property
    def dispatch_limit(self) -> int:
        """How far consumers may see: the flushed offset under SYNC_FLUSH, else the end (on
        a slave, the end of the whole records its master sent)."""
        end = self.replicated_end if self.is_slave else self._commit_log.max_offset
        if self.sync_flush:
            return min(self._group_commit.flushed_offset, end)
        return end

    def append_replicated(self, offset: int, data: bytes) -> None:
        """A slave's append of CommitLog bytes from its master, at `offset` (ReplicationError
        when that is not where the CommitLog ends); dispatch builds the queues from them."""
        self._commit_log.append_replicated(offset, data)
        self.replicated_end = self._commit_log.whole_records_end(self.replicated_end)
        if self.sync_flush:
            self._group_commit.wake()
        else:
            self._dispatch.wakeup.set()

    @property
    def is_caught_up(self) -> bool:
        """A reader now sees everything appended before (`caught_up` would not wait)."""
        return self._dispatch.is_caught_up

    async def caught_up(self, timeout_s: float = 0.5) -> None:
        """Wait (briefly) until everything appended before this call is dispatched, so a
        reader right after a write sees it; gives up quietly after `timeout_s`."""
        await self._dispatch.caught_up(timeout_s)

    @property
    def flush_behind_bytes(self) -> int:
        """CommitLog bytes written but not yet on disk (RocketMQ's flushBehindBytes)."""
        return max(self._flushes.dirty_bytes(), 0)

    @property
    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet dispatched to the queues and index (dispatchBehindBytes)."""
        return max(self._commit_log.max_offset - self._reput.offset, 0)

    # -- reads (queries.py) --------------------------------------------------------------------
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        tags_codes: frozenset[int] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
        joined: bool = False,
    ) -> GetResult:
        """Up to `max_count` whole records from queue offset `offset` (RocketMQ's getMessage,
        see get_message.py). `tags_codes` filters by the ConsumeQueue's tags hash;
        `record_filter`, when given, is asked about each record that passes. `joined`: the
        records as one body (a pull's), not a view each."""
        return self._queries.get_messages(
            topic, queue_id, offset, max_count, tags_codes, record_filter, joined
        )

    def commit_log_data(self, phy_offset: int, max_bytes: int) -> bytes | None:
        """A copy of up to `max_bytes` of the CommitLog from `phy_offset`, within its segment
        and what readers may see (what a master streams to its slave); None when nothing is
        there yet or the segment is gone."""
        return self._queries.commit_log_data(phy_offset, max_bytes)

    def record_bytes(self, phy_offset: int, size: int) -> memoryview | None:
        """The stored record at `phy_offset` as a view of mapped memory (for replies)."""
        return self._queries.record_bytes(phy_offset, size)

    def lookup_message_by_offset(self, phy_offset: int) -> MessageRecord | None:
        return self._commit_log.record_at(phy_offset)

    def records_from(self, phy_offset: int) -> Iterator[MessageRecord]:
        """The CommitLog's messages from `phy_offset` on, in order."""
        return self._commit_log.records(phy_offset)

    def query_message(
        self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0, end_ms: int = 2**63 - 1
    ) -> list[MessageRecord]:
        """Messages whose KEYS or UNIQ_KEY is `key`, checked against the real message."""
        return self._queries.query_message(topic, key, max_count, begin_ms, end_ms)

    def index_last_update(self) -> tuple[int, int]:
        """(store time, CommitLog end offset) the index was last updated to: (0, 0) without
        one (QueryMessageResponseHeader's indexLastUpdateTimestamp and -Phyoffset)."""
        return self._queries.index_last_update()

    def consume_queue_slice(
        self, topic: str, queue_id: int, index: int, count: int
    ) -> tuple[int, int, list[CQEntry] | None] | None:
        """(min offset, max offset, entries from `index`) of a queue, for mqadmin queryCq:
        at most `count` entries, none past the file holding `index`; the entries are None when
        `index` is not in the queue, and the whole answer None when the queue does not exist."""
        return self._queries.consume_queue_slice(topic, queue_id, index, count)

    def queue_entry(self, topic: str, queue_id: int, queue_offset: int) -> CQEntry | None:
        """One ConsumeQueue entry (where the message is, its size, its tags code)."""
        return self._queries.queue_entry(topic, queue_id, queue_offset)

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self._queries.min_offset_in_queue(topic, queue_id)

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self._queries.max_offset_in_queue(topic, queue_id)

    @property
    def min_phy_offset(self) -> int:
        return self._commit_log.files.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self._commit_log.max_offset

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """STORETIMESTAMP of the message at a queue offset; -1 when there is none."""
        return self._queries.store_time_at(topic, queue_id, queue_offset)

    def earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue, or of the whole CommitLog; -1 if none."""
        return self._queries.earliest_message_time(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The queue offset whose store time is `timestamp_ms`, else the nearest one (the
        earlier on a tie): RocketMQ's getOffsetInQueueByTime. 0 for an empty or unknown queue."""
        return self._queries.offset_by_time(topic, queue_id, timestamp_ms)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's store part, under RocketMQ's key names."""
        pool = self._parts.pool
        return self._queries.runtime_info(
            dispatch_behind=self.dispatch_behind_bytes,
            flush_behind=self._flushes.dirty_bytes(),
            pool_buffers=pool.available if pool is not None else 2**31 - 1,
        )

    # -- maintenance ---------------------------------------------------------------------------
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
            queue = self._queues.queues[key]
            return key[0] not in keep and 0 < queue.max_phy_offset <= min_phy

        return await self._drop_queues(expired)

    async def _drop_queues(self, which: Callable[[QueueKey], bool]) -> list[QueueKey]:
        loop = asyncio.get_running_loop()
        keys = await loop.run_in_executor(self._parts.dispatch_thread, self._queues.drop, which)
        for key in keys:
            # The next message of a dropped queue starts it again at offset 0, as in RocketMQ.
            self._commit_log.queue_offsets.pop(key, None)
        if keys:
            log.info("store.queues_dropped", queues=len(keys))
        return keys

    def delete_files_manually(self) -> None:
        """Expired CommitLog segments go over the next cleanup rounds, whatever the hour."""
        self._parts.cleanup.delete_files_manually()
