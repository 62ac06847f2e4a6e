"""Reput: walk the CommitLog from where dispatch stopped and feed each record to the dispatchers.

Synchronous (it runs on the store's dispatch thread, and inline during recovery). It remembers
how far it got (`offset`, always a record start or a segment's blank tail) and the store
timestamp of the last record it dispatched, which the ConsumeQueue checkpoint records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sidewinder.store.commit_log import CommitLog
from sidewinder.store.dispatchers import CommitLogDispatcher
from sidewinder.store.mapped_file import DiskFullError

DISPATCH_BATCH = 4096

QueueGrowth = dict[tuple[bytes, int], int]  # (topic, queue id) -> new max queue offset


class Reput:
    def __init__(
        self,
        commit_log: CommitLog,
        dispatchers: Sequence[CommitLogDispatcher],
        offset: int = 0,
    ) -> None:
        self.commit_log = commit_log
        self.dispatchers = list(dispatchers)  # in order: RocketMQ's queue, then index
        self.offset = offset
        self.last_store_timestamp = 0
        self.dispatched = 0  # records, ever; the ConsumeQueue flusher compares it
        # Set when a queue or index file could not be allocated: dispatch stopped before the
        # record at `offset` and tries it again next time (dispatch is idempotent).
        self.blocked: DiskFullError | None = None

    def dispatch_until(self, limit: int, max_records: int = DISPATCH_BATCH) -> QueueGrowth:
        """Dispatch records from `offset` up to `limit` (at most `max_records`); queues grown."""
        grown: QueueGrowth = {}
        n = 0
        dispatches = [d.dispatch for d in self.dispatchers]
        try:
            for scanned in self.commit_log.scan(self.offset):
                total, phy, topic, queue_id, queue_offset, _, store_ts, _ = scanned
                if phy + total > limit or n >= max_records:
                    break
                for dispatch in dispatches:
                    dispatch(scanned)
                grown[(topic, queue_id)] = queue_offset + 1
                self.offset = phy + total
                self.last_store_timestamp = store_ts
                n += 1
            else:
                # Past the last record of a segment (its blank tail): continue in the next one.
                self.offset = max(self.offset, min(limit, self.commit_log.max_offset))
        except DiskFullError as exc:
            self.blocked = exc
        else:
            # Cleared only by a round that went through: puts stay refused while one retries.
            self.blocked = None
        self.dispatched += n
        return grown

    def dispatch_all(self, progress: Callable[[int], None] | None = None) -> None:
        """Dispatch everything up to the CommitLog's end (recovery, shutdown)."""
        limit = self.commit_log.max_offset
        while self.offset < limit:
            before = self.offset
            self.dispatch_until(limit)
            if progress is not None:
                progress(self.offset)
            if self.offset == before or self.blocked is not None:
                break
