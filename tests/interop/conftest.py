"""Fixtures of the interop scenarios (the targets themselves are in tests/conftest.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from interop.sidewinder import MqProxy
from interop.target import ClusterTarget
from sidewinder.remoting.client import SyncRemotingClient


@pytest.fixture(scope="module")
def client() -> Iterator[SyncRemotingClient]:
    """Our blocking remoting client, for raw requests to any target's name server or broker."""
    remoting = SyncRemotingClient()
    yield remoting
    remoting.close()


@pytest.fixture
def refused() -> Iterator[str]:
    """A loopback address that refuses connections: the port is bound but never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback address that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


# The gRPC scenarios run through `mqproxy` (cluster mode) in the default suite, and through the
# broker's own front (local mode, the same modules) with -m slow: twice the time for the same
# front code. RocketMQ 5.3.2's broker has no local front here (its proxy does not resolve).
FRONT_MODES = ["mqproxy", pytest.param("local", marks=pytest.mark.slow)]


@pytest.fixture(scope="session", params=FRONT_MODES)
def front_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def front(
    front_mode: str, pop_target: ClusterTarget, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The gRPC endpoints in front of the shared 5.x target: an mqproxy's, or in local mode
    the broker's own (grpcServerPort)."""
    if front_mode == "local":
        yield f"127.0.0.1:{pop_target.broker_conf['grpcServerPort']}"
        return
    proxy = MqProxy(tmp_path_factory.mktemp("mqproxy"), pop_target.namesrv_addr).start()
    try:
        yield proxy.endpoints
    finally:
        proxy.stop()


# How a stock 5.x client gets on with the front is the front's affair, the same whichever broker
# is behind it: every client runs its scenarios through the front in front of Sidewinder's
# broker, and the reference clients (Python's and Java's) in front of RocketMQ 5.3.2's as well,
# the oracle of what a broker does. The other clients' rocketmq5 runs are deselected.
ORACLE_CLIENTS = frozenset({"python5", "java5grpc"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        client = params.get("grpc_client") or getattr(
            getattr(item, "module", None), "GRPC_CLIENT", None
        )
        on_rocketmq5 = params.get("pop_target_kind") == "rocketmq5"
        other_client = client is not None and client not in ORACLE_CLIENTS
        if on_rocketmq5 and (params.get("front_mode") == "local" or other_client):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
