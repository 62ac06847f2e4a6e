"""Recovery: normal from the last segments, abnormal from the checkpoint's segment."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sidewinder.store.checkpoint import RECOVERY_MARGIN_MS, StoreCheckpoint
from sidewinder.store.consume_queue import CQ_ENTRY_SIZE, read_queue
from sidewinder.store.message_store import GetStatus, MessageStore
from sidewinder.store.recovery import NORMAL_RECOVERY_SEGMENTS
from sidewinder.store.verify import verify_store
from tests.store.small_store import HOST, message, store_config

BASE_MS = 1_700_000_000_000
COUNT = 4000
QUEUES = 4


def body_size(n: int) -> int:
    return 900 + n % 200


async def fill(root: Path) -> None:
    """COUNT messages over several 1 MiB segments; the clock steps 10 s every 500 messages."""
    now = [BASE_MS]
    store = MessageStore(store_config(root), store_host=HOST, clock=lambda: now[0])
    await store.start()
    for n in range(COUNT):
        now[0] = BASE_MS + (n // 500) * 10_000
        result = await store.put_message(message("R", n % QUEUES, n, size=body_size(n)))
        assert result.append is not None and result.append.queue_offset == n // QUEUES
    await store.shutdown()


def segments(root: Path) -> list[int]:
    return sorted(int(p.name) for p in (root / "commitlog").iterdir() if p.name.isdigit())


def first_timestamp(root: Path, start: int) -> int:
    data = (root / "commitlog" / f"{start:020d}").read_bytes()
    return int.from_bytes(data[56:64], "big")  # STORETIMESTAMP after an IPv4 BORNHOST


async def read_all(store: MessageStore) -> dict[int, bytes]:
    """Every message body by n, read through getMessage queue by queue."""
    bodies: dict[int, bytes] = {}
    for queue in range(QUEUES):
        offset = 0
        while True:
            got = store.get_messages("R", queue, offset, 32)
            if got.status is not GetStatus.FOUND:
                break
            for view in got.messages:
                record = store.lookup_message_by_offset(int.from_bytes(view[28:36], "big"))
                assert record is not None
                n = int(record.properties()["KEYS"][2:])
                bodies[n] = bytes(record.body)
            offset = got.next_begin_offset
    return bodies


def test_normal_recovery_walks_only_the_last_segments(tmp_path: Path) -> None:
    asyncio.run(fill(tmp_path))
    starts = segments(tmp_path)
    assert len(starts) > NORMAL_RECOVERY_SEGMENTS

    async def reopen() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        assert store.recovery is not None and not store.recovery.crashed
        assert store.recovery.walked_from == starts[-NORMAL_RECOVERY_SEGMENTS]
        # The queues were whole at shutdown: nothing is dispatched again.
        assert store.recovery.redispatched_from == store.recovery.commitlog_end
        assert len(await read_all(store)) == COUNT
        result = await store.put_message(message("R", 1, COUNT + 1))
        assert result.append is not None and result.append.queue_offset == COUNT // QUEUES
        await store.shutdown()

    asyncio.run(reopen())


def test_abnormal_recovery_starts_at_the_checkpoints_segment(tmp_path: Path) -> None:
    asyncio.run(fill(tmp_path))
    starts = segments(tmp_path)
    resume = starts[2]
    # A crash: the abort file stays, the checkpoint last recorded the third segment's start,
    # the ConsumeQueues lost every entry after it, and the CommitLog's last record is torn.
    (tmp_path / "abort").touch()
    checkpoint = StoreCheckpoint.read(tmp_path / "checkpoint")
    stamp = first_timestamp(tmp_path, resume) + RECOVERY_MARGIN_MS
    checkpoint.physic_msg_timestamp = checkpoint.logics_msg_timestamp = stamp
    checkpoint.flush()
    for queue in range(QUEUES):
        queue_dir = tmp_path / "consumequeue" / "R" / str(queue)
        for entry in read_queue(queue_dir):
            if entry.phy_offset >= resume:
                at = entry.queue_offset * CQ_ENTRY_SIZE
                path = queue_dir / f"{at - at % 600:020d}"
                with path.open("r+b") as f:
                    f.seek(at % 600)
                    f.write(bytes(CQ_ENTRY_SIZE))
    last = tmp_path / "commitlog" / f"{starts[-1]:020d}"
    with last.open("r+b") as f:
        data = f.read()
    torn_at = _last_record_start(data)
    with last.open("r+b") as f:
        f.seek(torn_at + 100)
        f.write(b"\xff" * 8)  # inside the body: its CRC no longer holds

    async def reopen() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        report = store.recovery
        assert report is not None and report.crashed
        assert report.walked_from == resume
        # From the queues' last entry (the previous segment's last record) at the latest.
        assert starts[1] < report.redispatched_from <= resume
        assert report.commitlog_end == starts[-1] + torn_at
        bodies = await read_all(store)
        assert sorted(bodies) == list(range(COUNT - 1))  # the torn last one is gone
        for n, body in bodies.items():
            assert body == message("R", n % QUEUES, n, size=body_size(n)).body
        # The torn message's queue offset is handed out again.
        torn = COUNT - 1
        result = await store.put_message(message("R", torn % QUEUES, torn))
        assert result.append is not None and result.append.queue_offset == torn // QUEUES
        await store.shutdown()

    asyncio.run(reopen())
    verify_store(tmp_path, store_config(tmp_path))


def test_a_crash_with_an_empty_checkpoint_walks_from_the_first_segment(tmp_path: Path) -> None:
    asyncio.run(fill(tmp_path))
    (tmp_path / "abort").touch()
    (tmp_path / "checkpoint").unlink()

    async def reopen() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        assert store.recovery is not None and store.recovery.crashed
        assert store.recovery.walked_from == segments(tmp_path)[0]
        assert len(await read_all(store)) == COUNT
        await store.shutdown()

    asyncio.run(reopen())


def test_the_checkpoint_follows_flushes_while_running(tmp_path: Path) -> None:
    async def scenario() -> None:
        now = [BASE_MS]
        config = store_config(
            tmp_path,
            flush_interval_commit_log=10,
            flush_interval_consume_queue=10,
            flush_consume_queue_least_pages=0,
            flush_commit_log_least_pages=0,
        )
        store = MessageStore(config, store_host=HOST, clock=lambda: now[0])
        await store.start()
        for n in range(50):
            now[0] = BASE_MS + n
            await store.put_message(message("R", 0, n))
        # Each timestamp moves with its own flush (CommitLog, then queues and index), on its own
        # timer: wait for all three, not for whichever comes first.
        for _ in range(500):
            on_disk = StoreCheckpoint.read(tmp_path / "checkpoint")
            stamps = (
                on_disk.physic_msg_timestamp,
                on_disk.logics_msg_timestamp,
                on_disk.index_msg_timestamp,
            )
            if stamps == (BASE_MS + 49,) * 3:
                break
            await asyncio.sleep(0.01)
        assert on_disk.physic_msg_timestamp == BASE_MS + 49
        assert on_disk.logics_msg_timestamp == BASE_MS + 49
        assert on_disk.index_msg_timestamp == BASE_MS + 49
        await store.shutdown()

    asyncio.run(scenario())


def _last_record_start(segment: bytes) -> int:
    position = 0
    last = 0
    while True:
        size = int.from_bytes(segment[position : position + 4], "big")
        if size <= 0 or segment[position + 4 : position + 8] != b"\xda\xa3\x20\xa7":
            return last
        last = position
        position += size
