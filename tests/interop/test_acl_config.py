"""GET_BROKER_CLUSTER_ACL_CONFIG (54) on every target: RocketMQ 4.9.7's broker and ours, each
with aclEnable=true and the same ACL files (conf/plain_acl.yml and one under conf/acl/), answer
the same bytes: every file's global white addresses, each access key's first account with its
secret key, to an admin and to a plain account alike (4.9.7 does not count 54 among its admin
codes). Without ACL, RocketMQ's broker never answers; ours refuses at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.admin_acl import (
    AccessConfig,
    BrokerAclConfig,
    broker_acl_config,
    delete_access_config,
    update_access_config,
)
from sidewinder.protocol.acl import sign_request
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from sidewinder.remoting.connection import RemotingTimeoutError
from tests.interop.acl_targets import acl_cluster

ADMIN, ADMIN_SECRET = "AclAdmin1", "AdminSecret1"
USER, USER_SECRET = "RocketMQ", "12345678"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*", "192.168.0.*"],
    "accounts": [
        {
            "accessKey": USER,
            "secretKey": 12345678,  # a YAML number: both answer its text
            "whiteRemoteAddress": None,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["topicA=DENY", "topicB=PUB|SUB"],
            "groupPerms": [],
        },
        {"accessKey": ADMIN, "secretKey": ADMIN_SECRET, "admin": True},
        {"accessKey": "ExtraUser1", "secretKey": "shadowed99"},  # conf/acl/ defines it first
    ],
}
EXTRA_ACL = {
    "globalWhiteRemoteAddresses": ["172.16.*.*"],
    "accounts": [
        {
            "accessKey": "ExtraUser1",
            "secretKey": "ExtraSecret1",
            "whiteRemoteAddress": "127.0.0.9",
            "admin": "true",
        },
        {
            "accessKey": "Numeric1",
            "secretKey": 87654321,
            "topicPerms": [],
            "defaultTopicPerm": "PUB",
        },
    ],
}
# What RocketMQ 4.9.7 answered for these files (fastjson: fields sorted, nulls left out).
EXPECTED = (
    b'{"globalWhiteAddrs":["172.16.*.*","10.10.103.*","192.168.0.*"],"plainAccessConfigs":['
    b'{"accessKey":"ExtraUser1","admin":true,"secretKey":"ExtraSecret1",'
    b'"whiteRemoteAddress":"127.0.0.9"},'
    b'{"accessKey":"Numeric1","admin":false,"defaultTopicPerm":"PUB","secretKey":"87654321",'
    b'"topicPerms":[]},'
    b'{"accessKey":"RocketMQ","admin":false,"defaultGroupPerm":"SUB","defaultTopicPerm":"DENY",'
    b'"groupPerms":[],"secretKey":"12345678","topicPerms":["topicA=DENY","topicB=PUB|SUB"]},'
    b'{"accessKey":"AclAdmin1","admin":true,"secretKey":"AdminSecret1"}]}'
)


@pytest.fixture(scope="module")
def acl_target(
    target_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterTarget]:
    workdir = tmp_path_factory.mktemp(f"{target_kind}-acl-config")
    files = {"conf/plain_acl.yml": PLAIN_ACL, "conf/acl/extra.yml": EXTRA_ACL}
    yield from acl_cluster(target_kind, workdir, files)


def _ask(
    client: SyncRemotingClient, addr: str, keys: tuple[str, str] | None, timeout_s: float = 10
) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    if keys is not None:
        sign_request(request, *keys)
    return client.invoke(addr, request, timeout_s)


def test_every_account_with_its_secret(
    acl_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    reply = _ask(client, acl_target.broker_addr, (ADMIN, ADMIN_SECRET))
    assert (reply.code, reply.remark, reply.ext_fields or {}) == (ResponseCode.SUCCESS, None, {})
    assert reply.body_bytes == EXPECTED


def test_an_ordinary_account_reads_and_changes_the_acl_only_on_rocketmq(
    acl_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    """RocketMQ 4.9.7 lets an account that is no admin read every secret key (54) and make
    itself an admin (50). Ours refuses both, as it refuses that account a topic change."""
    read = _ask(client, acl_target.broker_addr, (USER, USER_SECRET))
    fields = {"accessKey": "SelfMade1", "secretKey": "SelfSecret1", "admin": "true"}
    change = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)
    sign_request(change, USER, USER_SECRET)
    changed = client.invoke(acl_target.broker_addr, change, 10)
    if acl_target.kind == "rocketmq":
        assert (read.code, read.body_bytes) == (ResponseCode.SUCCESS, EXPECTED)
        assert changed.code == ResponseCode.SUCCESS, changed.remark
        undo = RemotingCommand.request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "SelfMade1"})
        sign_request(undo, ADMIN, ADMIN_SECRET)
        assert client.invoke(acl_target.broker_addr, undo, 10).code == ResponseCode.SUCCESS
        return
    for reply, code in ((read, 54), (changed, 50)):
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert f"Need admin permission for request code={code}, but accessKey={USER} is not" in (
            reply.remark or ""
        )
    assert _ask(client, acl_target.broker_addr, (ADMIN, ADMIN_SECRET)).body_bytes == EXPECTED


def test_unsigned_is_refused(acl_target: ClusterTarget, client: SyncRemotingClient) -> None:
    reply = _ask(client, acl_target.broker_addr, None)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert "No accessKey is configured" in (reply.remark or "")


def test_a_change_shows_at_once(acl_target: ClusterTarget) -> None:
    """Both read the files again for 54: an account made through code 50 is there at the end
    (appended to plain_acl.yml), and gone after code 51, with no wait for a reload."""
    added = AccessConfig("ConsoleNew1", "NewSecret1", topic_perms=("T1=PUB",))

    async def scenario() -> tuple[BrokerAclConfig, BrokerAclConfig]:
        async with Admin(
            acl_target.namesrv_addr, access_key=ADMIN, secret_key=ADMIN_SECRET
        ) as admin:
            await update_access_config(admin, acl_target.broker_addr, added)
            with_it = await broker_acl_config(admin, acl_target.broker_addr)
            await delete_access_config(admin, acl_target.broker_addr, added.access_key)
            return with_it, await broker_acl_config(admin, acl_target.broker_addr)

    with_it, without = asyncio.run(scenario())
    assert with_it.accounts[-1] == added
    assert [a.access_key for a in without.accounts] == [
        "ExtraUser1",
        "Numeric1",
        USER,
        ADMIN,
    ]
    assert without.global_white_addrs == ("172.16.*.*", "10.10.103.*", "192.168.0.*")


def test_without_acl(target: ClusterTarget, client: SyncRemotingClient) -> None:
    """aclEnable=false: RocketMQ 4.9.7's handler swallows its NullPointerException and sends
    nothing; ours answers SYSTEM_ERROR at once, saying why."""
    started = time.monotonic()
    if target.kind == "rocketmq":
        with pytest.raises(RemotingTimeoutError):
            _ask(client, target.broker_addr, None, timeout_s=3)
        return
    reply = _ask(client, target.broker_addr, None)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert "aclEnable=false" in (reply.remark or "")
    assert time.monotonic() - started < 1
