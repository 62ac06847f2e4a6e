"""The other way round: the real RocketMQ broker opens a CommitLog Sidewinder's store wrote.

No ConsumeQueue or index files are written: a cleanly shut down RocketMQ dispatches every record
of the CommitLog at startup, so its consumers and its queryMsgByKey see exactly what our records
say. `mqstore verify` then checks the queues and index RocketMQ built against our CommitLog.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.target import running_target
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.store.commit_log import AppendStatus, CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.dispatchers import parse_delay_levels, store_dispatchers
from sidewinder.store.index_service import IndexService
from sidewinder.store.reput import Reput
from sidewinder.store.verify import verify_store
from tests.interop.scenarios import consume

pytestmark = pytest.mark.interop

SEGMENT = 2 << 20
LOCAL = Host(b"\x7f\x00\x00\x01", 10911)
TOPICS = {"OursA": 4, "OursB": 2}


def body_of(n: int) -> bytes:
    # Six 1 MiB bodies roll several 2 MiB segments.
    size = 1 << 20 if n % 50 == 8 else {7: 100_000, 9: 0}.get(n, (n * 37) % 5000)
    return (f"ours-{n}|".encode() * (size // 8 + 1))[:size]


def write_store(root: Path, count: int) -> dict[str, dict[str, object]]:
    """`count` messages over both topics; what each consumer should see, by key."""
    log = CommitLog(
        root / "commitlog", segment_size=SEGMENT, max_message_size=4 << 20, store_host=LOCAL
    )
    log.load()
    expected = {}
    now = int(time.time() * 1000)
    for n in range(count):
        topic = "OursA" if n % 3 else "OursB"
        tag = "TagA" if n % 2 else "TagB"
        key = f"ours-{n}"
        props = {"KEYS": key, "TAGS": tag, "UNIQ_KEY": f"{n:032X}", "color": "blue"}
        body = body_of(n)
        result = log.put(
            MessageToStore(
                topic=topic.encode(),
                queue_id=n % TOPICS[topic],
                body=body,
                properties=encode_properties(props),
                born_timestamp=now,
                born_host=LOCAL,
                store_host=LOCAL,
            )
        )
        assert result.status is AppendStatus.PUT_OK, result
        expected[key] = {
            "topic": topic,
            "tags": tag,
            "msgId": props["UNIQ_KEY"],
            "bodyMd5": hashlib.md5(body).hexdigest(),
            "bodyLen": len(body),
            "queueOffset": result.queue_offset,
        }
    assert len(log.files.files) >= 3, "the test means to span several segments"
    log.flush()
    log.close()
    return expected


@pytest.mark.usefixtures("hot_path")
def test_rocketmq_serves_every_message_we_stored(tmp_path: Path) -> None:
    root = tmp_path / "store"
    expected = write_store(root, 300)
    conf = {"storePathRootDir": str(root), "mappedFileSizeCommitLog": SEGMENT}
    with running_target("rocketmq", tmp_path / "cluster", conf) as cluster:
        for topic, queues in TOPICS.items():
            create_topic(cluster.namesrv_addr, topic, queues=queues)
        for topic in TOPICS:
            want = {k: v for k, v in expected.items() if v["topic"] == topic}
            run = consume(cluster, "java", topic, len(want), group=f"Reader{topic}", mode="pull")
            got = {e["keys"]: e for e in run.received()}
            assert set(got) == set(want)
            for key, e in got.items():
                w = want[key]
                assert (e["tags"], e["msgId"], e["bodyMd5"], e["bodyLen"], e["queueOffset"]) == (
                    w["tags"],
                    w["msgId"],
                    w["bodyMd5"],
                    w["bodyLen"],
                    w["queueOffset"],
                ), key
                assert e["properties"] == {"color": "blue"}
        by_key = mqadmin(
            cluster.namesrv_addr, "queryMsgByKey", "-t", "OursA", "-k", "ours-7"
        ).stdout
        assert expected["ours-7"]["msgId"] in by_key, by_key
    report = verify_store(
        root,
        StoreConfig(
            store_path_root_dir=root,
            store_path_commit_log=root / "commitlog",
            mapped_file_size_commit_log=SEGMENT,
        ),
    )
    assert report.records == 300
    assert report.cq_entries == 300
    assert report.index_entries >= 600  # KEYS and UNIQ_KEY of every message


SMALL_INDEX = {"maxHashSlotNum": 1000, "maxIndexNum": 4000}
CQ_FILE_SIZE = 3000 * 20  # the bench's test broker.conf


def dispatch_ourselves(root: Path) -> None:
    log = CommitLog(
        root / "commitlog", segment_size=SEGMENT, max_message_size=4 << 20, store_host=LOCAL
    )
    log.load()
    log.recover()
    queues = ConsumeQueueTable(root / "consumequeue", CQ_FILE_SIZE)
    index = IndexService(root / "index", SMALL_INDEX["maxHashSlotNum"], SMALL_INDEX["maxIndexNum"])
    index.load()
    levels = parse_delay_levels(StoreConfig().message_delay_level)
    for _ in range(2):  # a second pass changes nothing
        Reput(log, store_dispatchers(queues, index, levels)).dispatch_all()
    queues.flush()
    index.flush()
    queues.close()
    index.close()
    log.close()


def cq_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / "consumequeue").rglob("*") if p.is_file())


def cq_entries(root: Path) -> int:
    """Written entries (non-zero size field) in every consume-queue file under `root`."""
    total = 0
    for rel in cq_files(root) if (root / "consumequeue").is_dir() else []:
        data = (root / rel).read_bytes()
        total += sum(1 for i in range(0, len(data), 20) if data[i + 8 : i + 12] != bytes(4))
    return total


@pytest.mark.usefixtures("hot_path")
def test_our_queues_and_index_are_rocketmqs_byte_for_byte(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    expected = write_store(ours, 300)
    shutil.copytree(ours, theirs)
    dispatch_ourselves(ours)

    conf = {"mappedFileSizeCommitLog": SEGMENT, **SMALL_INDEX}
    with running_target("rocketmq", tmp_path / "build", {**conf, "storePathRootDir": theirs}):
        deadline = time.monotonic() + 30
        while cq_entries(theirs) < 300 and time.monotonic() < deadline:
            time.sleep(0.5)
    assert cq_entries(theirs) == 300, "RocketMQ did not finish dispatching"
    assert cq_files(ours) == cq_files(theirs)
    for rel in cq_files(ours):
        assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel
    (our_index,) = (ours / "index").iterdir()
    (their_index,) = (theirs / "index").iterdir()
    assert our_index.read_bytes() == their_index.read_bytes()

    # And RocketMQ serves straight from our queues and index (it has nothing to re-dispatch).
    # Killed at the end: nothing reads the store after.
    serve = {**conf, "storePathRootDir": ours}
    with running_target("rocketmq", tmp_path / "serve", serve, discard=True) as c:
        for topic, queues in TOPICS.items():
            create_topic(c.namesrv_addr, topic, queues=queues)
        want = {k for k, v in expected.items() if v["topic"] == "OursB"}
        run = consume(c, "java", "OursB", len(want), group="ReaderOfOurQueues", mode="pull")
        assert {e["keys"] for e in run.received()} == want
        by_key = mqadmin(c.namesrv_addr, "queryMsgByKey", "-t", "OursA", "-k", "ours-11").stdout
        assert expected["ours-11"]["msgId"] in by_key, by_key
