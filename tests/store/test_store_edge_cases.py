"""Edges found in review: each once lost data, stalled dispatch or diverged from RocketMQ."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sidewinder.protocol.message import encode_properties, tags_code
from sidewinder.protocol.record import Host, MessageSysFlag, MessageToStore
from sidewinder.store.commit_log import AppendStatus, CommitLog
from sidewinder.store.consume_queue import read_queue
from sidewinder.store.mapped_file_queue import MappedFileQueue
from sidewinder.store.message_store import GetStatus, MessageStore, PutStatus
from tests.store.small_store import store_config, wait_dispatched

HOST = Host(b"\x7f\x00\x00\x01", 10911)


def msg(
    topic: bytes = b"T",
    *,
    key: str = "k",
    size: int = 100,
    sys_flag: int = 0,
    flag: int = 0,
    tag: str = "TagA",
) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=0,
        body=bytes(size),
        properties=encode_properties({"KEYS": key, "TAGS": tag}),
        sys_flag=sys_flag,
        flag=flag,
        born_host=HOST,
        store_host=HOST,
    )


def test_flushed_offset_is_the_contiguous_durable_prefix(tmp_path: Path) -> None:
    files = MappedFileQueue(tmp_path, 4096)
    first = files.writable_file()
    first.wrote_position = 392
    first.flush()  # synced while only 392 bytes were written ...
    first.wrote_position = first.size  # ... then the tail and the blank were written
    second = files.writable_file()
    second.wrote_position = 1960
    second.flush()
    assert files.flushed_offset == 392  # not 4096 + 1960
    files.flush()
    assert files.flushed_offset == 4096 + 1960
    files.close()


def test_a_queue_restarting_at_zero_is_not_a_torn_tail(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, segment_size=4096, max_message_size=1024, store_host=HOST)
    log.load()
    for _ in range(12):
        log.put(msg())
    log.queue_offsets.pop(("T", 0))  # the topic was deleted and created again
    for _ in range(12):
        log.put(msg())
    end = log.max_offset
    log.close()
    again = CommitLog(tmp_path, segment_size=4096, max_message_size=1024, store_host=HOST)
    again.load()
    assert again.recover() == end
    assert again.queue_offsets[("T", 0)] == 12
    again.close()


def test_half_messages_take_no_queue_offset_and_dispatch_goes_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MessageStore(store_config(tmp_path), store_host=HOST)
        await store.start()
        await store.put_message(msg())
        half = await store.put_message(msg(sys_flag=MessageSysFlag.TRANSACTION_PREPARED))
        assert half.append is not None and half.append.queue_offset == 0
        for _ in range(3):
            result = await store.put_message(msg())
        assert result.append is not None and result.append.queue_offset == 3
        await wait_dispatched(store, "T", 0, 4)
        assert store._dispatch.error is None
        await store.shutdown()
        reopened = MessageStore(store_config(tmp_path), store_host=HOST)
        await reopened.start()
        assert reopened._commit_log.queue_offsets[("T", 0)] == 4
        await reopened.shutdown()

    asyncio.run(scenario())


def test_bad_fields_and_long_topics_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    log = CommitLog(tmp_path, segment_size=4096, max_message_size=1024, store_host=HOST)
    log.load()
    result = log.put_batch([msg(), msg(flag=1 << 31)])
    assert result.status is AppendStatus.MESSAGE_ILLEGAL
    assert "flag 2147483648 does not fit a signed 32-bit field" in result.remark
    assert log.max_offset == 0
    long_topic = log.put(msg(topic=b"t" * 128))
    assert "longer than 127" in long_topic.remark
    too_big = log.put_batch([msg(size=900)] * 5)
    assert too_big.status is AppendStatus.MESSAGE_ILLEGAL
    assert log.max_offset == 0 and not list(tmp_path.iterdir())[1:]
    log.close()


def test_the_index_is_rebuilt_after_recovery_cuts_the_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        first = MessageStore(store_config(tmp_path), store_host=HOST)
        await first.start()
        await first.put_message(msg(key="a"))
        await first.put_message(msg(key="b"))
        await wait_dispatched(first, "T", 0, 2)
        first._commit_log.files.files[0].buffer[90] ^= 0xFF  # bit rot in "a"'s body
        first._parts.markers.release()  # then the process dies without shutting down
        first._parts.commit_log_lock.release()
        second = MessageStore(store_config(tmp_path), store_host=HOST)
        await second.start()
        assert second._commit_log.max_offset == 0
        assert (await second.put_message(msg(key="c", size=400))).status is PutStatus.PUT_OK
        await wait_dispatched(second, "T", 0, 1)
        assert [r.properties()["KEYS"] for r in second.query_message("T", "c")] == ["c"]
        assert second.query_message("T", "b") == []
        await second.shutdown()

    asyncio.run(scenario())


def test_get_messages_caps_its_scan_and_count_as_rocketmq_does(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = store_config(tmp_path).model_copy(
            update={"mapped_file_size_consume_queue": 20 * 3000}
        )
        store = MessageStore(config, store_host=HOST)
        await store.start()
        for _ in range(1000):
            await store.put_message(msg(tag="TagB", size=10))
        await wait_dispatched(store, "T", 0, 1000)
        unmatched = store.get_messages("T", 0, 0, 32, tags_codes=frozenset({tags_code("TagA")}))
        assert (unmatched.status, unmatched.next_begin_offset) == (
            GetStatus.NO_MATCHED_MESSAGE,
            800,
        )
        many = store.get_messages("T", 0, 0, 100)
        assert len(many.messages) == 32  # maxTransferCountOnMessageInMemory
        await store.shutdown()

    asyncio.run(scenario())


def test_a_segment_whose_creation_was_interrupted_is_ignored(tmp_path: Path) -> None:
    log = CommitLog(
        tmp_path / "commitlog", segment_size=4096, max_message_size=1024, store_host=HOST
    )
    log.load()
    log.put(msg())
    end = log.max_offset
    log.close()
    # A crash between creating the next file and sizing it leaves only the temporary name.
    (tmp_path / "commitlog" / f"{4096:020d}.creating").write_bytes(b"")
    (tmp_path / "consumequeue" / "T" / "0").mkdir(parents=True)
    (tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}.creating").write_bytes(b"")
    again = CommitLog(
        tmp_path / "commitlog", segment_size=4096, max_message_size=1024, store_host=HOST
    )
    again.load()
    assert again.recover() == end
    assert again.put(msg()).status is AppendStatus.PUT_OK
    again.close()
    assert list(read_queue(tmp_path / "consumequeue" / "T" / "0")) == []


def test_an_empty_queue_file_left_by_a_crash_is_made_again(tmp_path: Path) -> None:
    """RocketMQ creates a ConsumeQueue file, then sizes it; a kill between leaves it empty
    (RocketMQ 4.9 then refuses to start). Ours starts, rebuilds it, and goes on."""

    async def scenario() -> None:
        first = MessageStore(store_config(tmp_path), store_host=HOST)
        await first.start()
        for _ in range(60):  # 30 entries a queue file: two full files
            assert (await first.put_message(msg())).status is PutStatus.PUT_OK
        await wait_dispatched(first, "T", 0, 60)
        await first.shutdown()
        queue_dir = tmp_path / "consumequeue" / "T" / "0"
        (queue_dir / f"{2 * 600:020d}").touch()  # the third file: created, never sized
        (tmp_path / "abort").touch()
        second = MessageStore(store_config(tmp_path), store_host=HOST)
        await second.start()
        assert second.max_offset_in_queue("T", 0) == 60
        assert (await second.put_message(msg(key="after"))).status is PutStatus.PUT_OK
        await wait_dispatched(second, "T", 0, 61)
        assert len(second.get_messages("T", 0, 30, 32).messages) == 30
        got = second.get_messages("T", 0, 60, 32)
        assert got.status is GetStatus.FOUND and len(got.messages) == 1
        await second.shutdown()

    asyncio.run(scenario())
