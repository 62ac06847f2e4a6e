"""Cleanup: expired CommitLog segments, then ConsumeQueue and index files below the new minimum.

RocketMQ's CleanCommitLogService and CleanConsumeQueueService, every `cleanResourceInterval`:
- CommitLog segments older than `fileReservedTime` hours (by mtime) go at a `deleteWhen` hour;
  at any hour when the disk is more than `diskMaxUsedSpaceRatio` % full; and all but the
  newest go, expired or not, when it is more than 85 % full (`cleanFileForciblyEnable`). At
  most 10 segments a round; the newest segment never goes.
- Above 90 % the store refuses puts (SERVICE_NOT_AVAILABLE, which the broker answers with code
  14) until the disk drops below that again (disk_space.py). A store file that could not be
  allocated since the last round counts as that too: the disk is full for what comes next.
- Never a segment at or above the store's `keep_from` floor (MessageStore.add_commit_log_floor:
  the lowest CommitLog offset a pending timer message is read from), whatever its age or the
  disk's state: RocketMQ 5 relies on rolling timer messages forward within
  timerRollWindowSlot, which loses them to a fileReservedTime shorter than that or to a full
  disk.
- Then ConsumeQueue files whose entries all point below the CommitLog's new minimum, and index
  files likewise, go; each queue's minimum moves to its first entry still readable.

A file taken out is unlinked at once but unmapped only a round later: a reader on another
thread that found it just before may still be reading it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.disk_space import DiskSpace
from sidewinder.store.index_file import IndexFile
from sidewinder.store.index_service import IndexService
from sidewinder.store.mapped_file import MappedFile
from sidewinder.store.stats import disk_used_ratio, partition_usage

log = structlog.get_logger(__name__)

DELETE_FILES_BATCH_MAX = 10
MANUAL_DELETE_ROUNDS = 20

DiskUsage = Callable[[Path], float]


@dataclass
class CleanupRound:
    """What one round saw and did."""

    commit_log_ratio: float = 0.0
    queue_ratio: float = 0.0
    deleted_segments: list[str] = field(default_factory=list)
    deleted_queue_files: int = 0
    deleted_index_files: int = 0


class Cleanup:
    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        *,
        file_executor: Executor,
        queue_executor: Executor,
        disk: DiskSpace | None = None,
        dispatched_to: Callable[[], int],
        keep_from: Callable[[], int | None] = lambda: None,
        disk_usage: DiskUsage = disk_used_ratio,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        # Segments are unmapped on the flush thread, so no fdatasync meets a closed file;
        # queue and index files on the dispatch thread, which writes them.
        self._file_executor = file_executor
        self._queue_executor = queue_executor
        self.disk_usage = disk_usage  # a probe tests may swap
        self._dispatched_to = dispatched_to  # the CommitLog offset dispatch has reached
        # The lowest CommitLog offset something still reads (pending timer messages), if any.
        self._keep_from = keep_from
        self._now = now
        self.disk = disk or DiskSpace()
        self.manual_rounds = 0
        self._retired: list[MappedFile | IndexFile] = []
        self._last_min_phy = -1

    @property
    def disk_full(self) -> bool:
        return self.disk.full_by_ratio

    def delete_files_manually(self) -> None:
        """mqadmin deleteExpiredCommitLog: expired segments go now, whatever the hour."""
        self.manual_rounds = MANUAL_DELETE_ROUNDS

    async def run_periodically(self) -> None:
        """A round every cleanResourceInterval (read each time: updateBrokerConfig sets it)."""
        while True:
            await asyncio.sleep(self.config.clean_resource_interval / 1000)
            try:
                await self.run_once()
            except OSError as exc:
                # A file that would not go is retried next round; say so, keep serving.
                log.error("store.cleanup_failed", error=str(exc))

    async def run_once(self) -> CleanupRound:
        loop = asyncio.get_running_loop()
        done = CleanupRound()
        # Unmap what the previous round took out: no reader can still be inside it.
        retired, self._retired = self._retired, []
        if retired:
            await loop.run_in_executor(self._file_executor, _close_all, retired)
        done.commit_log_ratio, done.queue_ratio, ages = await loop.run_in_executor(
            self._file_executor, self._measure
        )
        clean_at_once = self._judge_disk(done.commit_log_ratio, done.queue_ratio)
        limit = self.config.disk_max_used_space_ratio / 100
        # An unreadable ratio (negative) counts as full, as in RocketMQ's isSpaceToDelete.
        space_to_free = any(
            not 0 <= ratio <= limit for ratio in (done.commit_log_ratio, done.queue_ratio)
        )
        if self.disk.space_wanted:
            # A file could not be allocated since the last round. Still no room for the next
            # segment: the disk is full for what comes next, as if above 90 %.
            self.disk.space_wanted = False
            if await loop.run_in_executor(self._file_executor, self._no_room_for_a_segment):
                space_to_free = clean_at_once = True
        # Read each round: updateBrokerConfig may change deleteWhen while the broker runs.
        time_to_delete = time.localtime(self._now()).tm_hour in _hours(self.config.delete_when)
        manual = self.manual_rounds > 0
        if time_to_delete or space_to_free or manual:
            if manual:
                self.manual_rounds -= 1
            forcibly = self.config.clean_file_forcibly_enable and clean_at_once
            reserved_s = self.config.file_reserved_time * 3600
            count = 0
            dispatched = self._dispatched_to()
            floor = self._keep_from()
            for modified, end in ages:  # oldest first; stop at the first one kept
                if end > dispatched:
                    break
                if not forcibly and self._now() < modified + reserved_s:
                    break
                if floor is not None and end > floor:
                    log.info("store.cleanup.kept_for_readers", keep_from=floor, segment_end=end)
                    break
                count += 1
                if count >= DELETE_FILES_BATCH_MAX:
                    break
            dropped = self.commit_log.files.drop_head(count)
            if dropped:
                done.deleted_segments = [f.path.name for f in dropped]
                log.info(
                    "store.cleanup.commitlog",
                    deleted=done.deleted_segments,
                    forcibly=forcibly,
                    disk_ratio=round(done.commit_log_ratio, 3),
                )
                await loop.run_in_executor(self._file_executor, _unlink_all, dropped)
                self._retired += dropped
        min_phy = self.commit_log.files.min_offset
        if min_phy > self._last_min_phy:
            queue_files, index_files = await loop.run_in_executor(
                self._queue_executor, self._clean_queues, min_phy
            )
            done.deleted_queue_files, done.deleted_index_files = len(queue_files), len(index_files)
            self._retired += [*queue_files, *index_files]
            self._last_min_phy = min_phy
        return done

    def _no_room_for_a_segment(self) -> bool:
        try:
            _, usable = partition_usage(self.config.store_path_commit_log)
        except OSError:
            return True
        return usable < self.config.mapped_file_size_commit_log

    def _measure(self) -> tuple[float, float, list[tuple[float, int]]]:
        """Disk ratios, and the mtime and end offset of every segment but the newest.
        Blocking."""
        commit_log_ratio = self.disk_usage(self.config.store_path_commit_log)
        queue_ratio = self.disk_usage(self.queues.root)
        ages = [
            (f.last_modified(), f.file_from_offset + f.size)
            for f in self.commit_log.files.files[:-1]
        ]
        return commit_log_ratio, queue_ratio, ages

    def _judge_disk(self, commit_log_ratio: float, queue_ratio: float) -> bool:
        """Set or clear the disk-full refusal; True when files must go whatever their age."""
        ratio = max(commit_log_ratio, queue_ratio)
        self.disk.judge_ratio(ratio)
        return ratio > self.disk.clean_forcibly_ratio

    def _clean_queues(self, min_phy: int) -> tuple[list[MappedFile], list[IndexFile]]:
        """ConsumeQueue and index files below `min_phy`. Blocking, on the dispatch thread."""
        queue_files: list[MappedFile] = []
        for queue in list(self.queues.queues.values()):
            queue_files += queue.drop_expired(min_phy)
            queue.correct_min_offset(min_phy)
        index_files = self.index.drop_expired(min_phy) if self.index is not None else []
        _unlink_all([*queue_files, *index_files])
        if queue_files or index_files:
            log.info(
                "store.cleanup.queues",
                min_phy_offset=min_phy,
                queue_files=len(queue_files),
                index_files=len(index_files),
            )
        return queue_files, index_files

    def close(self) -> None:
        """Unmap whatever is still retired (at shutdown). Blocking."""
        _close_all(self._retired)
        self._retired = []


def _hours(delete_when: str) -> set[int]:
    return {int(h) for h in delete_when.split(";") if h.strip().isdigit()}


def _unlink_all(files: Sequence[MappedFile | IndexFile]) -> None:
    for f in files:
        f.path.unlink(missing_ok=True)


def _close_all(files: list[MappedFile | IndexFile]) -> None:
    for f in files:
        f.close()
