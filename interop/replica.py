"""A second broker of a target's broker group: a slave (brokerId 1, brokerRole SLAVE) of either
kind, RocketMQ's JVM or ours, beside a running master, registered with the same name server.

    with running_target("sidewinder", tmp_path) as master:
        slave = ReplicaBroker("rocketmq", tmp_path / "slave", master)
        slave.start()
        slave.addr, slave.store_path
        slave.stop()
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from interop.cache import bench_cache
from interop.jvm import java_command, java_env
from interop.processes import ManagedProcess, free_port_block, start_until_banner
from interop.rocketmq import BROKER_MAIN, test_broker_conf, write_properties
from interop.sidewinder import python_env
from interop.target import ClusterTarget
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient


class ReplicaBroker:
    def __init__(
        self,
        kind: str,
        workdir: Path,
        master: ClusterTarget,
        *,
        conf: dict[str, Any] | None = None,
        startup_timeout_s: float = 90.0,
    ) -> None:
        self.kind = kind
        self.workdir = Path(workdir)
        self.port = free_port_block((-2, 0, 1))
        self.store_path = self.workdir / "store"
        values: dict[str, Any] = test_broker_conf(
            broker_name=master.broker_name,
            cluster=master.cluster_name,
            store=self.store_path,
            namesrv_addr=master.namesrv_addr,
            listen_port=self.port,
        )
        # The slave's segments must be the master's size: it writes at the master's offsets.
        values["mappedFileSizeCommitLog"] = master.broker_conf["mappedFileSizeCommitLog"]
        values.update({"brokerId": "1", "brokerRole": "SLAVE"})
        values.update(conf or {})
        self.conf = values
        conf_path = self.workdir / "broker.conf"
        write_properties(conf_path, values)
        self.startup_timeout_s = startup_timeout_s
        if kind == "rocketmq":
            command = java_command(
                self.workdir,
                bench_cache().classpath("server"),
                BROKER_MAIN,
                ["-c", str(conf_path)],
                heap_mb=512,
            )
            env = java_env(self.workdir)
            logs = [self.workdir / "logs" / "broker.log"]
        else:
            command = [sys.executable, "-m", "sidewinder.broker", "-c", str(conf_path)]
            env = python_env(self.workdir)
            logs = []
        self.process = ManagedProcess(
            f"{kind} slave",
            command,
            self.workdir / "broker.out",
            env=env,
            cwd=self.workdir,
            log_paths=logs,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ReplicaBroker:
        start_until_banner(self.process, self.port, self.startup_timeout_s)
        return self

    def stop(self, timeout_s: float = 60.0) -> int | None:
        return self.process.stop(timeout_s)

    def kill(self) -> int | None:
        return self.process.kill()


def commit_log_max_offset(client: SyncRemotingClient, addr: str) -> int | None:
    """The broker's CommitLog end from its runtime info; None when it cannot say (a RocketMQ
    slave with no segment yet answers with a NoSuchElementException)."""
    reply = client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    if reply.code != ResponseCode.SUCCESS:
        return None
    return int(body.loads(reply.body_bytes)["table"]["commitLogMaxOffset"])


def wait_for_topic(
    client: SyncRemotingClient, addr: str, topic: str, timeout_s: float = 40.0
) -> None:
    """Until the broker at `addr` (a slave) has `topic` in its topic table: a slave serves only
    topics its metadata sync has copied."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
        if reply.code == ResponseCode.SUCCESS and topic in reply.body_bytes.decode():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{addr} never synced {topic} from its master")
        time.sleep(0.5)
