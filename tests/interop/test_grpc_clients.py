"""RocketMQ 5's stock gRPC clients (rocketmq-python-client 5.1.2, the Go client v5.1.4 and
rocketmq-client-java 5.0.8, unchanged, each in a subprocess) through our gRPC front: `mqproxy` in
cluster mode in front of the real RocketMQ 5.3.2 broker and in front of Sidewinder's, and the
front inside Sidewinder's broker (local mode). What passes in front of RocketMQ 5.3.2 must pass
in front of ours; the main scenarios run once per client (`grpc_client`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from interop.drivers import GRPC_CLIENTS, DriverRun, run_driver, start_driver
from interop.ports import lease_port_block
from interop.sidewinder import MqProxy
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request, unique
from tests.interop.pop_requests import create_group_request, create_topic_request

PYTHON5 = "python5"
NODE5 = "node5"
NODE5_ZERO_NACK = "the front refuses ChangeInvisibleDuration of 0 ms, Node 1.0.8's nack"
# A worker (and a RocketMQ 5.3.2 broker) of their own, beside the POP scenarios' one.
pytestmark = pytest.mark.xdist_group(name="rocketmq5-grpc")


@pytest.fixture(params=GRPC_CLIENTS)
def grpc_client(request: pytest.FixtureRequest) -> str:
    """The stock 5.x client a scenario drives (interop/drivers/PROTOCOL.md)."""
    return str(request.param)


@pytest.fixture(scope="session")
def front(pop_target: ClusterTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gRPC endpoints of an mqproxy in front of the shared 5.x target."""
    proxy = MqProxy(tmp_path_factory.mktemp("mqproxy"), pop_target.namesrv_addr).start()
    try:
        yield proxy.endpoints
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def local_front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterTarget, str]]:
    """A Sidewinder broker with its own gRPC front (grpcServerPort, local mode)."""
    port = lease_port_block()
    workdir = tmp_path_factory.mktemp("local-grpc")
    target = create_target("sidewinder", workdir, {"grpcServerPort": port}).start()
    try:
        yield target, f"127.0.0.1:{port}"
    finally:
        target.stop()


def _topic_and_group(
    client: SyncRemotingClient, target: ClusterTarget, message_type: str | None = None
) -> tuple[str, str]:
    topic, group = unique("GrpcTopic"), unique("GrpcGroup")
    for request in (create_topic_request(topic, 2, message_type), create_group_request(group)):
        reply = client.invoke(target.broker_addr, request, 10)
        assert reply.code == ResponseCode.SUCCESS, reply
    return topic, group


def _consume(
    endpoints: str, topic: str, group: str, expect: int, client: str = PYTHON5, **options: Any
) -> DriverRun:
    """A simple consumer's run that received `expect` messages, acking each (checked)."""
    options = {"await_duration": 5, "timeout_s": 90, **options}
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


def _round_trip(grpc_client: str, endpoints: str, topic: str, group: str) -> None:
    """Send five messages with tag, keys and a property; a simple consumer gets each once."""
    produced = run_driver(
        grpc_client,
        "produce",
        endpoints=endpoints,
        topic=topic,
        count=5,
        tag="TagA",
        prop=["color=red"],
    )
    produced.check()
    sent = produced.sent()
    assert [e["status"] for e in sent] == ["SEND_OK"] * 5
    consumed = _consume(endpoints, topic, group, 5, grpc_client, tags="TagA")
    got = consumed.received()
    assert sorted(e["msgId"] for e in got) == sorted(e["msgId"] for e in sent)
    assert {e["bodyMd5"] for e in got} == {e["bodyMd5"] for e in sent}
    for event in got:
        assert event["tags"] == "TagA" and event["properties"] == {"color": "red"}
        assert event["messageType"] == "NORMAL" and event["deliveryAttempt"] == 1
        assert event["keys"] and event["action"] == "ok"
        assert "corrupted" not in event


def test_send_and_simple_consume_through_mqproxy(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    _round_trip(grpc_client, front, topic, group)


def test_send_and_simple_consume_through_the_brokers_own_front(
    grpc_client: str, local_front: tuple[ClusterTarget, str], client: SyncRemotingClient
) -> None:
    target, endpoints = local_front
    topic, group = _topic_and_group(client, target)
    _round_trip(grpc_client, endpoints, topic, group)


def test_an_empty_receive_ends_within_the_clients_deadline(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """Nothing to receive: the long poll ends empty (MESSAGE_NOT_FOUND) before the client gives
    up on the call, whether or not the request names its long-polling time (Go's does not: it
    puts its await time in its settings)."""
    topic, group = _topic_and_group(client, pop_target)
    consumed = _consume(front, topic, group, 0, grpc_client, linger=0.1, timeout_s=30)
    (polled,) = consumed.of("polled")
    assert polled["count"] == 0 and polled["seconds"] < 8, polled


def test_a_4x_producers_messages_reach_a_5x_consumer(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    bodies = [b"from-4x-%d" % n for n in range(3)]
    for n, body in enumerate(bodies):
        reply = client.invoke(pop_target.broker_addr, send_request(topic, body, queue_id=n % 2), 10)
        assert reply.code == ResponseCode.SUCCESS, reply
    consumed = _consume(front, topic, group, 3, grpc_client)
    assert sorted(e["bodyMd5"] for e in consumed.received()) == sorted(
        hashlib.md5(body).hexdigest() for body in bodies
    )


def test_the_route_of_an_unknown_topic_is_topic_not_found(grpc_client: str, front: str) -> None:
    routed = run_driver(grpc_client, "route", endpoints=front, topic=unique("NoSuchTopic"))
    events = [e for e in routed.events if e.get("event") in ("route", "error")]
    assert events, routed.events
    assert events[-1].get("codeName") == "TOPIC_NOT_FOUND", events


def test_the_route_names_the_front_as_every_brokers_endpoint(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, _ = _topic_and_group(client, pop_target)
    routed = run_driver(grpc_client, "route", endpoints=front, topic=topic)
    routed.check()
    (route,) = [e for e in routed.events if e.get("event") == "route"]
    assert route["codeName"] == "OK"
    assert {q["endpoints"][0] for q in route["queues"]} == {front}
    assert sorted(q["id"] for q in route["queues"]) == [0, 1]
    assert {q["broker"] for q in route["queues"]} == {pop_target.broker_name}


def test_committed_transactions_are_delivered_and_rolled_back_ones_are_not(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target, "TRANSACTION")
    committed = run_driver(
        grpc_client,
        "transact",
        endpoints=front,
        topic=topic,
        count=2,
        answer="commit",
        body_prefix="commit-",
    )
    committed.check()
    rolled_back = run_driver(
        grpc_client,
        "transact",
        endpoints=front,
        topic=topic,
        count=2,
        answer="rollback",
        body_prefix="rollback-",
    )
    rolled_back.check()
    consumed = _consume(front, topic, group, 2, grpc_client, linger=3)
    got = consumed.received()
    assert sorted(e["msgId"] for e in got) == sorted(e["msgId"] for e in committed.sent())
    assert {e["messageType"] for e in got} == {"TRANSACTION"}


def test_a_push_consumer_gets_every_message_and_a_failed_one_again(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The listener fails the first delivery of one message: the client asks for it again
    later (ChangeInvisibleDuration, its backoff), and it comes back as a second attempt."""
    if grpc_client == NODE5:
        # Node 1.0.8 keeps no retry policy from a customized backoff (a non-FIFO group's) and
        # asks ChangeInvisibleDuration of 0 ms, which RocketMQ's proxy takes and our front
        # refuses; the message then never comes back. Not run (it would wait out its timeout):
        # test_grpc_node5.py's test_a_nack_of_0_ms_is_taken says within seconds when it is fixed.
        pytest.xfail(NODE5_ZERO_NACK)
    topic, group = _topic_and_group(client, pop_target)
    produced = run_driver(grpc_client, "produce", endpoints=front, topic=topic, count=3)
    produced.check()
    consumed = run_driver(
        grpc_client,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=3,
        reconsume_later=1,
        timeout_s=90,
    )
    consumed.check()
    events = consumed.received(only_ok=False)
    ok = [e for e in events if e["action"] == "ok"]
    later = [e for e in events if e["action"] == "later"]
    assert sorted(e["msgId"] for e in ok) == sorted(e["msgId"] for e in produced.sent())
    assert len(later) == 1
    (again,) = [e for e in ok if e["msgId"] == later[0]["msgId"]]
    assert again["deliveryAttempt"] == 2
    # java5grpc ends on answered acks and says which were not (PROTOCOL.md); python5 on shutdown.
    (done,) = consumed.of("done")
    assert "unacked" not in done and "ackFailures" not in done, done


def test_a_delayed_message_arrives_after_its_time(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target, "DELAY")
    produced = run_driver(
        grpc_client, "produce", endpoints=front, topic=topic, count=1, deliver_after_ms=3000
    )
    produced.check()
    (sent,) = produced.sent()
    consumed = _consume(front, topic, group, 1, grpc_client)
    (got,) = consumed.received()
    assert got["msgId"] == sent["msgId"] and got["messageType"] == "DELAY"
    assert got["deliveryTimestamp"] == sent["deliveryTimestamp"]
    # Put into its topic by the timer when due: a timer's precision (1 s) early at most.
    assert got["storeTimestamp"] >= sent["deliveryTimestamp"] - 1000, (got, sent)


def test_an_open_transaction_is_resolved_by_the_brokers_check(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The producer leaves its transactions open; the broker's check reaches it over Telemetry
    (RecoverOrphanedTransactionCommand) and its checker commits one run, rolls back the other."""
    topic, group = _topic_and_group(client, pop_target, "TRANSACTION")
    runs = {
        answer: run_driver(
            PYTHON5,
            "transact",
            endpoints=front,
            topic=topic,
            count=2,
            answer=f"unknown-{answer}",
            body_prefix=f"{answer}-",
            timeout_s=120,
        )
        for answer in ("commit", "rollback")
    }
    for run in runs.values():
        run.check()
        assert {e["msgId"] for e in run.sent()} <= {e["msgId"] for e in run.of("checked")}
    consumed = _consume(front, topic, group, 2, linger=3)
    assert sorted(e["msgId"] for e in consumed.received()) == sorted(
        e["msgId"] for e in runs["commit"].sent()
    )


def test_a_grpc_consumer_is_listed_among_its_groups_connections(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """GET_CONSUMER_CONNECTION_LIST (mqadmin consumerConnection) names a running gRPC push
    consumer with its client id, language and version, as RocketMQ's proxy registers it."""
    topic, group = _topic_and_group(client, pop_target)
    consumer = start_driver(
        PYTHON5,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=1,
        timeout_s=60,
    )
    try:
        consumer.wait_for("ready", timeout_s=30)
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
        )
        deadline = time.monotonic() + 20
        while True:
            reply = client.invoke(pop_target.broker_addr, request, 10)
            if reply.code == ResponseCode.SUCCESS:
                listed = loads(reply.body_bytes)["connectionSet"]
                if listed:
                    break
            assert time.monotonic() < deadline, reply
            time.sleep(0.3)
        (connection,) = listed
        assert connection["language"] == "PYTHON" and connection["clientId"]
        assert int(connection["version"]) > 409  # a 5.x client's (V5_1_2), not 4.9.8's
        run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=1).check()
        assert len(consumer.wait().check().received()) == 1
    finally:
        consumer.kill()


@pytest.mark.parametrize("message_type", ["NORMAL", "DELAY"])
def test_the_route_accepts_the_topics_message_type_and_sends_of_another_are_refused(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, message_type: str
) -> None:
    """RocketMQ 5 enforces a topic's `message.type`: the route names the one type it takes,
    the client refuses to send another, and the front refuses what reaches it anyway."""
    topic, _ = _topic_and_group(client, pop_target, message_type)
    routed = run_driver(PYTHON5, "route", endpoints=front, topic=topic)
    routed.check()
    (route,) = [e for e in routed.events if e.get("event") == "route"]
    assert {tuple(q["acceptMessageTypes"]) for q in route["queues"]} == {(message_type,)}
    wrong = {"deliver_after_ms": 2000} if message_type == "NORMAL" else {}
    refused = run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=1, **wrong)
    assert refused.returncode != 0 and not refused.sent(), refused.events


# Near 4 MiB, not 4 MiB: Sidewinder counts a whole record (body and properties) against
# maxMessageSize as RocketMQ 4.x does, where RocketMQ 5 counts the body (docs/grpc.md).
@pytest.mark.parametrize("size", [1, 4096, (4 << 20) - 1024])
def test_bodies_up_to_4_mib_round_trip(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, size: int
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    produced = run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=1, body_size=size)
    produced.check()
    consumed = _consume(front, topic, group, 1)
    ((sent,), (got,)) = (produced.sent(), consumed.received())
    assert got["bodyLen"] == size and got["bodyMd5"] == sent["bodyMd5"]


def test_a_body_over_4_mib_is_refused(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The client's own limit (the server's max_body_size, from its settings) refuses it."""
    topic, _ = _topic_and_group(client, pop_target)
    refused = run_driver(
        PYTHON5, "produce", endpoints=front, topic=topic, count=1, body_size=(4 << 20) + 1
    )
    assert refused.returncode != 0 and not refused.sent(), refused.events


def test_a_tag_filter_gets_only_its_tags(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    for tag in ("TagA", "TagB"):
        produced = run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=2, tag=tag)
        produced.check()
    consumed = _consume(front, topic, group, 2, tags="TagB", linger=2)
    assert [e["tags"] for e in consumed.received()] == ["TagB", "TagB"]


def test_a_fifo_group_gets_a_message_groups_messages_in_order(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """A FIFO topic and a group that consumes orderly: the settings say FIFO, the assignment
    names each queue, and a push consumer gets one message group's messages in send order."""
    topic, group = unique("GrpcFifo"), unique("GrpcFifoGroup")
    for request in (
        create_topic_request(topic, 2, "FIFO"),
        create_group_request(group, orderly=True),
    ):
        assert client.invoke(pop_target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    produced = run_driver(
        grpc_client, "produce", endpoints=front, topic=topic, count=6, message_group="order-7"
    )
    produced.check()
    consumed = run_driver(
        grpc_client,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=6,
        timeout_s=90,
    )
    consumed.check()
    got = [e for e in consumed.received() if e["action"] == "ok"]
    assert [e["msgId"] for e in got] == [e["msgId"] for e in produced.sent()]
    assert {e["messageGroup"] for e in got} == {"order-7"}
    assert {e["messageType"] for e in got} == {"FIFO"}
