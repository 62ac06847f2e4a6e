"""Our codec and remoting client against a real cluster: requests we build are answered.

Route query to the name server; SEND_MESSAGE_V2, PULL_MESSAGE, HEART_BEAT and GET_MAX_OFFSET to
the broker; each in JSON and in ROCKETMQ binary headers. RocketMQ 4.9 answering with success is
the proof that our frames are what its clients send.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import uvloop

from interop import fastjson
from interop.target import ClusterTarget
from sidewinder.protocol.codes import RequestCode, ResponseCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageResponseHeader,
    TopicQueueRequestHeader,
)
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.remoting.client import RemotingClient
from tests.helpers import send_request, unique

pytestmark = pytest.mark.interop


def ask(
    serialize_type: SerializeType, code: int, ext: dict[str, str], body: bytes | None = None
) -> RemotingCommand:
    return RemotingCommand.request(code, ext, body, serialize_type=serialize_type)


async def scenario(target: ClusterTarget, serialize_type: SerializeType) -> None:
    client = RemotingClient()
    try:
        route = await client.invoke(
            target.namesrv_addr,
            ask(
                serialize_type,
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                GetRouteInfoRequestHeader("TBW102").to_ext(),
            ),
            5,
        )
        assert route.code == ResponseCode.SUCCESS, route.remark
        assert route.serialize_type == serialize_type
        brokers = fastjson.loads(route.body_bytes.decode())["brokerDatas"]
        assert any(target.broker_addr in b["brokerAddrs"].values() for b in brokers)

        topic, group = unique("Remoting"), unique("RemotingGroup")
        heartbeat = {
            "clientID": f"sidewinder@{group}",
            "producerDataSet": [{"groupName": group}],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "topic": topic,
                            "subString": "*",
                            "tagsSet": [],
                            "codeSet": [],
                            "subVersion": 0,
                            "expressionType": "TAG",
                        }
                    ],
                }
            ],
        }
        beat = await client.invoke(
            target.broker_addr,
            ask(serialize_type, RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode()),
            5,
        )
        assert beat.code == ResponseCode.SUCCESS, beat.remark

        body = f"hello over {serialize_type.name}".encode()
        send = send_request(topic, body, group=group, properties={"KEYS": "k1", "TAGS": "TagA"})
        send.serialize_type = serialize_type
        sent = await client.invoke(target.broker_addr, send, 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        result = SendMessageResponseHeader.from_ext(sent.ext_fields)
        assert result.queue_id == 0 and result.queue_offset == 0 and len(result.msg_id) == 32

        # Both brokers dispatch the ConsumeQueue asynchronously (RocketMQ's reput runs every
        # 1 ms): the send's reply may arrive before the queue shows the message.
        offset_ask = TopicQueueRequestHeader(topic, 0).to_ext()
        deadline = time.monotonic() + 10
        while True:
            max_offset = await client.invoke(
                target.broker_addr, ask(serialize_type, RequestCode.GET_MAX_OFFSET, offset_ask), 5
            )
            high = OffsetResponseHeader.from_ext(max_offset.ext_fields).offset
            if high == 1 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert high == 1

        pull_header = PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=0,
            queue_offset=0,
            max_msg_nums=32,
            sys_flag=0x4,  # SUBSCRIPTION: the filter comes with the request
            commit_offset=0,
            suspend_timeout_millis=1000,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        pulled = await client.invoke(
            target.broker_addr,
            ask(serialize_type, RequestCode.PULL_MESSAGE, pull_header.to_ext()),
            5,
        )
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        assert PullMessageResponseHeader.from_ext(pulled.ext_fields).next_begin_offset == 1
        record = decode_record(pulled.body_bytes, check_crc=True)
        assert isinstance(record, MessageRecord)
        assert bytes(record.body) == body and record.topic == topic
        assert record.properties()["KEYS"] == "k1"
    finally:
        await client.close()


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_rocketmq_answers_what_our_client_sends(
    target: ClusterTarget, serialize_type: SerializeType
) -> None:
    uvloop.run(asyncio.wait_for(scenario(target, serialize_type), 60))
