"""`format("rocketmq-commitlog")`: a store directory read straight from its files, no broker.

    df = spark.read.format("rocketmq-commitlog").option("path", "/var/sidewinder/store").load()
    df = (spark.read.format("rocketmq-commitlog").option("path", store)
          .option("topic", "Orders").load())            # only Orders, through its ConsumeQueues

The schema is the `rocketmq` source's, and rows are built by the same code from the store's own
record decoder, so a message reads the same here as pulled from the broker. Without `topic`,
one task per CommitLog segment; with it, one per range of a queue's ConsumeQueue entries (at
most `maxRecordsPerPartition`, default 100,000) and only that topic's records are decoded.
Executors need the store's files at the same path (a shared volume, or the broker's host).

A live store is read only up to what was flushed: records stored after the checkpoint file's
physicMsgTimestamp (the store time of the last flushed message) are left out, and a record
that does not decode or fails its CRC ends a segment (a write in progress).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import cast

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import MessageQueue
from sidewinder.protocol.record import MessageRecord, RecordError, decode_record
from sidewinder.spark.options import DEFAULT_RECORDS_PER_PARTITION, OptionError
from sidewinder.spark.rows import ROWS_PER_ARROW_BATCH, arrow_batch, arrow_schema, read_schema
from sidewinder.store.checkpoint import StoreCheckpoint
from sidewinder.store.consume_queue import read_queue
from sidewinder.store.verify import commitlog_segments, mapped


class SegmentPart(InputPartition):
    """One CommitLog segment file, every topic."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class QueuePart(InputPartition):
    """ConsumeQueue entries first <= queue offset < end of one queue of the `topic` option."""

    def __init__(self, queue_id: int, first: int, end: int) -> None:
        super().__init__((queue_id, first, end))
        self.queue_id, self.first, self.end = queue_id, first, end


class CommitLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-commitlog"

    def schema(self) -> StructType:
        return read_schema(include_properties=StoreOptions.parse(self.options).include_properties)

    def reader(self, schema: StructType) -> DataSourceReader:
        return CommitLogReader(StoreOptions.parse(self.options), schema)


class StoreOptions:
    def __init__(
        self,
        store: Path,
        commitlog: Path,
        topic: str | None,
        broker_name: str | None,
        include_properties: bool,
        records_per_partition: int,
    ) -> None:
        self.store, self.commitlog, self.topic = store, commitlog, topic
        self.broker_name, self.include_properties = broker_name, include_properties
        self.records_per_partition = records_per_partition

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StoreOptions:
        given = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        root = given.get("path", "").strip()
        if not root:
            raise OptionError("path", "is required: the store directory (storePathRootDir)")
        store = Path(root)
        commitlog = Path(given.get("commitlogpath", "").strip() or store / "commitlog")
        if not commitlog.is_dir():
            raise OptionError("path", f"{commitlog} is not a CommitLog directory")
        include = given.get("includeproperties", "true").strip().lower()
        if include not in ("true", "false"):
            raise OptionError("includeProperties", f"{include!r} is not true or false")
        per_part = given.get("maxrecordsperpartition", str(DEFAULT_RECORDS_PER_PARTITION))
        if not per_part.isdigit() or int(per_part) <= 0:
            raise OptionError("maxRecordsPerPartition", f"{per_part!r} is not a positive number")
        return cls(
            store,
            commitlog,
            given.get("topic", "").strip() or None,
            given.get("brokername", "").strip() or None,
            include == "true",
            int(per_part),
        )


class CommitLogReader(DataSourceReader):
    def __init__(self, options: StoreOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        options = self.options
        if options.topic is None:
            return [SegmentPart(str(p)) for p in commitlog_segments(options.commitlog)]
        queues_dir = options.store / "consumequeue" / options.topic
        if not queues_dir.is_dir():
            raise OptionError("topic", f"the store has no ConsumeQueue of {options.topic}")
        parts: list[InputPartition] = []
        step = options.records_per_partition
        for queue_dir in sorted(queues_dir.iterdir(), key=lambda p: int(p.name)):
            written = [e.queue_offset for e in read_queue(queue_dir) if not e.is_blank]
            if written:
                first, end = written[0], written[-1] + 1
                parts += [
                    QueuePart(int(queue_dir.name), at, min(at + step, end))
                    for at in range(first, end, step)
                ]
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        records = (
            self._segment(partition.path)
            if isinstance(partition, SegmentPart)
            else self._queue_range(cast(QueuePart, partition))
        )
        target = arrow_schema(self.schema)
        pending: list[ReceivedMessage] = []
        for record in records:
            queue = MessageQueue(record.topic, self.options.broker_name or "", record.queue_id)
            pending.append(ReceivedMessage.of(queue, record))
            if len(pending) >= ROWS_PER_ARROW_BATCH:
                yield arrow_batch(target, self.options.broker_name, pending)
                pending = []
        if pending:
            yield arrow_batch(target, self.options.broker_name, pending)

    def _flushed_until_ms(self) -> int:
        checkpoint = self.options.store / "checkpoint"
        if not checkpoint.exists():
            return 2**63 - 1  # a CommitLog alone (copied out of a store): all of it
        return StoreCheckpoint.read(checkpoint).physic_msg_timestamp

    def _segment(self, path: str) -> Iterator[MessageRecord]:
        flushed_ms = self._flushed_until_ms()
        with mapped(Path(path)) as view:
            at = 0
            while at < len(view):
                try:
                    record = decode_record(view, at, check_crc=True)
                except RecordError:
                    return  # a record being written
                if not isinstance(record, MessageRecord) or record.store_timestamp > flushed_ms:
                    return
                yield record
                at += record.total_size

    def _queue_range(self, part: QueuePart) -> Iterator[MessageRecord]:
        assert isinstance(part, QueuePart) and self.options.topic is not None
        flushed_ms = self._flushed_until_ms()
        segments = commitlog_segments(self.options.commitlog)
        bases = [int(p.name) for p in segments]
        segment_size = segments[0].stat().st_size
        queue_dir = self.options.store / "consumequeue" / self.options.topic / str(part.queue_id)
        entries = (e for e in read_queue(queue_dir) if part.first <= e.queue_offset < part.end)
        opened: dict[int, memoryview] = {}
        with ExitStack() as stack:
            for entry in entries:
                base = entry.phy_offset - entry.phy_offset % segment_size
                if entry.is_blank or base not in bases:
                    continue  # a pre-blank slot, or its segment was cleaned up
                if base not in opened:
                    opened[base] = stack.enter_context(mapped(segments[bases.index(base)]))
                try:
                    record = decode_record(opened[base], entry.phy_offset - base, check_crc=True)
                except RecordError:
                    return
                if not isinstance(record, MessageRecord) or record.store_timestamp > flushed_ms:
                    return
                yield record
