"""Error paths, code for code, on every target: what RocketMQ answers is the contract."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.target import ClusterTarget
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    GetRouteInfoRequestHeader,
    QueryConsumerOffsetRequestHeader,
)
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import pull_request, send_request, unique

pytestmark = pytest.mark.interop


def send(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, body: bytes = b"hello", **kw: Any
) -> RemotingCommand:
    request = send_request(
        topic,
        body,
        group=kw.get("group", "ErrorPathProducer"),
        queue_id=kw.get("queue_id", 0),
        properties={"KEYS": "k"},
    )
    return client.invoke(target.broker_addr, request, 10)


def pull(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, offset: int
) -> RemotingCommand:
    request = pull_request(
        topic,
        "ErrorPathConsumer",
        queue_offset=offset,
        suspend_timeout_millis=1000,
        expression_type="TAG",
    )
    return client.invoke(target.broker_addr, request, 10)


def test_a_request_code_nobody_serves(client: SyncRemotingClient, target: ClusterTarget) -> None:
    reply = client.invoke(target.broker_addr, RemotingCommand.request(9999, {}), 5)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in (reply.remark or "")


def test_a_bad_topic_name(client: SyncRemotingClient, target: ClusterTarget) -> None:
    reply = send(client, target, "bad topic!")
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert "illegal characters" in (reply.remark or "")


def test_a_message_over_max_message_size(client: SyncRemotingClient, target: ClusterTarget) -> None:
    topic = unique("TooBig")
    assert send(client, target, topic).code == ResponseCode.SUCCESS
    reply = send(client, target, topic, b"x" * ((4 << 20) + 1))
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL


def test_pull_outside_the_queue(client: SyncRemotingClient, target: ClusterTarget) -> None:
    topic = unique("PullEdges")
    for _ in range(3):
        assert send(client, target, topic).code == ResponseCode.SUCCESS
    deadline = time.monotonic() + 10
    # Dispatch is asynchronous on both brokers: wait until all three are in the queue.
    while (first := pull(client, target, topic, 0)).code != ResponseCode.SUCCESS or (
        first.ext_fields or {}
    ).get("maxOffset") != "3":
        assert time.monotonic() < deadline, "messages never became pullable"
        time.sleep(0.1)
    at_end = pull(client, target, topic, 3)
    assert at_end.code == ResponseCode.PULL_NOT_FOUND
    assert (at_end.ext_fields or {})["nextBeginOffset"] == "3"
    beyond = pull(client, target, topic, 50)
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED
    assert (beyond.ext_fields or {})["nextBeginOffset"] == "3"  # back to the end
    for key in ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"):
        assert key in (beyond.ext_fields or {})


def test_the_offset_of_a_group_that_never_committed(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    topic = unique("FreshGroup")
    assert send(client, target, topic).code == ResponseCode.SUCCESS
    header = QueryConsumerOffsetRequestHeader(unique("NeverCommitted"), topic, 0)
    reply = client.invoke(
        target.broker_addr,
        RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext()),
        5,
    )
    # 4.x answers 0 while the queue's first message is still held (it is, here).
    assert reply.code == ResponseCode.SUCCESS and (reply.ext_fields or {})["offset"] == "0"


def test_an_unknown_topic_when_auto_create_is_off(
    make_target: Callable[..., ClusterTarget],
) -> None:
    target = make_target(autoCreateTopicEnable="false")
    remoting = SyncRemotingClient()
    try:
        reply = send(remoting, target, unique("NotCreated"))
    finally:
        remoting.close()
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST
    assert "not exist" in (reply.remark or "")


def test_a_send_that_creates_a_topic_answers_once_the_name_server_knows_it(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    """A consumer started the moment the producer hears back must find the new topic's route.
    RocketMQ 4.9 registers an auto-created topic before it answers the send, but oneway, so the
    name server usually (not always) has it by then; Sidewinder answers only once it has."""

    def route_code(topic: str) -> int:
        return client.invoke(
            target.namesrv_addr,
            RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext()
            ),
            5,
        ).code

    for _ in range(5):
        topic = unique("CreatedBySend")
        assert send(client, target, topic).code == ResponseCode.SUCCESS
        code = route_code(topic)
        if target.kind == "sidewinder":
            assert code == ResponseCode.SUCCESS, topic
        deadline = time.monotonic() + 1
        while code != ResponseCode.SUCCESS and time.monotonic() < deadline:
            time.sleep(0.01)
            code = route_code(topic)
        assert code == ResponseCode.SUCCESS, topic


def test_a_read_only_broker_takes_sends_to_a_plain_topic(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    """brokerPermission 4 (read only) refuses sends only to order topics (msgCheck, shared by
    sends and replies): a send already on its way to a plain topic is stored."""
    topic = unique("ReadOnlyBroker")
    create_topic(target.namesrv_addr, topic, queues=1)
    args = ["-b", target.broker_addr, "-k", "brokerPermission"]
    mqadmin(target.namesrv_addr, "updateBrokerConfig", *args, "-v", "4")
    try:
        reply = send(client, target, topic)
    finally:
        mqadmin(target.namesrv_addr, "updateBrokerConfig", *args, "-v", "6")
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert (reply.ext_fields or {})["queueOffset"] == "0"


@pytest.mark.parametrize("command", ["updateTopic", "deleteTopic"])
def test_the_reply_topic_is_a_system_topic(target: ClusterTarget, command: str) -> None:
    """<cluster>_REPLY_TOPIC joins TopicValidator's system topics when the broker makes it: a
    broker refuses to create or delete it, as it does TBW102 or its own name."""
    for topic in (f"{target.cluster_name}_REPLY_TOPIC", "TBW102", target.broker_name):
        out = mqadmin(
            target.namesrv_addr, command, "-c", target.cluster_name, "-t", topic, check=False
        ).output
        assert "CODE: 1 " in out, out
        assert f"The topic[{topic}] is conflict with system topic." in out, out
    listed = mqadmin(target.namesrv_addr, "topicList").output.split()
    assert f"{target.cluster_name}_REPLY_TOPIC" in listed
