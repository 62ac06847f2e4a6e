"""The gRPC clients a front knows, and how the brokers hear of them.

A client is known from its first settings (Telemetry) until NotifyClientTermination or
CLIENT_EXPIRY_S without a heartbeat. The front tells the brokers of its topics about each one
with a remoting HEART_BEAT in the client's name (its id, language and version, a producer of
group = each topic it publishes, as RocketMQ's proxy names gRPC producers, or a consumer of its
group), so `mqadmin consumerConnection` / `producerConnection` list gRPC clients too and a
broker's transaction check finds a producer; it unregisters them when they end.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from sidewinder.client.route_cache import RouteCache
from sidewinder.protocol.codes import LanguageCode, RequestCode
from sidewinder.protocol.command import CURRENT_VERSION, RemotingCommand, next_opaque
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.auth import CALL_ACCOUNT, Account
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError

log = structlog.get_logger(__name__)

# A broker drops a client it has not heard from in 120 s (channelExpiredTimeout), and RocketMQ's
# closes that client's connection as it does: for the front, the one connection every gRPC
# client's calls share. A silent client is unregistered well before that (the stock clients
# heartbeat every 10 s; silent clients are looked for every 10 s).
BROKER_CHANNEL_EXPIRY_S = 120.0
CLIENT_EXPIRY_S = 60.0
HEARTBEAT_TIMEOUT_S = 3.0
# x-mq-language -> the remoting language a broker shows for the client.
_LANGUAGES = {
    "JAVA": LanguageCode.JAVA,
    "CPP": LanguageCode.CPP,
    "DOTNET": LanguageCode.DOTNET,
    "DOT_NET": LanguageCode.DOTNET,
    "GOLANG": LanguageCode.GO,
    "GO": LanguageCode.GO,
    "RUST": LanguageCode.RUST,
    "PYTHON": LanguageCode.PYTHON,
    "PHP": LanguageCode.PHP,
    "HTTP": LanguageCode.HTTP,  # what the Node client says it is
}


@dataclass
class GrpcClient:
    client_id: str
    language: str
    version: str
    settings: Any
    # Its open Telemetry streams, the newest last: a client may hold one per endpoint it
    # knows, and renews a broken one after a pause.
    streams: list[asyncio.Queue[Any]] = field(default_factory=list)
    stream_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)
    account: Account | None = None  # what its calls are signed with (ACL)
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def telemetry(self) -> asyncio.Queue[Any] | None:
        """Where commands to push go: its newest open Telemetry stream, if any."""
        return self.streams[-1] if self.streams else None

    def attach(self, outbox: asyncio.Queue[Any]) -> None:
        if outbox not in self.streams:
            self.streams.append(outbox)
        waiters, self.stream_waiters = self.stream_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def detach(self, outbox: asyncio.Queue[Any]) -> None:
        if outbox in self.streams:
            self.streams.remove(outbox)

    def stream_attached(self) -> asyncio.Future[None]:
        """Done once the client has an open Telemetry stream: at once if it has one now."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.streams:
            waiter.set_result(None)
        else:
            self.stream_waiters = [w for w in self.stream_waiters if not w.done()]
            self.stream_waiters.append(waiter)
        return waiter

    @property
    def is_producer(self) -> bool:
        return bool(self.settings.client_type == v2.ClientType.PRODUCER)

    @property
    def topics(self) -> list[str]:
        if self.is_producer:
            return [t.name for t in self.settings.publishing.topics]
        return [s.topic.name for s in self.settings.subscription.subscriptions]

    @property
    def group(self) -> str:
        return "" if self.is_producer else str(self.settings.subscription.group.name)

    @property
    def consume_type(self) -> str:
        """What RocketMQ's proxy registers a gRPC consumer as: a simple consumer receives when
        it asks, a push consumer is served."""
        if self.settings.client_type == v2.ClientType.PUSH_CONSUMER:
            return "CONSUME_PASSIVELY"
        return "CONSUME_ACTIVELY"

    def subscription_data(self) -> list[dict[str, Any]]:
        """The consumer's subscriptions as SubscriptionData (heartbeats, running info)."""
        subscriptions = []
        for entry in self.settings.subscription.subscriptions:
            sql = entry.expression.type == v2.FilterType.SQL
            text = entry.expression.expression or "*"
            subscriptions.append(
                {
                    "topic": entry.topic.name,
                    "subString": text,
                    "expressionType": "SQL92" if sql else "TAG",
                    "tagsSet": [] if sql or text == "*" else text.split("||"),
                    "codeSet": [],
                    "subVersion": self.started_ms,
                    "classFilterMode": False,
                }
            )
        return subscriptions

    def heartbeat_body(self) -> bytes:
        """HeartbeatData as a 4.x client of the same role would send it."""
        if self.is_producer:
            producers = [{"groupName": topic} for topic in self.topics]
            consumers: list[dict[str, Any]] = []
        else:
            producers = []
            consumers = [
                {
                    "groupName": self.group,
                    "consumeType": self.consume_type,
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": self.subscription_data(),
                }
            ]
        data = {
            "clientID": self.client_id,
            "producerDataSet": producers,
            "consumerDataSet": consumers,
        }
        return json.dumps(data).encode()

    def running_info(self) -> dict[str, Any]:
        """ConsumerRunningInfo of what the front knows of the consumer: its settings and
        subscriptions (its queues and rates are the client's own, never sent to a server)."""
        subscription = self.settings.subscription
        properties = {
            "consumerGroup": self.group,
            "messageModel": "CLUSTERING",
            "clientType": v2.ClientType.Name(self.settings.client_type),
            "language": self.language,
            "receiveBatchSize": str(subscription.receive_batch_size),
            "longPollingTimeoutMillis": str(subscription.long_polling_timeout.ToMilliseconds()),
            "PROP_CONSUME_TYPE": self.consume_type,
            "PROP_CONSUMEORDERLY": "true" if subscription.fifo else "false",
            "PROP_CLIENT_VERSION": "V" + self.version.replace(".", "_"),
            "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
        }
        return {
            "mqTable": {},
            "properties": properties,
            "statusTable": {},
            "subscriptionSet": self.subscription_data(),
        }

    def remoting_request(self, code: int, ext: dict[str, str] | None, body: bytes | None) -> Any:
        """A request in this client's name: its language and version, as a broker lists it."""
        return RemotingCommand(
            code,
            _LANGUAGES.get(self.language.upper(), LanguageCode.OTHER),
            _version_number(self.version),
            next_opaque(),
            0,
            None,
            ext,
            body,
        )


def _version_number(version: str) -> int:
    """RocketMQ's MQVersion ordinal of a client version ("5.0.8" -> V5_0_8): from
    V4_0_0_SNAPSHOT on, a SNAPSHOT and a release of each x.y.z (V4_9_8 is our CURRENT_VERSION)."""
    try:
        major, minor, patch = (int(p) for p in version.split("-")[0].split(".")[:3])
    except ValueError:
        return CURRENT_VERSION
    step = (major - 4) * 100 + minor * 10 + patch
    if not 0 <= step < 600 or minor > 9 or patch > 9:
        return CURRENT_VERSION
    return CURRENT_VERSION - 2 * 98 - 1 + 2 * step + 1


class ClientRegistry:
    """Known gRPC clients, and their HEART_BEAT / UNREGISTER_CLIENT to the brokers."""

    def __init__(self, remoting: RemotingClient, routes: RouteCache) -> None:
        self.remoting = remoting
        self.routes = routes
        self.clients: dict[str, GrpcClient] = {}

    def settled(self, client_id: str, language: str, version: str, settings: Any) -> GrpcClient:
        known = self.clients.get(client_id)
        if known is None:
            known = GrpcClient(client_id, language, version, settings)
            self.clients[client_id] = known
        else:
            known.settings = settings
            known.last_seen = time.monotonic()
        known.account = CALL_ACCOUNT.get()
        return known

    def seen(self, client_id: str) -> GrpcClient | None:
        known = self.clients.get(client_id)
        if known is not None:
            known.last_seen = time.monotonic()
        return known

    async def heartbeat(self, client: GrpcClient) -> None:
        """HEART_BEAT in the client's name to every master of its topics."""
        body = client.heartbeat_body()
        for addr in await self._masters(client):
            request = client.remoting_request(RequestCode.HEART_BEAT, None, body)
            try:
                await self.remoting.invoke(addr, request, HEARTBEAT_TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                log.warning("proxy.heartbeat_failed", broker=addr, error=str(exc))

    async def terminated(self, client_id: str) -> None:
        client = self.clients.pop(client_id, None)
        if client is not None:
            await self.unregister(client)

    async def expire(self, now: float) -> list[GrpcClient]:
        """Forget, and unregister from the brokers, clients silent for CLIENT_EXPIRY_S: they
        share the front's connections, so a broker cannot see them go. The ones gone."""
        silent = [c for c in self.clients.values() if now - c.last_seen > CLIENT_EXPIRY_S]
        gone = []
        for client in silent:
            # Checked again: an unregister awaited above may have let it speak or end.
            if client.last_seen >= now - CLIENT_EXPIRY_S:
                continue
            if self.clients.pop(client.client_id, None) is None:
                continue
            gone.append(client)
            log.info("proxy.client_expired", client=client.client_id)
            await self.unregister(client)
        return gone

    async def unregister(self, client: GrpcClient) -> None:
        """UNREGISTER_CLIENT in the client's name, for each of its groups, to its brokers."""
        client_id = client.client_id
        signed_as = CALL_ACCOUNT.set(client.account)  # a scan unregisters outside its calls
        try:
            await self._unregister_from(client, client_id)
        finally:
            CALL_ACCOUNT.reset(signed_as)

    async def _unregister_from(self, client: GrpcClient, client_id: str) -> None:
        for addr in await self._masters(client):
            for group in client.topics if client.is_producer else [client.group]:
                ext = {"clientID": client_id}
                ext["producerGroup" if client.is_producer else "consumerGroup"] = group
                request = client.remoting_request(RequestCode.UNREGISTER_CLIENT, ext, None)
                try:
                    await self.remoting.invoke(addr, request, HEARTBEAT_TIMEOUT_S)
                except (RemotingError, OSError) as exc:
                    log.warning("proxy.unregister_failed", broker=addr, error=str(exc))

    def producer_of(self, topic: str) -> GrpcClient | None:
        """A live producer of `topic` with an open Telemetry stream (for a transaction check)."""
        for client in self.clients.values():
            if client.is_producer and client.telemetry is not None and topic in client.topics:
                return client
        return None

    async def _masters(self, client: GrpcClient) -> list[str]:
        masters: set[str] = set()
        for topic in client.topics:
            try:
                route = await self.routes.route(topic)
            except Exception as exc:  # no name server: nothing to tell
                log.warning("proxy.route_failed", topic=topic, error=str(exc))
                continue
            if route is None:
                continue
            masters |= {a for name in route.brokers if (a := route.master(name))}
        return sorted(masters)
