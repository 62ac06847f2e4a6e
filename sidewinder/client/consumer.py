"""The lite pull consumer: you poll, it pulls. Queues are either yours to pick (`assign`) or
shared out by the group (`subscribe`, rebalanced as members come and go).

    consumer = PullConsumer("my-group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "TagA || TagB")   # or: consumer.assign(await consumer.queues(t))
    await consumer.start()
    for message in await consumer.poll(timeout_s=1.0):  # default: poll_timeout_s, 5 s
        ...
    await consumer.commit()                        # also every 5 s in subscribe mode, and on close
    await consumer.close()

A queue's position starts at the group's committed offset (QUERY_CONSUMER_OFFSET), else at
`consume_from`: "first" (the queue's minimum), "last" (its maximum) or "timestamp". `seek`
moves one. A poll returns what the queues hold, else waits (long polling) up to its timeout for
the first messages to arrive. A queue whose topic has no route yet (just auto-created) gives
nothing until the route appears.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sidewinder.client.client_calls import CONSUMER_CALL_CODES, PullConsumerCalls
from sidewinder.client.membership import CLUSTERING, GroupMember
from sidewinder.client.pulling import (
    PullResult,
    ReceivedMessage,
    commit_offset,
    committed_offset,
    offset_at,
    pull,
    queue_bound,
)
from sidewinder.client.route_cache import MASTER_ID, ROUTE_RETRY_S, ClientError, MessageQueue
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.tls import TlsOption

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
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        self.group = group
        self.member = GroupMember(
            group,
            namesrv_addr,
            consume_type="CONSUME_ACTIVELY",
            message_model=message_model,
            consume_from=consume_from,
            instance_name=instance_name,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
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
        self._read_from: dict[MessageQueue, int] = {}  # broker ids pull replies suggested
        self._subscribed = False
        self._maintainer: asyncio.Task[None] | None = None
        self._last_commit = time.monotonic()
        self._closed = False
        # mqadmin's calls through a broker (consumerStatus, resetOffsetByTime ...), answered as
        # a Java DefaultLitePullConsumer answers them.
        self.member.table.register(PullConsumerCalls(self), *CONSUMER_CALL_CODES)

    @property
    def client_id(self) -> str:
        return self.member.client_id

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
        addr, _ = await self.member.reader_of(queue)
        return await committed_offset(self.remoting, addr, self.group, queue)

    async def _start_position(self, queue: MessageQueue) -> int:
        committed = await self.committed(queue)
        if committed >= 0:
            return committed
        addr, _ = await self.member.reader_of(queue)
        if self.member.consume_from == "last":
            return await queue_bound(self.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
        if self.member.consume_from == "timestamp":
            at = self.consume_timestamp_ms or int(time.time() * 1000)
            return await offset_at(self.remoting, addr, queue, at)
        return await queue_bound(self.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)

    async def poll(self, timeout_s: float | None = None) -> list[ReceivedMessage]:
        """What the assigned queues hold now, else the first messages to arrive within
        `timeout_s` seconds (None: the consumer's `poll_timeout_s`, 5 s, RocketMQ's
        pollTimeoutMillis; 0: no waiting); [] when none did.

        A queue whose topic has no route yet (a send auto-created it a moment ago) is read
        once the route appears; until then it gives nothing, it does not fail the poll.
        """
        wait_s = self.poll_timeout_s if timeout_s is None else max(timeout_s, 0.0)
        deadline = time.monotonic() + wait_s
        if self._subscribed and self._maintainer is None:
            await self.start()
        while True:
            located, waiting = await self._located_queues()
            messages = await self._pull_each(located, suspend_s=None)
            remaining_s = deadline - time.monotonic()
            if messages or remaining_s <= 0:
                break
            if waiting:  # look for the missing routes again before long
                remaining_s = min(remaining_s, ROUTE_RETRY_S)
            if located:
                messages = await self._pull_each(located, suspend_s=remaining_s)
            else:  # nothing to read yet: look again soon (a route, a rebalance's queues)
                await asyncio.sleep(min(remaining_s, ROUTE_RETRY_S))
            if messages or time.monotonic() >= deadline:
                break
        await self._auto_commit()
        return messages

    async def _located_queues(self) -> tuple[list[MessageQueue], bool]:
        """The assigned queues whose broker is known, each with a start position; and whether
        any is still waiting for its topic's route."""
        located, waiting = [], False
        for queue in list(self.positions):
            if await self.routes.reader_addr(queue) is None:
                waiting = True
                continue
            if self.positions.get(queue, -1) < 0:
                start = await self._start_position(queue)
                if queue not in self.positions:
                    continue  # let go of by a rebalance meanwhile
                self.positions[queue] = start
            located.append(queue)
        return located, waiting

    async def _pull_each(
        self, queues: list[MessageQueue], *, suspend_s: float | None
    ) -> list[ReceivedMessage]:
        """Pull every queue at once. Held pulls (`suspend_s`) end together once one brings
        messages or `suspend_s` passes. Positions move only here, after every pull is over, so
        a pull abandoned (or a poll cancelled) loses nothing: a later poll reads it again. A
        failure is raised only if no queue gave messages."""
        if not queues:
            return []
        pulls = [asyncio.ensure_future(self._pull(q, suspend_s=suspend_s)) for q in queues]
        try:
            if suspend_s:
                await _until_one_brings_messages(pulls, suspend_s)
            else:
                await asyncio.wait(pulls)  # each is answered at once
        finally:
            for p in pulls:
                p.cancel()
            outcomes = await asyncio.gather(*pulls, return_exceptions=True)
        messages: list[ReceivedMessage] = []
        failures = []
        for queue, outcome in zip(queues, outcomes, strict=True):
            if isinstance(outcome, PulledAt):
                # Unless reassigned or sought while the pull was out: then its answer is stale.
                if self.positions.get(queue) == outcome.position:
                    self.positions[queue] = outcome.result.next_offset
                    messages += outcome.result.messages
            elif isinstance(outcome, Exception):  # not CancelledError: abandoned is no failure
                failures.append(outcome)
        if failures and not messages:
            raise failures[0]
        return messages

    async def _pull(self, queue: MessageQueue, *, suspend_s: float | None) -> PulledAt | None:
        position = self.positions.get(queue, -1)
        if position < 0:
            return None
        subscription = self.member.subscriptions.get(queue.topic) or Subscription.of(
            queue.topic, self.subscription
        )
        addr, _ = await self.member.reader_of(queue, self._read_from.get(queue, MASTER_ID))
        result = await pull(
            self.remoting,
            addr,
            self.group,
            queue,
            position,
            subscription,
            batch=self.batch,
            suspend_s=suspend_s,
        )
        self._read_from[queue] = result.suggested_broker_id
        if result.stale_subscription:
            await self.member.heartbeat()
            return None
        return PulledAt(position, result)

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
        addr, _ = await self.member.reader_of(queue)
        await commit_offset(self.remoting, addr, self.group, queue, position)


@dataclass(frozen=True)
class PulledAt:
    """A pull's answer and the position it was asked at."""

    position: int
    result: PullResult


async def _until_one_brings_messages(pulls: Sequence[asyncio.Future[Any]], seconds: float) -> None:
    """Wait until one of `pulls` answers with messages, all have answered, or `seconds` pass."""
    deadline = time.monotonic() + seconds
    pending = set(pulls)
    while pending:
        done, pending = await asyncio.wait(
            pending,
            timeout=max(deadline - time.monotonic(), 0),
            return_when=asyncio.FIRST_COMPLETED,
        )
        if not done or any(_brought_messages(p) for p in done):
            return


def _brought_messages(pull: asyncio.Future[Any]) -> bool:
    outcome = None if pull.exception() else pull.result()
    return isinstance(outcome, PulledAt) and bool(outcome.result.messages)
