"""The remoting server: a listening socket whose connections feed one processor table.

    server = RemotingServer(table, ServerConfig(listen_port=10911), listener=clients)
    await server.start(host="0.0.0.0")
    ...
    await server.stop()

Connection events (open, close, idle) go to the listener: the broker forgets dead clients
through them. Connections silent for serverChannelMaxIdleTimeSeconds are closed, as RocketMQ's
IdleStateHandler does; a sweep once a second also refuses queued requests past their budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

import structlog

from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.connection import Connection
from sidewinder.remoting.dispatch import ProcessorTable

log = structlog.get_logger(__name__)

SWEEP_INTERVAL_S = 1.0


class ConnectionListener(Protocol):
    def on_connect(self, connection: Connection) -> None: ...
    def on_close(self, connection: Connection) -> None: ...
    def on_idle(self, connection: Connection) -> None: ...


class RemotingServer:
    def __init__(
        self,
        table: ProcessorTable,
        config: ServerConfig | None = None,
        listener: ConnectionListener | None = None,
    ) -> None:
        self.table = table
        self.config = config or ServerConfig()
        self.listener = listener
        self.connections: set[Connection] = set()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self, host: str = "0.0.0.0", port: int | None = None) -> int:
        """Listen (port 0: any free one); returns the port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection,
            host,
            self.config.listen_port if port is None else port,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = loop.create_task(self._sweep(), name="remoting-sweep")
        log.info("remoting.listening", host=host, port=self.port)
        return self.port

    def _new_connection(self) -> Connection:
        return Connection(
            self.table,
            max_frame=self.config.frame_max_length,
            on_open=self._opened,
            on_close=self._closed,
        )

    def _opened(self, connection: Connection) -> None:
        self.connections.add(connection)
        if self.listener is not None:
            self.listener.on_connect(connection)

    def _closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        if self.listener is not None:
            self.listener.on_close(connection)

    async def _sweep(self) -> None:
        idle_s = self.config.server_channel_max_idle_time_seconds
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            self.table.expire_queued()
            if not idle_s:
                continue
            now = time.monotonic()
            for connection in list(self.connections):
                if now - connection.last_active > idle_s:
                    log.info("remoting.idle_close", peer=connection.remote_address)
                    if self.listener is not None:
                        self.listener.on_idle(connection)
                    connection.close()

    async def stop(self) -> None:
        """Stop accepting, then close every connection."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            await self._server.wait_closed()
