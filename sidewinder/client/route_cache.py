"""Topic routes from the name servers, cached (the client's MQClientInstance route table).

A topic a send just auto-created has no route for a moment: its broker registers it with the
name servers after creating it. `route` answers None then, and `broker_addr` looks again at
most every ROUTE_RETRY_S, so callers can wait for it without asking in a tight loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import GetRouteInfoRequestHeader
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError

AUTO_CREATE_TOPIC = "TBW102"
MASTER_ID = 0
PERM_READ, PERM_WRITE = 4, 2
ROUTE_RETRY_S = 0.5

_T = TypeVar("_T")


class ClientError(Exception):
    """A request the cluster refused; `code` is RocketMQ's response code."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"code {code}: {remark}")
        self.code = code
        self.remark = remark


def check_reply(reply: RemotingCommand) -> None:
    if reply.code != ResponseCode.SUCCESS:
        raise ClientError(reply.code, reply.remark or "")


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass
class TopicRoute:
    topic: str
    brokers: dict[str, dict[int, str]]  # brokerName -> id -> address
    write_queues: list[MessageQueue]
    read_queues: list[MessageQueue]
    fetched_at: float

    def master(self, broker_name: str) -> str | None:
        return self.brokers.get(broker_name, {}).get(MASTER_ID)

    def reader(self, broker_name: str, prefer: int = MASTER_ID) -> tuple[str, int] | None:
        """The Java client's findBrokerAddressInSubscribe(name, prefer, false): broker `prefer`
        of the group, else any of its brokers, its master first; with that broker's id."""
        addrs = self.brokers.get(broker_name, {})
        if prefer in addrs:
            return addrs[prefer], prefer
        for broker_id in sorted(addrs):
            return addrs[broker_id], broker_id
        return None


def parse_route(topic: str, data: bytes) -> TopicRoute:
    route = body.loads(data)
    brokers = {
        b["brokerName"]: {int(k): v for k, v in b["brokerAddrs"].items()}
        for b in route.get("brokerDatas", [])
    }
    writes, reads = [], []
    for queue in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"]):
        name, perm = queue["brokerName"], int(queue["perm"])
        # A group whose master is gone (only its slave registered) takes no writes: as the Java
        # client's topicRouteData2TopicPublishInfo, its queues leave the publish list, and
        # sends go to the other groups. Its queues stay readable, from the slave.
        if perm & PERM_WRITE and MASTER_ID in brokers.get(name, {}):
            writes += [MessageQueue(topic, name, i) for i in range(int(queue["writeQueueNums"]))]
        if perm & PERM_READ:
            reads += [MessageQueue(topic, name, i) for i in range(int(queue["readQueueNums"]))]
    return TopicRoute(topic, brokers, writes, reads, time.monotonic())


class RouteCache:
    def __init__(self, remoting: RemotingClient, namesrv_addrs: list[str], ttl_s: float = 30.0):
        if not namesrv_addrs:
            raise ValueError("no name server address (namesrvAddr)")
        self.remoting = remoting
        self.namesrv_addrs = namesrv_addrs
        self.ttl_s = ttl_s
        self.routes: dict[str, TopicRoute] = {}
        self._looked_up_at: dict[str, float] = {}  # when broker_addr last asked, per topic

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute | None:
        cached = self.routes.get(topic)
        if cached and not refresh and time.monotonic() - cached.fetched_at < self.ttl_s:
            return cached
        reply = await self._ask_any(
            RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext()
            )
        )
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if reply.code != ResponseCode.SUCCESS:
            raise ClientError(reply.code, reply.remark or "")
        route = parse_route(topic, reply.body_bytes)
        self.routes[topic] = route
        return route

    async def broker_addr(self, queue: MessageQueue) -> str | None:
        """The master serving `queue`, or None while the name servers do not know it yet. A
        miss, or a route past its TTL, is looked up again, at most every ROUTE_RETRY_S."""
        return await self._lookup(queue, lambda route: route.master(queue.broker_name))

    async def reader_addr(
        self, queue: MessageQueue, prefer: int = MASTER_ID
    ) -> tuple[str, int] | None:
        """Where to read `queue` (pulls, offsets) and that broker's id: broker `prefer` of its
        group (what the last pull reply suggested), else any of the group, the master first,
        so a group whose master is gone is read from its slave. Looked up as broker_addr."""
        return await self._lookup(queue, lambda route: route.reader(queue.broker_name, prefer))

    def expire(self, topic: str) -> None:
        """A broker of the topic's route stopped answering: look the route up again at the next
        lookup (at most every ROUTE_RETRY_S), not only once its TTL has passed."""
        route = self.routes.get(topic)
        if route is not None:
            self.routes[topic] = dataclasses.replace(route, fetched_at=-math.inf)

    async def _lookup(
        self, queue: MessageQueue, pick: Callable[[TopicRoute], _T | None]
    ) -> _T | None:
        route = self.routes.get(queue.topic)
        found = pick(route) if route else None
        now = time.monotonic()
        fresh = route is not None and now - route.fetched_at < self.ttl_s
        may_ask = now - self._looked_up_at.get(queue.topic, -math.inf) >= ROUTE_RETRY_S
        if (found is None or not fresh) and may_ask:
            self._looked_up_at[queue.topic] = now
            try:
                route = await self.route(queue.topic, refresh=True)
            except ClientError:
                if found is None:
                    raise
                return found  # no name server answered: the route we had still serves
            found = pick(route) if route else None
        return found

    async def wait_broker_addr(self, queue: MessageQueue, timeout_s: float) -> str | None:
        """`broker_addr`, waiting up to `timeout_s` for a route that is not there yet."""
        deadline = time.monotonic() + timeout_s
        while (addr := await self.broker_addr(queue)) is None and time.monotonic() < deadline:
            await asyncio.sleep(min(ROUTE_RETRY_S, max(deadline - time.monotonic(), 0)))
        return addr

    async def _ask_any(self, request: RemotingCommand) -> RemotingCommand:
        errors = []
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                return await self.remoting.invoke(addr, request, 3)
            except (RemotingError, OSError) as exc:
                errors.append(f"{addr}: {exc}")
        raise ClientError(-1, "no name server answered: " + "; ".join(errors))

    async def ask_name_server(self, request: RemotingCommand) -> RemotingCommand:
        return await self._ask_any(request)
