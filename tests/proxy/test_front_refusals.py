"""Bad input at the gRPC front, sent as raw gRPC calls: each gets the v2 code RocketMQ's proxy
answers it with, and a message naming the problem; the front keeps serving."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from interop.ports import lease_port_block
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.remoting.client import SyncRemotingClient
from tests.interop.pop_requests import create_group_request, create_topic_request

SERVICE = "/apache.rocketmq.v2.MessagingService/"
META = (("x-mq-client-id", "refusals-test@1"), ("x-mq-language", "PYTHON"))


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterTarget, str]]:
    port = lease_port_block()
    workdir: Path = tmp_path_factory.mktemp("front-refusals")
    target = create_target("sidewinder", workdir, {"grpcServerPort": port}).start()
    client = SyncRemotingClient()
    try:
        for request in (
            create_topic_request("RefusalTopic", 1),
            create_topic_request("DelayOnly", 1, "DELAY"),
            create_topic_request("GzipTopic", 1),
            create_group_request("RG"),
        ):
            assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
        yield target, f"127.0.0.1:{port}"
    finally:
        client.close()
        target.stop()


def call(endpoints: str, rpc: str, request: Any, response: Any, metadata: Any = META) -> Any:
    with grpc.insecure_channel(endpoints) as channel:
        method = channel.unary_unary(
            SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        return method(request, metadata=metadata, timeout=10)


def receive(endpoints: str, request: Any, timeout_s: float = 30, meta: Any = None) -> list[Any]:
    with grpc.insecure_channel(endpoints) as channel:
        method = channel.unary_stream(
            SERVICE + "ReceiveMessage",
            request_serializer=type(request).SerializeToString,
            response_deserializer=v2.ReceiveMessageResponse.FromString,
        )
        return list(method(request, metadata=meta or META, timeout=timeout_s))


def code_of(answer: Any) -> str:
    return str(v2.Code.Name(answer.status.code))


def message(**user: str) -> Any:
    return v2.Message(
        topic=v2.Resource(name="RefusalTopic"),
        user_properties=user,
        system_properties=v2.SystemProperties(message_id="01C0A80001000000000000000000000001"),
        body=b"x",
    )


def test_a_call_without_a_client_id_is_refused(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    request = v2.SendMessageRequest(messages=[message()])
    answer = call(endpoints, "SendMessage", request, v2.SendMessageResponse, metadata=())
    assert code_of(answer) == "CLIENT_ID_REQUIRED" and "x-mq-client-id" in answer.status.message


def test_sends_the_proxy_refuses(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    reserved = call(
        endpoints,
        "SendMessage",
        v2.SendMessageRequest(messages=[message(UNIQ_KEY="mine")]),
        v2.SendMessageResponse,
    )
    assert code_of(reserved) == "ILLEGAL_MESSAGE_PROPERTY_KEY"
    assert "UNIQ_KEY" in reserved.status.message
    empty = call(endpoints, "SendMessage", v2.SendMessageRequest(), v2.SendMessageResponse)
    assert code_of(empty) == "BAD_REQUEST"
    good = call(
        endpoints,
        "SendMessage",
        v2.SendMessageRequest(messages=[message()]),
        v2.SendMessageResponse,
    )
    assert code_of(good) == "OK" and good.entries[0].offset >= 0


def test_routes_of_bad_and_unknown_topics(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    for name, code in (
        ("bad topic!", "ILLEGAL_TOPIC"),
        ("T" * 128, "ILLEGAL_TOPIC"),
        ("NoSuchTopic", "TOPIC_NOT_FOUND"),
    ):
        request = v2.QueryRouteRequest(topic=v2.Resource(name=name))
        answer = call(endpoints, "QueryRoute", request, v2.QueryRouteResponse)
        assert code_of(answer) == code, (name, answer)


def test_receives_the_proxy_refuses(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    queue = v2.MessageQueue(topic=v2.Resource(name="RefusalTopic"), id=-1)

    def asked(group: str, invisible_s: int, batch: int = 16) -> str:
        request = v2.ReceiveMessageRequest(
            group=v2.Resource(name=group), message_queue=queue, batch_size=batch
        )
        request.invisible_duration.FromSeconds(invisible_s)
        (first, *_) = receive(endpoints, request)
        return code_of(first)

    assert asked("G" * 256, 30) == "ILLEGAL_CONSUMER_GROUP"
    assert asked("RG", 1) == "ILLEGAL_INVISIBLE_TIME"
    assert asked("RG", 13 * 3600) == "ILLEGAL_INVISIBLE_TIME"
    assert asked("RG", 30, batch=0) == "BAD_REQUEST"
    assert asked("RG", 30, batch=64) in ("OK", "MESSAGE_NOT_FOUND")  # cut to 32, as RocketMQ
    unset = v2.ReceiveMessageRequest(
        group=v2.Resource(name="RG"), message_queue=queue, batch_size=16
    )
    (first, *_) = receive(endpoints, unset)
    assert code_of(first) == "ILLEGAL_INVISIBLE_TIME"  # neither auto-renew nor a time

    # A deadline too near for the shortest poll (5 s): ILLEGAL_POLLING_TIME, or BAD_REQUEST
    # to a client older than 5.0.3, which knows no such code (RocketMQ's proxy does the same).
    hurried = v2.ReceiveMessageRequest(
        group=v2.Resource(name="RG"), message_queue=queue, batch_size=16
    )
    hurried.invisible_duration.FromSeconds(30)
    for version, code in (("5.0.8", "ILLEGAL_POLLING_TIME"), ("5.0.0", "BAD_REQUEST")):
        meta = (*META, ("x-mq-client-version", version))
        (first, *_) = receive(endpoints, hurried, timeout_s=3, meta=meta)
        assert code_of(first) == code, version


def test_handles_that_are_not_handles(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    ack = v2.AckMessageRequest(
        group=v2.Resource(name="RG"),
        topic=v2.Resource(name="RefusalTopic"),
        entries=[v2.AckMessageEntry(message_id="m", receipt_handle="not a handle")],
    )
    answer = call(endpoints, "AckMessage", ack, v2.AckMessageResponse)
    assert code_of(answer) == "INVALID_RECEIPT_HANDLE"
    assert [code_of(e) for e in answer.entries] == ["INVALID_RECEIPT_HANDLE"]
    change = v2.ChangeInvisibleDurationRequest(
        group=v2.Resource(name="RG"),
        topic=v2.Resource(name="RefusalTopic"),
        receipt_handle="not a handle",
        message_id="m",
    )
    # Below 0 and above 12 h are refused before the handle is read; 0 is a nack (taken).
    for seconds in (-1, 13 * 3600):
        change.invisible_duration.FromSeconds(seconds)
        answer = call(
            endpoints, "ChangeInvisibleDuration", change, v2.ChangeInvisibleDurationResponse
        )
        assert code_of(answer) == "ILLEGAL_INVISIBLE_TIME", seconds
    change.invisible_duration.FromSeconds(0)
    answer = call(endpoints, "ChangeInvisibleDuration", change, v2.ChangeInvisibleDurationResponse)
    assert code_of(answer) == "INVALID_RECEIPT_HANDLE"
    end = v2.EndTransactionRequest(
        topic=v2.Resource(name="RefusalTopic"), message_id="m", transaction_id="short"
    )
    answer = call(endpoints, "EndTransaction", end, v2.EndTransactionResponse)
    assert code_of(answer) == "INVALID_TRANSACTION_ID"


def test_rpcs_rocketmq_5_3_does_not_serve_are_unimplemented(
    front: tuple[ClusterTarget, str],
) -> None:
    _, endpoints = front
    with pytest.raises(grpc.RpcError) as refused:
        call(endpoints, "UpdateOffset", v2.UpdateOffsetRequest(), v2.UpdateOffsetResponse)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_telemetry_stream_without_a_client_id_is_refused(
    front: tuple[ClusterTarget, str],
) -> None:
    _, endpoints = front
    with grpc.insecure_channel(endpoints) as channel:
        method = channel.stream_stream(
            SERVICE + "Telemetry",
            request_serializer=v2.TelemetryCommand.SerializeToString,
            response_deserializer=v2.TelemetryCommand.FromString,
        )
        settings = v2.TelemetryCommand(settings=v2.Settings(client_type=v2.ClientType.PRODUCER))
        with pytest.raises(grpc.RpcError) as refused:
            list(method(iter([settings]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_message_of_another_type_than_the_topics_is_refused(
    front: tuple[ClusterTarget, str],
) -> None:
    _, endpoints = front
    normal = message()
    normal.topic.name = "DelayOnly"
    answer = call(
        endpoints, "SendMessage", v2.SendMessageRequest(messages=[normal]), v2.SendMessageResponse
    )
    assert code_of(answer) == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    assert "expected type is DELAY, but actual type is NORMAL" in answer.status.message
    delayed = message()
    delayed.topic.name = "DelayOnly"
    delayed.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
    answer = call(
        endpoints, "SendMessage", v2.SendMessageRequest(messages=[delayed]), v2.SendMessageResponse
    )
    assert code_of(answer) == "OK", answer


def test_an_expired_handle_is_refused(front: tuple[ClusterTarget, str]) -> None:
    _, endpoints = front
    long_ago = "0 1000 15000 0 0 broker-a 0 0"  # popped in 1970, invisible for 15 s
    ack = v2.AckMessageRequest(
        group=v2.Resource(name="RG"),
        topic=v2.Resource(name="RefusalTopic"),
        entries=[v2.AckMessageEntry(message_id="m", receipt_handle=long_ago)],
    )
    answer = call(endpoints, "AckMessage", ack, v2.AckMessageResponse)
    assert code_of(answer) == "INVALID_RECEIPT_HANDLE" and "expired" in answer.status.message


def test_a_gzip_body_is_stored_plain(front: tuple[ClusterTarget, str]) -> None:
    """RocketMQ 5's Java client sends bodies over 4 KiB GZIP-encoded: any consumer, a 4.x one
    too, reads what the producer wrote."""
    _, endpoints = front
    body = b"compressible " * 1000
    packed = message()
    packed.topic.name = "GzipTopic"
    packed.body = gzip.compress(body)
    packed.system_properties.body_encoding = v2.Encoding.GZIP
    sent = call(
        endpoints, "SendMessage", v2.SendMessageRequest(messages=[packed]), v2.SendMessageResponse
    )
    assert code_of(sent) == "OK", sent
    request = v2.ReceiveMessageRequest(
        group=v2.Resource(name="RG"),
        message_queue=v2.MessageQueue(topic=v2.Resource(name="GzipTopic"), id=-1),
        batch_size=16,
    )
    request.invisible_duration.FromSeconds(30)
    got = [a.message for a in receive(endpoints, request) if a.HasField("message")]
    assert [m.body for m in got] == [body]
    assert got[0].system_properties.body_encoding == v2.Encoding.IDENTITY
    broken = message()
    broken.topic.name = "GzipTopic"
    broken.system_properties.body_encoding = v2.Encoding.GZIP
    answer = call(
        endpoints, "SendMessage", v2.SendMessageRequest(messages=[broken]), v2.SendMessageResponse
    )
    assert code_of(answer) == "MESSAGE_CORRUPTED"
