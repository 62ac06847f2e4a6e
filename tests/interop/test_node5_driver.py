"""The node5 driver (npm rocketmq-client-nodejs 1.0.8, the stock RocketMQ 5 gRPC client for
Node) and its install, with no server of ours: the cache holds the pinned client, and a front
that is down or silent fails the run within the client's own timeouts, with an event that says
why, never a hang."""

from __future__ import annotations

import json

from interop import install
from interop.cache import bench_cache
from interop.drivers import NODE5, run_driver


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
