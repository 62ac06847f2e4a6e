"""What tests across the suite share: names no other test uses, raw requests as the stock clients
build them, waiting for a condition.

    topic = unique("Orders")                                   # "Orders_gw1_17" under xdist
    reply = client.invoke(addr, send_request(topic, b"hi", properties={"KEYS": "k"}), 10)
    reply = client.invoke(addr, pull_request(topic, "Readers", queue_offset=0), 10)
    await until(lambda: len(got) == 10, 30, "ten messages")

Fixtures live in conftest.py files (the interop `client` in tests/interop/conftest.py);
helpers of one directory beside its tests (tests/store/small_store.py, ...). No test imports
from another test module (tests/test_test_layout.py checks it).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import uvloop

from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from sidewinder.protocol.message import encode_properties

_names = itertools.count(1)


def unique(prefix: str) -> str:
    """A topic or group name no other test of this session uses."""
    # xdist workers count separately: their worker id keeps the names apart.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"{prefix}_{worker}{next(_names)}"


# The codes whose header is SendMessageRequestHeaderV2 (one-letter field names).
V2_SEND_CODES = frozenset(
    {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
)
WAIT_STORED = {"WAIT": "true"}
# PullSysFlag's bit for a pull that carries its subscription (else the broker looks up the
# group's, from a heartbeat).
FLAG_SUBSCRIPTION = 0x4


def send_request(
    topic: str,
    body: bytes = b"body",
    *,
    code: int = RequestCode.SEND_MESSAGE_V2,
    group: str = "TestProducers",
    queue_id: int = 0,
    properties: Mapping[str, str] | str = WAIT_STORED,
    born_timestamp: int | None = None,
    default_topic_queue_nums: int = 4,
    **fields: Any,
) -> RemotingCommand:
    """A send of `body` to `topic`'s queue `queue_id` with the header a 4.9 Java producer's
    sendKernelImpl writes (reconsumeTimes 0, unitMode and batch false; born now). `properties`
    as a mapping is encoded as the producer encodes it; a string goes on the wire as it is (to
    forge one). `fields` sets any other header field by its attribute name (`batch=True`,
    `max_reconsume_times=3`, `sys_flag=...`); None leaves a field out."""
    values: dict[str, Any] = {
        "producer_group": group,
        "topic": topic,
        "default_topic": "TBW102",
        "default_topic_queue_nums": default_topic_queue_nums,
        "queue_id": queue_id,
        "sys_flag": 0,
        "born_timestamp": int(time.time() * 1000) if born_timestamp is None else born_timestamp,
        "flag": 0,
        "properties": (
            properties if isinstance(properties, str) else encode_properties(properties).decode()
        ),
        "reconsume_times": 0,
        "unit_mode": False,
        "batch": False,
        **fields,
    }
    header = SendMessageRequestHeader(**values)
    names = SEND_V2_NAMES if code in V2_SEND_CODES else None
    return RemotingCommand.request(code, header.to_ext(names=names), body)


def pull_request(
    topic: str,
    group: str,
    *,
    queue_id: int = 0,
    queue_offset: int = 0,
    max_msg_nums: int = 32,
    sys_flag: int | None = None,
    commit_offset: int = 0,
    suspend_timeout_millis: int = 0,
    subscription: str | None = "*",
    **fields: Any,
) -> RemotingCommand:
    """A PULL_MESSAGE of `topic`'s queue as a Java consumer writes it (tag expression `*`
    carried in the header, no suspension unless asked); `fields` sets any other header field
    by attribute name."""
    if sys_flag is None:
        sys_flag = FLAG_SUBSCRIPTION if subscription is not None else 0
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=queue_offset,
        max_msg_nums=max_msg_nums,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=suspend_timeout_millis,
        sub_version=fields.pop("sub_version", 0),
        subscription=subscription,
        **fields,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())


async def until(check: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll `check` every 0.1 s; AssertionError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        await asyncio.sleep(0.1)


def run(scenario: Callable[[], Coroutine[Any, Any, object]], seconds: float = 150) -> None:
    """An async scenario on uvloop (the loop our clients run on), failed after `seconds`."""

    async def bounded() -> None:
        async with asyncio.timeout(seconds):
            await scenario()

    uvloop.run(bounded())
