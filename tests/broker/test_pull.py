"""PULL_MESSAGE over a real socket against a broker's own components (store, tables, processor
table; no name server): batches across CommitLog segments, RocketMQ's byte limit, tag filters,
a suspended pull woken by an arrival, the commit offset a pull carries, and the reply's header
bytes being the generic encoder's."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.processors.pull import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from sidewinder.broker.processors.pull_lane import PullLane
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import Host, MessageRecord, MessageToStore, decode_record
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.codec import decode_frame, encode_command, encode_frame
from tests.broker.bare_broker import GROUP, TOPIC, broker

HOST = Host(b"\x7f\x00\x00\x01", 10911)


async def put(
    app: BrokerApp, n: int, *, size: int = 1000, tag: str = "TagA", queue: int = 0
) -> None:
    message = MessageToStore(
        topic=TOPIC.encode(),
        queue_id=queue,
        body=f"{n:06d}".encode().ljust(size, b"."),
        properties=encode_properties({"TAGS": tag, "UNIQ_KEY": f"{n:032X}", "WAIT": "false"}),
        born_host=HOST,
        store_host=HOST,
    )
    await app.store.put_message(message)


def pull_request(
    offset: int, *, sys_flag: int = FLAG_SUBSCRIPTION, **fields: object
) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC,
        queue_id=int(fields.get("queue_id", 0)),  # type: ignore[call-overload]
        queue_offset=offset,
        max_msg_nums=int(fields.get("max_msg_nums", 32)),  # type: ignore[call-overload]
        sys_flag=sys_flag,
        commit_offset=int(fields.get("commit_offset", 0)),  # type: ignore[call-overload]
        suspend_timeout_millis=int(fields.get("suspend_ms", 0)),  # type: ignore[call-overload]
        sub_version=0,
        subscription=str(fields.get("subscription", "*")),
        expression_type="TAG",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


def records(reply: RemotingCommand) -> list[MessageRecord]:
    body, found = reply.body_bytes, []
    at = 0
    while at < len(body):
        record = decode_record(memoryview(body)[at:])
        assert isinstance(record, MessageRecord)
        found.append(record)
        at += record.total_size
    return found


def test_pull_batches_across_commitlog_segments_are_every_record_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        # About 30 records of 1 KiB fill a segment: every batch of 32 spans two.
        async with broker(tmp_path, mapped_file_size_commit_log=32 << 10) as (app, addr):
            for n in range(100):
                await put(app, n)
            client = RemotingClient()
            offset, bodies = 0, []
            while offset < 100:
                reply = await client.invoke(addr, pull_request(offset), 5)
                assert reply.code == ResponseCode.SUCCESS and reply.remark is None
                got = PullMessageResponseHeader.from_ext(reply.ext_fields)
                assert (got.min_offset, got.max_offset, got.suggest_which_broker_id) == (0, 100, 0)
                batch = records(reply)
                assert [r.queue_offset for r in batch] == list(range(offset, got.next_begin_offset))
                bodies += [bytes(r.body[:6]) for r in batch]
                offset = got.next_begin_offset
            assert bodies == [f"{n:06d}".encode() for n in range(100)]
            assert len(app.store._commit_log.files.files) >= 4
            await client.close()

    asyncio.run(scenario())


def test_a_pull_stops_at_max_transfer_bytes_and_never_returns_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path, max_transfer_bytes_on_message_in_memory=3500) as (app, addr):
            for n in range(10):
                await put(app, n)
            client = RemotingClient()
            reply = await client.invoke(addr, pull_request(0), 5)
            size = records(reply)[0].total_size
            assert len(records(reply)) == 3500 // size  # 3 of about 1.1 KiB
            small = await client.invoke(addr, pull_request(0, max_msg_nums=2), 5)
            assert len(records(small)) == 2  # maxMsgNums first
            await client.close()
        async with broker(tmp_path / "tiny", max_transfer_bytes_on_message_in_memory=10) as (
            app,
            addr,
        ):
            await put(app, 0)
            await put(app, 1)
            client = RemotingClient()
            reply = await client.invoke(addr, pull_request(0), 5)
            assert len(records(reply)) == 1  # the first record goes whatever the limit
            assert PullMessageResponseHeader.from_ext(reply.ext_fields).next_begin_offset == 1
            await client.close()

    asyncio.run(scenario())


def test_tag_filtered_pulls_skip_other_tags_and_say_retry_when_none_match(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (app, addr):
            for n in range(9):
                await put(app, n, tag=("TagA", "TagB", "TagC")[n % 3])
            client = RemotingClient()
            reply = await client.invoke(addr, pull_request(0, subscription="TagB || TagC"), 5)
            assert [int(r.body[:6]) for r in records(reply)] == [1, 2, 4, 5, 7, 8]
            none = await client.invoke(addr, pull_request(0, subscription="TagZ"), 5)
            assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert none.remark == "NO_MATCHED_MESSAGE" and none.body is None
            assert PullMessageResponseHeader.from_ext(none.ext_fields).next_begin_offset == 9
            await client.close()

    asyncio.run(scenario())


def test_a_suspended_pull_is_answered_when_its_message_arrives(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (app, addr):
            client = RemotingClient()
            request = pull_request(0, sys_flag=FLAG_SUBSCRIPTION | FLAG_SUSPEND, suspend_ms=10_000)
            held = asyncio.ensure_future(client.invoke(addr, request, 15))
            await asyncio.sleep(0.3)
            assert not held.done() and app.holds.count == 1
            await put(app, 0)
            reply = await asyncio.wait_for(held, 5)
            assert reply.code == ResponseCode.SUCCESS
            assert [int(r.body[:6]) for r in records(reply)] == [0]
            await client.close()

    asyncio.run(scenario())


def test_a_pull_carries_its_commit_offset_and_an_offset_past_the_end_is_moved(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (app, addr):
            for n in range(3):
                await put(app, n)
            client = RemotingClient()
            flags = FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET
            await client.invoke(addr, pull_request(0, sys_flag=flags, commit_offset=2), 5)
            assert app.offsets.query(GROUP, TOPIC, 0) == 2
            moved = await client.invoke(addr, pull_request(50), 5)
            assert (moved.code, moved.remark) == (
                ResponseCode.PULL_OFFSET_MOVED,
                "OFFSET_OVERFLOW_BADLY",
            )
            assert PullMessageResponseHeader.from_ext(moved.ext_fields).next_begin_offset == 3
            await client.close()

    asyncio.run(scenario())


def test_the_pull_reply_frame_is_what_the_generic_encoder_makes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (app, _):
            await put(app, 0)
            pull = app.server.table._pools[int(RequestCode.PULL_MESSAGE)].processor
            for offset in (0, 1, 7):  # found, nothing yet, past the end
                reply = await pull.process(None, pull_request(offset))
                assert reply.encoded_header is not None
                frame = encode_command(reply)
                reply.encoded_header = None
                assert frame == encode_command(reply)

    asyncio.run(scenario())


async def raw_exchange(addr: str, frames: list[bytes]) -> list[bytes]:
    """Write `frames` in one chunk on a fresh connection; the reply frames, whole, as bytes,
    in opaque order."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"".join(frames))
    replies = []
    for _ in frames:
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        replies.append(struct.pack(">i", length) + await reader.readexactly(length))
    writer.close()
    await writer.wait_closed()
    return sorted(replies, key=lambda frame: decode_frame(frame).opaque)


def test_the_pull_lane_answers_byte_for_byte_as_the_generic_path(tmp_path: Path) -> None:
    """A chunk of pulls of every outcome (found, tag-filtered, nothing yet, past the end, too
    small an offset, a topic that does not exist, a SQL92 filter the lane leaves to
    the processor): the reply frames the pull lane writes are the ones the generic path writes
    for the same chunk (a pass-through guard makes every lane stand aside)."""

    async def scenario() -> None:
        async with broker(tmp_path, mapped_file_size_commit_log=32 << 10) as (app, addr):
            for n in range(40):
                await put(app, n, tag="TagA" if n % 3 else "TagB")
            requests = [
                pull_request(0),
                pull_request(5, max_msg_nums=4),
                pull_request(0, subscription="TagB"),
                pull_request(0, subscription="TagC"),
                pull_request(40),
                pull_request(99),
                pull_request(0, queue_id=1),
                pull_request(3, sys_flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, commit_offset=2),
                pull_request(0, queue_id=7),
            ]
            missing = pull_request(0)
            assert missing.ext_fields is not None
            missing.ext_fields["topic"] = "NoSuchTopic"
            requests.append(missing)
            sql = pull_request(0)
            assert sql.ext_fields is not None
            sql.ext_fields.update(expressionType="SQL92", subscription="a > 1")
            requests.append(sql)
            for opaque, request in enumerate(requests, start=100):
                request.opaque = opaque
            frames = [encode_frame(request) for request in requests]
            (pull_lane,) = [t for t in app.server.table.frame_takers() if isinstance(t, PullLane)]
            lane = await raw_exchange(addr, frames)
            assert pull_lane.served == len(requests) - 3  # all but the refused and the SQL92
            app.server.table.guard(lambda ctx, request: None)
            generic = await raw_exchange(addr, frames)
            assert [decode_frame(f).code for f in lane] == [
                ResponseCode.SUCCESS,
                ResponseCode.SUCCESS,
                ResponseCode.SUCCESS,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_OFFSET_MOVED,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.SUCCESS,
                ResponseCode.SYSTEM_ERROR,
                ResponseCode.TOPIC_NOT_EXIST,
                ResponseCode.SYSTEM_ERROR,
            ]
            assert lane == generic
            assert pull_lane.served == len(requests) - 3  # the guard kept the lane aside
            assert app.offsets.query(GROUP, TOPIC, 0) == 2

    asyncio.run(scenario())
