"""Registering with every name server (RocketMQ's BrokerOuterAPI.registerBrokerAll): at start,
every registerNameServerPeriod (clamped to 10-60 s, as RocketMQ clamps it) and after topic
changes; unregistering at shutdown."""

from __future__ import annotations

import asyncio
import zlib

import structlog

from sidewinder.broker.config import PERM_READ, PERM_WRITE, BrokerConfig
from sidewinder.broker.topics import TopicTable
from sidewinder.common.service import cancel_and_wait
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    BrokerIdentityHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
)
from sidewinder.protocol.register_body import encode_register_body
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError

log = structlog.get_logger(__name__)


class Registration:
    def __init__(self, config: BrokerConfig, topics: TopicTable, client: RemotingClient) -> None:
        self.config = config
        self.topics = topics
        self.client = client
        self._task: asyncio.Task[None] | None = None
        self.registered: dict[str, bool] = {}
        # What the name servers answer a slave: its master's remoting and HA addresses.
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None

    def _body(self) -> bytes:
        wrapper = self.topics.to_json()
        permission = self.config.broker_permission
        if not permission & PERM_WRITE or not permission & PERM_READ:
            for topic in wrapper["topicConfigTable"].values():
                topic["perm"] &= permission
        return encode_register_body(
            {"filterServerList": [], "topicConfigSerializeWrapper": wrapper},
            self.config.compressed_register,
        )

    async def register_all(self) -> None:
        """REGISTER_BROKER to every name server at once; failures are logged, not raised."""
        data = self._body()
        header = RegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.config.broker_addr,
            cluster_name=self.config.broker_cluster_name,
            ha_server_addr=self.config.ha_server_addr,
            broker_id=self.config.broker_id,
            compressed=self.config.compressed_register,
            body_crc32=zlib.crc32(data) & 0x7FFFFFFF,
        )
        timeout = self.config.register_broker_timeout_mills / 1000
        await asyncio.gather(
            *(self._register(addr, header, data, timeout) for addr in self.config.namesrv_addrs)
        )

    async def _register(
        self, addr: str, header: RegisterBrokerRequestHeader, data: bytes, timeout: float
    ) -> None:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), data)
        try:
            reply = await self.client.invoke(addr, request, timeout)
        except (RemotingError, OSError) as exc:
            self.registered[addr] = False
            log.warning("broker.register_failed", namesrv=addr, error=str(exc))
            return
        ok = reply.code == ResponseCode.SUCCESS
        if ok and self.config.broker_id != 0:
            answer = RegisterBrokerResponseHeader.from_ext(reply.ext_fields)
            self.master_addr = answer.master_addr or None
            self.master_ha_addr = answer.ha_server_addr or None
        if not ok:
            log.warning(
                "broker.register_refused", namesrv=addr, code=reply.code, remark=reply.remark
            )
        elif not self.registered.get(addr):
            log.info("broker.registered", namesrv=addr, broker=self.config.broker_addr)
        self.registered[addr] = ok

    def start(self) -> None:
        period = min(max(self.config.register_name_server_period, 10_000), 60_000) / 1000
        self._task = asyncio.get_running_loop().create_task(self._every(period))

    async def _every(self, period_s: float) -> None:
        while True:
            await asyncio.sleep(period_s)
            await self.register_all()

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        header = BrokerIdentityHeader(
            self.config.broker_name,
            self.config.broker_addr,
            self.config.broker_cluster_name,
            self.config.broker_id,
        )
        for addr in self.config.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext())
            try:
                await self.client.invoke(addr, request, 3)
            except (RemotingError, OSError) as exc:
                log.warning("broker.unregister_failed", namesrv=addr, error=str(exc))
