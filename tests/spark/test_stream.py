"""Streaming reads and writes of `format("rocketmq")` against a real broker: availableNow runs
that resume from their checkpoint, rate limits, a query that dies mid-way and restarts, a sink
whose commit fails once, and progress reported as a consumer group's offsets."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from interop.processes import ManagedProcess
from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Admin, Producer
from sidewinder.spark.source import RocketMQDataSource
from tests.helpers import unique
from tests.spark.conftest import produce, pull_all
from tests.spark.flaky import FailingCommitSink, FailingReadSource
from tests.spark.remote import spark_env
from tests.spark.streaming import assert_exactly, finish, stream, to_parquet

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")


def test_available_now_runs_resume_from_the_checkpoint(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str, tmp_path: Path
) -> None:
    produce(producer, topic, 0, 200)
    frame = stream(spark, cluster, topic, maxOffsetsPerTrigger="70")
    first = to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    sizes = [p["numInputRows"] for p in first if p["numInputRows"]]
    assert sum(sizes) == 200 and max(sizes) <= 70 + 4 and len(sizes) >= 3, sizes
    end = json.loads(first[-1]["sources"][0]["endOffset"])
    assert end == {topic: {f"{cluster.broker_name}:{q}": 50 for q in range(4)}}
    assert_exactly(spark, tmp_path / "out", {f"key-{n}" for n in range(200)})

    produce(producer, topic, 200, 100)
    second = to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    assert sum(p["numInputRows"] for p in second) == 100
    assert_exactly(spark, tmp_path / "out", {f"key-{n}" for n in range(300)})


def test_a_query_that_dies_mid_way_restarts_without_loss_or_duplicates(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str, tmp_path: Path
) -> None:
    spark.dataSource.register(FailingReadSource)
    produce(producer, topic, 0, 160)
    marker = tmp_path / "fail-read"
    marker.touch()
    frame = stream(
        spark,
        cluster,
        topic,
        fmt=FailingReadSource.name(),
        maxOffsetsPerTrigger="60",
        failMarker=str(marker),
    )
    with pytest.raises(Exception, match="injected failure"):
        to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    assert not marker.exists()
    # The first batch was committed; the one that died is logged but not committed.
    assert (tmp_path / "ckpt" / "commits" / "0").exists()
    assert not (tmp_path / "ckpt" / "commits" / "1").exists()
    produce(producer, topic, 160, 40)  # arrives while the query is down
    to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    assert_exactly(spark, tmp_path / "out", {f"key-{n}" for n in range(200)})


def test_a_query_killed_with_sigkill_restarts_without_loss_or_duplicates(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str, tmp_path: Path
) -> None:
    """The driver process dies (SIGKILL, no shutdown of any kind) after a few micro-batches,
    possibly inside one; the next run from its checkpoint reads on where the log says."""
    produce(producer, topic, 0, 300)
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    driver = ManagedProcess(
        "killable stream",
        [
            sys.executable,
            str(Path(__file__).with_name("killable_stream.py")),
            cluster.namesrv_addr,
            topic,
            str(out),
            str(checkpoint),
        ],
        tmp_path / "driver.out",
        env=spark_env(tmp_path),
    )
    driver.start()
    try:
        driver.wait_ready(lambda: (checkpoint / "commits" / "2").exists(), 120)
    finally:
        driver.kill()
    done = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    assert max(done) >= 2 and len(done) < 10, done  # it died before reading everything
    produce(producer, topic, 300, 100)
    to_parquet(stream(spark, cluster, topic), out, checkpoint)
    assert_exactly(spark, out, {f"key-{n}" for n in range(400)})


def test_a_sink_commit_that_fails_once_leaves_no_duplicates(
    spark: SparkSession,
    cluster: SidewinderCluster,
    producer: Producer,
    admin: Admin,
    topic: str,
    tmp_path: Path,
) -> None:
    spark.dataSource.register(FailingCommitSink)
    target = unique("SinkTarget")
    admin.create_topic(target, queues=4)
    produce(producer, topic, 0, 150)
    marker = tmp_path / "fail-commit"
    marker.touch()

    def run() -> None:
        finish(
            stream(spark, cluster, topic)
            .selectExpr("keys", "body", "tags")
            .writeStream.format(FailingCommitSink.name())
            .option("namesrvAddr", cluster.namesrv_addr)
            .option("topic", target)
            .option("failMarker", str(marker))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )

    with pytest.raises(Exception, match="injected failure"):
        run()
    # Every task had written before the commit failed: the batch is in the topic already.
    assert len(pull_all(cluster, target, 150)) == 150
    run()  # replays the batch: its tasks find their done markers and send nothing
    pulled = pull_all(cluster, target, 150)
    assert Counter(m.keys[0] for m in pulled) == Counter({f"key-{n}": 1 for n in range(150)})


def test_commit_to_group_reports_progress_for_lag_tools(
    spark: SparkSession,
    cluster: SidewinderCluster,
    producer: Producer,
    admin: Admin,
    topic: str,
    tmp_path: Path,
) -> None:
    group = unique("spark-progress")
    produce(producer, topic, 0, 80)
    frame = stream(spark, cluster, topic, commitToGroup=group, maxOffsetsPerTrigger="50")

    def progress() -> set[tuple[int, int, int]]:
        rows = admin.consumer_progress(group)
        return {(r.queue.queue_id, r.consumer_offset, r.lag) for r in rows}

    to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    assert progress() == {(q, 20, 0) for q in range(4)}
    produce(producer, topic, 80, 40)
    to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")
    assert progress() == {(q, 30, 0) for q in range(4)}


def test_stream_options_checked_when_the_query_starts(
    spark: SparkSession, cluster: SidewinderCluster, topic: str, tmp_path: Path
) -> None:
    frame = stream(spark, cluster, topic, endingOffsets="latest")
    with pytest.raises(PySparkException, match="option endingOffsets"):
        to_parquet(frame, tmp_path / "out", tmp_path / "ckpt")


def test_the_source_class_is_importable_from_the_package() -> None:
    import sidewinder.spark

    assert sidewinder.spark.RocketMQDataSource is RocketMQDataSource
    assert RocketMQDataSource.name() == "rocketmq"


def test_a_topic_made_again_behind_the_checkpoint_is_data_loss(
    spark: SparkSession,
    cluster: SidewinderCluster,
    producer: Producer,
    admin: Admin,
    topic: str,
    tmp_path: Path,
) -> None:
    produce(producer, topic, 0, 40)
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    to_parquet(stream(spark, cluster, topic), out, checkpoint)
    admin.delete_topic(topic)
    admin.create_topic(topic, queues=4)
    produce(producer, topic, 40, 8)  # offsets 0 and 1 of each queue again

    with pytest.raises(Exception, match="failOnDataLoss=false"):
        to_parquet(stream(spark, cluster, topic), out, checkpoint)
    to_parquet(stream(spark, cluster, topic, failOnDataLoss="false"), out, checkpoint)
    counted = Counter(r.keys for r in spark.read.parquet(str(out)).collect())
    assert counted == Counter({f"key-{n}": 1 for n in range(48)})
