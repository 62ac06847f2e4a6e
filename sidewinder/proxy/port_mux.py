"""TLS and plaintext gRPC on one port, as RocketMQ's proxy serves them (Java and Go clients
default to TLS, Python and Node to plaintext).

grpcio cannot tell the two apart on one port, so the public port is ours: the first byte of a
connection says which it is (0x16 opens a TLS handshake), and the connection is spliced, bytes
as they come, to the gRPC server's plaintext or TLS port on 127.0.0.1. `tls.server.mode`
decides as on the remoting ports: permissive takes both, enforcing closes plaintext ones.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from sidewinder.remoting.tls import HANDSHAKE_MAGIC, TlsMode

log = structlog.get_logger(__name__)

HIGH_WATER = 1 << 20  # bytes buffered for a slow side before the other stops reading


class _Side(asyncio.Protocol):
    """One end of a splice: what it receives goes to its peer; when its peer's writes back
    up, it stops reading (and the other way round)."""

    def __init__(self) -> None:
        # asyncio.Transport's methods; uvloop's transports do not subclass it.
        self.transport: Any = None
        self.peer: _Side | None = None
        self.pending = bytearray()  # received before the peer was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.transport.set_write_buffer_limits(HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self.pending += data

    def eof_received(self) -> bool:
        peer = self.peer
        if peer is not None and peer.transport is not None and peer.transport.can_write_eof():
            peer.transport.write_eof()
            return True  # half-close: the other way may still carry bytes
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Client(_Side):
    """The client's connection: its first bytes choose the inner port."""

    def __init__(self, mux: PortMux) -> None:
        super().__init__()
        self.mux = mux
        self.connecting: asyncio.Task[None] | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.connecting is None and self.pending:
            is_tls = self.pending[0] == HANDSHAKE_MAGIC
            port = self.mux.inner_port(is_tls)
            if port is None:
                assert self.transport is not None
                self.transport.close()  # enforcing: plaintext; disabled: a TLS handshake
                return
            assert self.transport is not None
            self.transport.pause_reading()
            self.connecting = asyncio.get_running_loop().create_task(self._connect(port))

    async def _connect(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, inner = await loop.create_connection(_Side, "127.0.0.1", port)
        except OSError as exc:
            log.warning("proxy.mux_connect_failed", port=port, error=str(exc))
            if self.transport is not None:
                self.transport.close()
            return
        assert isinstance(inner, _Side)
        if self.transport is None or self.transport.is_closing():
            inner.transport.close()
            return
        self.peer, inner.peer = inner, self
        inner.transport.write(bytes(self.pending))
        self.pending.clear()
        if inner.pending:  # the server spoke first (HTTP/2 SETTINGS) before the link was made
            self.transport.write(bytes(inner.pending))
            inner.pending.clear()
        self.transport.resume_reading()


class PortMux:
    """The public gRPC port, in front of the inner plaintext and TLS ports."""

    def __init__(self, host: str, port: int, plain_port: int, tls_port: int, mode: TlsMode) -> None:
        self.host = host
        self.port = port
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.mode = mode
        self._server: Any = None

    def inner_port(self, is_tls: bool) -> int | None:
        if is_tls:
            return None if self.mode is TlsMode.DISABLED else self.tls_port
        return None if self.mode is TlsMode.ENFORCING else self.plain_port

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
