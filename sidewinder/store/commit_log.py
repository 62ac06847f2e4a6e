"""The CommitLog: every message of every topic, appended to rolling mmap segments.

Synchronous and single-writer: the async MessageStore serialises puts and runs flushes in an
executor. Appends assign each message the next offset of its (topic, queue) and write it at the
CommitLog's end; a message that does not fit a segment's tail (plus the 8-byte blank marker)
closes the segment with a blank record and goes to the next one, so no record straddles files.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from sidewinder.protocol.batch_record import BatchToStore, encode_batch
from sidewinder.protocol.message import encode_offset_msg_id
from sidewinder.protocol.record import (
    BLANK_MAGIC,
    BORNHOST_V6_BIT,
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageRecord,
    MessageSysFlag,
    MessageToStore,
    RecordError,
    decode_record,
    encode_blank,
    encode_record,
    scan_record,
)
from sidewinder.store.mapped_file import DiskFullError, MappedFile
from sidewinder.store.mapped_file_queue import MappedFileQueue
from sidewinder.store.message_run import MessageRun, encode_run
from sidewinder.store.transient_pool import TransientStorePool


class AppendStatus(Enum):
    PUT_OK = "PUT_OK"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # too big, or properties too long


# Not frozen: a frozen dataclass's __init__ costs a microsecond per put.
@dataclass(slots=True)
class AppendResult:
    status: AppendStatus
    phy_offset: int = -1
    size: int = 0
    queue_offset: int = -1
    count: int = 0
    store_timestamp: int = 0
    phy_offsets: tuple[int, ...] = ()  # of each message, for its offsetMsgId
    store_host: Host | None = None
    remark: str = ""

    @property
    def msg_ids(self) -> tuple[str, ...]:
        """offsetMsgId of each message: store host + physical offset (made on demand)."""
        host = self.store_host
        if host is None:
            return ()
        # The host's hex once, then 16 hex digits per offset (a batch has hundreds).
        prefix = encode_offset_msg_id(host.address, host.port, 0)[:-16]
        return tuple(f"{prefix}{phy:016X}" for phy in self.phy_offsets)


QueueKey = tuple[str, int]
# CommitLog.put_encoded's writer: (buffer, at, room, phy, stamp, queue_offsets) ->
# (bytes used, size of the record that did not fit or 0, [(queue key, offset before)]).
RecordWriter = Callable[
    [memoryview, int, int, int, int, dict[QueueKey, int]],
    tuple[int, int, list[tuple[QueueKey, int]]],
]
_UNCOUNTED = (int(MessageSysFlag.TRANSACTION_PREPARED), int(MessageSysFlag.TRANSACTION_ROLLBACK))
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SYSFLAG_AT = 36  # after TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET
_BORNHOST_AT = 48  # after SYSFLAG and BORNTIMESTAMP
_STAMP_END_V6 = _BORNHOST_AT + 20 + 8
_BLANK_HEADER = struct.Struct(">ii")


def _blank_tail_at(view: memoryview, position: int, segment_size: int) -> bool:
    """Whether the blank record that closes a segment starts at `position`."""
    if position + _BLANK_HEADER.size > len(view):
        return False
    total, magic = _BLANK_HEADER.unpack_from(view, position)
    return magic == BLANK_MAGIC and position + total == segment_size


_MIN_STAGING = 1 << 20

# RocketMQ 5 counts maxMessageSize against a message's body and leaves a record this much more
# for its header and properties (MessageExtEncoder); 4.x counted the whole record. A client of
# either sends bodies up to maxMessageSize, so the 5.x rule takes what both send.
RECORD_ALLOWANCE = 64 << 10


_SIZE_AND_MAGIC = struct.Struct(">ii")


class ReplicationError(ValueError):
    """Bytes from a master that do not continue this CommitLog where it ends."""


class CommitLog:
    def __init__(
        self,
        directory: Path,
        *,
        segment_size: int,
        max_message_size: int,
        store_host: Host,
        pool: TransientStorePool | None = None,
    ) -> None:
        self.files = MappedFileQueue(directory, segment_size, pool)
        self.max_message_size = max_message_size
        self.max_record_size = min(max_message_size + RECORD_ALLOWANCE, _I32_MAX)
        self.store_host = store_host
        # The next queue offset of every (topic, queue): RocketMQ's topicQueueTable.
        self.queue_offsets: dict[QueueKey, int] = {}
        self.last_store_timestamp = 0
        # Appends are encoded here and written into the segment with one pwrite per put (see
        # MappedFile.write_at); a batch, at most max_record_size, always fits at once.
        self._staging = memoryview(bytearray(max(self.max_record_size, _MIN_STAGING)))

    # -- writing --------------------------------------------------------------------------------
    def put(self, message: MessageToStore, now_ms: int | None = None) -> AppendResult:
        """Append one message (put_many's work for one, checked first)."""
        problem = self.illegal(message)
        if problem:
            return AppendResult(AppendStatus.MESSAGE_ILLEGAL, remark=problem)
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        phys, queue_offsets, error = self.put_many((message,), stamp)
        if error is not None:
            raise error
        return AppendResult(
            AppendStatus.PUT_OK,
            phys[0],
            message.record_size,
            queue_offsets[0],
            1,
            stamp,
            (phys[0],),
            self.store_host,
        )

    def put_batch(
        self, messages: Sequence[MessageToStore], now_ms: int | None = None
    ) -> AppendResult:
        """Append messages of one (topic, queue) as consecutive records and queue offsets."""
        if not messages:
            raise ValueError("an empty batch")
        first = messages[0]
        key = (first.topic_name, first.queue_id)
        total = 0
        for message in messages:
            if message.queue_id != first.queue_id or message.topic != first.topic:
                raise ValueError("a batch goes to one topic and queue")
            problem = self.illegal(message)
            if problem:
                return AppendResult(AppendStatus.MESSAGE_ILLEGAL, remark=problem)
            total += message.record_size
        if len(messages) > 1:
            problem = self.illegal_batch(total)
            if problem:
                return AppendResult(AppendStatus.MESSAGE_ILLEGAL, remark=problem)
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        target = self._file_with_room(total)
        queue_offset = first_queue_offset = self.queue_offsets.get(key, 0)
        start = position = target.wrote_position
        base = target.file_from_offset
        buffer, shift = self._stage(target, start)
        phys = []
        try:
            for n, message in enumerate(messages):
                # Half and rolled-back transaction messages take no queue offset (doAppend).
                counted = message.stored_sys_flag & TRANSACTION_TYPE_MASK not in _UNCOUNTED
                if n == 0 and not counted:
                    first_queue_offset = 0  # a half message reports 0, as RocketMQ does
                phys.append(base + position)
                position += encode_record(
                    message,
                    buffer,
                    position - shift,
                    queue_offset=queue_offset if counted else 0,
                    phy_offset=base + position,
                    store_timestamp=stamp,
                )
                if counted:
                    queue_offset += 1
        except BaseException:
            # Never leave whole-looking records past the end: recovery would take them back.
            buffer[start - shift : position - shift] = bytes(position - start)
            raise
        self._publish(target, start, position)
        self.queue_offsets[key] = queue_offset
        # After wrote_position: a flush that reads this stamp first covers every record up to it.
        self.last_store_timestamp = stamp
        return AppendResult(
            AppendStatus.PUT_OK,
            base + start,
            total,
            first_queue_offset,
            len(messages),
            stamp,
            tuple(phys),
            self.store_host,
        )

    def put_many(
        self,
        messages: Sequence[MessageToStore | BatchToStore | MessageRun],
        now_ms: int | None = None,
    ) -> tuple[list[int], list[int], DiskFullError | None]:
        """Append messages of any topics and queues, each its own record, in order, all with
        one store timestamp: the sends of one received chunk. The caller has checked each with
        `illegal` (a MessageRun with `illegal_run`). A BatchToStore or MessageRun is one item:
        its records, in one segment, take consecutive queue offsets; their physical offsets
        are set on it. Returns the physical and queue offsets of the items appended (a batch's
        first); when a new segment cannot be made, the error, and the rest are not appended."""
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        phys: list[int] = []
        offsets: list[int] = []
        queue_offsets = self.queue_offsets
        try:
            target = self.files.writable_file()
        except DiskFullError as exc:
            return phys, offsets, exc
        base = target.file_from_offset
        start = position = target.wrote_position
        limit = target.size - END_FILE_MIN_BLANK_LENGTH
        buffer, shift = self._stage(target, start)
        room = shift + len(buffer)  # where the staging buffer ends, as a position in the file
        published = 0  # how many of `phys` are in the file
        error: DiskFullError | None = None
        try:
            for message in messages:
                size = message.record_size
                if position + size > limit or position + size > room:
                    self._publish(target, start, position)
                    published = len(phys)
                    if position + size > limit:
                        target = self._file_with_room(size)
                        base = target.file_from_offset
                        position = target.wrote_position
                        limit = target.size - END_FILE_MIN_BLANK_LENGTH
                    start = position
                    buffer, shift = self._stage(target, start)
                    room = shift + len(buffer)
                key = (message.topic_name, message.queue_id)
                queue_offset = queue_offsets.get(key, 0)
                counted = message.stored_sys_flag & TRANSACTION_TYPE_MASK not in _UNCOUNTED
                try:
                    if isinstance(message, MessageRun):
                        message.phys = encode_run(
                            message,
                            buffer,
                            position - shift,
                            queue_offset=queue_offset,
                            phy_offset=base + position,
                            store_timestamp=stamp,
                            counted=counted,
                        )
                    elif isinstance(message, BatchToStore):
                        message.phys = encode_batch(
                            message,
                            buffer,
                            position - shift,
                            queue_offset=queue_offset,
                            phy_offset=base + position,
                            store_timestamp=stamp,
                        )
                    else:
                        encode_record(
                            message,
                            buffer,
                            position - shift,
                            queue_offset=queue_offset if counted else 0,
                            phy_offset=base + position,
                            store_timestamp=stamp,
                        )
                except BaseException:
                    # Never leave a whole-looking record past the end: recovery would take it.
                    buffer[position - shift : position - shift + size] = bytes(size)
                    raise
                phys.append(base + position)
                offsets.append(queue_offset if counted else 0)
                if counted:
                    queue_offsets[key] = queue_offset + message.count
                position += size
        except DiskFullError as exc:
            error = exc
        except BaseException:
            self._publish_or_forget(target, start, position, messages, phys, offsets, published)
            self._stamped(phys, stamp)
            raise
        self._publish_or_forget(target, start, position, messages, phys, offsets, published)
        self._stamped(phys, stamp)
        return phys, offsets, error

    def put_encoded(
        self, write: RecordWriter, now_ms: int
    ) -> tuple[int, int, DiskFullError | None]:
        """Records a writer encodes straight into the staging window, in rounds:
        `write(buffer, at, room, phy, stamp, queue_offsets)` writes whole records into
        `buffer[at:at + room]` (`phy`: the physical offset of `buffer[at]`), takes their queue
        offsets from `queue_offsets` and returns (bytes used, the size of the next record when
        it did not fit or 0, the queue offsets it changed with their values before). Each round
        is put into the file; a record that did not fit gets a new window (a new segment when
        this one is full). Returns the first physical offset written, the end, and the error
        when a new segment cannot be made (the writer is not called again)."""
        first = end = -1
        try:
            target = self.files.writable_file()
        except DiskFullError as exc:
            return first, end, exc
        error: DiskFullError | None = None
        while True:
            position = target.wrote_position
            limit = target.size - END_FILE_MIN_BLANK_LENGTH
            buffer, shift = self._stage(target, position)
            room = min(limit, shift + len(buffer)) - position
            base = target.file_from_offset + position
            used, need, touched = write(
                buffer, position - shift, room, base, now_ms, self.queue_offsets
            )
            try:
                self._publish(target, position, position + used)
            except BaseException:
                for key, offset in touched:
                    self.queue_offsets[key] = offset
                raise
            if used:
                first = base if first < 0 else first
                end = base + used
                self.last_store_timestamp = now_ms
            if not need:
                break
            if position + used + need > limit:
                try:
                    target = self._file_with_room(need)
                except DiskFullError as exc:
                    error = exc
                    break
            elif not used:
                break  # a window as big as the staging buffer: the writer cannot go on
        return first, end, error

    def _stage(self, target: MappedFile, position: int) -> tuple[memoryview, int]:
        """Where appends to `target` from `position` are encoded: a buffer, and the position
        its index 0 stands for. A segment with a TransientStorePool buffer takes them there."""
        if target.pooled:
            return target.write_buffer, 0
        return self._staging, position

    def _publish(self, target: MappedFile, start: int, end: int) -> None:
        """Put the appends staged for `[start, end)` of `target` into the file, for readers."""
        if end > start and not target.pooled:
            target.write_at(self._staging[: end - start], start)
        target.wrote_position = end

    def _publish_or_forget(
        self,
        target: MappedFile,
        start: int,
        end: int,
        messages: Sequence[MessageToStore | BatchToStore | MessageRun],
        phys: list[int],
        offsets: list[int],
        published: int,
    ) -> None:
        """Publish put_many's last staged appends; if the write fails (an I/O error), give
        their queue offsets back and drop them from `phys` / `offsets`, then raise."""
        try:
            self._publish(target, start, end)
        except BaseException:
            taken = zip(messages[published:], offsets[published:], strict=False)
            for message, offset in reversed(list(taken)):
                if message.stored_sys_flag & TRANSACTION_TYPE_MASK not in _UNCOUNTED:
                    self.queue_offsets[(message.topic_name, message.queue_id)] = offset
            del phys[published:], offsets[published:]
            raise

    def _stamped(self, phys: list[int], stamp: int) -> None:
        # After wrote_position: a flush that reads this stamp first covers every record up to it.
        if phys:
            self.last_store_timestamp = stamp

    def illegal_batch(self, total: int) -> str:
        """Why a batch whose records total `total` bytes cannot be stored ("" when it can)."""
        if total > self.max_record_size:
            return (
                f"batch of {total} bytes is larger than maxMessageSize {self.max_message_size} "
                f"and {RECORD_ALLOWANCE} bytes for its records' headers"
            )
        if total + END_FILE_MIN_BLANK_LENGTH > self.files.file_size:
            return (
                f"batch of {total} bytes cannot fit a mappedFileSizeCommitLog "
                f"{self.files.file_size} segment"
            )
        return ""

    def illegal_run(self, messages: Sequence[MessageToStore]) -> str:
        """Why the CommitLog cannot take `messages` as one run of records ("" when it can)."""
        for message in messages:
            problem = self.illegal(message)
            if problem:
                return problem
        if len(messages) > 1:
            return self.illegal_batch(sum(message.record_size for message in messages))
        return ""

    def illegal(self, message: MessageToStore) -> str:
        """Why the CommitLog cannot take `message` ("" when it can)."""
        size = message.record_size
        if (
            len(message.topic) <= MAX_TOPIC_LENGTH_V1
            and _I32_MIN <= message.queue_id <= _I32_MAX
            and _I32_MIN <= message.flag <= _I32_MAX
            and _I32_MIN <= message.sys_flag <= _I32_MAX
            and _I32_MIN <= message.reconsume_times <= _I32_MAX
            and _I64_MIN <= message.born_timestamp <= _I64_MAX
            and _I64_MIN <= message.prepared_transaction_offset <= _I64_MAX
            and len(message.properties) <= MAX_PROPERTIES_LENGTH
            and size + END_FILE_MIN_BLANK_LENGTH <= self.files.file_size
            and size <= self.max_record_size
            and len(message.body) <= self.max_message_size
        ):
            return ""  # the usual case, in one expression
        return self._explain_illegal(message)

    def _explain_illegal(self, message: MessageToStore) -> str:
        if len(message.topic) > MAX_TOPIC_LENGTH_V1:
            # 4.9 refuses these, and its recovery stops at the 5.x record format they need.
            return f"topic of {len(message.topic)} bytes is longer than {MAX_TOPIC_LENGTH_V1}"
        for name, value, bits in (
            ("queueId", message.queue_id, 32),
            ("flag", message.flag, 32),
            ("sysFlag", message.sys_flag, 32),
            ("reconsumeTimes", message.reconsume_times, 32),
            ("bornTimestamp", message.born_timestamp, 64),
            ("preparedTransactionOffset", message.prepared_transaction_offset, 64),
        ):
            if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                return f"{name} {value} does not fit a signed {bits}-bit field"
        # RocketMQ checks the properties' length first (PROPERTIES_SIZE_EXCEEDED).
        if len(message.properties) > MAX_PROPERTIES_LENGTH:
            return f"properties of {len(message.properties)} bytes exceed {MAX_PROPERTIES_LENGTH}"
        if message.size() + END_FILE_MIN_BLANK_LENGTH > self.files.file_size:
            # RocketMQ accepts such a configuration and then fails these puts; say why.
            return (
                f"message of {message.size()} bytes cannot fit a mappedFileSizeCommitLog "
                f"{self.files.file_size} segment"
            )
        if len(message.body) > self.max_message_size:
            return (
                f"body of {len(message.body)} bytes is larger than maxMessageSize "
                f"{self.max_message_size}"
            )
        if message.size() > self.max_record_size:
            return (
                f"message of {message.size()} bytes is larger than maxMessageSize "
                f"{self.max_message_size} and {RECORD_ALLOWANCE} bytes for its header and "
                "properties"
            )
        return ""

    def _file_with_room(self, size: int) -> MappedFile:
        current = self.files.writable_file()
        if size + END_FILE_MIN_BLANK_LENGTH <= current.remaining:
            return current
        # Close this segment with a blank record over all that is left, as RocketMQ does.
        start = current.wrote_position
        buffer, shift = self._stage(current, start)
        encode_blank(buffer, start - shift, current.remaining)
        self._publish(current, start, start + END_FILE_MIN_BLANK_LENGTH)
        current.wrote_position = current.size
        return self.files.writable_file()

    # -- reading --------------------------------------------------------------------------------
    def record_at(self, phy_offset: int, *, check_crc: bool = False) -> MessageRecord | None:
        """The message starting at `phy_offset` (a view into the map), or None."""
        segment = self.files.find(phy_offset)
        if segment is None or phy_offset >= segment.end_offset:
            return None
        try:
            record = decode_record(
                segment.buffer[: segment.read_position],
                phy_offset - segment.file_from_offset,
                check_crc=check_crc,
            )
        except RecordError:
            return None  # not a record start (a stale index entry, a wrong offset)
        return record if isinstance(record, MessageRecord) else None

    def records(self, from_offset: int = 0) -> Iterator[MessageRecord]:
        """Every message from `from_offset` (a record start) to the end, in order."""
        for segment in self.files.files:  # a snapshot: cleanup replaces the list
            if segment.file_from_offset + segment.size <= from_offset:
                continue
            position = max(from_offset - segment.file_from_offset, 0)
            readable = segment.read_position
            written = segment.buffer[:readable]
            while position < readable:
                record = decode_record(written, position)
                if not isinstance(record, MessageRecord):
                    break
                yield record
                position += record.total_size

    # -- lifecycle ------------------------------------------------------------------------------
    def load(self) -> None:
        self.files.load()

    def recover(self, from_offset: int | None = None, *, check_crc: bool = True) -> int:
        """Find the end of the valid records, truncate what follows; returns the end offset.

        Walks the segments from the one holding `from_offset` (a segment start; default the
        first); those before it are taken as whole. The log ends at the first record that does not
        decode (a torn or corrupt tail), whose PHYSICALOFFSET is not where it lies, or whose
        queue offset breaks its queue's run (no CRC covers that field). Queue offsets are
        rebuilt from the records walked (the store replaces them with its ConsumeQueues' ends
        when it walked only a part).
        """
        self._recovered_offsets: dict[tuple[bytes, int], int] = {}
        start = self.files.min_offset if from_offset is None else from_offset
        end = self.files.min_offset
        for segment in self.files.files:
            if segment.file_from_offset + segment.size <= start:
                end = segment.file_from_offset + segment.size
                continue
            position = self._valid_prefix(segment, check_crc)
            end = segment.file_from_offset + position
            if position < segment.size:
                break
        self.queue_offsets = {
            (topic.decode(), queue): next_offset
            for (topic, queue), next_offset in self._recovered_offsets.items()
        }
        # Stale records beyond the cut are at most one message apart from each other.
        self.files.set_positions(end, quiet_window=2 * self.max_message_size)
        # What was found may sit only in the page cache (a process crash keeps it there); it
        # now counts as durable, so make it so, zeroed cut tails included.
        self.files.sync_all()
        return end

    def _valid_prefix(self, segment: MappedFile, check_crc: bool) -> int:
        """Bytes of `segment` holding valid records (its size when a blank record ends it)."""
        position = 0
        view = segment.buffer[: segment.data_end]
        base = segment.file_from_offset
        offsets = self._recovered_offsets
        while True:
            try:
                scanned = scan_record(view, position, check_crc=check_crc)
            except RecordError:
                # A blank tail reaching past a bounded view (only its 8-byte header was
                # written; the rest is a hole) still ends the segment whole.
                return segment.size if _blank_tail_at(view, position, segment.size) else position
            if scanned is None:
                return position
            if isinstance(scanned, int):
                return segment.size  # the blank tail
            total, phy, topic, queue_id, queue_offset, sys_flag, _, _ = scanned
            if phy != base + position:
                return position
            position += total
            if sys_flag & TRANSACTION_TYPE_MASK in _UNCOUNTED:
                continue  # takes no queue offset
            key = (topic, queue_id)
            expected = offsets.get(key)
            # A queue restarts at 0 when its topic is deleted and created again (4.9's
            # cleanUnusedTopic); any other break means this record's header is damaged.
            if expected is not None and queue_offset not in (expected, 0):
                return position - total
            offsets[key] = queue_offset + 1

    def store_timestamp_at(self, phy_offset: int) -> int:
        """STORETIMESTAMP of the record at `phy_offset` without decoding it; -1 if none."""
        segment = self.files.find(phy_offset)
        if segment is None or phy_offset + _STAMP_END_V6 > segment.end_offset:
            return -1  # no record there (every record is longer than its fixed fields)
        at = phy_offset - segment.file_from_offset
        (sys_flag,) = _INT.unpack_from(segment.buffer, at + _SYSFLAG_AT)
        born_host = 20 if sys_flag & BORNHOST_V6_BIT else 8
        (stamp,) = _LONG.unpack_from(segment.buffer, at + _BORNHOST_AT + born_host)
        return int(stamp)

    def first_store_timestamp(self, segment: MappedFile) -> int:
        """STORETIMESTAMP of a segment's first message; 0 when it holds none."""
        try:
            record = decode_record(segment.buffer[: segment.data_end], 0)
        except RecordError:
            return 0
        return record.store_timestamp if isinstance(record, MessageRecord) else 0

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    # -- replication ----------------------------------------------------------------------------
    def append_replicated(self, offset: int, data: bytes) -> None:
        """Write CommitLog bytes a master sent, at `offset`, which must be where this log ends
        (RocketMQ's appendData on a slave). The bytes need not end on a record: a master cuts
        its frames anywhere within a segment, never across one. An empty log starts at the
        segment holding `offset`, as a new slave's starts at its master's last segment."""
        size = self.files.file_size
        if self.files.files and offset != self.max_offset:
            raise ReplicationError(
                f"master sent offset {offset}; this CommitLog ends at {self.max_offset}"
            )
        target = self.files.writable_file(start_offset=offset - offset % size)
        position = offset - target.file_from_offset
        if position != target.wrote_position or position + len(data) > size:
            raise ReplicationError(
                f"master sent {len(data)} bytes at {offset}: segment {target.file_from_offset} "
                f"has {target.wrote_position} written of {size}"
            )
        if data:
            target.write_at(memoryview(data), position)
        target.wrote_position = position + len(data)

    def whole_records_end(self, from_offset: int) -> int:
        """The end of the whole records from `from_offset` (a record start) in what was written:
        a slave's readers see no further than that, since the tail may be a part of a record.
        A blank record ends its segment once the segment is written to its end."""
        offset = from_offset
        while True:
            segment = self.files.find(offset)
            if segment is None:
                return offset
            position = offset - segment.file_from_offset
            written = segment.read_position
            if written - position < 8:
                return offset
            total, magic = _SIZE_AND_MAGIC.unpack_from(segment.buffer, position)
            if magic == BLANK_MAGIC:
                if written < segment.size:
                    return offset
                offset = segment.file_from_offset + segment.size
                continue
            if total <= 0 or position + total > written:
                return offset
            offset += total

    def flush(self) -> int:
        """Make all appends durable; returns the flushed offset. Blocking: run in an executor."""
        return self.files.flush()

    def commit(self) -> int:
        """With a TransientStorePool: move appends into the files, where readers see them."""
        return self.files.commit()

    def close(self) -> None:
        self.files.close()
