"""ACL 1.0 for RocketMQ 5's gRPC clients at the broker's own front: the stock Python client's
v2 signature checked (UNAUTHORIZED when it fails), and its calls made in its account's name,
so the broker's plain_acl.yml decides what it may do (FORBIDDEN when it may not)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from interop.drivers import NODE5, PYTHON5, run_driver
from interop.ports import lease_port_block
from interop.target import create_target
from sidewinder.protocol.acl import sign_request
from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request
from tests.interop.pop_requests import create_group_request, create_topic_request

USER, USER_SECRET = "GrpcUser", "GrpcSecret1"
ADMIN, ADMIN_SECRET = "GrpcAdmin", "GrpcAdminSecret1"
PLAIN_ACL = {
    "accounts": [
        {
            "accessKey": USER,
            "secretKey": USER_SECRET,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["GrpcOpen=PUB|SUB", "GrpcClosed=SUB", "GrpcPubOnly=PUB"],
        },
        {"accessKey": ADMIN, "secretKey": ADMIN_SECRET, "admin": True},
    ],
}


@pytest.fixture(scope="module")
def acl_front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir: Path = tmp_path_factory.mktemp("grpc-acl")
    home = workdir / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    port = lease_port_block()
    conf = {"aclEnable": "true", "rocketmqHome": str(home), "grpcServerPort": port}
    target = create_target("sidewinder", workdir, conf).start()
    client = SyncRemotingClient()
    try:
        for request in (
            create_topic_request("GrpcOpen", 1),
            create_topic_request("GrpcClosed", 1),
            create_topic_request("GrpcPubOnly", 1),
            create_group_request("GrpcAclGroup"),
            send_request("GrpcPubOnly", b"secret"),
        ):
            sign_request(request, ADMIN, ADMIN_SECRET)
            assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
        yield f"127.0.0.1:{port}"
    finally:
        client.close()
        target.stop()


@pytest.fixture(params=[PYTHON5, NODE5])
def acl_client(request: pytest.FixtureRequest) -> str:
    """The stock 5.x client a scenario drives: Python's signs every call (with an empty key
    when it has none), Node's only with a key (an uppercase hex signature)."""
    return str(request.param)


def _produce(client: str, front: str, topic: str, **keys: str) -> list[dict[str, object]]:
    run = run_driver(client, "produce", endpoints=front, topic=topic, count=1, **keys)
    return run.events


def test_an_account_with_pub_sends_and_receives(acl_client: str, acl_front: str) -> None:
    keys = {"access_key": USER, "secret_key": USER_SECRET}
    sent = run_driver(acl_client, "produce", endpoints=acl_front, topic="GrpcOpen", count=2, **keys)
    sent.check()
    received = run_driver(
        acl_client,
        "simple-consume",
        endpoints=acl_front,
        topic="GrpcOpen",
        group="GrpcAclGroup",
        expect=2,
        await_duration=5,
        timeout_s=60,
        **keys,
    )
    received.check()
    assert sorted(e["msgId"] for e in received.received()) == sorted(
        e["msgId"] for e in sent.sent()
    )


@pytest.mark.parametrize(
    "keys",
    [
        {},
        {"access_key": USER, "secret_key": "wrong"},
        {"access_key": "NoSuchKey", "secret_key": "x"},
    ],
)
def test_calls_whose_credentials_fail_are_unauthorized(
    acl_client: str, acl_front: str, keys: dict[str, str]
) -> None:
    routed = run_driver(acl_client, "route", endpoints=acl_front, topic="GrpcOpen", **keys)
    answers = [e for e in routed.events if e.get("event") in ("route", "error")]
    assert answers and answers[-1].get("codeName") == "UNAUTHORIZED", answers


def test_an_account_without_pub_is_forbidden_to_send(acl_client: str, acl_front: str) -> None:
    keys = {"access_key": USER, "secret_key": USER_SECRET}
    events = _produce(acl_client, acl_front, "GrpcClosed", **keys)
    errors = [e for e in events if e.get("event") == "error"]
    assert errors and errors[-1].get("codeName") == "FORBIDDEN", errors


def test_an_account_without_sub_is_forbidden_to_receive(acl_client: str, acl_front: str) -> None:
    """Checked at the front, as RocketMQ's proxy checks it: the broker's ACL 1.0 has no rule
    for POP_MESSAGE, so without the front's check the message would be handed out. (The
    account may publish there, so it may route; a topic it may do nothing with would already
    fail the route.)"""
    received = run_driver(
        acl_client,
        "simple-consume",
        endpoints=acl_front,
        topic="GrpcPubOnly",
        group="GrpcAclGroup",
        expect=1,
        await_duration=5,
        timeout_s=30,
        access_key=USER,
        secret_key=USER_SECRET,
    )
    assert not received.received(), received.events
    errors = [e for e in received.events if e.get("event") == "error"]
    assert errors and errors[-1].get("codeName") == "FORBIDDEN", errors
