"""POP on the wire, request by request, against the 5.x targets: what an empty pop answers,
how long polling ends, and the codes and remarks of refused pops, acks and invisible-time
changes (as RocketMQ 5.3.2 answers them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from interop.target import ClusterTarget
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import queue_bound
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.pop import (
    INVALID_PARAMETER,
    POLLING_TIMEOUT,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
    parse_msg_offsets,
    parse_start_offsets,
)
from sidewinder.remoting.client import RemotingClient
from tests.helpers import unique
from tests.interop.pop_scenarios import closing, new_topic

pytestmark = pytest.mark.interop


@pytest.fixture
async def remoting() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    yield client
    await client.close()


def pop_request(topic: str, group: str, **fields: Any) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=-1,
        max_msg_nums=8,
        invisible_time=30_000,
        poll_time=0,
        born_time=int(time.time() * 1000),
        init_mode=ConsumeInitMode.MIN,
        exp_type="TAG",
        exp="*",
    )
    ext = header.to_ext()
    ext.update({key: str(value) for key, value in fields.items()})
    return RemotingCommand.request(PopRequestCode.POP_MESSAGE, ext)


def ack_request(topic: str, group: str, **fields: Any) -> RemotingCommand:
    extra = f"0 {int(time.time() * 1000)} 30000 0 0 broker-a 0 0"
    ext = AckMessageRequestHeader(group, topic, 0, extra, 0).to_ext()
    ext.update({key: str(value) for key, value in fields.items()})
    return RemotingCommand.request(PopRequestCode.ACK_MESSAGE, ext)


def change_request(topic: str, group: str, **fields: Any) -> RemotingCommand:
    extra = f"0 {int(time.time() * 1000)} 30000 0 0 broker-a 0 0"
    ext = ChangeInvisibleTimeRequestHeader(group, topic, 0, extra, 0, 5000).to_ext()
    ext.update({key: str(value) for key, value in fields.items()})
    return RemotingCommand.request(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)


async def test_pop_reply_headers_empty_and_found(
    pop_target: ClusterTarget, request: pytest.FixtureRequest, remoting: RemotingClient
) -> None:
    topic, group = await new_topic(pop_target, "PopWire", queues=2), unique("PopWireG")
    broker = pop_target.broker_addr
    # Nothing there, no long polling: POLLING_TIMEOUT at once, no body, a full reply header.
    empty = await remoting.invoke(broker, pop_request(topic, group), 5)
    assert (empty.code, empty.body_bytes) == (POLLING_TIMEOUT, b"")
    header = PopMessageResponseHeader.from_ext(empty.ext_fields)
    assert (header.rest_num, header.invisible_time) == (0, 30_000)
    assert not header.start_offset_info and not header.msg_offset_info
    # Long polling on nothing: the same answer once the poll time is over.
    started = time.monotonic()
    held = await remoting.invoke(broker, pop_request(topic, group, pollTime=1200), 10)
    assert held.code == POLLING_TIMEOUT
    assert 1.0 <= time.monotonic() - started < 5
    producer = Producer(unique("PopWireP"), pop_target.namesrv_addr)
    async with closing(producer):
        sent = [await producer.send(Message(topic, f"w{n}".encode())) for n in range(3)]
    found = await remoting.invoke(broker, pop_request(topic, group, invisibleTime=7000), 5)
    assert found.code == ResponseCode.SUCCESS
    header = PopMessageResponseHeader.from_ext(found.ext_fields)
    assert header.invisible_time == 7000
    assert abs(header.pop_time - time.time() * 1000) < 10_000
    offsets: dict[tuple[str, int], list[int]] = {}
    for result in sent:
        offsets.setdefault(("0", result.queue.queue_id), []).append(result.queue_offset)
    assert parse_msg_offsets(header.msg_offset_info) == offsets
    assert parse_start_offsets(header.start_offset_info) == {key: 0 for key in offsets}
    # They are invisible now: the next pop finds nothing.
    again = await remoting.invoke(broker, pop_request(topic, group), 5)
    assert again.code == POLLING_TIMEOUT


async def test_refused_pops(
    pop_target: ClusterTarget, request: pytest.FixtureRequest, remoting: RemotingClient
) -> None:
    topic, group = await new_topic(pop_target, "PopBad", queues=2), unique("PopBadG")
    broker = pop_target.broker_addr

    async def ask(**fields: Any) -> RemotingCommand:
        return await remoting.invoke(broker, pop_request(topic, group, **fields), 5)

    too_many = await ask(maxMsgNums=33)
    assert too_many.code == INVALID_PARAMETER and "32" in (too_many.remark or "")
    no_queue = await ask(queueId=5)
    assert no_queue.code == INVALID_PARAMETER and "queueId[5]" in (no_queue.remark or "")
    missing = unique("PopBadNoTopic")
    no_topic = await remoting.invoke(broker, pop_request(missing, group), 5)
    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST and missing in (no_topic.remark or "")
    # A pop born longer ago than its poll time (plus 0.5 s) is over before it starts.
    stale = await ask(bornTime=int(time.time() * 1000) - 5000)
    assert stale.code == POLLING_TIMEOUT and "timeout" in (stale.remark or "")


async def test_refused_acks_and_changes(
    pop_target: ClusterTarget, request: pytest.FixtureRequest, remoting: RemotingClient
) -> None:
    # One queue: the message is at offset 0 of queue 0, where the requests point. (RocketMQ
    # checks the topic, the queue id and the offset before it reads the extraInfo.)
    topic, group = await new_topic(pop_target, "PopBadAck", queues=1), unique("PopBadAckG")
    broker = pop_target.broker_addr
    producer = Producer(unique("PopBadAckP"), pop_target.namesrv_addr)
    async with closing(producer):
        sent = await producer.send(Message(topic, b"one"))
    # In the queue before the offset checks: the send's answer can come before its dispatch.
    deadline = time.monotonic() + 10
    while await queue_bound(remoting, broker, sent.queue, RequestCode.GET_MAX_OFFSET) < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    missing = unique("PopBadAckNoTopic")
    for build in (ack_request, change_request):
        name = build.__name__

        async def ask(build: Any = build, topic: str = topic, **fields: Any) -> RemotingCommand:
            return await remoting.invoke(broker, build(topic, group, **fields), 5)

        no_topic = await ask(topic=missing)
        assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST, name
        assert missing in (no_topic.remark or ""), name
        no_queue = await ask(queueId=9)
        assert no_queue.code == ResponseCode.MESSAGE_ILLEGAL, name
        assert "queueId[9]" in (no_queue.remark or ""), name
        beyond = await ask(offset=99)
        assert beyond.code == ResponseCode.NO_MESSAGE, name
        garbled = await ask(extraInfo="garbage")
        # RocketMQ fails on it (an exception's text); we refuse it as a bad parameter.
        wanted = ResponseCode.SYSTEM_ERROR if pop_target.kind == "rocketmq5" else INVALID_PARAMETER
        assert garbled.code == wanted, name
        assert "extraInfo" in (garbled.remark or ""), name
    # A well-formed handle of a check point the broker never made: acked all the same (the
    # ack is recorded; nothing is there to settle).
    unknown = await remoting.invoke(broker, ack_request(topic, group), 5)
    assert unknown.code == ResponseCode.SUCCESS
