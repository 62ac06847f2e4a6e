"""Recovery at start: find where the CommitLog really ends and bring the queues and index to it.

Normal (the last run shut down cleanly): the last `NORMAL_RECOVERY_SEGMENTS` segments are
checked, as RocketMQ's recoverNormally does; earlier ones were whole when the store closed.
Abnormal (the abort file was left behind): the walk starts at the newest segment whose first
message is no newer than the checkpoint's minimum (everything before it was flushed, queues
included), or at the first segment when none is. Either way the torn tail is cut, ConsumeQueue
and index entries past the end are dropped, and everything from the first record the queues
may lack is dispatched again (dispatch is idempotent) before the store takes a put, so the
queue offsets the CommitLog hands out come from complete ConsumeQueues.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.index_service import IndexService
from sidewinder.store.reput import Reput

log = structlog.get_logger(__name__)

NORMAL_RECOVERY_SEGMENTS = 3
PROGRESS_EVERY_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    crashed: bool
    walked_from: int  # where the CommitLog walk started
    commitlog_end: int
    redispatched_from: int
    took_ms: int
    # False when a queue or index file could not be allocated (a full disk): dispatch resumes
    # once the store runs, and queue offsets must come from the queues only after it is done.
    dispatched_all: bool = True


def walk_start(
    commit_log: CommitLog, checkpoint: StoreCheckpoint, *, crashed: bool, index_safe: bool
) -> int:
    """The segment start the CommitLog walk begins at."""
    files = commit_log.files.files
    if not files:
        return 0
    if not crashed:
        return files[max(len(files) - NORMAL_RECOVERY_SEGMENTS, 0)].file_from_offset
    trusted_until = checkpoint.min_timestamp(index_safe=index_safe)
    for segment in reversed(files):
        first = commit_log.first_store_timestamp(segment)
        if first and first <= trusted_until:
            return segment.file_from_offset
    return files[0].file_from_offset


def recover(
    commit_log: CommitLog,
    queues: ConsumeQueueTable,
    index: IndexService | None,
    reput: Reput,
    checkpoint: StoreCheckpoint,
    *,
    crashed: bool,
    check_crc: bool,
    index_safe: bool,
) -> RecoveryReport:
    """Blocking: run it in an executor. Leaves `reput.offset` at the CommitLog's end."""
    started = time.monotonic()
    commit_log.load()
    start = walk_start(commit_log, checkpoint, crashed=crashed, index_safe=index_safe)
    end = commit_log.recover(start, check_crc=check_crc)
    queues.load()
    for queue in queues.queues.values():
        queue.truncate_dirty(end)
    low = commit_log.files.min_offset
    # The first record some queue may lack: after the last one any queue holds...
    redispatch = max((q.max_phy_offset for q in queues.queues.values()), default=low)
    if crashed:
        # ...or, after a crash, the walk's start: queue files flush on their own schedule.
        redispatch = min(redispatch, start)
    if index is not None:
        index.load()
        if index.drop_files_past(end):
            # The index repeats nothing at or below its end, so going back to it is safe.
            redispatch = min(redispatch, index.end_phy_offset)
    redispatch = min(max(redispatch, low), end)
    reput.offset = redispatch
    if end > redispatch:
        log.info("store.redispatching", start=redispatch, end=end, bytes=end - redispatch)
    next_report = [redispatch + PROGRESS_EVERY_BYTES]

    def progress(offset: int) -> None:
        if offset >= next_report[0]:
            next_report[0] = offset + PROGRESS_EVERY_BYTES
            done = (offset - redispatch) / max(end - redispatch, 1)
            log.info("store.recovery_progress", offset=offset, end=end, done=f"{done:.0%}")

    reput.dispatch_all(progress)
    dispatched_all = reput.offset >= end
    if not dispatched_all:
        log.error(
            "store.recovery_dispatch_blocked",
            offset=reput.offset,
            end=end,
            error=str(reput.blocked),
        )
    # Queue offsets continue from complete queues (as RocketMQ's recoverTopicQueueTable does).
    commit_log.queue_offsets = {key: q.max_offset for key, q in queues.queues.items()}
    for queue in queues.queues.values():
        queue.correct_min_offset(low)
    report = RecoveryReport(
        crashed, start, end, redispatch, round((time.monotonic() - started) * 1000), dispatched_all
    )
    log.info(
        "store.recovered",
        crashed=crashed,
        walked_from=start,
        commitlog_end=end,
        redispatched_from=redispatch,
        queues=len(queues.queues),
        took_ms=report.took_ms,
    )
    return report
