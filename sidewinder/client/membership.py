"""A consumer's place in its group: heartbeats to the brokers, the group's member list, and which
queues are this member's (RocketMQ's RebalanceImpl with AllocateMessageQueueAveragely).

Queues and member ids are both sorted before allocating, exactly as the Java client does, so our
consumers and stock ones can share a group without overlapping. A broker tells every member
with NOTIFY_CONSUMER_IDS_CHANGED when the group changes; `maintain` then rebalances at once.

Joining is the Java client's order: fresh routes, a heartbeat to every broker in them, a
rebalance at once. A subscription whose route is not there yet (its topic auto-created a moment
ago, or %RETRY%group, which the first heartbeat creates) is looked for again within a second,
then less often; when it appears, its brokers get a heartbeat and the group rebalances.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sidewinder.client.route_cache import (
    MASTER_ID,
    ROUTE_RETRY_S,
    ClientError,
    MessageQueue,
    RouteCache,
    TopicRoute,
)
from sidewinder.common.log import library_logger
from sidewinder.protocol import body
from sidewinder.protocol.acl import request_hook
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ConsumerGroupHeader, UnregisterClientRequestHeader
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.dispatch import ProcessorTable, RequestContext
from sidewinder.remoting.tls import TlsOption

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
log = library_logger(__name__)
CLUSTERING, BROADCASTING = "CLUSTERING", "BROADCASTING"
CONSUME_FROM = {
    "last": "CONSUME_FROM_LAST_OFFSET",
    "first": "CONSUME_FROM_FIRST_OFFSET",
    "timestamp": "CONSUME_FROM_TIMESTAMP",
}
_instances = itertools.count()


def local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def new_client_id(instance_name: str | None = None) -> str:
    """`ip@instanceName` as Java builds it; the default instance is unique per consumer object."""
    return f"{local_ip()}@{instance_name or f'{os.getpid()}#{next(_instances)}'}"


def allocate_averagely(
    queues: Sequence[MessageQueue], members: Sequence[str], me: str
) -> list[MessageQueue]:
    """This member's share: contiguous runs, the first `len(queues) % len(members)` one longer."""
    queues, members = sorted(queues), sorted(members)
    if me not in members or not queues:
        return []
    index, count = members.index(me), len(queues)
    per, extra = divmod(count, len(members))
    size = max(per + (1 if index < extra else 0), 1)
    start = index * size if index < extra else index * size + extra
    return [queues[(start + i) % count] for i in range(min(size, count - start))]


def masters_of(routes: Sequence[TopicRoute | None]) -> set[str]:
    """The master addresses serving these routes (None: a topic with no route yet)."""
    return {a for r in routes if r is not None for name in r.brokers if (a := r.master(name))}


class _NotifyProcessor:
    def __init__(self, on_change: Callable[[], None]) -> None:
        self.on_change = on_change

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.on_change()
        return request.reply(ResponseCode.SUCCESS)


class GroupMember:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        consume_type: str,
        message_model: str = CLUSTERING,
        consume_from: str = "last",
        instance_name: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        if message_model not in (CLUSTERING, BROADCASTING):
            raise ValueError(f"message_model must be {CLUSTERING} or {BROADCASTING}")
        if consume_from not in CONSUME_FROM:
            raise ValueError(f"consume_from must be one of {', '.join(CONSUME_FROM)}")
        self.group = group
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from = consume_from
        self.client_id = new_client_id(instance_name)
        self.subscriptions: dict[str, Subscription] = {}
        # Set when the group or the subscriptions change: `maintain` rebalances at once.
        self.changed = asyncio.Event()
        # The consumer registers its own answers here too (client_calls.py).
        self.table = ProcessorTable()
        self.table.register(
            _NotifyProcessor(self.changed.set), RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        )
        self.remoting = RemotingClient(
            self.table, before_request=request_hook(access_key, secret_key), tls=tls
        )
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self._brokers: set[str] = set()  # every broker we heartbeated: told when we leave
        self._heard_by: set[str] = set()  # the ones that took the last heartbeat
        self._last_heartbeat = -math.inf
        self._unlisted = False  # the brokers did not list us at the last rebalance

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self.subscriptions[topic] = Subscription.of(
            topic, expression, expression_type=expression_type
        )
        self.changed.set()

    def heartbeat_body(self) -> bytes:
        data: dict[str, Any] = {
            "clientID": self.client_id,
            "consumerDataSet": [
                {
                    "groupName": self.group,
                    "consumeType": self.consume_type,
                    "messageModel": self.message_model,
                    "consumeFromWhere": CONSUME_FROM[self.consume_from],
                    "unitMode": False,
                    "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()],
                }
            ],
            "producerDataSet": [],
        }
        return json.dumps(data).encode()

    async def heartbeat(self) -> None:
        """HEART_BEAT to every master serving a subscribed topic (cached routes; a rebalance
        refreshes them); unreachable ones are skipped, and tried again at the next rebalance."""
        addresses = masters_of([await self.routes.route(topic) for topic in self.subscriptions])
        self._brokers |= addresses
        self._last_heartbeat = time.monotonic()
        payload = self.heartbeat_body()
        heard_by = set()
        for addr in sorted(addresses):
            request = RemotingCommand.request(RequestCode.HEART_BEAT, None, payload)
            try:
                reply = await self.remoting.invoke(addr, request, 3)
            except (RemotingError, OSError) as exc:
                log.warning("client.heartbeat_failed", broker=addr, error=str(exc))
                continue
            if reply.code != ResponseCode.SUCCESS:
                log.warning("client.heartbeat_refused", broker=addr, code=reply.code)
                continue
            heard_by.add(addr)
        self._heard_by = heard_by

    async def members(self, topic: str) -> list[str]:
        """The group's client ids as one broker serving `topic` knows them."""
        route = await self.routes.route(topic)
        if route is None:
            return []
        header = ConsumerGroupHeader(self.group)
        for name in sorted(route.brokers):
            addr = route.master(name)
            if addr is None:
                continue
            request = RemotingCommand.request(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext()
            )
            try:
                reply = await self.remoting.invoke(addr, request, 3)
            except (RemotingError, OSError):
                continue
            if reply.code == ResponseCode.SUCCESS and reply.body:
                return [str(c) for c in body.loads(reply.body_bytes).get("consumerIdList", [])]
        return []

    async def allocation(self) -> dict[str, list[MessageQueue]] | None:
        """Each subscribed topic's queues for this member; None when the group is not yet known
        to the brokers (the caller keeps what it has, as Java does)."""
        mine: dict[str, list[MessageQueue]] = {}
        for topic in self.subscriptions:
            route = await self.routes.route(topic)
            if route is None:
                mine[topic] = []
                continue
            if self.message_model == BROADCASTING:
                mine[topic] = sorted(route.read_queues)
                continue
            members = await self.members(topic)
            if self.client_id not in members:
                return None
            mine[topic] = allocate_averagely(route.read_queues, members, self.client_id)
        return mine

    async def rebalance(
        self, apply: Callable[[set[MessageQueue]], Awaitable[None]], *, heartbeat: bool = False
    ) -> bool:
        """One rebalance from fresh routes, calling `apply(queues)` once the brokers list us.

        Heartbeats first when asked, when a broker serving a subscription has not taken our
        heartbeat (its route just appeared: a topic auto-created by the send before us, or
        %RETRY%group created by our first heartbeat), or when the brokers did not list us last
        time: asking a broker for the group's members before it heard of us gives nothing.
        True when settled: every subscription has a route and the group lists us.
        """
        self.changed.clear()  # a change from now on calls for another rebalance
        routes = [await self.routes.route(topic, refresh=True) for topic in self.subscriptions]
        if heartbeat or self._unlisted or not masters_of(routes) <= self._heard_by:
            await self.heartbeat()
        allocation = await self.allocation()
        self._unlisted = allocation is None
        if allocation is None:
            return False
        await apply({q for queues in allocation.values() for q in queues})
        return None not in routes

    async def maintain(
        self,
        apply: Callable[[set[MessageQueue]], Awaitable[None]],
        *,
        running: Callable[[], bool],
        rebalance_interval_s: float,
        heartbeat_interval_s: float,
        settled: bool,
    ) -> None:
        """Until `running()` turns false: rebalance every interval and whenever the group
        changes, calling `apply(queues)`; heartbeat every `heartbeat_interval_s`. While not
        `settled` (a route or our membership still missing) rebalance again soon, backing off
        from ROUTE_RETRY_S to the interval, so a route that appears late is used at once."""
        retry_s = ROUTE_RETRY_S

        async def apply_while_running(queues: set[MessageQueue]) -> None:
            if running():
                await apply(queues)

        while running():
            wait_s = rebalance_interval_s if settled else retry_s
            heartbeat_due_in = self._last_heartbeat + heartbeat_interval_s - time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(min(wait_s, heartbeat_due_in), 0)):
                    await self.changed.wait()
            if not running():
                return
            due = time.monotonic() - self._last_heartbeat >= heartbeat_interval_s
            try:
                settled = await self.rebalance(apply_while_running, heartbeat=due)
            except (ClientError, RemotingError, OSError) as exc:
                log.warning("client.rebalance_failed", group=self.group, error=str(exc))
                settled = False  # the cluster is unreachable for now: try again later
            retry_s = ROUTE_RETRY_S if settled else min(retry_s * 2, rebalance_interval_s)

    async def broker_of(self, queue: MessageQueue) -> str:
        addr = await self.routes.broker_addr(queue)
        if addr is None:
            raise ClientError(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"no route to {queue.broker_name} for topic {queue.topic} (yet)",
            )
        return addr

    async def reader_of(self, queue: MessageQueue, prefer: int = MASTER_ID) -> tuple[str, bool]:
        """Where to read `queue` (RouteCache.reader_addr), and whether that is its master."""
        found = await self.routes.reader_addr(queue, prefer)
        if found is None:
            raise ClientError(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"no route to {queue.broker_name} for topic {queue.topic} (yet)",
            )
        addr, broker_id = found
        return addr, broker_id == MASTER_ID

    async def unregister(self) -> None:
        header = UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=None, consumer_group=self.group
        )
        for addr in sorted(self._brokers):
            request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext())
            try:
                await self.remoting.invoke(addr, request, 3)
            except (RemotingError, OSError):
                continue

    async def close(self) -> None:
        await self.remoting.close()
