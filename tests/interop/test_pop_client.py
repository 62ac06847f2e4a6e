"""Our SimpleConsumer (RocketMQ 5's POP over remoting) against the 5.x targets: receive hides
what it hands out, ack settles it for good, an unsettled message comes back once its invisible
time is over, a changed invisible time gives a new handle, groups are independent, and a
receive waits (long polling) for a send."""

from __future__ import annotations

import asyncio
import time

import pytest

from interop.target import ClusterTarget
from sidewinder.client import sync
from sidewinder.client.producer import Message, Producer
from sidewinder.client.route_cache import ClientError
from sidewinder.client.simple_consumer import SimpleConsumer
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.pop import INVALID_PARAMETER, NORMAL, RETRY_V1
from tests.helpers import unique
from tests.interop.pop_scenarios import (
    REDELIVERY_DEADLINE_S,
    closing,
    new_topic,
    receive_until,
)

pytestmark = pytest.mark.interop


async def test_receive_gets_what_was_sent_and_hides_it(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopRecv", queues=2)
    consumer = SimpleConsumer(unique("PopRecvG"), pop_target.namesrv_addr)
    consumer.subscribe(topic)
    producer = Producer(unique("PopRecvP"), pop_target.namesrv_addr)
    async with closing(producer), consumer:
        sent = [
            await producer.send(
                Message(topic, f"m{n}".encode(), tags="T", keys=[f"k{n}"], properties={"n": f"{n}"})
            )
            for n in range(4)
        ]
        got = await receive_until(consumer, 4, invisible_duration_s=20)
        assert sorted(m.msg_id for m in got) == sorted(s.msg_id for s in sent)
        by_key = {m.keys[0]: m for m in got}
        for n, result in enumerate(sent):
            message = by_key[f"k{n}"]
            assert (message.body, message.tags, message.properties["n"]) == (
                f"m{n}".encode(),
                "T",
                f"{n}",
            )
            assert (message.topic, message.queue, message.queue_offset) == (
                topic,
                result.queue,
                result.queue_offset,
            )
            assert message.reconsume_times == 0
            handle = message.handle
            assert (handle.broker_name, handle.queue_id, handle.queue_offset, handle.retry) == (
                pop_target.broker_name,
                result.queue.queue_id,
                result.queue_offset,
                NORMAL,
            )
            assert handle.invisible_time == 20_000
            assert handle.ck_queue_offset <= handle.queue_offset
        # Invisible to the group while their invisible time runs.
        assert await consumer.receive(32, invisible_duration_s=20, await_duration_s=1) == []
        for message in got:
            await consumer.ack(message)


async def test_unacked_comes_back_later_acked_never(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopRedeliver", queues=1)
    group = unique("PopRedeliverG")
    consumer = SimpleConsumer(group, pop_target.namesrv_addr)
    consumer.subscribe(topic)
    producer = Producer(unique("PopRedeliverP"), pop_target.namesrv_addr)
    async with closing(producer), consumer:
        for body in (b"acked", b"kept"):
            await producer.send(Message(topic, body))
        # One pop, one check point for both: had the ack not settled "acked", it would come
        # back together with "kept".
        first = await receive_until(consumer, 2, invisible_duration_s=1)
        received_at = time.monotonic()
        assert sorted(m.body for m in first) == [b"acked", b"kept"]
        await consumer.ack(next(m for m in first if m.body == b"acked"))
        kept = next(m for m in first if m.body == b"kept")
        back = await receive_until(consumer, 1, within_s=REDELIVERY_DEADLINE_S)
        late_s = time.monotonic() - received_at
        back += await consumer.receive(32, invisible_duration_s=30, await_duration_s=2)
        assert [m.body for m in back] == [b"kept"], f"after {late_s:.1f} s"
        assert late_s >= 1.0
        again = back[0]
        assert (again.msg_id, again.topic, again.reconsume_times) == (kept.msg_id, topic, 1)
        # Revived through the group's retry topic: the handle says so, and acks it there.
        assert again.handle.retry == RETRY_V1
        assert again.receipt_handle != kept.receipt_handle
        await consumer.ack(again)


async def test_change_invisible_duration_gives_the_handle_that_acks(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopChange", queues=1)
    consumer = SimpleConsumer(unique("PopChangeG"), pop_target.namesrv_addr)
    consumer.subscribe(topic)
    producer = Producer(unique("PopChangeP"), pop_target.namesrv_addr)
    async with closing(producer), consumer:
        for body in (b"old-acked", b"new-acked", b"unacked"):
            await producer.send(Message(topic, body))
        got = {m.body: m for m in await receive_until(consumer, 3, invisible_duration_s=60)}
        assert sorted(got) == [b"new-acked", b"old-acked", b"unacked"]
        changed = {
            body: await consumer.change_invisible_duration(message, 1)
            for body, message in got.items()
        }
        changed_at = time.monotonic()
        for body, message in changed.items():
            old = got[body]
            assert message.receipt_handle != old.receipt_handle
            assert message.handle.invisible_time == 1000
            assert message.handle.pop_time >= old.handle.pop_time
            assert message.handle.queue_offset == old.handle.queue_offset
        # The old handle no longer settles the message (RocketMQ answers it with success all
        # the same); the new one does.
        await consumer.ack(got[b"old-acked"])
        await consumer.ack(changed[b"new-acked"])
        # Both unsettled ones come back in seconds, not after the 60 s they were received for.
        back = await receive_until(consumer, 2, within_s=REDELIVERY_DEADLINE_S)
        late_s = time.monotonic() - changed_at
        back += await consumer.receive(32, invisible_duration_s=30, await_duration_s=2)
        assert sorted(m.body for m in back) == [b"old-acked", b"unacked"], f"after {late_s:.1f} s"
        assert late_s >= 1.0
        assert {m.reconsume_times for m in back} == {1}
        for message in back:
            await consumer.ack(message)


async def test_each_group_gets_every_message(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopGroups", queues=2)
    consumers = [SimpleConsumer(unique("PopGroupsG"), pop_target.namesrv_addr) for _ in range(2)]
    producer = Producer(unique("PopGroupsP"), pop_target.namesrv_addr)
    async with closing(producer):
        sent = {(await producer.send(Message(topic, f"g{n}".encode()))).msg_id for n in range(6)}
    try:
        for consumer in consumers:
            consumer.subscribe(topic)
            await consumer.start()
        for consumer in consumers:
            got = await receive_until(consumer, 6)
            assert {m.msg_id for m in got} == sent
            assert len(got) == 6
            for message in got:
                await consumer.ack(message)
    finally:
        for consumer in consumers:
            await consumer.close()


async def test_receive_waits_for_a_send(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopLongPoll", queues=2)
    consumer = SimpleConsumer(unique("PopLongPollG"), pop_target.namesrv_addr)
    consumer.subscribe(topic, "wanted")
    producer = Producer(unique("PopLongPollP"), pop_target.namesrv_addr)
    async with closing(producer), consumer:
        # Nothing there: the broker holds the receive for its await duration, then gives [].
        started = time.monotonic()
        assert await consumer.receive(await_duration_s=1.5) == []
        assert time.monotonic() - started >= 1.2
        waiting = asyncio.ensure_future(consumer.receive(await_duration_s=15))
        await asyncio.sleep(1)  # the receive is held at the broker by now
        assert not waiting.done()
        await producer.send(Message(topic, b"skipped", tags="other"))
        sent_at = time.monotonic()
        sent = await producer.send(Message(topic, b"wanted", tags="wanted"))
        got = await asyncio.wait_for(waiting, 20)
        assert time.monotonic() - sent_at < 5, "answered at the send, not at the await's end"
        assert [(m.msg_id, m.tags) for m in got] == [(sent.msg_id, "wanted")]
        await consumer.ack(got[0])


async def test_a_topic_without_a_route_is_refused_at_start(pop_target: ClusterTarget) -> None:
    async with SimpleConsumer(unique("PopNoRouteG"), pop_target.namesrv_addr) as consumer:
        consumer.subscribe(unique("PopNoSuchTopic"))
        with pytest.raises(ClientError) as refused:
            await consumer.start()
        assert refused.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_more_than_32_messages_is_refused(
    pop_target: ClusterTarget, request: pytest.FixtureRequest
) -> None:
    topic = await new_topic(pop_target, "PopTooMany", queues=1)
    consumer = SimpleConsumer(unique("PopTooManyG"), pop_target.namesrv_addr)
    consumer.subscribe(topic)
    async with consumer:
        with pytest.raises(ClientError) as refused:
            await consumer.receive(33)
        assert refused.value.code == INVALID_PARAMETER
        assert "32" in refused.value.remark


def test_blocking_twin(pop_target: ClusterTarget, request: pytest.FixtureRequest) -> None:
    topic = asyncio.run(new_topic(pop_target, "PopSync", queues=1))
    with (
        sync.Producer(unique("PopSyncP"), pop_target.namesrv_addr) as producer,
        sync.SimpleConsumer(unique("PopSyncG"), pop_target.namesrv_addr) as consumer,
    ):
        sent = producer.send(Message(topic, b"blocking"))
        consumer.subscribe(topic)
        consumer.start()
        got = consumer.receive(4, invisible_duration_s=30, await_duration_s=5)
        assert [m.msg_id for m in got] == [sent.msg_id]
        later = consumer.change_invisible_duration(got[0], 60)
        assert later.handle.invisible_time == 60_000
        consumer.ack(later)
