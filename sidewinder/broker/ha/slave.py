"""The slave's side of RocketMQ 4.x replication (HAService.HAClient).

It connects to its master's HA port (haMasterAddress, else the address the name server gave
at registration), reports its CommitLog end, appends each frame the master streams at the
master's offsets, and reports again after each read and every haSendHeartbeatInterval. A master
silent for haHousekeepingInterval, or one whose frame does not continue this CommitLog, is
dropped and dialled again after a pause, from the offset the slave then has.

    slave = HASlave(store, HASettings.from_store(config.store), lambda: registration.ha_master)
    slave.start(); ...; await slave.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from sidewinder.broker.ha.master import HASettings
from sidewinder.protocol.ha import HAProtocolError, TransferFrames, encode_report

log = structlog.get_logger("sidewinder.broker.ha")

READ_CHUNK = 1 << 20
RECONNECT_PAUSE_S = 5.0  # as HAClient waits after a failed connection
NO_MASTER_PAUSE_S = 1.0


class ReplicationTarget(Protocol):
    """What the slave writes to: the store."""

    @property
    def max_phy_offset(self) -> int: ...

    def append_replicated(self, offset: int, data: bytes) -> None: ...


class HASlave:
    def __init__(
        self,
        store: ReplicationTarget,
        settings: HASettings,
        master_address: Callable[[], str | None],
    ) -> None:
        self.store = store
        self.settings = settings
        self.master_address = master_address
        self.connected_to: str | None = None
        self.last_master_contact = 0.0  # monotonic; 0 before any
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            address = self.master_address()
            if not address:
                await asyncio.sleep(NO_MASTER_PAUSE_S)
                continue
            try:
                await self._follow(address)
            except (OSError, HAProtocolError, ValueError) as exc:
                log.warning("ha.master_lost", master=address, error=str(exc))
            finally:
                self.connected_to = None
            await asyncio.sleep(RECONNECT_PAUSE_S)

    async def _follow(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        async with asyncio.timeout(self.settings.housekeeping_s):
            reader, writer = await asyncio.open_connection(host, int(port))
        self.connected_to = address
        log.info("ha.following", master=address, offset=self.store.max_phy_offset)
        frames = TransferFrames()
        try:
            reported = self.store.max_phy_offset
            writer.write(encode_report(reported))
            last_report = time.monotonic()
            self.last_master_contact = last_report
            while True:
                wait = self.settings.heartbeat_interval_s - (time.monotonic() - last_report)
                try:
                    async with asyncio.timeout(max(wait, 0.0)):
                        data = await reader.read(READ_CHUNK)
                except TimeoutError:
                    data = None
                now = time.monotonic()
                if data == b"":
                    log.info("ha.master_closed", master=address)
                    return
                if data:
                    self.last_master_contact = now
                    frames.feed(data)
                    for offset, chunk in frames.take():
                        self._append(offset, chunk)
                elif now - self.last_master_contact > self.settings.housekeeping_s:
                    log.warning("ha.master_silent", master=address)
                    return
                have = self.store.max_phy_offset
                if have != reported or now - last_report >= self.settings.heartbeat_interval_s:
                    writer.write(encode_report(have))
                    await writer.drain()
                    reported, last_report = have, now
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _append(self, offset: int, data: bytes) -> None:
        have = self.store.max_phy_offset
        if have and offset != have:
            # HAClient's check: the master must continue exactly where this CommitLog ends.
            raise HAProtocolError(f"master sent offset {offset}, this CommitLog ends at {have}")
        if data:
            self.store.append_replicated(offset, data)
