"""RocketMQ's own mqadmin against the target: the commands operators run most."""

from __future__ import annotations

import re
import time

import pytest

from interop import fastjson
from interop.mqadmin import MQAdminError, create_topic, mqadmin
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.admin_queries import broker_status_after_warm_up, mqadmin_after_warm_up
from tests.interop.scenarios import consume, produce, start_consumer, wait_until_routed

pytestmark = pytest.mark.interop


def test_update_topic_then_list_and_route(target: ClusterTarget) -> None:
    topic = unique("AdminTopic")
    out = create_topic(target.namesrv_addr, topic, queues=6).output
    assert f"create topic to {target.broker_addr} success" in out
    assert topic in mqadmin(target.namesrv_addr, "topicList").stdout.split()
    route = mqadmin(target.namesrv_addr, "topicRoute", "-t", topic).stdout
    # RocketMQ prints the route the way its fastjson writes it, integer keys unquoted.
    data = fastjson.loads_from(route)
    (queue_data,) = data["queueDatas"]
    assert queue_data["brokerName"] == target.broker_name
    assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (6, 6)
    assert queue_data["perm"] == 6
    (broker_data,) = data["brokerDatas"]
    assert broker_data["brokerAddrs"] == {"0": target.broker_addr}


def test_cluster_list_and_broker_status(target: ClusterTarget) -> None:
    clusters = mqadmin_after_warm_up(target.namesrv_addr, "clusterList")
    row = next(line for line in clusters.splitlines() if target.broker_name in line)
    assert row.split()[:4] == [target.cluster_name, target.broker_name, "0", target.broker_addr]
    status = broker_status_after_warm_up(target)
    fields = dict(re.findall(r"^(\w+)\s*:\s*(.*)$", status, re.MULTILINE))
    for key in ("msgPutTotalTodayNow", "commitLogMaxOffset", "putTps", "brokerVersionDesc"):
        assert key in fields, f"brokerStatus lacks {key}:\n{status}"


def test_consumer_progress_after_a_group_consumed(target: ClusterTarget) -> None:
    topic, group = unique("ProgressTopic"), unique("ProgressGroup")
    create_topic(target.namesrv_addr, topic)
    produce(target, "java", topic, 40, group=unique("PG"))
    # The Java driver commits what its consumer read before it leaves (interop/drivers/java):
    # the table reads them back. Read it until it shows every offset, for a few seconds.
    consume(target, "java", topic, 40, group=group)
    deadline = time.monotonic() + 10
    while True:
        out = mqadmin(target.namesrv_addr, "consumerProgress", "-g", group).stdout
        rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
        if (len(rows) == 4 and all(r[3] == r[4] for r in rows)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(rows) == 4, out
    # columns: topic, broker, queue, broker offset, consumer offset, client ip, diff, last time
    assert sum(int(r[3]) for r in rows) == 40
    assert all(r[3] == r[4] for r in rows), out
    assert re.search(r"Diff Total:\s*0\b", out), out


def test_query_message_by_id_and_by_key(target: ClusterTarget) -> None:
    topic = unique("QueryTopic")
    create_topic(target.namesrv_addr, topic)
    sent = produce(target, "java", topic, 5, group=unique("PG"), keys_prefix="order-", tag="TagQ")
    wanted = sent[3]
    by_id = mqadmin(target.namesrv_addr, "queryMsgById", "-i", wanted["offsetMsgId"]).stdout
    assert re.search(rf"Topic:\s+{topic}\b", by_id), by_id
    assert re.search(r"Keys:\s+\[?order-3\]?", by_id), by_id
    assert re.search(r"Tags:\s+\[?TagQ\]?", by_id), by_id
    by_key = mqadmin(target.namesrv_addr, "queryMsgByKey", "-t", topic, "-k", "order-3").stdout
    assert wanted["msgId"] in by_key, by_key
    assert "order-4" not in by_key


def test_a_failing_command_raises_with_its_output(target: ClusterTarget) -> None:
    with pytest.raises(MQAdminError, match="topicRoute"):
        mqadmin(target.namesrv_addr, "topicRoute", "-t", unique("NoSuchTopic"))


def test_group_queue_and_config_commands(target: ClusterTarget) -> None:
    """updateSubGroup, consumerConnection (a consumer online), topicStatus, queryMsgByOffset,
    getBrokerConfig and deleteTopic, as RocketMQ's tool prints them."""
    topic, group = unique("AdminMore"), unique("AdminMoreGroup")
    ns, cluster = target.namesrv_addr, target.cluster_name
    create_topic(ns, topic, queues=2)
    sent = produce(target, "java", topic, 4, group=unique("PG"), keys_prefix="am-")
    out = mqadmin(ns, "updateSubGroup", "-c", cluster, "-g", group).stdout
    assert f"create subscription group to {target.broker_addr} success" in out, out

    status = mqadmin(ns, "topicStatus", "-t", topic).stdout
    rows = [line.split() for line in status.splitlines() if line.startswith(target.broker_name)]
    assert len(rows) == 2 and sum(int(r[3]) for r in rows) == 4, status

    first = next(e for e in sent if e["queueOffset"] == 0)
    by_offset = mqadmin(
        ns, "queryMsgByOffset", "-t", topic, "-b", target.broker_name,
        "-i", str(first["queueId"]), "-o", "0",
    ).stdout  # fmt: skip
    assert re.search(rf"Keys:\s+\[?{first['keys']}\]?", by_offset), by_offset
    assert first["offsetMsgId"] in by_offset, by_offset

    config = mqadmin(ns, "getBrokerConfig", "-b", target.broker_addr).stdout
    settings = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", config, re.MULTILINE))
    assert settings.get("brokerName") == target.broker_name, config
    assert settings.get("brokerClusterName") == cluster, config

    # It waits for a fifth message, so it is online while the tool looks.
    consumer = start_consumer(target, "java", topic, 5, group=group)
    try:
        # The tool finds the group's broker by its retry topic's route, which the broker
        # registers a moment after the consumer's heartbeat made it (later under load).
        wait_until_routed(ns, f"%RETRY%{group}")
        connection = mqadmin(ns, "consumerConnection", "-g", group).stdout
        assert re.search(r"^\S+@\S+\s+\S+:\d+\s+JAVA\s+V4_9_8\s*$", connection, re.M), connection
        assert re.search(rf"^{topic}\s+\*", connection, re.MULTILINE), connection
        assert "CONSUME_PASSIVELY" in connection and "CLUSTERING" in connection, connection
    finally:
        produce(target, "java", topic, 1, group=unique("PG"), keys_prefix="am-last-")
        consumer.wait()

    out = mqadmin(ns, "deleteTopic", "-c", cluster, "-t", topic).stdout
    assert "delete topic" in out and "success" in out, out
    assert topic not in mqadmin(ns, "topicList").stdout.split()
