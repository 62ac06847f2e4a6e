"""`format("rocketmq")` as a sink: batch writes pulled back by our own consumer, routing,
refused modes, and exactly once when Spark replays a batch whose tasks already wrote."""

from __future__ import annotations

import time
from collections import defaultdict

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Admin
from sidewinder.spark.cluster import shared_cluster
from sidewinder.spark.sink import UNIQ_KEY, WriteOptions, _mark, _messages, _route, write_task
from tests.helpers import unique
from tests.spark.conftest import pull_all

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")


def write(frame, cluster: SidewinderCluster, **options: str) -> None:
    writer = frame.write.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def test_batch_write_then_pull_back_exactly_those_messages(
    spark: SparkSession, cluster: SidewinderCluster, admin: Admin, topic: str
) -> None:
    rows = [
        (f"payload-{n}".encode(), f"order-{n % 7}", "TagA" if n % 2 else "TagB", {"n": str(n)})
        for n in range(300)
    ]
    frame = spark.createDataFrame(
        rows, "body binary, keys string, tags string, properties map<string,string>"
    ).repartition(3)
    write(frame, cluster, topic=topic)

    pulled = pull_all(cluster, topic, 300)
    assert sorted(m.body for m in pulled) == sorted(r[0] for r in rows)
    by_n = {int(m.properties["n"]): m for m in pulled}
    assert len(by_n) == 300
    for n, message in by_n.items():
        assert message.keys == [f"order-{n % 7}"]
        assert message.tags == ("TagA" if n % 2 else "TagB")
        assert message.body == f"payload-{n}".encode()
    # Hash routing: one key, one queue.
    queues_of_key = defaultdict(set)
    for message in pulled:
        queues_of_key[message.keys[0]].add(message.queue.queue_id)
    assert all(len(q) == 1 for q in queues_of_key.values())
    assert len({q for qs in queues_of_key.values() for q in qs}) > 1
    assert len({m.msg_id for m in pulled}) == 300


def test_column_routing_topic_column_and_strings(
    spark: SparkSession, cluster: SidewinderCluster, admin: Admin
) -> None:
    first, second = unique("SinkA"), unique("SinkB")
    for name in (first, second):
        admin.create_topic(name, queues=4)
    rows = [(f"text-{n}", first if n % 2 else second, n % 4) for n in range(40)]
    frame = spark.createDataFrame(rows, "body string, topic string, queueId int")
    write(frame, cluster)
    for name, parity in ((first, 1), (second, 0)):
        pulled = pull_all(cluster, name, 20)
        assert sorted(m.body.decode() for m in pulled) == sorted(
            f"text-{n}" for n in range(40) if n % 2 == parity
        )
        for message in pulled:
            assert message.queue.queue_id == int(message.body.decode().split("-")[1]) % 4


@pytest.mark.parametrize(
    ("mode", "columns", "options", "named"),
    [
        ("overwrite", "body string", {"topic": "T"}, "mode"),
        ("append", "payload string", {"topic": "T"}, "body"),
        ("append", "body string", {}, "topic"),
        ("append", "body string", {"topic": "T", "queueSelector": "column"}, "queueSelector"),
    ],
)
def test_refused_writes_name_the_problem(
    spark: SparkSession,
    cluster: SidewinderCluster,
    mode: str,
    columns: str,
    options: dict[str, str],
    named: str,
) -> None:
    frame = spark.createDataFrame([("x",)], columns)
    writer = frame.write.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(PySparkException, match=f"option {named}"):
        writer.mode(mode).save()


def test_a_task_retried_after_a_partial_send_sends_only_the_rest(
    cluster: SidewinderCluster, admin: Admin
) -> None:
    """The path of a task that died half way: its *started* marker is there, *done* is not,
    and half its messages are stored. Run in this process (no Spark needed): the retry looks
    its ids up in the key index and sends the other half."""
    topic = unique("SinkRetry")
    admin.create_topic(topic, queues=4)
    options = WriteOptions.parse(
        {"namesrvAddr": cluster.namesrv_addr, "topic": topic},
        StructType.fromJson({"type": "struct", "fields": [_field("body"), _field("keys")]}),
    )
    batch = pa.RecordBatch.from_pydict(
        {"body": [f"b{n}".encode() for n in range(100)], "keys": [f"k{n % 10}" for n in range(100)]}
    )
    task = f"{unique('query')}:7:0"
    cluster_client = shared_cluster(cluster.namesrv_addr)
    outgoing = list(_messages(options, task, iter([batch])))
    _mark(cluster_client, options, task, "started")
    cluster_client.send_all(_route(cluster_client, options, outgoing[::2]))
    half = {m.properties[UNIQ_KEY] for m, _ in outgoing[::2]}
    deadline = time.monotonic() + 10  # the key index is built just after the store acknowledges
    while cluster_client.query_ids(topic, sorted(half)) != half and time.monotonic() < deadline:
        time.sleep(0.1)

    written = write_task(options, task, iter([batch]))
    assert (written.sent, written.skipped) == (50, 50)
    again = write_task(options, task, iter([batch]))  # now *done*: nothing at all
    assert (again.sent, again.skipped) == (0, 100)
    pulled = pull_all(cluster, topic, 100)
    assert sorted(m.body for m in pulled) == sorted(f"b{n}".encode() for n in range(100))


def _field(name: str) -> dict:
    kind = "binary" if name == "body" else "string"
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}


def test_delay_time_level_holds_messages_back(
    spark: SparkSession, cluster: SidewinderCluster, admin: Admin, topic: str
) -> None:
    frame = spark.createDataFrame(
        [(f"later-{n}", 3) for n in range(5)], "body string, delayTimeLevel int"
    )
    write(frame, cluster, topic=topic)
    assert admin.topic_status(topic) and all(
        high == 0 for _, _, high, _ in admin.topic_status(topic)
    )
    pulled = pull_all(cluster, topic, 5)  # level 3 is 3 s on the test broker
    assert sorted(m.body for m in pulled) == [f"later-{n}".encode() for n in range(5)]
