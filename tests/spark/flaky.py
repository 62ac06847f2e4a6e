"""Data sources that fail once on purpose, for the replay tests. They subclass ours and are
registered by the tests; Spark's Python workers import this module (the project root is on
their path through the editable install), so nothing here may depend on test fixtures.

A failure fires while its marker file exists, and the marker is removed when it fires: the
next attempt (a restarted query) goes through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from sidewinder.spark.options import ReadOptions
from sidewinder.spark.sink import StreamWriter, WriteOptions
from sidewinder.spark.source import QueueRange, RocketMQDataSource, StreamReader


def _fire(marker: str | None) -> bool:
    """True once: when the marker file exists (it is removed)."""
    if marker and os.path.exists(marker):
        try:
            os.remove(marker)
        except FileNotFoundError:
            return False  # another task fired it
        return True
    return False


class FailingReadSource(RocketMQDataSource):
    """A task reading a range that does not start at offset 0 fails once (`failMarker`)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-failing-read"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        marker = self.options.get("failMarker")
        return FailingReader(ReadOptions.parse(self.options, stream=True), schema, marker)


class FailingReader(StreamReader):
    def __init__(self, options: ReadOptions, schema: StructType, marker: str | None) -> None:
        super().__init__(options, schema)
        self.marker = marker

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, QueueRange)
        if partition.start > 0 and _fire(self.marker):
            raise RuntimeError("injected failure: the executor dies in this batch")
        yield from super().read(partition)


class FailingCommitSink(RocketMQDataSource):
    """The driver-side commit of the first streaming batch fails once (`failMarker`), after
    every task wrote its messages: Spark then replays the batch."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-failing-commit"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return FailingCommitWriter(WriteOptions.parse(self.options, schema), self.options)


class FailingCommitWriter(StreamWriter):
    def __init__(self, options: WriteOptions, raw: Any) -> None:
        super().__init__(options)
        self.marker = raw.get("failMarker")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if _fire(self.marker):
            raise RuntimeError(f"injected failure: the commit of batch {batchId}")
        super().commit(messages, batchId)
