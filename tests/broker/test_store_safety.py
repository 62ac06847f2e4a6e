"""The broker as a user runs it, where a store can be lost: a shared CommitLog, a full disk,
settings it cannot honour. Real mqbroker processes, a real small filesystem."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from interop.ports import lease_port_block
from interop.processes import ManagedProcess, start_until_banner
from interop.rocketmq import write_properties
from interop.sidewinder import SidewinderCluster, SidewinderNamesrv, python_env
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ViewMessageRequestHeader
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.protocol.record import decode_record
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import pull_request, send_request
from tests.small_disk import fill, small_disk


def view_body(client: SyncRemotingClient, broker_addr: str, msg_id: str) -> bytes:
    """The stored body of an acknowledged message, by its offsetMsgId."""
    _, _, offset = decode_offset_msg_id(msg_id)
    reply = client.invoke(
        broker_addr,
        RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset).to_ext()
        ),
        5,
    )
    assert reply.code == ResponseCode.SUCCESS, (msg_id, reply.remark)
    record = decode_record(memoryview(reply.body or b""), 0)
    return bytes(record.body)  # type: ignore[union-attr]


def test_a_second_broker_on_the_default_commitlog_refuses_to_start(tmp_path: Path) -> None:
    """Two brokers with their own storePathRootDir and no storePathCommitLog both name
    ~/store/commitlog, as RocketMQ's defaults do: the second must refuse, saying why."""
    home = tmp_path / "home"  # both brokers' ~, as on one host
    namesrv = SidewinderNamesrv(tmp_path / "namesrv").start()
    brokers: list[ManagedProcess] = []

    def broker(name: str) -> tuple[ManagedProcess, int]:
        port = lease_port_block((-2, 0, 1))
        workdir = tmp_path / name
        write_properties(
            workdir / "broker.conf",
            {
                "brokerName": name,
                "brokerIP1": "127.0.0.1",
                "listenPort": port,
                "namesrvAddr": namesrv.addr,
                "storePathRootDir": tmp_path / f"{name}-root",
                "mappedFileSizeCommitLog": 4 << 20,
            },
        )
        env = python_env(workdir)
        env["HOME"] = str(home)
        process = ManagedProcess(
            name,
            [sys.executable, "-m", "sidewinder.broker", "-c", str(workdir / "broker.conf")],
            workdir / "broker.out",
            env=env,
            cwd=workdir,
        )
        brokers.append(process)
        return process, port

    client = SyncRemotingClient()
    try:
        first, first_port = broker("broker-a")
        start_until_banner(first, first_port, 60)
        shared = home / "store" / "commitlog"
        assert first.output_contains("store.commitlog_outside_root")
        assert first.output_contains(str(shared))
        first_addr = f"127.0.0.1:{first_port}"
        acked = {}
        for n in range(200):
            reply = client.invoke(first_addr, send_request("SharedLog", f"a-{n}".encode()), 10)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            acked[(reply.ext_fields or {})["msgId"]] = f"a-{n}".encode()

        second, _ = broker("broker-b")
        second.start()
        assert second.proc is not None
        assert second.proc.wait(30) == 1
        refusal = second.out_path.read_text()
        assert f"the CommitLog directory {shared} is in use by broker broker-a" in refusal
        assert "storePathCommitLog" in refusal
        assert not (tmp_path / "broker-b-root" / "abort").exists()
        # The first broker's messages are its own, intact.
        for msg_id, body in acked.items():
            assert view_body(client, first_addr, msg_id) == body
        assert all(p.name.isdigit() for p in shared.iterdir())  # RocketMQ's loader agrees
    finally:
        client.close()
        for process in brokers:
            process.stop(15)
        namesrv.stop()


def test_aclenable_false_is_a_known_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("aclEnable=false\nbrokerRole=SYNC_MASTER\n")
    printed = subprocess.run(
        [sys.executable, "-m", "sidewinder.broker", "-c", str(conf), "-p"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert printed.returncode == 0 and "unknown key" not in printed.stderr
    assert "brokerRole=SYNC_MASTER" in printed.stdout


def send_until_refused(
    client: SyncRemotingClient, cluster: SidewinderCluster, limit: int = 50_000
) -> dict[str, bytes]:
    acked: dict[str, bytes] = {}
    for n in range(limit):
        body = f"{n:08d}".encode() * 512  # 4 KiB
        reply = client.invoke(cluster.broker_addr, send_request("FullDisk", body), 10)
        if reply.code != ResponseCode.SUCCESS:
            assert reply.code == ResponseCode.SERVICE_NOT_AVAILABLE, reply
            assert "disk full" in (reply.remark or ""), reply.remark
            return acked
        acked[(reply.ext_fields or {})["msgId"]] = body
    raise AssertionError(f"{limit} sends and the disk is not full")


def test_a_full_disk_refuses_sends_serves_reads_survives_a_restart_and_resumes(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk", mib=32) as disk:
        ballast = fill(disk, leave_bytes=24 << 20)  # what an operator can free later
        store = disk / "store"
        cluster = SidewinderCluster(
            tmp_path / "cluster",
            broker_conf={
                "storePathRootDir": store,
                "storePathCommitLog": store / "commitlog",
                "flushDiskType": "SYNC_FLUSH",
                "mappedFileSizeCommitLog": 4 << 20,
                "maxHashSlotNum": 5000,
                "maxIndexNum": 20000,
                "cleanFileForciblyEnable": "false",  # keep every acknowledged message
                "cleanResourceInterval": 1000,
            },
        ).start()
        client = SyncRemotingClient()
        try:
            acked = send_until_refused(client, cluster)
            assert len(acked) > 1000
            assert cluster.broker.alive()
            for msg_id, body in acked.items():
                assert view_body(client, cluster.broker_addr, msg_id) == body
            pulled = client.invoke(
                cluster.broker_addr, pull_request("FullDisk", "FullDiskReaders"), 10
            )
            assert pulled.code == ResponseCode.SUCCESS

            # Killed and restarted on the still-full disk: it recovers and serves reads.
            cluster.kill_broker()
            cluster.start_broker()
            refused = client.invoke(
                cluster.broker_addr, send_request("FullDisk", b"after restart"), 10
            )
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "disk full" in (refused.remark or "")
            for msg_id, body in acked.items():
                assert view_body(client, cluster.broker_addr, msg_id) == body
            assert cluster.broker.output_contains("store.disk_full")

            ballast.unlink()  # space is back: sends are taken again, without a restart
            deadline = time.monotonic() + 15
            while True:
                reply = client.invoke(
                    cluster.broker_addr, send_request("FullDisk", b"space is back"), 10
                )
                if reply.code == ResponseCode.SUCCESS:
                    break
                assert time.monotonic() < deadline, reply.remark
                time.sleep(0.2)
            assert view_body(client, cluster.broker_addr, (reply.ext_fields or {})["msgId"]) == (
                b"space is back"
            )
        finally:
            client.close()
            cluster.stop()
