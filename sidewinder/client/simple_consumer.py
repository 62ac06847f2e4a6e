"""The simple consumer: RocketMQ 5's POP consumption over the remoting protocol. No queues to
own and no offsets to commit: the broker hands out messages and hides each one from the group
until it is acked or its invisible duration runs out, when it is handed out again.

    consumer = SimpleConsumer("billing", "127.0.0.1:9876")
    consumer.subscribe("Orders", "paid || refunded")
    await consumer.start()                        # checks the topics have routes
    for message in await consumer.receive(16, invisible_duration_s=30, await_duration_s=5):
        ...
        await consumer.ack(message)               # else it comes back after 30 s
    later = await consumer.change_invisible_duration(message, 60)   # a new handle: ack `later`
    await consumer.close()

Each receive pops (POP_MESSAGE, queue -1: any queue) from one broker serving one subscribed
topic, taking them in turn; with `await_duration_s` the broker holds the pop until a message
arrives or the time is up (long polling). The requests are sidewinder/client/pop_client.py's.
"""

from __future__ import annotations

import itertools

from sidewinder.client.pop_client import PopClient, PoppedMessage
from sidewinder.client.route_cache import RouteCache
from sidewinder.protocol.acl import request_hook
from sidewinder.protocol.pop import ConsumeInitMode
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.tls import TlsOption

__all__ = ["PoppedMessage", "SimpleConsumer"]

CONSUME_FROM = {"last": ConsumeInitMode.MAX, "first": ConsumeInitMode.MIN}


class SimpleConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        invisible_duration_s: float = 30.0,
        await_duration_s: float = 5.0,
        consume_from: str = "last",
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        if consume_from not in CONSUME_FROM:
            raise ValueError(f"consume_from must be one of {', '.join(CONSUME_FROM)}")
        self.group = group
        self.invisible_duration_s = invisible_duration_s
        self.await_duration_s = await_duration_s
        self.init_mode = CONSUME_FROM[consume_from]
        self.remoting = RemotingClient(before_request=request_hook(access_key, secret_key), tls=tls)
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self.pops = PopClient(group, self.remoting, self.routes)
        self.subscriptions: dict[str, Subscription] = {}
        self._turn = itertools.count()

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self.subscriptions[topic] = Subscription.of(
            topic, expression, expression_type=expression_type
        )

    async def start(self) -> None:
        """Look up every subscribed topic's route; a topic with none raises TOPIC_NOT_EXIST."""
        for topic in self.subscriptions:
            await self.pops.brokers(topic)

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def receive(
        self,
        max_messages: int = 16,
        invisible_duration_s: float | None = None,
        await_duration_s: float | None = None,
    ) -> list[PoppedMessage]:
        """Up to `max_messages` (at most 32) messages of one broker serving one subscribed
        topic (the next in turn), each invisible to the group for `invisible_duration_s`;
        [] when none arrived within `await_duration_s` (0: no waiting)."""
        if not self.subscriptions:
            raise ValueError("subscribe to a topic before receiving")
        invisible_s = (
            self.invisible_duration_s if invisible_duration_s is None else invisible_duration_s
        )
        await_s = self.await_duration_s if await_duration_s is None else max(await_duration_s, 0)
        targets = [(t, b) for t in sorted(self.subscriptions) for b in await self.pops.brokers(t)]
        topic, broker = targets[next(self._turn) % len(targets)]
        return await self.pops.pop(
            self.subscriptions[topic],
            broker,
            max_messages=max_messages,
            invisible_s=invisible_s,
            await_s=await_s,
            init_mode=self.init_mode,
        )

    async def ack(self, message: PoppedMessage) -> None:
        """Consumed: the group never receives it again. Raises ClientError if the broker
        refuses the handle."""
        await self.pops.ack(message)

    async def change_invisible_duration(
        self, message: PoppedMessage, invisible_duration_s: float
    ) -> PoppedMessage:
        """Hide the message for `invisible_duration_s` from now instead; returns it with its
        new receipt handle, the one to ack it with (the old one no longer settles it)."""
        return await self.pops.change_invisible_duration(message, invisible_duration_s)
