"""Offsets a query needs, cleaned up by the broker, handled per `failOnDataLoss`.

Each test gets a broker of its own whose cleanup really deletes CommitLog segments: 1 MiB
segments, `fileReservedTime=0` (every segment but the newest has expired), every hour a
`deleteWhen` hour, a cleanup round every 200 ms. The tests fill a few segments with 100 KiB
messages, end with small ones that stay in the newest segment, and wait until the queues' first
offsets (GET_TOPIC_STATS_INFO's minOffset) show that every older segment is gone. The broker is
not the session's shared one: its cleanup would eat the other tests' messages.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.producer import Message, SendResult
from sidewinder.client.route_cache import MessageQueue
from sidewinder.client.sync import Admin, Producer
from sidewinder.protocol.message import decode_offset_msg_id
from tests.helpers import unique
from tests.spark.conftest import produce
from tests.spark.streaming import assert_exactly, stream, to_parquet

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")

SEGMENT_BYTES = 1 << 20
BIG_BODY = 100 * 1024  # ten records to a segment
EVERY_HOUR = ";".join(f"{hour:02d}" for hour in range(24))


@pytest.fixture
def cleaning(tmp_path: Path) -> Iterator[SidewinderCluster]:
    """A name server and a broker that deletes every CommitLog segment but the newest."""
    conf = {
        "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
        "fileReservedTime": "0",
        "deleteWhen": EVERY_HOUR,
        "cleanResourceInterval": "200",
    }
    started = SidewinderCluster(tmp_path / "cleaning", broker_conf=conf).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def admin(cleaning: SidewinderCluster) -> Iterator[Admin]:
    with Admin(cleaning.namesrv_addr) as client:
        yield client


@pytest.fixture
def producer(cleaning: SidewinderCluster) -> Iterator[Producer]:
    with Producer("spark-data-loss", cleaning.namesrv_addr) as client:
        yield client


@pytest.fixture
def topic(admin: Admin) -> str:
    name = unique("CleanedTopic")
    admin.create_topic(name, queues=4)
    return name


def fill_and_clean_up(
    admin: Admin,
    producer: Producer,
    topic: str,
    sent: list[SendResult],
    queue_ids: tuple[int, ...] = (0, 1, 2, 3),
) -> tuple[dict[int, int], set[str]]:
    """Send 45 messages of 100 KiB over four segments and a fifth, then 40 small ones into the
    fifth, round robin over `queue_ids`; wait until cleanup deleted every segment before the
    newest. `sent` (what the test sent before: key-0...) is extended. The queues' first offsets
    (by queue id) and the keys of the messages still in the topic."""
    broker = sent[0].queue.broker_name
    first = len(sent)
    for n in range(first, first + 85):
        queue = MessageQueue(topic, broker, queue_ids[n % len(queue_ids)])
        body = f"body-{n}".encode()
        if n < first + 45:
            body = body.ljust(BIG_BODY, b".")
        sent.append(producer.send(Message(topic, body, keys=[f"key-{n}"]), queue=queue))
    phy = [decode_offset_msg_id(r.offset_msg_id)[2] for r in sent]
    newest = max(phy) // SEGMENT_BYTES * SEGMENT_BYTES
    assert newest >= 4 * SEGMENT_BYTES, newest  # four segments for cleanup to delete
    assert min(phy[first + 45 :]) >= newest  # the small ones stay
    kept = {n for n in range(len(sent)) if phy[n] >= newest}
    expected = {}
    for queue_id in range(4):
        offsets = [r.queue_offset for r in sent if r.queue.queue_id == queue_id]
        left = [sent[n].queue_offset for n in kept if sent[n].queue.queue_id == queue_id]
        # A queue with no message left starts after its last one.
        expected[queue_id] = min(left) if left else max(offsets, default=-1) + 1

    deadline = time.monotonic() + 30
    while True:
        firsts = {queue.queue_id: low for queue, low, _, _ in admin.topic_status(topic)}
        if firsts == expected:
            return firsts, {f"key-{n}" for n in kept}
        assert time.monotonic() < deadline, f"first offsets {firsts}, want {expected}"
        time.sleep(0.2)


def test_a_stream_restarted_behind_cleaned_up_offsets(
    spark: SparkSession,
    cleaning: SidewinderCluster,
    admin: Admin,
    producer: Producer,
    topic: str,
    tmp_path: Path,
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    sent = produce(producer, topic, 0, 40)  # offsets 0-9 of each queue
    to_parquet(stream(spark, cleaning, topic), out, checkpoint)
    firsts, kept = fill_and_clean_up(admin, producer, topic, sent)
    assert min(firsts.values()) > 10  # every queue lost offsets past the checkpoint's 10
    committed = sorted(p.name for p in (checkpoint / "commits").iterdir())

    with pytest.raises(Exception, match="failOnDataLoss=false") as failed:
        to_parquet(stream(spark, cleaning, topic), out, checkpoint)
    queue = rf"{re.escape(topic)} {cleaning.broker_name}:(\d)"
    named = re.search(
        rf"{queue}: offsets 10\.\.(\d+) are gone \(cleaned up; the queue now starts at (\d+)\)",
        str(failed.value),
    )
    assert named, str(failed.value)[:2000]
    assert int(named[2]) + 1 == int(named[3]) == firsts[int(named[1])]
    assert sorted(p.name for p in (checkpoint / "commits").iterdir()) == committed
    assert_exactly(spark, out, {f"key-{n}" for n in range(40)})  # nothing skipped silently

    progress = to_parquet(stream(spark, cleaning, topic, failOnDataLoss="false"), out, checkpoint)
    assert sum(p["numInputRows"] for p in progress) == len(kept)
    # The first run's messages and every message still in the topic, each once.
    assert_exactly(spark, out, {f"key-{n}" for n in range(40)} | kept)
    rows = spark.read.parquet(str(out)).where("queueOffset >= 10").collect()
    for queue_id, first in firsts.items():
        assert min(r.queueOffset for r in rows if r.queueId == queue_id) == first


def test_a_batch_read_from_cleaned_up_offsets(
    spark: SparkSession,
    cleaning: SidewinderCluster,
    admin: Admin,
    producer: Producer,
    topic: str,
) -> None:
    """Queue 3 gets only the first 40 messages' share: every message of it is cleaned up."""
    sent = produce(producer, topic, 0, 40)
    firsts, kept = fill_and_clean_up(admin, producer, topic, sent, queue_ids=(0, 1, 2))
    assert firsts[3] == sum(1 for r in sent if r.queue.queue_id == 3) > 0

    def read(**options: str) -> list[Row]:
        frame = spark.read.format("rocketmq").option("namesrvAddr", cleaning.namesrv_addr)
        frame = frame.option("subscribe", topic)
        for name, value in options.items():
            frame = frame.option(name, value)
        return frame.load().collect()

    def assert_kept(rows: list[Row]) -> None:
        assert sorted(r.keys for r in rows) == sorted(kept)
        for queue_id, first in firsts.items():
            offsets = sorted(r.queueOffset for r in rows if r.queueId == queue_id)
            assert offsets == list(range(first, first + len(offsets)))

    assert_kept(read())  # earliest: no loss, whatever failOnDataLoss says
    zeros = json.dumps({topic: {f"{cleaning.broker_name}:{q}": 0 for q in range(4)}})
    with pytest.raises(Exception, match="failOnDataLoss=false") as failed:
        read(startingOffsets=zeros)
    queue = rf"{re.escape(topic)} {cleaning.broker_name}:(\d)"
    named = re.search(
        rf"startingOffsets: offset 0 of {queue} is below the queue's first offset (\d+) "
        r"\(cleaned up\)",
        str(failed.value),
    )
    assert named, str(failed.value)[:2000]
    assert int(named[2]) == firsts[int(named[1])]
    assert_kept(read(startingOffsets=zeros, failOnDataLoss="false"))
