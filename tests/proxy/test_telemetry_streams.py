"""A gRPC consumer's Telemetry streams as the broker's calls to it see them: a client renews a
broken stream after a pause, and may hold more than one; consumerStatus (GET_CONSUMER_RUNNING_INFO
with jstackEnable) still reaches it through whichever stream is open, sent as raw gRPC calls."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from interop.ports import lease_port_block
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.codes import LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.pop_requests import create_topic_and_group

SERVICE = "/apache.rocketmq.v2.MessagingService/"


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterTarget, str]]:
    port = lease_port_block()
    workdir: Path = tmp_path_factory.mktemp("telemetry-streams")
    target = create_target("sidewinder", workdir, {"grpcServerPort": port}).start()
    try:
        yield target, f"127.0.0.1:{port}"
    finally:
        target.stop()


class Consumer:
    """A push consumer of one group, speaking raw gRPC: Heartbeat, and Telemetry streams that
    answer PrintThreadStackTraceCommand with a text naming the stream."""

    def __init__(self, endpoints: str, topic: str, group: str) -> None:
        self.endpoints = endpoints
        self.client_id = unique("streams-test@")
        self.meta = (("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"))
        self.settings = v2.Settings(
            client_type=v2.ClientType.PUSH_CONSUMER,
            subscription=v2.Subscription(
                group=v2.Resource(name=group),
                subscriptions=[
                    v2.SubscriptionEntry(
                        topic=v2.Resource(name=topic),
                        expression=v2.FilterExpression(type=v2.FilterType.TAG, expression="*"),
                    )
                ],
            ),
        )
        self.group = group
        self.channel = grpc.insecure_channel(endpoints)
        self.streams: dict[str, tuple[Any, queue.Queue[Any]]] = {}
        self.settled: dict[str, threading.Event] = {}

    def heartbeat(self) -> None:
        method = self.channel.unary_unary(
            SERVICE + "Heartbeat",
            request_serializer=v2.HeartbeatRequest.SerializeToString,
            response_deserializer=v2.HeartbeatResponse.FromString,
        )
        request = v2.HeartbeatRequest(
            group=v2.Resource(name=self.group), client_type=v2.ClientType.PUSH_CONSUMER
        )
        answer = method(request, metadata=self.meta, timeout=10)
        assert answer.status.code == v2.Code.OK, answer

    def open(self, name: str) -> None:
        """A Telemetry stream sending the settings; it waits for the front's answer to them."""
        method = self.channel.stream_stream(
            SERVICE + "Telemetry",
            request_serializer=v2.TelemetryCommand.SerializeToString,
            response_deserializer=v2.TelemetryCommand.FromString,
        )
        outgoing: queue.Queue[Any] = queue.Queue()
        outgoing.put(v2.TelemetryCommand(settings=self.settings))

        def requests() -> Iterator[Any]:
            while (command := outgoing.get()) is not None:
                yield command

        call = method(requests(), metadata=self.meta)
        self.streams[name] = (call, outgoing)
        self.settled[name] = threading.Event()
        threading.Thread(target=self._answer, args=(name, call, outgoing), daemon=True).start()
        assert self.settled[name].wait(10), f"no settings came back on stream {name}"

    def _answer(self, name: str, call: Any, outgoing: queue.Queue[Any]) -> None:
        try:
            for command in call:
                if command.HasField("settings"):
                    self.settled[name].set()
                elif command.HasField("print_thread_stack_trace_command"):
                    nonce = command.print_thread_stack_trace_command.nonce
                    outgoing.put(
                        v2.TelemetryCommand(
                            status=v2.Status(code=v2.Code.OK),
                            thread_stack_trace=v2.ThreadStackTrace(
                                nonce=nonce, thread_stack_trace=f"stacks from stream {name}"
                            ),
                        )
                    )
        except grpc.RpcError:
            pass  # the stream was closed

    def close(self, name: str) -> None:
        call, outgoing = self.streams.pop(name)
        outgoing.put(None)
        call.cancel()

    def stop(self) -> None:
        for name in list(self.streams):
            self.close(name)
        self.channel.close()


def running_info_jstack(target: ClusterTarget, group: str, client_id: str) -> str:
    """consumerStatus -s as mqadmin sends it to the broker: the consumer's thread stacks."""
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        {"consumerGroup": group, "clientId": client_id, "jstackEnable": "true"},
        language=LanguageCode.JAVA,
    )
    client = SyncRemotingClient()
    try:
        reply = client.invoke(target.broker_addr, request, 10)
    finally:
        client.close()
    assert reply.code == ResponseCode.SUCCESS, reply
    return str(json.loads(reply.body_bytes)["jstack"])


@pytest.fixture
def consumer(front: tuple[ClusterTarget, str]) -> Iterator[Consumer]:
    target, endpoints = front
    topic, group = unique("StreamsTopic"), unique("StreamsGroup")
    create_topic_and_group(target.broker_addr, topic, group)
    consumer = Consumer(endpoints, topic, group)
    try:
        yield consumer
    finally:
        consumer.stop()


def test_the_older_stream_answers_when_the_newer_one_closed(
    front: tuple[ClusterTarget, str], consumer: Consumer
) -> None:
    target, _ = front
    consumer.open("first")
    consumer.open("second")
    consumer.heartbeat()
    consumer.close("second")
    time.sleep(0.5)  # the front sees the cancelled stream end
    jstack = running_info_jstack(target, consumer.group, consumer.client_id)
    assert jstack == "stacks from stream first"


def test_a_call_waits_for_a_renewed_stream(
    front: tuple[ClusterTarget, str], consumer: Consumer
) -> None:
    """The Java client renews a broken Telemetry stream 3 s later: a call in that gap is
    answered once the new stream is open, within the 4.5 s the front gives the client."""
    target, _ = front
    consumer.open("first")
    consumer.heartbeat()
    consumer.close("first")
    time.sleep(0.5)
    reopen = threading.Timer(1.5, consumer.open, args=("renewed",))
    reopen.start()
    try:
        jstack = running_info_jstack(target, consumer.group, consumer.client_id)
    finally:
        reopen.join()
    assert jstack == "stacks from stream renewed"


def test_a_client_with_no_stream_gets_the_timeout_text(
    front: tuple[ClusterTarget, str], consumer: Consumer
) -> None:
    target, _ = front
    consumer.open("first")
    consumer.heartbeat()
    consumer.close("first")
    time.sleep(0.5)
    started = time.monotonic()
    jstack = running_info_jstack(target, consumer.group, consumer.client_id)
    assert jstack == "(the client sent no thread stacks within 4.5 s)"
    assert time.monotonic() - started >= 4.0  # it waited for a stream before giving up
