"""Batch reads of `format("rocketmq")` against a real broker: every column of every message,
offset ranges (words, JSON, timestamps), the tag filter, and option errors at analysis."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Admin, Producer
from tests.spark.conftest import TAGS, produce

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")


def reader(spark: SparkSession, cluster: SidewinderCluster, topic: str, **options: str):
    frame = spark.read.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
    frame = frame.option("subscribe", topic)
    for name, value in options.items():
        frame = frame.option(name, value)
    return frame.load()


def test_reads_every_message_with_its_columns(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str
) -> None:
    before_ms = int(time.time() * 1000)
    sent = produce(producer, topic, 0, 200)
    rows = reader(spark, cluster, topic).collect()

    assert len(rows) == 200
    by_key = {row.keys: row for row in rows}
    assert set(by_key) == {f"key-{n}" for n in range(200)}
    assert {row.queueId for row in rows} == {0, 1, 2, 3}
    for n, result in enumerate(sent):
        row = by_key[f"key-{n}"]
        assert row.body == f"body-{n}".encode()
        assert row.tags == TAGS[n % 3]
        assert row.topic == topic and row.brokerName == cluster.broker_name
        assert (row.queueId, row.queueOffset) == (result.queue.queue_id, result.queue_offset)
        assert row.uniqKey == result.msg_id and row.msgId == result.offset_msg_id
        assert row.properties["KEYS"] == f"key-{n}" and row.properties["TAGS"] == TAGS[n % 3]
        assert row.storeTimestamp.timestamp() * 1000 >= before_ms - 1000
        assert row.storeHost == cluster.broker_addr
        assert row.reconsumeTimes == 0 and row.sysFlag == 0
    # Offsets are dense per queue and start at 0.
    for queue_id in range(4):
        offsets = sorted(r.queueOffset for r in rows if r.queueId == queue_id)
        assert offsets == list(range(len(offsets)))


def test_offset_ranges_tag_filter_and_splits(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str
) -> None:
    produce(producer, topic, 0, 80)  # 20 per queue
    broker = cluster.broker_name
    starting = {topic: {f"{broker}:{q}": 5 for q in range(4)}}
    ending = {topic: {f"{broker}:{q}": (15 if q else -1) for q in range(4)}}
    frame = reader(
        spark,
        cluster,
        topic,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
        maxRecordsPerPartition="4",
    )
    rows = frame.collect()
    got = sorted((r.queueId, r.queueOffset) for r in rows)
    want = [(0, o) for o in range(5, 20)] + [(q, o) for q in (1, 2, 3) for o in range(5, 15)]
    assert got == sorted(want)
    assert frame.rdd.getNumPartitions() == 4 + 3 * 3  # 15 rows -> 4 tasks, 10 rows -> 3 tasks

    tagged = reader(spark, cluster, topic, subExpression="TagA || TagC").collect()
    assert sorted(r.keys for r in tagged) == sorted(f"key-{n}" for n in range(80) if n % 3 != 1)
    assert {r.tags for r in tagged} == {"TagA", "TagC"}

    without = reader(spark, cluster, topic, includeProperties="false")
    assert "properties" not in without.columns and without.count() == 80


def test_timestamps_pattern_and_assign(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, admin: Admin, topic: str
) -> None:
    produce(producer, topic, 0, 40)
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(producer, topic, 40, 40)
    later = reader(spark, cluster, topic, startingTimestamp=str(middle_ms)).collect()
    assert sorted(r.keys for r in later) == sorted(f"key-{n}" for n in range(40, 80))
    earlier = reader(spark, cluster, topic, endingTimestamp=str(middle_ms)).collect()
    assert sorted(r.keys for r in earlier) == sorted(f"key-{n}" for n in range(40))

    assign = json.dumps({topic: [f"{cluster.broker_name}:2"]})
    assigned = (
        spark.read.format("rocketmq")
        .option("namesrvAddr", cluster.namesrv_addr)
        .option("assign", assign)
        .load()
        .collect()
    )
    assert len(assigned) == 20 and {r.queueId for r in assigned} == {2}

    pattern = (
        spark.read.format("rocketmq")
        .option("namesrvAddr", cluster.namesrv_addr)
        .option("subscribePattern", topic.replace("SparkTopic", "Spark.opic"))
        .load()
    )
    assert pattern.count() == 80


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "subscribe"),
        ({"subscribe": "A", "topic": "B"}, "subscribe"),
        ({"subscribe": "A", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "A", "startingOffsets": "{not json"}, "startingOffsets"),
        ({"subscribe": "A", "startingOffsets": '{"A": {"broker-a": 1}}'}, "startingOffsets"),
        ({"subscribe": "A", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "A", "endingOffsets": '{"A": {"broker-a:0": -2}}'}, "endingOffsets"),
        ({"subscribe": "A", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
        ({"subscribe": "A", "includeProperties": "yes"}, "includeProperties"),
        ({"subscribePattern": "(unclosed"}, "subscribePattern"),
        ({"assign": '{"A": "broker-a:0"}'}, "assign"),
    ],
)
def test_bad_options_fail_at_analysis_naming_the_option(
    spark: SparkSession, cluster: SidewinderCluster, options: dict[str, str], named: str
) -> None:
    frame = spark.read.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
    for name, value in options.items():
        frame = frame.option(name, value)
    with pytest.raises(PySparkException, match=f"option {named}"):
        frame.load().collect()


def test_unknown_topic_and_offsets_outside_the_queue_set_are_refused(
    spark: SparkSession, cluster: SidewinderCluster, producer: Producer, topic: str
) -> None:
    with pytest.raises(PySparkException, match="option subscribe: topic NoSuchTopic"):
        reader(spark, cluster, "NoSuchTopic").collect()
    produce(producer, topic, 0, 4)
    partial = json.dumps({topic: {f"{cluster.broker_name}:0": 0}})
    with pytest.raises(PySparkException, match=r"option startingOffsets: .*missing"):
        reader(spark, cluster, topic, startingOffsets=partial).collect()
