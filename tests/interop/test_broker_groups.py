"""A cluster of two broker groups, RocketMQ's way to scale past one broker: broker-a and broker-b,
each a SYNC_MASTER with its slave, on one name server, all of one kind (RocketMQ 4.9.7's, as the
oracle, or ours). The stock Java producer spreads its sends over both groups' queues; broker-a's
master is killed (-9) mid-load; every send but the one in flight at the kill succeeds (the client
retries on broker-b, and stops choosing broker-a once its route has no master); two Java
consumers of one group share all eight queues, broker-a's read from its slave; every acknowledged
message is read. Restarted, broker-a's master takes writes again, its slave confirming them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvloop

from interop.drivers import DriverProcess, DriverRun, start_driver
from interop.mqadmin import create_topic
from interop.replica import GroupBroker, ReplicaBroker, first_acknowledged, until, wait_for_topic
from interop.target import ClusterTarget, running_target
from sidewinder.client.producer import Message, Producer, SendResult
from sidewinder.client.push_consumer import ConsumeStatus, PushConsumer, ReceivedMessage
from sidewinder.client.route_cache import ClientError
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.scenarios import start_consumer

pytestmark = pytest.mark.interop

SYNC_MASTER = {"brokerRole": "SYNC_MASTER"}
COUNT = 1500
KILL_AFTER = 300
PY_COUNT, PY_KILL_AFTER = 600, 150


@dataclass
class TwoGroups:
    a: ClusterTarget  # the name server and broker-a's master
    a_slave: ReplicaBroker
    b: GroupBroker
    b_slave: ReplicaBroker
    topic: str  # four queues in each group
    warm: str  # the same, to warm them with

    @property
    def namesrv_addr(self) -> str:
        return self.a.namesrv_addr


@pytest.fixture(params=["sidewinder", "rocketmq"])
def groups(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TwoGroups]:
    """Both masters, then the test's two topics on both, then the slaves: a slave's metadata
    sync runs 3 s after its start and then every 10 s, so topics made before its start reach
    it at the first."""
    kind = request.param
    with running_target(kind, tmp_path / "broker-a", SYNC_MASTER, discard=True) as a:
        started: list[GroupBroker] = []
        try:
            b = GroupBroker(
                kind, tmp_path / "broker-b", a.namesrv_addr, "broker-b", conf=SYNC_MASTER
            )
            started.append(b.start())
            topic, warm = unique("TwoGroups"), unique("TwoGroupsWarm")
            for name in (topic, warm):
                create_topic(a.namesrv_addr, name, cluster=a.cluster_name, queues=4)
            a_slave = ReplicaBroker(kind, tmp_path / "broker-a-s", a)
            b_slave = ReplicaBroker(kind, tmp_path / "broker-b-s", b)
            for broker in (a_slave, b_slave):
                started.append(broker.start())
            yield TwoGroups(a, a_slave, b, b_slave, topic, warm)
        finally:
            for broker in reversed(started):
                broker.kill()


def prepare(groups: TwoGroups) -> tuple[str, str]:
    """The fixture's topic and warm-up topic, once both masters acknowledge (their slaves
    confirm) and broker-a's slave has the topic (its metadata sync), which it needs to serve
    the topic when its master is gone."""
    client = SyncRemotingClient()
    try:
        for addr in (groups.a.broker_addr, groups.b.addr):
            first_acknowledged(client, addr, groups.warm)
        wait_for_topic(client, groups.a_slave.addr, groups.topic)
    finally:
        client.close()
    return groups.topic, groups.warm


def store_port(event: dict[str, Any]) -> int:
    """The port of the broker that stored the message: the broker's message id (offsetMsgId) is
    its store host's IPv4, port and CommitLog offset in hex."""
    return int(event["offsetMsgId"][8:16], 16)


def test_a_dead_master_sends_writes_to_the_other_group_and_reads_to_its_slave(
    groups: TwoGroups,
) -> None:
    topic, warm = prepare(groups)
    a_port, b_port = int(groups.a.broker_addr.rsplit(":", 1)[1]), groups.b.port

    # Two consumers of one group, reading while the producer sends and through the kill.
    group = unique("TwoGroupsC")
    consumers = [
        start_consumer(groups.a, "java", topic, 2 * COUNT, group=group, timeout_s=300)
        for _ in range(2)
    ]
    producer = start_driver(
        "java",
        "produce",
        namesrv=groups.namesrv_addr,
        topic=topic,
        group=unique("TwoGroupsP"),
        count=COUNT,
        timeout_s=240,
        keep_going="true",
    )
    until(f"{KILL_AFTER} sends", lambda: len(producer.events_so_far()) > KILL_AFTER, 120)
    before = [e for e in producer.events_so_far() if e.get("event") == "sent"]
    groups.a.kill_broker()
    run = producer.wait()
    assert run.returncode == 0 and run.of("done"), run.describe()
    # A synchronous send in flight when its broker dies can fail: when the dead peer's socket
    # closes cleanly (FIN) the Java client does not fail the request at once but waits out the
    # send timeout, which leaves no time to retry ("sendDefaultImpl call timeout"). Any other
    # send failing is a failed failover.
    sent, errors = run.sent(), run.errors()
    assert len(errors) <= 1 and len(sent) + len(errors) == COUNT, run.describe()
    assert all(e["status"] == "SEND_OK" for e in sent), run.describe()
    # The load was spread over both groups, and after the kill it all went to broker-b.
    assert {store_port(e) for e in before} == {a_port, b_port}
    assert {store_port(e) for e in sent[-200:]} == {b_port}

    runs = read_until_all(consumers, {e["keys"] for e in sent}, timeout_s=120)
    keys = {e["keys"] for e in sent}
    got = [{e["keys"] for e in r.received()} for r in runs]
    lost = keys - got[0] - got[1]
    assert not lost, f"{len(lost)} acknowledged messages never read, e.g. {sorted(lost)[:5]}"
    # Rebalancing shared the eight queues: each consumer read some, and broker-a's (stored by
    # its dead master) were read too, from its slave.
    assert all(got), [r.describe() for r in runs]
    ports = {store_port(e) for r in runs for e in r.received()}
    assert ports == {a_port, b_port}
    # The master restarted on its store takes writes again, acknowledged once its slave (which
    # has reconnected) has them.
    groups.a.start_broker()
    client = SyncRemotingClient()
    try:
        first_acknowledged(client, groups.a.broker_addr, warm)
    finally:
        client.close()


def read_until_all(
    consumers: list[DriverProcess], keys: set[str], timeout_s: float
) -> list[DriverRun]:
    """Until the consumers together have read every key in `keys` (or the time is up), then
    stop them; their runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = {
            e.get("keys")
            for c in consumers
            for e in c.events_so_far()
            if e.get("event") == "received"
        }
        if keys <= seen:
            break
        time.sleep(0.5)
    for consumer in consumers:
        consumer.kill()
    return [consumer.wait() for consumer in consumers]


def test_our_clients_ride_out_a_dead_master(groups: TwoGroups) -> None:
    """Our Producer and PushConsumer in the same cluster and the same kill: our client fails a
    request in flight as soon as its connection closes and retries it on broker-b, so every
    send succeeds; then our consumer, started with broker-a's master gone, reads broker-a's
    queues from its slave, and every message."""
    topic, _ = prepare(groups)
    a_name, b_name = groups.a.broker_name, groups.b.broker_name
    received: list[str] = []

    def on_messages(messages: list[ReceivedMessage]) -> ConsumeStatus:
        received.extend(m.keys[0] for m in messages)
        return ConsumeStatus.SUCCESS

    async def send_through_the_kill() -> tuple[list[SendResult], list[tuple[int, ClientError]]]:
        producer = Producer(unique("PyTwoGroupsP"), groups.namesrv_addr)
        await producer.start()
        sent: list[SendResult] = []
        failed: list[tuple[int, ClientError]] = []
        killed: asyncio.Future[int | None] | None = None
        try:
            async with asyncio.timeout(120):
                for n in range(PY_COUNT):
                    if n == PY_KILL_AFTER:
                        # From a thread, so sends go on while the master dies: one is in flight.
                        killed = asyncio.ensure_future(asyncio.to_thread(groups.a.kill_broker))
                    try:
                        sent.append(await producer.send(Message(topic, b"x", keys=[f"py-{n}"])))
                    except ClientError as exc:
                        failed.append((n, exc))
                assert killed is not None
                await killed
        finally:
            await producer.close()
        return sent, failed

    async def read_all(keys: set[str]) -> None:
        consumer = PushConsumer(
            unique("PyTwoGroupsC"), groups.namesrv_addr, listener=on_messages, consume_from="first"
        )
        consumer.subscribe(topic)
        await consumer.start()
        try:
            async with asyncio.timeout(120):
                while not keys <= set(received):
                    await asyncio.sleep(0.2)
        finally:
            await consumer.close()

    sent, failed = uvloop.run(send_through_the_kill())
    assert not failed, failed[:3]
    assert len(sent) == PY_COUNT and all(r.status == "SEND_OK" for r in sent)
    brokers = [r.queue.broker_name for r in sent]
    assert set(brokers[:PY_KILL_AFTER]) == {a_name, b_name}, set(brokers)
    assert set(brokers[-100:]) == {b_name}
    from_a = {f"py-{n}" for n, broker in enumerate(brokers) if broker == a_name}
    assert from_a
    # broker-a's master is dead: what it stored can only come from its slave.
    uvloop.run(read_all({f"py-{n}" for n in range(PY_COUNT)}))
    assert from_a <= set(received) and len(set(received)) == PY_COUNT
