"""The remoting client: one connection per address, requests matched to responses by opaque.

    client = RemotingClient()
    reply = await client.invoke("127.0.0.1:9876", request, timeout_s=3)
    client.invoke_oneway(addr, request)           # after `await client.connect(addr)`
    await client.close()

`RemotingClient(tls=True)` connects with TLS as RocketMQ's client does with -Dtls.enable=true;
`tls=` also takes a TlsConfig (RocketMQ's tls.client.* settings) or an ssl.SSLContext
(remoting/tls.py).

Timeouts raise RemotingTimeoutError and drop the pending entry; a connection that closes fails
its pending calls at once with RemotingConnectError. Requests the server sends to us go to the
client's own processor table (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...).
`SyncRemotingClient` wraps it for callers without an event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from sidewinder.common.loop_thread import LoopThread
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.codec import DEFAULT_MAX_FRAME
from sidewinder.remoting.connection import Connection, RemotingConnectError
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.tls import SSL_SHUTDOWN_TIMEOUT_S, TlsOption, resolve_client_tls

T = TypeVar("T")
# Called with the address and each request just before it is sent (RocketMQ's RPCHook
# doBeforeRequest): the ACL signature is added this way.
RequestHook = Callable[[str, RemotingCommand], None]


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(
        self,
        table: ProcessorTable | None = None,
        *,
        connect_timeout_s: float = 3.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        before_request: RequestHook | None = None,
        tls: TlsOption = None,
    ) -> None:
        self.table = table
        self.before_request = before_request
        self.connect_timeout_s = connect_timeout_s
        self.max_frame = max_frame
        self.ssl_context = resolve_client_tls(tls)
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}

    async def connect(self, address: str) -> Connection:
        """The open connection to `address`, made on first use and reused after."""
        existing = self._connections.get(address)
        if (
            existing is not None
            and existing.transport is not None
            and not existing.transport.is_closing()
        ):
            return existing
        in_flight = self._connecting.get(address)
        if in_flight is not None:
            return await asyncio.shield(in_flight)
        loop = asyncio.get_running_loop()
        attempt: asyncio.Future[Connection] = loop.create_future()
        self._connecting[address] = attempt
        try:
            host, port = split_address(address)
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    _, connection = await loop.create_connection(
                        lambda: Connection(
                            self.table, max_frame=self.max_frame, on_close=self._forget
                        ),
                        host,
                        port,
                        ssl=self.ssl_context,
                        server_hostname=host if self.ssl_context is not None else None,
                        ssl_shutdown_timeout=(
                            SSL_SHUTDOWN_TIMEOUT_S if self.ssl_context is not None else None
                        ),
                    )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                raise RemotingConnectError(f"cannot connect to {address}: {exc}") from None
            connection.remote_address = address
            self._connections[address] = connection
            attempt.set_result(connection)
            return connection
        except BaseException as exc:
            attempt.set_exception(exc)
            attempt.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._connecting[address]

    def _forget(self, connection: Connection) -> None:
        if self._connections.get(connection.remote_address) is connection:
            del self._connections[connection.remote_address]

    async def invoke(
        self, address: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        connection = await self.connect(address)
        if self.before_request is not None:
            self.before_request(address, request)
        return await connection.invoke(request, timeout_s)

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        connection = await self.connect(address)
        if self.before_request is not None:
            self.before_request(address, request)
        connection.invoke_oneway(request)

    def invoke_with_callback(
        self,
        address: str,
        request: RemotingCommand,
        timeout_s: float,
        callback: Callable[[RemotingCommand | None, BaseException | None], Any],
    ) -> asyncio.Task[None]:
        """Send now; `callback(response, error)` runs on the loop when it is done."""

        async def run() -> None:
            try:
                response = await self.invoke(address, request, timeout_s)
            except Exception as exc:
                callback(None, exc)
            else:
                callback(response, None)

        return asyncio.get_running_loop().create_task(run())

    async def close(self) -> None:
        connections = list(self._connections.values())
        for connection in connections:
            connection.close()
        for connection in connections:
            await connection.closed


class SyncRemotingClient:
    """A blocking facade: the async client on its own event loop in a daemon thread."""

    def __init__(self, **options: Any) -> None:
        self._loop = LoopThread("sync-remoting-client")
        self._client: RemotingClient = self._loop.call(self._make(options))

    @staticmethod
    async def _make(options: dict[str, Any]) -> RemotingClient:
        return RemotingClient(**options)

    def invoke(self, address: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return self._loop.call(self._client.invoke(address, request, timeout_s))

    def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        self._loop.call(self._client.invoke_oneway(address, request))

    def close(self) -> None:
        self._loop.call(self._client.close())
        self._loop.stop()
