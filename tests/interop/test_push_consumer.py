"""Our push consumer and the lite consumer's subscribe mode against every target: group members
split the queues without overlap, take over when one leaves, commit offsets, redeliver failures
through %RETRY%<group>, and broadcast with local offsets in Java's file format."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from sidewinder.client.push_consumer import ConsumeStatus, PushConsumer, ReceivedMessage
from tests.helpers import run, unique, until

pytestmark = pytest.mark.interop


async def produce(producer: Producer, topic: str, first: int, count: int) -> set[str]:
    results = [
        await producer.send(Message(topic, f"m-{n}".encode(), keys=[f"k-{n}"]))
        for n in range(first, first + count)
    ]
    return {r.msg_id for r in results}


def test_two_members_split_queues_and_one_takes_over(target: ClusterTarget) -> None:
    async def scenario() -> None:
        topic, group = unique("PushSplit"), unique("PushGroup")
        admin = Admin(target.namesrv_addr)
        producer = Producer(unique("PushProducer"), target.namesrv_addr)
        seen: dict[str, list[str]] = {"a": [], "b": []}

        def listener(name: str) -> Callable[[list[ReceivedMessage]], ConsumeStatus]:
            def on_messages(messages: list[ReceivedMessage]) -> ConsumeStatus:
                seen[name] += [m.msg_id for m in messages]
                return ConsumeStatus.SUCCESS

            return on_messages

        members = {
            name: PushConsumer(
                group,
                target.namesrv_addr,
                listener=listener(name),
                consume_from="first",
                persist_interval_s=1,
                rebalance_interval_s=2,
            )
            for name in ("a", "b")
        }
        try:
            await admin.create_topic(topic, queues=8)
            sent = await produce(producer, topic, 0, 200)
            for consumer in members.values():
                consumer.subscribe(topic, "*")
                await consumer.start()

            def held(name: str) -> set[int]:
                return {q.queue_id for q in members[name].assignment() if q.topic == topic}

            def split() -> bool:
                return not held("a") & held("b") and len(held("a")) == len(held("b")) == 4

            await until(split, 60, "the two members to hold 4 queues each")
            await until(lambda: set(seen["a"]) | set(seen["b"]) >= sent, 60, "all 200 messages")

            def retry_topics() -> set[str]:
                return {q.topic for m in members.values() for q in m.assignment()} - {topic}

            # The retry topic is created by the members' heartbeats: its route, and so its
            # queues, can come a rebalance (2 s) after the topic's.
            await until(lambda: retry_topics() == {f"%RETRY%{group}"}, 30, "the retry topic")

            await members["b"].close()
            await until(lambda: len(held("a")) == 8, 60, "a to take all queues")
            later = await produce(producer, topic, 200, 80)
            await until(lambda: set(seen["a"]) >= later, 60, "a to consume the later 80")
            await members["a"].close()
            progress = await admin.consumer_progress(group, topic)
            assert sum(r.broker_offset for r in progress) == 280
            assert [r.lag for r in progress] == [0] * 8
        finally:
            for consumer in members.values():
                await consumer.close()
            await producer.close()
            await admin.close()

    run(scenario)


def test_failed_listener_redelivers_through_retry_topic(target: ClusterTarget) -> None:
    async def scenario() -> None:
        topic, group = unique("PushRetry"), unique("PushRetryGroup")
        admin = Admin(target.namesrv_addr)
        producer = Producer(unique("PushProducer"), target.namesrv_addr)
        attempts: list[tuple[str, int, str, bytes]] = []

        async def on_messages(messages: list[ReceivedMessage]) -> ConsumeStatus:
            message = messages[0]
            attempts.append((message.msg_id, message.reconsume_times, message.topic, message.body))
            if message.reconsume_times == 0:
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.SUCCESS

        consumer = PushConsumer(
            group,
            target.namesrv_addr,
            listener=on_messages,
            consume_from="first",
            rebalance_interval_s=1,
        )
        try:
            await admin.create_topic(topic, queues=2)
            consumer.subscribe(topic, "*")
            await consumer.start()
            result = await producer.send(Message(topic, b"try-again", tags="T"))
            # Delay level 3 (10 s) is the first retry's delay.
            await until(lambda: len(attempts) >= 2, 60, "the redelivery")
            first, second = attempts[0], attempts[1]
            assert first == (result.msg_id, 0, topic, b"try-again")
            assert second == (result.msg_id, 1, topic, b"try-again")
            assert any(q.topic == f"%RETRY%{group}" for q in consumer.assignment())
        finally:
            await consumer.close()
            await producer.close()
            await admin.close()

    run(scenario)


def test_broadcasting_members_each_get_everything_and_resume_from_local_offsets(
    target: ClusterTarget, tmp_path: Path
) -> None:
    async def scenario() -> None:
        topic, group = unique("PushBroadcast"), unique("PushBroadcastGroup")
        admin = Admin(target.namesrv_addr)
        producer = Producer(unique("PushProducer"), target.namesrv_addr)
        got: dict[str, list[bytes]] = {"a": [], "b": []}

        def member(name: str) -> PushConsumer:
            async def on_messages(messages: list[ReceivedMessage]) -> None:
                got[name] += [m.body for m in messages]

            return PushConsumer(
                group,
                target.namesrv_addr,
                listener=on_messages,
                message_model="BROADCASTING",
                consume_from="first",
                instance_name=f"bc-{name}",
                offset_store_dir=tmp_path,
            )

        consumers = [member("a"), member("b")]
        try:
            await admin.create_topic(topic, queues=4)
            await produce(producer, topic, 0, 40)
            for consumer in consumers:
                consumer.subscribe(topic)
                await consumer.start()
            everything = {f"m-{n}".encode() for n in range(40)}
            await until(lambda: set(got["a"]) == set(got["b"]) == everything, 60, "both")
            assert len(consumers[0].assignment()) == len(consumers[1].assignment()) == 4
            for consumer in consumers:
                await consumer.close()
            offsets_file = tmp_path / consumers[0].client_id / group / "offsets.json"
            text = offsets_file.read_text()
            assert text.startswith('{"offsetTable":{{"brokerName":')
            assert '"topic":"' + topic + '"}:' in text

            got["a"].clear()
            await produce(producer, topic, 40, 8)
            again = member("a")
            consumers.append(again)
            again.subscribe(topic)
            await again.start()
            await until(lambda: len(got["a"]) >= 8, 60, "the 8 new messages")
            await asyncio.sleep(0.5)
            assert sorted(got["a"]) == sorted(f"m-{n}".encode() for n in range(40, 48))
        finally:
            for consumer in consumers:
                await consumer.close()
            await producer.close()
            await admin.close()

    run(scenario)


def test_lite_consumers_subscribe_and_split_queues(target: ClusterTarget) -> None:
    async def scenario() -> None:
        topic, group = unique("LiteSub"), unique("LiteSubGroup")
        admin = Admin(target.namesrv_addr)
        producer = Producer(unique("LiteProducer"), target.namesrv_addr)
        consumers = [
            PullConsumer(group, target.namesrv_addr, poll_timeout_s=1, rebalance_interval_s=1)
            for _ in range(2)
        ]
        try:
            await admin.create_topic(topic, queues=4)
            await produce(producer, topic, 0, 60)
            for consumer in consumers:
                consumer.subscribe(topic, "*")
                await consumer.start()

            def split() -> bool:
                a, b = (set(c.assignment()) for c in consumers)
                return not a & b and len(a) == len(b) == 2

            await until(split, 60, "two queues each")
            bodies: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(bodies) < 60 and time.monotonic() < deadline:
                for consumer in consumers:
                    bodies += [m.body for m in await consumer.poll()]
            assert sorted(bodies) == sorted(f"m-{n}".encode() for n in range(60))
            for consumer in consumers:
                await consumer.close()  # commits on close in subscribe mode
            progress = await admin.consumer_progress(group, topic)
            assert [r.lag for r in progress] == [0] * 4
        finally:
            for consumer in consumers:
                await consumer.close()
            await producer.close()
            await admin.close()

    run(scenario)


def test_blocking_facade_without_an_event_loop(target: ClusterTarget) -> None:
    from sidewinder.client import sync

    topic, group = unique("Blocking"), unique("BlockingGroup")
    received: list[bytes] = []
    with sync.Admin(target.namesrv_addr) as admin:
        admin.create_topic(topic, queues=2)
        with sync.Producer(unique("BlockingProducer"), target.namesrv_addr) as producer:
            results = [producer.send(Message(topic, f"b-{n}".encode())) for n in range(20)]
        assert {r.status for r in results} == {"SEND_OK"}

        def on_messages(messages: list[ReceivedMessage]) -> None:  # a plain function
            received.extend(m.body for m in messages)

        consumer = sync.PushConsumer(
            group, target.namesrv_addr, listener=on_messages, consume_from="first"
        )
        try:
            consumer.subscribe(topic)
            consumer.start()
            deadline = time.monotonic() + 60
            while len(received) < 20 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            consumer.close()
        assert sorted(received) == sorted(f"b-{n}".encode() for n in range(20))
        assert [r.lag for r in admin.consumer_progress(group, topic)] == [0, 0]
        with sync.PullConsumer(unique("BlockingLite"), target.namesrv_addr) as lite:
            lite.subscribe(topic)
            lite.start()
            bodies: list[bytes] = []
            while len(bodies) < 20 and time.monotonic() < deadline:
                bodies += [m.body for m in lite.poll()]
        assert sorted(bodies) == sorted(received)
