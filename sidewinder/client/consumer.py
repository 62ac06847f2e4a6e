"""The lite pull consumer: you poll, it pulls. Queues are either yours to pick (`assign`) or
shared out by the group (`subscribe`, rebalanced as members come and go).

    consumer = PullConsumer("my-group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "TagA || TagB")   # or: consumer.assign(await consumer.queues(t))
    await consumer.start()
    for message in await consumer.poll():
        ...
    await consumer.commit()                        # also every 5 s in subscribe mode, and on close
    await consumer.close()

A queue's position starts at the group's committed offset (QUERY_CONSUMER_OFFSET), else at
`consume_from`: "first" (the queue's minimum), "last" (its maximum) or "timestamp". `seek`
moves one. Polls use long polling: a queue with nothing new is held by the broker up to
`poll_timeout_s`.
"""

from __future__ import annotations

import asyncio
import time

from sidewinder.client.membership import CLUSTERING, GroupMember
from sidewinder.client.pulling import (
    ReceivedMessage,
    commit_offset,
    committed_offset,
    offset_at,
    pull,
    queue_bound,
)
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.subscription import Subscription

__all__ = ["PullConsumer", "ReceivedMessage"]


class PullConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        subscription: str = "*",
        batch: int = 32,
        poll_timeout_s: float = 5.0,
        consume_from: str = "first",
        consume_timestamp_ms: int | None = None,
        message_model: str = CLUSTERING,
        auto_commit_interval_s: float | None = 5.0,
        rebalance_interval_s: float = 20.0,
        heartbeat_interval_s: float = 30.0,
        instance_name: str | None = None,
    ) -> None:
        self.group = group
        self.member = GroupMember(
            group,
            namesrv_addr,
            consume_type="CONSUME_ACTIVELY",
            message_model=message_model,
            consume_from=consume_from,
            instance_name=instance_name,
        )
        self.remoting = self.member.remoting
        self.routes = self.member.routes
        self.subscription = subscription
        self.batch = batch
        self.poll_timeout_s = poll_timeout_s
        self.consume_timestamp_ms = consume_timestamp_ms
        self.auto_commit_interval_s = auto_commit_interval_s
        self.rebalance_interval_s = rebalance_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.positions: dict[MessageQueue, int] = {}
        self._subscribed = False
        self._maintainer: asyncio.Task[None] | None = None
        self._last_commit = time.monotonic()
        self._closed = False

    # -- choosing queues -------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Take a share of `topic`'s queues, decided by the group (not with `assign`)."""
        if self.positions and not self._subscribed:
            raise ValueError("this consumer already assigned its queues itself")
        self._subscribed = True
        self.member.subscribe(topic, expression, expression_type)

    def assign(self, queues: list[MessageQueue]) -> None:
        if self._subscribed:
            raise ValueError("this consumer subscribed; the group decides its queues")
        for topic in {q.topic for q in queues} - self.member.subscriptions.keys():
            self.member.subscribe(topic, self.subscription)
        self.positions = {q: self.positions.get(q, -1) for q in queues}

    def assignment(self) -> list[MessageQueue]:
        return sorted(self.positions)

    async def queues(self, topic: str) -> list[MessageQueue]:
        route = await self.routes.route(topic)
        if route is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}")
        return route.read_queues

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        if queue not in self.positions:
            raise ValueError(f"{queue} is not assigned to this consumer")
        self.positions[queue] = offset

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """In subscribe mode: join the group and take a share of the queues."""
        if self._subscribed and self._maintainer is None:
            settled = await self.member.rebalance(self._apply, heartbeat=True)
            self._maintainer = asyncio.get_running_loop().create_task(
                self.member.maintain(
                    self._apply,
                    running=lambda: not self._closed,
                    rebalance_interval_s=self.rebalance_interval_s,
                    heartbeat_interval_s=self.heartbeat_interval_s,
                    settled=settled,
                )
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._maintainer is not None:
            self._maintainer.cancel()
            # Bounded: a cancel racing a reply can be swallowed (3.11's wait_for); the loop
            # then ends by the closed flag.
            await asyncio.wait([self._maintainer], timeout=5)
            self._maintainer = None
        try:
            if self._subscribed and self.auto_commit_interval_s is not None:
                await self.commit()
            if self._subscribed:
                await self.member.unregister()
        finally:
            await self.member.close()

    async def _apply(self, mine: set[MessageQueue]) -> None:
        for queue in set(self.positions) - mine:
            position = self.positions.pop(queue)
            if position >= 0 and self.auto_commit_interval_s is not None:
                await self._commit_one(queue, position)
        for queue in mine - set(self.positions):
            self.positions[queue] = -1

    # -- consuming -------------------------------------------------------------------------------
    async def committed(self, queue: MessageQueue) -> int:
        """The group's committed offset of `queue`, -1 if it has none."""
        return await committed_offset(
            self.remoting, await self.member.broker_of(queue), self.group, queue
        )

    async def _start_position(self, queue: MessageQueue) -> int:
        committed = await self.committed(queue)
        if committed >= 0:
            return committed
        addr = await self.member.broker_of(queue)
        if self.member.consume_from == "last":
            return await queue_bound(self.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
        if self.member.consume_from == "timestamp":
            at = self.consume_timestamp_ms or int(time.time() * 1000)
            return await offset_at(self.remoting, addr, queue, at)
        return await queue_bound(self.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)

    async def poll(self) -> list[ReceivedMessage]:
        """Messages from every assigned queue that has some, after at most one long poll."""
        if self._subscribed and self._maintainer is None:
            await self.start()
        for queue, position in list(self.positions.items()):
            if position < 0:
                start = await self._start_position(queue)
                if queue in self.positions:
                    self.positions[queue] = start
        queues = list(self.positions)
        results = await asyncio.gather(*(self._pull(q, suspend=False) for q in queues))
        messages = [m for batch in results for m in batch]
        if not messages and queues:
            results = await asyncio.gather(*(self._pull(q, suspend=True) for q in queues))
            messages = [m for batch in results for m in batch]
        await self._auto_commit()
        return messages

    async def _pull(self, queue: MessageQueue, *, suspend: bool) -> list[ReceivedMessage]:
        position = self.positions.get(queue, -1)
        if position < 0:
            return []
        subscription = self.member.subscriptions.get(queue.topic) or Subscription.of(
            queue.topic, self.subscription
        )
        result = await pull(
            self.remoting,
            await self.member.broker_of(queue),
            self.group,
            queue,
            position,
            subscription,
            batch=self.batch,
            suspend_s=self.poll_timeout_s if suspend else None,
        )
        if result.stale_subscription:
            await self.member.heartbeat()
            return []
        if self.positions.get(queue) != position:
            return []  # reassigned or sought while this pull was out: its answer is stale
        self.positions[queue] = result.next_offset
        return result.messages

    async def _auto_commit(self) -> None:
        interval = self.auto_commit_interval_s
        if not self._subscribed or interval is None:
            return
        if time.monotonic() - self._last_commit >= interval:
            await self.commit()

    async def commit(self) -> None:
        """Store every queue's position as the group's offset."""
        self._last_commit = time.monotonic()
        for queue, position in list(self.positions.items()):
            if position >= 0:
                await self._commit_one(queue, position)

    async def _commit_one(self, queue: MessageQueue, position: int) -> None:
        addr = await self.member.broker_of(queue)
        await commit_offset(self.remoting, addr, self.group, queue, position)
