"""ConsumeQueue and IndexFile as the real RocketMQ broker wrote them (interop/fixtures.py)."""

from __future__ import annotations

import json
import mmap
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol.message import decode_offset_msg_id, tags_code
from sidewinder.protocol.record import Host, MessageRecord, decode_record
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import (
    CQ_ENTRY_SIZE,
    ConsumeQueueTable,
    CQEntry,
    encode_entry,
    file_name,
    iter_entries,
    read_queue,
)
from sidewinder.store.dispatchers import parse_delay_levels, store_dispatchers
from sidewinder.store.index_file import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    IndexFileView,
    index_key,
    index_key_hash,
)
from sidewinder.store.index_service import IndexService
from sidewinder.store.reput import Reput

DEFAULT_HASH_SLOTS = 5_000_000
DEFAULT_MAX_INDEX = 20_000_000
LEVEL_6_DELAY_MS = 2 * 60 * 1000  # RocketMQ's default ladder: 1s 5s 10s 30s 1m 2m ...


@given(
    st.lists(
        st.tuples(
            st.integers(1, 2**62), st.integers(1, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
        ),
        min_size=1,
        max_size=50,
    ),
    st.integers(0, 10**6),
)
def test_cq_entries_round_trip(entries: list[tuple[int, int, int]], first: int) -> None:
    buf = bytearray(CQ_ENTRY_SIZE * (len(entries) + 3))
    for n, (phy, size, code) in enumerate(entries):
        encode_entry(buf, n * CQ_ENTRY_SIZE, phy_offset=phy, size=size, tags_code=code)
    got = list(iter_entries(buf, first))
    assert got == [CQEntry(first + n, *e) for n, e in enumerate(entries)]
    assert file_name(first) == f"{first * 20:020d}"


@pytest.mark.usefixtures("hot_path")
def test_index_key_hash_is_java_abs_hashcode() -> None:
    assert index_key_hash("TagA") == 2598919
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; Java's abs leaves it negative -> 0.
    assert index_key_hash("polygenelubricants") == 0


@pytest.fixture(scope="module")
def store() -> tuple[Path, dict[str, Any], dict[int, MessageRecord]]:
    from interop.fixtures import ensure_fixture

    fixture = ensure_fixture("store")
    info = json.loads((fixture / "manifest.json").read_text())
    root = fixture / info["store"]
    segments = {int(p.name): p.read_bytes() for p in (root / "commitlog").iterdir()}
    size = len(next(iter(segments.values())))

    def record_at(phy: int) -> MessageRecord:
        base = phy - phy % size
        record = decode_record(segments[base], phy - base, check_crc=True)
        assert isinstance(record, MessageRecord), phy
        return record

    records = {}
    for topic_dir in (root / "consumequeue").iterdir():
        for queue_dir in topic_dir.iterdir():
            for entry in read_queue(queue_dir):
                records[entry.phy_offset] = record_at(entry.phy_offset)
    return root, info, records


pytestmark = [pytest.mark.interop, pytest.mark.reference_fixtures]


@pytest.mark.usefixtures("hot_path")
def test_every_cq_entry_points_at_its_message(
    store: tuple[Path, dict[str, Any], dict[int, MessageRecord]],
) -> None:
    root, info, records = store
    counted: dict[str, int] = {}
    for topic_dir in (root / "consumequeue").iterdir():
        for queue_dir in topic_dir.iterdir():
            for entry in read_queue(queue_dir):
                record = records[entry.phy_offset]
                assert record.topic == topic_dir.name
                assert (record.queue_id, record.queue_offset) == (
                    int(queue_dir.name),
                    entry.queue_offset,
                )
                assert record.total_size == entry.size
                if topic_dir.name == "SCHEDULE_TOPIC_XXXX":
                    # Delayed messages carry their deliver time instead of a tags hash.
                    assert entry.tags_code == record.store_timestamp + LEVEL_6_DELAY_MS
                else:
                    assert entry.tags_code == tags_code(record.properties().get("TAGS"))
                counted[topic_dir.name] = counted.get(topic_dir.name, 0) + 1
    for topic in ("FixtureTags", "FixtureSizes", "FixtureEmpty", "FixtureBatch", "FixtureClients"):
        assert counted[topic] == len(info["sent"][topic]), topic


@pytest.mark.usefixtures("hot_path")
def test_every_key_and_unique_key_is_in_the_index(
    store: tuple[Path, dict[str, Any], dict[int, MessageRecord]],
) -> None:
    root, info, _ = store
    views = [
        IndexFileView((p).read_bytes(), DEFAULT_HASH_SLOTS)
        for p in sorted((root / "index").iterdir())
    ]
    assert views and all(v.header.index_count > 1 for v in views)

    def found(key: str) -> set[int]:
        return {phy for view in views for phy in view.lookup(key, max_count=1000)}

    checked = 0
    for topic in ("FixtureTags", "FixtureSizes", "FixtureBatch"):
        for sent in info["sent"][topic]:
            _, _, phy = decode_offset_msg_id(sent["offsetMsgId"])
            assert phy in found(index_key(topic, sent["keys"])), sent
            assert phy in found(index_key(topic, sent["msgId"])), sent  # Java's UNIQ_KEY
            checked += 1
    assert checked == 600 + 12 + 30
    assert not found(index_key("FixtureTags", "no-such-key"))


@pytest.mark.usefixtures("hot_path")
def test_our_dispatch_of_rocketmqs_commitlog_writes_its_queues_and_index(
    store: tuple[Path, dict[str, Any], dict[int, MessageRecord]], tmp_path: Path
) -> None:
    """Golden: reput over the CommitLog RocketMQ wrote gives its ConsumeQueue files byte for
    byte (30-entry files, so batches go both whole and record by record across file ends;
    delayed, transactional and batch messages included), and its index's bytes."""
    root, info, _ = store
    conf = info["broker_conf"]
    shutil.copytree(root / "commitlog", tmp_path / "commitlog")
    log = CommitLog(
        tmp_path / "commitlog",
        segment_size=int(conf["mappedFileSizeCommitLog"]),
        max_message_size=4 << 20,
        store_host=Host(b"\x7f\x00\x00\x01", 0),
    )
    log.load()
    log.recover()
    queues = ConsumeQueueTable(tmp_path / "consumequeue", int(conf["mappedFileSizeConsumeQueue"]))
    index = IndexService(tmp_path / "index", DEFAULT_HASH_SLOTS, DEFAULT_MAX_INDEX)
    index.load()
    levels = parse_delay_levels(StoreConfig().message_delay_level)
    reput = Reput(log, store_dispatchers(queues, index, levels))
    while reput.offset < log.max_offset:
        # Rounds of 7: most fit in a queue file and go whole, those that cross its end go
        # record by record.
        before = reput.offset
        reput.dispatch_until(log.max_offset, max_records=7)
        assert reput.offset > before
    Reput(log, store_dispatchers(queues, index, levels)).dispatch_all()  # changes nothing
    queues.close()
    index.close()
    log.close()

    def files(under: Path) -> dict[Path, bytes]:
        return {p.relative_to(under): p.read_bytes() for p in under.rglob("*") if p.is_file()}

    theirs, ours = files(root / "consumequeue"), files(tmp_path / "consumequeue")
    assert sorted(ours) == sorted(theirs)
    for rel, data in theirs.items():
        assert ours[rel] == data, rel

    (their_index,) = (root / "index").iterdir()
    (our_index,) = (tmp_path / "index").iterdir()
    with their_index.open("rb") as a, our_index.open("rb") as b:
        theirs_map = mmap.mmap(a.fileno(), 0, access=mmap.ACCESS_READ)
        ours_map = mmap.mmap(b.fileno(), 0, access=mmap.ACCESS_READ)
        count = IndexFileView(theirs_map, DEFAULT_HASH_SLOTS).header.index_count
        assert count > 600
        # Header, slots and every written entry (the rest of the 420 MB file is zeros).
        used = INDEX_HEADER_SIZE + DEFAULT_HASH_SLOTS * 4 + count * INDEX_ENTRY_SIZE
        assert ours_map[:used] == theirs_map[:used]
        theirs_map.close()
        ours_map.close()
