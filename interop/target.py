"""One interface, two targets: a running cluster of either real RocketMQ or Sidewinder.

Tests and scripts ask for a target by kind and use only these attributes, so every scenario runs
unchanged against both. A scenario that fails on RocketMQ is a wrong test; one that passes on
RocketMQ and fails on Sidewinder is a Sidewinder bug.

The `target` fixture runs the 4.x kinds (rocketmq, sidewinder) by default; SIDEWINDER_TARGETS
picks one. The 5.x oracle, rocketmq5 (a 5.3.2 broker), runs only the scenarios of what 5.x brokers
add, through the `pop_target` fixture (rocketmq5 and sidewinder; SIDEWINDER_POP_TARGETS picks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from interop.rocketmq import RocketMQCluster
from interop.rocketmq5 import RocketMQ5Cluster
from interop.sidewinder import SidewinderCluster


class ClusterTarget(Protocol):
    """What a test may use of a running cluster."""

    kind: str
    workdir: Path
    store_path: Path
    broker_name: str
    cluster_name: str
    broker_conf: dict[str, str | None]

    @property
    def namesrv_addr(self) -> str: ...

    @property
    def broker_addr(self) -> str: ...

    def start(self) -> ClusterTarget: ...

    def stop(self, timeout_s: float = 60.0) -> None: ...

    def kill(self) -> None: ...

    def restart(self) -> None: ...

    def start_broker(self) -> None: ...

    def stop_broker(self, timeout_s: float = 60.0) -> int | None: ...

    def kill_broker(self) -> int | None: ...


TargetFactory = Callable[..., ClusterTarget]

TARGET_KINDS: dict[str, TargetFactory] = {
    "rocketmq": RocketMQCluster,
    "rocketmq5": RocketMQ5Cluster,
    "sidewinder": SidewinderCluster,
}
# What the `target` fixture runs by default, and what the `pop_target` fixture runs: scenarios
# of the 4.x protocol need no third cluster, and only 5.x scenarios need the 5.x oracle.
DEFAULT_KINDS = ("rocketmq", "sidewinder")
POP_KINDS = ("rocketmq5", "sidewinder")


def create_target(
    kind: str,
    workdir: Path,
    broker_conf: Mapping[str, Any] | None = None,
    system_props: Mapping[str, str] | None = None,
    *,
    routed: bool = True,
) -> ClusterTarget:
    """A target of `kind`, configured but not started. `system_props` are RocketMQ's -D
    settings for both daemons (TLS's): JVM flags on RocketMQ, conf keys on Sidewinder.
    `routed=False` is for a test that talks to the broker by its address only, never through
    the name server's routes: start() then need not wait for the broker to be listed there,
    which only the rocketmq5 kind's broker does after its start (10 s after)."""
    try:
        factory = TARGET_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown target kind {kind!r}; available: {', '.join(TARGET_KINDS)}"
        ) from None
    options: dict[str, Any] = {"broker_conf": broker_conf}
    if system_props:
        options["system_props"] = dict(system_props)
    if not routed and factory is RocketMQ5Cluster:
        options["routed"] = False
    return factory(workdir, **options)


@contextmanager
def running_target(
    kind: str,
    workdir: Path,
    broker_conf: Mapping[str, Any] | None = None,
    *,
    discard: bool = False,
) -> Iterator[ClusterTarget]:
    """Start a target, yield it, and stop it (by pid) whatever happens. `discard`: kill it
    instead, for a test that has no use for its store afterwards (a RocketMQ broker takes
    seconds to shut down gracefully)."""
    target = create_target(kind, workdir, broker_conf)
    target.start()
    try:
        yield target
    finally:
        if discard:
            target.kill()
        else:
            target.stop()
