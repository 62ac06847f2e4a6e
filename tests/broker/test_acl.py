"""ACL 1.0 in the broker: address patterns, the check's order and remarks, the admin codes'
writes, reload on change, and our client's signatures, against an in-process broker."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sidewinder.acl.addresses import address_matcher
from sidewinder.acl.errors import AclConfigError, AclDenied
from sidewinder.acl.plain import PlainAccessConfig, PlainAclFiles
from sidewinder.acl.resources import java_hash_map_order
from sidewinder.acl.validator import AclValidator
from sidewinder.client.admin import Admin
from sidewinder.client.admin_acl import (
    AccessConfig,
    BrokerAclConfig,
    broker_acl_config,
    update_access_config,
)
from sidewinder.client.producer import Producer
from sidewinder.protocol.acl import Credentials, compute_signature, sign_request
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.spark.options import OptionError, ReadOptions
from sidewinder.tools.mqadmin.access import tool_credentials
from tests.helpers import send_request
from tests.inprocess import InProcessBroker

PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": 12345678,  # YAML reads an int; RocketMQ takes its text
            "whiteRemoteAddress": None,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
            "groupPerms": ["groupA=DENY", "groupB=PUB|SUB"],
        },
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("192.168.0.*", "192.168.0.77", "192.168.1.77"),
        ("192.168.*.*", "192.168.200.1", "192.169.0.1"),
        ("192.168.1.1-100", "192.168.1.100", "192.168.1.101"),
        ("192.168.1.{1,2,3}", "192.168.1.2", "192.168.1.4"),
        ("127.0.0.1,10.0.0.1", "10.0.0.1", "10.0.0.2"),
        ("127.0.0.1", "127.0.0.1", "127.0.0.2"),
        ("*", "8.8.8.8", None),
        ("1050::0005:0600:300c:*", "1050::5:600:300c:326b", "1050::5:600:300d:1"),
        ("::1", "0:0:0:0:0:0:0:1", "::2"),
    ],
)
def test_address_patterns(pattern: str, inside: str, outside: str | None) -> None:
    matches = address_matcher(pattern)
    assert matches(inside)
    if outside is not None:
        assert not matches(outside)


def test_blank_pattern_matches_nothing_and_bad_ones_are_refused() -> None:
    assert not address_matcher("")("127.0.0.1")
    assert not address_matcher(None)("127.0.0.1")
    with pytest.raises(AclConfigError, match="Netaddress examine"):
        address_matcher("300.1.1.1")


def test_java_hash_map_order() -> None:
    # "b" (98) lands in bucket 2, "a" (97) in bucket 1, whatever the insertion order.
    assert [k for k, _ in java_hash_map_order({"b": 1, "a": 1})] == ["a", "b"]


def _home(tmp_path: Path, data: object = PLAIN_ACL) -> Path:
    (tmp_path / "conf").mkdir(parents=True, exist_ok=True)
    (tmp_path / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(data))
    return tmp_path


def _signed(
    code: int, fields: dict[str, str], ak: str, sk: str, body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, dict(fields), body or None)
    sign_request(request, ak, sk)
    return request


def _pull(topic: str, group: str) -> dict[str, str]:
    return {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0"}


def _denied(validator: AclValidator, request: RemotingCommand, address: str = "127.0.0.1") -> str:
    with pytest.raises(AclDenied) as refused:
        validator.validate(address, request)
    return refused.value.message


def test_the_check_in_rocketmqs_order(tmp_path: Path) -> None:
    acl = AclValidator(PlainAclFiles(_home(tmp_path)))
    send = {"a": "g", "b": "topicB", "c": "TBW102", "d": "4", "e": "0"}
    acl.validate("127.0.0.1", _signed(RequestCode.SEND_MESSAGE_V2, send, "RocketMQ", "12345678"))
    plain = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(send))
    assert _denied(acl, plain) == "No accessKey is configured"
    acl.validate("10.10.103.9", plain)  # a global white-listed address needs no keys
    unknown = _signed(RequestCode.SEND_MESSAGE_V2, send, "Nobody11", "12345678")
    assert _denied(acl, unknown) == "No acl config for Nobody11"
    wrong = _signed(RequestCode.SEND_MESSAGE_V2, send, "RocketMQ", "87654321")
    assert _denied(acl, wrong) == "Check signature failed for accessKey=RocketMQ"
    to_a = _signed(RequestCode.SEND_MESSAGE_V2, {**send, "b": "topicA"}, "RocketMQ", "12345678")
    assert _denied(acl, to_a) == "No default permission for topic:topicA"
    to_c = _signed(RequestCode.SEND_MESSAGE_V2, {**send, "b": "topicC"}, "RocketMQ", "12345678")
    assert _denied(acl, to_c) == "No default permission for topic:topicC"
    pull = _signed(RequestCode.PULL_MESSAGE, _pull("topicB", "groupA"), "RocketMQ", "12345678")
    assert _denied(acl, pull) == "No default permission for group:groupA"
    admin_only = _signed(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, "RocketMQ", "12345678"
    )
    assert _denied(acl, admin_only) == (
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    )
    acl.validate(
        "127.0.0.1",
        _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, "rocketmq2", "12345678"),
    )
    # Ours only: the ACL's own codes need an admin too (RocketMQ 4.9 takes any account).
    for code in (50, 51, 53, 54):
        assert _denied(acl, _signed(code, {}, "RocketMQ", "12345678")) == (
            f"Need admin permission for request code={code}, but accessKey=RocketMQ is not"
        )
        acl.validate("127.0.0.1", _signed(code, {}, "rocketmq2", "12345678"))
    acl.validate("127.0.0.1", _signed(52, {}, "RocketMQ", "12345678"))  # versions only
    body = (
        b'{"consumerDataSet":[{"groupName":"groupB","subscriptionDataSet":[{"topic":"topicZ"}]}]}'
    )
    heartbeat = _signed(RequestCode.HEART_BEAT, {}, "RocketMQ", "12345678", body)
    assert _denied(acl, heartbeat) == "No default permission for topic:topicZ"


def test_signature_covers_sorted_values_then_body() -> None:
    fields = {"b": "2", "a": "1", "Signature": "ignored"}
    expected = base64.b64encode(hmac.new(b"secret", b"12body", hashlib.sha1).digest()).decode()
    assert compute_signature("secret", fields, b"body") == expected


def test_admin_writes_and_reload(tmp_path: Path) -> None:
    home = _home(tmp_path)
    files = PlainAclFiles(home)
    acl = AclValidator(files)
    files.update_account(
        files_config("NewUser1", "secret99", topic_perms=["topicX=PUB"]), acl.snapshot
    )
    acl.reload()
    assert "NewUser1" in acl.snapshot.accounts
    written = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert written["dataVersion"][0]["counter"] == 1
    assert written["accounts"][-1]["topicPerms"] == ["topicX=PUB"]
    with pytest.raises(AclConfigError, match="length should longer than 6"):
        files.update_account(files_config("short", "secret99"), acl.snapshot)
    assert files.delete_account("NewUser1", acl.snapshot)
    assert not files.delete_account("NoSuchKey", acl.snapshot)
    assert files.update_global_white(["127.0.0.*"], None)
    assert not files.update_global_white(["1.1.1.1"], "/etc/passwd")
    # An edit by hand is picked up by the watcher's poll.
    time.sleep(0.01)
    assert acl.reload_if_changed()
    assert "NewUser1" not in acl.snapshot.accounts
    acl.validate("127.0.0.5", RemotingCommand.request(RequestCode.HEART_BEAT))  # white, no keys


def files_config(ak: str, sk: str, topic_perms: list[str] | None = None) -> PlainAccessConfig:
    return PlainAccessConfig(access_key=ak, secret_key=sk, topic_perms=topic_perms)


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    home = _home(tmp_path / "home")
    conf = {"aclEnable": "true", "rocketmqHome": str(home), "autoCreateTopicEnable": "true"}
    with InProcessBroker(tmp_path, conf) as broker:
        yield broker


def test_broker_refuses_before_any_processor(acl_broker: InProcessBroker) -> None:
    def signed_send(topic: str) -> RemotingCommand:
        request = send_request(topic, b"x", code=RequestCode.SEND_MESSAGE, group="g")
        sign_request(request, "RocketMQ", "12345678")
        return request

    refused = acl_broker.invoke(signed_send("topicA"))
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark == (
        "org.apache.rocketmq.acl.common.AclException: No default permission for topic:topicA, "
        "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:610)"
    )
    assert acl_broker.app is not None and acl_broker.app.topics.get("topicA") is None
    sent = acl_broker.invoke(signed_send("topicB"))
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    version = acl_broker.invoke(
        _signed(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, "rocketmq2", "12345678")
    )
    assert version.code == ResponseCode.SUCCESS
    assert "plain_acl.yml" in (version.ext_fields or {})["allAclFileVersion"]


def test_our_clients_sign(acl_broker: InProcessBroker) -> None:
    """Our producer and admin with keys get through; without them the broker refuses."""

    async def scenario() -> tuple[int, str]:
        signed = Producer("aclPy", "127.0.0.1:1", access_key="RocketMQ", secret_key="12345678")
        unsigned = Producer("aclPy2", "127.0.0.1:1")
        try:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
            good = await signed.remoting.invoke(acl_broker.addr, request, 5)
            bad = await unsigned.remoting.invoke(acl_broker.addr, RemotingCommand.request(52), 5)
            assert good.code == ResponseCode.SUCCESS, good.remark
            return bad.code, bad.remark or ""
        finally:
            await signed.remoting.close()
            await unsigned.remoting.close()

    code, remark = acl_broker.call(scenario())
    assert code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in remark


def test_spark_and_mqadmin_take_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = ReadOptions.parse(
        {"namesrvAddr": "n:9876", "subscribe": "T", "accessKey": "ak12345", "secretKey": "sk12345"},
        stream=False,
    )
    assert read.credentials == Credentials("ak12345", "sk12345")
    with pytest.raises(OptionError):
        ReadOptions.parse({"namesrvAddr": "n", "subscribe": "T", "accessKey": "x"}, stream=False)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: toolsKey1\nsecretKey: toolsSecret\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    assert tool_credentials(None, None) == Credentials("toolsKey1", "toolsSecret")
    assert tool_credentials("cliKey12", "cliSecret") == Credentials("cliKey12", "cliSecret")


# conf/acl/ files come before plain_acl.yml; an access key's first account counts.
EXTRA_ACL = {
    "globalWhiteRemoteAddresses": ["172.16.*.*"],
    "accounts": [
        {"accessKey": "ExtraUser1", "secretKey": "ExtraSecret1", "admin": "true"},
        {"accessKey": "RocketMQ", "secretKey": "shadowed99", "topicPerms": []},
    ],
}


def test_cluster_acl_config_as_rocketmq(tmp_path: Path) -> None:
    """GET_BROKER_CLUSTER_ACL_CONFIG: every file's white addresses and first accounts, secret
    keys included, to an admin account (RocketMQ 4.9.7 answers any account); the files are
    read again, so a change made through code 50 shows at once."""
    home = _home(tmp_path / "home")
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "extra.yml").write_text(yaml.safe_dump(EXTRA_ACL, sort_keys=False))
    conf = {"aclEnable": "true", "rocketmqHome": str(home)}
    with InProcessBroker(tmp_path, conf) as broker:
        reply = broker.invoke(
            _signed(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, "rocketmq2", "12345678")
        )
        assert (reply.code, reply.remark, reply.ext_fields or {}) == (
            ResponseCode.SUCCESS,
            None,
            {},
        )
        assert reply.body_bytes == (
            b'{"globalWhiteAddrs":["172.16.*.*","10.10.103.*"],"plainAccessConfigs":['
            b'{"accessKey":"ExtraUser1","admin":true,"secretKey":"ExtraSecret1"},'
            b'{"accessKey":"RocketMQ","admin":false,"secretKey":"shadowed99","topicPerms":[]},'
            b'{"accessKey":"rocketmq2","admin":true,"secretKey":"12345678"}]}'
        )
        as_user = broker.invoke(
            _signed(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, "ExtraUser1", "ExtraSecret1")
        )
        assert as_user.body_bytes == reply.body_bytes
        unsigned = broker.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG))
        assert "No accessKey is configured" in (unsigned.remark or "")

        async def through_our_client() -> BrokerAclConfig:
            admin = Admin("127.0.0.1:1", access_key="rocketmq2", secret_key="12345678")
            try:
                new = AccessConfig("NewUser1", "NewSecret1", topic_perms=("T1=PUB", "T2=SUB"))
                await update_access_config(admin, broker.addr, new)
                return await broker_acl_config(admin, broker.addr)
            finally:
                await admin.close()

        config = broker.call(through_our_client())
    assert config.global_white_addrs == ("172.16.*.*", "10.10.103.*")
    assert [a.access_key for a in config.accounts] == [
        "ExtraUser1",
        "RocketMQ",
        "rocketmq2",
        "NewUser1",
    ]
    assert config.account("NewUser1") == AccessConfig(
        "NewUser1", "NewSecret1", topic_perms=("T1=PUB", "T2=SUB")
    )
