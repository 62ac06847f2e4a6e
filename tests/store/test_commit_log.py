"""The CommitLog write path: appends, segment rolls, reopening, torn tails."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidewinder.protocol.message import encode_offset_msg_id, encode_properties
from sidewinder.protocol.record import Host, MessageToStore, record_size
from sidewinder.store.commit_log import AppendResult, AppendStatus, CommitLog
from sidewinder.store.verify import iter_records

HOST = Host(b"\x7f\x00\x00\x01", 10911)
SEGMENT = 16 * 1024
MAX_MESSAGE = 4 * 1024


def commit_log(directory: Path) -> CommitLog:
    log = CommitLog(directory, segment_size=SEGMENT, max_message_size=MAX_MESSAGE, store_host=HOST)
    log.load()
    log.recover()
    return log


def message(topic: str, queue: int, body: bytes, n: int) -> MessageToStore:
    props = encode_properties({"KEYS": f"k-{n}", "TAGS": "TagA"})
    return MessageToStore(
        topic=topic.encode(),
        queue_id=queue,
        body=body,
        properties=props,
        born_host=HOST,
        store_host=HOST,
        born_timestamp=n,
    )


puts = st.lists(
    st.tuples(st.sampled_from(["A", "B"]), st.integers(0, 2), st.integers(0, 3000)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(puts)
@pytest.mark.usefixtures("hot_path")
def test_appends_roll_segments_and_survive_reopening(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[str, int, int]]
) -> None:
    directory = tmp_path_factory.mktemp("commitlog")
    log = commit_log(directory)
    expected = []
    next_offset: dict[tuple[str, int], int] = {}
    for n, (topic, queue, size) in enumerate(plan):
        body = bytes([n % 251]) * size
        result = log.put(message(topic, queue, body, n))
        assert result.status is AppendStatus.PUT_OK
        # Never straddles a segment, and queue offsets count up per (topic, queue).
        assert result.phy_offset // SEGMENT == (result.phy_offset + result.size - 1) // SEGMENT
        assert result.queue_offset == next_offset.get((topic, queue), 0)
        next_offset[(topic, queue)] = result.queue_offset + 1
        expected.append((result.phy_offset, topic, queue, result.queue_offset, body))
    end = log.max_offset
    log.flush()
    log.close()

    reopened = commit_log(directory)
    assert reopened.max_offset == end
    assert reopened.queue_offsets == next_offset
    got = [
        (r.phy_offset, r.topic, r.queue_id, r.queue_offset, bytes(r.body))
        for _, r in iter_records(directory)
    ]
    assert got == expected
    # Appends continue where the log ended.
    more = reopened.put(message("A", 0, b"after", 999))
    assert more.phy_offset >= end
    assert more.queue_offset == next_offset.get(("A", 0), 0)
    reopened.close()


@settings(max_examples=40, deadline=None)
@given(st.integers(20, 40), st.data())
@pytest.mark.usefixtures("hot_path")
def test_a_torn_tail_keeps_everything_before_it(
    tmp_path_factory: pytest.TempPathFactory, count: int, data: st.DataObject
) -> None:
    directory = tmp_path_factory.mktemp("commitlog")
    log = commit_log(directory)
    results = [log.put(message("T", 0, bytes(700), n)) for n in range(count)]
    end = log.max_offset
    log.flush()
    log.close()
    damage_at = data.draw(st.integers(results[0].phy_offset, end - 1), label="damage_at")
    segment = directory / f"{damage_at // SEGMENT * SEGMENT:020d}"
    with open(segment, "r+b") as f:
        f.seek(damage_at % SEGMENT)
        f.write(b"\xde\xad")

    reopened = commit_log(directory)
    kept = [(r.phy_offset, r.queue_offset) for r in results if r.phy_offset + r.size <= damage_at]
    survivors = [
        (r.phy_offset, r.queue_offset, (r.topic, r.queue_id)) for _, r in iter_records(directory)
    ]
    # Everything wholly before the damage is kept, exactly.
    assert [s[:2] for s in survivors[: len(kept)]] == kept
    # Damage to bytes no check covers (timestamps, hosts) may leave that record in place; the
    # log never grows, and the queue's offsets still run without a gap.
    assert len(survivors) <= count
    # A queue may start at any offset, so a damaged first QUEUEOFFSET cannot be told from a
    # real one; from there on the run has no gap.
    queue_offsets = [q for _, q, key in survivors if key == ("T", 0)]
    first = queue_offsets[0] if queue_offsets else 0
    assert queue_offsets == list(range(first, first + len(queue_offsets)))
    after = reopened.put(message("T", 0, b"x", 1000))
    assert after.status is AppendStatus.PUT_OK
    assert after.queue_offset == (first + len(queue_offsets) if queue_offsets else 0)
    reopened.close()
    # The cut tail was zeroed: nothing stale follows the new record, now or after reopening.
    assert sum(1 for _ in iter_records(directory)) == len(survivors) + 1
    again = commit_log(directory)
    assert again.max_offset == after.phy_offset + after.size
    again.close()


@pytest.mark.usefixtures("hot_path")
def test_limits_are_clear_errors(tmp_path: Path) -> None:
    log = commit_log(tmp_path)
    # maxMessageSize is the body's limit, as RocketMQ 5 counts it; the record may be larger.
    largest = message("T", 0, bytes(MAX_MESSAGE), 0)
    assert largest.record_size > MAX_MESSAGE
    assert log.put(largest).status is AppendStatus.PUT_OK
    too_big = message("T", 0, bytes(MAX_MESSAGE + 1), 0)
    result = log.put(too_big)
    assert result.status is AppendStatus.MESSAGE_ILLEGAL
    assert f"body of {MAX_MESSAGE + 1} bytes is larger than maxMessageSize {MAX_MESSAGE}" in (
        result.remark
    )
    long_props = MessageToStore(topic=b"T", queue_id=0, body=b"", properties=b"x" * 40000)
    assert "properties of 40000 bytes" in log.put(long_props).remark
    log.close()
    small = CommitLog(tmp_path / "small", segment_size=1024, max_message_size=4096, store_host=HOST)
    small.load()
    result = small.put(message("T", 0, bytes(2000), 0))
    assert result.status is AppendStatus.MESSAGE_ILLEGAL
    assert "cannot fit a mappedFileSizeCommitLog 1024 segment" in result.remark
    small.close()


@pytest.mark.usefixtures("hot_path")
def test_batch_gets_consecutive_offsets_in_one_segment(tmp_path: Path) -> None:
    log = commit_log(tmp_path)
    for n in range(4):  # about 16,040 of the segment's 16,384 bytes
        assert log.put(message("T", 1, bytes(3900), n)).status is AppendStatus.PUT_OK
    batch = [message("T", 1, bytes(500), n) for n in range(4, 9)]
    result = log.put_batch(batch)
    size = record_size(body_len=500, topic_len=1, properties_len=len(batch[0].properties))
    assert (result.count, result.queue_offset, result.size) == (5, 4, 5 * size)
    assert result.phy_offset == SEGMENT  # did not fit the first segment's tail
    phys = [SEGMENT + n * size for n in range(5)]
    assert result.msg_ids == tuple(encode_offset_msg_id(HOST.address, HOST.port, p) for p in phys)
    assert result.msg_ids[1] == f"7F00000100002A9F{SEGMENT + size:016X}"
    with pytest.raises(ValueError, match="one topic and queue"):
        log.put_batch([message("T", 1, b"", 0), message("U", 1, b"", 1)])
    log.close()


def test_msg_ids_of_an_ipv6_store_host() -> None:
    host = Host(bytes(range(16)), 10911)
    result = AppendResult(AppendStatus.PUT_OK, phy_offsets=(0, 1 << 40), store_host=host)
    assert result.msg_ids == tuple(
        encode_offset_msg_id(host.address, 10911, p) for p in (0, 1 << 40)
    )
    assert len(result.msg_ids[1]) == 56


def test_the_next_segment_is_made_ahead_and_warmed(tmp_path: Path) -> None:
    with ThreadPoolExecutor(1) as executor:
        log = CommitLog(tmp_path, segment_size=1 << 20, max_message_size=1 << 16, store_host=HOST)
        log.files.preallocate(executor, warm=True)
        log.load()
        log.recover()
        log.put(message("T", 0, b"x" * 100, 0))
        executor.submit(lambda: None).result()  # the allocation ran
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == [f"{0:020d}", f"{1 << 20:020d}"]
        # Every segment has its blocks before it is used (none is sparse: a full disk must
        # fail the allocation, not a write into the map).
        for name in names:
            assert (tmp_path / name).stat().st_blocks * 512 >= 1 << 20
        while log.files.last_file is not None and log.files.last_file.file_from_offset == 0:
            log.put(message("T", 0, b"y" * 1000, 1))
        assert log.files.last_file is not None
        assert log.files.last_file.file_from_offset == 1 << 20
        log.close()
    # The prepared segment after that one was never used: closing removed it.
    assert sorted(p.name for p in tmp_path.iterdir()) == names


@pytest.mark.usefixtures("hot_path")
def test_a_chunk_larger_than_the_staging_buffer_lands_whole_across_segments(
    tmp_path: Path,
) -> None:
    """put_many encodes into a staging buffer and writes it into the segment with pwrite; a
    chunk of 3 MiB goes through the 1 MiB buffer in parts and over a segment's end."""
    segment = 2 << 20
    log = CommitLog(tmp_path, segment_size=segment, max_message_size=1 << 16, store_host=HOST)
    log.load()
    log.recover()
    chunk = [message("T", n % 3, bytes([n]) * 60_000, n) for n in range(50)]
    phys, offsets, error = log.put_many(chunk, now_ms=7)
    assert error is None and len(phys) == 50
    assert offsets == [n // 3 for n in range(50)]
    assert log.files.files[-1].file_from_offset == segment  # it rolled
    log.flush()
    log.close()
    got = [
        (r.phy_offset, r.queue_id, r.queue_offset, bytes(r.body)) for _, r in iter_records(tmp_path)
    ]
    assert got == [(p, n % 3, n // 3, bytes([n]) * 60_000) for n, p in enumerate(phys)]


def test_a_failed_write_gives_its_queue_offsets_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error writing a chunk into the segment fails the put and leaves no gap: the
    queue offsets the unwritten records took are taken again by the next put."""
    log = commit_log(tmp_path)
    assert log.put(message("T", 0, b"first", 0)).queue_offset == 0
    end = log.max_offset

    def broken(fd: int, data: object, offset: int) -> int:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr("sidewinder.store.mapped_file.os.pwrite", broken)
        with pytest.raises(OSError, match="Input/output"):
            log.put_many([message("T", 0, b"lost", 1), message("T", 1, b"lost", 2)])
    assert log.max_offset == end
    assert log.queue_offsets == {("T", 0): 1, ("T", 1): 0}
    again = log.put(message("T", 0, b"second", 3))
    assert (again.phy_offset, again.queue_offset) == (end, 1)
    assert [bytes(r.body) for r in log.records()] == [b"first", b"second"]
    log.close()
