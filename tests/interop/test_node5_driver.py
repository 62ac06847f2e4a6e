"""The node5 driver (npm rocketmq-client-nodejs 1.0.8, the stock RocketMQ 5 gRPC client for
Node) and its install, with no server of ours: the cache holds the pinned client, and a front
that is down or silent fails the run within the client's own timeouts, with an event that says
why, never a hang."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop import install
from interop.cache import BenchCache, bench_cache
from interop.drivers import NODE5, DriverError, run_driver, start_driver


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


def test_the_cache_has_the_pinned_client_and_the_step_is_fresh() -> None:
    cache = bench_cache()
    assert install.install_node5(cache) == "up to date"
    package = cache.node5_modules / "rocketmq-client-nodejs" / "package.json"
    assert json.loads(package.read_text())["version"] == "1.0.8"


def test_route_where_nothing_listens_fails_at_once(refused: str) -> None:
    # A producer with no topic starts without a call; the QueryRoute then fails.
    run = run_driver(NODE5, "route", endpoints=refused, topic="T", timeout_s=30)
    assert run.returncode == 1 and not run.junk, run.describe()
    assert [e["event"] for e in run.events] == ["ready", "error"], run.describe()
    error = run.errors()[0]
    assert error["error"] == "route" and error["grpcStatus"] == "UNAVAILABLE", error
    assert run.seconds < 15


def test_a_front_that_never_answers_times_the_call_out(silent: str) -> None:
    # The client's own deadline (--request-timeout) ends the call; the driver's --timeout is
    # the backstop and is not reached.
    run = run_driver(NODE5, "route", endpoints=silent, topic="T", request_timeout=1, timeout_s=30)
    assert run.returncode == 1, run.describe()
    assert run.errors()[0]["grpcStatus"] == "DEADLINE_EXCEEDED", run.describe()
    assert run.seconds < 15


def test_a_producer_where_nothing_listens_fails_before_any_send(refused: str) -> None:
    # The producer's start queries its topic's route, three times (1 s, then 2 s apart).
    run = run_driver(NODE5, "produce", endpoints=refused, topic="T", count=2, timeout_s=30)
    assert run.returncode == 1 and not run.sent() and not run.of("done"), run.describe()
    (error,) = run.errors()
    assert error["error"] == "client" and error["grpcStatus"] == "UNAVAILABLE", error
    assert run.seconds < 15


def test_the_drivers_own_timeout_ends_a_run(silent: str) -> None:
    run = run_driver(NODE5, "route", endpoints=silent, topic="T", request_timeout=30, timeout_s=1)
    assert run.returncode == 3, run.describe()
    assert run.errors()[-1]["error"] == "timeout"


@pytest.mark.parametrize(
    ("action", "options", "says"),
    [
        ("simple-consume", {"expect": 1}, "needs --group"),
        ("push-consume", {"group": "G"}, "needs --expect"),
        ("produce", {"count": 1, "prop": ["a="]}, "--prop needs K=V"),
        ("transact", {"count": 1, "answer": "unknow"}, "transact needs --answer"),
        ("simple-consume", {"group": "G", "expect": 1, "no_ack": "maybe"}, "true or false"),
        ("produce", {"count": 1, "colour": "red"}, "unknown option --colour"),
    ],
)
def test_usage_errors_exit_2(
    refused: str, action: str, options: dict[str, object], says: str
) -> None:
    run = run_driver(NODE5, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] == "usage" and says in run.errors()[0]["message"]


@pytest.mark.parametrize("mode", ["oneway", "batch"])
def test_modes_the_5x_client_lacks_are_unsupported(refused: str, mode: str) -> None:
    run = run_driver(NODE5, "produce", endpoints=refused, topic="T", count=1, mode=mode)
    assert run.returncode == 2 and run.errors()[0]["error"] == "unsupported", run.describe()


def test_it_takes_endpoints_not_a_name_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        start_driver(NODE5, "route", namesrv="127.0.0.1:9876", topic="T")
    with pytest.raises(DriverError, match=r"interop.install node5.*npm registry"):
        start_driver(
            NODE5, "route", endpoints="127.0.0.1:9", topic="T", cache=BenchCache(tmp_path / "empty")
        )
