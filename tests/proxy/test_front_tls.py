"""TLS and plaintext gRPC on one port, as RocketMQ's proxy serves them: a plaintext client and
a TLS client reach the same port (tls.server.mode permissive); enforcing closes plaintext."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from interop.sidewinder import MqProxy, SidewinderNamesrv
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.remoting.tls import write_self_signed

ROUTE = "/apache.rocketmq.v2.MessagingService/QueryRoute"
META = (("x-mq-client-id", "tls-test@1"),)


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = SidewinderNamesrv(tmp_path_factory.mktemp("tls-namesrv")).start()
    try:
        yield server.addr
    finally:
        server.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_self_signed(tmp_path_factory.mktemp("tls-cert"), "localhost")


def proxy(tmp_path: Path, namesrv: str, certificate: tuple[Path, Path], mode: str) -> MqProxy:
    cert, key = certificate
    conf = {
        "tls.server.mode": mode,
        "tls.test.mode.enable": "false",
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
    }
    return MqProxy(tmp_path, namesrv, conf).start()


def ask_route(channel: Any) -> Any:
    method = channel.unary_unary(
        ROUTE,
        request_serializer=v2.QueryRouteRequest.SerializeToString,
        response_deserializer=v2.QueryRouteResponse.FromString,
    )
    request = v2.QueryRouteRequest(topic=v2.Resource(name="NoSuchTopic"))
    return method(request, metadata=META, timeout=10)


def tls_channel(endpoints: str, cert: Path) -> Any:
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    return grpc.secure_channel(
        endpoints, credentials, options=[("grpc.ssl_target_name_override", "localhost")]
    )


def test_plaintext_and_tls_clients_share_the_port(
    tmp_path: Path, namesrv: str, certificate: tuple[Path, Path]
) -> None:
    front = proxy(tmp_path, namesrv, certificate, "permissive")
    try:
        with grpc.insecure_channel(front.endpoints) as channel:
            plain = ask_route(channel)
        with tls_channel(front.endpoints, certificate[0]) as channel:
            secure = ask_route(channel)
        for answer in (plain, secure):  # served to the end: the front's own answer
            assert v2.Code.Name(answer.status.code) == "TOPIC_NOT_FOUND", answer
    finally:
        front.stop()


def test_enforcing_takes_tls_only(
    tmp_path: Path, namesrv: str, certificate: tuple[Path, Path]
) -> None:
    front = proxy(tmp_path, namesrv, certificate, "enforcing")
    try:
        with tls_channel(front.endpoints, certificate[0]) as channel:
            assert v2.Code.Name(ask_route(channel).status.code) == "TOPIC_NOT_FOUND"
        with (
            grpc.insecure_channel(front.endpoints) as channel,
            pytest.raises(grpc.RpcError) as refused,
        ):
            ask_route(channel)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        front.stop()
