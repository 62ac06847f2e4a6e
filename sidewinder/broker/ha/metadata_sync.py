"""A slave's copy of its master's metadata (RocketMQ's SlaveSynchronize): topics (21),
subscription groups (201), consumer offsets (43) and delay offsets (45), read from the master's
remoting address 3 s after start and every 10 s after, as RocketMQ 4.9's broker schedules it.

    sync = MetadataSync(client, lambda: registration.master_addr, tables, persist=app.persist)
    sync.start(); ...; await sync.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.request_modes import RequestModes
from sidewinder.broker.schedule import ScheduleService
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError

log = structlog.get_logger("sidewinder.broker.ha")

FIRST_SYNC_S = 3.0
SYNC_PERIOD_S = 10.0
SYNC_TIMEOUT_S = 3.0
# What a 4.x master does not serve (RocketMQ 5's tables).
OPTIONAL_CODES = frozenset({RequestCode.GET_ALL_MESSAGE_REQUEST_MODE})


@dataclass(frozen=True)
class SlaveTables:
    topics: TopicTable
    groups: SubscriptionGroups
    offsets: ConsumerOffsets
    schedule: ScheduleService
    request_modes: RequestModes | None = None  # RocketMQ 5's, from a master that has them


class MetadataSync:
    def __init__(
        self,
        client: RemotingClient,
        master_addr: Callable[[], str | None],
        tables: SlaveTables,
        *,
        persist: Callable[[], Awaitable[None]],
    ) -> None:
        self.client = client
        self.master_addr = master_addr
        self.tables = tables
        self.persist = persist
        self.synced = 0  # rounds that read everything
        self.master_has_modes = True  # RocketMQ 5's request modes; a 4.x master has none
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._every(), name="slave-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _every(self) -> None:
        await asyncio.sleep(FIRST_SYNC_S)
        while True:
            await self.sync_all()
            await asyncio.sleep(SYNC_PERIOD_S)

    async def sync_all(self) -> bool:
        """One round; each table on its own, as SlaveSynchronize.syncAll tries each. True when
        every read succeeded."""
        master = self.master_addr()
        if not master:
            return False
        tables = self.tables
        ok = True
        topics = await self._read(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        if topics is not None and tables.topics.mirror(topics):
            log.info("ha.topics_synced", master=master, topics=len(tables.topics.topics))
        groups = await self._read(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if groups is not None:
            tables.groups.mirror(groups)
        offsets = await self._read(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        if offsets is not None:
            tables.offsets.merge(offsets)
            tables.offsets.dirty = True
        delays = await self._read(master, RequestCode.GET_ALL_DELAY_OFFSET)
        if delays is not None:
            tables.schedule.mirror(delays)
        if tables.request_modes is not None and self.master_has_modes:
            modes = await self._read(master, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
            if modes is not None:
                tables.request_modes.mirror(modes)
        ok = None not in (topics, groups, offsets, delays)
        await self.persist()
        if ok:
            self.synced += 1
        return ok

    async def _read(self, master: str, code: int) -> dict[str, Any] | None:
        try:
            reply = await self.client.invoke(master, RemotingCommand.request(code), SYNC_TIMEOUT_S)
        except (RemotingError, OSError) as exc:
            log.warning("ha.sync_failed", master=master, code=code, error=str(exc))
            return None
        if reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and code in OPTIONAL_CODES:
            # A 4.x master has no RocketMQ 5 table: not asked again, not a failed round.
            log.info("ha.sync_skipped", master=master, code=code)
            self.master_has_modes = False
            return None
        if reply.code != ResponseCode.SUCCESS:
            log.warning("ha.sync_refused", master=master, code=code, remark=reply.remark)
            return None
        try:
            value = body.loads(reply.body_bytes)
        except ValueError as exc:
            log.warning("ha.sync_bad_body", master=master, code=code, error=str(exc))
            return None
        return value if isinstance(value, dict) else None
