"""SYNC_MASTER, on both kinds (a RocketMQ 4.9.7 master with its slave, ours with ours): a send
that waits is acknowledged only once the slave has it; with no slave it is SLAVE_NOT_AVAILABLE,
with a frozen slave FLUSH_SLAVE_TIMEOUT, never SUCCESS; after a kill -9 of the master every
acknowledged message is read by the stock Java consumer from the slave, and again from the
restarted master; a slave killed and restarted catches up."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.mqadmin import create_topic
from interop.replica import (
    ReplicaBroker,
    commit_log_max_offset,
    first_acknowledged,
    send,
    until,
    wait_for_topic,
)
from interop.target import ClusterTarget, running_target
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.scenarios import consume, produce

pytestmark = pytest.mark.interop

KINDS = ["rocketmq", "sidewinder"]
SYNC_MASTER = {"brokerRole": "SYNC_MASTER", "syncFlushTimeout": "1500"}


@pytest.mark.parametrize("kind", KINDS)
def test_without_a_slave_a_waiting_send_is_stored_but_slave_not_available(
    kind: str, tmp_path: Path, client: SyncRemotingClient
) -> None:
    with running_target(kind, tmp_path, SYNC_MASTER, discard=True) as master:
        topic = unique("NoSlave")
        create_topic(master.namesrv_addr, topic, cluster=master.cluster_name)
        reply = send(client, master.broker_addr, topic, "k-0")
        assert reply.code == ResponseCode.SLAVE_NOT_AVAILABLE, reply
        assert reply.ext_fields and reply.ext_fields.get("msgId"), "stored: it has its id"
        assert send(client, master.broker_addr, topic, "k-1", wait=False).code == (
            ResponseCode.SUCCESS
        )


@pytest.fixture(params=KINDS)
def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ClusterTarget, ReplicaBroker]]:
    kind = request.param
    with running_target(kind, tmp_path / "master", SYNC_MASTER, discard=True) as master:
        slave = ReplicaBroker(kind, tmp_path / "slave", master).start()
        try:
            yield master, slave
        finally:
            slave.process.signal(signal.SIGCONT)
            slave.kill()


def test_an_acknowledgement_means_the_slave_has_it_and_a_frozen_slave_gets_none(
    pair: tuple[ClusterTarget, ReplicaBroker], client: SyncRemotingClient
) -> None:
    master, slave = pair
    topic = unique("SyncMaster")
    create_topic(master.namesrv_addr, topic, cluster=master.cluster_name)
    first_acknowledged(client, master.broker_addr, topic)
    for n in range(100):
        reply = send(client, master.broker_addr, topic, f"k-{n}")
        assert reply.code == ResponseCode.SUCCESS, reply
        if n % 25 == 24:
            # Read at once, no waiting: what was acknowledged is on the slave already.
            on_master = commit_log_max_offset(client, master.broker_addr)
            on_slave = commit_log_max_offset(client, slave.addr)
            assert on_slave is not None and on_master is not None and on_slave >= on_master
    # The stock producer's SEND_MESSAGE_V2 (our broker's send lane) waits for the slave too.
    sent = produce(master, "java", topic, 50, group=unique("SyncMasterJava"))
    assert [e["status"] for e in sent] == ["SEND_OK"] * 50
    on_master = commit_log_max_offset(client, master.broker_addr)
    on_slave = commit_log_max_offset(client, slave.addr)
    assert on_slave is not None and on_master is not None and on_slave >= on_master
    # A slave that stops answering (SIGSTOP: its socket stays open, nothing moves): each
    # waiting send times out as FLUSH_SLAVE_TIMEOUT, none is acknowledged.
    slave.process.signal(signal.SIGSTOP)
    try:
        for n in range(3):
            started = time.monotonic()
            reply = send(client, master.broker_addr, topic, f"frozen-{n}")
            assert reply.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, reply
            assert time.monotonic() - started >= 1.0, "answered before syncFlushTimeout"
    finally:
        slave.process.signal(signal.SIGCONT)
    until(
        "the thawed slave acknowledging again",
        lambda: send(client, master.broker_addr, topic, "thawed").code == ResponseCode.SUCCESS,
    )
    # A slave killed and restarted catches up from its own offset.
    slave.kill()
    for n in range(20):
        send(client, master.broker_addr, topic, f"alone-{n}", wait=False)
    slave.start()
    top = commit_log_max_offset(client, master.broker_addr)
    until(
        "the restarted slave catching up",
        lambda: (commit_log_max_offset(client, slave.addr) or 0) >= (top or 0),
    )
    assert commit_log_max_offset(client, slave.addr) == top


def test_kill_9_of_the_master_loses_no_acknowledged_message(
    pair: tuple[ClusterTarget, ReplicaBroker], client: SyncRemotingClient
) -> None:
    master, slave = pair
    topic = unique("SyncKill")
    create_topic(master.namesrv_addr, topic, cluster=master.cluster_name, queues=1)
    first_acknowledged(client, master.broker_addr, topic)
    acked: list[str] = []
    stop = threading.Event()

    def load() -> None:
        sender = SyncRemotingClient()
        try:
            for n in range(1_000_000):
                if stop.is_set():
                    return
                key = f"k-{n}"
                try:
                    reply = send(sender, master.broker_addr, topic, key)
                except Exception:
                    return  # the master is gone
                if reply.code == ResponseCode.SUCCESS:
                    acked.append(key)
        finally:
            sender.close()

    loader = threading.Thread(target=load)
    loader.start()
    until("300 acknowledged sends", lambda: len(acked) >= 300, 60)
    wait_for_topic(client, slave.addr, topic)
    master.kill_broker()
    stop.set()
    loader.join(30)
    assert acked, "nothing was acknowledged"
    # Everything on the slave (acknowledged or not) is what the consumer must get through.
    reply = client.invoke(
        slave.addr,
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}),
        5,
    )
    on_slave = int((reply.ext_fields or {})["offset"])
    run = consume(master, "java", topic, on_slave, group=unique("FromSlave"), timeout_s=90)
    got = {e["keys"] for e in run.received()}
    lost = [k for k in acked if k not in got]
    assert not lost, f"{len(lost)} acknowledged messages not on the slave, e.g. {lost[:5]}"
    master.start_broker()
    again = consume(master, "java", topic, on_slave, group=unique("FromMaster"), timeout_s=90)
    got_again = {e["keys"] for e in again.received()}
    assert not [k for k in acked if k not in got_again]
