"""ConsumeQueue and IndexService writers: edges the RocketMQ comparison does not reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewinder.store.consume_queue import ConsumeQueue, ConsumeQueueGapError
from sidewinder.store.index_file import INDEX_HEADER, IndexFile, IndexFileView
from sidewinder.store.index_service import IndexService

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
