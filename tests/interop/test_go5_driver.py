"""The go5 driver (the stock RocketMQ 5 gRPC client for Go) and its install, with no server of
ours: the binary holds the pinned client, and a front that is down or silent fails the run within
the client's dial timeout (5 s), with an event that says why, never a hang."""

from __future__ import annotations

import subprocess

from interop import install
from interop.cache import bench_cache
from interop.drivers import GO5, run_driver

GO5_MODULE = "github.com/apache/rocketmq-clients/golang/v5"


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
