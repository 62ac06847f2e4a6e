"""A broker's part in its broker group's replication, by brokerRole: a master serves its HA
port; a slave follows its master's CommitLog and copies its metadata.

    replication = Replication(config, store, registration, outbound, tables, persist=...)
    await replication.start(host); ...; await replication.stop()
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.ha.master import HAMaster, HASettings
from sidewinder.broker.ha.metadata_sync import MetadataSync, SlaveTables
from sidewinder.broker.ha.slave import HASlave
from sidewinder.broker.registration import Registration
from sidewinder.remoting.client import RemotingClient
from sidewinder.store.config import BrokerRole
from sidewinder.store.message_store import MessageStore


class Replication:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        registration: Registration,
        client: RemotingClient,
        tables: SlaveTables,
        *,
        persist: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        settings = HASettings.from_store(config.store)
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.sync: MetadataSync | None = None
        if config.store.broker_role is BrokerRole.SLAVE:
            fixed = config.store.ha_master_address
            # As RocketMQ: haMasterAddress when set (6 characters or more), else the address
            # the name servers answer the slave's registration with.
            if fixed and len(fixed) >= 6:
                self.slave = HASlave(store, settings, lambda: fixed)
            else:
                self.slave = HASlave(store, settings, lambda: registration.master_ha_addr)
            self.sync = MetadataSync(
                client, lambda: registration.master_addr, tables, persist=persist
            )
        else:
            self.master = HAMaster(store, settings)
            store.append_listeners.append(self.master.appended)
            if config.store.broker_role is BrokerRole.SYNC_MASTER:
                store.replica_acks = self.master

    @property
    def is_slave(self) -> bool:
        return self.slave is not None

    async def start(self, host: str) -> None:
        if self.master is not None:
            await self.master.start(host, self.config.ha_port)
        if self.slave is not None:
            self.slave.start()
        if self.sync is not None:
            self.sync.start()

    async def stop(self) -> None:
        if self.sync is not None:
            await self.sync.stop()
        if self.slave is not None:
            await self.slave.stop()
        if self.master is not None:
            await self.master.stop()
