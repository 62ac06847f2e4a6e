"""mqbroker and mqnamesrv as real processes: config, shutdown, restarts and kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from interop.ports import lease_port_block
from interop.processes import can_connect
from interop.sidewinder import SidewinderCluster, python_env
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_print_config_and_bad_values(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName=broker-x\nlistenPort=12911\nflushDiskType=SYNC_FLUSH\nnoSuchKey=1\n"
    )
    done = run_cli("sidewinder.broker", "-c", str(conf), "-n", "127.0.0.1:9999", "-p")
    assert done.returncode == 0, done.stderr
    printed = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert printed["brokerName"] == "broker-x" and printed["listenPort"] == "12911"
    assert printed["flushDiskType"] == "SYNC_FLUSH" and printed["namesrvAddr"] == "127.0.0.1:9999"
    assert "noSuchKey" in done.stderr  # unknown keys are warned about
    conf.write_text("brokerId=first\n")
    bad = run_cli("sidewinder.broker", "-c", str(conf), "-p")
    assert bad.returncode == 2 and "brokerId='first'" in bad.stderr
    conf.write_text("listenPort=99999\n")
    bad_port = run_cli("sidewinder.namesrv", "-c", str(conf), "-p")
    assert bad_port.returncode == 2 and "listenPort" in bad_port.stderr


def test_sigterm_exits_cleanly_and_offsets_survive_a_restart(tmp_path: Path) -> None:
    cluster = SidewinderCluster(tmp_path).start()
    client = SyncRemotingClient()
    try:
        assert (
            client.invoke(cluster.broker_addr, send_request("Restarts"), 10).code
            == ResponseCode.SUCCESS
        )
        update = UpdateConsumerOffsetRequestHeader("RestartGroup", "Restarts", 0, 1)
        reply = client.invoke(
            cluster.broker_addr,
            RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, update.to_ext()),
            5,
        )
        assert reply.code == ResponseCode.SUCCESS
        started = time.monotonic()
        cluster.broker.signal(signal.SIGTERM)
        assert cluster.stop_broker(15) == 0
        assert time.monotonic() - started < 10
        assert not (cluster.store_path / "abort").exists()
        assert (cluster.store_path / "config" / "consumerOffset.json").exists()
        assert "Restarts" in (cluster.store_path / "config" / "topics.json").read_text()
        cluster.start_broker()
        query = QueryConsumerOffsetRequestHeader("RestartGroup", "Restarts", 0)
        offset = client.invoke(
            cluster.broker_addr,
            RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, query.to_ext()),
            5,
        )
        assert offset.code == ResponseCode.SUCCESS and (offset.ext_fields or {})["offset"] == "1"
    finally:
        client.close()
        cluster.stop()


def test_kill_9_under_sync_flush_loses_no_acknowledged_message(tmp_path: Path) -> None:
    cluster = SidewinderCluster(tmp_path, broker_conf={"flushDiskType": "SYNC_FLUSH"}).start()
    client = SyncRemotingClient()
    acked: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set() and len(acked) < 20_000:
            try:
                reply = client.invoke(
                    cluster.broker_addr, send_request("KillNine", f"m{len(acked)}".encode()), 10
                )
            except Exception:
                return  # the broker is gone
            if reply.code == ResponseCode.SUCCESS:
                acked.append((reply.ext_fields or {})["msgId"])

    try:
        client.invoke(cluster.broker_addr, send_request("KillNine", b"warm-up"), 10)
        producer = threading.Thread(target=produce)
        producer.start()
        deadline = time.monotonic() + 60
        while len(acked) < 500 and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.kill_broker()
        stop.set()
        producer.join(30)
        assert len(acked) >= 500
        cluster.start_broker()
        for msg_id in acked:
            _, _, offset = decode_offset_msg_id(msg_id)
            view = client.invoke(
                cluster.broker_addr,
                RemotingCommand.request(
                    RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset).to_ext()
                ),
                5,
            )
            assert view.code == ResponseCode.SUCCESS, (msg_id, view.remark)
    finally:
        stop.set()
        client.close()
        cluster.stop()


def test_a_broker_whose_output_cannot_be_written_keeps_serving(tmp_path: Path) -> None:
    """stdout and stderr on /dev/full (every write fails with ENOSPC, as on a full disk that
    holds the logs): the broker starts, stores and answers, and stops cleanly on SIGTERM."""
    port = lease_port_block((-2, 0, 1))
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort={port}\nstorePathRootDir={tmp_path / 'store'}\nnamesrvAddr=127.0.0.1:1\n"
    )
    with open("/dev/full", "w") as full:
        broker = subprocess.Popen(
            [sys.executable, "-m", "sidewinder.broker", "-c", str(conf)],
            stdout=full,
            stderr=full,
            env=python_env(tmp_path),
        )
    client = SyncRemotingClient()
    try:
        deadline = time.monotonic() + 30
        while not can_connect("127.0.0.1", port):
            assert broker.poll() is None, f"the broker exited with {broker.returncode}"
            assert time.monotonic() < deadline, "the broker never listened"
            time.sleep(0.1)
        for n in range(3):  # each send logs nothing, but a refused registration logs a lot
            reply = client.invoke(f"127.0.0.1:{port}", send_request("FullOutput", b"%d" % n), 10)
            assert reply.code == ResponseCode.SUCCESS, reply
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(30) == 0
    finally:
        client.close()
        if broker.poll() is None:
            broker.kill()
            broker.wait()
