"""A master's HA port, spoken to by a raw socket playing the slave: it streams the CommitLog's
bytes as they are on disk, from where the slave says, and confirms what the slave reports."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.ha import TransferFrames, encode_report
from tests.helpers import send_request
from tests.inprocess import InProcessBroker

SEGMENT = 4 << 20


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    conf = {"haSendHeartbeatInterval": "300", "haTransferBatchSize": "1000"}
    with InProcessBroker(tmp_path, conf) as started:
        yield started


def _send(broker: InProcessBroker, body: bytes) -> None:
    code = _send_code(broker, body)
    assert code == ResponseCode.SUCCESS, code


def _commit_log(broker: InProcessBroker) -> bytes:
    path = broker.config.store.store_path_commit_log / f"{0:020d}"
    return path.read_bytes()[: broker.app.store.max_phy_offset]  # type: ignore[union-attr]


class FakeSlave:
    """The slave's half of the HA wire over a plain socket."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.frames = TransferFrames()

    def report(self, offset: int) -> None:
        self.sock.sendall(encode_report(offset))

    def read_until(self, end_offset: int, timeout_s: float = 5) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while not got or got[-1][0] + len(got[-1][1]) < end_offset:
            assert time.monotonic() < deadline, f"only {got[-1:]} by the deadline"
            self.frames.feed(self.sock.recv(65536))
            got.extend(self.frames.take())
        return got

    def close(self) -> None:
        self.sock.close()


def test_the_master_streams_its_commit_log_from_the_slaves_offset(
    broker: InProcessBroker,
) -> None:
    for n in range(20):
        _send(broker, b"x" * 300 + str(n).encode())
    assert broker.app is not None and broker.app.replication.master is not None
    slave = FakeSlave(broker.app.replication.master.port)
    try:
        slave.report(0)
        top = broker.app.store.max_phy_offset
        frames = [f for f in slave.read_until(top) if f[1]]
        data = b"".join(d for _, d in frames)
        assert data == _commit_log(broker)
        assert frames[0][0] == 0
        assert all(len(d) <= 1000 for _, d in frames), "haTransferBatchSize bounds a frame"
        # Appends after the stream started follow without asking.
        _send(broker, b"later")
        more = slave.read_until(broker.app.store.max_phy_offset)
        assert b"".join(d for _, d in frames + more) == _commit_log(broker)
    finally:
        slave.close()


def test_a_slave_that_has_a_prefix_gets_the_rest(broker: InProcessBroker) -> None:
    for n in range(10):
        _send(broker, b"y" * 100 + str(n).encode())
    assert broker.app is not None and broker.app.replication.master is not None
    whole = _commit_log(broker)
    half = len(whole) // 2
    slave = FakeSlave(broker.app.replication.master.port)
    try:
        slave.report(half)
        frames = [f for f in slave.read_until(len(whole)) if f[1]]
        assert frames[0][0] == half
        assert b"".join(d for _, d in frames) == whole[half:]
    finally:
        slave.close()


def test_an_idle_master_sends_heartbeats_naming_the_next_offset(broker: InProcessBroker) -> None:
    _send(broker, b"one")
    assert broker.app is not None and broker.app.replication.master is not None
    top = broker.app.store.max_phy_offset
    slave = FakeSlave(broker.app.replication.master.port)
    try:
        slave.report(top)
        frames = slave.read_until(top, timeout_s=3)
        assert frames[0] == (top, b""), "heartbeat: where the next data starts, no data"
    finally:
        slave.close()


def test_reports_confirm_replication_and_release_waiters(broker: InProcessBroker) -> None:
    _send(broker, b"wait for me")
    assert broker.app is not None and broker.app.replication.master is not None
    master = broker.app.replication.master
    top = broker.app.store.max_phy_offset

    async def waiters() -> tuple[asyncio.Future[bool], asyncio.Future[bool]]:
        return master.replicated(top, 5.0), master.replicated(top, 0.05)

    confirmed, timed_out = broker.call(waiters())
    assert not broker.call(_slave_ok(master)), "no slave connected: not OK"
    time.sleep(0.2)
    slave = FakeSlave(master.port)
    try:
        slave.report(0)
        slave.read_until(top)
        slave.report(top)
        assert broker.call(_result(confirmed)) is True
        assert broker.call(_result(timed_out)) is False
        assert broker.call(_slave_ok(master))
    finally:
        slave.close()


async def _result(future: asyncio.Future[bool]) -> bool:
    return await future


async def _slave_ok(master: object) -> bool:
    return master.slave_ok(0)  # type: ignore[attr-defined,no-any-return]


def test_a_slave_reporting_past_the_masters_end_is_dropped(broker: InProcessBroker) -> None:
    _send(broker, b"short")
    assert broker.app is not None and broker.app.replication.master is not None
    top = broker.app.store.max_phy_offset
    slave = FakeSlave(broker.app.replication.master.port)
    try:
        slave.report(0)
        slave.read_until(top)
        slave.report(top + 10_000)
        slave.sock.settimeout(3)
        while True:
            chunk = slave.sock.recv(65536)
            if not chunk:
                break  # the master closed the connection
    finally:
        slave.close()


def test_sync_master_with_sync_flush_answers_by_the_slave(tmp_path: Path) -> None:
    """SYNC_MASTER with SYNC_FLUSH: the flush and the slave's confirmation are both waited for;
    no slave gives SLAVE_NOT_AVAILABLE, a slave that confirms nothing FLUSH_SLAVE_TIMEOUT within
    syncFlushTimeout, one that confirms SUCCESS (each with the message stored)."""
    conf = {
        "brokerRole": "SYNC_MASTER",
        "flushDiskType": "SYNC_FLUSH",
        "syncFlushTimeout": "500",
        "haSendHeartbeatInterval": "300",
    }
    with InProcessBroker(tmp_path, conf) as broker:
        assert broker.app is not None and broker.app.replication.master is not None
        master = broker.app.replication.master
        assert _send_code(broker, b"alone") == ResponseCode.SLAVE_NOT_AVAILABLE
        slave = FakeSlave(master.port)
        try:
            slave.report(0)
            until = time.monotonic() + 5
            while not broker.call(_slave_ok(master)):
                assert time.monotonic() < until
                time.sleep(0.05)
            started = time.monotonic()
            assert _send_code(broker, b"unconfirmed") == ResponseCode.FLUSH_SLAVE_TIMEOUT
            assert time.monotonic() - started >= 0.4
            confirming = threading.Thread(target=_confirm_all, args=(broker, slave), daemon=True)
            confirming.start()
            assert _send_code(broker, b"confirmed") == ResponseCode.SUCCESS
        finally:
            slave.close()


def _send_code(broker: InProcessBroker, body: bytes) -> int:
    reply = broker.invoke(send_request("HaTopic", body, code=RequestCode.SEND_MESSAGE, group="pg"))
    assert reply.ext_fields and reply.ext_fields.get("msgId"), reply  # stored whatever the code
    return reply.code


def _confirm_all(broker: InProcessBroker, slave: FakeSlave) -> None:
    """Report everything the master streams, as a slave does after each append."""
    slave.sock.settimeout(5)
    got = 0
    for _ in range(200):
        try:
            slave.frames.feed(slave.sock.recv(65536))
        except OSError:
            return
        for offset, data in slave.frames.take():
            got = max(got, offset + len(data))
        slave.report(got)
