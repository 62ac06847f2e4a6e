"""Our mqadmin against every target: the same sub-commands work on RocketMQ and Sidewinder."""

from __future__ import annotations

import re
import time

import pytest
import uvloop

from interop.target import ClusterTarget
from sidewinder.client.consumer import PullConsumer, ReceivedMessage
from tests.helpers import unique
from tests.interop.our_mqadmin import mqadmin

pytestmark = pytest.mark.interop


async def consume_and_commit(target: ClusterTarget, topic: str, group: str, count: int) -> None:
    consumer = PullConsumer(group, target.namesrv_addr, poll_timeout_s=1)
    try:
        consumer.assign(await consumer.queues(topic))
        got: list[ReceivedMessage] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got += await consumer.poll()
        assert len(got) == count
        await consumer.commit()
    finally:
        await consumer.close()


def test_topic_lifecycle_and_queries(target: ClusterTarget) -> None:
    topic = unique("OurAdmin")
    assert "success" in mqadmin(target, "updateTopic", "-t", topic, "-r", "4", "-w", "4")
    assert topic in mqadmin(target, "topicList").split()
    assert '"writeQueueNums": 4' in mqadmin(target, "topicRoute", "-t", topic)
    assert "broker-a" in mqadmin(target, "clusterList")
    sent = mqadmin(
        target, "sendMessage", "-t", topic, "-p", "hello-admin", "-k", "adm-1", "-c", "TagX"
    )
    row = sent.splitlines()[1].split()
    assert row[2] == "SEND_OK"
    shown = mqadmin(target, "queryMsgById", "-i", row[4])
    assert "hello-admin" in shown and "[TagX]" in shown and "[adm-1]" in shown
    at_offset = mqadmin(
        target, "queryMsgByOffset", "-t", topic, "-b", row[0], "-i", row[1], "-o", "0"
    )
    assert row[4] in at_offset and "hello-admin" in at_offset
    config = mqadmin(target, "getBrokerConfig", "-b", target.broker_addr)
    assert re.search(r"^brokerName\s+=  broker-a$", config, re.MULTILINE)
    assert re.search(r"^listenPort\s+=  \d+$", config, re.MULTILINE)
    assert "BODY: hello-admin" in mqadmin(target, "consumeMessage", "-t", topic, "-s", "3")
    by_key = mqadmin(target, "queryMsgByKey", "-t", topic, "-k", "adm-1")
    assert row[3] in by_key  # the client's msgId (UNIQ_KEY) of the message sent above
    assert "success" in mqadmin(target, "updateSubGroup", "-g", unique("OurAdminSub"))
    status = mqadmin(target, "topicStatus", "-t", topic)
    assert sum(int(line.split()[3]) for line in status.splitlines()[1:]) == 1
    assert re.search(
        r"putMessageTimesTotal\s+:", mqadmin(target, "brokerStatus", "-b", target.broker_addr)
    )
    group = unique("OurAdminGroup")
    # A consumer that commits synchronously: the Java push consumer's offset update at shutdown
    # is a oneway request, which a loaded machine can lose on any broker.
    uvloop.run(consume_and_commit(target, topic, group, 1))
    assert re.search(r"Diff Total: 0\b", mqadmin(target, "consumerProgress", "-g", group))
    assert "success" in mqadmin(target, "deleteTopic", "-t", topic)
    assert topic not in mqadmin(target, "topicList").split()
