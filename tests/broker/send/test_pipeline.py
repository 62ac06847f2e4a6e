"""The send pipeline (sidewinder/broker/send/) from the wire: the same frames, pipelined into
one write to a real server over a real store, served one request at a time (`process`), a
chunk of decoded requests at a time (`take_batch`) or a chunk of frames read by the fast header
reader (`take_frames`): the golden replies and store files of the send path it replaced (at
the end), and the same replies and records whichever entry serves them; where no send of the
chunk waits for a topic to be made, the same reply frames, CommitLog bytes and ConsumeQueue
files. Plus the route step's shortcut and the reply templates against the full step and the
generic encoder."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import random
import re
import socket
import struct
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvloop
from hypothesis import example, given
from hypothesis import strategies as st

from interop.capture import is_response, read_capture
from interop.fixtures import ensure_fixture
from sidewinder.broker.config import PERM_READ, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.send import SendProcessor, SendRequest
from sidewinder.broker.send import request as request_module
from sidewinder.broker.send.body import BatchError, decode_batch, strip_wait
from sidewinder.broker.send.reply import SendReplies, SendReplyFrames
from sidewinder.broker.send.request import request_from_command
from sidewinder.broker.topics import TopicConfig, TopicTable
from sidewinder.common.native import NATIVE
from sidewinder.protocol.batch_record import (
    BatchToStore,
    batch_messages_py,
    batch_to_store,
    encode_batch,
)
from sidewinder.protocol.codes import RequestCode, ResponseCode, SerializeType
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.headers import HeaderError, SendMessageRequestHeader
from sidewinder.protocol.message import (
    MessageConst,
    encode_offset_msg_id,
    property_value,
    without_property,
)
from sidewinder.protocol.record import (
    Host,
    MessageRecord,
    MessageToStore,
    decode_record,
    encode_record_py,
)
from sidewinder.remoting.codec import FrameDecoder, RawFrame, decode_raw, encode_frame
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.server import RemotingServer
from sidewinder.store.message_store import MessageRun, MessageStore
from tests.helpers import send_request
from tests.hot_path import IMPLEMENTATIONS, using

TOPIC = "BatchLane"
READ_ONLY = "BatchLaneReadOnly"


# -- the helpers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("region", "trace_on"), [("DefaultRegion", True), ('r%d-ü"x', False), ("", True)]
)
@pytest.mark.parametrize(
    ("phy", "queue_id", "queue_offset", "opaque"),
    [(0, 0, 0, 0), (1 << 40, 7, 123_456, 2**31 - 1), (4096, 1023, 1, 17)],
)
def test_the_reply_template_is_the_generic_reply_byte_for_byte(
    region: str, trace_on: bool, phy: int, queue_id: int, queue_offset: int, opaque: int
) -> None:
    store_host = Host(bytes([10, 1, 2, 3]), 10911)
    config = BrokerConfig.from_properties({"regionId": region, "traceOn": str(trace_on).lower()})
    request = _request(RequestCode.SEND_MESSAGE_V2, opaque)
    routed = (request, MessageToStore(TOPIC.encode(), queue_id, b"", b""), True, queue_id)
    generic = SendReplies(config, store_host).stored(routed, phy, queue_offset)
    fast = SendReplyFrames(region, trace_on, store_host).success(
        opaque, phy, queue_id, queue_offset
    )
    assert fast == encode_frame(generic)


_NAMES = st.sampled_from(["WAIT", "TAGS", "KEYS", "UNIQ_KEY", "XWAIT", "WAITX", "W", ""])
_VALUES = st.sampled_from(["true", "false", "FALSE", "False", "", "x", "true\x01y"])


@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=6), st.booleans())
def test_strip_wait_is_the_reference_pair(pairs: list[tuple[str, str]], trailing: bool) -> None:
    properties = "\x02".join(f"{name}\x01{value}" for name, value in pairs)
    if trailing and properties:
        properties += "\x02"
    raw = properties.encode()
    wait = property_value(raw, MessageConst.WAIT_STORE_MSG_OK)
    expected = without_property(raw, MessageConst.WAIT_STORE_MSG_OK).decode()
    assert strip_wait(properties) == (expected, wait is None or wait.lower() != "false")


# -- one server, either path ----------------------------------------------------------------------
def _header(n: int, properties: str, **changes: Any) -> dict[str, str]:
    """The ext fields of the n-th send's header, as the Java producer writes them (V2 names)."""
    fields = {
        "queue_id": n % 4,
        "born_timestamp": 1_700_000_000_000 + n,
        "broker_name": "broker-a",
        "properties": properties,
        **changes,
    }
    topic = fields.pop("topic", TOPIC)
    group = fields.pop("producer_group", "lane-producer")
    return dict(send_request(topic, group=group, **fields).ext_fields or {})


def _send(
    n: int,
    *,
    properties: str,
    oneway: bool = False,
    ext_changes: dict[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.JSON,
    **changes: Any,
) -> bytes:
    ext = _header(n, properties, batch=False, **{"flag": n % 3, **changes})
    ext.update(ext_changes or {})
    command = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        opaque=1000 + n,
        flag=ONEWAY_FLAG if oneway else 0,
        ext_fields=ext,
        body=f"body-{n}".encode() * (n % 5 + 1),
        serialize_type=serialize_type,
    )
    return encode_frame(command)


def _frames() -> tuple[list[bytes], int]:
    """A mix the lane takes and refuses to take; and how many of them get a reply."""
    uniq = "UNIQ_KEY\x01{:032X}"
    frames = [
        _send(0, properties=uniq.format(0) + "\x02WAIT\x01true\x02TAGS\x01TagA"),
        _send(1, properties="WAIT\x01false\x02" + uniq.format(1)),
        _send(2, properties=uniq.format(2) + "\x02KEYS\x01k1 k2\x02WAIT\x01true\x02"),
        _send(3, properties=uniq.format(3)),  # no WAIT: waits
        _send(4, properties="TAGS\x01T\x02DELAY\x011\x02WAIT\x01true"),  # delayed: process()
        _send(5, properties=uniq.format(5), queue_id=9),  # no such queue: refused by process()
        _send(6, properties=uniq.format(6), topic="NoSuchTopic"),  # auto-created by process()
        _send(7, properties=uniq.format(7), oneway=True),
        _send(8, properties="WAIT\x01true", flag=-5),  # a negative flag: process()
        _send(9, properties=uniq.format(9) + "\x02\u00fcber\x01\u00e9t\u00e9"),
        # Numbers the lane does not use but process() parses: refused there.
        _send(10, properties=uniq.format(10), ext_changes={"d": "x4"}),
        _send(11, properties=uniq.format(11), ext_changes={"l": "abc"}),
    ]
    return frames, len(frames) - 1


def _fields(record: MessageRecord) -> tuple[object, ...]:
    """What a record says but where and when it was stored; its body CRC checked."""
    assert record.crc_ok()
    return (
        record.topic,
        record.queue_id,
        bytes(record.body),
        bytes(record.properties_bytes),
        record.flag,
        record.sys_flag,
        record.born_timestamp,
        record.born_host.address,
        record.store_host,
        record.reconsume_times,
    )


@contextlib.asynccontextmanager
async def _broker(
    root: Path,
    *,
    lane: str,
    flush: str,
    conf: dict[str, str] | None = None,
    topics: Sequence[str] = (),
) -> AsyncIterator[tuple[SendProcessor, MessageStore, int]]:
    """A real server over a real store; `lane`: "process" (the lane off), "batch" (it takes
    the decoded requests) or "frames" (it reads them from their frames, as the broker does
    with the native extension)."""
    config = BrokerConfig.from_properties(
        {
            "storePathRootDir": str(root),
            "storePathCommitLog": str(root / "commitlog"),
            "flushDiskType": flush,
            "brokerIP1": "127.0.0.1",
            "listenPort": 10911,
            "mappedFileSizeCommitLog": 1 << 20,
            "mappedFileSizeConsumeQueue": 20 * 1000,
            **(conf or {}),
        }
    )
    store = MessageStore(config.store, store_host=Host(bytes([127, 0, 0, 1]), 10911))
    await store.start()
    table_of_topics = TopicTable(config, root / "config")
    for name in (TOPIC, *topics):
        table_of_topics.upsert(TopicConfig(name, 4, 4))
    table_of_topics.upsert(TopicConfig(READ_ONLY, 4, 4, PERM_READ))
    groups = SubscriptionGroups(root / "config", auto_create=True)
    send = SendProcessor(config, store, table_of_topics, groups, max_delay_level=18)
    send.chunks = lane != "process"
    table = ProcessorTable()
    table.register(
        send, RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE
    )
    if lane == "frames":
        table.set_frame_lane(send, RequestCode.SEND_MESSAGE_V2)
    server = RemotingServer(table, config.server)
    port = await server.start("127.0.0.1", 0)
    try:
        yield send, store, port
    finally:
        await server.stop()
        await store.shutdown()


class _Client:
    """One connection: frames written in one write (one chunk, as pipelined), replies read."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.decoder = FrameDecoder()
        self.replies: list[RawFrame] = []

    async def send(self, frames: list[bytes]) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, b"".join(frames))

    async def read(self, count: int, timeout_s: float = 10) -> list[RawFrame]:
        """Until `count` replies in all have come."""
        loop = asyncio.get_running_loop()
        while len(self.replies) < count:
            chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 1 << 16), timeout_s)
            assert chunk, "the server closed the connection"
            self.decoder.feed(chunk)
            self.replies += list(self.decoder.frames())
        return self.replies

    def close(self) -> None:
        self.sock.close()


@dataclass
class Served:
    replies: list[RemotingCommand]  # by opaque
    frames: list[tuple[bytes, bytes | None]]  # the reply frames' encoded header and body
    records: list[tuple[object, ...]]
    commit_log: list[bytes]  # each segment, store timestamps and born ports zeroed
    queues: dict[str, bytes]  # each ConsumeQueue file
    batched: int  # messages the lane stored


async def _serve_and_send(
    root: Path,
    *,
    lane: str,
    flush: str,
    frames: list[bytes],
    replies: int,
    conf: dict[str, str] | None = None,
    topics: Sequence[str] = (),
) -> Served:
    async with _broker(root, lane=lane, flush=flush, conf=conf, topics=topics) as (
        send,
        store,
        port,
    ):
        client = _Client(port)
        try:
            await client.send(frames)
            got = await client.read(replies)
            await store.caught_up(2)
            records = [_fields(r) for r in store._commit_log.records()]
        finally:
            client.close()
    return _served(root, got, records, send.batched)


def _served(
    root: Path, got: list[RawFrame], records: list[tuple[object, ...]], batched: int
) -> Served:
    """What a stopped broker answered and left in its store files."""
    decoded = sorted(((decode_raw(f), f) for f in got), key=lambda pair: pair[0].opaque)
    segments = sorted((root / "commitlog").iterdir())
    queue_files = sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file())
    return Served(
        [command for command, _ in decoded],
        [(frame.header, frame.body) for _, frame in decoded],
        records,
        [_masked(segment.read_bytes()) for segment in segments],
        {str(p.relative_to(root)): p.read_bytes() for p in queue_files},
        batched,
    )


def _masked(segment: bytes) -> bytes:
    """A CommitLog segment with what differs between two runs of the same sends zeroed: the
    store timestamp, and the born host's port (each run's client has its own)."""
    data = bytearray(segment)
    position = 0
    while position < len(data):
        record = decode_record(data, position)
        if not isinstance(record, MessageRecord):
            break  # the blank tail, or nothing written
        assert not record.sys_flag & 0x30, "IPv4 hosts: the fields below are where they are"
        data[position + 52 : position + 56] = bytes(4)  # BORNHOST's port
        data[position + 56 : position + 64] = bytes(8)  # STORETIMESTAMP
        position += record.total_size
    return bytes(data)


def _both(
    tmp_path: Path, lane: str, flush: str, frames: list[bytes], replies: int, **kwargs: Any
) -> tuple[Served, Served]:
    """The same frames served by `process` alone, then by the lane: (reference, lane)."""
    served = [
        uvloop.run(
            _serve_and_send(
                tmp_path / path, lane=path, flush=flush, frames=frames, replies=replies, **kwargs
            )
        )
        for path in ("process", lane)
    ]
    return served[0], served[1]


def _answer(reply: RemotingCommand) -> tuple[object, ...]:
    """A reply but for where the message went: the offsets differ where the two paths stored
    in another order."""
    ext = dict(reply.ext_fields or {})
    remark = (reply.remark or "").split(" Producer: ")[0]  # the client's port differs
    return (reply.opaque, reply.code, remark, ext.pop("queueId", None), sorted(ext))


@pytest.mark.parametrize("lane", ["batch", "frames"])
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.usefixtures("hot_path")
def test_the_lane_answers_and_stores_as_process_does(tmp_path: Path, flush: str, lane: str) -> None:
    """`batch`: the lane takes decoded requests; `frames`: it reads them from their frames."""
    frames, replies = _frames()
    reference, served = _both(tmp_path, lane, flush, frames, replies)
    assert [r.opaque for r in reference.replies] == [1000 + n for n in range(12) if n != 7]
    codes = {r.opaque - 1000: r.code for r in reference.replies}
    assert codes[5] == ResponseCode.SYSTEM_ERROR and codes[0] == ResponseCode.SUCCESS
    assert codes[10] != ResponseCode.SUCCESS and codes[11] != ResponseCode.SUCCESS
    assert list(map(_answer, served.replies)) == list(map(_answer, reference.replies))
    stored_at = {
        (r.ext_fields or {})["msgId"] for r in served.replies if r.code == ResponseCode.SUCCESS
    }
    assert len(stored_at) == 8  # every send but the refused one and the oneway one
    # Records: the same set (the lane stores its share before process() stores the rest, so
    # the order may differ), every field but the store timestamp and the offsets.
    assert sorted(served.records) == sorted(reference.records)  # type: ignore[type-var]
    assert len(served.records) == 9  # all but the send to a queue that does not exist
    # A chunk at a time: all stored but the send to a topic to be made (6), which waits for
    # the name servers: 0-3, 7, 9 plain, 4 delayed, 8 with a negative flag.
    assert (reference.batched, served.batched) == (0, 8)
    for fields in served.records:
        topic, properties = fields[0], fields[3]
        assert isinstance(properties, bytes)
        assert (b"WAIT\x01" in properties) == (topic == "SCHEDULE_TOPIC_XXXX")
        assert b"CLUSTER\x01DefaultCluster" in properties


# -- batches --------------------------------------------------------------------------------------
Entry = tuple[int, bytes, bytes]  # flag, body, properties: what send.decode_batch gives


def _entry(flag: int, body: bytes, properties: bytes, *, total: int | None = None) -> bytes:
    """One message of a batch body (MessageDecoder.encodeMessage); `total` 0 is allowed."""
    size = 20 + len(body) + 2 + len(properties)
    head = struct.pack(">iiiii", size if total is None else total, 0, 0, flag, len(body))
    return head + body + struct.pack(">h", len(properties)) + properties


def _batch(
    n: int,
    entries: list[Entry] | bytes,
    *,
    properties: str = "WAIT\x01true",
    oneway: bool = False,
    ext: dict[str, str] | None = None,
    serialize_type: SerializeType = SerializeType.JSON,
    **changes: Any,
) -> bytes:
    """A SEND_BATCH_MESSAGE as the Java producer sends one: the batch's WAIT in the header,
    each message's properties in the body; `ext` overrides header fields as sent."""
    header = _header(n, properties, batch=True, **changes) | (ext or {})
    body = entries if isinstance(entries, bytes) else b"".join(_entry(*e) for e in entries)
    command = RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE,
        opaque=1000 + n,
        flag=ONEWAY_FLAG if oneway else 0,
        ext_fields=header,
        body=body,
        serialize_type=serialize_type,
    )
    return encode_frame(command)


def _messages(n: int, count: int, *, wait: str | None = "true", size: int = 100) -> list[Entry]:
    """`count` messages as a producer batches them: each with its UNIQ_KEY (and WAIT)."""
    entries = []
    for m in range(count):
        props = f"UNIQ_KEY\x01{n:016X}{m:016X}\x02TAGS\x01Tag{m % 3}"
        if wait is not None:
            props += f"\x02WAIT\x01{wait}"
        entries.append((m % 5 - 2, bytes([65 + (n + m) % 26]) * (size + m), props.encode()))
    return entries


def _plain_batches() -> tuple[list[bytes], int, int]:
    """Batches the lane takes, mixed with single sends it takes: the frames, how many get a
    reply, and how many messages they hold."""
    odd: list[Entry] = [
        (0, b"", b""),  # no body, no properties: CLUSTER alone
        (7, b"x" * 10, b"TAGS\x01T\x02"),  # a trailing separator: dropped
        (-1, "\u00e9t\u00e9".encode(), "\u00fcber\x01\u00e9\x02\x02".encode()),
    ]
    frames = [
        _batch(0, _messages(0, 16)),
        _send(1, properties="WAIT\x01true\x02UNIQ_KEY\x01" + "1" * 32),
        _batch(2, _messages(2, 5, wait="false")),  # not waited for under SYNC_FLUSH
        _batch(3, _messages(3, 3), oneway=True),
        _batch(4, _messages(4, 1)),  # a batch of one
        _send(5, properties="WAIT\x01false\x02UNIQ_KEY\x01" + "5" * 32),
        _batch(6, _messages(6, 4, wait=None)),  # no WAIT: waits
        # The first message says: it does not wait, though the others would.
        _batch(7, _messages(7, 1, wait="false") + _messages(7, 3, wait="true"), queue_id=3),
        _batch(8, odd, properties=""),
        _batch(9, [(1, b"y" * 30, b"WAIT\x01true")], ext={"m": "false", "l": "16"}),
        _send(10, properties="UNIQ_KEY\x01" + "A" * 32, oneway=True),
        _batch(11, _messages(11, 2, size=3000), queue_id=0),
        # A binary (ROCKETMQ) header: the frame lane leaves it to the lane of decoded requests,
        # which stores it after the frame lane's share (last, it stays in order) and answers
        # it the generic way.
        _batch(12, _messages(12, 3), serialize_type=SerializeType.ROCKETMQ),
    ]
    return frames, len(frames) - 2, 16 + 1 + 5 + 3 + 1 + 1 + 4 + 4 + 3 + 1 + 1 + 2 + 3


@pytest.mark.parametrize("lane", ["batch", "frames"])
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.usefixtures("hot_path")
def test_plain_batches_go_the_lane_and_store_what_process_stores(
    tmp_path: Path, flush: str, lane: str
) -> None:
    """All taken by the lane, in one append, so stored in the order `process` stores them:
    the same reply frames byte for byte, the same CommitLog bytes (but store timestamps and the
    client's port) and the same ConsumeQueue files."""
    frames, replies, messages = _plain_batches()
    reference, served = _both(tmp_path, lane, flush, frames, replies)
    assert (reference.batched, served.batched) == (0, messages)
    assert all(r.code == ResponseCode.SUCCESS for r in reference.replies)
    assert served.frames == reference.frames
    assert served.commit_log == reference.commit_log
    assert served.queues == reference.queues
    assert len(reference.records) == messages
    batch = reference.replies[0].ext_fields or {}
    assert len(batch["msgId"].split(",")) == 16 and batch["queueOffset"] == "0"


def test_a_batch_reply_says_its_first_queue_offset_and_every_offset_msg_id(tmp_path: Path) -> None:
    """As RocketMQ 4.9 and our generic path answer a batch: queueOffset of the first message,
    msgId the comma-joined offsetMsgIds (store host, then the record's physical offset)."""
    frames = [_batch(0, _messages(0, 3)), _batch(4, _messages(4, 2))]  # both to queue 0
    served = uvloop.run(
        _serve_and_send(tmp_path, lane="frames", flush="ASYNC_FLUSH", frames=frames, replies=2)
    )
    assert served.batched == 5
    ids = [(r.ext_fields or {})["msgId"].split(",") for r in served.replies]
    offsets = [(r.ext_fields or {})["queueOffset"] for r in served.replies]
    assert offsets == ["0", "3"] and [len(i) for i in ids] == [3, 2]
    store_host = Host(bytes([127, 0, 0, 1]), 10911)
    position, expected = 0, []
    for segment in served.commit_log:
        while position < len(segment):
            record = decode_record(segment, position)
            if not isinstance(record, MessageRecord):
                break
            expected.append(encode_offset_msg_id(store_host.address, store_host.port, position))
            position += record.total_size
    assert ids[0] + ids[1] == expected


def _refused_batches() -> tuple[list[bytes], int, int]:
    """Batches for `process` to judge, with plain ones between: the frames, how many get a
    reply, and how many messages the lane is to take."""
    long_properties = b"K\x01" + b"v" * 32_760  # with CLUSTER, past 32767 bytes
    frames = [
        _batch(0, _messages(0, 2)),  # plain
        _batch(1, _entry(0, b"abc", b"")[:-2]),  # truncated: MESSAGE_ILLEGAL, decode's remark
        _batch(2, b""),  # empty: MESSAGE_ILLEGAL
        _batch(3, _entry(0, b"abc", b"", total=99)),  # a total that does not add up
        _batch(4, _messages(4, 2), topic="NoSuchBatchTopic"),  # auto-created by process()
        _batch(5, _messages(5, 2), topic="%RETRY%lane-group"),  # a retry topic
        _batch(6, _messages(6, 2), queue_id=9),  # no such queue: SYSTEM_ERROR
        _batch(7, _messages(7, 2), sys_flag=4),  # transactional
        _batch(8, _messages(8, 2), properties="WAIT\x01true\x02DELAY\x013"),
        _batch(9, [(0, b"b", long_properties)]),  # MESSAGE_ILLEGAL from the CommitLog
        _batch(10, _messages(10, 3, size=30_000)),  # bigger than maxMessageSize
        _batch(11, _messages(11, 2), ext={"d": "four"}),  # the header does not parse
        _batch(12, _messages(12, 2), ext={"l": "99999999999"}),  # nor this one
        _batch(13, _messages(13, 2), topic=READ_ONLY),  # NO_PERMISSION
        _batch(14, _messages(14, 2), ext={"e": "-1"}),  # queue "-1": process() picks one
        _batch(15, _messages(15, 2), topic="SCHEDULE_TOPIC_XXXX"),  # forbidden
        _batch(16, _messages(16, 3)),  # plain
        _send(17, properties="UNIQ_KEY\x01" + "1" * 32),  # plain
    ]
    # A chunk at a time: all stored but the sends to topics to be made (4, 5): 0, 16 and 17
    # plain, 7 transactional, 8 with DELAY in the batch's header, 14 given a queue.
    return frames, len(frames), 2 + 2 + 2 + 2 + 3 + 1


@pytest.mark.parametrize("lane", ["batch", "frames"])
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.usefixtures("hot_path")
def test_unusual_batches_are_left_to_process(
    tmp_path: Path, flush: str, lane: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(random, "randrange", lambda stop: stop - 1)  # the queue for queueId -1
    frames, replies, plain = _refused_batches()
    conf = {"maxMessageSize": str(64 * 1024)}
    reference, served = _both(tmp_path, lane, flush, frames, replies, conf=conf)
    assert (reference.batched, served.batched) == (0, plain)
    assert list(map(_answer, served.replies)) == list(map(_answer, reference.replies))
    assert sorted(served.records) == sorted(reference.records)  # type: ignore[type-var]
    codes = {r.opaque - 1000: (r.code, r.remark) for r in served.replies}
    illegal = ResponseCode.MESSAGE_ILLEGAL
    assert codes[1] == (illegal, "batch entry at byte 0 has a bad body length 3")
    assert codes[2] == (illegal, "the batch is empty")
    assert codes[3] == (illegal, "batch entry at byte 0 does not add up")
    assert codes[9][0] == illegal and "properties of" in (codes[9][1] or "")
    assert codes[10][0] == illegal and "larger than maxMessageSize" in (codes[10][1] or "")
    assert codes[6][0] == codes[11][0] == codes[12][0] == ResponseCode.SYSTEM_ERROR
    assert codes[13][0] == codes[15][0] == ResponseCode.NO_PERMISSION
    for stored in (0, 4, 7, 8, 14, 16, 17):
        assert codes[stored][0] == ResponseCode.SUCCESS, codes[stored]


@pytest.mark.parametrize("lane", ["batch", "frames"])
@pytest.mark.usefixtures("hot_path")
def test_a_batch_the_segment_cannot_hold_starts_the_next_one_as_in_process(
    tmp_path: Path, lane: str
) -> None:
    """A batch stays in one CommitLog segment (a blank record closes the last): where one
    would not fit behind the chunk's earlier sends, it and the rest of the chunk go through
    `process`, in order, so the segments are the same bytes either way."""
    frames = []
    for n in range(24):
        frames.append(_batch(n, _messages(n, 8, size=1000)))
        frames.append(_send(100 + n, properties="UNIQ_KEY\x01" + f"{n:032X}"))
    conf = {"mappedFileSizeCommitLog": str(64 * 1024)}
    reference, served = _both(tmp_path, lane, "ASYNC_FLUSH", frames, len(frames), conf=conf)
    assert len(reference.commit_log) >= 3  # the chunk crossed segment ends
    assert served.batched == 24 * 9  # one append for the chunk, rolling where it must
    assert served.frames == reference.frames
    assert served.commit_log == reference.commit_log
    assert served.queues == reference.queues


@pytest.mark.parametrize("flushed", [True, False])
@pytest.mark.parametrize("lane", ["batch", "frames"])
def test_waiting_batches_are_answered_once_durable(
    tmp_path: Path, lane: str, flushed: bool
) -> None:
    """SYNC_FLUSH with the group commit held back (asked for no sync): the sends whose
    producers do not wait are answered at once, the others only once a sync covers them
    (`flushed`: SUCCESS) or their syncFlushTimeout passes (FLUSH_DISK_TIMEOUT, with where the
    messages went), the same frames `process` answers."""
    frames, replies, _ = _plain_batches()
    # Not waited for: the batch and the single send of WAIT false, and the batch whose first
    # message says WAIT false.
    waits_not = {1002, 1005, 1007}
    expected = ResponseCode.SUCCESS if flushed else ResponseCode.FLUSH_DISK_TIMEOUT

    async def held(root: Path, path: str) -> tuple[list[RawFrame], list[RawFrame]]:
        conf = {"syncFlushTimeout": "30000" if flushed else "1000"}
        async with _broker(root, lane=path, flush="SYNC_FLUSH", conf=conf) as (_, store, port):
            commit = store._group_commit
            commit.wake = lambda: None  # type: ignore[method-assign]
            client = _Client(port)
            try:
                await client.send(frames)
                await client.read(len(waits_not))
                await asyncio.sleep(0.2)  # no other answer comes while nothing is synced
                early = list(client.replies)
                if flushed:
                    del commit.wake  # the class's again
                    commit.wake()
                late = await client.read(replies)
            finally:
                client.close()
        return early, late

    results = {path: uvloop.run(held(tmp_path / path, path)) for path in ("process", lane)}
    for early, late in results.values():
        assert {decode_raw(f).opaque for f in early} == waits_not
        assert {decode_raw(f).code for f in late[len(early) :]} == {expected}

    def by_opaque(frames: list[RawFrame]) -> list[tuple[bytes, bytes | None]]:
        pairs = sorted((decode_raw(f).opaque, f.header, f.body) for f in frames)
        return [(header, body) for _, header, body in pairs]

    assert by_opaque(results[lane][1]) == by_opaque(results["process"][1])


# -- the lane's batch helpers against the reference path's ----------------------------------------
def _processor(store_host: Host) -> SendProcessor:
    """A processor whose lane builds messages (it needs no store for that)."""
    config = BrokerConfig.from_properties({"brokerIP1": "127.0.0.1"})
    topics = TopicTable(config, Path("/nonexistent"))
    groups = SubscriptionGroups(Path("/nonexistent"), auto_create=False)
    processor = SendProcessor(config, None, topics, groups)  # type: ignore[arg-type]
    processor.store_host = processor.router.store_host = store_host
    return processor


@pytest.mark.parametrize(
    "store_host", [Host(bytes([10, 1, 2, 3]), 10911), Host(bytes(range(16)), 65535)]
)
@pytest.mark.parametrize("count", [1, 2, 16])
@pytest.mark.parametrize(("region", "trace_on"), [("DefaultRegion", True), ('r%d-\u00fc"x', False)])
def test_the_batch_reply_template_is_the_generic_reply_byte_for_byte(
    store_host: Host, count: int, region: str, trace_on: bool
) -> None:
    config = BrokerConfig.from_properties({"regionId": region, "traceOn": str(trace_on).lower()})
    phys = [(1 << 40) + 1234 * n for n in range(count)]
    request = _request(RequestCode.SEND_BATCH_MESSAGE, 2**31 - 1)
    batch = MessageRun([MessageToStore(TOPIC.encode(), 5, b"", b"")] * count)
    batch.phys = phys
    generic = SendReplies(config, store_host).stored((request, batch, True, 5), phys[0], 77)
    fast = SendReplyFrames(region, trace_on, store_host).success_many(2**31 - 1, phys, 5, 77)
    assert fast == encode_frame(generic)


def _decoded_the_reference_way(
    processor: SendProcessor, body: bytes, fields: tuple[Any, ...], born: Host
) -> list[MessageToStore] | None:
    try:
        entries = decode_batch(body)
    except BatchError:
        return None
    request = _fields_request(RequestCode.SEND_BATCH_MESSAGE, fields, body)
    return processor.router._messages(request, TOPIC, fields[3], entries, born) or None


def _same_messages(got: list[MessageToStore], expected: list[MessageToStore]) -> None:
    names = [f.name for f in dataclasses.fields(MessageToStore)]
    assert [[getattr(m, n) for n in names] for m in got] == [
        [getattr(m, n) for n in names] for m in expected
    ]


_ENTRIES = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=40),
        st.lists(
            st.tuples(st.sampled_from(["WAIT", "TAGS", "K\u00e9", ""]), st.text(max_size=8)),
            max_size=3,
        ).map(lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs).encode()),
        st.booleans(),  # trailing separators
        st.booleans(),  # the total field left 0
    ),
    max_size=6,
)


BORN_V4 = Host(bytes([192, 168, 7, 9]), 40404)
_HOSTS = st.sampled_from([BORN_V4, Host(bytes(range(16)), 1)])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(
    _ENTRIES,
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
    _HOSTS,
    _HOSTS,
    st.sampled_from([0, 1, 0x800]),  # a plain, a compressed, a "some other flag" sysFlag
    st.integers(0, 2**40),
)
def test_batch_bodies_are_read_and_stored_as_decode_batch_reads_them(
    implementation: str,
    entries: list[tuple[int, bytes, bytes, bool, bool]],
    mutations: list[tuple[int, int]],
    born: Host,
    store_host: Host,
    sys_flag: int,
    phy_offset: int,
) -> None:
    """Well-formed and mutated bodies: where the lane takes a batch, its messages are the ones
    the reference path builds (every field, worked-out ones too, for IPv4 and IPv6 hosts), and
    its records (natively written in one call, or by the reference) are theirs byte for byte,
    with consecutive queue offsets; where decode_batch refuses a body or finds it empty, the
    lane leaves it to `process`."""
    processor = _processor(store_host)
    body = bytearray()
    for flag, data, props, trailing, no_total in entries:
        props = props + b"\x02\x02" if trailing else props
        body += _entry(flag, data, props, total=0 if no_total else None)
    for at, byte in mutations:
        if body:
            body[at % len(body)] = byte
    fields = (1, 0, TOPIC, 3, sys_flag, 1_700_000_000_123, 0, 2, "")
    with using(implementation):
        got = _fast_batch(processor, bytes(body), fields, born)
        expected = _decoded_the_reference_way(processor, bytes(body), fields, born)
        if expected is None:
            assert got is None
            return
        assert got is not None
        _same_messages(batch_messages_py(got), expected)
        assert got.count == len(expected)
        assert got.record_size == sum(m.record_size for m in expected)
        assert got.first_properties() == expected[0].properties
        written = bytearray(b"\xee" * (got.record_size + 9))
        phys = encode_batch(
            got, written, 5, queue_offset=41, phy_offset=phy_offset, store_timestamp=1_234
        )
    reference = bytearray(b"\xee" * (got.record_size + 9))
    at = 5
    for n, message in enumerate(expected):
        assert phys[n] == phy_offset + at - 5
        at += encode_record_py(
            message, reference, at, queue_offset=41 + n, phy_offset=phys[n], store_timestamp=1_234
        )
    assert len(phys) == len(expected) and at == 5 + got.record_size
    assert written == reference


def test_the_native_batch_encoder_refuses_before_writing() -> None:
    """A buffer without room, or a size that is not the records' (intake and the append must
    agree): nothing written."""
    if NATIVE is None:
        pytest.skip("sidewinder._native is not loaded (SIDEWINDER_NATIVE=0?)")
    processor = _processor(Host(bytes([10, 1, 2, 3]), 10911))
    body = _entry(0, b"hello", b"TAGS\x01a") + _entry(7, b"", b"")
    fields = (1, 0, TOPIC, 3, 0, 1_700_000_000_123, 0, 2, "")
    batch = _fast_batch(processor, body, fields, BORN_V4)
    assert batch is not None and batch.count == 2
    short = bytearray(batch.record_size - 1)
    with pytest.raises(IndexError):
        encode_batch(batch, short, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
    assert short == bytearray(len(short))
    batch.record_size += 1
    roomy = bytearray(batch.record_size)
    with pytest.raises(ValueError, match="not the"):
        encode_batch(batch, roomy, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
    assert roomy == bytearray(len(roomy))


_NUMBER = st.one_of(
    st.none(),
    st.sampled_from(["", "0", "007", "+1", "-1", "1_0", " 1", "1 ", "\u0661", "\u00b2", "1.0"]),
    st.integers(0, 2**65).map(str),
    st.integers(-(2**65), 2**65).map(lambda n: f"{n:020d}"),
)


@given(st.tuples(*[_NUMBER] * 7))
@example(("4", "1", "0", "1700000000000", "0", None, None))
@example(("2147483647", "0000000000001", "2147483648", "9223372036854775807", "0", "16", None))
@example(("4", "1", "0", "9223372036854775808", "0", "16", "2147483648"))
@example(("4", "1", "0", "1", "0", "16", ""))
@example(("2147483647", "0000000000001", "0", "9223372036854775807", "2147483647", "7", "0"))
def test_the_plain_v2_shortcut_reads_what_the_generic_decode_reads(
    numbers: tuple[str | None, ...],
) -> None:
    """request_from_command's shortcut (a V2 header of plain decimals) gives the generic
    decode's request; never a request for a header that decode refuses."""
    ext = {"a": "g", "b": TOPIC, "c": "TBW102", "i": "TAGS\x01a"}
    for key, number in zip("defghjl", numbers, strict=True):
        if number is not None:
            ext[key] = number
    command = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=7, ext_fields=ext, body=b"x")
    try:
        generic = request_module._generic(command)
    except HeaderError:
        with pytest.raises(HeaderError):
            request_from_command(command)
        return
    assert request_from_command(command) == generic


# A plain header's fields changed one at a time: whether the lane still takes the send.
_HEADER_CHANGES: list[tuple[dict[str, Any], bool]] = [
    ({}, True),
    ({"name": "TBW102"}, True),  # a topic that exists, though the default one
    *(({"name": name}, False) for name in (READ_ONLY, "NoSuchTopic", "%RETRY%g", "a b")),
    *(({"name": name}, False) for name in ("SCHEDULE_TOPIC_XXXX", "x" * 128)),
    ({"queue_id": 3}, True),
    *(({"queue_id": queue_id}, False) for queue_id in (4, 2**31)),
    ({"sys_flag": 1}, True),
    *(({"sys_flag": sys_flag}, False) for sys_flag in (4, 8, 12, 2**31 - 1, 2**31)),
    ({"born_timestamp": 2**63 - 1}, True),
    ({"born_timestamp": 2**63}, False),
    *(({"flag": flag}, True) for flag in (-1, 2**31 - 1)),
    ({"flag": 2**31}, False),
    ({"reconsume": 2**31 - 1}, True),
    ({"reconsume": 2**31}, False),
    ({"properties": "WAIT\x01true"}, True),
    *(({"properties": p}, False) for p in ("DELAY\x013", "TRAN_MSG\x01true", "K\x01XDELAY\x01")),
]


@pytest.mark.parametrize(("changes", "taken"), _HEADER_CHANGES, ids=repr)
def test_a_batch_header_goes_the_lane_where_a_single_send_s_would(
    changes: dict[str, Any], taken: bool
) -> None:
    """The route step's shortcut takes and leaves the headers expected, for a batch as for a
    single send, and names the same topic (a request read by the frame decoder: what the
    shortcut leaves, it leaves to the generic decode)."""
    processor = _processor(Host(bytes([10, 0, 0, 5]), 10911))
    processor.topics.topics[TOPIC] = TopicConfig(TOPIC, 4, 4)
    processor.topics.topics[READ_ONLY] = TopicConfig(READ_ONLY, 4, 4, PERM_READ)
    header = {
        "name": TOPIC,
        "queue_id": 0,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "flag": 0,
        "reconsume": 0,
        "properties": "",
        **changes,
    }
    fields = (1, 0, *header.values())
    batch = _fields_request(RequestCode.SEND_BATCH_MESSAGE, fields, _entry(0, b"body", b""))
    single = _fields_request(RequestCode.SEND_MESSAGE_V2, fields, b"body")
    routed = [processor.router.route_now(r, BORN_V4, "?", 1 << 20) for r in (batch, single)]
    targets = {None if r is None else r[1].topic for r in routed}
    assert targets == {header["name"].encode() if taken else None}


@pytest.mark.interop
@pytest.mark.reference_fixtures
@pytest.mark.usefixtures("hot_path")
def test_the_stock_clients_batches_go_the_lane(tmp_path: Path) -> None:
    """The SEND_BATCH_MESSAGE frames the Java and Go clients sent in the wire captures: read by
    the lane, and stored and answered as `process` does."""
    wire = ensure_fixture("wire")
    frames: list[bytes] = []
    topics: set[str] = set()
    messages = 0
    for name in ("java", "go"):
        for captured in read_capture(wire / f"{name}.jsonl"):
            header = captured.header()
            if header.get("code") == RequestCode.SEND_BATCH_MESSAGE and not is_response(header):
                frames.append(captured.raw)
                topics.add(header["extFields"]["b"])
                messages += len(decode_batch(decode_raw(_raw_frame(captured.raw)).body_bytes))
    assert len(frames) >= 4
    reference, served = _both(
        tmp_path, "frames", "ASYNC_FLUSH", frames, len(frames), topics=sorted(topics)
    )
    assert (reference.batched, served.batched) == (0, messages)
    assert all(r.code == ResponseCode.SUCCESS for r in served.replies)
    assert served.frames == reference.frames
    assert served.commit_log == reference.commit_log
    assert served.queues == reference.queues


def _raw_frame(frame: bytes) -> RawFrame:
    decoder = FrameDecoder()
    decoder.feed(frame)
    (raw,) = decoder.frames()
    return raw


def _request(code: int, opaque: int) -> SendRequest:
    batch = code == RequestCode.SEND_BATCH_MESSAGE
    return SendRequest(code, opaque, 0, TOPIC, 0, 0, 0, 0, 0, "", SerializeType.JSON, b"", batch)


def _fields_request(code: int, fields: tuple[Any, ...], body: bytes) -> SendRequest:
    """A request as the frame decoder reads it from send_v2_fields's tuple."""
    batch = code == RequestCode.SEND_BATCH_MESSAGE
    return SendRequest(code, *fields, SerializeType.JSON, body, batch, complete=False)


def _fast_batch(
    processor: SendProcessor, body: bytes, fields: tuple[Any, ...], born: Host
) -> BatchToStore | None:
    """The batch the route step's fast path builds, or None where it leaves the body to the
    full step (which refuses it)."""
    request = _fields_request(RequestCode.SEND_BATCH_MESSAGE, fields, body)
    router = processor.router
    shared = router._shared(request, TOPIC.encode(), request.queue_id, born)
    return batch_to_store(body, shared, router.cluster_property)


# -- golden: the replies and store files of the reference path ------------------------------------
RETRY = "%RETRY%golden-group"
GOLDEN = Path(__file__).parent / "golden"


def _routed_sends() -> tuple[list[bytes], int]:
    """Single sends each route step treats its own way, and refusals: the frames, how many get
    a reply."""
    uniq = "UNIQ_KEY\x01{:032X}"
    v1 = SendMessageRequestHeader(**_header_fields(8, uniq.format(8))).to_ext()
    frames = [
        _send(0, properties=uniq.format(0), topic=RETRY, reconsume_times=1),  # stays a retry
        # Consumed maxReconsumeTimes: into %DLQ%golden-group (made, as RocketMQ makes it).
        _send(1, properties=uniq.format(1), topic=RETRY, reconsume_times=3, max_reconsume_times=3),
        _send(2, properties="TRAN_MSG\x01true\x02PGROUP\x01pg\x02" + uniq.format(2), sys_flag=4),
        _send(3, properties="DELAY\x012\x02WAIT\x01false\x02" + uniq.format(3)),
        _send(4, properties=uniq.format(4), topic=READ_ONLY),  # NO_PERMISSION
        _send(5, properties=uniq.format(5), topic="SCHEDULE_TOPIC_XXXX"),  # forbidden
        _send(6, properties=uniq.format(6), topic="a b"),  # not a topic name
        _send(7, properties="K\x01" + "v" * 32_760),  # MESSAGE_ILLEGAL: properties too long
        encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE, opaque=1008, ext_fields=v1)),
        _send(9, properties=uniq.format(9), ext_changes={"b": ""}, oneway=True),
        _send(10, properties=uniq.format(10), serialize_type=SerializeType.ROCKETMQ),
        _send(11, properties=uniq.format(11), ext_changes={"h": "1.5"}),  # does not decode
        _send(12, properties="WAIT\x01true\x02TRAN_MSG\x01false\x02" + uniq.format(12)),
    ]
    return frames, len(frames) - 1


def _header_fields(n: int, properties: str) -> dict[str, Any]:
    return {
        "producer_group": "lane-producer",
        "topic": TOPIC,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": n % 4,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000 + n,
        "flag": 7,
        "properties": properties,
    }


def _segment_crossing() -> tuple[list[bytes], int]:
    frames = []
    for n in range(24):
        frames.append(_batch(n, _messages(n, 8, size=1000)))
        frames.append(_send(100 + n, properties="UNIQ_KEY\x01" + f"{n:032X}"))
    return frames, len(frames)


# name -> frames, replies, broker settings, extra topics, whether a chunk keeps the order of
# the one-at-a-time path (no send in it waits for a topic to be made).
_SCENARIOS: dict[str, tuple[Any, dict[str, str], tuple[str, ...], bool]] = {
    "singles": (_frames, {}, (), False),
    "plain_batches": (lambda: _plain_batches()[:2], {}, (), True),
    "refused_batches": (
        lambda: _refused_batches()[:2],
        {"maxMessageSize": str(64 * 1024)},
        (),
        False,
    ),
    "segment_crossing": (_segment_crossing, {"mappedFileSizeCommitLog": str(64 * 1024)}, (), True),
    "routed": (_routed_sends, {}, (RETRY,), False),
    "rejected_halves": (_routed_sends, {"rejectTransactionMessage": "true"}, (RETRY,), False),
}


def _golden_of(served: Served, root: Path) -> dict[str, Any]:
    """What is compared: each reply's frame (the client's port masked in remarks), and digests
    of the masked CommitLog segments and of the ConsumeQueue files (but the schedule topic's,
    whose tags codes are delivery times)."""
    port = re.compile(rb"Producer: 127\.0\.0\.1:\d+")
    replies = [
        [port.sub(b"Producer: ?", header).decode("latin-1"), (body or b"").hex()]
        for header, body in served.frames
    ]
    queues = {
        name: hashlib.sha256(data).hexdigest()
        for name, data in served.queues.items()
        if "SCHEDULE_TOPIC_XXXX" not in name
    }
    return {
        "replies": replies,
        "answers": [list(_answer(r)) for r in served.replies],
        "commit_log": [hashlib.sha256(segment).hexdigest() for segment in served.commit_log],
        "queues": queues,
        "records": sorted(hashlib.sha256(repr(r).encode()).hexdigest() for r in served.records),
    }


@pytest.mark.parametrize("lane", ["process", "batch", "frames"])
@pytest.mark.parametrize("scenario", sorted(_SCENARIOS))
@pytest.mark.usefixtures("hot_path")
def test_the_one_path_gives_the_golden_replies_and_store_files(
    tmp_path: Path, scenario: str, lane: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The goldens are what the send path before the pipeline (its one-at-a-time `process`)
    answered and stored for the same pipelined frames. One request at a time, the pipeline
    gives them exactly; a chunk at a time too where no send waits for a topic to be made
    (else the same answers but for where the messages went, and the same records)."""
    monkeypatch.setattr(random, "randrange", lambda stop: stop - 1)
    build, conf, topics, in_order = _SCENARIOS[scenario]
    frames, replies = build()
    served = uvloop.run(
        _serve_and_send(
            tmp_path,
            lane=lane,
            flush="ASYNC_FLUSH",
            frames=frames,
            replies=replies,
            conf=conf,
            topics=topics,
        )
    )
    got = json.loads(json.dumps(_golden_of(served, tmp_path)))
    golden = json.loads((GOLDEN / f"{scenario}.json").read_text())
    if lane == "process" or in_order:
        assert got == golden
        return
    assert got["answers"] == golden["answers"]
    assert got["records"] == golden["records"]


@pytest.mark.parametrize("lane", ["process", "batch", "frames"])
@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SLAVE"])
def test_a_message_too_big_for_a_store_that_takes_no_writes_is_unavailable(
    tmp_path: Path, lane: str, role: str
) -> None:
    """RocketMQ's putMessage checks the store's status before the message's size: a slave
    answers a message too big for it SERVICE_NOT_AVAILABLE, a master MESSAGE_ILLEGAL; either
    counts in putMessageFailedTimes."""
    if lane == "frames" and NATIVE is None:
        pytest.skip("the frame lane needs sidewinder._native")
    too_big = encode_frame(
        RemotingCommand(
            RequestCode.SEND_MESSAGE_V2,
            opaque=7,
            ext_fields=_header(0, "UNIQ_KEY\x01" + "A" * 32),
            body=b"x" * 2048,
        )
    )

    async def scenario() -> tuple[RemotingCommand, int]:
        conf = {"brokerRole": role, "maxMessageSize": "1024"}
        async with _broker(tmp_path, lane=lane, flush="ASYNC_FLUSH", conf=conf) as (
            _,
            store,
            port,
        ):
            client = _Client(port)
            try:
                await client.send([too_big])
                (reply,) = await client.read(1)
            finally:
                client.close()
            return decode_raw(reply), store.stats.put_failed_times

    reply, failed = uvloop.run(scenario())
    if role == "SLAVE":
        assert reply.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (reply.remark or "")
    else:
        assert reply.code == ResponseCode.MESSAGE_ILLEGAL
        assert "maxMessageSize" in (reply.remark or "") or "1024" in (reply.remark or "")
    assert failed == 1
