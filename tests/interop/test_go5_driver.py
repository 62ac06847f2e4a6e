"""The go5 driver (the stock RocketMQ 5 gRPC client for Go) and its install, with no server of
ours: the binary holds the pinned client, and a front that is down or silent fails the run within
the client's dial timeout (5 s), with an event that says why, never a hang."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop import install
from interop.cache import BenchCache, bench_cache
from interop.drivers import GO5, DriverError, run_driver, start_driver

GO5_MODULE = "github.com/apache/rocketmq-clients/golang/v5"


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


def test_the_binary_has_the_pinned_client_and_the_step_is_fresh() -> None:
    cache = bench_cache()
    assert install.install_go5(cache) == "up to date"
    modules = subprocess.run(
        ["go", "version", "-m", str(cache.go5_driver)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    assert [line.split()[1:3] for line in modules if GO5_MODULE in line] == [[GO5_MODULE, "v5.1.4"]]


def test_a_front_that_never_answers_fails_the_start(silent: str) -> None:
    # The client dials with a 5 s timeout before its first call (the route); the driver's
    # --timeout is the backstop and is not reached.
    run = run_driver(GO5, "route", endpoints=silent, topic="T", timeout_s=30)
    assert run.returncode == 1 and not run.junk, run.describe()
    (error,) = run.errors()
    assert error["error"] == "route" and "create grpc conn failed" in error["message"], error
    assert run.seconds < 15


def test_a_producer_where_nothing_listens_fails_before_any_send(refused: str) -> None:
    run = run_driver(GO5, "produce", endpoints=refused, topic="T", count=2, timeout_s=30)
    assert run.returncode == 1 and not run.sent() and not run.of("done"), run.describe()
    # The producer's start queries the route first (its dial retries until its 5 s timeout).
    (error,) = run.errors()
    assert error["error"] == "client" and "create grpc conn failed" in error["message"], error
    assert run.seconds < 15


def test_the_drivers_own_timeout_ends_a_run(silent: str) -> None:
    run = run_driver(GO5, "route", endpoints=silent, topic="T", timeout_s=1)
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
    run = run_driver(GO5, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] == "usage" and says in run.errors()[0]["message"]


def test_modes_the_5x_client_lacks_are_unsupported(refused: str) -> None:
    run = run_driver(
        GO5, "produce", endpoints=refused, topic="T", count=1, mode="batch", timeout_s=30
    )
    assert run.returncode == 2 and run.errors()[0]["error"] == "unsupported", run.describe()


def test_it_takes_endpoints_not_a_name_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        start_driver(GO5, "route", namesrv="127.0.0.1:9876", topic="T")
    with pytest.raises(DriverError, match=r"interop.install go5.*Go module proxy"):
        start_driver(
            GO5, "route", endpoints="127.0.0.1:9", topic="T", cache=BenchCache(tmp_path / "empty")
        )
