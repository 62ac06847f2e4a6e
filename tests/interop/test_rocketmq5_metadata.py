"""RocketMQ 5's metadata on the 5.3.2 broker and on ours, by the same requests: topic attributes
(UPDATE_AND_CREATE_TOPIC's `attributes`, GET_ALL_TOPIC_CONFIG, topics.json), subscription
groups' 5.x fields (200, 201, 352), message request modes (401, 402, messageRequestMode.json),
server-side assignment (400), LITE_PULL_MESSAGE (361), and our mqadmin's 5.x options."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from interop.mqadmin import mqadmin as java_mqadmin
from interop.replica import ReplicaBroker, until
from interop.target import ClusterTarget, create_target, running_target
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.topics import TopicTable
from sidewinder.client.producer import Message, Producer
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import CreateTopicRequestHeader, PullMessageRequestHeader
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.our_mqadmin import mqadmin

pytestmark = pytest.mark.interop

FLAG_SUBSCRIPTION, FLAG_LITE_PULL = 0x4, 0x10  # PullSysFlag


def _create(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, attributes: str | None
) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic, "TBW102", 2, 2, 6, "SINGLE_TAG", 0, False, attributes)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    return client.invoke(target.broker_addr, request, 10)


def _ask(
    client: SyncRemotingClient,
    target: ClusterTarget,
    code: int,
    ext: dict[str, str] | None = None,
    value: Any = None,
) -> RemotingCommand:
    payload = body.dumps(value).encode() if value is not None else None
    return client.invoke(target.broker_addr, RemotingCommand.request(code, ext, payload), 10)


def _topic_config(client: SyncRemotingClient, target: ClusterTarget, topic: str) -> Any:
    reply = _ask(client, target, RequestCode.GET_ALL_TOPIC_CONFIG)
    return body.loads(reply.body_bytes)["topicConfigTable"].get(topic)


def test_topic_attributes_are_created_altered_kept_and_saved(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    topic = unique("AttrTopic")
    assert _create(client, pop_target, topic, "+message.type=FIFO").code == ResponseCode.SUCCESS
    assert _topic_config(client, pop_target, topic)["attributes"] == {"message.type": "FIFO"}
    # An update that names no attribute keeps them; "+" alters a changeable one.
    assert _create(client, pop_target, topic, None).code == ResponseCode.SUCCESS
    assert _topic_config(client, pop_target, topic)["attributes"] == {"message.type": "FIFO"}
    assert _create(client, pop_target, topic, "+message.type=DELAY").code == ResponseCode.SUCCESS
    saved = json.loads((pop_target.store_path / "config" / "topics.json").read_text())
    entry = saved["topicConfigTable"][topic]
    assert entry["attributes"] == {"message.type": "DELAY"} and entry["readQueueNums"] == 2
    # Our table reads the file, RocketMQ 5.3.2's as well as ours.
    table = TopicTable(BrokerConfig(), pop_target.store_path / "config")
    table.load()
    assert table.topics[topic].message_type == "DELAY"


@pytest.mark.parametrize(
    ("attributes", "code", "remark", "existing"),
    [
        ("+colour=red", ResponseCode.SYSTEM_ERROR, "unsupported key: colour", False),
        ("message.type=FIFO", ResponseCode.SYSTEM_ERROR, "format is wrong: message.type", False),
        ("+message.type=QUEUE", ResponseCode.SYSTEM_ERROR, "value is not in set", False),
        ("-message.type", ResponseCode.SYSTEM_ERROR, "only add attribute is supported", False),
        ("+message.type=MIXED", 29, "MIXED message type is not supported.", False),
        ("+queue.type=BatchCQ", ResponseCode.SYSTEM_ERROR, "unchangeable attribute", True),
    ],
)
def test_bad_topic_attributes_are_refused_as_rocketmq5_refuses_them(
    client: SyncRemotingClient,
    pop_target: ClusterTarget,
    attributes: str,
    code: int,
    remark: str,
    existing: bool,
) -> None:
    topic = unique("BadAttr")
    if existing:
        assert _create(client, pop_target, topic, None).code == ResponseCode.SUCCESS
    reply = _create(client, pop_target, topic, attributes)
    assert (reply.code, remark in (reply.remark or "")) == (code, True), reply.remark
    config = _topic_config(client, pop_target, topic)
    # 5.3.2 writes "attributes": {} on every topic; ours leaves an empty map out (as 4.x).
    assert config is None if not existing else config.get("attributes", {}) == {}


def test_group_5x_fields_round_trip_and_352_answers_the_group(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    fresh = unique("G5Fresh")
    reply = _ask(client, pop_target, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": fresh})
    # autoCreateSubscriptionGroup: a new group with every default, as 5.3.2 writes it.
    assert body.loads(reply.body_bytes) == {
        "attributes": {},
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": fresh,
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }
    group = unique("G5")
    policy = {
        "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3},
        "type": "EXPONENTIAL",
    }
    config = {
        "groupName": group,
        "consumeMessageOrderly": True,
        "groupRetryPolicy": policy,
        "groupSysFlag": 1,
        "retryMaxTimes": 3,
    }
    assert _ask(client, pop_target, 200, None, config).code == ResponseCode.SUCCESS
    one = body.loads(_ask(client, pop_target, 352, {"group": group}).body_bytes)
    everything = body.loads(_ask(client, pop_target, 201).body_bytes)
    for got in (one, everything["subscriptionGroupTable"][group]):
        assert got["consumeMessageOrderly"] is True and got["groupSysFlag"] == 1
        assert got["groupRetryPolicy"] == policy and got["retryMaxTimes"] == 3
    saved = json.loads((pop_target.store_path / "config" / "subscriptionGroup.json").read_text())
    assert saved["subscriptionGroupTable"][group]["groupRetryPolicy"] == policy
    groups = SubscriptionGroups(pop_target.store_path / "config", auto_create=False)
    groups.load()
    assert groups.groups[group].to_json() == saved["subscriptionGroupTable"][group]
    # RocketMQ 5.3.2 knows no group attribute.
    refused = _ask(client, pop_target, 200, None, config | {"attributes": {"+x": "1"}})
    assert refused.code == ResponseCode.SYSTEM_ERROR and "unsupported key: x" in refused.remark


def _heartbeat(client: SyncRemotingClient, target: ClusterTarget, group: str, topic: str) -> None:
    subscription = {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0}
    payload = {
        "clientID": "127.0.0.1@meta5",
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [subscription],
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }
    assert _ask(client, target, RequestCode.HEART_BEAT, {}, payload).code == ResponseCode.SUCCESS


def _assignment(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, group: str, strategy: str
) -> list[tuple[int, str]] | None:
    query = {
        "clientId": "127.0.0.1@meta5",
        "consumerGroup": group,
        "messageModel": "CLUSTERING",
        "strategyName": strategy,
        "topic": topic,
    }
    reply = _ask(client, target, RequestCode.QUERY_ASSIGNMENT, None, query)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    found = body.loads(reply.body_bytes).get("messageQueueAssignments")
    if found is None:
        return None
    return sorted((a["messageQueue"]["queueId"], a["mode"]) for a in found)


def test_request_modes_are_set_listed_saved_and_steer_the_assignment(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    topic, pulling, popping = unique("ModeTopic"), unique("PullG"), unique("PopG")
    assert _create(client, pop_target, topic, None).code == ResponseCode.SUCCESS
    mode = {"consumerGroup": popping, "mode": "POP", "popShareQueueNum": 0, "topic": topic}
    assert _ask(client, pop_target, 401, None, mode).code == ResponseCode.SUCCESS
    modes = body.loads(_ask(client, pop_target, 402).body_bytes)["messageRequestModeMap"]
    assert modes[topic] == {popping: mode}
    saved = json.loads((pop_target.store_path / "config" / "messageRequestMode.json").read_text())
    assert saved["messageRequestModeMap"][topic][popping] == mode
    retry = {**mode, "topic": f"%RETRY%{popping}"}
    refused = _ask(client, pop_target, 401, None, retry)
    assert (refused.code, refused.remark) == (
        ResponseCode.NO_PERMISSION,
        "retry topic is not allowed to set mode",
    )
    for group in (pulling, popping):
        _heartbeat(client, pop_target, group, topic)
    # PULL: the client's own strategy over both queues; POP: queue -1 of the broker.
    assert _assignment(client, pop_target, topic, pulling, "AVG") == [(0, "PULL"), (1, "PULL")]
    assert _assignment(client, pop_target, topic, popping, "AVG") == [(-1, "POP")]
    assert _assignment(client, pop_target, topic, pulling, "NoSuchStrategy") is None


async def test_lite_pull_message_reads_as_a_pull(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    topic, group = unique("LitePull"), unique("LiteG")
    assert _create(client, pop_target, topic, None).code == ResponseCode.SUCCESS
    producer = Producer(unique("LiteP"), pop_target.namesrv_addr)
    try:
        sent = await producer.send(Message(topic, b"lite"))
    finally:
        await producer.close()
    header = PullMessageRequestHeader(
        group,
        topic,
        sent.queue.queue_id,
        sent.queue_offset,
        32,
        FLAG_SUBSCRIPTION | FLAG_LITE_PULL,
        0,
        0,
        0,
        "*",
    )
    reply = client.invoke(
        pop_target.broker_addr,
        RemotingCommand.request(RequestCode.LITE_PULL_MESSAGE, header.to_ext()),
        10,
    )
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert b"lite" in reply.body_bytes


def test_route_entries_carry_enable_acting_master_on_our_name_server(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    """Ours writes it as RocketMQ 5's name server does; the oracle's name server is 4.9.7's,
    which does not (the rocketmq-rust client refuses such routes)."""
    topic = unique("RouteTopic")
    assert _create(client, pop_target, topic, None).code == ResponseCode.SUCCESS
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    route = body.loads(client.invoke(pop_target.namesrv_addr, request, 10).body_bytes)
    flags = {b.get("enableActingMaster") for b in route["brokerDatas"]}
    assert flags == ({False} if pop_target.kind == "sidewinder" else {None})


def test_our_mqadmin_sets_attributes_group_fields_and_consume_mode(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    topic, group = unique("ToolTopic"), unique("ToolG")
    cluster = pop_target.cluster_name
    out = mqadmin(pop_target, "updateTopic", "-c", cluster, "-t", topic, "-a", "+message.type=FIFO")
    assert out.endswith(
        f"TopicConfig [topicName={topic}, readQueueNums=8, writeQueueNums=8, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, "
        "attributes={+message.type=FIFO}]\n"
    ), out
    assert _topic_config(client, pop_target, topic)["attributes"] == {"message.type": "FIFO"}
    policy = '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,2000]}}'
    mqadmin(
        pop_target,
        "updateSubGroup",
        "-c",
        cluster,
        "-g",
        group,
        "-o",
        "true",
        "-r",
        "2",
        "-p",
        policy,
    )
    got = body.loads(_ask(client, pop_target, 352, {"group": group}).body_bytes)
    assert got["consumeMessageOrderly"] is True and got["retryMaxTimes"] == 2
    assert got["groupRetryPolicy"] == json.loads(policy)
    out = mqadmin(
        pop_target,
        "setConsumeMode",
        "-b",
        pop_target.broker_addr,
        "-t",
        topic,
        "-g",
        group,
        "-m",
        "POP",
        "-q",
        "1",
    )
    assert f"topic[{topic}] group[{group}] consume mode[POP] popShareQueueNum[1]" in out
    modes = body.loads(_ask(client, pop_target, 402).body_bytes)["messageRequestModeMap"]
    assert modes[topic][group]["mode"] == "POP" and modes[topic][group]["popShareQueueNum"] == 1
    shown = mqadmin(pop_target, "getConsumerConfig", "-g", group)
    assert "consumeMessageOrderly                   =  true" in shown


def test_a_slave_takes_its_masters_request_modes(
    client: SyncRemotingClient, tmp_path: Path
) -> None:
    """As 5.3.2's SlaveSynchronize does (ours only: the bench has no 5.3.2 slave)."""
    with running_target("sidewinder", tmp_path / "master", discard=True) as master:
        slave = ReplicaBroker("sidewinder", tmp_path / "slave", master).start()
        try:
            mode = {"consumerGroup": "G", "mode": "POP", "popShareQueueNum": 2, "topic": "T"}
            assert _ask(client, master, 401, None, mode).code == ResponseCode.SUCCESS

            def slave_modes() -> Any:
                reply = client.invoke(
                    slave.addr, RemotingCommand.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE), 5
                )
                return body.loads(reply.body_bytes)["messageRequestModeMap"]

            until("the slave's copy of the modes", lambda: slave_modes() == {"T": {"G": mode}})
            saved = slave.store_path / "config" / "messageRequestMode.json"
            until(
                "the slave's messageRequestMode.json",
                lambda: (
                    saved.exists()
                    and json.loads(saved.read_text())["messageRequestModeMap"] == {"T": {"G": mode}}
                ),
                timeout_s=5,
            )
        finally:
            slave.kill()


@pytest.mark.parametrize(
    "code", [RequestCode.SET_MESSAGE_REQUEST_MODE, RequestCode.QUERY_ASSIGNMENT]
)
def test_a_mode_or_assignment_body_without_a_topic_is_refused(
    client: SyncRemotingClient, pop_target: ClusterTarget, code: int
) -> None:
    """The same code; RocketMQ 5.3.2's remark is the NullPointerException it fails with, ours
    names the missing field."""
    reply = _ask(client, pop_target, code, None, {"consumerGroup": "G", "mode": "POP"})
    remark = "NullPointerException" if pop_target.kind == "rocketmq5" else "no topic"
    assert reply.code == ResponseCode.SYSTEM_ERROR and remark in (reply.remark or ""), reply


def test_rocketmq_4_9_8s_mqadmin_reads_5x_topics_and_groups(
    client: SyncRemotingClient, pop_target: ClusterTarget
) -> None:
    """A 4.x tool reads past the 5.x fields: it sees the topic and group as it always did."""
    topic, group, ns = unique("OldToolTopic"), unique("OldToolG"), pop_target.namesrv_addr
    assert _create(client, pop_target, topic, "+message.type=FIFO").code == ResponseCode.SUCCESS
    route = java_mqadmin(ns, "topicRoute", "-t", topic).stdout
    assert body.loads(route)["queueDatas"][0]["readQueueNums"] == 2, route  # fastjson text
    config = {"groupName": group, "consumeMessageOrderly": True, "retryMaxTimes": 5}
    assert _ask(client, pop_target, 200, None, config).code == ResponseCode.SUCCESS
    out = java_mqadmin(ns, "getConsumerConfig", "-g", group).stdout
    settings = dict(re.findall(r"^(\w+)\s+=  (.*)$", out, re.M))
    assert (settings["groupName"], settings["retryMaxTimes"]) == (group, "5"), out
    assert "consumeMessageOrderly" not in settings  # 4.9.8's class has no such field


@pytest.mark.parametrize(
    ("field", "value"),
    [("groupRetryPolicy", "fast"), ("groupSysFlag", "abc"), ("groupRetryPolicy", {"type": "X"})],
)
def test_a_group_body_with_a_bad_5x_field_is_refused_naming_it(
    client: SyncRemotingClient, pop_target: ClusterTarget, field: str, value: Any
) -> None:
    group = unique("BadG5")
    reply = _ask(client, pop_target, 200, None, {"groupName": group, field: value})
    if pop_target.kind == "rocketmq5" and value == {"type": "X"}:
        # 5.3.2 takes an unknown policy type and stores a policy without one.
        assert reply.code == ResponseCode.SUCCESS
        got = body.loads(_ask(client, pop_target, 352, {"group": group}).body_bytes)
        assert got["groupRetryPolicy"] == {}
        return
    assert reply.code == ResponseCode.SYSTEM_ERROR and field in (reply.remark or ""), reply


def test_rocketmq5_takes_over_our_metadata_files(
    client: SyncRemotingClient, tmp_path: Path
) -> None:
    """The files ours writes (topics.json, subscriptionGroup.json, messageRequestMode.json) are
    what a RocketMQ 5.3.2 broker started on them reads: the same attributes, group fields and
    modes. (The other way, our tables reading 5.3.2's files, is in the tests above.)"""
    topic, group = unique("TakeoverTopic"), unique("TakeoverG")
    policy = {"customizedRetryPolicy": {"next": [1000, 3000]}, "type": "CUSTOMIZED"}
    mode = {"consumerGroup": group, "mode": "POP", "popShareQueueNum": 1, "topic": topic}
    with running_target("sidewinder", tmp_path / "ours") as ours:
        assert _create(client, ours, topic, "+message.type=FIFO").code == ResponseCode.SUCCESS
        config = {"groupName": group, "consumeMessageOrderly": True, "groupRetryPolicy": policy}
        assert _ask(client, ours, 200, None, config).code == ResponseCode.SUCCESS
        assert _ask(client, ours, 401, None, mode).code == ResponseCode.SUCCESS
    theirs = create_target("rocketmq5", tmp_path / "theirs", routed=False)
    (theirs.store_path / "config").mkdir(parents=True)
    for name in ("topics.json", "subscriptionGroup.json", "messageRequestMode.json"):
        shutil.copy(ours.store_path / "config" / name, theirs.store_path / "config" / name)
    theirs.start()
    try:
        assert _topic_config(client, theirs, topic)["attributes"] == {"message.type": "FIFO"}
        got = body.loads(_ask(client, theirs, 352, {"group": group}).body_bytes)
        assert (got["consumeMessageOrderly"], got["groupRetryPolicy"]) == (True, policy)
        modes = body.loads(_ask(client, theirs, 402).body_bytes)["messageRequestModeMap"]
        assert modes[topic][group] == mode
    finally:
        theirs.kill()
