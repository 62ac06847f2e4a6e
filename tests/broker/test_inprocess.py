"""What the send processor answers to sends it refuses, over a real socket to a broker in this
process (tests/inprocess.py): each case takes milliseconds, not a broker start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import SEND_V2_NAMES
from tests.inprocess import InProcessBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    root: Path = tmp_path_factory.mktemp("inprocess")
    with InProcessBroker(root, {"autoCreateTopicEnable": "false"}) as started:
        started.create_topic("Plain", 4)
        yield started


def _send(topic: str, **changes: str) -> RemotingCommand:
    fields = {
        "producerGroup": "g",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": "WAIT\x01true",
        **changes,
    }
    ext = {SEND_V2_NAMES[name]: value for name, value in fields.items()}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"body")


@pytest.mark.parametrize(
    ("topic", "changes", "code", "remark"),
    [
        ("Plain", {}, ResponseCode.SUCCESS, None),
        ("NoSuchTopic", {}, ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist"),
        ("a b", {}, ResponseCode.SYSTEM_ERROR, "contains illegal characters"),
        (
            "SCHEDULE_TOPIC_XXXX",
            {},
            ResponseCode.NO_PERMISSION,
            "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
        ),
        ("Plain", {"queueId": "9"}, ResponseCode.SYSTEM_ERROR, "request queueId[9] is illegal"),
    ],
)
def test_a_send_is_stored_or_refused_with_rocketmq_s_code_and_remark(
    broker: InProcessBroker,
    topic: str,
    changes: dict[str, str],
    code: ResponseCode,
    remark: str | None,
) -> None:
    reply = broker.invoke(_send(topic, **changes))
    assert reply.code == code, reply.remark
    if remark is not None:
        assert remark in (reply.remark or "")
    if code == ResponseCode.SUCCESS:
        assert reply.ext_fields and reply.ext_fields["queueId"] == "0"


def test_an_unknown_request_code_is_named_in_the_refusal(broker: InProcessBroker) -> None:
    reply = broker.invoke(RemotingCommand.request(9999))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in (reply.remark or "")
