"""More brokers beside a running target, of either kind (RocketMQ's JVM or ours), registered with
its name server: a slave of a group (brokerId 1, brokerRole SLAVE), or the master of another
group (broker-b beside the target's broker-a), whose own slave is a ReplicaBroker of it.

    with running_target("sidewinder", tmp_path) as master:
        slave = ReplicaBroker("rocketmq", tmp_path / "slave", master).start()
        slave.addr, slave.store_path
        b = GroupBroker("sidewinder", tmp_path / "b", master.namesrv_addr, "broker-b").start()
        b_slave = ReplicaBroker("sidewinder", tmp_path / "b-slave", b).start()
        slave.stop()

Raw sends (`send`) and waits (`until`, `first_acknowledged`: a SYNC_MASTER whose slave confirms
puts; `wait_for_topic`: a slave that has a topic's metadata) for the tests that use them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from interop.cache import bench_cache
from interop.jvm import java_command, java_env
from interop.ports import lease_port_block
from interop.processes import ManagedProcess, start_until_banner
from interop.rocketmq import BROKER_MAIN, server_launch, test_broker_conf, write_properties
from interop.sidewinder import python_env
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient


class GroupMaster(Protocol):
    """What a slave needs of its master: a ClusterTarget or a GroupBroker."""

    broker_name: str
    cluster_name: str
    broker_conf: dict[str, Any]

    @property
    def namesrv_addr(self) -> str: ...


class GroupBroker:
    """One broker process joined to a running name server; by default the master (brokerId 0)
    of a group of its own. `conf` overrides the test defaults (brokerRole, say)."""

    def __init__(
        self,
        kind: str,
        workdir: Path,
        namesrv_addr: str,
        broker_name: str,
        *,
        cluster: str = "DefaultCluster",
        conf: dict[str, Any] | None = None,
        startup_timeout_s: float = 90.0,
    ) -> None:
        self.kind = kind
        self.workdir = Path(workdir)
        self.port = lease_port_block((-2, 0, 1))
        self.store_path = self.workdir / "store"
        self.namesrv_addr = namesrv_addr
        self.broker_name = broker_name
        self.cluster_name = cluster
        values: dict[str, Any] = test_broker_conf(
            broker_name=broker_name,
            cluster=cluster,
            store=self.store_path,
            namesrv_addr=namesrv_addr,
            listen_port=self.port,
        )
        values.update(conf or {})
        self.conf = self.broker_conf = values
        conf_path = self.workdir / "broker.conf"
        write_properties(conf_path, values)
        self.startup_timeout_s = startup_timeout_s
        role = "slave" if values.get("brokerRole") == "SLAVE" else "master"
        if kind == "rocketmq":
            classpath, flags = server_launch(bench_cache(), "server", "broker")
            command = java_command(
                self.workdir,
                classpath,
                BROKER_MAIN,
                ["-c", str(conf_path)],
                heap_mb=512,
                jvm_flags=flags,
            )
            env = java_env(self.workdir)
            logs = [self.workdir / "logs" / "broker.log"]
        else:
            command = [sys.executable, "-m", "sidewinder.broker", "-c", str(conf_path)]
            env = python_env(self.workdir)
            logs = []
        self.process = ManagedProcess(
            f"{kind} {broker_name} {role}",
            command,
            self.workdir / "broker.out",
            env=env,
            cwd=self.workdir,
            log_paths=logs,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def broker_addr(self) -> str:
        return self.addr

    def start(self) -> GroupBroker:
        start_until_banner(self.process, self.port, self.startup_timeout_s)
        return self

    def stop(self, timeout_s: float = 60.0) -> int | None:
        return self.process.stop(timeout_s)

    def kill(self) -> int | None:
        return self.process.kill()


class ReplicaBroker(GroupBroker):
    """The slave (brokerId 1, brokerRole SLAVE) of `master`'s group."""

    def __init__(
        self,
        kind: str,
        workdir: Path,
        master: GroupMaster,
        *,
        conf: dict[str, Any] | None = None,
        startup_timeout_s: float = 90.0,
    ) -> None:
        values: dict[str, Any] = {
            # The slave's segments must be the master's size: it writes at the master's offsets.
            "mappedFileSizeCommitLog": master.broker_conf["mappedFileSizeCommitLog"],
            "brokerId": "1",
            "brokerRole": "SLAVE",
            # RocketMQ's slave first reports its offset this long after it connects (then after
            # each read, and this often when idle), and its master streams nothing before that
            # report nor acknowledges a SYNC_MASTER send: 1 s, not the default 5 s, so a test
            # does not wait 5 s for each connection. Ours reports at once and takes the key too.
            "haSendHeartbeatInterval": "1000",
            **(conf or {}),
        }
        super().__init__(
            kind,
            workdir,
            master.namesrv_addr,
            master.broker_name,
            cluster=master.cluster_name,
            conf=values,
            startup_timeout_s=startup_timeout_s,
        )

    def start(self) -> ReplicaBroker:
        super().start()
        return self


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


def send_request(topic: str, key: str, *, wait: bool = True) -> RemotingCommand:
    """SEND_MESSAGE of one message keyed `key`, WAIT as `wait` says (a SYNC_MASTER holds the
    reply of a waiting send until a slave has it)."""
    properties = f"KEYS\x01{key}\x02WAIT\x01{'true' if wait else 'false'}\x02"
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": "SyncMasterProducer",
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": str(int(time.time() * 1000)),
            "flag": "0",
            "properties": properties,
            "reconsumeTimes": "0",
            "unitMode": "false",
        },
        body=f"body of {key}".encode(),
    )


def send(
    client: SyncRemotingClient, addr: str, topic: str, key: str, *, wait: bool = True
) -> RemotingCommand:
    """`send_request` to the broker at `addr`; the reply."""
    return client.invoke(addr, send_request(topic, key, wait=wait), 10)


def until(what: str, check: Callable[[], object], timeout_s: float = 40.0) -> None:
    """Until `check()` is true; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.2)


def first_acknowledged(client: SyncRemotingClient, addr: str, topic: str) -> None:
    """Until a send is SUCCESS: a RocketMQ slave reports its offset first haSendHeartbeatInterval
    after it connects (1 s for a ReplicaBroker); until then a SYNC_MASTER has no slave it counts
    (SLAVE_NOT_AVAILABLE) or one that confirms nothing (FLUSH_SLAVE_TIMEOUT)."""
    n = [0]

    def acknowledged() -> bool:
        n[0] += 1
        reply = send(client, addr, topic, f"warm-{n[0]}")
        assert reply.code in (
            ResponseCode.SUCCESS,
            ResponseCode.SLAVE_NOT_AVAILABLE,
            ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ), reply
        return reply.code == ResponseCode.SUCCESS

    until("a send acknowledged by the slave", acknowledged)
