"""The RocketMQ 5.3.2 oracle target (interop/rocketmq5.py): its broker starts beside the 4.9.7
name server, is routable as soon as start() returns, serves our Python client's send and pull,
and keeps its metadata in the 5.x format."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from interop.target import running_target
from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from tests.helpers import unique

pytestmark = pytest.mark.interop


async def test_broker_starts_serves_send_and_pull_and_writes_5x_metadata(tmp_path: Path) -> None:
    with running_target("rocketmq5", tmp_path, discard=True) as cluster:
        assert cluster.kind == "rocketmq5"
        topic, group = unique("R5Smoke"), unique("R5Group")
        admin = Admin(cluster.namesrv_addr)
        producer = Producer(unique("R5Producer"), cluster.namesrv_addr)
        consumer = PullConsumer(group, cluster.namesrv_addr, poll_timeout_s=2)
        try:
            # Routable at once: start() waited for the broker's registration.
            info = await admin.cluster_info()
            addrs = info["brokerAddrTable"][cluster.broker_name]["brokerAddrs"]
            assert cluster.broker_addr in addrs.values()
            await admin.create_topic(topic, queues=2)
            sent = await producer.send(Message(topic, b"five", tags="T5", keys=["k5"]))
            assert sent.status == "SEND_OK"
            consumer.assign(await consumer.queues(topic))
            got = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got += await consumer.poll()
            assert [(m.body, m.tags, m.keys, m.msg_id) for m in got] == [
                (b"five", "T5", ["k5"], sent.msg_id)
            ]
        finally:
            await producer.close()
            await consumer.close()
            await admin.close()
        topics = json.loads((cluster.store_path / "config" / "topics.json").read_text())
    # 5.x: a state version in the data version, attributes on every topic, the POP revive topic.
    assert "stateVersion" in topics["dataVersion"]
    table = topics["topicConfigTable"]
    assert table[topic]["attributes"] == {}
    assert table[topic]["readQueueNums"] == 2
    assert "rmq_sys_REVIVE_LOG_DefaultCluster" in table
