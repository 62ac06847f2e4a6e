"""TLS on the remoting port: RocketMQ's three server modes, the client's options, real sockets.

Certificates are made here, in tmp_path (tests/tls_certs.py); none are kept in the repository.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.connection import RemotingConnectError
from sidewinder.remoting.dispatch import ProcessorTable, RequestContext
from sidewinder.remoting.server import RemotingServer
from sidewinder.remoting.tls import (
    ServerTls,
    TlsConfig,
    TlsError,
    TlsMode,
    client_context,
)
from tests.tls_certs import CertSet, make_certs

ECHO = 1001


class Echo:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.reply(0, ext_fields=request.ext_fields, body=request.body)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    servers: list[RemotingServer] = []

    async def start(config: TlsConfig | None, idle_s: int = 120) -> str:
        table = ProcessorTable()
        table.register(Echo(), ECHO)
        tls = ServerTls(config) if config is not None else None
        if tls is not None:
            tls.check()
        server = RemotingServer(
            table, ServerConfig(server_channel_max_idle_time_seconds=idle_s), tls=tls
        )
        await server.start("127.0.0.1", 0)
        servers.append(server)
        return f"127.0.0.1:{server.port}"

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def echo(client: RemotingClient, address: str, body: bytes = b"hello") -> bytes:
    reply = await client.invoke(address, RemotingCommand.request(ECHO, {"k": "v"}, body), 5)
    assert reply.code == ResponseCode.SUCCESS and reply.ext_fields == {"k": "v"}
    return reply.body or b""


def mode(name: str, **more: str) -> TlsConfig:
    return TlsConfig.load({"tls.server.mode": name, "tls.config.file": "/nonexistent", **more})


async def test_permissive_serves_tls_and_plain_on_one_port(serve: Callable[..., object]) -> None:
    address = await serve(mode("permissive"))  # type: ignore[misc]
    secure, plain = RemotingClient(tls=True), RemotingClient()
    big = bytes(range(256)) * 4096  # 1 MiB: many TLS records each way
    assert await echo(secure, address, big) == big
    assert await echo(plain, address) == b"hello"
    connection = await secure.connect(address)
    assert connection.transport is not None
    assert connection.transport.get_extra_info("ssl_object") is not None
    await secure.close()
    await plain.close()


async def test_enforcing_closes_plain_connections(serve: Callable[..., object]) -> None:
    address = await serve(mode("enforcing"))  # type: ignore[misc]
    plain = RemotingClient()
    with pytest.raises(RemotingConnectError):
        await echo(plain, address)
    secure = RemotingClient(tls=True)
    assert await echo(secure, address) == b"hello"
    await plain.close()
    await secure.close()


async def test_disabled_closes_tls_handshakes(serve: Callable[..., object]) -> None:
    address = await serve(mode("disabled"))  # type: ignore[misc]
    with pytest.raises(RemotingConnectError):
        await echo(RemotingClient(tls=True, connect_timeout_s=3), address)
    plain = RemotingClient()
    assert await echo(plain, address) == b"hello"
    await plain.close()


async def test_verified_server_certificate_and_client_certificates(
    serve: Callable[..., object], certs: CertSet
) -> None:
    files = {
        "tls.test.mode.enable": "false",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.keyPassword": certs.password,
        "tls.server.need.client.auth": "require",
        "tls.server.trustCertPath": str(certs.ca_cert),
    }
    address = await serve(mode("enforcing", **files))  # type: ignore[misc]
    client_files = {
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(certs.ca_cert),
        "tls.client.certPath": str(certs.client_cert),
        "tls.client.keyPath": str(certs.client_key),
        "tls.config.file": "/nonexistent",
    }
    trusted = RemotingClient(tls=TlsConfig.load(client_files))
    assert await echo(trusted, address) == b"hello"
    await trusted.close()
    # No client certificate: the server's handshake refuses it.
    no_cert = {k: v for k, v in client_files.items() if "certPath" not in k or "trust" in k}
    no_cert.pop("tls.client.keyPath")
    with pytest.raises(RemotingConnectError):
        await echo(RemotingClient(tls=TlsConfig.load(no_cert)), address)
    # A client that trusts another CA refuses the server.
    other = make_certs(certs.ca_cert.parent / "other")
    wrong_ca = client_files | {"tls.client.trustCertPath": str(other.ca_cert)}
    with pytest.raises(RemotingConnectError):
        await echo(RemotingClient(tls=TlsConfig.load(wrong_ca)), address)


async def test_an_ssl_context_of_our_own(serve: Callable[..., object], certs: CertSet) -> None:
    files = {
        "tls.test.mode.enable": "false",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.keyPassword": certs.password,
    }
    address = await serve(mode("enforcing", **files))  # type: ignore[misc]
    context = ssl.create_default_context(cafile=str(certs.ca_cert))  # checks the host name too
    client = RemotingClient(tls=context)
    assert await echo(client, address) == b"hello"
    await client.close()


async def test_silent_connections_are_closed_after_the_idle_time(
    serve: Callable[..., object],
) -> None:
    address = await serve(mode("permissive"), idle_s=1)  # type: ignore[misc]
    host, port = address.split(":")
    loop = asyncio.get_running_loop()
    sock = socket.create_connection((host, int(port)))
    sock.setblocking(False)
    assert await asyncio.wait_for(loop.sock_recv(sock, 1), 5) == b""  # closed by the server
    sock.close()


def test_the_file_overrides_all_but_mode_and_enable(tmp_path: Path) -> None:
    file = tmp_path / "tls.properties"
    file.write_text(
        "tls.server.mode=disabled\ntls.enable=true\ntls.test.mode.enable=false\n"
        "tls.server.certPath=/from/file.pem\n"
    )
    config = TlsConfig.load(
        {
            "tls.config.file": str(file),
            "tls.server.mode": "Enforcing",
            "tls.server.certPath": "/from/conf.pem",
            "listenPort": "10911",
        }
    )
    assert config.server_mode is TlsMode.ENFORCING
    assert not config.enable and config.client_enabled
    assert not config.test_mode_enable
    assert config.server_cert_path == "/from/file.pem"
    defaults = TlsConfig.load({"tls.config.file": str(tmp_path / "none")})
    assert defaults.server_mode is TlsMode.PERMISSIVE and defaults.test_mode_enable
    assert client_context(defaults).verify_mode is ssl.CERT_NONE


def test_bad_settings_name_their_key() -> None:
    with pytest.raises(TlsError, match=r"tls\.server\.mode"):
        TlsConfig.load({"tls.server.mode": "enforced", "tls.config.file": "/nonexistent"})
    with pytest.raises(TlsError, match=r"tls\.server\.certPath"):
        ServerTls(mode("enforcing", **{"tls.test.mode.enable": "false"})).check()
