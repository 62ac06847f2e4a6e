"""What the gRPC front's transport answers for, on both transports: the native HTTP/2 thread
(the default) and grpc.aio (the reference, with SIDEWINDER_NATIVE=0). The same raw gRPC calls
must get the same answers from both: unknown methods, many calls in flight on one connection,
streamed answers larger than HTTP/2's flow-control windows, compressed requests, cancelled and
deadlined calls, and TLS beside plaintext on one port."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from interop.ports import lease_port_block
from interop.target import ClusterTarget, create_target
from sidewinder.proxy import grpc_protocol as v2
from tests.helpers import unique
from tests.interop.pop_requests import create_topic_and_group

SERVICE = "/apache.rocketmq.v2.MessagingService/"
META = (("x-mq-client-id", "transport-test@1"), ("x-mq-language", "PYTHON"))


@pytest.fixture(scope="module", params=["native", "grpcio"])
def front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTarget, str]]:
    port = lease_port_block()
    workdir: Path = tmp_path_factory.mktemp(f"transport-{request.param}")
    with pytest.MonkeyPatch.context() as env:
        # Read by the broker's process at its start: which transport serves the front.
        env.setenv("SIDEWINDER_NATIVE", "1" if request.param == "native" else "0")
        target = create_target("sidewinder", workdir, {"grpcServerPort": port}).start()
    try:
        transport = "NativeTransport" if request.param == "native" else "GrpcioTransport"
        said = (workdir / "broker.out").read_text()
        assert f"transport={transport}" in said or f'"transport": "{transport}"' in said, said
        yield target, f"127.0.0.1:{port}"
    finally:
        target.stop()


def topic_and_group(target: ClusterTarget) -> tuple[str, str]:
    topic, group = unique("TransportTopic"), unique("TransportGroup")
    create_topic_and_group(target.broker_addr, topic, group)
    return topic, group


def unary(channel: grpc.Channel, rpc: str, response: Any) -> Any:
    return channel.unary_unary(
        SERVICE + rpc,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString,
    )


def receiver(channel: grpc.Channel) -> Any:
    return channel.unary_stream(
        SERVICE + "ReceiveMessage",
        request_serializer=v2.ReceiveMessageRequest.SerializeToString,
        response_deserializer=v2.ReceiveMessageResponse.FromString,
    )


def receive_request(topic: str, group: str, batch: int, poll_s: int = 20) -> Any:
    request = v2.ReceiveMessageRequest(
        group=v2.Resource(name=group),
        message_queue=v2.MessageQueue(topic=v2.Resource(name=topic), id=-1),
        batch_size=batch,
    )
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromSeconds(poll_s)
    return request


def message(topic: str, body: bytes, n: int) -> Any:
    return v2.Message(
        topic=v2.Resource(name=topic),
        system_properties=v2.SystemProperties(message_id=f"01C0A8000100000000000000{n:010d}"),
        body=body,
    )


def test_an_unknown_method_is_unimplemented(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    with grpc.insecure_channel(endpoints) as channel, pytest.raises(grpc.RpcError) as refused:
        unary(channel, "NoSuchCall", v2.QueryRouteResponse)(
            v2.QueryRouteRequest(), metadata=META, timeout=10
        )
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_many_calls_in_flight_on_one_connection(front: tuple[ClusterTarget, str]) -> None:
    target, endpoints = front
    topic, _ = topic_and_group(target)
    with grpc.insecure_channel(endpoints) as channel:
        send = unary(channel, "SendMessage", v2.SendMessageResponse)
        futures = [
            send.future(
                v2.SendMessageRequest(messages=[message(topic, b"m%d" % n, n)]),
                metadata=META,
                timeout=30,
            )
            for n in range(400)
        ]
        answers = [f.result() for f in futures]
    assert [a.status.code for a in answers] == [v2.Code.OK] * 400
    offsets = sorted(a.entries[0].offset for a in answers)
    assert offsets == list(range(400))


def test_answers_larger_than_the_windows_arrive_whole(
    front: tuple[ClusterTarget, str],
) -> None:
    """Messages of 1 MiB, over HTTP/2's initial 64 KiB windows, each way: the client's sends,
    and the front's streamed ReceiveMessage answers, read slowly."""
    target, endpoints = front
    topic, group = topic_and_group(target)
    bodies = [bytes([n]) * (1 << 20) for n in range(6)]
    got: list[bytes] = []
    with grpc.insecure_channel(endpoints) as channel:
        send = unary(channel, "SendMessage", v2.SendMessageResponse)
        for n, body in enumerate(bodies):
            answer = send(
                v2.SendMessageRequest(messages=[message(topic, body, n)]),
                metadata=META,
                timeout=30,
            )
            assert answer.status.code == v2.Code.OK, answer
        deadline = time.monotonic() + 60
        while len(got) < len(bodies) and time.monotonic() < deadline:
            # The store hands a pop at most 256 KiB of messages, and always one.
            for answer in receiver(channel)(
                receive_request(topic, group, 32, poll_s=5), metadata=META, timeout=30
            ):
                if answer.HasField("message"):
                    got.append(answer.message.body)
                    time.sleep(0.05)
    assert sorted(got) == bodies


def test_a_gzip_compressed_request_is_read(front: tuple[ClusterTarget, str]) -> None:
    target, endpoints = front
    topic, group = topic_and_group(target)
    body = b"compress me " * 2000
    with grpc.insecure_channel(endpoints, compression=grpc.Compression.Gzip) as channel:
        answer = unary(channel, "SendMessage", v2.SendMessageResponse)(
            v2.SendMessageRequest(messages=[message(topic, body, 1)]), metadata=META, timeout=10
        )
        assert answer.status.code == v2.Code.OK, answer
        got = [
            a.message.body
            for a in receiver(channel)(receive_request(topic, group, 4), metadata=META, timeout=30)
            if a.HasField("message")
        ]
    assert got == [body]


def test_a_cancelled_long_poll_leaves_the_front_serving(
    front: tuple[ClusterTarget, str],
) -> None:
    target, endpoints = front
    topic, group = topic_and_group(target)
    with grpc.insecure_channel(endpoints) as channel:
        polls = [
            receiver(channel)(receive_request(topic, group, 4), metadata=META, timeout=30)
            for _ in range(20)
        ]
        time.sleep(0.5)
        for poll in polls:
            poll.cancel()
        for poll in polls:
            with pytest.raises(grpc.RpcError) as ended:
                list(poll)
            assert ended.value.code() == grpc.StatusCode.CANCELLED
        started = time.monotonic()
        answer = unary(channel, "SendMessage", v2.SendMessageResponse)(
            v2.SendMessageRequest(messages=[message(topic, b"after", 1)]), metadata=META, timeout=10
        )
        assert answer.status.code == v2.Code.OK, answer
        route = unary(channel, "QueryRoute", v2.QueryRouteResponse)(
            v2.QueryRouteRequest(topic=v2.Resource(name=topic)), metadata=META, timeout=10
        )
        assert route.status.code == v2.Code.OK, route
    # Not held behind the cancelled polls. (A poll the broker still holds may take "after":
    # the client cancelled its side only, as with RocketMQ's proxy.)
    assert time.monotonic() - started < 5


def test_a_long_poll_ends_within_its_deadline(front: tuple[ClusterTarget, str]) -> None:
    """The call's grpc-timeout reaches the handler: a 20 s poll under an 8 s deadline comes
    back (empty) before the deadline, not with DEADLINE_EXCEEDED."""
    target, endpoints = front
    topic, group = topic_and_group(target)
    started = time.monotonic()
    with grpc.insecure_channel(endpoints) as channel:
        answers = list(
            receiver(channel)(receive_request(topic, group, 4), metadata=META, timeout=8)
        )
    assert time.monotonic() - started < 8
    assert [a.status.code for a in answers if a.HasField("status")] == [v2.Code.MESSAGE_NOT_FOUND]


def test_tls_and_plaintext_on_one_port(front: tuple[ClusterTarget, str]) -> None:
    """RocketMQ's default tls.server.mode (permissive, test certificates): a TLS client and a
    plaintext one on the same port get the same answer."""
    target, endpoints = front
    topic, _ = topic_and_group(target)
    request = v2.QueryRouteRequest(topic=v2.Resource(name=topic))
    with grpc.insecure_channel(endpoints) as channel:
        plain = unary(channel, "QueryRoute", v2.QueryRouteResponse)(
            request, metadata=META, timeout=10
        )
    host, port = endpoints.rsplit(":", 1)
    pem = _server_certificate(host, int(port))
    credentials = grpc.ssl_channel_credentials(root_certificates=pem)
    options = (("grpc.ssl_target_name_override", "localhost"),)
    with grpc.secure_channel(endpoints, credentials, options=options) as channel:
        secure = unary(channel, "QueryRoute", v2.QueryRouteResponse)(
            request, metadata=META, timeout=10
        )
    assert plain.status.code == secure.status.code == v2.Code.OK
    assert [q.id for q in plain.message_queues] == [q.id for q in secure.message_queues]


def _server_certificate(host: str, port: int) -> bytes:
    import ssl

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: ssl.get_server_certificate((host, port)).encode()).result(
            timeout=10
        )


def _random_frames(seeded: Any) -> bytes:
    """HTTP/2's preface, then frames of random types, flags, stream ids and payloads, some
    with a length that lies, some cut short."""
    out = bytearray(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    for _ in range(seeded.randrange(1, 8)):
        payload = bytes(seeded.randrange(256) for _ in range(seeded.randrange(0, 64)))
        length = len(payload) if seeded.random() < 0.7 else seeded.randrange(1 << 24)
        kind = seeded.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, seeded.randrange(256)])
        stream = seeded.choice([0, 1, 3, 2, seeded.randrange(1 << 31)])
        out += length.to_bytes(3, "big") + bytes([kind, seeded.randrange(256)])
        out += stream.to_bytes(4, "big") + payload
    if seeded.random() < 0.3:
        del out[seeded.randrange(24, len(out)) :]
    return bytes(out)


def _garbage(endpoints: str, rounds: int) -> None:
    import random
    import socket

    host, port = endpoints.rsplit(":", 1)
    seeded = random.Random(20261128)
    for n in range(rounds):
        if n % 2:
            sent = _random_frames(seeded)
        else:
            sent = bytes(seeded.randrange(256) for _ in range(seeded.randrange(1, 400)))
            if sent[0] == 0x16:
                sent = b"\x00" + sent  # not a TLS record: that goes to the TLS port
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            try:
                raw.sendall(sent)
                raw.shutdown(socket.SHUT_WR)
                while raw.recv(65536):
                    pass
            except OSError:
                pass  # closed on us (reset, or gone before the shutdown): what garbage gets


def _still_serving(target: ClusterTarget, endpoints: str) -> None:
    topic, _ = topic_and_group(target)
    with grpc.insecure_channel(endpoints) as channel:
        route = unary(channel, "QueryRoute", v2.QueryRouteResponse)(
            v2.QueryRouteRequest(topic=v2.Resource(name=topic)), metadata=META, timeout=10
        )
    assert route.status.code == v2.Code.OK


def test_garbage_on_the_port_leaves_the_front_serving(front: tuple[ClusterTarget, str]) -> None:
    """Random bytes, and random HTTP/2 frames after the preface: each connection is closed,
    none takes the front down."""
    target, endpoints = front
    _garbage(endpoints, 80)
    _still_serving(target, endpoints)


@pytest.mark.slow
def test_much_garbage_on_the_port_leaves_the_front_serving(
    front: tuple[ClusterTarget, str],
) -> None:
    target, endpoints = front
    _garbage(endpoints, 5000)
    _still_serving(target, endpoints)
