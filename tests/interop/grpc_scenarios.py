"""What the gRPC client scenarios share (test_grpc_clients.py, test_grpc_node5.py): a topic and
group made on a target's broker, a simple consumer's checked run."""

from __future__ import annotations

from typing import Any

from interop.drivers import PYTHON5, RUST5, DriverRun, run_driver
from interop.target import ClusterTarget
from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.pop_requests import create_group_request, create_topic_request

# rust5's client asks the front to long-poll its await time and makes that the call's deadline
# too: with 5 s (the shortest poll) no time is left over, and the front refuses the receive
# (BAD_REQUEST to a client of 5.0.0, as RocketMQ's proxy answers it), so it waits 6 s.
AWAIT_S = {RUST5: 6}


def topic_and_group(
    client: SyncRemotingClient, target: ClusterTarget, message_type: str | None = None
) -> tuple[str, str]:
    topic, group = unique("GrpcTopic"), unique("GrpcGroup")
    for request in (create_topic_request(topic, 2, message_type), create_group_request(group)):
        reply = client.invoke(target.broker_addr, request, 10)
        assert reply.code == ResponseCode.SUCCESS, reply
    return topic, group


def consume(
    endpoints: str, topic: str, group: str, expect: int, client: str = PYTHON5, **options: Any
) -> DriverRun:
    """A simple consumer's run that received `expect` messages, acking each (checked)."""
    options = {"await_duration": AWAIT_S.get(client, 5), "timeout_s": 90, **options}
    run = run_driver(
        client,
        "simple-consume",
        endpoints=endpoints,
        topic=topic,
        group=group,
        expect=expect,
        **options,
    )
    return run.check()
