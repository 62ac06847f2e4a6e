"""The gRPC transport of the front: MessagingService on grpc.aio, each RPC handed to
MessagingActivity with the caller its metadata names. Only this module knows grpc, so the
transport can be replaced without touching what the RPCs do."""

from __future__ import annotations

import asyncio
import functools
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import grpc
import structlog
from google.protobuf import message_factory

from sidewinder.common.native import implementation
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.auth import (
    CALL_ACCOUNT,
    Account,
    Forbidden,
    Needed,
    Unauthorized,
    authenticate,
    needed_for,
    needed_for_settings,
)
from sidewinder.proxy.clients import GrpcClient
from sidewinder.proxy.messaging import Caller, MessagingActivity, status
from sidewinder.proxy.port_mux import PortMux
from sidewinder.remoting.tls import TlsConfig, TlsError, TlsMode, write_self_signed

log = structlog.get_logger(__name__)

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
MAX_MESSAGE_BYTES = 130 << 20  # the clients' own limit on a message, with room for headers
CLIENT_SCAN_S = 10.0  # how often silent clients are looked for
RENEW_SCAN_S = 2.0  # how often receipt handles due for renewal are looked for


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def caller_of(context: Any) -> Caller:
    metadata = _metadata(context)
    remaining = context.time_remaining()
    return Caller(
        client_id=str(metadata.get(CLIENT_ID, "")),
        language=str(metadata.get(LANGUAGE, "")),
        version=str(metadata.get(VERSION, "")),
        namespace=str(metadata.get(NAMESPACE, "")),
        remaining_ms=None if remaining is None else int(remaining * 1000),
    )


def peer_host(peer: str) -> str:
    """The address of a gRPC peer string ("ipv4:10.0.0.7:5123", "ipv6:[::1]:5123")."""
    address = peer.split(":", 1)[1] if ":" in peer else peer
    host = (
        address.rsplit(":", 1)[0] if address.count(":") and not address.endswith("]") else address
    )
    return host.strip("[]")


def _metadata(context: Any) -> dict[str, str]:
    # (key, value) pairs: tuples from the native transport, grpc.aio's _Metadatum otherwise.
    return dict(context.invocation_metadata() or ())


def _no_client_id(response_class: Any) -> Any:
    return response_class(status=status("CLIENT_ID_REQUIRED", f"{CLIENT_ID} is missing"))


def server_key_and_certificate(config: TlsConfig) -> tuple[bytes, bytes]:
    """PEM key and certificate chain for the TLS port: a fresh self-signed pair in test mode
    (tls.test.mode.enable, RocketMQ's default), else tls.server.keyPath / certPath."""
    if config.test_mode_enable:
        with tempfile.TemporaryDirectory(prefix="sidewinder-grpc-tls-") as tmp:
            cert, key = write_self_signed(Path(tmp), "localhost")
            return key.read_bytes(), cert.read_bytes()
    if not config.server_cert_path or not config.server_key_path:
        raise TlsError(
            "tls.server.certPath and tls.server.keyPath are needed when tls.test.mode.enable "
            "is false"
        )
    if config.server_key_password:
        raise TlsError("the gRPC port takes no tls.server.keyPassword: give an unencrypted key")
    try:
        return Path(config.server_key_path).read_bytes(), Path(config.server_cert_path).read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read the gRPC port's key or certificate: {exc}") from None


class Method(NamedTuple):
    """One RPC of MessagingService as a transport serves it: `handler` takes the request (for
    "bidi", an async iterator of them) and a context with grpc.aio's invocation_metadata(),
    time_remaining(), peer() and abort(); a "unary" one returns the response, the others
    yield them."""

    name: str
    kind: Literal["unary", "server_stream", "bidi"]
    handler: Callable[..., Any]
    request_class: Any
    response_class: Any


class GrpcioTransport:
    """MessagingService on a grpc.aio server (the reference transport). With `tls` not
    disabled, the port takes TLS and plaintext connections as tls.server.mode says, through a
    PortMux in front of the server's inner ports."""

    def __init__(
        self, methods: Sequence[Method], host: str, port: int, tls: TlsConfig | None
    ) -> None:
        self.methods = methods
        self.host = host
        self.port = port
        self.tls = tls
        self._server: Any = None
        self._mux: PortMux | None = None

    async def start(self) -> int:
        server = grpcio_server(self.methods)
        tls = self.tls
        if tls is None or tls.server_mode is TlsMode.DISABLED:
            bound = server.add_insecure_port(f"{self.host}:{self.port}")
            if bound == 0:
                raise OSError(f"cannot listen for gRPC on {self.host}:{self.port}")
            await server.start()
        else:
            plain = server.add_insecure_port("127.0.0.1:0")
            secure = await add_tls_port(server, tls)
            await server.start()
            self._mux = PortMux(self.host, self.port, plain, secure, tls.server_mode)
            bound = await self._mux.start()
        self._server, self.port = server, bound
        return bound

    async def stop(self, grace_s: float) -> None:
        if self._mux is not None:
            await self._mux.stop()
            self._mux = None
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None


async def add_tls_port(server: Any, tls: TlsConfig) -> int:
    """A TLS port on 127.0.0.1 for `server`, with the key and certificate `tls` names."""
    loop = asyncio.get_running_loop()
    key, chain = await loop.run_in_executor(None, server_key_and_certificate, tls)
    return int(server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, chain)])))


def grpcio_server(methods: Sequence[Method]) -> Any:
    """A grpc.aio server of `methods`, its ports still to add."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    server.add_generic_rpc_handlers((grpcio_handlers(methods),))
    return server


def grpcio_handlers(methods: Sequence[Method]) -> Any:
    handlers: dict[str, Any] = {}
    for method in methods:
        codec = {
            "request_deserializer": method.request_class.FromString,
            "response_serializer": method.response_class.SerializeToString,
        }
        make = {
            "unary": grpc.unary_unary_rpc_method_handler,
            "server_stream": grpc.unary_stream_rpc_method_handler,
            "bidi": grpc.stream_stream_rpc_method_handler,
        }[method.kind]
        handlers[method.name] = make(method.handler, **codec)
    return grpc.method_handlers_generic_handler(v2.SERVICE_NAME, handlers)


def _native_transport(server_class: Any) -> Any:
    from sidewinder.proxy.native_transport import NativeTransport

    return functools.partial(NativeTransport, server_class)


# The transport in use: HTTP/2 on a native thread, or grpc.aio (the reference).
Transport = implementation("GrpcServer", GrpcioTransport, adapt=_native_transport)


class GrpcFront:
    """MessagingService on `host:port` (0: any free port), over the transport in use, with
    RocketMQ's tls.* settings in `tls`."""

    def __init__(
        self,
        activity: MessagingActivity,
        host: str,
        port: int,
        tls: TlsConfig | None = None,
    ) -> None:
        self.activity = activity
        self.host = host
        self.port = port
        self.tls = tls
        self._transport: Any = None
        self._expiry: asyncio.Task[None] | None = None

    async def start(self) -> int:
        transport = Transport(self._methods(), self.host, self.port, self.tls)
        bound = await transport.start()
        self._transport, self.port = transport, bound
        self._expiry = asyncio.get_running_loop().create_task(self._housekeeping())
        mode = "disabled" if self.tls is None else self.tls.server_mode.value
        log.info(
            "proxy.grpc_listening",
            host=self.host,
            port=bound,
            tls=mode,
            transport=type(transport).__name__,
        )
        return bound

    async def _housekeeping(self) -> None:
        """Handle renewals every RENEW_SCAN_S, silent clients every CLIENT_SCAN_S."""
        rounds = 0
        while True:
            await asyncio.sleep(RENEW_SCAN_S)
            rounds += 1
            expire = rounds % round(CLIENT_SCAN_S / RENEW_SCAN_S) == 0
            try:
                await self.activity.housekeeping(int(time.time() * 1000), expire)
            except Exception:  # keep going whatever one round met
                log.exception("proxy.housekeeping_failed")

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._transport is not None:
            await self._transport.stop(grace_s)
            self._transport = None

    def _methods(self) -> list[Method]:
        methods = []
        for method in v2.SERVICE.methods:
            request_class = message_factory.GetMessageClass(method.input_type)
            response_class = message_factory.GetMessageClass(method.output_type)
            if method.name == "Telemetry":
                methods.append(
                    Method(method.name, "bidi", self._telemetry, request_class, response_class)
                )
                continue
            impl = getattr(self.activity, _snake(method.name), None)
            if impl is None:
                continue  # answered UNIMPLEMENTED, as RocketMQ's proxy answers PullMessage
            if method.server_streaming:
                handler = self._streaming(method.name, impl, response_class)
                kind: Literal["unary", "server_stream"] = "server_stream"
            else:
                handler = self._unary(method.name, impl, response_class)
                kind = "unary"
            methods.append(Method(method.name, kind, handler, request_class, response_class))
        return methods

    def _admitted(self, context: Any, needed: Needed) -> tuple[str, str] | None:
        """With ACL on: set the call's account, or say why not (a v2 code and a message):
        credentials that fail, or an account without the permissions `needed`."""
        secret_of = self.activity.secret_of
        if secret_of is None:
            return None
        try:
            account = authenticate(_metadata(context), secret_of)
        except Unauthorized as exc:
            return "UNAUTHORIZED", str(exc)
        CALL_ACCOUNT.set(account)
        return self._permitted(account, needed, context)

    def _permitted(self, account: Account, needed: Needed, context: Any) -> tuple[str, str] | None:
        permit = self.activity.permit
        if permit is None or not needed:
            return None
        try:
            permit(account.access_key, needed, peer_host(context.peer()))
        except Forbidden as exc:
            return "FORBIDDEN", str(exc)
        return None

    def _unary(self, rpc: str, impl: Callable[..., Any], response_class: Any) -> Callable[..., Any]:
        async def handle(request: Any, context: Any) -> Any:
            caller = caller_of(context)
            if not caller.client_id:
                return _no_client_id(response_class)
            if self.activity.secret_of is not None:
                refused = self._admitted(context, needed_for(rpc, request))
                if refused is not None:
                    return response_class(status=status(*refused))
            try:
                return await impl(request, caller)
            except Exception as exc:  # our bug: the client gets a status, not a reset stream
                log.exception("proxy.rpc_failed", rpc=impl.__name__)
                return response_class(status=status("INTERNAL_SERVER_ERROR", str(exc)))

        return handle

    def _streaming(
        self, rpc: str, impl: Callable[..., Any], response_class: Any
    ) -> Callable[..., Any]:
        async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
            caller = caller_of(context)
            if not caller.client_id:
                yield _no_client_id(response_class)
                return
            if self.activity.secret_of is not None:
                refused = self._admitted(context, needed_for(rpc, request))
                if refused is not None:
                    yield response_class(status=status(*refused))
                    return
            try:
                async for response in impl(request, caller):
                    yield response
            except Exception as exc:
                log.exception("proxy.rpc_failed", rpc=impl.__name__)
                yield response_class(status=status("INTERNAL_SERVER_ERROR", str(exc)))

        return handle

    async def _telemetry(self, commands: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """The client's settings answered with the merged ones; then, while the stream is
        open, the commands the front pushes to the client (client_calls.py), whose answers
        (thread stacks, verify results) come back on the same stream."""
        caller = caller_of(context)
        if not caller.client_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{CLIENT_ID} is missing")
            return
        refused = self._admitted(context, [])
        if refused is not None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, refused[1])
            return
        account = CALL_ACCOUNT.get()
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        attached: list[GrpcClient] = []

        async def read() -> None:
            try:
                async for command in commands:
                    if command.HasField("settings"):
                        if account is not None:
                            needed = needed_for_settings(command.settings)
                            refused = self._permitted(account, needed, context)
                            if refused is not None:
                                outbox.put_nowait(v2.TelemetryCommand(status=status(*refused)))
                                continue
                        client = await self.activity.settings_arrived(command.settings, caller)
                        client.attach(outbox)
                        attached.append(client)
                        outbox.put_nowait(
                            v2.TelemetryCommand(status=status(), settings=client.settings)
                        )
                    else:
                        self.activity.client_calls.answered(command)
            except Exception as exc:  # the stream broke: the client reconnects on its own
                log.info("proxy.telemetry_ended", client=caller.client_id, error=str(exc))
            finally:
                outbox.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while (command := await outbox.get()) is not None:
                yield command
        finally:
            reader.cancel()
            for client in attached:
                client.detach(outbox)
