"""The java5grpc driver (the stock RocketMQ 5 Java gRPC client) and its install, with no server of
ours: the pinned jar and the driver built against it, and a front that is down or silent fails
the run at once, with an event that says why, never a hang."""

from __future__ import annotations

from interop import install
from interop.cache import JAVA5GRPC_CLIENT_ARTIFACT, bench_cache
from interop.drivers import JAVA5GRPC, run_driver


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
