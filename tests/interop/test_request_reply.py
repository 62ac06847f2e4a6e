"""Request-reply (RPC over MQ): DefaultMQProducer.request() waits for the reply a replier makes
with MessageUtil.createReplyMessage and sends to <cluster>_REPLY_TOPIC; the broker pushes it to
the requester (PUSH_REPLY_MESSAGE_TO_CLIENT). Same outcome on RocketMQ and on Sidewinder.
"""

from __future__ import annotations

import asyncio
import hashlib

import pytest
import uvloop

from interop.drivers import body_for, run_driver
from interop.mqadmin import create_topic, mqadmin
from interop.target import ClusterTarget
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.push_consumer import PushConsumer
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.message import MessageConst
from tests.helpers import unique
from tests.interop.scenarios import start_consumer

pytestmark = pytest.mark.interop

REQUESTS = 20


def reply_md5(index: int) -> str:
    """The body the Java replier answers request `index` with: "reply-" + the request's."""
    return hashlib.md5(b"reply-" + body_for(index)).hexdigest()


def test_reply_topic_exists_from_the_start(target: ClusterTarget) -> None:
    listed = mqadmin(target.namesrv_addr, "topicList").output.split()
    assert f"{target.cluster_name}_REPLY_TOPIC" in listed


def test_java_requester_gets_every_reply_from_a_java_replier(target: ClusterTarget) -> None:
    topic = unique("Request")
    create_topic(target.namesrv_addr, topic)
    replier = start_consumer(
        target, "java", topic, REQUESTS, group=unique("CG_replier"), reply=True
    )
    run = run_driver(
        "java",
        "request",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=unique("PG_requester"),
        count=REQUESTS,
        request_timeout=10,
        timeout_s=120,
    ).check()
    replied = run.of("replied")
    assert [e["index"] for e in replied] == list(range(REQUESTS))
    for event in replied:
        assert event["correlationId"] == event["requestCorrelationId"], event
        assert event["bodyMd5"] == reply_md5(event["index"]), event
        assert event["topic"] == f"{target.cluster_name}_REPLY_TOPIC", event
        assert event["msgType"] == "reply", event
    answered = replier.wait().check().of("answered")
    assert len(answered) == REQUESTS
    assert all(a.get("status") == "SEND_OK" for a in answered), answered[:3]
    assert {a["correlationId"] for a in answered} == {e["correlationId"] for e in replied}


def test_python_requester_gets_every_reply_from_a_java_replier(target: ClusterTarget) -> None:
    topic = unique("PyRequest")
    create_topic(target.namesrv_addr, topic)
    replier = start_consumer(
        target, "java", topic, REQUESTS, group=unique("CG_replier"), reply=True
    )

    async def scenario() -> None:
        producer = Producer(unique("PG_py_requester"), target.namesrv_addr)
        try:
            for n in range(REQUESTS):
                reply = await producer.request(Message(topic, body_for(n)), timeout_s=10)
                assert reply.body == b"reply-" + body_for(n)
                assert reply.topic == f"{target.cluster_name}_REPLY_TOPIC"
                assert reply.properties[MessageConst.MESSAGE_TYPE] == "reply"
                assert reply.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] == producer.client_id
                assert reply.correlation_id
                assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties
        finally:
            await producer.close()

    uvloop.run(asyncio.wait_for(scenario(), 120))
    assert len(replier.wait().check().of("answered")) == REQUESTS


def test_java_requester_gets_every_reply_from_a_python_replier(target: ClusterTarget) -> None:
    topic = unique("RequestToPy")
    create_topic(target.namesrv_addr, topic)

    async def scenario() -> None:
        replier = Producer(unique("PG_py_replier"), target.namesrv_addr)

        async def answer(messages: list[ReceivedMessage]) -> None:
            for message in messages:
                await replier.reply(message, b"reply-" + message.body)

        consumer = PushConsumer(
            unique("CG_py_replier"), target.namesrv_addr, listener=answer, consume_from="first"
        )
        consumer.subscribe(topic)
        await consumer.start()
        try:
            run = await asyncio.to_thread(
                run_driver,
                "java",
                "request",
                namesrv=target.namesrv_addr,
                topic=topic,
                group=unique("PG_requester"),
                count=REQUESTS,
                request_timeout=10,
                timeout_s=120,
            )
            run.check()
            replied = run.of("replied")
            assert len(replied) == REQUESTS
            for event in replied:
                assert event["correlationId"] == event["requestCorrelationId"], event
                assert event["bodyMd5"] == reply_md5(event["index"]), event
        finally:
            await consumer.close()
            await replier.close()

    uvloop.run(asyncio.wait_for(scenario(), 150))


def test_a_reply_to_a_requester_not_connected(target: ClusterTarget) -> None:
    """The broker stores the reply but answers SYSTEM_ERROR, naming the missing client."""
    reply_topic = f"{target.cluster_name}_REPLY_TOPIC"

    async def scenario() -> None:
        producer = Producer(unique("PG_lost_replier"), target.namesrv_addr)
        queue = MessageQueue(reply_topic, target.broker_name, 0)
        try:
            props = {
                MessageConst.MESSAGE_TYPE: "reply",
                MessageConst.CORRELATION_ID: "c-1",
                MessageConst.MESSAGE_REPLY_TO_CLIENT: "10.9.9.9@nobody",
            }
            with pytest.raises(ClientError) as missing:
                await producer.send(Message(reply_topic, b"x", properties=props), queue=queue)
            assert missing.value.code == 1
            assert missing.value.remark == (
                "push reply message fail, channel of <10.9.9.9@nobody> not found."
            )
            del props[MessageConst.MESSAGE_REPLY_TO_CLIENT]
            with pytest.raises(ClientError) as unnamed:
                await producer.send(Message(reply_topic, b"x", properties=props), queue=queue)
            assert unnamed.value.code == 1
            assert unnamed.value.remark == "reply message properties[REPLY_TO_CLIENT] is null"
        finally:
            await producer.close()

    uvloop.run(asyncio.wait_for(scenario(), 60))
