"""mqadmin sub-commands the broker serves by calling the group's consumers: resetOffsetByTime and
skipAccumulatedMessage (INVOKE_BROKER_TO_RESET_OFFSET, and mqadmin's own fallback when the group
is offline), consumerStatus and consumerProgress -s (GET_CONSUMER_RUNNING_INFO),
getConsumerStatus (INVOKE_BROKER_TO_GET_CONSUMER_STATUS) and queryMsgById -g -d
(CONSUME_MESSAGE_DIRECTLY), with a stock Java consumer online, with our Python consumer online,
and with none."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import pytest
import uvloop

from interop.mqadmin import MQAdminError, MQAdminResult, create_topic, mqadmin
from interop.offsets import commit_offsets, wait_committed
from interop.target import ClusterTarget
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from sidewinder.client.push_consumer import ConsumeStatus, PushConsumer, ReceivedMessage
from sidewinder.protocol.codes import LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from tests.helpers import unique
from tests.interop.scenarios import consume, produce, start_consumer

pytestmark = pytest.mark.interop


def client_ids(namesrv: str, group: str) -> list[str]:
    out = mqadmin(namesrv, "consumerConnection", "-g", group).stdout
    return re.findall(r"^(\S+@\S+)\s+\S+:\d+\s", out, re.MULTILINE)


def until_ok(run: Callable[[], MQAdminResult], seconds: float = 30) -> MQAdminResult:
    """A command that needs the consumer's first commits at the broker: again until it works."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return run()
        except MQAdminError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


async def consumer_status(
    target: ClusterTarget, topic: str, group: str
) -> dict[str, list[tuple[int, int]]]:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS as DefaultMQAdminExt.getConsumeStatus sends it
    (4.9's mqadmin registers no sub-command for it): (queueId, offset) per client id."""
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
            {"topic": topic, "group": group, "clientAddr": ""},
            language=LanguageCode.JAVA,
        )
        reply = await client.invoke(target.broker_addr, request, 15)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply
    text = reply.body_bytes.decode()
    table: dict[str, list[tuple[int, int]]] = {}
    for client_id, queues in re.findall(r'"([^"{}]+@[^"{}]+)":\{((?:\{[^{}]*\}:-?\d+,?)*)\}', text):
        pairs = re.findall(r'\{[^{}]*"queueId":(\d+)[^{}]*\}:(-?\d+)', queues)
        table[client_id] = sorted((int(q), int(o)) for q, o in pairs)
    return table


def assert_running_info(out: str, topic: str) -> None:
    for section in ("#Consumer Properties#", "#Consumer Subscription#", "#Consumer MQ Detail#"):
        assert section in out, out
    assert re.search(r"PROP_CONSUME_TYPE\s*:\s*CONSUME_PASSIVELY", out), out
    assert re.search(rf"^{topic}\s+", out, re.MULTILINE), out


def test_java_consumer_online(target: ClusterTarget) -> None:
    """consumerStatus, consumerProgress -s, getConsumerStatus, queryMsgById -g -d, then a
    resetOffsetByTime that the consumer obeys: it gets every message again."""
    ns = target.namesrv_addr
    topic, group = unique("CallsTopic"), unique("CallsGroup")
    create_topic(ns, topic, queues=2)
    before_ms = int(time.time() * 1000) - 1000
    sent = produce(target, "java", topic, 6, group=unique("PG"))
    # 6, the one consumed directly, and the 6 again after the reset.
    consumer = start_consumer(target, "java", topic, 13, group=group, timeout_s=150)
    try:
        consumer.wait_for("received", 6, timeout_s=60)
        (client_id,) = client_ids(ns, group)

        status = mqadmin(ns, "consumerStatus", "-g", group).stdout
        assert re.search(rf"^1\s+{re.escape(client_id)}\s+V4_9_8\s", status, re.M), status
        assert "Same subscription in the same group of consumer" in status, status
        detail = mqadmin(ns, "consumerStatus", "-g", group, "-i", client_id).stdout
        assert_running_info(detail, topic)

        # The Java driver's consumer commits every second what it knows then (the client's own
        # periodic commit): a first commit may name only the %RETRY% queue, the topic's two
        # come with a later one.
        deadline = time.monotonic() + 30
        while True:
            progress = until_ok(
                lambda: mqadmin(ns, "consumerProgress", "-g", group, "-s", "true")
            ).stdout
            rows = [line.split() for line in progress.splitlines() if line.startswith(topic)]
            if len(rows) == 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert len(rows) == 2, progress
        assert all(r[5] == client_id.split("@")[0] for r in rows), progress

        table = uvloop.run(consumer_status(target, topic, group))
        assert sorted(table) == [client_id], table
        assert sorted(q for q, _ in table[client_id]) == [0, 1], table

        directly = mqadmin(
            ns, "queryMsgById", "-i", sent[0]["offsetMsgId"], "-g", group, "-d", client_id
        ).stdout
        assert "consumeResult=CR_SUCCESS" in directly, directly

        reset = until_ok(
            lambda: mqadmin(ns, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(before_ms))
        ).stdout
        assert "rollback consumer offset by specified group" in reset, reset
        rows = [line.split() for line in reset.splitlines() if line.startswith(target.broker_name)]
        assert sorted((int(r[1]), int(r[2])) for r in rows) == [(0, 0), (1, 0)], reset
        # The Java client waits 10 s before it takes the queues again from the new offsets.
        run = consumer.wait()
    finally:
        consumer.kill()
    keys = [e["keys"] for e in run.received()]
    assert sorted(keys) == sorted([e["keys"] for e in sent] * 2 + [sent[0]["keys"]]), run.describe()


def test_offline_group_resets_through_the_fallback(target: ClusterTarget) -> None:
    """With no consumer online the broker answers CONSUMER_NOT_ONLINE and mqadmin resets the
    offsets itself (resetOffsetByTime, skipAccumulatedMessage)."""
    ns = target.namesrv_addr
    topic, group = unique("OfflineTopic"), unique("OfflineGroup")
    create_topic(ns, topic, queues=2)
    produce(target, "java", topic, 4, group=unique("PG"))
    consume(target, "java", topic, 4, group=group)
    # No commit of the departed consumer may land after the resets below. What it committed
    # does not matter to them (the figures checked are the queues' ends), but a queue with no
    # commit at all makes RocketMQ refuse the reset ("consumer group not exist"), and a loaded
    # machine has lost every commit of a queue (oneway, on RocketMQ): what it left out is
    # committed here as it would have (two of each queue: the sends went round robin).
    wait_committed(
        target.broker_addr, group, topic, queues=2, total=4, timeout_s=10, required=False
    )
    commit_offsets(target.broker_addr, group, topic, {0: 2, 1: 2})
    produce(target, "java", topic, 6, group=unique("PG"), start=4)

    skipped = mqadmin(ns, "skipAccumulatedMessage", "-g", group, "-t", topic).stdout
    assert "#rollbackOffset" in skipped, skipped
    rows = [line.split() for line in skipped.splitlines() if line.startswith(target.broker_name)]
    assert len(rows) == 2 and sum(int(r[5]) for r in rows) == 10, skipped
    progress = mqadmin(ns, "consumerProgress", "-g", group).stdout
    assert re.search(r"Diff Total:\s*0\b", progress), progress

    reset = mqadmin(ns, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0").stdout
    assert "#rollbackOffset" in reset, reset
    progress = mqadmin(ns, "consumerProgress", "-g", group).stdout
    assert re.search(r"Diff Total:\s*10\b", progress), progress


def test_calls_to_a_client_that_is_not_there(target: ClusterTarget) -> None:
    ns = target.namesrv_addr
    topic, group = unique("NobodyTopic"), unique("NobodyGroup")
    create_topic(ns, topic, queues=1)
    produce(target, "java", topic, 2, group=unique("PG"))
    consume(target, "java", topic, 2, group=group)
    consumer = start_consumer(target, "java", topic, 3, group=group)
    try:
        out = mqadmin(ns, "consumerStatus", "-g", group, "-i", "1.2.3.4@nobody", check=False)
        assert f"The Consumer <{group}> <1.2.3.4@nobody> not online" in out.output, out.output
    finally:
        consumer.kill()
    # A group nobody ever consumed with has no offsets here: RocketMQ says it does not exist.
    out = mqadmin(ns, "resetOffsetByTime", "-g", unique("Never"), "-t", topic, "-s", "now",
                  check=False).output  # fmt: skip
    assert "not exist" in out, out


def test_python_consumer_online(target: ClusterTarget) -> None:
    """The same calls answered by our push consumer."""
    ns = target.namesrv_addr
    topic, group = unique("PyCallsTopic"), unique("PyCallsGroup")
    create_topic(ns, topic, queues=2)
    before_ms = int(time.time() * 1000) - 1000
    sent = produce(target, "java", topic, 6, group=unique("PG"))
    seen: list[str] = []

    def on_messages(messages: list[ReceivedMessage]) -> ConsumeStatus:
        seen.extend(m.keys[0] for m in messages)
        return ConsumeStatus.SUCCESS

    async def scenario() -> None:
        consumer = PushConsumer(group, ns, listener=on_messages, consume_from="first")
        consumer.subscribe(topic)
        await consumer.start()
        try:
            await wait_until(lambda: len(seen) >= 6, 60)
            admin = asyncio.to_thread
            (client_id,) = await admin(client_ids, ns, group)
            assert client_id == consumer.client_id

            detail = await admin(mqadmin, ns, "consumerStatus", "-g", group, "-i", client_id)
            assert_running_info(detail.stdout, topic)
            status = await admin(mqadmin, ns, "consumerStatus", "-g", group)
            assert "Rebalance OK" in status.stdout, status.stdout

            table = await consumer_status(target, topic, group)
            assert sorted(table[client_id]) == sorted(
                (q, sum(1 for e in sent if e["queueId"] == q)) for q in (0, 1)
            ), table

            directly = await admin(
                mqadmin, ns, "queryMsgById", "-i", sent[0]["offsetMsgId"],
                "-g", group, "-d", client_id,
            )  # fmt: skip
            assert "consumeResult=CR_SUCCESS" in directly.stdout, directly.stdout
            assert seen.count(sent[0]["keys"]) == 2

            # Our consumer commits every 5 s: the broker needs every queue's offset first.
            reset = await admin(
                until_ok,
                lambda: mqadmin(
                    ns, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(before_ms)
                ),
            )
            assert "rollback consumer offset by specified group" in reset.stdout, reset.stdout
            await wait_until(lambda: len(seen) >= 13, 60)
        finally:
            await consumer.close()

    uvloop.run(asyncio.wait_for(scenario(), 150))
    assert sorted(seen) == sorted([e["keys"] for e in sent] * 2 + [sent[0]["keys"]])


async def wait_until(check: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s")
        await asyncio.sleep(0.1)


def test_python_pull_consumer_online(target: ClusterTarget) -> None:
    """The same calls answered by our lite pull consumer, as a Java DefaultLitePullConsumer
    answers them: running info with its settings and subscription but no queues,
    an empty status table, a refusal to consume a message directly (it has no listener), and
    a reset that leaves its positions alone (the Java client resets push consumers only)."""
    ns = target.namesrv_addr
    topic, group = unique("PyPullCallsTopic"), unique("PyPullCallsGroup")
    create_topic(ns, topic, queues=2)
    before_ms = int(time.time() * 1000) - 1000

    async def scenario() -> None:
        producer = Producer(unique("PG"), ns)
        consumer = PullConsumer(group, ns, consume_from="first", poll_timeout_s=1)
        consumer.subscribe(topic)
        try:
            sent = [await producer.send(Message(topic, b"x", keys=[f"k{n}"])) for n in range(6)]
            await consumer.start()
            got: list[ReceivedMessage] = []
            deadline = time.monotonic() + 60
            while len(got) < 6 and time.monotonic() < deadline:
                got += await consumer.poll()
            assert len(got) == 6
            await consumer.commit()
            admin = asyncio.to_thread
            (client_id,) = await admin(client_ids, ns, group)
            assert client_id == consumer.client_id

            running = await admin(mqadmin, ns, "consumerStatus", "-g", group, "-i", client_id)
            detail = running.stdout
            for section in ("#Consumer Properties#", "#Consumer Subscription#"):
                assert section in detail, detail
            assert re.search(r"PROP_CONSUME_TYPE\s*:\s*CONSUME_ACTIVELY", detail), detail
            assert re.search(rf"^consumerGroup\s*:\s*{group}$", detail, re.M), detail
            assert re.search(rf"Topic: {topic}\s+ClassFilter", detail), detail
            assert not re.search(rf"^{topic}\s+", detail, re.MULTILINE), detail  # no queues
            status = (await admin(mqadmin, ns, "consumerStatus", "-g", group)).stdout
            assert "Rebalance OK" in status, status

            progress = await admin(
                until_ok, lambda: mqadmin(ns, "consumerProgress", "-g", group, "-s", "true")
            )
            rows = [line.split() for line in progress.stdout.splitlines() if line.startswith(topic)]
            assert len(rows) == 2 and all("N/A" in r for r in rows), progress.stdout

            table = await consumer_status(target, topic, group)
            assert table == {client_id: []}, table

            directly = await admin(
                mqadmin, ns, "queryMsgById", "-i", sent[0].offset_msg_id,
                "-g", group, "-d", client_id, check=False,
            )  # fmt: skip
            assert "CODE: 1 " in directly.output, directly.output
            assert f"The Consumer Group <{group}> not exist" in directly.output, directly.output

            reset = await admin(
                until_ok,
                lambda: mqadmin(
                    ns, "resetOffsetByTime", "-g", group, "-t", topic, "-s", str(before_ms)
                ),
            )
            assert "rollback consumer offset by specified group" in reset.stdout, reset.stdout
            await asyncio.sleep(1)
            assert await consumer.poll(timeout_s=2) == []
        finally:
            await consumer.close()
            await producer.close()

    uvloop.run(asyncio.wait_for(scenario(), 150))
