"""transientStorePoolEnable: appends go to pooled buffers, reach the file on commit, then flush."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sidewinder.store.message_store import GetStatus, MessageStore, PutStatus
from sidewinder.store.verify import verify_store
from tests.store.small_store import HOST, message, store_config, wait_dispatched


def pooled(root: Path, **extra: object):  # type: ignore[no-untyped-def]
    return store_config(
        root, transient_store_pool_enable=True, transient_store_pool_size=2, **extra
    )


def test_appends_are_invisible_until_committed(tmp_path: Path) -> None:
    async def scenario() -> None:
        # Commits only when asked: interval and thorough interval a minute away.
        config = pooled(
            tmp_path, commit_interval_commit_log=60_000, commit_commit_log_thorough_interval=60_000
        )
        store = MessageStore(config, store_host=HOST)
        await store.start()
        assert store._parts.pool is not None
        result = await store.put_message(message("P", 0, 1))
        assert result.status is PutStatus.PUT_OK and result.append is not None
        await asyncio.sleep(0.2)
        assert store.get_messages("P", 0, 0, 8).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        segment = tmp_path / "commitlog" / f"{0:020d}"
        assert segment.read_bytes()[: result.append.size] == bytes(result.append.size)
        assert store.max_phy_offset == 0
        assert store.runtime_info()["remainTransientStoreBufferNumbs"] == "1"
        await asyncio.get_running_loop().run_in_executor(None, store._commit_log.commit)
        store._dispatch.wakeup.set()
        await wait_dispatched(store, "P", 0, 1)
        assert segment.read_bytes()[4:8] == b"\xda\xa3\x20\xa7"
        await store.shutdown()

    asyncio.run(scenario())


def test_rolling_segments_reuse_the_pool_and_lose_nothing(tmp_path: Path) -> None:
    count = 5000

    async def write() -> None:
        store = MessageStore(pooled(tmp_path, commit_interval_commit_log=20), store_host=HOST)
        await store.start()
        for n in range(count):
            assert (await store.put_message(message("P", n % 3, n, size=900))).append
        for queue in range(3):
            await wait_dispatched(store, "P", queue, len(range(queue, count, 3)))
        await store.shutdown()

    async def read_back() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        for queue in range(3):
            offset, seen = 0, []
            while (got := store.get_messages("P", queue, offset, 32)).status is GetStatus.FOUND:
                seen += [int.from_bytes(v[20:28], "big") for v in got.messages]
                offset = got.next_begin_offset
            assert seen == list(range(len(range(queue, count, 3))))
        await store.shutdown()

    asyncio.run(write())
    segments = sorted((tmp_path / "commitlog").iterdir())
    assert len(segments) >= 4  # more segments than pooled buffers: buffers went back and out
    asyncio.run(read_back())
    verify_store(tmp_path, store_config(tmp_path))


def test_the_pool_is_ignored_under_sync_flush(tmp_path: Path) -> None:
    store = MessageStore(pooled(tmp_path, flush_disk_type="SYNC_FLUSH"), store_host=HOST)
    assert store._parts.pool is None
