"""RocketMQ 5's stock gRPC clients (rocketmq-python-client 5.1.2, the Go client v5.1.4 and
rocketmq-client-java 5.0.8, unchanged, each in a subprocess) through our gRPC front: `mqproxy` in
cluster mode in front of the real RocketMQ 5.3.2 broker and in front of Sidewinder's, and the
front inside Sidewinder's broker (local mode). What passes in front of RocketMQ 5.3.2 must pass
in front of ours; the main scenarios run once per client (`grpc_client`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.drivers import (
    GRPC_CLIENTS,
    JAVA5GRPC,
    NODE5,
    PYTHON5,
    RUST5,
    DriverRun,
    run_driver,
    start_driver,
)
from interop.ports import lease_port_block
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.record import message_records
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import pull_request, send_request, unique
from tests.interop.grpc_scenarios import consume as _consume
from tests.interop.grpc_scenarios import topic_and_group as _topic_and_group
from tests.interop.pop_requests import create_group_request, create_topic_request
from tests.interop.scenarios import wait_until_routed

# What a client's `received` events lack: rust5's MessageView keeps none of these and the
# client reads nothing of the wire that the driver could see (PROTOCOL.md, "rust5").
LACKS = {RUST5: {"messageType", "queueId", "queueOffset", "storeTimestamp", "storeHost"}}
NO_PUSH_CONSUMER = {RUST5: "the Rust client (crate rocketmq 5.0.0) has no PushConsumer"}
# A worker (and a RocketMQ 5.3.2 broker) of their own, beside the POP scenarios' one.
pytestmark = pytest.mark.xdist_group(name="rocketmq5-grpc")


@pytest.fixture(params=GRPC_CLIENTS)
def grpc_client(request: pytest.FixtureRequest) -> str:
    """The stock 5.x client a scenario drives (interop/drivers/PROTOCOL.md)."""
    return str(request.param)


def _has(grpc_client: str, field: str) -> bool:
    return field not in LACKS.get(grpc_client, set())


def _needs_push_consumer(grpc_client: str) -> None:
    if grpc_client in NO_PUSH_CONSUMER:
        pytest.skip(NO_PUSH_CONSUMER[grpc_client])


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


def _assert_committed(consumed: DriverRun, committed: set[str], target: ClusterTarget) -> None:
    """The consumer got the committed transaction messages and no other. RocketMQ 5.3.2 on a
    loaded host may check a half message again before the op record of its first commit is
    written, and commit it twice (at least once, as it documents); Sidewinder's broker not."""
    got = [e["msgId"] for e in consumed.received()]
    assert set(got) == committed, got
    if target.kind != "rocketmq5":
        assert len(got) == len(set(got)), got


def _pull_when_there(
    client: SyncRemotingClient, target: ClusterTarget, topic: str
) -> RemotingCommand:
    """A 4.x pull of queue 0 of `topic` by a new group, until it finds messages (20 s)."""
    deadline = time.monotonic() + 20
    while True:
        reply = client.invoke(target.broker_addr, pull_request(topic, unique("Reader")), 10)
        if reply.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
            assert reply.code == ResponseCode.SUCCESS, reply
            return reply
        time.sleep(0.5)


def _connections(
    client: SyncRemotingClient, target: ClusterTarget, group: str
) -> list[dict[str, Any]]:
    """The group's connections at the broker (mqadmin consumerConnection), once it has any."""
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
    )
    deadline = time.monotonic() + 20
    while True:
        reply = client.invoke(target.broker_addr, request, 10)
        if reply.code == ResponseCode.SUCCESS:
            body = loads(reply.body_bytes)
            if body["connectionSet"]:
                connections: list[dict[str, Any]] = body["connectionSet"]
                for connection in connections:
                    connection["consumeType"] = body.get("consumeType")
                return connections
        assert time.monotonic() < deadline, reply
        time.sleep(0.3)


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
        assert event["deliveryAttempt"] == 1
        assert not _has(grpc_client, "messageType") or event["messageType"] == "NORMAL"
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


def test_rust5_over_tls_gets_the_fronts_certificate(
    local_front: tuple[ClusterTarget, str],
) -> None:
    """The front serves TLS on its plaintext port to the Rust client too; the crate trusts only
    the system's roots (it has no TLS settings), so the test-mode certificate is refused."""
    _, endpoints = local_front
    run = run_driver(RUST5, "route", endpoints=endpoints, topic=unique("T"), tls=True)
    (error,) = run.errors()
    assert "invalid peer certificate: UnknownIssuer" in error["message"], run.describe()


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
    if _has(grpc_client, "messageType"):
        assert {e["messageType"] for e in got} == {"TRANSACTION"}


def test_a_push_consumer_gets_every_message_and_a_failed_one_again(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The listener fails the first delivery of one message: the client asks for it again
    later (ChangeInvisibleDuration, its backoff), and it comes back as a second attempt."""
    _needs_push_consumer(grpc_client)
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
    assert got["msgId"] == sent["msgId"]
    assert got["deliveryTimestamp"] == sent["deliveryTimestamp"]
    if not _has(grpc_client, "storeTimestamp"):
        # No store time to read: the consumer got it no earlier than due (1 s early at most).
        assert time.time() * 1000 >= sent["deliveryTimestamp"] - 1000, (got, sent)
        return
    assert got["messageType"] == "DELAY"
    # Put into its topic by the timer when due: a timer's precision (1 s) early at most.
    assert got["storeTimestamp"] >= sent["deliveryTimestamp"] - 1000, (got, sent)


@pytest.mark.parametrize("grpc_client", [PYTHON5, RUST5, NODE5])
def test_an_open_transaction_is_resolved_by_the_brokers_check(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str
) -> None:
    """The producer leaves its transactions open; the broker's check reaches it over Telemetry
    (RecoverOrphanedTransactionCommand) and its checker commits one run's, rolls back the
    other's; each run ends once the server answered the checker's EndTransaction."""
    topic, group = _topic_and_group(client, pop_target, "TRANSACTION")
    # One after the other: the server sends a check to any producer of the topic.
    runs = {
        answer: run_driver(
            grpc_client,
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
    for answer, run in runs.items():
        run.check()
        checked = {e["msgId"]: e["answer"] for e in run.of("checked")}
        assert {e["msgId"] for e in run.sent()} <= set(checked), run.events
        assert set(checked.values()) == {answer}, run.events
    consumed = _consume(front, topic, group, 2, linger=3)
    _assert_committed(consumed, {e["msgId"] for e in runs["commit"].sent()}, pop_target)


@pytest.mark.parametrize("grpc_client", [PYTHON5, JAVA5GRPC])
def test_transactions_a_producer_left_open_are_resolved_by_its_successor(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str
) -> None:
    """A producer sends two half messages and exits without ending them; the broker's check
    reaches the producer of the topic that runs next, whose checker commits them with its own."""
    topic, group = _topic_and_group(client, pop_target, "TRANSACTION")
    left = run_driver(
        grpc_client, "transact", endpoints=front, topic=topic, count=2, answer="unknown"
    )
    successor = run_driver(
        grpc_client, "transact", endpoints=front, topic=topic, count=1, start=2,
        answer="unknown-commit", timeout_s=120,
    )  # fmt: skip
    orphans = {e["msgId"] for e in left.check().sent()}
    answered = {e["msgId"]: e["answer"] for e in successor.check().of("checked")}
    # The half queue is checked oldest first: the orphans before the successor's own message.
    assert answered == dict.fromkeys(orphans | {e["msgId"] for e in successor.sent()}, "commit")
    consumed = _consume(front, topic, group, 3, linger=2)
    _assert_committed(consumed, orphans | {e["msgId"] for e in successor.sent()}, pop_target)


def test_a_recalled_delay_message_is_never_delivered(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The Java client (the one of the five with Producer.recallMessage) recalls two DELAY
    messages by their send receipts' handles (RecallMessage, then the broker's RECALL_MESSAGE);
    a third, not recalled, is delivered when due and the recalled ones never are."""
    topic, group = _topic_and_group(client, pop_target, "DELAY")
    recalled = run_driver(
        JAVA5GRPC, "produce", endpoints=front, topic=topic, count=2, deliver_after_ms=3000,
        recall=True,
    ).check()  # fmt: skip
    assert [e["msgId"] for e in recalled.of("recalled")] == [e["msgId"] for e in recalled.sent()]
    assert all(e["recallHandle"] for e in recalled.sent())
    kept = run_driver(
        JAVA5GRPC, "produce", endpoints=front, topic=topic, count=1, start=2,
        deliver_after_ms=3000,
    ).check()  # fmt: skip
    consumed = _consume(front, topic, group, 1, linger=4)
    assert [e["msgId"] for e in consumed.received()] == [e["msgId"] for e in kept.sent()]


# RocketMQ's proxy registers a gRPC client with LanguageCode.valueOf(x-mq-language)
# (ClientActivity.registerConsumer): RocketMQ's LanguageCode has no Node, so that client says HTTP.
@pytest.mark.parametrize(("grpc_client", "language"), [(PYTHON5, "PYTHON"), (NODE5, "HTTP")])
def test_a_grpc_consumer_is_listed_among_its_groups_connections(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str,
    language: str,
) -> None:  # fmt: skip
    """GET_CONSUMER_CONNECTION_LIST (mqadmin consumerConnection) names a running gRPC push
    consumer with its client id, language and version, as RocketMQ's proxy registers it."""
    topic, group = _topic_and_group(client, pop_target)
    consumer = start_driver(
        grpc_client,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=1,
        timeout_s=60,
    )
    try:
        consumer.wait_for("ready", timeout_s=30)
        (connection,) = _connections(client, pop_target, group)
        assert connection["language"] == language and connection["clientId"], connection
        assert connection["consumeType"] == "CONSUME_PASSIVELY"  # as RocketMQ's proxy says
        if grpc_client == PYTHON5:
            assert int(connection["version"]) > 409  # a 5.x client's (V5_1_2), not 4.9.8's
        run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=1).check()
        assert len(consumer.wait().check().received()) == 1
    finally:
        consumer.kill()


# The Python and Node clients: the scenarios each client's own checks decide.
SENDERS = [PYTHON5, NODE5]


@pytest.mark.parametrize("grpc_client", SENDERS)
@pytest.mark.parametrize("message_type", ["NORMAL", "DELAY"])
def test_the_route_accepts_the_topics_message_type_and_sends_of_another_are_refused(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, message_type: str,
    grpc_client: str,
) -> None:  # fmt: skip
    """RocketMQ 5 enforces a topic's `message.type`: the route names the one type it takes,
    the client (from the server's settings) refuses to send another."""
    topic, _ = _topic_and_group(client, pop_target, message_type)
    routed = run_driver(grpc_client, "route", endpoints=front, topic=topic)
    (route,) = routed.check().of("route")
    assert {tuple(q["acceptMessageTypes"]) for q in route["queues"]} == {(message_type,)}
    wrong = {"deliver_after_ms": 2000} if message_type == "NORMAL" else {}
    refused = run_driver(grpc_client, "produce", endpoints=front, topic=topic, count=1, **wrong)
    assert refused.returncode != 0 and not refused.sent(), refused.events


# Read back by the Python client: the Node client's gRPC library takes replies of at most 4 MiB
# (grpc-js's default), so a receive holding a 4 MiB body fails there with RESOURCE_EXHAUSTED,
# whichever server sends it.
@pytest.mark.parametrize("grpc_client", SENDERS)
@pytest.mark.parametrize("size", [1, 4096, 4 << 20])
def test_bodies_up_to_4_mib_round_trip(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, size: int,
    grpc_client: str,
) -> None:  # fmt: skip
    topic, group = _topic_and_group(client, pop_target)
    produced = run_driver(
        grpc_client, "produce", endpoints=front, topic=topic, count=1, body_size=size
    )
    produced.check()
    consumed = _consume(front, topic, group, 1)
    ((sent,), (got,)) = (produced.sent(), consumed.received())
    assert got["bodyLen"] == size and got["bodyMd5"] == sent["bodyMd5"]


@pytest.mark.parametrize("grpc_client", SENDERS)
def test_a_body_over_4_mib_is_refused(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str
) -> None:
    """The client's own limit (the server's max_body_size, from its settings) refuses it."""
    topic, _ = _topic_and_group(client, pop_target)
    refused = run_driver(
        grpc_client, "produce", endpoints=front, topic=topic, count=1, body_size=(4 << 20) + 1
    )
    assert refused.returncode != 0 and not refused.sent(), refused.events


@pytest.mark.parametrize("grpc_client", SENDERS)
def test_a_tag_filter_gets_only_its_tags(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    for tag in ("TagA", "TagB"):
        produced = run_driver(
            grpc_client, "produce", endpoints=front, topic=topic, count=2, tag=tag
        )
        produced.check()
    consumed = _consume(front, topic, group, 2, grpc_client, tags="TagB", linger=2)
    assert [e["tags"] for e in consumed.received()] == ["TagB", "TagB"]


def test_an_sql92_filter_gets_only_the_messages_it_matches(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """A consumer's SQL92 expression (FilterType.SQL) is the broker's filter of its pops."""
    topic, group = _topic_and_group(client, pop_target)
    for color, count in (("red", 2), ("blue", 3)):
        produced = run_driver(
            PYTHON5, "produce", endpoints=front, topic=topic, count=count, prop=[f"color={color}"]
        )
        produced.check()
    consumed = _consume(
        front, topic, group, 2, grpc_client, sql="color = 'red' AND TAGS IS NULL", linger=2
    )
    assert [e["properties"] for e in consumed.received()] == [{"color": "red"}] * 2


def test_a_fifo_group_gets_a_message_groups_messages_in_order(
    grpc_client: str, pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """A FIFO topic and a group that consumes orderly: the settings say FIFO, the assignment
    names each queue, and a push consumer gets one message group's messages in send order (a
    client with no push consumer: its simple consumer, whose receives hand them out in order)."""
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
    if grpc_client in NO_PUSH_CONSUMER:
        consumed = _consume(front, topic, group, 6, grpc_client)
    else:
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
    if _has(grpc_client, "messageType"):
        assert {e["messageType"] for e in got} == {"FIFO"}


@pytest.mark.parametrize("grpc_client", [PYTHON5, JAVA5GRPC])
def test_a_fifo_message_over_its_max_attempts_goes_to_the_dlq_and_the_group_goes_on(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient, grpc_client: str
) -> None:
    """A FIFO group of retryMaxTimes 1 (2 attempts): the push consumer fails the first message
    twice, then forwards it to %DLQ%group (ForwardMessageToDeadLetterQueue), where a 4.x pull
    finds it, and the message group's other messages follow in order."""
    topic, group = unique("GrpcFifoDlq"), unique("GrpcFifoDlqGroup")
    for request in (
        create_topic_request(topic, 1, "FIFO"),
        create_group_request(group, 1, orderly=True),
    ):
        assert client.invoke(pop_target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    produced = run_driver(
        grpc_client, "produce", endpoints=front, topic=topic, count=4, message_group="order-9"
    )
    sent = [e["msgId"] for e in produced.check().sent()]
    consumed = run_driver(
        grpc_client, "push-consume", endpoints=front, topic=topic, group=group, expect=3,
        reconsume_later=2, timeout_s=90,
    ).check()  # fmt: skip
    got = consumed.received(only_ok=False)
    assert [e["msgId"] for e in got if e["action"] == "later"] == [sent[0]] * 2
    assert [e["msgId"] for e in got if e["action"] == "ok"] == sent[1:]
    reply = _pull_when_there(client, pop_target, f"%DLQ%{group}")
    (record,) = message_records(reply.body_bytes)
    assert record.properties().get("UNIQ_KEY") == sent[0]


# What each client answers to the front's PrintThreadStackTraceCommand and VerifyMessageCommand:
# (a text in its stacks, ConsumeMessageDirectlyResult's consumeResult or mqadmin's error).
_CLIENT_CALL_ANSWERS = {
    "java5grpc": ("Thread", "consumeResult=CR_SUCCESS"),
    "go5": ("goroutine", "consumeResult=null"),  # the Go client answers NOT_IMPLEMENTED
    # rocketmq-python-client 5.1.2 answers neither command.
    "python5": ("sent no thread stacks within 4.5 s", "did not answer"),
    "node5": ("mock stack", "did not answer"),  # Node 1.0.8 sends a fixed text, verifies nothing
}


def test_mqadmin_consumer_status_and_direct_consumption_reach_a_grpc_consumer(
    grpc_client: str,
    pop_target: ClusterTarget,
    front: str,
    client: SyncRemotingClient,
    tmp_path: Path,
) -> None:
    """mqadmin consumerStatus -s (GET_CONSUMER_RUNNING_INFO) and queryMsgById -g -d
    (CONSUME_MESSAGE_DIRECTLY) reach a gRPC push consumer over its Telemetry stream."""
    from interop.mqadmin import mqadmin

    _needs_push_consumer(grpc_client)
    stacks, verdict = _CLIENT_CALL_ANSWERS[grpc_client]
    topic, group = _topic_and_group(client, pop_target)
    # The consumer takes TagA; the message sent is TagB, so only the direct call brings it.
    consumer = start_driver(
        grpc_client,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        tags="TagA",
        expect=1,
        timeout_s=60,
        workdir=tmp_path / "consumer",
    )
    try:
        consumer.wait_for("ready", timeout_s=30)
        (connection,) = _connections(client, pop_target, group)
        client_id = connection["clientId"]
        ns = pop_target.namesrv_addr
        # consumerStatus reads the route of the group's retry topic, which the broker made at
        # the consumer's heartbeat and registers with the name server a moment later.
        wait_until_routed(ns, f"%RETRY%{group}")
        status = mqadmin(ns, "consumerStatus", "-g", group, "-i", client_id, "-s").stdout
        assert "PROP_CONSUME_TYPE" in status and "CONSUME_PASSIVELY" in status, status
        assert topic in status and "TagA" in status, status
        assert "#Consumer jstack#" in status and stacks in status, status

        tagged = {"WAIT": "true", "TAGS": "TagB"}
        reply = client.invoke(
            pop_target.broker_addr, send_request(topic, b"direct", properties=tagged), 10
        )
        assert reply.code == ResponseCode.SUCCESS, reply
        offset_msg_id = (reply.ext_fields or {})["msgId"]
        directly = mqadmin(
            ns, "queryMsgById", "-i", offset_msg_id, "-g", group, "-d", client_id, check=False
        )
        assert verdict in directly.stdout + directly.stderr, directly
        if grpc_client == "java5grpc":
            (received,) = consumer.wait().check().received()
            assert received["tags"] == "TagB"
    finally:
        consumer.kill()


def test_a_message_over_its_max_attempts_goes_to_the_dlq_a_4x_consumer_reads(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """A group of retryMaxTimes 1 (2 attempts): a message never acked is delivered twice, then
    goes to %DLQ%group (our broker moves it at revive; RocketMQ 5.3.2's retries for ever, and
    the front moves it at the next receive, as RocketMQ's proxy does), where a 4.x pull finds
    it."""
    topic, group = unique("GrpcTopic"), unique("GrpcGroup")
    for request in (create_topic_request(topic, 1), create_group_request(group, 1)):
        assert client.invoke(pop_target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    produced = run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=1)
    (sent,) = produced.check().sent()
    consumed = run_driver(
        PYTHON5,
        "simple-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=2,
        no_ack=True,
        invisible_duration=10,
        await_duration=5,
        linger=18,  # long enough for a third receive after the second's invisible time
        timeout_s=90,
    ).check()
    assert [e["deliveryAttempt"] for e in consumed.received(only_ok=False)] == [1, 2]
    reply = _pull_when_there(client, pop_target, f"%DLQ%{group}")
    (record,) = message_records(reply.body_bytes)
    assert record.properties().get("UNIQ_KEY") == sent["msgId"]


def test_competing_consumers_of_a_group_share_its_messages_without_duplicates(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """Two simple consumers of one group receive at once: every message reaches one of them,
    none reaches both while its invisible time runs."""
    topic, group = _topic_and_group(client, pop_target)
    produced = run_driver(PYTHON5, "produce", endpoints=front, topic=topic, count=24)
    sent = {e["msgId"] for e in produced.check().sent()}
    consumers = [
        start_driver(
            PYTHON5,
            "simple-consume",
            endpoints=front,
            topic=topic,
            group=group,
            expect=len(sent),
            batch_size=4,
            invisible_duration=60,
            timeout_s=60,
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 45
        while True:
            got = [
                e["msgId"]
                for consumer in consumers
                for e in consumer.events_so_far()
                if e.get("event") == "received"
            ]
            if len(got) >= len(sent) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        time.sleep(1)  # a duplicate would come in the next receive
        got = [
            e["msgId"]
            for consumer in consumers
            for e in consumer.events_so_far()
            if e.get("event") == "received"
        ]
    finally:
        for consumer in consumers:
            consumer.kill()
    assert sorted(got) == sorted(sent), [c.events_so_far()[-3:] for c in consumers]


def test_a_5x_producers_messages_reach_a_4x_consumer_and_queries(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """What a 5.x client sends is a 4.x message: the stock Java 4.x consumer gets it with its
    tag, keys, properties and message id (UNIQ_KEY), and mqadmin finds it by key and by id."""
    from interop.mqadmin import mqadmin
    from tests.interop.scenarios import consume

    topic, group = _topic_and_group(client, pop_target)
    produced = run_driver(
        PYTHON5, "produce", endpoints=front, topic=topic, count=3, tag="TagQ", prop=["n=v"]
    )
    sent = produced.check().sent()
    got = consume(pop_target, "java", topic, 3, group=group).check().received()
    assert sorted(e["msgId"] for e in got) == sorted(e["msgId"] for e in sent)
    for event in got:
        assert event["tags"] == "TagQ" and event["properties"] == {"n": "v"}, event
    assert sorted(e["keys"] for e in got) == sorted(e["keys"] for e in sent)
    ns = pop_target.namesrv_addr
    key = sent[0]["keys"]
    by_key = mqadmin(ns, "queryMsgByKey", "-t", topic, "-k", key).stdout
    assert sent[0]["msgId"] in by_key, by_key
    by_id = mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", sent[1]["msgId"]).stdout
    assert "TagQ" in by_id and sent[1]["msgId"] in by_id, by_id
