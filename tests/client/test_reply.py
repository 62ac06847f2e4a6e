"""The client's request-reply pieces without a broker: the reply message a replier makes, and
the PUSH_REPLY_MESSAGE_TO_CLIENT a requester answers."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from sidewinder.client.producer import create_reply_message
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.reply import ReplyReceiver, RequestTimeoutError
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ReplyMessageRequestHeader
from sidewinder.protocol.message import MessageConst, encode_properties


def received(properties: dict[str, str]) -> ReceivedMessage:
    return ReceivedMessage(MessageQueue("Ask", "b", 0), 0, b"q", properties, "id", "off", 0, 0, 0)


def test_a_reply_goes_to_the_cluster_reply_topic_with_the_request_ids() -> None:
    request = received(
        {
            MessageConst.CLUSTER: "C1",
            MessageConst.CORRELATION_ID: "c-7",
            MessageConst.MESSAGE_REPLY_TO_CLIENT: "1.2.3.4@x",
            MessageConst.MESSAGE_TTL: "3000",
            "other": "not copied",
        }
    )
    reply = create_reply_message(request, b"answer")
    assert reply.topic == "C1_REPLY_TOPIC"
    assert reply.body == b"answer"
    assert reply.properties == {
        "MSG_TYPE": "reply",
        "CORRELATION_ID": "c-7",
        "REPLY_TO_CLIENT": "1.2.3.4@x",
        "TTL": "3000",
    }


def test_a_request_without_cluster_cannot_be_answered() -> None:
    with pytest.raises(ClientError, match=r"property\[CLUSTER\] is null") as caught:
        create_reply_message(received({}), b"answer")
    assert caught.value.code == 10007


def push(correlation_id: str, body: bytes, sys_flag: int = 0) -> RemotingCommand:
    header = ReplyMessageRequestHeader(
        "PG",
        "C1_REPLY_TOPIC",
        "TBW102",
        4,
        0,
        sys_flag,
        1,
        0,
        encode_properties({MessageConst.CORRELATION_ID: correlation_id}).decode(),
        0,
        False,
        "10.0.0.1:5555",
        "10.0.0.2:10911",
        2,
    )
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.to_ext(), body)


def test_a_pushed_reply_completes_its_request_and_is_acknowledged() -> None:
    async def scenario() -> None:
        receiver = ReplyReceiver()
        receiver.expect("c-1")
        waiting = asyncio.create_task(receiver.wait("c-1", 5))
        answer = await receiver.process(None, push("c-1", zlib.compress(b"pong"), sys_flag=1))  # type: ignore[arg-type]
        assert answer.code == ResponseCode.SUCCESS
        reply = await waiting
        assert reply.body == b"pong"
        assert reply.born_host == "10.0.0.1:5555"
        assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties
        stray = await receiver.process(None, push("nobody", b"x"))  # type: ignore[arg-type]
        assert stray.code == ResponseCode.SUCCESS
        receiver.expect("c-2")
        with pytest.raises(RequestTimeoutError):
            await receiver.wait("c-2", 0.05)
        assert not receiver.waiting

    asyncio.run(scenario())
