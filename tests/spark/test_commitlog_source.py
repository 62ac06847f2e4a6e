"""`format("rocketmq-commitlog")` over a store our broker wrote: the same rows as the broker's
pull results (whole store by segment, one topic by ConsumeQueue ranges), a live store read up
to its flushed position, and the Parquet export script."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Admin, Producer
from tests.spark.conftest import load_script, produce

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")

COLUMNS = [
    "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "keys", "tags",
    "properties", "body", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost",
    "reconsumeTimes", "sysFlag",
]  # fmt: skip


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[SidewinderCluster]:
    """A cluster of its own: the test stops its broker to read a store nobody writes."""
    started = SidewinderCluster(tmp_path / "cluster").start()
    try:
        yield started
    finally:
        started.stop()


def rows_of(frame) -> list[tuple]:
    return sorted(
        tuple(json.dumps(sorted(v.items())) if isinstance(v, dict) else v for v in row)
        for row in frame.select(*COLUMNS).collect()
    )


def test_store_files_read_as_the_broker_pulls_them(
    spark: SparkSession, own_cluster: SidewinderCluster, tmp_path: Path
) -> None:
    cluster = own_cluster
    with Admin(cluster.namesrv_addr) as admin, Producer("cl", cluster.namesrv_addr) as producer:
        for name in ("LogA", "LogB"):
            admin.create_topic(name, queues=4)
        produce(producer, "LogA", 0, 120)
        produce(producer, "LogB", 0, 30)

    def pulled(topic: str):
        return (
            spark.read.format("rocketmq")
            .option("namesrvAddr", cluster.namesrv_addr)
            .option("subscribe", topic)
            .load()
        )

    from_broker = {topic: rows_of(pulled(topic)) for topic in ("LogA", "LogB")}
    store = cluster.store_path
    live = spark.read.format("rocketmq-commitlog").option("path", str(store)).load()
    live_rows = rows_of(live.where("topic = 'LogA'"))
    assert set(live_rows) <= set(from_broker["LogA"])  # at most what was flushed
    cluster.stop_broker()  # a clean stop flushes everything

    whole = spark.read.format("rocketmq-commitlog").option("path", str(store)).load()
    assert whole.rdd.getNumPartitions() == len(list((store / "commitlog").iterdir()))
    for topic in ("LogA", "LogB"):
        assert rows_of(whole.where(f"topic = '{topic}'")) == from_broker[topic]
    one = (
        spark.read.format("rocketmq-commitlog")
        .option("path", str(store))
        .option("topic", "LogA")
        .option("maxRecordsPerPartition", "10")
        .load()
    )
    assert one.rdd.getNumPartitions() == 4 * 3  # 30 entries per queue, 10 per task
    assert rows_of(one) == from_broker["LogA"]

    with pytest.raises(PySparkException, match="option topic"):
        spark.read.format("rocketmq-commitlog").option("path", str(store)).option(
            "topic", "Nope"
        ).load().collect()
    with pytest.raises(PySparkException, match="option path"):
        spark.read.format("rocketmq-commitlog").option("path", str(tmp_path / "x")).load()

    export = load_script("export_commitlog")
    now = datetime.now(UTC)
    out = tmp_path / "parquet"
    count = export.export(
        spark, store, "LogA", now - timedelta(hours=1), now + timedelta(hours=1), out
    )
    assert count == 120
    assert [p.name for p in out.iterdir() if p.is_dir()] == [f"date={now.date().isoformat()}"]
    exported = spark.read.parquet(str(out))
    assert sorted(r.body for r in exported.collect()) == sorted(r[9] for r in from_broker["LogA"])
    nothing = export.export(
        spark, store, "LogA", now + timedelta(hours=1), now + timedelta(hours=2), tmp_path / "p2"
    )
    assert nothing == 0
