"""Our mqadmin's topic, name server and group sub-commands (tools/mqadmin/topics.py) on every
target, printed as RocketMQ's tool prints them (tests/interop/test_mqadmin_commands.py has its
outputs)."""

from __future__ import annotations

import re

import pytest

from interop.mqadmin import create_topic
from interop.target import ClusterTarget
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import route_perm
from tests.interop.our_mqadmin import mqadmin
from tests.interop.scenarios import wait_until_routed

pytestmark = pytest.mark.interop


def test_topic_perm_and_cluster(target: ClusterTarget) -> None:
    topic, broker = unique("OurPerm"), target.broker_addr
    create_topic(target.namesrv_addr, topic, queues=2)
    assert mqadmin(target, "topicClusterList", "-t", topic).split() == [target.cluster_name]
    out = mqadmin(target, "updateTopicPerm", "-t", topic, "-p", "4", "-b", broker)
    assert f"update topic perm from 6 to 4 in {broker} success." in out, out
    assert f"TopicConfig [topicName={topic}, readQueueNums=2, writeQueueNums=2, perm=R--," in out
    assert route_perm(target, topic) == 4
    out = mqadmin(target, "updateTopicPerm", "-t", topic, "-p", "4", "-b", broker)
    assert out.strip() == "new perm equals to the old one!", out
    out = mqadmin(target, "updateTopicPerm", "-t", topic, "-p", "6", "-c", target.cluster_name)
    assert f"update topic perm from 4 to 6 in {broker} success." in out, out
    assert route_perm(target, topic) == 6


def test_write_perm_kv_and_order_conf(target: ClusterTarget) -> None:
    topic, ns, name = unique("OurKv"), target.namesrv_addr, target.broker_name
    create_topic(ns, topic, queues=2)
    # The broker registers a new topic a moment after updateTopic returns: a registration
    # after the wipe would put the write perm back.
    wait_until_routed(ns, topic)
    try:
        out = mqadmin(target, "wipeWritePerm", "-b", name)
        assert re.fullmatch(
            rf"wipe write perm of broker\[{name}\] in name server\[{ns}\] OK, [1-9]\d*\n", out
        ), out
        assert route_perm(target, topic) == 4
    finally:
        out = mqadmin(target, "addWritePerm", "-b", name)
    assert re.fullmatch(
        rf"add write perm of broker\[{name}\] in name server\[{ns}\] OK, [1-9]\d*\n", out
    ), out
    assert route_perm(target, topic) == 6

    args = ["-s", "ORDER_TOPIC_CONFIG", "-k", topic]
    out = mqadmin(target, "updateKvConfig", *args, "-v", "broker-x:3")
    assert out == "create or update kv config to namespace success.\n", out
    out = mqadmin(target, "updateOrderConf", "-t", topic, "-m", "get")
    assert out == f"get orderConf success. topic=[{topic}], orderConf=[broker-x:3] \n", out
    assert mqadmin(target, "deleteKvConfig", *args) == "delete kv config from namespace success.\n"
    out = mqadmin(target, "updateOrderConf", "-t", topic, "-m", "put", "-v", f"{name}:2")
    assert out == f"update orderConf success. topic=[{topic}], orderConf=[{name}:2]\n", out
    assert f"orderConf=[{name}:2]" in mqadmin(target, "updateOrderConf", "-t", topic, "-m", "get")
    out = mqadmin(target, "updateOrderConf", "-t", topic, "-m", "delete")
    assert out == f"delete orderConf success. topic=[{topic}]\n", out


def test_consumer_config_and_producer_connection(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    group = unique("OurConfigGroup")
    mqadmin(target, "updateSubGroup", "-g", group)
    out = mqadmin(target, "getConsumerConfig", "-g", group)
    assert out.splitlines()[0] == f"{'=' * 29}{target.cluster_name}:{target.broker_name}{'=' * 29}"
    settings = dict(re.findall(r"^(\w+)\s+=  (.*)$", out, re.M))
    assert settings["groupName"] == group and settings["retryMaxTimes"] == "16", out
    assert list(settings)[-1] == "notifyConsumerIdsChangedEnable", out
    assert mqadmin(target, "getConsumerConfig", "-g", unique("NoGroup")) == ""

    topic, producers = unique("OurConnTopic"), unique("OurConnPG")
    create_topic(target.namesrv_addr, topic, queues=1)
    payload = {
        "clientID": "127.0.0.1@ours",
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": producers}],
    }
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body.dumps(payload).encode())
    assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    out = mqadmin(target, "producerConnection", "-g", producers, "-t", topic)
    assert re.fullmatch(r"0001  127\.0\.0\.1@ours\s+127\.0\.0\.1:\d+\s+PYTHON\s+V4_9_8\n", out), out
