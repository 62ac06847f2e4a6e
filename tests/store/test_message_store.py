"""MessageStore: puts, flush modes, dispatch and RocketMQ's getMessage statuses, crash safety."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sidewinder.protocol.message import tags_code
from sidewinder.protocol.record import decode_record
from sidewinder.store.message_store import GetStatus, MessageStore, PutStatus
from sidewinder.store.verify import verify_store
from tests.store.small_store import HOST, message, store_config, wait_dispatched


def test_get_messages_statuses_and_tag_filter(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        assert store.get_messages("T", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        for n in range(40):
            result = await store.put_message(message("T", 0, n, tag="TagA" if n % 2 else "TagB"))
            assert result.status is PutStatus.PUT_OK
        await wait_dispatched(store, "T", 0, 40)
        got = store.get_messages("T", 0, 0, 10)
        assert (got.status, got.next_begin_offset, got.min_offset, got.max_offset) == (
            GetStatus.FOUND,
            10,
            0,
            40,
        )
        first = decode_record(got.messages[0])
        assert first is not None and first.queue_offset == 0  # whole records, in order
        only_a = store.get_messages("T", 0, 0, 5, tags_codes=frozenset({tags_code("TagA")}))
        assert [decode_record(m).queue_offset for m in only_a.messages] == [1, 3, 5, 7, 9]
        none = store.get_messages("T", 0, 0, 5, tags_codes=frozenset({tags_code("TagZ")}))
        # A filtered scan stops at the end of the queue file (30 entries here), as RocketMQ's.
        assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 30)
        assert store.get_messages("T", 0, 40, 5).status is GetStatus.OFFSET_OVERFLOW_ONE
        badly = store.get_messages("T", 0, 99, 5)
        assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 40)
        (hit,) = store.query_message("T", "k-7")
        assert hit.queue_offset == 7
        await store.shutdown()

    asyncio.run(scenario())
    report = verify_store(tmp_path, store_config(tmp_path))
    assert (report.records, report.cq_entries) == (40, 40)
    assert report.index_entries == 80
    assert not (tmp_path / "abort").exists()


@pytest.mark.usefixtures("hot_path")
def test_sync_flush_group_commit_covers_many_waiters_per_fdatasync(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[PutStatus], int]:
        store = MessageStore(store_config(tmp_path, flush_disk_type="SYNC_FLUSH"), store_host=HOST)
        await store.start()
        results = await asyncio.gather(
            *(store.put_message(message("T", n % 4, n)) for n in range(256))
        )
        await wait_dispatched(store, "T", 3, 64)
        flushes = store._group_commit.flushes
        await store.shutdown()
        return [r.status for r in results], flushes

    statuses, flushes = asyncio.run(scenario())
    assert statuses == [PutStatus.PUT_OK] * 256
    assert 1 <= flushes < 256 // 4, f"{flushes} fdatasyncs for 256 waiters"


@pytest.mark.usefixtures("hot_path")
def test_wait_false_returns_before_the_flush(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MessageStore(store_config(tmp_path, flush_disk_type="SYNC_FLUSH"), store_host=HOST)
        await store.start()
        result = await store.put_message(message("T", 0, 1, wait=False))
        assert result.status is PutStatus.PUT_OK
        await wait_dispatched(store, "T", 0, 1)  # dispatched once the woken flush ran
        await store.shutdown()

    asyncio.run(scenario())


def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        first = MessageStore(store_config(tmp_path), store_host=HOST)
        await first.start()
        child = subprocess.run(
            [sys.executable, "-c", OPEN_AND_REPORT, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        await first.shutdown()
        assert child.returncode == 3, child.stderr
        assert "in use by another process" in child.stdout

    asyncio.run(scenario())


OPEN_AND_REPORT = """
import asyncio, sys
from pathlib import Path
from sidewinder.protocol.record import Host
from sidewinder.store.message_store import MessageStore
from sidewinder.store.run_markers import StoreLockedError
from tests.store.small_store import store_config
try:
    asyncio.run(MessageStore(store_config(Path(sys.argv[1])), store_host=Host(bytes(4), 0)).start())
except StoreLockedError as exc:
    print(exc); sys.exit(3)
"""

# A child that puts under SYNC_FLUSH and prints each acknowledged (phy offset, key) until killed.
PRODUCER = """
import asyncio, json, sys
from pathlib import Path
import structlog
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
from sidewinder.store.message_store import MessageStore, PutStatus
from tests.store.small_store import HOST, message, store_config

async def main():
    store = MessageStore(store_config(Path(sys.argv[1]), flush_disk_type="SYNC_FLUSH"),
                         store_host=HOST)
    await store.start()
    n = 0
    while n < 200_000:
        batch = [store.put_message(message("Crash", (n + i) % 4, n + i, size=(n + i) % 700))
                 for i in range(16)]
        for i, result in enumerate(await asyncio.gather(*batch)):
            if result.status is PutStatus.PUT_OK:
                print(json.dumps([result.append.phy_offset, n + i]), flush=True)
        n += 16

asyncio.run(main())
"""


def test_sigkill_keeps_every_acknowledged_sync_flush_message(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    acked: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(acked) < 3000 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acked.append(tuple(json.loads(line)))
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    acked += [tuple(json.loads(line)) for line in child.stdout.read().splitlines() if line]
    assert len(acked) >= 3000, "the producer did not get going"

    async def reopen() -> None:
        store = MessageStore(store_config(tmp_path, flush_disk_type="SYNC_FLUSH"), store_host=HOST)
        await store.start()
        assert store.crashed_last_time
        for phy, n in acked:
            record = store.lookup_message_by_offset(phy)
            expected = message("Crash", n % 4, n, size=n % 700)
            assert record is not None, f"acknowledged message {n} at {phy} is gone"
            assert bytes(record.body) == expected.body
            assert record.properties()["KEYS"] == f"k-{n}"
        for queue in range(4):
            await wait_dispatched(store, "Crash", queue, sum(1 for _, n in acked if n % 4 == queue))
        await store.shutdown()

    asyncio.run(reopen())
    verify_store(tmp_path, store_config(tmp_path))


def test_a_few_records_are_dispatched_on_the_loop_unless_the_dispatch_thread_holds_the_files(
    tmp_path: Path,
) -> None:
    """One message at a time (an unloaded producer): once its queue's file exists, the loop
    dispatches each itself. While a job on the dispatch thread holds the queue files (a flush,
    a cleanup), the loop leaves them to the thread, which takes them after the job."""

    async def scenario() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        try:
            for n in range(20):
                await store.put_message(message("Inline", 0, n))
                await wait_dispatched(store, "Inline", 0, n + 1)
            assert store._dispatch.inline_dispatches >= 15  # the first made the queue's file
            held, release = threading.Event(), threading.Event()

            def hold() -> None:
                held.set()
                release.wait(10)

            job = asyncio.get_running_loop().run_in_executor(store._parts.dispatch_thread, hold)
            await asyncio.get_running_loop().run_in_executor(None, held.wait, 10)
            before = store._dispatch.inline_dispatches
            await store.put_message(message("Inline", 0, 20))
            await asyncio.sleep(0.05)
            assert store.max_offset_in_queue("Inline", 0) == 20  # not while the job runs
            assert store._dispatch.inline_dispatches == before
            release.set()
            await job
            await wait_dispatched(store, "Inline", 0, 21)
            got = store.get_messages("Inline", 0, 0, 32)
            assert got.status is GetStatus.FOUND and len(got.messages) == 21
        finally:
            await store.shutdown()

    asyncio.run(scenario())
