"""A consumer's place in its group: heartbeats to the brokers, the group's member list, and which
queues are this member's (RocketMQ's RebalanceImpl with AllocateMessageQueueAveragely).

Queues and member ids are both sorted before allocating, exactly as the Java client does, so our
consumers and stock ones can share a group without overlapping. A broker tells every member
with NOTIFY_CONSUMER_IDS_CHANGED when the group changes; `maintain` then rebalances at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from sidewinder.client.route_cache import ClientError, MessageQueue, RouteCache
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ConsumerGroupHeader, UnregisterClientRequestHeader
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.dispatch import ProcessorTable, RequestContext

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
log = structlog.get_logger(__name__)
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
        table = ProcessorTable()
        table.register(_NotifyProcessor(self.changed.set), RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
        self.remoting = RemotingClient(table)
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self._brokers: set[str] = set()

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
        """HEART_BEAT to every master serving a subscribed topic; unreachable ones are skipped."""
        addresses: set[str] = set()
        for topic in self.subscriptions:
            route = await self.routes.route(topic)  # my_queues refreshes it every rebalance
            if route is not None:
                addresses.update(a for name in route.brokers if (a := route.master(name)))
        self._brokers |= addresses
        payload = self.heartbeat_body()
        for addr in sorted(addresses):
            request = RemotingCommand.request(RequestCode.HEART_BEAT, None, payload)
            try:
                reply = await self.remoting.invoke(addr, request, 3)
            except (RemotingError, OSError) as exc:
                log.warning("client.heartbeat_failed", broker=addr, error=str(exc))
                continue
            if reply.code != ResponseCode.SUCCESS:
                log.warning("client.heartbeat_refused", broker=addr, code=reply.code)

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

    async def my_queues(self) -> set[MessageQueue] | None:
        """This member's queues of every subscribed topic, from fresh routes (None: not yet
        known to the brokers)."""
        for topic in self.subscriptions:
            await self.routes.route(topic, refresh=True)
        allocation = await self.allocation()
        if allocation is None:
            return None
        return {q for queues in allocation.values() for q in queues}

    async def maintain(
        self,
        apply: Callable[[set[MessageQueue]], Awaitable[None]],
        *,
        running: Callable[[], bool],
        rebalance_interval_s: float,
        heartbeat_interval_s: float,
    ) -> None:
        """Until `running()` turns false: rebalance every interval and whenever the group
        changes, calling `apply(queues)`; heartbeat every `heartbeat_interval_s`."""
        last_heartbeat = time.monotonic()
        while running():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), rebalance_interval_s)
            self.changed.clear()
            try:
                if time.monotonic() - last_heartbeat >= heartbeat_interval_s:
                    await self.heartbeat()
                    last_heartbeat = time.monotonic()
                mine = await self.my_queues()
                if mine is not None and running():
                    await apply(mine)
            except (ClientError, RemotingError, OSError) as exc:
                log.warning("client.rebalance_failed", group=self.group, error=str(exc))
                await asyncio.sleep(1)  # the cluster is unreachable for now: try again later

    async def broker_of(self, queue: MessageQueue) -> str:
        route = await self.routes.route(queue.topic)
        addr = route.master(queue.broker_name) if route else None
        if addr is None:
            raise ClientError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no broker {queue.broker_name}")
        return addr

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
