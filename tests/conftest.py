"""Shared fixtures: running cluster targets of each kind (see interop/target.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from interop.fixtures import FIXTURE_NAMES, ensure_fixture
from interop.ports import lease_port_block
from interop.target import DEFAULT_KINDS, POP_KINDS, ClusterTarget, create_target
from tests import hot_path as _hot_path


@pytest.fixture(params=_hot_path.IMPLEMENTATIONS)
def hot_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test runs on the Rust hot path and again on its Python reference (tests/hot_path.py)."""
    with _hot_path.using(request.param):
        yield str(request.param)


# No per-example deadline: on a loaded two-core machine (JVMs beside four workers) an example
# can take seconds, and a timing is not what these properties are about.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# The JVMs the suite starts (RocketMQ's daemons, mqadmin) start cheaply rather than run fast
# (interop/jvm.py): most of them live for seconds. SIDEWINDER_JVM_PROFILE=server overrides.
os.environ.setdefault("SIDEWINDER_JVM_PROFILE", "quick")


def _kinds(env: str, default: tuple[str, ...]) -> list[str]:
    return sorted(k for k in os.environ.get(env, ",".join(default)).split(",") if k)


# SIDEWINDER_TARGETS=rocketmq (or sidewinder) runs the interop scenarios against one kind only;
# SIDEWINDER_POP_TARGETS=rocketmq5 (or sidewinder) does the same for the 5.x (POP) scenarios.
_KINDS = _kinds("SIDEWINDER_TARGETS", DEFAULT_KINDS)
_POP_KINDS = _kinds("SIDEWINDER_POP_TARGETS", POP_KINDS)


@pytest.fixture(scope="session", params=_KINDS)
def target_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _shared_cluster(
    kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    discard: bool = False,
    broker_conf: dict[str, str] | None = None,
) -> Iterator[ClusterTarget]:
    cluster = create_target(kind, tmp_path_factory.mktemp(f"{kind}-shared"), broker_conf)
    cluster.start()
    try:
        yield cluster
    finally:
        if discard:
            cluster.kill()
        else:
            cluster.stop()


@pytest.fixture(scope="session")
def target(target_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterTarget]:
    """One running cluster of each kind, shared by the session's scenarios. Killed at the end,
    not stopped: nothing reads its store afterwards, and a RocketMQ 4.9 broker takes 4-7 s to
    stop gracefully (the scenarios of a graceful stop have clusters of their own)."""
    yield from _shared_cluster(target_kind, tmp_path_factory, discard=True)


# RocketMQ 5.3.2 refuses RECALL_MESSAGE unless told otherwise; so does ours.
# The shared 5.x targets live the whole session. RocketMQ 5.3.2's timer forces its whole wheel
# (16 MiB for 3 days of slots) to disk every timerFlushIntervalMs, about 0.2-0.4 CPU-s a time:
# 20 % of a core per idle broker at the default 1 s, 4 % at 10 s, under 1 % at 60 s (measured
# per thread over 30 s idle). Nothing kills these brokers, so nothing reads what a flush keeps.
POP_TARGET_CONF = {"recallMessageEnable": "true", "timerFlushIntervalMs": "60000"}


@pytest.fixture(scope="session", params=_POP_KINDS)
def pop_target_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pop_target(
    pop_target_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterTarget]:
    """One running cluster of each 5.x kind (the RocketMQ 5.3.2 oracle and Sidewinder), shared
    by the session's scenarios of what 5.x brokers add (POP). Killed at the end, not stopped:
    nothing reads its store afterwards, and a 5.3.2 broker takes 15-30 s to stop gracefully."""
    conf = dict(POP_TARGET_CONF)
    if pop_target_kind == "sidewinder":
        # Its own gRPC front as well (local mode): the `front` fixture's "local" mode.
        conf["grpcServerPort"] = str(lease_port_block())
    yield from _shared_cluster(pop_target_kind, tmp_path_factory, discard=True, broker_conf=conf)


@pytest.fixture
def make_target(target_kind: str, tmp_path: Path) -> Iterator[Callable[..., ClusterTarget]]:
    """A factory of fresh clusters (own store, own config) for crash and config scenarios.
    Killed after the test (a scenario that stops one gracefully does so itself)."""
    started: list[ClusterTarget] = []

    def make(**broker_conf: Any) -> ClusterTarget:
        cluster = create_target(target_kind, tmp_path / f"cluster{len(started)}", broker_conf)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.kill()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist (scripts/test.sh runs it with --dist loadgroup), every 5.x scenario goes to
    one worker, which starts the one RocketMQ 5.3.2 broker of the session, as every Spark test
    goes to one worker and its one Spark JVM (tests/spark mark theirs).

    Then the order: those groups first, as each is a long single unit of work that should not
    start last; tests that read RocketMQ's reference fixtures last, as on a fresh clone the
    fixtures generate in the background from the start of the session
    (pytest_collection_finish) and a worker that reached one of them first would sit idle."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        # A module may name a group of its own (the gRPC clients' scenarios do): that worker
        # starts a 5.3.2 broker of its own, and the two groups run side by side.
        if "pop_target" in fixtures and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name="rocketmq5"))

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("reference_fixtures") is not None:
            return 2
        return 0 if item.get_closest_marker("xdist_group") is not None else 1

    items.sort(key=rank)


_fixture_prefetch: threading.Thread | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Generating RocketMQ's reference fixtures takes a minute or more, mostly waiting on JVMs and
    clients. When the session has tests that read them, stale ones start generating now, beside
    the first tests, instead of inside the first test that asks while its worker waits (that
    test's ensure_fixture then waits only for what is left). Under xdist each worker starts
    this; the cache's lock lets one generate and the other find them current."""
    global _fixture_prefetch
    if session.config.option.collectonly or not any(
        item.get_closest_marker("reference_fixtures") for item in session.items
    ):
        return
    _fixture_prefetch = threading.Thread(
        target=_generate_stale_fixtures, name="fixture-prefetch", daemon=True
    )
    _fixture_prefetch.start()


def _generate_stale_fixtures() -> None:
    # The first stale name generates every stale fixture side by side (ensure_fixture).
    for name in FIXTURE_NAMES:
        try:
            ensure_fixture(name)
        except Exception as exc:  # the test that asks generates it again, and fails with this
            print(f"generating fixture {name} ahead of its tests failed: {exc!r}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Never leave a generation's RocketMQ and clients running past the session.
    if _fixture_prefetch is not None:
        _fixture_prefetch.join()
