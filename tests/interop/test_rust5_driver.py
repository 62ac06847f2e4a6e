"""The rust5 driver (the stock RocketMQ 5 gRPC client for Rust, the crate rocketmq 5.0.0) and its
install, with no server of ours: the binary holds the pinned client, a front that is down or
silent fails the run with an event that says why, never a hang."""

from __future__ import annotations

from pathlib import Path

from interop import install
from interop.cache import bench_cache
from interop.drivers import RUST5, run_driver


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
