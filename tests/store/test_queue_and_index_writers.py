"""ConsumeQueue and IndexService writers: edges the RocketMQ comparison does not reach."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol.message import decode_properties, encode_properties
from sidewinder.store import index_file
from sidewinder.store.consume_queue import (
    CQ_ENTRY,
    ConsumeQueue,
    ConsumeQueueGapError,
    read_queue,
)
from sidewinder.store.dispatchers import last_property
from sidewinder.store.index_file import (
    INDEX_HEADER,
    IndexFile,
    IndexFileView,
    TopicKeyHasher,
    index_key,
    index_key_hash,
)
from sidewinder.store.index_service import IndexService
from tests.hot_path import IMPLEMENTATIONS, using

FILE = 5 * 20  # five entries per file


def queue(root: Path) -> ConsumeQueue:
    cq = ConsumeQueue(root, "T", 3, FILE)
    cq.load()
    cq.recover()
    return cq


def test_entries_roll_files_and_survive_reopening(tmp_path: Path) -> None:
    cq = queue(tmp_path)
    for n in range(12):
        assert cq.put(n, 1000 + n * 100, 100, n) is True
    assert cq.put(11, 2100, 100, 11) is False  # already there
    with pytest.raises(ConsumeQueueGapError, match="entry 14 after 12"):
        cq.put(14, 9999, 100, 0)
    assert len(list((tmp_path / "T" / "3").iterdir())) == 3
    cq.flush()
    cq.close()
    again = queue(tmp_path)
    assert (again.min_offset, again.max_offset, again.max_phy_offset) == (0, 12, 2200)
    entry = again.entry(7)
    assert entry is not None and (entry.phy_offset, entry.size, entry.tags_code) == (1700, 100, 7)
    assert again.entry(12) is None
    again.close()


def test_a_queue_starting_late_is_padded_with_blanks(tmp_path: Path) -> None:
    cq = queue(tmp_path)
    cq.put(7, 500, 60, 1)
    (only,) = (tmp_path / "T" / "3").iterdir()
    assert only.name == f"{5 * 20:020d}"  # the file holding entry 7
    blank = cq.entry(5)
    assert blank is not None and blank.is_blank
    assert cq.max_offset == 8
    cq.close()
    again = queue(tmp_path)
    assert (again.min_offset, again.max_offset) == (5, 8)
    again.close()


@pytest.mark.usefixtures("hot_path")
def test_index_rolls_to_a_new_file_and_finds_keys_in_both(tmp_path: Path) -> None:
    index = IndexService(tmp_path, hash_slot_num=7, max_index_num=5)
    index.load()
    for n in range(10):
        index.build_index("T", [f"uniq-{n}", f"key-{n}"], 1000 + n, 1_700_000_000_000 + n)
    assert len(index.files) == 5  # four entries per file: entry 0 is never used
    second = index.files[1]
    assert (second.begin_phy_offset, second.end_phy_offset) == (1002, 1003)
    assert index.query("T", "key-0") == [1000]
    assert index.query("T", "uniq-9") == [1009]
    assert index.query("U", "key-0") == []
    index.build_index("T", ["uniq-9", "key-9"], 1009, 1_700_000_000_009)  # repeated: no-op
    assert sum(f.index_count - 1 for f in index.files) == 20
    index.flush()
    index.close()
    reloaded = IndexService(tmp_path, hash_slot_num=7, max_index_num=5)
    reloaded.load()
    assert reloaded.query("T", "key-5") == [1005]
    reloaded.close()


@pytest.mark.usefixtures("hot_path")
def test_a_slot_past_a_stale_header_count_never_makes_a_chain_loop(tmp_path: Path) -> None:
    path = tmp_path / "20260101000000000"
    index = IndexFile(path, 1, 100)  # one slot: every key chains through it
    for n in range(3):
        index.put_key(f"T#k{n}", 1000 + n, 1_700_000_000_000)
    # A crash after the slot moved on but before the header counted the entry: count 3, not 4.
    header = list(INDEX_HEADER.unpack_from(index.file.buffer, 0))
    header[-1] = 3
    INDEX_HEADER.pack_into(index.file.buffer, 0, *header)
    index.close()
    again = IndexFile(path, 1, 100)
    again.put_key("T#k9", 2000, 1_700_000_000_000)
    view = IndexFileView(again.file.buffer, 1)
    entries = list(view.chain(0))
    assert [e.phy_offset for e in entries] == [2000]  # entry 3, with no loop back to itself
    assert entries[0].prev_index == 0
    again.close()


_HEX_KEYS = st.text("0123456789ABCDEF", min_size=32, max_size=32).map(str.encode)
_KEY_BYTES = st.binary(max_size=40) | _HEX_KEYS | st.text(max_size=1100).map(str.encode)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(topic=st.binary(max_size=30) | st.text(max_size=20).map(str.encode), key=_KEY_BYTES)
def test_keys_hashed_from_bytes_as_from_the_decoded_index_key(
    implementation: str, topic: bytes, key: bytes
) -> None:
    with using(implementation):
        expected = index_key_hash(
            index_key(topic.decode(errors="surrogateescape"), key.decode(errors="surrogateescape"))
        )
        hasher = TopicKeyHasher()
        assert hasher.key_hash(topic, key) == expected
        assert hasher.key_hash(topic, key) == expected  # the topic's cached prefix
        if key.isascii():
            assert index_file.ascii_hash(key) == index_file.ascii_hash_py(key)


def test_a_key_whose_hash_is_integer_min_value_hashes_to_zero() -> None:
    assert index_key_hash("T#ajvakuzm") == 0  # "T#ajvakuzm".hashCode() == Integer.MIN_VALUE
    assert TopicKeyHasher().key_hash(b"T", b"ajvakuzm") == 0


@given(st.dictionaries(st.text("TAGSKEYUNIQ_x", min_size=1, max_size=8), st.text(max_size=8)))
def test_last_property_reads_what_the_full_decoder_reads(properties: dict[str, str]) -> None:
    raw = encode_properties(properties, trailing=False)
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        value = decode_properties(raw).get(name)
        found = last_property(raw, name.encode() + b"\x01")
        assert found == (None if value is None else value.encode())


def test_last_property_takes_the_last_of_a_repeated_name_and_skips_longer_names() -> None:
    assert last_property(b"TAGS\x01a\x02TAGS\x01b", b"TAGS\x01") == b"b"
    assert last_property(b"TAGS\x01a\x02MYTAGS\x01b", b"TAGS\x01") == b"a"
    assert last_property(b"k\x01TAGS\x01b", b"TAGS\x01") is None  # inside a value
    assert last_property(b"KEYS\x01x", b"TAGS\x01") is None


def test_reserved_entries_skip_those_written_and_leave_file_ends_to_put(tmp_path: Path) -> None:
    cq = queue(tmp_path)
    assert cq.reserve(0, 3) == 0  # a new queue's first file is made
    cq.write_reserved(b"".join(CQ_ENTRY.pack(phy, 10, 7) for phy in (100, 110, 120)), 130)
    assert cq.reserve(1, 3) == 2  # a repeat of entries 1 and 2, then one new
    cq.write_reserved(CQ_ENTRY.pack(130, 10, 7), 140)
    assert cq.reserve(9, 1) is None  # a gap: put refuses it
    assert cq.reserve(4, 2) is None  # runs past the file's end: put makes the next file
    assert cq.max_offset == 4 and cq.max_phy_offset == 140
    assert [(e.phy_offset, e.size) for e in read_queue(tmp_path / "T" / "3")] == [
        (100, 10),
        (110, 10),
        (120, 10),
        (130, 10),
    ]
    cq.close()
