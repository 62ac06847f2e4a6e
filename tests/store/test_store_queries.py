"""Offsets by time, earliest message times and the runtime statistics of the store."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from sidewinder.protocol.record import Host
from sidewinder.store.message_store import MessageStore
from tests.store.small_store import HOST, message, store_config, wait_dispatched

BASE_MS = 1_700_000_000_000


async def started(root: Path, stamps: list[int]) -> MessageStore:
    """A store holding one message per stamp in queue 0 of "T", stored at that time."""
    now = [BASE_MS]
    store = MessageStore(store_config(root), store_host=HOST, clock=lambda: now[0])
    await store.start()
    for n, stamp in enumerate(stamps):
        now[0] = stamp
        await store.put_message(message("T", 0, n))
    await wait_dispatched(store, "T", 0, len(stamps))
    return store


def test_offset_by_time_finds_the_exact_or_nearest_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await started(tmp_path, [BASE_MS + 100 * n for n in range(50)])
        assert store.offset_by_time("T", 0, BASE_MS + 700) == 7  # exact
        assert store.offset_by_time("T", 0, BASE_MS + 730) == 7  # nearer the earlier
        assert store.offset_by_time("T", 0, BASE_MS + 770) == 8  # nearer the later
        assert store.offset_by_time("T", 0, BASE_MS + 750) == 7  # a tie: the earlier
        assert store.offset_by_time("T", 0, BASE_MS - 5000) == 0  # before everything
        assert store.offset_by_time("T", 0, BASE_MS + 99_999) == 49  # after everything
        assert store.offset_by_time("T", 1, BASE_MS) == 0  # no such queue
        assert store.offset_by_time("Nope", 0, BASE_MS) == 0
        await store.shutdown()

    asyncio.run(scenario())


def test_earliest_message_and_store_times(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        assert store.earliest_message_time() == -1
        assert store.earliest_message_time("T", 0) == -1
        await store.shutdown()
        store = await started(tmp_path, [BASE_MS + 5, BASE_MS + 9, BASE_MS + 12])
        assert store.earliest_message_time() == BASE_MS + 5
        assert store.earliest_message_time("T", 0) == BASE_MS + 5
        assert store.store_time_at("T", 0, 2) == BASE_MS + 12
        assert store.store_time_at("T", 0, 3) == -1
        # An IPv6 born host moves STORETIMESTAMP 12 bytes on.
        from_v6 = replace(message("T", 0, 3), born_host=Host(bytes(15) + b"\x01", 1234))
        store.clock = lambda: BASE_MS + 40
        await store.put_message(from_v6)
        await wait_dispatched(store, "T", 0, 4)
        assert store.store_time_at("T", 0, 3) == BASE_MS + 40
        await store.shutdown()

    asyncio.run(scenario())


def test_runtime_info_counts_puts_and_gets(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await started(tmp_path, [BASE_MS + n for n in range(20)])
        assert len(store.get_messages("T", 0, 0, 8).messages) == 8
        store.get_messages("T", 0, 20, 8)  # a miss
        for second in range(12):
            store.stats.sample(now=1000.0 + second)
        info = store.runtime_info()
        size = sum(len(message("T", 0, n).body) for n in range(20))
        assert info["putMessageTimesTotal"] == "20"
        assert int(info["putMessageSizeTotal"]) > size
        assert info["commitLogMaxOffset"] == info["putMessageSizeTotal"]
        assert info["commitLogMinOffset"] == "0"
        assert info["earliestMessageTimeStamp"] == str(BASE_MS)
        assert info["dispatchBehindBytes"] == "0"
        assert 0 <= float(info["commitLogDiskRatio"]) <= 1
        assert info["putMessageDistributeTime"].startswith("[<=0ms]:")
        assert sum(int(w.split(":")[1]) for w in info["putMessageDistributeTime"].split()) == 20
        # Ten seconds of samples with no new traffic: a 10 s rate of 0, no 1 min rate yet.
        assert info["putTps"].split(" ")[0] == "0.0"
        assert info["putTps"].split(" ")[1] == ""
        assert int(info["bootTimestamp"]) > 0
        assert store.stats.get_found_times == 1 and store.stats.get_miss_times == 1
        assert store.stats.get_transferred_messages == 8
        await store.shutdown()

    asyncio.run(scenario())
