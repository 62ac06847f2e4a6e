"""The broker's calls to its consumers when the consumer misbehaves or the input is bad: a
consumer that never answers (RocketMQ's 10 s wait, then CONSUME_MSG_TIMEOUT; the status fan-out
leaves it out after 5 s), a message id that names nothing, a header without its group, an
offline group (CONSUMER_NOT_ONLINE, which sends mqadmin to its fallback)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from tests.broker.bare_broker import GROUP, TOPIC, broker

CLIENT_ID = "127.0.0.1@silent"


def heartbeat() -> RemotingCommand:
    data = {
        "clientID": CLIENT_ID,
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": TOPIC, "subString": "*", "subVersion": 1}],
            }
        ],
        "producerDataSet": [],
    }
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, json.dumps(data).encode())


def test_a_consumer_that_never_answers_times_out_as_rocketmq(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (_app, addr):
            admin = RemotingClient()
            silent = RemotingClient()  # no processor table: it reads requests, answers none
            try:
                assert (await silent.invoke(addr, heartbeat(), 3)).code == ResponseCode.SUCCESS
                running = RemotingCommand.request(
                    RequestCode.GET_CONSUMER_RUNNING_INFO,
                    {"consumerGroup": GROUP, "clientId": CLIENT_ID},
                )
                status = RemotingCommand.request(
                    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                    {"topic": TOPIC, "group": GROUP},
                )
                started = time.monotonic()
                timed_out, statuses = await asyncio.gather(
                    admin.invoke(addr, running, 15), admin.invoke(addr, status, 15)
                )
                assert timed_out.code == ResponseCode.CONSUME_MSG_TIMEOUT, timed_out
                assert timed_out.remark.startswith(f"consumer <{GROUP}> <{CLIENT_ID}> Timeout")
                assert 9.5 < time.monotonic() - started < 13
                assert statuses.code == ResponseCode.SUCCESS
                assert b'"consumerTable":{}' in statuses.body_bytes

                other = RemotingCommand.request(
                    RequestCode.GET_CONSUMER_RUNNING_INFO,
                    {"consumerGroup": GROUP, "clientId": "1.2.3.4@other"},
                )
                missing = await admin.invoke(addr, other, 5)
                assert missing.code == ResponseCode.SYSTEM_ERROR
                assert missing.remark == f"The Consumer <{GROUP}> <1.2.3.4@other> not online"
            finally:
                await admin.close()
                await silent.close()

    asyncio.run(scenario())


def test_bad_input_gets_a_refusal_not_a_crash(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker(tmp_path) as (app, addr):
            admin = RemotingClient()
            try:
                no_group = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {})
                reply = await admin.invoke(addr, no_group, 5)
                assert reply.code == ResponseCode.SYSTEM_ERROR
                assert "consumerGroup" in (reply.remark or "")

                for msg_id in ("nothex", "7F00000100002A9F00000000DEADBEEF"):
                    directly = RemotingCommand.request(
                        RequestCode.CONSUME_MESSAGE_DIRECTLY,
                        {"consumerGroup": GROUP, "clientId": CLIENT_ID, "msgId": msg_id},
                    )
                    reply = await admin.invoke(addr, directly, 5)
                    assert reply.code == ResponseCode.SYSTEM_ERROR, reply

                app.offsets.commit(GROUP, TOPIC, 0, 0)
                app.offsets.commit(GROUP, TOPIC, 1, 0)
                reset = RemotingCommand.request(
                    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                    {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "true"},
                )
                reply = await admin.invoke(addr, reset, 5)
                assert reply.code == ResponseCode.CONSUMER_NOT_ONLINE
                assert reply.remark == (
                    f"Consumer not online, so can not reset offset, Group: {GROUP} "
                    f"Topic: {TOPIC} Timestamp: -1"
                )
                reset.ext_fields = {**(reset.ext_fields or {}), "topic": "NoSuchTopic"}
                reply = await admin.invoke(addr, reset, 5)
                assert reply.code == ResponseCode.SYSTEM_ERROR
                assert reply.remark.endswith("no topic in this broker. topic=NoSuchTopic")
            finally:
                await admin.close()

    asyncio.run(scenario())
