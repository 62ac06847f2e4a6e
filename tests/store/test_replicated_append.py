"""A slave's store fed a master store's CommitLog bytes, cut anywhere: the slave's CommitLog is
the master's byte for byte, its queues list only whole records at every step, it refuses
bytes that do not continue its log, and after a crash with half a record at its end it
recovers to the last whole one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidewinder.store.commit_log import ReplicationError
from sidewinder.store.config import BrokerRole, StoreConfig
from sidewinder.store.message_store import MessageStore, PutStatus
from tests.store.small_store import HOST, message, store_config

SEGMENT = 64 * 1024  # a few segments, so frames meet segment ends and blank tails


def _config(root: Path, **extra: object) -> StoreConfig:
    return store_config(root).model_copy(update={"mapped_file_size_commit_log": SEGMENT, **extra})


async def _master(root: Path, count: int) -> MessageStore:
    master = MessageStore(_config(root), store_host=HOST)
    await master.start()
    for n in range(count):
        result = await master.put_message(message("Rep", n % 3, n, size=200 + (n * 37) % 900))
        assert result.status is PutStatus.PUT_OK
    return master


def _slave(root: Path) -> MessageStore:
    return MessageStore(_config(root, broker_role=BrokerRole.SLAVE), store_host=HOST)


def _frames(master: MessageStore, cuts: list[int]) -> list[tuple[int, bytes]]:
    """The master's CommitLog as a master streams it: within segments, cut at `cuts` sizes."""
    frames = []
    offset, n = 0, 0
    while True:
        size = cuts[n % len(cuts)] if cuts else 32 * 1024
        data = master.commit_log_data(offset, size)
        if data is None:
            return frames
        frames.append((offset, data))
        offset += len(data)
        n += 1


async def _queue_counts(store: MessageStore) -> list[int]:
    await store.caught_up(2.0)
    return [store.max_offset_in_queue("Rep", q) for q in range(3)]


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 5000), min_size=1, max_size=6))
def test_any_cutting_gives_the_masters_log_and_whole_records_only(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[int]
) -> None:
    async def scenario() -> None:
        root = tmp_path_factory.mktemp("rep")
        master = await _master(root / "master", 120)
        slave = _slave(root / "slave")
        await slave.start()
        try:
            for offset, data in _frames(master, cuts):
                slave.append_replicated(offset, data)
                counts = await _queue_counts(slave)
                # Every queue entry points at a whole record the slave has.
                for q, count in enumerate(counts):
                    if count:
                        got = slave.get_messages("Rep", q, count - 1, 1)
                        assert got.messages, (q, count)
                        end = slave.replicated_end
                        assert end <= slave.max_phy_offset
            assert slave.max_phy_offset == master.max_phy_offset
            assert await _queue_counts(slave) == await _queue_counts(master)
            whole = master.max_phy_offset
            assert slave.commit_log_data(0, whole) == master.commit_log_data(0, whole)
        finally:
            await slave.shutdown()
            await master.shutdown()

    asyncio.run(scenario())


def test_bytes_that_do_not_continue_the_log_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        master = await _master(tmp_path / "master", 10)
        slave = _slave(tmp_path / "slave")
        await slave.start()
        try:
            first = master.commit_log_data(0, 1000)
            assert first is not None
            slave.append_replicated(0, first)
            with pytest.raises(ReplicationError, match="ends at 1000"):
                slave.append_replicated(2000, b"x" * 10)
            with pytest.raises(ReplicationError, match="segment"):
                slave.append_replicated(1000, b"x" * SEGMENT)
            refused = await slave.put_message(message("Rep", 0, 1))
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert "slave" in refused.remark
        finally:
            await slave.shutdown()
            await master.shutdown()

    asyncio.run(scenario())


def test_a_slave_restarted_with_half_a_record_recovers_to_the_last_whole_one(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        master = await _master(tmp_path / "master", 30)
        slave = _slave(tmp_path / "slave")
        await slave.start()
        half = master.max_phy_offset - 150  # inside the last record
        data = master.commit_log_data(0, half)
        assert data is not None and len(data) == half
        slave.append_replicated(0, data)
        whole_end = slave.replicated_end
        assert whole_end < half
        await slave.shutdown()
        again = _slave(tmp_path / "slave")
        await again.start()
        try:
            assert again.max_phy_offset == whole_end, "the torn record is cut at recovery"
            rest = master.commit_log_data(whole_end, SEGMENT)
            assert rest is not None
            again.append_replicated(whole_end, rest)
            assert await _queue_counts(again) == await _queue_counts(master)
        finally:
            await again.shutdown()
            await master.shutdown()

    asyncio.run(scenario())
