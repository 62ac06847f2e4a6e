"""kill -9 of a SYNC_FLUSH broker with gRPC pops in flight: every message a stock 5.x client's
send was answered for is there after the restart, what was acked before the broker's last
offset flush is not delivered again, and what was received but not acked comes back.
Sidewinder's broker with its own front (which dies with it), and RocketMQ 5.3.2's behind mqproxy
(which outlives it).

A pop moves its group's offset in memory, flushed every flushConsumerOffsetInterval; a kill
before the flush loses that move, and both brokers then deliver the messages again, acked or
not (at least once). So the scenario waits for a flush before the kill."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.drivers import run_driver
from interop.sidewinder import MqProxy
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.pop_requests import create_group_request, create_topic_request

PYTHON5 = "python5"
SENT = 20
ACKED = 8  # received and acked before the kill
IN_FLIGHT = 4  # received, never acked, their invisible time running at the kill

pytestmark = pytest.mark.interop


@pytest.fixture(params=["sidewinder", "rocketmq5"])
def crashed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ClusterTarget, str, str]]:
    """A fresh SYNC_FLUSH broker of the kind and the gRPC endpoints that reach it: the broker's
    own front (Sidewinder) or an mqproxy (RocketMQ 5.3.2 has no front of its own here)."""
    kind = str(request.param)
    conf: dict[str, object] = {"flushDiskType": "SYNC_FLUSH", "flushConsumerOffsetInterval": 500}
    proxy = None
    if kind == "sidewinder":
        from interop.ports import lease_port_block

        port = lease_port_block()
        conf["grpcServerPort"] = port
    target = create_target(kind, tmp_path / "cluster", conf).start()
    try:
        if kind == "sidewinder":
            endpoints = f"127.0.0.1:{port}"
        else:
            proxy = MqProxy(tmp_path / "mqproxy", target.namesrv_addr).start()
            endpoints = proxy.endpoints
        yield target, endpoints, kind
    finally:
        if proxy is not None:
            proxy.stop()
        target.kill()


def _until_offsets_flushed(target: ClusterTarget, topic: str, group: str, popped: int) -> None:
    """Wait until the broker's consumerOffset.json (fastjson: queue ids as bare numbers) has
    the group's offsets past every message popped."""
    path = Path(target.store_path) / "config" / "consumerOffset.json"
    pattern = re.compile(rf'"{re.escape(topic)}@{re.escape(group)}":\{{([^}}]*)\}}')
    deadline = time.monotonic() + 15
    while True:
        text = path.read_text() if path.exists() else ""
        found = pattern.search(text)
        queues = found.group(1).split(",") if found else []
        if sum(int(q.split(":")[1]) for q in queues if ":" in q) >= popped:
            return
        assert time.monotonic() < deadline, f"offsets not flushed: {text}"
        time.sleep(0.2)


def test_kill_9_with_pops_in_flight_loses_nothing_and_redelivers_no_ack(
    crashed: tuple[ClusterTarget, str, str], client: SyncRemotingClient
) -> None:
    target, endpoints, _ = crashed
    topic, group = unique("GrpcKill"), unique("GrpcKillGroup")
    for request in (create_topic_request(topic, 2), create_group_request(group)):
        assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    produced = run_driver(PYTHON5, "produce", endpoints=endpoints, topic=topic, count=SENT)
    sent = {e["msgId"] for e in produced.check().sent()}
    assert len(sent) == SENT

    def consume(expect: int, **options: object) -> list[dict[str, object]]:
        run = run_driver(
            PYTHON5,
            "simple-consume",
            endpoints=endpoints,
            topic=topic,
            group=group,
            expect=expect,
            batch_size=4,
            timeout_s=90,
            **options,
        )
        return run.check().received(only_ok=False)

    acked = {e["msgId"] for e in consume(ACKED, invisible_duration=60) if e["action"] == "ok"}
    in_flight = {e["msgId"] for e in consume(IN_FLIGHT, invisible_duration=10, no_ack=True)}
    assert len(acked) >= ACKED and len(in_flight) >= IN_FLIGHT and not acked & in_flight

    _until_offsets_flushed(target, topic, group, ACKED + IN_FLIGHT)
    target.kill_broker()
    target.start_broker()

    left = SENT - len(acked)
    after = consume(left, invisible_duration=60, linger=3)
    got = [str(e["msgId"]) for e in after]
    assert not set(got) & acked, "an acked message came again after the restart"
    assert set(got) | acked == sent, sorted(sent - set(got) - acked)
    assert in_flight <= set(got)
