"""The gRPC front's transport on the native extension's HTTP/2 thread (native/src/grpc_front.rs):
the thread speaks HTTP/2 and gRPC's framing and queues events; here, on the event loop, each
call gets its handler (grpc_server.Method), its request messages decoded and its answers sent
back by call id. grpc_server.GrpcioTransport is the reference: the same handlers behind both.

A TLS connection (tls.server.mode permissive or enforcing) is relayed by the thread to a
grpc.aio server's TLS port on 127.0.0.1, which serves the same handlers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import structlog
from google.protobuf.message import DecodeError

from sidewinder.proxy import grpc_protocol as v2
from sidewinder.remoting.tls import TlsConfig, TlsMode

log = structlog.get_logger(__name__)

CALL, MESSAGE, HALF_CLOSE, CANCEL = 0, 1, 2, 3  # the native server's event kinds
OK = 0
UNKNOWN = 2
INTERNAL = 13
UNIMPLEMENTED = 12


class Aborted(Exception):
    """A handler's context.abort(code, details): the call ends with that status."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class NativeContext:
    """What the handlers ask of a call, as grpc.aio's ServicerContext answers it."""

    __slots__ = ("_deadline", "_metadata", "_peer")

    def __init__(self, metadata: list[tuple[str, str]], peer: str, timeout_ms: int) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise Aborted(int(code.value[0]), details)


class _Call:
    """One call in flight: its requests as they come, its handler's task once it can run."""

    __slots__ = ("call_id", "context", "got", "method", "requests", "task", "transport")

    def __init__(self, transport: NativeTransport, call_id: int, method: Any, context: Any):
        self.transport = transport
        self.call_id = call_id
        self.method = method
        self.context = context
        self.task: asyncio.Task[None] | None = None
        self.requests: asyncio.Queue[Any] | None = None
        self.got = False
        if method.kind == "bidi":
            self.requests = asyncio.Queue()
            self.task = transport.loop.create_task(self._stream_in())

    def message(self, data: bytes) -> None:
        try:
            request = self.method.request_class.FromString(data)
        except DecodeError as exc:
            self.transport.end(self, INTERNAL, f"cannot parse the request message: {exc}")
            return
        if self.requests is not None:
            self.requests.put_nowait(request)
        elif self.got:
            self.transport.end(self, INTERNAL, "a unary call carries one request message")
        else:
            self.got = True
            self.task = self.transport.loop.create_task(self._answer(request))

    def half_close(self) -> None:
        if self.requests is not None:
            self.requests.put_nowait(None)
        elif not self.got:
            self.transport.end(self, INTERNAL, "the call ended without its request message")

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _incoming(self) -> AsyncIterator[Any]:
        assert self.requests is not None
        while (request := await self.requests.get()) is not None:
            yield request

    async def _answer(self, request: Any) -> None:
        server = self.transport.server
        try:
            if self.method.kind == "unary":
                response = await self.method.handler(request, self.context)
                self.transport.forget(self)
                server.reply(self.call_id, response.SerializeToString())
                return
            async for response in self.method.handler(request, self.context):
                server.send(self.call_id, response.SerializeToString())
        except Exception as exc:
            self.transport.failed(self, exc)
            return
        self.transport.end(self, OK, "")

    async def _stream_in(self) -> None:
        server = self.transport.server
        try:
            async for response in self.method.handler(self._incoming(), self.context):
                server.send(self.call_id, response.SerializeToString())
        except Exception as exc:
            self.transport.failed(self, exc)
            return
        self.transport.end(self, OK, "")


class NativeTransport:
    """MessagingService's `methods` on the native server (`server_class`) at `host:port`."""

    def __init__(
        self,
        server_class: Any,
        methods: Sequence[Any],
        host: str,
        port: int,
        tls: TlsConfig | None,
    ) -> None:
        self.server_class = server_class
        self.methods = {f"/{v2.SERVICE_NAME}/{m.name}": m for m in methods}
        self.method_list = methods
        self.host = host
        self.port = port
        self.tls = tls
        self.server: Any = None
        self.loop = asyncio.get_running_loop()  # made by GrpcFront.start, on the loop
        self._calls: dict[int, _Call] = {}
        self._eventfd = -1
        self._tls_server: Any = None

    async def start(self) -> int:
        from sidewinder.proxy.grpc_server import (
            MAX_MESSAGE_BYTES,
            add_tls_port,
            grpcio_server,
        )

        tls_port = None
        tls_only = False
        if self.tls is not None and self.tls.server_mode is not TlsMode.DISABLED:
            tls_server = grpcio_server(self.method_list)
            tls_port = await add_tls_port(tls_server, self.tls)
            await tls_server.start()
            self._tls_server = tls_server
            tls_only = self.tls.server_mode is TlsMode.ENFORCING
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self.server = self.server_class(
                self.host, self.port, self._eventfd, MAX_MESSAGE_BYTES, tls_port, tls_only
            )
        except OSError:
            os.close(self._eventfd)
            self._eventfd = -1
            raise
        self.loop.add_reader(self._eventfd, self._ready)
        self.port = int(self.server.port)
        return self.port

    async def stop(self, grace_s: float) -> None:
        if self.server is not None:
            self.loop.remove_reader(self._eventfd)
            for call in list(self._calls.values()):
                call.cancel()
            self._calls.clear()
            await self.loop.run_in_executor(None, self.server.close)
            os.close(self._eventfd)
            self.server = None
        if self._tls_server is not None:
            await self._tls_server.stop(grace_s)
            self._tls_server = None

    def _ready(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._eventfd)
        calls = self._calls
        for event in self.server.drain():
            kind, call_id = event[0], event[1]
            if kind == MESSAGE:
                call = calls.get(call_id)
                if call is not None:
                    call.message(event[2])
            elif kind == CALL:
                self._open(call_id, event[2], event[3], event[4], event[5])
            elif kind == HALF_CLOSE:
                call = calls.get(call_id)
                if call is not None:
                    call.half_close()
            else:
                call = calls.pop(call_id, None)
                if call is not None:
                    call.cancel()

    def _open(
        self, call_id: int, path: str, metadata: list[tuple[str, str]], peer: str, timeout: int
    ) -> None:
        method = self.methods.get(path)
        if method is None:
            self.server.finish(call_id, UNIMPLEMENTED, "Method not found!")
            return
        context = NativeContext(metadata, peer, timeout)
        self._calls[call_id] = _Call(self, call_id, method, context)

    def forget(self, call: _Call) -> None:
        self._calls.pop(call.call_id, None)

    def end(self, call: _Call, code: int, details: str) -> None:
        self._calls.pop(call.call_id, None)
        if call.task is not None and not call.task.done() and call.task is not _current():
            call.task.cancel()
        self.server.finish(call.call_id, code, details)

    def failed(self, call: _Call, exc: Exception) -> None:
        if isinstance(exc, Aborted):
            self.end(call, exc.code, exc.details)
            return
        log.exception("proxy.call_failed", rpc=call.method.name, exc_info=exc)
        self.end(call, UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")


def _current() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None
