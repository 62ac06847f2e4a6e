"""The send path's batch lane (SendProcessor.take_batch) against its reference, `process`: the same
frames, pipelined into one write to a real server over a real store, give the same replies and
the same CommitLog records whichever path serves them. Plus the lane's two helpers against the
functions the reference path uses."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
import uvloop
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.processors.send import SendProcessor
from sidewinder.broker.processors.send_batch import SendReplyFrames, strip_wait
from sidewinder.broker.topics import TopicConfig, TopicTable
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from sidewinder.protocol.message import MessageConst, property_value, without_property
from sidewinder.protocol.record import Host, MessageRecord
from sidewinder.remoting.codec import FrameDecoder, encode_frame
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.server import RemotingServer
from sidewinder.store.commit_log import AppendResult, AppendStatus
from sidewinder.store.message_store import MessageStore, PutResult, PutStatus

TOPIC = "BatchLane"


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
    processor = SendProcessor.__new__(SendProcessor)
    processor.config = config
    processor.store_host = store_host
    request = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=opaque)
    append = AppendResult(AppendStatus.PUT_OK, phy, 100, queue_offset, 1, 0, (phy,), store_host)
    generic = processor.reply(request, PutResult(PutStatus.PUT_OK, append), queue_id)
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
def _send(n: int, *, properties: str, oneway: bool = False, **changes: Any) -> bytes:
    fields: dict[str, Any] = {
        "producer_group": "lane-producer",
        "topic": TOPIC,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": n % 4,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000 + n,
        "flag": n % 3,
        "properties": properties,
        "reconsume_times": 0,
        "unit_mode": False,
        "batch": False,
        "broker_name": "broker-a",
        **changes,
    }
    ext = SendMessageRequestHeader(**fields).to_ext(names=SEND_V2_NAMES)
    command = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        opaque=1000 + n,
        flag=ONEWAY_FLAG if oneway else 0,
        ext_fields=ext,
        body=f"body-{n}".encode() * (n % 5 + 1),
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


async def _serve_and_send(
    root: Path, *, lane: str, flush: str, frames: list[bytes], replies: int
) -> tuple[list[RemotingCommand], list[tuple[object, ...]]]:
    config = BrokerConfig.from_properties(
        {
            "storePathRootDir": str(root),
            "storePathCommitLog": str(root / "commitlog"),
            "flushDiskType": flush,
            "brokerIP1": "127.0.0.1",
            "listenPort": 10911,
            "mappedFileSizeCommitLog": 1 << 20,
        }
    )
    store = MessageStore(config.store, store_host=Host(bytes([127, 0, 0, 1]), 10911))
    await store.start()
    topics = TopicTable(config, root / "config")
    topics.upsert(TopicConfig(TOPIC, 4, 4))
    groups = SubscriptionGroups(root / "config", auto_create=True)
    send = SendProcessor(config, store, topics, groups, max_delay_level=18)
    send.lane.enabled = lane != "process"
    table = ProcessorTable()
    table.register(send, RequestCode.SEND_MESSAGE_V2)
    if lane == "frames":
        table.set_frame_lane(send.lane, RequestCode.SEND_MESSAGE_V2)
    server = RemotingServer(table, config.server)
    port = await server.start("127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setblocking(False)
    try:
        await loop.sock_sendall(sock, b"".join(frames))  # one write: one chunk, as pipelined
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        while len(got) < replies:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 10)
            assert chunk, "the server closed the connection"
            decoder.feed(chunk)
            got += list(decoder.commands())
        await store.caught_up(2)
        records = [_fields(r) for r in store.commit_log.records()]
        assert send.lane.batched == (0 if lane == "process" else 6)  # 0-3, 7, 9 are plain
    finally:
        sock.close()
        await server.stop()
        await store.shutdown()
    return sorted(got, key=lambda c: c.opaque), records


@pytest.mark.parametrize("lane", ["batch", "frames"])
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.usefixtures("hot_path")
def test_the_lane_answers_and_stores_as_process_does(tmp_path: Path, flush: str, lane: str) -> None:
    """`batch`: the lane takes decoded requests; `frames`: it reads them from their frames."""
    frames, replies = _frames()
    results = {
        path: uvloop.run(
            _serve_and_send(tmp_path / path, lane=path, flush=flush, frames=frames, replies=replies)
        )
        for path in ("process", lane)
    }
    (reference_replies, reference_records) = results["process"]
    (lane_replies, lane_records) = results[lane]
    assert [r.opaque for r in reference_replies] == [1000 + n for n in range(10) if n != 7]
    codes = {r.opaque - 1000: r.code for r in reference_replies}
    assert codes[5] == ResponseCode.SYSTEM_ERROR and codes[0] == ResponseCode.SUCCESS

    # Replies: the same fields; the offsets differ where the two paths stored in another order.
    def answer(reply: RemotingCommand) -> tuple[object, ...]:
        ext = dict(reply.ext_fields or {})
        remark = (reply.remark or "").split(" Producer: ")[0]  # the client's port differs
        return (reply.code, remark, ext.pop("queueId", None), sorted(ext))

    assert list(map(answer, lane_replies)) == list(map(answer, reference_replies))
    stored_at = {
        (r.ext_fields or {})["msgId"] for r in lane_replies if r.code == ResponseCode.SUCCESS
    }
    assert len(stored_at) == 8  # every send but the refused one and the oneway one
    # Records: the same set (the lane stores its share before process() stores the rest, so
    # the order may differ), every field but the store timestamp and the offsets.
    assert sorted(lane_records) == sorted(reference_records)  # type: ignore[type-var]
    assert len(lane_records) == 9  # all but the send to a queue that does not exist
    for fields in lane_records:
        topic, properties = fields[0], fields[3]
        assert isinstance(properties, bytes)
        assert (b"WAIT\x01" in properties) == (topic == "SCHEDULE_TOPIC_XXXX")
        assert b"CLUSTER\x01DefaultCluster" in properties
