"""Streaming queries of the Spark tests: a `rocketmq` stream from the earliest offsets, one
availableNow run into Parquet, and the check that every key landed exactly once.

    query = to_parquet(stream(spark, cluster, topic), out, checkpoint)
    assert_exactly(spark, out, {f"key-{n}" for n in range(100)})
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from interop.sidewinder import SidewinderCluster


def stream(
    spark: SparkSession, cluster: SidewinderCluster, topic: str, fmt: str = "rocketmq", **options
) -> DataFrame:
    reader = spark.readStream.format(fmt).option("namesrvAddr", cluster.namesrv_addr)
    reader = reader.option("subscribe", topic).option("startingOffsets", "earliest")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def to_parquet(frame: DataFrame, out: Path, checkpoint: Path) -> list[dict]:
    """One availableNow run into Parquet; the run's progress reports."""
    return finish(
        frame.select("queueId", "queueOffset", "keys", "body")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(out))
    )


def finish(query: StreamingQuery) -> list[dict]:
    """Wait for an availableNow run to end, raise what failed it; its progress reports."""
    try:
        query.awaitTermination(120)
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        return list(query.recentProgress)
    finally:
        query.stop()


def assert_exactly(spark: SparkSession, out: Path, keys: set[str]) -> None:
    rows = spark.read.parquet(str(out)).collect()
    counted = Counter(r.keys for r in rows)
    assert set(counted) == keys, (len(counted), len(keys))
    assert max(counted.values()) == 1, [k for k, n in counted.items() if n > 1][:5]
    assert len({(r.queueId, r.queueOffset) for r in rows}) == len(rows)
