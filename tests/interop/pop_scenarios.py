"""What the POP scenarios share: topics made ready on a target, receiving until enough came,
and the mark for the scenarios the Sidewinder broker cannot pass until it speaks POP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.route_cache import ClientError
from sidewinder.client.simple_consumer import PoppedMessage, SimpleConsumer
from tests.helpers import unique

# RocketMQ 5.3.2 hands an unacked message out again 2 to 5 s after its invisible time ends (its
# revive service runs in steps of about 2 s); 15 s leaves room for a loaded machine.
REDELIVERY_DEADLINE_S = 15.0


class _Closable(Protocol):
    async def close(self) -> None: ...


@asynccontextmanager
async def closing(*clients: _Closable) -> AsyncIterator[None]:
    """Close the clients (a Producer has no `async with` of its own) whatever happens."""
    try:
        yield
    finally:
        for client in clients:
            await client.close()


async def new_topic(target: ClusterTarget, prefix: str, queues: int = 2) -> str:
    """A new topic on the target, routable at the name server."""
    topic = unique(prefix)
    async with Admin(target.namesrv_addr) as admin:
        await admin.create_topic(topic, queues=queues)
        deadline = time.monotonic() + 10
        while True:
            try:
                await admin.route(topic)
                return topic
            except ClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def receive_until(
    consumer: SimpleConsumer,
    count: int,
    *,
    invisible_duration_s: float = 30.0,
    within_s: float = 10.0,
) -> list[PoppedMessage]:
    """Receive (long polling 2 s at a time) until `count` messages came or `within_s` passed."""
    got: list[PoppedMessage] = []
    deadline = time.monotonic() + within_s
    while len(got) < count and time.monotonic() < deadline:
        got += await consumer.receive(
            32, invisible_duration_s=invisible_duration_s, await_duration_s=2
        )
    return got
