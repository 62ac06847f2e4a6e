"""The java5grpc driver (the stock RocketMQ 5 Java gRPC client) and its install, with no server of
ours: the pinned jar and the driver built against it, and a front that is down or silent fails
the run at once, with an event that says why, never a hang."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop import install
from interop.cache import JAVA5GRPC_CLIENT_ARTIFACT, BenchCache, bench_cache
from interop.drivers import JAVA5GRPC, DriverError, run_driver, start_driver


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


def test_the_pinned_jar_is_installed_and_the_step_is_fresh() -> None:
    cache = bench_cache()
    assert install.install_java5grpc(cache) == "up to date"
    _, artifact, version = JAVA5GRPC_CLIENT_ARTIFACT.split(":")
    assert [p.name for p in cache.java5grpc_lib.iterdir()] == [f"{artifact}-{version}.jar"]
    assert (cache.java5grpc_classes / "GrpcDriver.class").exists()


def test_route_where_nothing_listens_fails_at_once(refused: str) -> None:
    run = run_driver(JAVA5GRPC, "route", endpoints=refused, topic="T", timeout_s=30)
    assert run.returncode == 1, run.describe()
    assert [e["event"] for e in run.events] == ["ready", "error"], run.describe()
    error = run.errors()[0]
    assert error["error"] == "route" and error["grpcStatus"] == "UNAVAILABLE", error
    assert run.seconds < 15 and not run.junk


def test_a_front_that_never_answers_times_the_call_out(silent: str) -> None:
    # The client's own deadline (--request-timeout) ends the call; the driver's --timeout is
    # the backstop and is not reached.
    run = run_driver(
        JAVA5GRPC, "route", endpoints=silent, topic="T", request_timeout=1, timeout_s=30
    )
    assert run.returncode == 1, run.describe()
    assert run.errors()[0]["grpcStatus"] == "DEADLINE_EXCEEDED", run.describe()
    assert run.seconds < 15


def test_a_producer_where_nothing_listens_fails_to_start(refused: str) -> None:
    # The Java client's start waits for its topic's route: no `ready`, no send.
    run = run_driver(JAVA5GRPC, "produce", endpoints=refused, topic="T", count=2, timeout_s=30)
    assert run.returncode == 1 and not run.sent() and not run.of("ready"), run.describe()
    error = run.errors()[0]
    assert error["error"] == "client" and error["grpcStatus"] == "UNAVAILABLE", error


def test_the_drivers_own_timeout_ends_a_run(silent: str) -> None:
    run = run_driver(JAVA5GRPC, "route", endpoints=silent, topic="T", timeout_s=1)
    assert run.returncode == 3, run.describe()
    assert run.errors()[-1]["error"] == "timeout"


@pytest.mark.parametrize(
    ("action", "options", "says"),
    [
        ("simple-consume", {"expect": 1}, "needs --group"),
        ("push-consume", {"group": "G"}, "needs --expect"),
        ("produce", {"count": 1, "prop": ["a="]}, "--prop needs K=V"),
        ("transact", {"count": 1, "answer": "unknow"}, "transact needs --answer"),
        ("produce", {"count": 1, "mode": "oneway"}, "sync, async"),
    ],
)
def test_usage_errors_exit_2(
    refused: str, action: str, options: dict[str, object], says: str
) -> None:
    run = run_driver(JAVA5GRPC, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] in ("usage", "unsupported"), run.describe()
    assert says in run.errors()[0]["message"]


def test_it_takes_endpoints_not_a_name_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        start_driver(JAVA5GRPC, "route", namesrv="127.0.0.1:9876", topic="T")
    with pytest.raises(DriverError, match=r"interop.install java5grpc.*Maven Central"):
        start_driver(
            JAVA5GRPC,
            "route",
            endpoints="127.0.0.1:9",
            topic="T",
            cache=BenchCache(tmp_path / "empty"),
        )
