"""What the send processor answers to sends it refuses, over a real socket to a broker in this
process (tests/inprocess.py): each case takes milliseconds, not a broker start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewinder.broker.topics import TopicConfig
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from tests.helpers import send_request
from tests.inprocess import InProcessBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    root: Path = tmp_path_factory.mktemp("inprocess")
    with InProcessBroker(root, {"autoCreateTopicEnable": "false"}) as started:
        started.create_topic("Plain", 4)
        yield started


def _send(topic: str, queue_id: int = 0) -> RemotingCommand:
    return send_request(topic, group="g", queue_id=queue_id, born_timestamp=1700000000000)


@pytest.mark.parametrize(
    ("topic", "queue_id", "code", "remark"),
    [
        ("Plain", 0, ResponseCode.SUCCESS, None),
        ("NoSuchTopic", 0, ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist"),
        ("a b", 0, ResponseCode.SYSTEM_ERROR, "contains illegal characters"),
        (
            "SCHEDULE_TOPIC_XXXX",
            0,
            ResponseCode.NO_PERMISSION,
            "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
        ),
        ("Plain", 9, ResponseCode.SYSTEM_ERROR, "request queueId[9] is illegal"),
    ],
)
def test_a_send_is_stored_or_refused_with_rocketmq_s_code_and_remark(
    broker: InProcessBroker,
    topic: str,
    queue_id: int,
    code: ResponseCode,
    remark: str | None,
) -> None:
    reply = broker.invoke(_send(topic, queue_id))
    assert reply.code == code, reply.remark
    if remark is not None:
        assert remark in (reply.remark or "")
    if code == ResponseCode.SUCCESS:
        assert reply.ext_fields and reply.ext_fields["queueId"] == "0"


def test_an_unknown_request_code_is_named_in_the_refusal(broker: InProcessBroker) -> None:
    reply = broker.invoke(RemotingCommand.request(9999))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in (reply.remark or "")


def _set_broker_permission(broker: InProcessBroker, perm: int) -> None:
    request = RemotingCommand.request(
        RequestCode.UPDATE_BROKER_CONFIG, {}, f"brokerPermission={perm}\n".encode()
    )
    reply = broker.invoke(request)
    assert reply.code == ResponseCode.SUCCESS, reply.remark


def test_a_read_only_broker_refuses_sends_and_replies_to_order_topics_only(
    broker: InProcessBroker,
) -> None:
    """msgCheck, shared by sends and replies: brokerPermission without write refuses an order
    topic's messages; any other topic's are stored (tests/interop/test_error_paths.py shows
    RocketMQ doing so for sends)."""
    created = broker.invoke(
        RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": "Ordered",
                "defaultTopic": "TBW102",
                "readQueueNums": "1",
                "writeQueueNums": "1",
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0",
                "order": "true",
            },
        )
    )
    assert created.code == ResponseCode.SUCCESS, created.remark
    _set_broker_permission(broker, 4)
    try:
        for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_REPLY_MESSAGE_V2):
            request = _send("Ordered")
            request.code = code
            reply = broker.invoke(request)
            assert reply.code == ResponseCode.NO_PERMISSION, (code, reply.remark)
            assert reply.remark == "the broker[127.0.0.1] sending message is forbidden"
        reply = broker.invoke(_send("Plain"))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        _set_broker_permission(broker, 6)


def test_a_send_to_a_retry_topic_creates_it_when_auto_create_is_off(
    broker: InProcessBroker,
) -> None:
    """msgCheck's fallback: createTopicInSendMessageBackMethod, one queue, read and write."""
    reply = broker.invoke(_send("%RETRY%NoSuchRetryTopic"))
    assert reply.code != ResponseCode.TOPIC_NOT_EXIST, reply.remark
    topic = broker.call(_topic(broker, "%RETRY%NoSuchRetryTopic"))
    assert topic is not None and (topic.read_queue_nums, topic.write_queue_nums) == (1, 1)


async def _topic(broker: InProcessBroker, name: str) -> TopicConfig | None:
    assert broker.app is not None
    return broker.app.topics.get(name)


@pytest.mark.parametrize(
    ("code", "fields", "answer", "named"),
    [
        (
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            {"accessKey": "RocketMQ", "secretKey": "12345678"},
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            "[RocketMQ]",
        ),
        (
            RequestCode.DELETE_ACL_CONFIG,
            {"accessKey": "RocketMQ"},
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            "[RocketMQ]",
        ),
        (
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            {"globalWhiteAddrs": "10.10.*.*"},
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            "[10.10.*.*]",
        ),
        (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, ResponseCode.SYSTEM_ERROR, "version"),
        (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, ResponseCode.SYSTEM_ERROR, "ACL config"),
    ],
)
def test_acl_codes_fail_as_on_a_broker_without_acl(
    broker: InProcessBroker, code: int, fields: dict[str, str], answer: int, named: str
) -> None:
    """RocketMQ 4.9's failure codes for a broker with aclEnable=false (the default), the remark
    saying why instead of RocketMQ's NullPointerException."""
    reply = broker.invoke(RemotingCommand.request(code, fields))
    assert reply.code == answer, reply.remark
    assert "aclEnable=false" in (reply.remark or "") and named in (reply.remark or "")
