"""The python5 driver (the stock RocketMQ 5 gRPC client) and its install, with no server of ours:
the venv holds the pinned client, and a front that is down or silent fails the run at once,
with an event that says why, never a hang."""

from __future__ import annotations

import subprocess
from pathlib import Path

from interop import install
from interop.cache import PY5_CLIENT_PACKAGE, bench_cache
from interop.drivers import PYTHON5, driver_env, run_driver


def test_the_venv_has_the_pinned_client_and_the_step_is_fresh(tmp_path: Path) -> None:
    cache = bench_cache()
    assert install.install_py5(cache) == "up to date"
    version = subprocess.run(
        [
            str(cache.py5_python),
            "-c",
            "import importlib.metadata as m, rocketmq;"
            "print(m.version('rocketmq-python-client'), rocketmq.PushConsumer.__name__)",
        ],
        env=driver_env(PYTHON5, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert version == [PY5_CLIENT_PACKAGE.split("==")[1], "PushConsumer"]


def test_route_where_nothing_listens_fails_at_once(refused: str) -> None:
    run = run_driver(PYTHON5, "route", endpoints=refused, topic="T", timeout_s=30)
    assert run.returncode == 1, run.describe()
    assert [e["event"] for e in run.events] == ["ready", "error"], run.describe()
    error = run.errors()[0]
    assert error["error"] == "route" and error["grpcStatus"] == "UNAVAILABLE", error
    assert run.seconds < 15 and not run.junk


def test_a_front_that_never_answers_times_the_call_out(silent: str) -> None:
    # The client's own deadline (--request-timeout) ends the call; the driver's --timeout is
    # the backstop and is not reached.
    run = run_driver(PYTHON5, "route", endpoints=silent, topic="T", request_timeout=1, timeout_s=30)
    assert run.returncode == 1, run.describe()
    assert run.errors()[0]["grpcStatus"] == "DEADLINE_EXCEEDED", run.describe()
    assert run.seconds < 15


def test_a_send_where_nothing_listens_is_an_error_event(refused: str) -> None:
    run = run_driver(PYTHON5, "produce", endpoints=refused, topic="T", count=2, timeout_s=30)
    assert run.returncode == 1 and not run.sent() and not run.of("done"), run.describe()
    assert run.errors()[0]["error"] == "send" and run.errors()[0]["index"] == 0
