"""Making and wiring the parts of a MessageStore, and taking them down again.

    parts = assemble(config, store_host=host, owner="broker-a", stats=stats,
                     keep_from=floor, dispatch_limit=limit)
    parts.recover(crashed=False)        # blocking: on the dispatch thread
    parts.close_files(clean=True)       # blocking: on the flush thread
    parts.release()                     # executors, the CommitLog lock, the run markers

The CommitLog and the TransientStorePool, the ConsumeQueues and the index with their
dispatchers, the checkpoint, the flush services, the dispatch loop, cleanup, the queries and
the acknowledger are made here, each given only the others it uses. RocketMQ's pool serves an
ASYNC_FLUSH master only, and is ignored otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from sidewinder.protocol.record import Host
from sidewinder.store.acknowledge import Acknowledger
from sidewinder.store.append import Appender
from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.cleanup import Cleanup
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import BrokerRole, FlushDiskType, StoreConfig
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.disk_space import DiskSpace
from sidewinder.store.dispatch_loop import DispatchLoop
from sidewinder.store.dispatch_thread import DispatchThread
from sidewinder.store.dispatchers import (
    CommitLogDispatcher,
    parse_delay_levels,
    store_dispatchers,
)
from sidewinder.store.flush_plans import StoreFlushes
from sidewinder.store.index_service import IndexService
from sidewinder.store.mapped_file import DiskFullError
from sidewinder.store.queries import StoreQueries
from sidewinder.store.recovery import RecoveryReport, recover
from sidewinder.store.reput import Reput
from sidewinder.store.run_markers import CommitLogDirLock, RunMarkers
from sidewinder.store.stats import StoreStats, disk_used_ratio
from sidewinder.store.transient_pool import TransientStorePool

log = structlog.get_logger(__name__)


@dataclass(slots=True, eq=False)
class StoreParts:
    config: StoreConfig
    markers: RunMarkers
    commit_log_lock: CommitLogDirLock
    pool: TransientStorePool | None
    commit_log: CommitLog
    queues: ConsumeQueueTable
    index: IndexService | None
    dispatchers: list[CommitLogDispatcher]
    reput: Reput
    disk: DiskSpace
    # One thread each, so flushes stay in order and dispatch stays in CommitLog order.
    flush_executor: ThreadPoolExecutor
    dispatch_thread: DispatchThread
    allocate_executor: ThreadPoolExecutor
    flushes: StoreFlushes
    dispatch: DispatchLoop
    cleanup: Cleanup
    queries: StoreQueries
    acks: Acknowledger
    appender: Appender

    def recover(self, *, crashed: bool) -> RecoveryReport:
        """Read the checkpoint, recover the CommitLog, queues and index. Blocking."""
        config = self.config
        checkpoint = StoreCheckpoint.open(self.flushes.checkpoint.path)
        self.flushes.checkpoint = checkpoint
        return recover(
            self.commit_log,
            self.queues,
            self.index,
            self.reput,
            checkpoint,
            crashed=crashed,
            check_crc=config.check_crc_on_recover,
            index_safe=config.message_index_enable and config.message_index_safe,
        )

    def say_where_the_commit_log_is(self) -> None:
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

    def check_disk_at_start(self) -> None:
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

    def close_maps(self) -> None:
        """After a start that failed: unmap without flushing."""
        self.commit_log.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()

    def close_files(self) -> None:
        """Flush and close every file; the clean-shutdown marker unless a flush failed.
        Blocking: on the flush thread."""
        self.cleanup.close()
        self.flushes.flush_commit_log()
        self.flushes.flush_queues()
        self.commit_log.close()
        if self.pool is not None:
            self.pool.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()
        if self.flushes.error() is None:
            self.markers.mark_clean_shutdown()

    def release(self) -> None:
        """Stop the threads, unlock the CommitLog directory and the store root."""
        self.flush_executor.shutdown()
        self.dispatch_thread.shutdown()
        self.allocate_executor.shutdown()
        self.commit_log_lock.release()
        self.markers.release()


def assemble(
    config: StoreConfig,
    *,
    store_host: Host,
    owner: str,
    stats: StoreStats,
    keep_from: Callable[[], int | None],
    dispatch_limit: Callable[[], int],
    clock: Callable[[], int],
) -> StoreParts:
    """`keep_from`: the lowest CommitLog offset a reader still needs (cleanup keeps it);
    `dispatch_limit`: how far the dispatch loop may go."""
    root = config.store_path_root_dir
    sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    pool = (
        TransientStorePool(config.transient_store_pool_size, config.mapped_file_size_commit_log)
        if config.transient_store_pool_enable
        and not sync_flush
        and config.broker_role is not BrokerRole.SLAVE
        else None
    )
    commit_log = CommitLog(
        config.store_path_commit_log,
        segment_size=config.mapped_file_size_commit_log,
        max_message_size=config.max_message_size,
        store_host=store_host,
        pool=pool,
    )
    queues = ConsumeQueueTable(root / "consumequeue", config.mapped_file_size_consume_queue)
    index = (
        IndexService(root / "index", config.max_hash_slot_num, config.max_index_num)
        if config.message_index_enable
        else None
    )
    dispatchers = store_dispatchers(queues, index, parse_delay_levels(config.message_delay_level))
    flush_executor = ThreadPoolExecutor(1, thread_name_prefix="store-flush")
    dispatch_thread = DispatchThread()
    allocate_executor = ThreadPoolExecutor(1, thread_name_prefix="store-allocate")
    commit_log.files.preallocate(
        allocate_executor,
        warm=config.warm_maped_file_enable,
        # RocketMQ syncs while warming under SYNC_FLUSH, to avoid one huge writeback later.
        sync_every_bytes=config.flush_least_pages_when_warm_maped_file * 4096 if sync_flush else 0,
    )
    disk = DiskSpace(
        full_ratio=config.disk_full_ratio, clean_forcibly_ratio=config.disk_clean_forcibly_ratio
    )
    commit_log.files.before_create = lambda size: disk.check_room(
        config.store_path_commit_log, size
    )
    reput = Reput(commit_log, dispatchers)
    dispatch = DispatchLoop(reput, dispatch_thread, commit_log, queues, disk, limit=dispatch_limit)
    flushes = StoreFlushes(
        config,
        commit_log,
        queues,
        index,
        reput,
        checkpoint=StoreCheckpoint(root / "checkpoint"),
        flush_executor=flush_executor,
        queue_executor=dispatch_thread,
        wake_dispatch=dispatch.wakeup.set,
    )
    cleanup = Cleanup(
        config,
        commit_log,
        queues,
        index,
        file_executor=flush_executor,
        queue_executor=dispatch_thread,
        disk=disk,
        dispatched_to=lambda: reput.offset,
        keep_from=keep_from,
    )
    acks = Acknowledger(
        flushes.group_commit,
        sync_flush=sync_flush,
        # SYNC_MASTER: a put that waits is acknowledged once a slave has it too.
        sync_master=config.broker_role is BrokerRole.SYNC_MASTER,
        config=config,
    )
    return StoreParts(
        config,
        RunMarkers(root),
        CommitLogDirLock(config.store_path_commit_log, f"{owner} (storePathRootDir {root})"),
        pool,
        commit_log,
        queues,
        index,
        dispatchers,
        reput,
        disk,
        flush_executor,
        dispatch_thread,
        allocate_executor,
        flushes,
        dispatch,
        cleanup,
        StoreQueries(config, commit_log, queues, index, stats),
        acks,
        Appender(
            commit_log,
            acks=acks,
            flushes=flushes,
            dispatch=dispatch,
            reput=reput,
            disk=disk,
            stats=stats,
            clock=clock,
            is_slave=config.broker_role is BrokerRole.SLAVE,
        ),
    )
