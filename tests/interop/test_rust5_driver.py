"""The rust5 driver (the stock RocketMQ 5 gRPC client for Rust, the crate rocketmq 5.0.0) and its
install, with no server of ours: the binary holds the pinned client, a front that is down or
silent fails the run with an event that says why, never a hang, and what the client's API lacks
is `unsupported`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop import install
from interop.cache import BenchCache, bench_cache
from interop.drivers import RUST5, DriverError, run_driver, start_driver


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
    assert install.install_rust5(cache) == "up to date"
    # The client's source paths (its panic locations) name the crate and its version.
    assert b"rocketmq-5.0.0/src/" in cache.rust5_driver.read_bytes()
    lock = (Path(install.DRIVERS_DIR) / "rust5" / "Cargo.lock").read_text()
    assert 'name = "rocketmq"\nversion = "5.0.0"' in lock


def test_a_producer_where_nothing_listens_fails_at_its_start(refused: str) -> None:
    run = run_driver(RUST5, "produce", endpoints=refused, topic="T", count=2, timeout_s=30)
    assert run.returncode == 1 and not run.sent() and not run.of("done"), run.describe()
    (error,) = run.errors()
    assert error["error"] == "client" and "failed to connect" in error["message"], error
    assert run.seconds < 15


def test_a_front_that_never_answers_holds_the_start_until_the_drivers_timeout(
    silent: str,
) -> None:
    # The client's start opens Telemetry, a call with no deadline (the crate sets none on a
    # stream), so a silent front holds it: only the driver's own --timeout ends the run.
    run = run_driver(RUST5, "route", endpoints=silent, topic="T", request_timeout=1, timeout_s=2)
    assert run.returncode == 3 and not run.junk, run.describe()
    assert run.errors()[-1]["error"] == "timeout"
    assert run.seconds < 10


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
    run = run_driver(RUST5, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] == "usage" and says in run.errors()[0]["message"]


@pytest.mark.parametrize(
    ("action", "options", "says"),
    [
        ("produce", {"count": 1, "mode": "batch"}, "--mode batch"),
        ("produce", {"count": 1, "namespace": "NS"}, "--namespace"),
        ("push-consume", {"group": "G", "expect": 1}, "no PushConsumer"),
    ],
)
def test_what_the_client_lacks_is_unsupported(
    refused: str, action: str, options: dict[str, object], says: str
) -> None:
    run = run_driver(RUST5, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    (error,) = run.errors()
    assert error["error"] == "unsupported" and says in error["message"], error


def test_it_takes_endpoints_not_a_name_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        start_driver(RUST5, "route", namesrv="127.0.0.1:9876", topic="T")
    with pytest.raises(DriverError, match=r"interop.install rust5.*Rust crate registry"):
        start_driver(
            RUST5, "route", endpoints="127.0.0.1:9", topic="T", cache=BenchCache(tmp_path / "empty")
        )
