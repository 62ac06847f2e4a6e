"""Reput: walk the CommitLog from where dispatch stopped and feed its records to the dispatchers.

    reput = Reput(commit_log, [ConsumeQueueDispatcher(...), IndexDispatcher(...)])
    grown = reput.dispatch_until(limit)   # {(topic, queue id): new max queue offset}

Synchronous (it runs on the store's dispatch thread, and inline during recovery). It remembers
how far it got (`offset`, always a record start or a segment's blank tail) and the store
timestamp of the last record it dispatched, which the ConsumeQueue checkpoint records.

A round scans up to DISPATCH_BATCH records of one segment (dispatch_scan: per queue the packed
entries, the index keys hashed; natively without the GIL) and hands the batch to each
dispatcher: each first works out what it writes and allocates the room (`prepare`), then all
write. The rest goes record by record (`dispatch`), read by the reference reader here
(`_read_segment`): a batch that needs a new file or finds no room, so that a full disk stops
dispatch exactly at the first record it could not write; and a record the scan leaves to it
(a segment's blank tail, bytes that are no record, an odd message), one per round.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from sidewinder.protocol.record import HOSTS_V6_MASK, MESSAGE_MAGIC, RecordError, scan_record
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.dispatch_scan import DEFERRED, EXHAUSTED, DispatchBatch, scan_segment
from sidewinder.store.dispatchers import CommitLogDispatcher, DispatchRecord, scan_rules
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
        self._rules = scan_rules(self.dispatchers)
        self.offset = offset
        self.last_store_timestamp = 0
        self.dispatched = 0  # records, ever; the ConsumeQueue flusher compares it
        # Set when a queue or index file could not be allocated: dispatch stopped before the
        # record at `offset` and tries it again next time (dispatch is idempotent).
        self.blocked: DiskFullError | None = None

    def dispatch_until(self, limit: int, max_records: int = DISPATCH_BATCH) -> QueueGrowth:
        """Dispatch records from `offset` up to `limit` (at most `max_records`); queues grown."""
        grown: QueueGrowth = {}
        while max_records > 0:
            before = self.offset
            batch = self.scan(limit, max_records)
            if batch is None:
                # A record the scan leaves to the reference reader: alone, then scanning goes
                # on (a stream with many such records still dispatches in rounds).
                grown.update(self._record_by_record(limit, 1))
                max_records -= 1
            else:
                grown.update(self._dispatch_batch(batch, limit))
                max_records -= batch.count
                if not batch.deferred:
                    break
            if self.offset == before or self.blocked is not None:
                break
        return grown

    def dispatch_inline(self, limit: int, max_records: int = DISPATCH_BATCH) -> QueueGrowth | None:
        """One scanned batch from `offset` up to `limit`, dispatched only if that makes no file,
        allocates no room and needs no record-by-record reading (so that it may run on the event
        loop: a few records cost less there than a hand-off to the dispatch thread); None, with
        nothing written, when it would, or when there is nothing to scan."""
        batch = self.scan(limit, max_records)
        if batch is None or not batch.count:
            return None
        if not all(d.fits(batch) for d in self.dispatchers):
            return None
        if not all(d.prepare(batch) for d in self.dispatchers):
            return None
        return self._write_batch(batch)

    def _dispatch_batch(self, batch: DispatchBatch, limit: int) -> QueueGrowth:
        if not batch.count:
            return {}
        try:
            prepared = all(d.prepare(batch) for d in self.dispatchers)
        except DiskFullError:
            prepared = False  # record by record then, to stop at exactly the one without room
        if not prepared:
            return self._record_by_record(limit, batch.count)
        return self._write_batch(batch)

    def _write_batch(self, batch: DispatchBatch) -> QueueGrowth:
        for dispatcher in self.dispatchers:
            dispatcher.write_prepared()
        self.blocked = None
        self.offset = batch.end
        self.last_store_timestamp = batch.last_store_timestamp
        self.dispatched += batch.count
        return {(run[0], run[1]): run[2] for run in batch.queues}

    def scan(self, limit: int, max_records: int) -> DispatchBatch | None:
        """The next batch (empty when no record from `offset` ends by `limit`), or None when
        the next record is one the scan leaves to the reference reader."""
        for segment in self.commit_log.files.files:  # a snapshot: cleanup replaces the list
            start = segment.file_from_offset
            position = max(self.offset - start, 0)
            readable = segment.read_position
            if position >= readable:
                continue  # dispatched to its end (or past: a blank tail)
            scanned = scan_segment(
                segment.buffer, position, limit - start, readable, max_records, self._rules
            )
            if scanned[2] == 0 and scanned[0] == DEFERRED:
                return None
            if scanned[2] == 0 and scanned[0] == EXHAUSTED:
                continue
            return DispatchBatch.of(scanned, start, position)
        return DispatchBatch(self.offset, self.offset, 0, 0, [], b"")

    def _record_by_record(self, limit: int, max_records: int) -> QueueGrowth:
        """Up to `max_records` records from `offset`, read by the reference reader and given
        to each dispatcher one by one."""
        records, exhausted = self.read(limit, max_records)
        dispatches = [d.dispatch for d in self.dispatchers]
        done = 0
        try:
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
        for record in records[:done]:
            grown[(record[2], record[3])] = record[4] + 1
        return grown

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

    def dispatch_all(
        self, progress: Callable[[int], None] | None = None, limit: int | None = None
    ) -> None:
        """Dispatch everything up to `limit`, by default the CommitLog's end (recovery,
        shutdown)."""
        if limit is None:
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
    data = segment.mapping  # slicing the map gives bytes at once
    while position < readable:
        if len(records) >= max_records or position >= stop:
            # At the limit: what follows may be a record still being written (a slave's tail).
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
