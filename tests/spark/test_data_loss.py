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
from pyspark.sql import SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.producer import Message, SendResult
from sidewinder.client.sync import Admin, Producer
from sidewinder.protocol.message import decode_offset_msg_id
from tests.conftest import unique
from tests.spark.conftest import produce
from tests.spark.test_stream import assert_exactly, stream, to_parquet

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
    admin: Admin, producer: Producer, topic: str, sent: list[SendResult], first: int
) -> tuple[dict[int, int], set[str]]:
    """Send 45 messages of 100 KiB (keys key-FIRST...) over four segments and a fifth, then 40
    small ones into the fifth; wait until cleanup deleted every segment before the newest.
    `sent` (what the test sent before: key-0...) is extended. The queues' first offsets (by
    queue id) and the keys of the messages still in the topic."""
    assert len(sent) == first
    for n in range(first, first + 45):
        body = f"big-{n}".encode().ljust(BIG_BODY, b".")
        sent.append(producer.send(Message(topic, body, keys=[f"key-{n}"])))
    tail = produce(producer, topic, first + 45, 40)
    sent += tail
    phy = {r.msg_id: decode_offset_msg_id(r.offset_msg_id)[2] for r in sent}
    newest = max(phy.values()) // SEGMENT_BYTES * SEGMENT_BYTES
    assert newest >= 4 * SEGMENT_BYTES, newest  # four segments for cleanup to delete
    assert all(phy[r.msg_id] >= newest for r in tail)  # the small ones stay
    kept = [r for r in sent if phy[r.msg_id] >= newest]
    expected = {q: min(r.queue_offset for r in kept if r.queue.queue_id == q) for q in range(4)}

    deadline = time.monotonic() + 30
    while True:
        firsts = {queue.queue_id: low for queue, low, _, _ in admin.topic_status(topic)}
        if firsts == expected:
            break
        assert time.monotonic() < deadline, f"first offsets {firsts}, want {expected}"
        time.sleep(0.2)
    keys = {f"key-{n}" for n, r in enumerate(sent) if phy[r.msg_id] >= newest}
    return firsts, keys


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
    firsts, kept = fill_and_clean_up(admin, producer, topic, sent, 40)
    assert min(firsts.values()) > 10  # every queue lost offsets past the checkpoint's 10
    committed = sorted(p.name for p in (checkpoint / "commits").iterdir())

    with pytest.raises(Exception, match="failOnDataLoss=false") as failed:
        to_parquet(stream(spark, cleaning, topic), out, checkpoint)
    queue = rf"{re.escape(topic)} {cleaning.broker_name}:(\d)"
    named = re.search(
        rf"{queue}: offset 10 is gone \(the broker moved it to (\d+)\)", str(failed.value)
    )
    assert named, str(failed.value)[:2000]
    assert int(named[2]) == firsts[int(named[1])]
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
    firsts, kept = fill_and_clean_up(admin, producer, topic, [], 0)
    queues = {f"{cleaning.broker_name}:{q}": 0 for q in range(4)}
    frame = (
        spark.read.format("rocketmq")
        .option("namesrvAddr", cleaning.namesrv_addr)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: queues}))
    )

    with pytest.raises(Exception, match="failOnDataLoss=false") as failed:
        frame.load().collect()
    queue = rf"{re.escape(topic)} {cleaning.broker_name}:(\d)"
    named = re.search(
        rf"startingOffsets: offset 0 of {queue} is below the queue's first offset (\d+) "
        r"\(cleaned up\)",
        str(failed.value),
    )
    assert named, str(failed.value)[:2000]
    assert int(named[2]) == firsts[int(named[1])]

    rows = frame.option("failOnDataLoss", "false").load().collect()
    assert sorted(r.keys for r in rows) == sorted(kept)
    for queue_id, first in firsts.items():
        offsets = sorted(r.queueOffset for r in rows if r.queueId == queue_id)
        assert offsets == list(range(first, first + len(offsets)))
