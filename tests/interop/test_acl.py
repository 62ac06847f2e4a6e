"""ACL 1.0 on every target: aclEnable=true with one plain_acl.yml, checked the same way.

Each target (RocketMQ 4.9.7 and Sidewinder) runs with the same broker.conf and the same
`conf/plain_acl.yml` under its RocketMQ home. Raw requests, signed as AclClientRPCHook signs them
or not, must get the same code and the same remark, byte for byte, from both; the stock Java
client (AclClientRPCHook) and the Go client (primitive.Credentials) produce and consume with the
right keys and fail with a wrong secret; a refused send creates no topic and a refused heartbeat
registers no consumer; the stock mqadmin's ACL sub-commands change the file and the check
follows (RocketMQ 4.9.7 rereads its files every 5 s, so changes are awaited by polling), and
ours print what it prints and make the same changes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from interop.drivers import consume_messages, produce_messages, run_driver
from interop.mqadmin import mqadmin
from interop.target import ClusterTarget
from sidewinder.protocol import body
from sidewinder.protocol.acl import sign_request
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import pull_request, send_request
from tests.interop.acl_targets import acl_cluster, rocketmq_home
from tests.interop.our_mqadmin import ours_run

USER, USER_SECRET = "RocketMQ", "12345678"
ADMIN, ADMIN_SECRET = "AclAdmin1", "AdminSecret1"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": USER,
            "secretKey": USER_SECRET,
            "whiteRemoteAddress": None,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["AclOpen=PUB|SUB", "AclClosed=DENY", "AclSubOnly=SUB"],
            "groupPerms": ["aclDeniedGroup=DENY"],
        },
        {"accessKey": ADMIN, "secretKey": ADMIN_SECRET, "admin": True},
    ],
}
EXC = "org.apache.rocketmq.acl.common.AclException: "
MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"


def _where(method: str, line: int) -> str:
    return f", {MANAGER}.{method}(PlainPermissionManager.java:{line})"


@pytest.fixture(scope="module")
def acl_target(
    target_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterTarget]:
    workdir = tmp_path_factory.mktemp(f"{target_kind}-acl")
    yield from acl_cluster(target_kind, workdir, {"conf/plain_acl.yml": PLAIN_ACL})


def _send(topic: str, group: str = "aclProducers") -> RemotingCommand:
    return send_request(
        topic, b"acl-body", code=RequestCode.SEND_MESSAGE, group=group, properties={}
    )


def _pull(topic: str, group: str) -> RemotingCommand:
    return pull_request(topic, group, max_msg_nums=1, sys_flag=0)


def _signed(request: RemotingCommand, ak: str = USER, sk: str = USER_SECRET) -> RemotingCommand:
    sign_request(request, ak, sk)
    return request


def _answer(
    client: SyncRemotingClient, target: ClusterTarget, request: RemotingCommand
) -> tuple[int, str | None]:
    reply = client.invoke(target.broker_addr, request, 10)
    return reply.code, reply.remark


REFUSALS: dict[str, tuple[Callable[[], RemotingCommand], str]] = {
    "unsigned": (lambda: _send("AclOpen"), "No accessKey is configured" + _where("validate", 663)),
    "unknown key": (
        lambda: _signed(_send("AclOpen"), "Stranger1", USER_SECRET),
        "No acl config for Stranger1" + _where("validate", 667),
    ),
    "wrong secret": (
        lambda: _signed(_send("AclOpen"), USER, "wrong-secret"),
        f"Check signature failed for accessKey={USER}" + _where("validate", 683),
    ),
    "missing signature": (
        lambda: RemotingCommand.request(
            RequestCode.SEND_MESSAGE, {**(_send("AclOpen").ext_fields or {}), "AccessKey": USER}
        ),
        f"Check signature failed for accessKey={USER}" + _where("validate", 683),
    ),
    "denied topic": (
        lambda: _signed(_send("AclClosed")),
        "No default permission for topic:AclClosed" + _where("checkPerm", 610),
    ),
    "sub-only topic": (
        lambda: _signed(_send("AclSubOnly")),
        "No default permission for topic:AclSubOnly" + _where("checkPerm", 610),
    ),
    "default-denied topic": (
        lambda: _signed(_send("AclNeverCreated")),
        "No default permission for topic:AclNeverCreated" + _where("checkPerm", 605),
    ),
    "denied group": (
        lambda: _signed(_pull("AclOpen", "aclDeniedGroup")),
        "No default permission for group:aclDeniedGroup" + _where("checkPerm", 610),
    ),
    "admin-only code": (
        lambda: _signed(
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": "AclByUser",
                    "defaultTopic": "TBW102",
                    "readQueueNums": "4",
                    "writeQueueNums": "4",
                    "perm": "6",
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                },
            )
        ),
        f"Need admin permission for request code=17, but accessKey={USER} is not"
        + _where("checkPerm", 580),
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_as_rocketmq(
    acl_target: ClusterTarget, client: SyncRemotingClient, case: str
) -> None:
    make, remark = REFUSALS[case]
    assert _answer(client, acl_target, make()) == (ResponseCode.SYSTEM_ERROR, EXC + remark)


def test_nothing_leaks_before_the_check(
    acl_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    assert _answer(client, acl_target, _signed(_send("AclNeverCreated")))[0] == 1
    heartbeat = body.dumps(
        {
            "clientID": "acl-refused@1",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": "aclDeniedGroup",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [],
                    "unitMode": False,
                }
            ],
        }
    ).encode()
    refused = _signed(RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat))
    code, remark = _answer(client, acl_target, refused)
    assert (code, remark) == (
        ResponseCode.SYSTEM_ERROR,
        EXC + "No default permission for group:aclDeniedGroup" + _where("checkPerm", 610),
    )
    topics = client.invoke(
        acl_target.broker_addr,
        _signed(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), ADMIN, ADMIN_SECRET),
        10,
    )
    assert topics.code == ResponseCode.SUCCESS
    assert "AclNeverCreated" not in body.loads(topics.body_bytes)["topicConfigTable"]
    online = client.invoke(
        acl_target.broker_addr,
        _signed(
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "aclDeniedGroup"}
            ),
            ADMIN,
            ADMIN_SECRET,
        ),
        10,
    )
    assert online.code == ResponseCode.CONSUMER_NOT_ONLINE


def test_admin_account_passes(acl_target: ClusterTarget, client: SyncRemotingClient) -> None:
    create = _signed(REFUSALS["admin-only code"][0](), ADMIN, ADMIN_SECRET)
    assert _answer(client, acl_target, create)[0] == ResponseCode.SUCCESS


@pytest.mark.parametrize("driver", ["java", "go"])
def test_stock_clients_with_keys(acl_target: ClusterTarget, driver: str) -> None:
    keys = {"access_key": USER, "secret_key": USER_SECRET}
    group = f"acl{driver}Consumers"
    sent = produce_messages(
        driver,
        namesrv=acl_target.namesrv_addr,
        topic="AclOpen",
        group=f"acl{driver}P",
        count=3,
        body_prefix=f"{driver}-",
        **keys,
    )
    assert len(sent) == 3
    run = consume_messages(
        driver,
        namesrv=acl_target.namesrv_addr,
        topic="AclOpen",
        group=group,
        expect=3,
        timeout_s=90,
        **keys,
    )
    assert len(run.received()) >= 3


def test_java_client_with_a_wrong_secret(acl_target: ClusterTarget) -> None:
    run = run_driver(
        "java",
        "produce",
        namesrv=acl_target.namesrv_addr,
        topic="AclOpen",
        group="aclWrong",
        count=1,
        access_key=USER,
        secret_key="not-the-secret",
        timeout_s=60,
    )
    assert run.returncode != 0
    assert f"Check signature failed for accessKey={USER}" in run.describe()


def _tools_home(tmp_path: Path) -> Path:
    """An mqadmin working dir whose conf/tools.yml holds the admin's keys (MQAdminStartup)."""
    conf = rocketmq_home(tmp_path) / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "tools.yml").write_text(f"accessKey: {ADMIN}\nsecretKey: {ADMIN_SECRET}\n")
    return tmp_path


def _until(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the ACL change did not take effect"
        time.sleep(0.5)


def test_mqadmin_acl_commands(
    acl_target: ClusterTarget, client: SyncRemotingClient, tmp_path: Path
) -> None:
    tools = _tools_home(tmp_path)
    n, b = acl_target.namesrv_addr, acl_target.broker_addr
    out = mqadmin(
        n,
        "updateAclConfig",
        "-b",
        b,
        "-a",
        "AclNewUser",
        "-s",
        "NewSecret1",
        "-t",
        "AclNewTopic=PUB",
        "-i",
        "DENY",
        "-u",
        "SUB",
        workdir=tools,
    )
    assert "update plain access config to" in out.output
    home = rocketmq_home(acl_target.workdir)
    written = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert [a["accessKey"] for a in written["accounts"]][-1] == "AclNewUser"
    new_send = lambda: _signed(_send("AclNewTopic"), "AclNewUser", "NewSecret1")  # noqa: E731
    _until(lambda: _answer(client, acl_target, new_send())[0] == ResponseCode.SUCCESS)
    version = mqadmin(n, "clusterAclConfigVersion", "-c", acl_target.cluster_name, workdir=tools)
    assert acl_target.broker_name in version.output
    mqadmin(n, "deleteAclConfig", "-b", b, "-a", "AclNewUser", workdir=tools)
    _until(lambda: "No acl config" in (_answer(client, acl_target, new_send())[1] or ""))
    mqadmin(n, "updateGlobalWhiteAddr", "-b", b, "-g", "127.0.0.1", workdir=tools)
    _until(lambda: _answer(client, acl_target, _send("AclOpen"))[0] == ResponseCode.SUCCESS)
    mqadmin(n, "updateGlobalWhiteAddr", "-b", b, "-g", "10.10.103.*", workdir=tools)
    _until(lambda: _answer(client, acl_target, _send("AclOpen"))[0] == ResponseCode.SYSTEM_ERROR)


def _account(target: ClusterTarget, access_key: str) -> dict[str, object] | None:
    written = yaml.safe_load((rocketmq_home(target.workdir) / "conf" / "plain_acl.yml").read_text())
    found = [a for a in written.get("accounts") or [] if a.get("accessKey") == access_key]
    return found[0] if found else None


def test_our_mqadmin_acl_commands_as_rocketmqs(
    acl_target: ClusterTarget, client: SyncRemotingClient, tmp_path: Path
) -> None:
    """Our mqadmin beside RocketMQ's, both signing with conf/tools.yml, each on an account of
    its own: the same output, the same account written, the same effect on the check."""
    tools = _tools_home(tmp_path)
    home = {"ROCKETMQ_HOME": str(rocketmq_home(tools))}
    n, b, c = acl_target.namesrv_addr, acl_target.broker_addr, acl_target.cluster_name
    settings = ["-t", "AclNewTopic=PUB,AclOpen=SUB", "-i", "DENY", "-u", "SUB"]
    settings += ["-g", "aclOurGroup=SUB", "-w", "192.168.7.*", "-m", "false"]
    accounts = {"AclTheirs1": "TheirSecret1", "AclOurs1": "OurSecret1"}

    def ours(*args: str) -> str:
        done = ours_run(acl_target, *args, env=home)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def theirs(*args: str) -> str:
        return mqadmin(n, *args, workdir=tools).stdout

    def send_as(key: str) -> tuple[int, str | None]:
        return _answer(client, acl_target, _signed(_send("AclNewTopic"), key, accounts[key]))

    update = ["updateAclConfig", "-b", b]
    outputs = [
        theirs(*update, "-a", "AclTheirs1", "-s", accounts["AclTheirs1"], *settings),
        ours(*update, "-a", "AclOurs1", "-s", accounts["AclOurs1"], *settings),
    ]
    shape = (
        rf"create or update plain access config to {re.escape(b)} success\.\n"
        r"org\.apache\.rocketmq\.common\.PlainAccessConfig@[0-9a-f]+"
    )
    assert all(re.fullmatch(shape, out) for out in outputs), outputs
    written = {key: _account(acl_target, key) for key in accounts}
    assert all(written.values()), written
    unkeyed = [{**a, "accessKey": "", "secretKey": ""} for a in written.values() if a]
    assert unkeyed[0] == unkeyed[1], written
    for key in accounts:
        _until(lambda k=key: send_as(k)[0] == ResponseCode.SUCCESS)

    for where in (["-b", b], ["-c", c]):
        version = ["clusterAclConfigVersion", *where]
        assert ours(*version) == theirs(*version)

    outputs = [
        theirs("deleteAclConfig", "-b", b, "-a", "AclTheirs1"),
        ours("deleteAclConfig", "-c", c, "-a", "AclOurs1"),
    ]
    assert outputs[1] == outputs[0].replace("AclTheirs1", "AclOurs1"), outputs
    assert outputs[1] == f"delete plain access config account from {b} success.\n" + (
        "account's accesskey is:AclOurs1"
    )
    assert not any(_account(acl_target, key) for key in accounts)
    for key in accounts:
        _until(lambda k=key: "No acl config" in (send_as(k)[1] or ""))

    white = ["updateGlobalWhiteAddr", "-c", c, "-g"]
    out = ours(*white, "127.0.0.1")
    assert out == f"update global white remote addresses to {b} success.\n", out
    _until(lambda: _answer(client, acl_target, _send("AclOpen"))[0] == ResponseCode.SUCCESS)
    assert theirs(*white, "10.10.103.*") == out
    _until(lambda: _answer(client, acl_target, _send("AclOpen"))[0] == ResponseCode.SYSTEM_ERROR)
