"""Our Python client (producer, pull consumer, admin) against every target: the same calls
work on RocketMQ 4.9 and on Sidewinder, and interoperate with the stock Java client."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvloop

from interop.drivers import body_for, produce_messages
from interop.mqadmin import create_topic, mqadmin
from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer, ReceivedMessage
from sidewinder.client.producer import Message, Producer
from tests.helpers import unique

pytestmark = pytest.mark.interop


async def drain(consumer: PullConsumer, expect: int, seconds: float = 60) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    deadline = time.monotonic() + seconds
    while len(got) < expect and time.monotonic() < deadline:
        got += await consumer.poll()
    return got


def test_produce_consume_and_progress(target: ClusterTarget) -> None:
    async def scenario() -> None:
        topic, group = unique("PyClient"), unique("PyGroup")
        admin = Admin(target.namesrv_addr)
        producer = Producer(unique("PyProducer"), target.namesrv_addr)
        consumer = PullConsumer(group, target.namesrv_addr, poll_timeout_s=2)
        try:
            await admin.create_topic(topic, queues=4)
            assert topic in await admin.topics()
            route = await admin.route(topic)
            assert sum(q["writeQueueNums"] for q in route["queueDatas"]) == 4
            sent = []
            for n in range(200):
                message = Message(
                    topic,
                    f"py-{n}".encode(),
                    tags="TagA" if n % 2 else "TagB",
                    keys=[f"key-{n}"],
                    properties={"n": str(n)},
                )
                sent.append(await producer.send(message))
            assert {r.status for r in sent} == {"SEND_OK"}
            batch = await producer.send_batch(
                [Message(topic, f"batch-{n}".encode(), keys=[f"b-{n}"]) for n in range(10)]
            )
            assert [r.queue_offset for r in batch] == [batch[0].queue_offset + n for n in range(10)]
            consumer.assign(await consumer.queues(topic))
            got = await drain(consumer, 210)
            assert len(got) == 210
            by_key = {m.keys[0]: m for m in got}
            for n in range(200):
                message = by_key[f"key-{n}"]
                assert message.body == f"py-{n}".encode()
                assert message.tags == ("TagA" if n % 2 else "TagB")
                assert message.properties["n"] == str(n)
                assert message.msg_id == sent[n].msg_id
            assert {by_key[f"b-{n}"].body for n in range(10)} == {
                f"batch-{n}".encode() for n in range(10)
            }
            await consumer.commit()
            progress = await admin.consumer_progress(group, topic)
            assert len(progress) == 4 and sum(r.broker_offset for r in progress) == 210
            assert all(r.lag == 0 for r in progress)
        finally:
            await producer.close()
            await consumer.close()
            await admin.close()

    uvloop.run(asyncio.wait_for(scenario(), 120))


def test_the_java_producer_and_our_consumer(target: ClusterTarget) -> None:
    topic, group = unique("JavaToPy"), unique("JavaToPyGroup")
    sent = produce_messages("java", namesrv=target.namesrv_addr, topic=topic, count=50, group=group)
    assert len(sent) == 50

    async def scenario() -> None:
        consumer = PullConsumer(unique("PyReader"), target.namesrv_addr, poll_timeout_s=2)
        try:
            consumer.assign(await consumer.queues(topic))
            got = await drain(consumer, 50)
        finally:
            await consumer.close()
        assert sorted(m.body for m in got) == sorted(body_for(n) for n in range(50))

    uvloop.run(asyncio.wait_for(scenario(), 120))


def producer_clients(namesrv: str, group: str, topic: str) -> str:
    """mqadmin producerConnection's output (an exception while the group has no producer)."""
    return mqadmin(namesrv, "producerConnection", "-g", group, "-t", topic, check=False).output


def test_producer_connection_lists_our_producers(target: ClusterTarget) -> None:
    """Our producers heartbeat as RocketMQ's do: at start (or at the first send, if never
    started) to the brokers of their routes, so a broker lists them by group; at close they
    unregister, and it no longer does."""
    ns = target.namesrv_addr
    topic, started_group, lazy_group = unique("PyConn"), unique("PyStarted"), unique("PyLazy")
    create_topic(ns, topic, queues=1)

    async def listed(group: str, client_id: str, want: bool) -> None:
        deadline = time.monotonic() + 20
        while (client_id in await asyncio.to_thread(producer_clients, ns, group, topic)) != want:
            assert time.monotonic() < deadline, f"{client_id} listed: not {want}"
            await asyncio.sleep(0.5)

    async def scenario() -> None:
        started = Producer(started_group, ns)
        lazy = Producer(lazy_group, ns)
        try:
            await started.start()  # no send: TBW102's route names the broker
            await listed(started_group, started.client_id, True)
            await lazy.send(Message(topic, b"x"))
            await listed(lazy_group, lazy.client_id, True)
        finally:
            await started.close()
            await lazy.close()
        await listed(started_group, started.client_id, False)
        await listed(lazy_group, lazy.client_id, False)

    uvloop.run(asyncio.wait_for(scenario(), 120))
