"""The master's side of RocketMQ 4.x replication (HAService, HAConnection): the HA port.

Each slave that connects reports its CommitLog max offset; the master streams CommitLog bytes
from there (from the start of its last segment when the slave has nothing), in frames of at
most haTransferBatchSize, and a heartbeat frame when it has had nothing to send for
haSendHeartbeatInterval. A slave silent for haHousekeepingInterval is dropped.

    master = HAMaster(store, HASettings.from_store(config.store))
    store.append_listeners.append(master.appended)
    await master.start("0.0.0.0", listen_port + 1)
    ok = await master.replicated(end_offset, timeout_s=5.0)   # SYNC_MASTER: a slave has it
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from sidewinder.protocol.ha import HAProtocolError, OffsetReports, encode_frame_header
from sidewinder.store.config import StoreConfig

log = structlog.get_logger("sidewinder.broker.ha")

READ_CHUNK = 64 * 1024
# A slave further behind than this reads old segments: those reads may go to the disk, so they
# run off the event loop.
COLD_READ_BEHIND = 8 << 20


class ReplicationSource(Protocol):
    """What the master streams from: the store."""

    @property
    def max_phy_offset(self) -> int: ...

    def commit_log_data(self, phy_offset: int, max_bytes: int) -> bytes | None: ...


@dataclass(frozen=True)
class HASettings:
    segment_size: int
    batch_size: int = 32 * 1024
    heartbeat_interval_s: float = 5.0
    housekeeping_s: float = 20.0
    fallbehind_max: int = 256 << 20

    @classmethod
    def from_store(cls, config: StoreConfig) -> HASettings:
        return cls(
            segment_size=config.mapped_file_size_commit_log,
            batch_size=config.ha_transfer_batch_size,
            heartbeat_interval_s=config.ha_send_heartbeat_interval / 1000,
            housekeeping_s=config.ha_housekeeping_interval / 1000,
            fallbehind_max=config.ha_slave_fallbehind_max,
        )


@dataclass(eq=False)
class SlaveLink:
    """One connected slave."""

    peer: str
    request_offset: int | None = None  # its first report: where streaming starts
    ack_offset: int = -1  # its newest report: it has everything below
    sent_to: int = -1  # the master has sent everything below
    closed: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class HAMaster:
    def __init__(self, source: ReplicationSource, settings: HASettings) -> None:
        self.source = source
        self.settings = settings
        self.links: set[SlaveLink] = set()
        # RocketMQ's push2SlaveMaxOffset: the most any slave has confirmed.
        self.acked_offset = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._order = itertools.count()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port)
        log.info("ha.master_listening", port=port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        for _, _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(False)
        self._waiters.clear()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    # -- what the broker asks ------------------------------------------------------------------
    def appended(self) -> None:
        """The store took new bytes: wake the streams (a store append listener)."""
        for link in self.links:
            link.wakeup.set()

    def slave_ok(self, end_offset: int) -> bool:
        """A slave is connected and, once the CommitLog reaches `end_offset`, no further behind
        than haSlaveFallbehindMax (RocketMQ's isSlaveOK: SYNC_MASTER answers
        SLAVE_NOT_AVAILABLE otherwise)."""
        if not self.links:
            return False
        return end_offset - self.acked_offset < self.settings.fallbehind_max

    def replicated(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """Done with True once a slave confirms the CommitLog up to `end_offset`, False after
        `timeout_s` (FLUSH_SLAVE_TIMEOUT)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if self.acked_offset >= end_offset:
            future.set_result(True)
            return future
        heapq.heappush(self._waiters, (end_offset, next(self._order), future))
        handle = loop.call_later(timeout_s, _expire, future)
        future.add_done_callback(lambda _: handle.cancel())
        return future

    # -- one slave -----------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = writer.get_extra_info("peername")
        link = SlaveLink(f"{peer[0]}:{peer[1]}" if peer else "?")
        self.links.add(link)
        log.info("ha.slave_connected", slave=link.peer)
        reports = asyncio.create_task(self._read_reports(reader, link))
        try:
            await self._stream(writer, link)
        except (ConnectionError, OSError) as exc:
            log.info("ha.slave_write_failed", slave=link.peer, error=str(exc))
        finally:
            link.closed = True
            self.links.discard(link)
            reports.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reports
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)
            log.info("ha.slave_gone", slave=link.peer, acked=link.ack_offset)

    async def _read_reports(self, reader: asyncio.StreamReader, link: SlaveLink) -> None:
        reports = OffsetReports()
        try:
            while True:
                try:
                    async with asyncio.timeout(self.settings.housekeeping_s):
                        data = await reader.read(READ_CHUNK)
                except TimeoutError:
                    log.warning("ha.slave_expired", slave=link.peer)
                    return
                if not data:
                    return
                offset = reports.feed(data)
                if offset is None:
                    continue
                if link.request_offset is None:
                    link.request_offset = offset
                    log.info("ha.slave_requests", slave=link.peer, offset=offset)
                elif offset > self.source.max_phy_offset:
                    log.warning(
                        "ha.slave_ahead",
                        slave=link.peer,
                        offset=offset,
                        master_max=self.source.max_phy_offset,
                    )
                    return
                link.ack_offset = offset
                self._confirm(offset)
                link.wakeup.set()
        except (ConnectionError, OSError, HAProtocolError) as exc:
            log.info("ha.slave_read_failed", slave=link.peer, error=str(exc))
        finally:
            link.closed = True
            link.wakeup.set()

    async def _stream(self, writer: asyncio.StreamWriter, link: SlaveLink) -> None:
        while link.request_offset is None:
            if link.closed:
                return
            link.wakeup.clear()
            await link.wakeup.wait()
        if link.request_offset == 0:
            top = self.source.max_phy_offset
            next_offset = top - top % self.settings.segment_size
        else:
            next_offset = link.request_offset
        log.info("ha.stream_from", slave=link.peer, offset=next_offset)
        last_write = time.monotonic()
        loop = asyncio.get_running_loop()
        while not link.closed:
            link.wakeup.clear()
            if self.source.max_phy_offset - next_offset > COLD_READ_BEHIND:
                data = await loop.run_in_executor(
                    None, self.source.commit_log_data, next_offset, self.settings.batch_size
                )
            else:
                data = self.source.commit_log_data(next_offset, self.settings.batch_size)
            if data:
                writer.writelines((encode_frame_header(next_offset, len(data)), data))
                next_offset += len(data)
                link.sent_to = next_offset
                await writer.drain()
                last_write = time.monotonic()
                continue
            idle = time.monotonic() - last_write
            if idle >= self.settings.heartbeat_interval_s:
                writer.write(encode_frame_header(next_offset, 0))
                await writer.drain()
                last_write = time.monotonic()
                idle = 0.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.heartbeat_interval_s - idle):
                    await link.wakeup.wait()

    def _confirm(self, offset: int) -> None:
        if offset > self.acked_offset:
            self.acked_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.acked_offset:
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(True)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
