"""Reput: walk the CommitLog from where dispatch stopped and feed its records to the dispatchers.

    reput = Reput(commit_log, [ConsumeQueueDispatcher(...), IndexDispatcher(...)])
    grown = reput.dispatch_until(limit)   # {(topic, queue id): new max queue offset}

Synchronous (it runs on the store's dispatch thread, and inline during recovery). It remembers
how far it got (`offset`, always a record start or a segment's blank tail) and the store
timestamp of the last record it dispatched, which the ConsumeQueue checkpoint records.

A round reads up to DISPATCH_BATCH records straight from the mapped segments (only the fields
dispatch uses, no record objects) and hands them to each dispatcher as one batch: each first
works out what it writes and allocates the room (`prepare`), then all write. A batch that
needs a new file, or finds no room, goes record by record instead (`dispatch`), so a full disk
stops dispatch exactly at the first record it could not write, as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from sidewinder.protocol.record import HOSTS_V6_MASK, MESSAGE_MAGIC, RecordError, scan_record
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.dispatchers import CommitLogDispatcher, DispatchRecord
from sidewinder.store.mapped_file import DiskFullError, MappedFile

DISPATCH_BATCH = 4096

QueueGrowth = dict[tuple[bytes, int], int]  # (topic, queue id) -> new max queue offset

# TOTALSIZE, MAGICCODE, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP and
# BODYLENGTH of a V1 record with two IPv4 hosts (nearly every one); the rest is skipped.
_LEAN_V4 = struct.Struct(">ii4xi4xqqi8x8xq8x12xi")
_BODY_AT = _LEAN_V4.size  # 88


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
        records, exhausted = self.read(limit, max_records)
        done = 0
        try:
            if records and self._prepared(records):
                for dispatcher in self.dispatchers:
                    dispatcher.write_prepared()
                done = len(records)
            else:
                dispatches = [d.dispatch for d in self.dispatchers]
                for record in records:
                    for dispatch in dispatches:
                        dispatch(record)
                    done += 1
        except DiskFullError as exc:
            self.blocked = exc
        else:
            # Cleared only by a round that went through: puts stay refused while one retries.
            self.blocked = None
        if done:
            last = records[done - 1]
            self.offset = last[1] + last[0]
            self.last_store_timestamp = last[6]
        if done == len(records) and exhausted:
            # Past the last record of a segment (its blank tail): continue in the next one.
            self.offset = max(self.offset, min(limit, self.commit_log.max_offset))
        self.dispatched += done
        grown: QueueGrowth = {}
        for record in records[:done] if done < len(records) else records:
            grown[(record[2], record[3])] = record[4] + 1
        return grown

    def _prepared(self, records: list[DispatchRecord]) -> bool:
        """Whether every dispatcher can take the batch whole (room allocated, no new file)."""
        try:
            return all(d.prepare(records) for d in self.dispatchers)
        except DiskFullError:
            return False  # record by record then, to stop at exactly the one without room

    def read(self, limit: int, max_records: int) -> tuple[list[DispatchRecord], bool]:
        """The records from `offset` that end by `limit` (at most `max_records`), and whether
        the walk ran out of records (rather than stopping at the limit or the count)."""
        records: list[DispatchRecord] = []
        for segment in self.commit_log.files.files:  # a snapshot: cleanup replaces the list
            start = segment.file_from_offset
            if start + segment.size <= self.offset:
                continue
            position = max(self.offset - start, 0)
            if not _read_segment(segment, position, limit - start, records, max_records):
                return records, False
        return records, True

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


def _read_segment(
    segment: MappedFile,
    position: int,
    limit: int,
    records: list[DispatchRecord],
    max_records: int,
) -> bool:
    """Append the segment's records from `position` that end by `limit` (segment-relative) to
    `records`, up to `max_records` in all; False when the limit or the count stopped it."""
    append = records.append
    unpack = _LEAN_V4.unpack_from
    readable = segment.read_position
    stop = min(readable, limit)  # records must end by here
    data = segment.buffer.obj  # the mmap: slicing it gives bytes at once
    while position < readable:
        if len(records) >= max_records:
            return False
        try:
            total, magic, queue_id, queue_offset, phy, sys_flag, store_ts, body_len = unpack(
                data, position
            )
        except struct.error:
            magic = sys_flag = total = body_len = 0  # near the file's end: a blank
        end = position + total
        if magic != MESSAGE_MAGIC or sys_flag & HOSTS_V6_MASK or body_len < 0:
            # V2, IPv6 hosts, the blank tail, nothing written, or bad bytes.
            scanned = scan_record(segment.buffer[:readable], position, check_crc=False)
            if scanned is None or isinstance(scanned, int):
                return True
            total, phy, topic, queue_id, queue_offset, sys_flag, store_ts, view = scanned
            if position + total > stop:
                return False
            append((total, phy, topic, queue_id, queue_offset, sys_flag, store_ts, bytes(view)))
            position += total
            continue
        topic_at = position + _BODY_AT + 1 + body_len
        at = segment.file_from_offset + position
        if total <= 0 or end > readable or topic_at > end:
            raise RecordError(at, f"total size {total} does not fit")
        props_at = topic_at + data[topic_at - 1] + 2
        if props_at > end or props_at + (data[props_at - 2] << 8 | data[props_at - 1]) != end:
            raise RecordError(at, f"fields do not add up to total size {total}")
        if end > stop:
            return False
        topic, props = data[topic_at : props_at - 2], data[props_at:end]
        append((total, phy, topic, queue_id, queue_offset, sys_flag, store_ts, props))
        position = end
    return True
