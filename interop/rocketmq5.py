"""The real Apache RocketMQ 5.3.2 broker beside the 4.9.7 name server, on free 127.0.0.1 ports:
the oracle for what 5.x brokers add (POP consumption, the 5.x metadata formats).

    with RocketMQ5Cluster(tmp_path) as cluster:
        cluster.namesrv_addr, cluster.broker_addr, cluster.store_path

Everything else is RocketMQCluster's (interop/rocketmq.py): the same broker.conf, JVM flags and
lifecycle; only the broker's classpath (the `server5` Maven role) and its log's path differ.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from interop.rocketmq import RocketMQCluster
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from sidewinder.remoting.connection import RemotingError

ROCKETMQ5_VERSION = "5.3.2"


class RocketMQ5Cluster(RocketMQCluster):
    """A 4.9.7 name server and a 5.3.2 master broker, each a JVM we own by pid."""

    kind = "rocketmq5"
    broker_role = "server5"
    # 5.x logs through its own logback configuration, under user.home (the workdir).
    broker_log = Path("logs") / "rocketmqlogs" / "broker.log"

    def __init__(self, workdir: Path, *, routed: bool = True, **kwargs: Any) -> None:
        """`routed=False`: start() returns at "boot success", without waiting for the name
        server to list the broker, for a test that talks to the broker by its address only."""
        super().__init__(workdir, **kwargs)
        self.routed = routed

    def start_broker(self) -> None:
        """Start the broker, then wait until the name server lists it: a 5.3.2 broker prints
        "boot success" before its first registration, which would follow 10 s later (its first
        attempt, at start, finds no name server yet: it sends only to those its remoting
        client's background scan has connected to; the next is on a fixed 10 s timer). Asked
        to set its permission to what it is, it registers at once: that request is repeated
        every second until it is listed."""
        super().start_broker()
        if not self.routed:
            return
        client = SyncRemotingClient()
        nudged = -1.0

        def registered() -> bool:
            nonlocal nudged
            if self._registered(client):
                return True
            if time.monotonic() - nudged >= 1.0:
                nudged = time.monotonic()
                self._register_now(client)
            return False

        try:
            self.broker.wait_ready(registered, self.startup_timeout_s)
        finally:
            client.close()

    def _register_now(self, client: SyncRemotingClient) -> None:
        """UPDATE_BROKER_CONFIG brokerPermission=<its own value>: the broker registers with
        the name servers at once on a permission change (AdminBrokerProcessor); the value does
        not change. A refusal leaves the broker's 10 s timer to register it."""
        permission = self.broker_conf.get("brokerPermission") or "6"
        body = f"brokerPermission={permission}\n".encode()
        request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, body=body)
        with contextlib.suppress(RemotingError):
            client.invoke(self.broker_addr, request, 3)

    def _registered(self, client: SyncRemotingClient) -> bool:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        try:
            reply = client.invoke(self.namesrv_addr, request, 3)
        except RemotingError:
            return False
        if reply.code != ResponseCode.SUCCESS:
            return False
        info = body.loads(reply.body_bytes)
        entry = (info.get("brokerAddrTable") or {}).get(self.broker_name) or {}
        return self.broker_addr in (entry.get("brokerAddrs") or {}).values()

    def __repr__(self) -> str:
        return f"RocketMQ5Cluster(namesrv={self.namesrv_addr}, broker={self.broker_addr})"
