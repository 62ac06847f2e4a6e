"""RocketMQ 4.x replication across kinds: each kind of slave (RocketMQ 4.9.7's, ours) beside each
kind of master. After load the slave's CommitLog is the master's, byte for byte, and with the
master gone the stock Java consumer reads every message from the slave.

RocketMQ with RocketMQ checks the test; each pairing with ours checks one side of our HA."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.mqadmin import create_topic
from interop.replica import (
    ReplicaBroker,
    commit_log_max_offset,
    send_request,
    wait_for_topic,
)
from interop.target import ClusterTarget, running_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.scenarios import assert_received_all, assert_sent_well, consume, produce

pytestmark = pytest.mark.interop

COUNT = 300


@pytest.fixture(params=["rocketmq", "sidewinder"], ids=lambda kind: f"master={kind}")
def master(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClusterTarget]:
    with running_target(request.param, tmp_path / "master", discard=True) as target:
        yield target


def wait_for_offset(client: SyncRemotingClient, addr: str, top: int, timeout_s: float) -> None:
    """Until the broker at `addr` has the CommitLog up to `top`, and no more."""
    deadline = time.monotonic() + timeout_s
    while (commit_log_max_offset(client, addr) or 0) < top:
        assert time.monotonic() < deadline, f"the slave did not catch up in {timeout_s} s"
        time.sleep(0.2)
    assert commit_log_max_offset(client, addr) == top


def commit_log_bytes(store: Path, end: int, segment: int) -> bytes:
    out = bytearray()
    offset = 0
    while offset < end:
        out += (store / "commitlog" / f"{offset:020d}").read_bytes()[: end - offset]
        offset += segment
    return bytes(out)


@pytest.mark.parametrize("slave_kind", ["rocketmq", "sidewinder"], ids=lambda k: f"slave={k}")
def test_a_slave_mirrors_the_master_and_serves_when_it_is_gone(
    master: ClusterTarget, slave_kind: str, tmp_path: Path
) -> None:
    topic, group = unique("HaTopic"), unique("HaGroup")
    create_topic(master.namesrv_addr, topic, cluster=master.cluster_name)
    slave = ReplicaBroker(slave_kind, tmp_path / "slave", master).start()
    client = SyncRemotingClient()
    try:
        sent = produce(master, "java", topic, COUNT, group=unique("HaProducer"))
        assert_sent_well(sent, count=COUNT)
        top = commit_log_max_offset(client, master.broker_addr)
        wait_for_offset(client, slave.addr, top, timeout_s=30)
        segment = int(master.broker_conf["mappedFileSizeCommitLog"] or 0)
        ours = commit_log_bytes(master.store_path, top, segment)
        assert commit_log_bytes(slave.store_path, top, segment) == ours
        # The slave takes the topic from the master's metadata (its sync runs every 10 s), then
        # serves the consumer alone once the master is gone.
        wait_for_topic(client, slave.addr, topic)
        refused = client.invoke(slave.addr, send_request(topic, "to-a-slave", wait=False), 5)
        # As RocketMQ's store refuses a put on a slave (SERVICE_NOT_AVAILABLE); ours says why.
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "messages are put to the slave" in (refused.remark or "")
        master.kill_broker()
        run = consume(master, "java", topic, COUNT, group=group, timeout_s=90)
        assert_received_all(run, sent, topic=topic)
    finally:
        client.close()
        slave.kill()


@pytest.mark.parametrize("kind", ["rocketmq", "sidewinder"])
def test_ha_master_address_names_the_master_without_a_name_server(
    kind: str, tmp_path: Path
) -> None:
    """haMasterAddress set: the slave follows that address, though the name server it is
    given answers nothing (its CommitLog still becomes the master's)."""
    with running_target(kind, tmp_path / "master", discard=True) as master:
        host, _, port = master.broker_addr.rpartition(":")
        conf = {"haMasterAddress": f"{host}:{int(port) + 1}", "namesrvAddr": "127.0.0.1:1"}
        slave = ReplicaBroker(kind, tmp_path / "slave", master, conf=conf).start()
        client = SyncRemotingClient()
        try:
            sent = produce(master, "java", unique("HaAddrTopic"), 50, group=unique("HaAddr"))
            assert_sent_well(sent, count=50)
            top = commit_log_max_offset(client, master.broker_addr)
            assert top is not None
            wait_for_offset(client, slave.addr, top, timeout_s=30)
        finally:
            client.close()
            slave.kill()
