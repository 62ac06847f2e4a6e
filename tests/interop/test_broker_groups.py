"""A cluster of two broker groups, RocketMQ's way to scale past one broker: broker-a and broker-b,
each a SYNC_MASTER with its slave, on one name server, all of one kind (RocketMQ 4.9.7's, as the
oracle, or ours). The stock Java producer spreads its sends over both groups' queues; broker-a's
master is killed (-9) mid-load; every send but the one in flight at the kill succeeds (the client
retries on broker-b, and stops choosing broker-a once its route has no master); two Java
consumers of one group share all eight queues, broker-a's read from its slave; every acknowledged
message is read. Restarted, broker-a's master takes writes again, its slave confirming them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interop.drivers import DriverProcess, DriverRun, start_driver
from interop.mqadmin import create_topic
from interop.replica import GroupBroker, ReplicaBroker, first_acknowledged, until, wait_for_topic
from interop.target import ClusterTarget, running_target
from sidewinder.remoting.client import SyncRemotingClient
from tests.conftest import unique
from tests.interop.scenarios import start_consumer

pytestmark = pytest.mark.interop

SYNC_MASTER = {"brokerRole": "SYNC_MASTER"}
COUNT = 1500
KILL_AFTER = 300


@dataclass
class TwoGroups:
    a: ClusterTarget  # the name server and broker-a's master
    a_slave: ReplicaBroker
    b: GroupBroker
    b_slave: ReplicaBroker

    @property
    def namesrv_addr(self) -> str:
        return self.a.namesrv_addr


@pytest.fixture(params=["sidewinder", "rocketmq"])
def groups(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TwoGroups]:
    kind = request.param
    with running_target(kind, tmp_path / "broker-a", SYNC_MASTER, discard=True) as a:
        started: list[GroupBroker] = []
        try:
            a_slave = ReplicaBroker(kind, tmp_path / "broker-a-s", a)
            b = GroupBroker(
                kind, tmp_path / "broker-b", a.namesrv_addr, "broker-b", conf=SYNC_MASTER
            )
            b_slave = ReplicaBroker(kind, tmp_path / "broker-b-s", b)
            for broker in (b, a_slave, b_slave):
                started.append(broker.start())
            yield TwoGroups(a, a_slave, b, b_slave)
        finally:
            for broker in reversed(started):
                broker.kill()


def store_port(event: dict[str, Any]) -> int:
    """The port of the broker that stored the message: the broker's message id (offsetMsgId) is
    its store host's IPv4, port and CommitLog offset in hex."""
    return int(event["offsetMsgId"][8:16], 16)


def test_a_dead_master_sends_writes_to_the_other_group_and_reads_to_its_slave(
    groups: TwoGroups,
) -> None:
    topic, warm = unique("TwoGroups"), unique("TwoGroupsWarm")
    for name in (topic, warm):
        create_topic(groups.namesrv_addr, name, cluster=groups.a.cluster_name, queues=4)
    a_port, b_port = int(groups.a.broker_addr.rsplit(":", 1)[1]), groups.b.port
    client = SyncRemotingClient()
    try:
        # Each master acknowledges once its slave confirms; broker-a's slave must have the topic
        # (its metadata sync) to serve it when the master is gone.
        for addr in (groups.a.broker_addr, groups.b.addr):
            first_acknowledged(client, addr, warm)
        wait_for_topic(client, groups.a_slave.addr, topic)
    finally:
        client.close()

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
