"""RocketMQ 5's recall of a timer message on the 5.x targets (both run with
recallMessageEnable=true): a timer message's send answers with a recall handle, RECALL_MESSAGE
with it cancels the delivery, and a handle it cannot use is refused as RocketMQ 5.3.2 refuses it."""

from __future__ import annotations

import asyncio
import time

import pytest

from interop.target import ClusterTarget
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.push_consumer import ConsumeStatus, PushConsumer
from sidewinder.client.route_cache import ClientError
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.recall import (
    ILLEGAL_OPERATION,
    RecallHandle,
    RecallMessageRequestHeader,
    recall_handle,
)
from tests.helpers import unique
from tests.interop.pop_scenarios import closing, new_topic

pytestmark = pytest.mark.interop

HOLD_MS = 4000


async def test_a_recalled_timer_message_is_never_delivered(pop_target: ClusterTarget) -> None:
    topic = await new_topic(pop_target, "Recall", queues=1)
    got: list[bytes] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        got.extend(m.body for m in messages)
        return ConsumeStatus.SUCCESS

    consumer = PushConsumer(
        unique("RecallG"), pop_target.namesrv_addr, listener=listener, consume_from="first"
    )
    consumer.subscribe(topic)
    producer = Producer(unique("RecallP"), pop_target.namesrv_addr)
    async with closing(producer, consumer):
        plain = await producer.send(Message(topic, b"now"))
        assert plain.recall_handle is None
        deliver_at = int(time.time() * 1000) + HOLD_MS
        recalled = await producer.send(Message(topic, b"recalled", deliver_at=deliver_at))
        kept = await producer.send(Message(topic, b"kept", deliver_at=deliver_at))
        assert recalled.recall_handle is not None and kept.recall_handle is not None
        handle = RecallHandle.decode(recalled.recall_handle)
        assert (handle.topic, handle.broker_name, handle.message_id) == (
            topic,
            pop_target.broker_name,
            recalled.msg_id,
        )
        # The slot's time (deliver_at rounded down to the timer's second) plus one.
        assert int(handle.timestamp) == (deliver_at - 1) // 1000 * 1000 + 1
        assert await producer.recall_message(topic, recalled.recall_handle) == recalled.msg_id
        await consumer.start()
        deadline = time.monotonic() + HOLD_MS / 1000 + 15
        while b"kept" not in got and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)  # anything delivered with it would be here by now
    assert sorted(got) == [b"kept", b"now"]


async def test_handles_it_cannot_use_are_refused(pop_target: ClusterTarget) -> None:
    topic = await new_topic(pop_target, "RecallBad", queues=1)
    future = int(time.time() * 1000) + 60_000
    broker = pop_target.broker_name
    missing = unique("RecallNoTopic")
    refusals = [
        (topic, "not base64!", ILLEGAL_OPERATION, "recall handle is invalid"),
        (topic, recall_handle("Other", broker, future, "ID"), ILLEGAL_OPERATION,
         "recall failed, topic not match"),
        (topic, recall_handle(topic, broker, future - 120_000, "ID"), ILLEGAL_OPERATION,
         "recall failed, timestamp invalid"),
        (topic, recall_handle(topic, "no-such-broker", future, "ID"), ILLEGAL_OPERATION,
         "recall failed, broker service not available"),
        (missing, recall_handle(missing, broker, future, "ID"), ResponseCode.TOPIC_NOT_EXIST,
         f"recall failed, the topic[{missing}] not exist"),
    ]  # fmt: skip
    producer = Producer(unique("RecallBadP"), pop_target.namesrv_addr)
    async with closing(producer):
        for to, handle, code, remark in refusals:
            header = RecallMessageRequestHeader(to, handle, producer.group)
            request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext())
            reply = await producer.remoting.invoke(pop_target.broker_addr, request, 5)
            assert (reply.code, reply.remark) == (code, remark)
        # Our client reads the handle before it asks a broker.
        with pytest.raises(ClientError):
            await producer.recall_message(topic, "not base64!")
