"""`format("rocketmq")`: topics read through the name server and brokers, batch and streaming.

    df = (spark.read.format("rocketmq")
          .option("namesrvAddr", "127.0.0.1:9876").option("subscribe", "Orders")
          .option("startingOffsets", "earliest").load())

    query = (spark.readStream.format("rocketmq")
             .option("namesrvAddr", "127.0.0.1:9876").option("subscribe", "Orders").load()
             .writeStream.format("parquet").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start(out))

One input partition per queue range (split at maxRecordsPerPartition); a task pulls its range
and hands Spark Arrow record batches. Streaming offsets are per (topic, broker, queue), kept by
Spark in the checkpoint; a restarted query re-reads exactly the range its checkpoint logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from sidewinder.client.route_cache import MessageQueue
from sidewinder.protocol.subscription import Subscription
from sidewinder.spark.cluster import DataLossError, shared_cluster
from sidewinder.spark.options import ReadOptions
from sidewinder.spark.planning import (
    QueueOffsets,
    discover_queues,
    limit_rows,
    offsets_from_json,
    offsets_json,
    resolve,
    split_ranges,
)
from sidewinder.spark.rows import ROWS_PER_ARROW_BATCH, arrow_batch, arrow_schema, read_schema
from sidewinder.spark.sink import batch_writer, stream_writer

try:  # admission control and AvailableNow arrived in pyspark 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - pyspark 4.0/4.1: no rate limits, Trigger.Once-like

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


log = logging.getLogger(__name__)
# An idle query with the default trigger asks for the latest offsets ~80 times a second; the
# queues' max offsets are reused for this long instead of asking the broker each time.
LATEST_CACHE_S = 0.2


class QueueRange(InputPartition):
    """Offsets start <= offset < end of one queue: what one task reads."""

    def __init__(self, topic: str, broker_name: str, queue_id: int, start: int, end: int) -> None:
        super().__init__((topic, broker_name, queue_id, start, end))
        self.topic, self.broker_name, self.queue_id = topic, broker_name, queue_id
        self.start, self.end = start, end


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        # Parsed here, while Spark analyses the query: a bad option fails before any task runs.
        # Whether the query streams is not known yet; reader() and streamReader() check that.
        parsed = ReadOptions.parse(self.options, stream=None)
        return read_schema(include_properties=parsed.include_properties)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(ReadOptions.parse(self.options, stream=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(ReadOptions.parse(self.options, stream=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return stream_writer(self.options, schema, overwrite)


def read_range(options: ReadOptions, schema: StructType, part: QueueRange) -> Iterator[Any]:
    """A task's rows: the range pulled in order, as Arrow batches of the read schema."""
    cluster = shared_cluster(options.namesrv_addr, options.credentials, options.tls)
    queue = MessageQueue(part.topic, part.broker_name, part.queue_id)
    subscription = Subscription.of(part.topic, options.sub_expression)
    target = arrow_schema(schema)
    pending: list[Any] = []
    for messages in cluster.pull_range(
        queue,
        part.start,
        part.end,
        subscription,
        batch=options.pull_batch_size,
        fail_on_data_loss=options.fail_on_data_loss,
    ):
        pending += messages
        if len(pending) >= ROWS_PER_ARROW_BATCH:
            yield arrow_batch(target, part.broker_name, pending)
            pending = []
    if pending:
        yield arrow_batch(target, part.broker_name, pending)


def _partitions(
    starts: QueueOffsets, ends: QueueOffsets, max_records: int | None
) -> list[QueueRange]:
    return [
        QueueRange(q.topic, q.broker_name, q.queue_id, start, end)
        for q, start, end in split_ranges(starts, ends, max_records)
    ]


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[QueueRange]:
        options = self.options
        cluster = shared_cluster(options.namesrv_addr, options.credentials, options.tls)
        queues = discover_queues(cluster, options)
        starts = resolve(
            cluster,
            options.starting,
            queues,
            "startingOffsets",
            fail_on_data_loss=options.fail_on_data_loss,
        )
        assert options.ending is not None
        ends = resolve(cluster, options.ending, queues, "endingOffsets", fail_on_data_loss=True)
        return _partitions(starts, ends, options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        yield from read_range(self.options, self.schema, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: one long-lived instance per query run; read() runs on a pickled copy."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._available_now: QueueOffsets | None = None
        self._latest: QueueOffsets = {}
        self._latest_at = 0.0
        self._reported: dict[str, Any] | None = None

    def _queues(self) -> list[MessageQueue]:
        return discover_queues(
            shared_cluster(self.options.namesrv_addr, self.options.credentials, self.options.tls),
            self.options,
        )

    def _fetch_latest(self) -> QueueOffsets:
        now = time.monotonic()
        if not self._latest or now - self._latest_at > LATEST_CACHE_S:
            cluster = shared_cluster(
                self.options.namesrv_addr, self.options.credentials, self.options.tls
            )
            queues = self._queues()
            self._latest = {q: cluster.bounds(q)[1] for q in queues}
            self._latest_at = now
        return self._latest

    def initialOffset(self) -> dict[str, Any]:
        options = self.options
        cluster = shared_cluster(options.namesrv_addr, options.credentials, options.tls)
        starts = resolve(
            cluster,
            options.starting,
            self._queues(),
            "startingOffsets",
            fail_on_data_loss=options.fail_on_data_loss,
        )
        return offsets_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # Everything present now and nothing after: the run stops once this is read.
        self._latest_at = 0.0
        self._available_now = dict(self._fetch_latest())

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        latest = dict(self._available_now or self._fetch_latest())
        if start is None:  # pyspark 4.0/4.1 ask without a start: no admission control
            return offsets_json(latest)
        self._report_progress(start)
        begun = offsets_from_json(start)
        behind = self._queues_gone_back(begun, latest)
        for queue, offset in begun.items():  # otherwise never move a queue backwards
            if queue not in behind:
                latest[queue] = max(latest.get(queue, offset), offset)
        max_rows = getattr(limit, "max_rows", None) if isinstance(limit, ReadMaxRows) else None
        if max_rows:
            from_start = {q: 0 if q in behind else offset for q, offset in begun.items()}
            latest = limit_rows(from_start, latest, max_rows)
        return offsets_json(latest)

    def _queues_gone_back(self, begun: QueueOffsets, latest: QueueOffsets) -> set[MessageQueue]:
        """Queues whose max offset is now below where the query is (the topic was deleted and
        made again): data loss. With failOnDataLoss=false they are read from their start."""
        behind = {q for q, offset in begun.items() if q in latest and latest[q] < offset}
        if behind:
            named = ", ".join(
                f"{q.topic} {q.broker_name}:{q.queue_id} {begun[q]} -> {latest[q]}"
                for q in sorted(behind)
            )
            if self.options.fail_on_data_loss:
                raise DataLossError(
                    f"queues went back below the query's offsets ({named}): messages may have "
                    "been lost; set failOnDataLoss=false to read them from their start"
                )
            log.warning("queues went back below the query's offsets (%s); reading them anew", named)
        return behind

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_json(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueueRange]:
        starts, ends = offsets_from_json(start), offsets_from_json(end)
        for queue, offset in ends.items():
            # A queue that appeared after `start` was logged, or that went back below it
            # (failOnDataLoss=false, see latestOffset), is read from offset 0, its beginning.
            if starts.get(queue, 0) > offset:
                starts[queue] = 0
        return _partitions(starts, ends, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        yield from read_range(self.options, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._report_progress(end)

    def _report_progress(self, done: dict[str, Any]) -> None:
        """Store `done` (the end of a finished batch) as the commitToGroup group's offsets, for
        mqadmin consumerProgress and lag tools; never read back (the checkpoint decides where a
        query resumes). Spark calls commit() one batch late and not at all for the last batch
        of an availableNow run, so the start handed to latestOffset() (the end of the batch
        that just finished) is reported too, each distinct one once."""
        if not self.options.commit_to_group or done == self._reported:
            return
        cluster = shared_cluster(
            self.options.namesrv_addr, self.options.credentials, self.options.tls
        )
        cluster.commit_offsets(self.options.commit_to_group, offsets_from_json(done))
        self._reported = done
