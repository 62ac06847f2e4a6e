"""The whole product as a user runs it: `mqnamesrv` and `mqbroker` as separate processes, our
Python client producing 10k tagged and keyed messages, a push consumer with a tag filter and a
lite consumer reading them, queries by key, id and time, and committed offsets that survive a
broker restart (SIGTERM, then start again on the same store)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import uvloop

from interop.sidewinder import SidewinderCluster
from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer, SendResult
from sidewinder.client.pulling import offset_at
from sidewinder.client.push_consumer import PushConsumer, ReceivedMessage
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, decode_record
from tests.helpers import until

TOTAL = 10_000
TAGS = ("TagA", "TagB", "TagC")


async def produce(producer: Producer, topic: str, first: int, count: int) -> list[SendResult]:
    results: list[SendResult] = []
    window = 128  # sends in flight at once, as a pipelined producer keeps them
    for start in range(first, first + count, window):
        batch = range(start, min(start + window, first + count))
        results += await asyncio.gather(
            *(
                producer.send(
                    Message(topic, f"e2e-body-{n}".encode(), tags=TAGS[n % 3], keys=[f"e2e-{n}"])
                )
                for n in batch
            )
        )
    return results


def test_10k_messages_queries_and_offsets_across_a_broker_restart(tmp_path: Path) -> None:
    cluster = SidewinderCluster(tmp_path).start()
    topic, group, reader_group = "EndToEnd", "e2e-push", "e2e-lite"

    async def first_run() -> None:
        admin = Admin(cluster.namesrv_addr)
        producer = Producer("e2e-producer", cluster.namesrv_addr)
        pushed: list[ReceivedMessage] = []

        async def on_messages(messages: list[ReceivedMessage]) -> None:
            pushed.extend(messages)

        push = PushConsumer(group, cluster.namesrv_addr, listener=on_messages, consume_from="first")
        lite = PullConsumer(reader_group, cluster.namesrv_addr, poll_timeout_s=1)
        try:
            await admin.create_topic(topic, queues=8)
            before = int(time.time() * 1000)
            sent = await produce(producer, topic, 0, TOTAL)
            assert {r.status for r in sent} == {"SEND_OK"}
            assert len({r.msg_id for r in sent}) == TOTAL

            push.subscribe(topic, "TagA || TagB")
            await push.start()
            lite.subscribe(topic)
            await lite.start()
            everything: list[ReceivedMessage] = []
            deadline = time.monotonic() + 120
            while len(everything) < TOTAL and time.monotonic() < deadline:
                everything += await lite.poll()
            assert sorted(m.keys[0] for m in everything) == sorted(f"e2e-{n}" for n in range(TOTAL))
            by_key = {m.keys[0]: m for m in everything}
            for n in (0, 1, 4242, TOTAL - 1):
                message = by_key[f"e2e-{n}"]
                assert message.body == f"e2e-body-{n}".encode() and message.tags == TAGS[n % 3]
                assert message.msg_id == sent[n].msg_id

            wanted = {f"e2e-{n}" for n in range(TOTAL) if n % 3 != 2}
            await until(lambda: len(pushed) >= len(wanted), 120, "the push consumer")
            assert {m.keys[0] for m in pushed} == wanted  # no TagC, nothing missing
            assert len(pushed) == len(wanted)  # and nothing twice

            (found,) = await admin.query_by_key(topic, "e2e-4242")
            record = decode_record(found)
            assert isinstance(record, MessageRecord) and bytes(record.body) == b"e2e-body-4242"
            host, port, phy = decode_offset_msg_id(sent[77].offset_msg_id)
            record = decode_record(await admin.view_message(f"{host}:{port}", phy))
            assert isinstance(record, MessageRecord) and bytes(record.body) == b"e2e-body-77"
            queue = sent[0].queue
            addr = cluster.broker_addr
            assert await offset_at(admin.remoting, addr, queue, before - 60_000) == 0
            later = int(time.time() * 1000) + 60_000
            end = await offset_at(admin.remoting, addr, queue, later)
            # RocketMQ's rule: a time after the last message finds the last message.
            assert end == sum(1 for r in sent if r.queue == queue) - 1
        finally:
            await push.close()  # commits the push group's offsets
            await lite.close()  # and the lite group's
            await producer.close()
            await admin.close()

    async def second_run() -> None:
        producer = Producer("e2e-producer", cluster.namesrv_addr)
        pushed: list[ReceivedMessage] = []

        async def on_messages(messages: list[ReceivedMessage]) -> None:
            pushed.extend(messages)

        push = PushConsumer(group, cluster.namesrv_addr, listener=on_messages, consume_from="first")
        try:
            await produce(producer, topic, TOTAL, 30)
            push.subscribe(topic, "TagA || TagB")
            await push.start()
            new = {f"e2e-{n}" for n in range(TOTAL, TOTAL + 30) if n % 3 != 2}
            await until(lambda: len(pushed) >= len(new), 60, "the new messages")
            await asyncio.sleep(1)  # anything redelivered from before the restart shows up too
            assert sorted(m.keys[0] for m in pushed) == sorted(new)
        finally:
            await push.close()
            await producer.close()

    try:
        uvloop.run(asyncio.wait_for(first_run(), 400))
        cluster.broker.signal(signal.SIGTERM)
        assert cluster.stop_broker(15) == 0
        cluster.start_broker()
        uvloop.run(asyncio.wait_for(second_run(), 120))
    finally:
        cluster.stop()
