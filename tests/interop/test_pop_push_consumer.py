"""Our PushConsumer in POP mode against the 5.x targets: every message reaches the listener once
and is acked (nothing comes back after the invisible time), and a message the listener failed
comes back after the retry delay, counting a reconsume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from interop.target import ClusterTarget
from sidewinder.client.pop_client import PoppedMessage
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.push_consumer import ConsumeStatus, PushConsumer
from tests.helpers import unique
from tests.interop.pop_scenarios import REDELIVERY_DEADLINE_S, closing, new_topic

pytestmark = pytest.mark.interop

INVISIBLE_S = 2.0


async def _until(check: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def test_every_message_reaches_the_listener_once_and_is_acked(
    pop_target: ClusterTarget,
) -> None:
    topic = await new_topic(pop_target, "PopPush", queues=2)
    got: list[ReceivedMessage] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        got.extend(messages)
        return ConsumeStatus.SUCCESS

    consumer = PushConsumer(
        unique("PopPushG"),
        pop_target.namesrv_addr,
        listener=listener,
        consume_from="first",
        pop=True,
        pop_invisible_s=INVISIBLE_S,
        suspend_s=2,
    )
    consumer.subscribe(topic)
    producer = Producer(unique("PopPushP"), pop_target.namesrv_addr)
    async with closing(producer, consumer):
        sent = [await producer.send(Message(topic, f"m{n}".encode())) for n in range(20)]
        await consumer.start()
        await _until(lambda: len(got) >= 20, 30)
        # Acked: past their invisible time and the broker's revive, none comes back.
        await asyncio.sleep(INVISIBLE_S + REDELIVERY_DEADLINE_S / 2)
    assert sorted(m.msg_id for m in got) == sorted(s.msg_id for s in sent)
    assert all(m.topic == topic and m.reconsume_times == 0 for m in got)
    # Popped, not pulled: each came with the receipt handle it was acked by.
    assert all(isinstance(m, PoppedMessage) and m.receipt_handle for m in got)


async def test_a_failed_message_comes_back_after_the_retry_delay(
    pop_target: ClusterTarget,
) -> None:
    topic = await new_topic(pop_target, "PopPushRetry", queues=1)
    deliveries: list[tuple[float, ReceivedMessage]] = []

    def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:  # on the thread pool
        deliveries.extend((time.monotonic(), m) for m in messages)
        first = len(deliveries) == 1
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.SUCCESS

    consumer = PushConsumer(
        unique("PopPushRetryG"),
        pop_target.namesrv_addr,
        listener=listener,
        consume_from="first",
        pop=True,
        pop_invisible_s=30,
        suspend_s=2,
    )
    consumer.subscribe(topic)
    producer = Producer(unique("PopPushRetryP"), pop_target.namesrv_addr)
    async with closing(producer, consumer):
        sent = await producer.send(Message(topic, b"again"))
        await consumer.start()
        # Hidden for the first retry delay (10 s), not the 30 s it was popped for.
        await _until(lambda: len(deliveries) >= 2, 10 + REDELIVERY_DEADLINE_S)
        await asyncio.sleep(1)
    assert [m.msg_id for _, m in deliveries] == [sent.msg_id] * 2, deliveries
    (first_at, first), (again_at, again) = deliveries
    assert (first.reconsume_times, again.reconsume_times) == (0, 1)
    assert again.topic == topic and again.body == b"again"
    assert again_at - first_at >= 10 - 0.5
