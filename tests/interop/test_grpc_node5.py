"""The Node RocketMQ 5 client (npm rocketmq-client-nodejs 1.0.8, unchanged, in a subprocess)
through our gRPC front, in the scenarios test_grpc_clients.py runs for python5 alone: bodies
of 1 B, 4 KiB and 4 MiB and one over 4 MiB, message-type enforcement, a tag filter, open
transactions resolved by the broker's check, its listing among a group's connections, and TLS
on the front's one port. Each runs through `mqproxy` in front of the real RocketMQ 5.3.2 broker
and in front of Sidewinder's (the `front` fixture of tests/interop/conftest.py, the helpers of
grpc_scenarios.py); the scenarios every client runs are in test_grpc_clients.py, parametrized
by `grpc_client`."""

from __future__ import annotations

import time
from typing import Any

import pytest

from interop.drivers import NODE5, PYTHON5, DriverRun, run_driver, start_driver
from interop.target import ClusterTarget
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.interop.grpc_scenarios import consume as _consume
from tests.interop.grpc_scenarios import topic_and_group as _topic_and_group

GRPC_CLIENT = NODE5  # for tests/interop/conftest.py: not a reference client
# The worker (and the RocketMQ 5.3.2 broker) of test_grpc_clients.py.
pytestmark = pytest.mark.xdist_group(name="rocketmq5-grpc")


def _produce(front: str, topic: str, **options: Any) -> DriverRun:
    return run_driver(NODE5, "produce", endpoints=front, topic=topic, **options)


def _all(*runs: Any) -> list[DriverRun]:
    """Start drivers side by side (each `start_driver`'s kwargs), then collect them in order."""
    started = [start_driver(NODE5, action, **options) for action, options in runs]
    return [process.wait() for process in started]


def test_bodies_of_1_b_4_kib_and_4_mib_round_trip(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """Sent by the Node client, read back by the Python one: the Node client's gRPC library
    takes replies of at most 4 MiB (grpc-js's default), so a receive holding a 4 MiB body fails
    there with RESOURCE_EXHAUSTED, whichever server sends it."""
    topic, group = _topic_and_group(client, pop_target)
    sizes = [1, 4096, 4 << 20]
    produced = _all(
        *(
            ("produce", {"endpoints": front, "topic": topic, "count": 1, "body_size": size})
            for size in sizes
        )
    )
    sent = {run.check().sent()[0]["msgId"]: run.sent()[0] for run in produced}
    consumed = _consume(front, topic, group, 3, PYTHON5)
    got = {e["msgId"]: e for e in consumed.received()}
    assert sorted(got) == sorted(sent)
    for msg_id, event in got.items():
        assert (event["bodyLen"], event["bodyMd5"]) == (
            sent[msg_id]["bodyLen"],
            sent[msg_id]["bodyMd5"],
        )
    assert sorted(e["bodyLen"] for e in got.values()) == sizes


def test_a_body_over_4_mib_is_refused_by_the_client(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The client's own limit (the server's max_body_size, from its settings) refuses it."""
    topic, _ = _topic_and_group(client, pop_target)
    refused = _produce(front, topic, count=1, body_size=(4 << 20) + 1)
    assert refused.returncode == 1 and not refused.sent(), refused.events
    (error,) = refused.errors()
    assert error["error"] == "send" and "body size exceeds" in error["message"], error


def test_the_route_names_the_topics_type_and_the_client_refuses_another(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """RocketMQ 5 enforces a topic's `message.type`: the route names the one type it takes and
    the client (validate_message_type, from the server's settings) refuses to send another."""
    normal, _ = _topic_and_group(client, pop_target, "NORMAL")
    delay, _ = _topic_and_group(client, pop_target, "DELAY")
    runs = _all(
        ("route", {"endpoints": front, "topic": normal}),
        ("route", {"endpoints": front, "topic": delay}),
        ("produce", {"endpoints": front, "topic": normal, "count": 1, "deliver_after_ms": 2000}),
        ("produce", {"endpoints": front, "topic": delay, "count": 1}),
    )
    for run, message_type in zip(runs[:2], ["NORMAL", "DELAY"], strict=True):
        (route,) = run.check().of("route")
        assert {tuple(q["acceptMessageTypes"]) for q in route["queues"]} == {(message_type,)}
    for refused in runs[2:]:
        assert refused.returncode == 1 and not refused.sent(), refused.events
        assert "message type not match" in refused.errors()[0]["message"], refused.events


def test_a_tag_filter_gets_only_its_tags(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    topic, group = _topic_and_group(client, pop_target)
    for run in _all(
        *(
            ("produce", {"endpoints": front, "topic": topic, "count": 2, "tag": tag})
            for tag in ("TagA", "TagB")
        )
    ):
        run.check()
    consumed = _consume(front, topic, group, 2, NODE5, tags="TagB", linger=2)
    assert [e["tags"] for e in consumed.received()] == ["TagB", "TagB"]


def test_an_open_transaction_is_resolved_by_the_brokers_check(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The producer leaves its transactions open; the broker's check reaches it over Telemetry
    (RecoverOrphanedTransactionCommand) and its checker commits one run's, rolls back the
    other's; each run ends once the server answered the checker's EndTransaction."""
    topic, group = _topic_and_group(client, pop_target, "TRANSACTION")
    # One after the other: the server sends a check to any producer of the topic.
    commit, rollback = (
        run_driver(
            NODE5,
            "transact",
            endpoints=front,
            topic=topic,
            count=2,
            answer=f"unknown-{answer}",
            body_prefix=f"{answer}-",
            timeout_s=120,
        )
        for answer in ("commit", "rollback")
    )
    for run, answer in ((commit, "commit"), (rollback, "rollback")):
        run.check()
        checked = {e["msgId"]: e["answer"] for e in run.of("checked")}
        assert {e["msgId"] for e in run.sent()} <= set(checked), run.events
        assert set(checked.values()) == {answer}
    consumed = _consume(front, topic, group, 2, NODE5, linger=3)
    assert sorted(e["msgId"] for e in consumed.received()) == sorted(
        e["msgId"] for e in commit.sent()
    )


# RocketMQ's proxy takes a ChangeInvisibleDuration of 0 ms (GrpcValidator refuses below 0) and
# RocketMQ 5.3.2's broker revives the message at once; so do the front and Sidewinder's broker.
def test_a_nack_of_0_ms_is_taken(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The Node client keeps no retry policy from a customized backoff (a non-FIFO group's, as
    the front sends it): when its listener fails a delivery, it asks ChangeInvisibleDuration of
    0 ms, the message to come back at once. The server's first answer must be OK."""
    topic, group = _topic_and_group(client, pop_target)
    _produce(front, topic, count=1).check()
    consumer = start_driver(
        NODE5,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=1,
        reconsume_later=1,
        timeout_s=30,
    )
    try:
        consumer.wait_for("nacked", timeout_s=25)
        nacked = next(e for e in consumer.events_so_far() if e["event"] == "nacked")
        assert nacked["invisibleMs"] == 0
        assert nacked["codeName"] == "OK", nacked
    finally:
        consumer.kill()
        consumer.wait(1)


# RocketMQ's proxy registers a gRPC client with LanguageCode.valueOf(x-mq-language)
# (ClientActivity.registerConsumer), so Node's HTTP.
def test_a_node_consumer_is_listed_among_its_groups_connections(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """GET_CONSUMER_CONNECTION_LIST names a running Node push consumer with its client id and
    the language its metadata gives (`x-mq-language: HTTP`: RocketMQ's LanguageCode has no
    Node, so the client says HTTP), as RocketMQ's proxy registers it."""
    topic, group = _topic_and_group(client, pop_target)
    consumer = start_driver(
        NODE5, "push-consume", endpoints=front, topic=topic, group=group, expect=1, timeout_s=60
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
        assert connection["language"] == "HTTP" and connection["clientId"], connection
        _produce(front, topic, count=1).check()
        assert len(consumer.wait().check().received()) == 1
    finally:
        consumer.kill()


def test_tls_and_plaintext_clients_share_the_fronts_port(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The front takes TLS on its one port (permissive, test mode: a self-signed certificate,
    which the driver trusts as presented): a TLS producer's messages reach a plaintext consumer
    and a TLS one."""
    topic, group = _topic_and_group(client, pop_target)
    produced = _produce(front, topic, count=2, tls=True)
    produced.check()
    over_tls = _consume(front, topic, group, 1, NODE5, tls=True, batch_size=1)
    plain = _consume(front, topic, group, 1, NODE5, batch_size=1)
    got = over_tls.received() + plain.received()
    assert sorted(e["msgId"] for e in got) == sorted(e["msgId"] for e in produced.sent())
