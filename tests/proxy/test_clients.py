"""gRPC clients as the brokers see them: a heartbeat in the client's name lists it among its
group's connections; a client that goes silent is unregistered by the front."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.target import ClusterTarget, create_target
from sidewinder.client.route_cache import RouteCache
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.clients import BROKER_CHANNEL_EXPIRY_S, CLIENT_EXPIRY_S, ClientRegistry
from sidewinder.proxy.grpc_server import CLIENT_SCAN_S
from sidewinder.remoting.client import RemotingClient, SyncRemotingClient
from tests.interop.pop_requests import create_group_request, create_topic_request


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTarget]:
    workdir: Path = tmp_path_factory.mktemp("proxy-clients")
    cluster = create_target("sidewinder", workdir).start()
    client = SyncRemotingClient()
    try:
        for request in (create_topic_request("ClientsTopic", 1), create_group_request("CG")):
            assert client.invoke(cluster.broker_addr, request, 10).code == ResponseCode.SUCCESS
        yield cluster
    finally:
        client.close()
        cluster.stop()


def consumer_settings() -> object:
    settings = v2.Settings(client_type=v2.ClientType.SIMPLE_CONSUMER)
    settings.subscription.group.name = "CG"
    entry = settings.subscription.subscriptions.add()
    entry.topic.name = "ClientsTopic"
    entry.expression.type = v2.FilterType.TAG
    entry.expression.expression = "*"
    return settings


async def listed(remoting: RemotingClient, broker: str) -> list[dict[str, object]]:
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"}
    )
    reply = await remoting.invoke(broker, request, 5)
    if reply.code != ResponseCode.SUCCESS:
        return []
    return list(loads(reply.body_bytes)["connectionSet"])


def test_a_silent_client_is_unregistered(target: ClusterTarget) -> None:
    async def scenario() -> None:
        remoting = RemotingClient()
        registry = ClientRegistry(remoting, RouteCache(remoting, [target.namesrv_addr]))
        try:
            client = registry.settled("grpc-client-1", "GOLANG", "5.1.4", consumer_settings())
            await registry.heartbeat(client)
            (connection,) = await listed(remoting, target.broker_addr)
            assert connection["clientId"] == "grpc-client-1"
            assert connection["language"] == "GO"
            await registry.expire(time.monotonic() + CLIENT_EXPIRY_S / 2)
            assert "grpc-client-1" in registry.clients  # not silent long enough
            await registry.expire(time.monotonic() + CLIENT_EXPIRY_S + 1)
            assert registry.clients == {}
            assert await listed(remoting, target.broker_addr) == []
        finally:
            await remoting.close()

    asyncio.run(scenario())


def test_a_silent_client_goes_before_a_broker_would_drop_it() -> None:
    """A RocketMQ broker that drops a silent client closes its connection, the one the front's
    calls for every gRPC client share (seen: every pop in flight failed at once): the front
    unregisters a silent client first, whenever its scan runs."""
    assert CLIENT_EXPIRY_S + CLIENT_SCAN_S < BROKER_CHANNEL_EXPIRY_S / 1.5
