"""The lean gRPC load generator (scripts/grpcload) against a broker's own gRPC front: a short
send, a receive that acks every message sent, and a refused call counted by its code (no speed
asserted). The bench's gRPC rows read its JSON line through loadgen_grpc.to_load."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.cache import REPO_ROOT
from interop.ports import lease_port_block
from interop.target import create_target
from sidewinder.client.admin import Admin
from tests.helpers import unique

sys.path.insert(0, str(REPO_ROOT / "scripts"))

from bench_broker import ROWS, SIDES, with_sources
from loadgen_grpc import generator, to_load

TOPIC_NOT_FOUND = 40402


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A Sidewinder broker serving its own gRPC front, and a topic of 8 queues on it."""
    binary = generator()  # built before the broker starts: a first build takes a while
    assert binary.exists()
    port = lease_port_block()
    workdir = tmp_path_factory.mktemp("grpcload")
    target = create_target("sidewinder", workdir, {"grpcServerPort": port}).start()
    try:
        topic = unique("GrpcLoad")

        async def create() -> None:
            admin = Admin(target.namesrv_addr)
            try:
                await admin.create_topic(topic, queues=8)
            finally:
                await admin.close()

        asyncio.run(create())
        yield f"127.0.0.1:{port}", topic
    finally:
        target.stop()


def _grpcload(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(generator()), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_sends_then_receives_and_acks_every_message(front: tuple[str, str]) -> None:
    addr, topic = front
    common = ["-addr", addr, "-topic", topic, "-conns", "2"]
    sent = _grpcload(*common, "-mode", "send", "-window", "8", "-seconds", "1.5")
    assert sent["messages"] > 0 and sent["errors"] == {}, sent
    assert sent["requests"] == sent["answered"] == sent["messages"]
    assert sent["route_queues"] == 8 and sent["connections"] == 2
    assert 0 < sent["p50_ms"] <= sent["p99_ms"] <= sent["p999_ms"]
    assert sent["seconds"] > 0 and sent["cpu_s"] > 0

    budget = str(sent["messages"])
    got = _grpcload(*common, "-mode", "receive", "-group", unique("GrpcLoadGroup"),
                    "-window", "2", "-seconds", "20", "-budget", budget, "-latencies")  # fmt: skip
    assert got["errors"] == {}, got
    assert got["received"] == got["messages"] == sent["messages"]  # every one acked once
    # Every receive and every ack answered; the latencies are the acks'.
    assert got["requests"] == got["answered"] == got["receives"] + got["messages"]
    assert len(got["latencies_us"]) == got["messages"]
    load = to_load(got)
    assert (load.messages, load.received, load.failed) == (got["messages"], got["messages"], {})


def test_an_unknown_topic_is_refused_by_code_not_a_crash(front: tuple[str, str]) -> None:
    addr, _ = front
    out = _grpcload("-addr", addr, "-topic", unique("NoSuchTopic"), "-mode", "send",
                    "-conns", "1", "-window", "2", "-seconds", "0.5")  # fmt: skip
    assert out["messages"] == 0 and out["route_queues"] == 0
    assert out["error_names"] == {str(TOPIC_NOT_FOUND): "TOPIC_NOT_FOUND"}
    # The route's refusal and each send's.
    assert out["errors"][str(TOPIC_NOT_FOUND)] == out["requests"] + 1 > 1
    assert to_load(out).failed == {TOPIC_NOT_FOUND: out["requests"] + 1}
    assert to_load({**out, "errors": {"grpc-4": 2}}).failed == {-4: 2}  # DEADLINE_EXCEEDED


def test_grpc_rows_run_where_a_front_can() -> None:
    rows = {row.key: row for row in ROWS}
    send, receive = rows["grpc-produce"], rows["grpc-pop"]
    assert with_sources(["grpc-pop"]) == ("grpc-produce", "grpc-pop")
    assert (send.connections, send.window, send.body) == (4, 64, 1024)
    assert receive.topic == send.topic != rows["produce"].topic
    for row in (send, receive):
        assert row.grpc and row.runs_on("sidewinder")
        assert not any(row.runs_on(side) for side in ("rocketmq", "rocketmq5", "redis"))
    proxied = rows["grpc-proxy-produce"]
    assert proxied.grpc and proxied.proxy and proxied.topic not in (send.topic, "BenchLean1K")
    assert [side for side in SIDES if proxied.runs_on(side)] == ["sidewinder", "rocketmq5"]


def test_the_module_pins_the_go5_drivers_client_version() -> None:
    mod = (REPO_ROOT / "scripts" / "grpcload" / "go.mod").read_text()
    go5 = (REPO_ROOT / "interop" / "drivers" / "go5" / "go.mod").read_text()
    line = "github.com/apache/rocketmq-clients/golang/v5 v5.1.4"
    assert line in mod and line in go5
    assert Path(REPO_ROOT / "scripts" / "grpcload" / "go.sum").exists()
