"""ACL 1.0 for RocketMQ 5's gRPC clients, at the broker's own front and at an mqproxy (cluster
mode, aclEnable with its own copy of plain_acl.yml) in front of the same ACL broker: the stock
Python and Rust clients' v2 signature checked (UNAUTHORIZED when it fails), the call's
resources checked (FORBIDDEN), and the front's remoting calls made in the client's account's
name, so the broker's plain_acl.yml decides as well."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from interop.drivers import NODE5, PYTHON5, RUST5, run_driver
from interop.ports import lease_port_block
from interop.sidewinder import MqProxy
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


# The clients whose signature is checked here (rust5 signs as python5 does, with its keys).
ACL_CLIENTS = (PYTHON5, RUST5, NODE5)
# rust5 makes its long-polling time its call's deadline: 5 s leaves the front no room.
AWAIT_S = {RUST5: 6}
# How a refused signature reaches the driver: python5's first answered call is QueryRoute (a v2
# UNAUTHORIZED); rust5's start waits for its Telemetry stream, which the front refuses with the
# gRPC status UNAUTHENTICATED (a stream refused at its start carries no v2 status).
REFUSED_AS = {RUST5: ("grpcStatus", "UNAUTHENTICATED")}


@pytest.fixture(params=ACL_CLIENTS)
def acl_client(request: pytest.FixtureRequest) -> str:
    """The stock 5.x client a scenario drives: Python's signs every call (with an empty key
    when it has none), Node's and Rust's only with a key (Node's signature in uppercase hex)."""
    return str(request.param)


@pytest.fixture(scope="module")
def acl_fronts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A broker with ACL on and its own front, and an mqproxy with ACL on in front of it."""
    workdir: Path = tmp_path_factory.mktemp("grpc-acl")
    home = workdir / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    port = lease_port_block()
    conf = {"aclEnable": "true", "rocketmqHome": str(home), "grpcServerPort": port}
    target = create_target("sidewinder", workdir, conf).start()
    client = SyncRemotingClient()
    proxy = None
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
        proxy_conf = {"aclEnable": "true", "rocketmqHome": str(home)}
        proxy = MqProxy(workdir / "mqproxy", target.namesrv_addr, proxy_conf).start()
        yield {"local": f"127.0.0.1:{port}", "mqproxy": proxy.endpoints}
    finally:
        client.close()
        if proxy is not None:
            proxy.stop()
        target.stop()


@pytest.fixture(params=["local", "mqproxy"])
def acl_front(request: pytest.FixtureRequest, acl_fronts: dict[str, str]) -> str:
    return acl_fronts[str(request.param)]


def _produce(acl_client: str, front: str, topic: str, **keys: str) -> list[dict[str, object]]:
    run = run_driver(acl_client, "produce", endpoints=front, topic=topic, count=1, **keys)
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
        await_duration=AWAIT_S.get(acl_client, 5),
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
    key, value = REFUSED_AS.get(acl_client, ("codeName", "UNAUTHORIZED"))
    assert answers and answers[-1].get(key) == value, answers


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
        await_duration=AWAIT_S.get(acl_client, 5),
        timeout_s=30,
        access_key=USER,
        secret_key=USER_SECRET,
    )
    assert not received.received(), received.events
    errors = [e for e in received.events if e.get("event") == "error"]
    assert errors and errors[-1].get("codeName") == "FORBIDDEN", errors
