"""The remoting server: a listening socket whose connections feed one processor table.

    server = RemotingServer(table, ServerConfig(listen_port=10911), listener=clients)
    await server.start(host="0.0.0.0")
    ...
    await server.stop()

Connection events (open, close, idle) go to the listener: the broker forgets dead clients
through them. Connections silent for serverChannelMaxIdleTimeSeconds are closed, as RocketMQ's
IdleStateHandler does; a sweep once a second also refuses queued requests past their budget.

With `tls=ServerTls(...)` in permissive or enforcing mode, the server accepts by itself and
peeks at each connection's first byte before anything reads it, as RocketMQ's HandshakeHandler
does: 0x16 (a TLS handshake) gets the TLS transport, anything else the plain one (permissive)
or a close (enforcing). Above the transport nothing differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import time
from typing import Protocol

import structlog

from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.connection import Connection
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.tls import (
    HANDSHAKE_MAGIC,
    SSL_SHUTDOWN_TIMEOUT_S,
    ServerTls,
    TlsMode,
)

log = structlog.get_logger(__name__)

SWEEP_INTERVAL_S = 1.0
ACCEPTS_PER_WAKEUP = 64
BACKLOG = 1024
ACCEPT_RETRY_S = 1.0  # after EMFILE and the like, as asyncio's own accept loop waits


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
        tls: ServerTls | None = None,
    ) -> None:
        self.table = table
        self.config = config or ServerConfig()
        self.listener = listener
        self.tls = tls if tls is not None and tls.mode is not TlsMode.DISABLED else None
        self.connections: set[Connection] = set()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._listening: socket.socket | None = None
        self._sniffing: dict[socket.socket, float] = {}  # accepted, first byte not seen: since
        self._adopting: set[asyncio.Task[None]] = set()

    async def start(self, host: str = "0.0.0.0", port: int | None = None) -> int:
        """Listen (port 0: any free one); returns the port."""
        loop = asyncio.get_running_loop()
        port = self.config.listen_port if port is None else port
        if self.tls is None:
            self._server = await loop.create_server(
                self._new_connection, host, port, reuse_address=True
            )
            self.port = self._server.sockets[0].getsockname()[1]
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._listening = socket.create_server((host, port), family=family, backlog=BACKLOG)
            self._listening.setblocking(False)
            self.port = self._listening.getsockname()[1]
            loop.add_reader(self._listening, self._accept)
        self._sweeper = loop.create_task(self._sweep(), name="remoting-sweep")
        log.info(
            "remoting.listening",
            host=host,
            port=self.port,
            tls=self.tls.mode.value if self.tls else TlsMode.DISABLED.value,
        )
        return self.port

    # -- accepting with a look at the first byte (TLS permissive / enforcing) --------------------
    def _accept(self) -> None:
        assert self._listening is not None
        loop = asyncio.get_running_loop()
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, _ = self._listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.error("remoting.accept_failed", port=self.port, error=str(exc))
                    loop.remove_reader(self._listening)
                    loop.call_later(ACCEPT_RETRY_S, self._resume_accepting)
                    return
                continue  # that one went away before we took it
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sniffing[sock] = time.monotonic()
            loop.add_reader(sock, self._sniff, sock)

    def _resume_accepting(self) -> None:
        if self._listening is not None and self._listening.fileno() >= 0:
            asyncio.get_running_loop().add_reader(self._listening, self._accept)

    def _sniff(self, sock: socket.socket) -> None:
        """The first byte is there: peek at it (leaving it for the transport) and hand the
        socket to the TLS or the plain transport, or close it."""
        assert self.tls is not None
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            first = b""
        self._unsniff(sock)
        if not first:
            sock.close()
            return
        is_tls = first[0] == HANDSHAKE_MAGIC
        if not is_tls and self.tls.mode is TlsMode.ENFORCING:
            log.warning("remoting.plain_refused", peer=_peer(sock), port=self.port)
            sock.close()
            return
        task = asyncio.get_running_loop().create_task(self._adopt(sock, is_tls))
        self._adopting.add(task)
        task.add_done_callback(self._adopting.discard)

    def _unsniff(self, sock: socket.socket) -> None:
        if self._sniffing.pop(sock, None) is not None:
            asyncio.get_running_loop().remove_reader(sock)

    async def _adopt(self, sock: socket.socket, is_tls: bool) -> None:
        assert self.tls is not None
        loop = asyncio.get_running_loop()
        peer = _peer(sock)
        try:
            if is_tls:
                await loop.connect_accepted_socket(
                    self._new_connection,
                    sock,
                    ssl=await self.tls.context(),
                    ssl_shutdown_timeout=SSL_SHUTDOWN_TIMEOUT_S,
                )
            else:
                await loop.connect_accepted_socket(self._new_connection, sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except Exception as exc:  # a failed handshake is the peer's business, not ours
            log.warning("remoting.tls_handshake_failed", peer=peer, port=self.port, error=str(exc))
            sock.close()

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
            for sock, since in list(self._sniffing.items()):
                if now - since > idle_s:  # connected and never said a byte
                    self._unsniff(sock)
                    sock.close()
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
        if self._listening is not None:
            asyncio.get_running_loop().remove_reader(self._listening)
            self._listening.close()
        for sock in list(self._sniffing):
            self._unsniff(sock)
            sock.close()
        for task in list(self._adopting):
            task.cancel()
        await asyncio.gather(*self._adopting, return_exceptions=True)
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            await self._server.wait_closed()


def _peer(sock: socket.socket) -> str:
    try:
        host, port, *_ = sock.getpeername()
    except OSError:
        return "?"
    return f"{host}:{port}"
