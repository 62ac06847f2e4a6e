"""Auto-renew of a push consumer's receipt handles, against a real broker: while the consumer
works the message stays hidden past its invisible time, its first handle still acks it, and a
consumer that goes away gets its messages handed back at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.target import ClusterTarget, create_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.messaging import Caller, MessagingActivity
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request, unique
from tests.interop.pop_requests import create_group_request, create_topic_request

SLICE_MS, AHEAD_MS = 2_000, 1_500  # short, for the test: RocketMQ's are 60 s and 10 s


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTarget]:
    workdir: Path = tmp_path_factory.mktemp("proxy-renewal")
    cluster = create_target("sidewinder", workdir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def setup(target: ClusterTarget, count: int) -> tuple[str, str]:
    topic, group = unique("RenewTopic"), unique("RenewGroup")
    client = SyncRemotingClient()
    try:
        for request in (create_topic_request(topic, 1), create_group_request(group)):
            assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
        for n in range(count):
            reply = client.invoke(target.broker_addr, send_request(topic, b"m%d" % n), 10)
            assert reply.code == ResponseCode.SUCCESS
    finally:
        client.close()
    return topic, group


async def receive(
    activity: MessagingActivity, caller: Caller, topic: str, group: str, auto_renew: bool
) -> list[Any]:
    request = v2.ReceiveMessageRequest(
        group=v2.Resource(name=group),
        message_queue=v2.MessageQueue(topic=v2.Resource(name=topic), id=-1),
        batch_size=16,
        auto_renew=auto_renew,
    )
    if not auto_renew:
        request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromSeconds(6)  # three slices
    answers = [a async for a in activity.receive_message(request, caller)]
    return [a.message for a in answers if a.HasField("message")]


async def renew_forever(activity: MessagingActivity) -> None:
    """The front's housekeeping, often enough for the short slices."""
    while True:
        await activity.housekeeping(int(time.time() * 1000), expire=False)
        await asyncio.sleep(0.25)


def activity_for(target: ClusterTarget) -> MessagingActivity:
    activity = MessagingActivity([target.namesrv_addr], ("127.0.0.1", 0))
    activity.renewals.slice_ms, activity.renewals.ahead_ms = SLICE_MS, AHEAD_MS
    return activity


def test_a_worked_on_message_stays_hidden_and_its_first_handle_acks_it(
    target: ClusterTarget,
) -> None:
    topic, group = setup(target, 1)

    async def scenario() -> None:
        activity = activity_for(target)
        pusher, other = Caller("pusher@1"), Caller("other@1")
        try:
            (message,) = await receive(activity, pusher, topic, group, auto_renew=True)
            first = message.system_properties.receipt_handle
            renewing = asyncio.get_running_loop().create_task(renew_forever(activity))
            # Another consumer polls past three invisible times and gets nothing.
            assert await receive(activity, other, topic, group, auto_renew=False) == []
            assert activity.renewals.newest(first) != first
            renewing.cancel()
            ack = v2.AckMessageRequest(
                group=v2.Resource(name=group),
                topic=v2.Resource(name=topic),
                entries=[v2.AckMessageEntry(message_id="m", receipt_handle=first)],
            )
            answer = await activity.ack_message(ack, pusher)
            assert v2.Code.Name(answer.status.code) == "OK", answer
            assert activity.renewals.tracked == {}
            await asyncio.sleep(SLICE_MS / 1000 + 1)
            assert await receive(activity, other, topic, group, auto_renew=False) == []
        finally:
            await activity.close()

    asyncio.run(scenario())


def test_a_consumer_that_goes_away_hands_its_messages_back(target: ClusterTarget) -> None:
    topic, group = setup(target, 2)

    async def scenario() -> None:
        activity = activity_for(target)
        activity.renewals.slice_ms = 60_000  # without the release they would hide a minute
        pusher, other = Caller("pusher@2"), Caller("other@2")
        try:
            got = await receive(activity, pusher, topic, group, auto_renew=True)
            assert len(got) == 2
            await activity.notify_client_termination(v2.NotifyClientTerminationRequest(), pusher)
            back: list[Any] = []
            deadline = time.monotonic() + 20
            while len(back) < 2:
                assert time.monotonic() < deadline, f"{len(back)} of 2 came back"
                back += await receive(activity, other, topic, group, auto_renew=False)
            assert sorted(m.body for m in back) == [b"m0", b"m1"]
        finally:
            await activity.close()

    asyncio.run(scenario())
