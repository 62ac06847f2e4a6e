"""A slave replicating from an ACL-enabled master, on RocketMQ 4.9.7's pair and ours (both with
aclEnable=true and the same plain_acl.yml). The HA port has no ACL, so the CommitLog follows at
once; the slave's metadata sync, which RocketMQ 4.9 sends unsigned, is refused until the
master white-lists the slave's address, and then the slave takes the master's topics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from interop.replica import ReplicaBroker, commit_log_max_offset
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.acl import sign_request
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request, unique

pytestmark = pytest.mark.interop

ADMIN, SECRET = "AclAdmin1", "AdminSecret1"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [{"accessKey": ADMIN, "secretKey": SECRET, "admin": True}],
}


def acl_conf(workdir: Path) -> dict[str, str]:
    home = workdir / "rocketmq-home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    return {"aclEnable": "true", "rocketmqHome": str(home)}


@pytest.fixture(params=["rocketmq", "sidewinder"])
def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ClusterTarget, ReplicaBroker]]:
    kind = request.param
    master = create_target(kind, tmp_path / "master", acl_conf(tmp_path / "master"))
    master.start()
    try:
        conf = acl_conf(tmp_path / "slave")
        slave = ReplicaBroker(kind, tmp_path / "slave", master, conf=conf).start()
        try:
            yield master, slave
        finally:
            slave.kill()
    finally:
        master.kill()


def signed(code: int, fields: dict[str, str] | None = None, data: bytes = b"") -> RemotingCommand:
    request = RemotingCommand.request(code, fields, data or None)
    sign_request(request, ADMIN, SECRET)
    return request


def slave_has_topic(client: SyncRemotingClient, addr: str, topic: str) -> bool:
    reply = client.invoke(addr, signed(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
    assert reply.code == ResponseCode.SUCCESS, reply
    return topic in reply.body_bytes.decode()


def test_a_slave_of_an_acl_master(pair: tuple[ClusterTarget, ReplicaBroker]) -> None:
    master, slave = pair
    topic = unique("AclHaTopic")
    client = SyncRemotingClient()
    try:
        created = client.invoke(
            master.broker_addr,
            signed(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "readQueueNums": "1",
                    "writeQueueNums": "1",
                    "perm": "6",
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                },
            ),
            10,
        )
        assert created.code == ResponseCode.SUCCESS, created
        for n in range(20):
            message = send_request(
                topic,
                f"body {n}".encode(),
                code=RequestCode.SEND_MESSAGE,
                group="AclHaProducer",
                properties={"KEYS": f"k-{n}"},
            )
            sign_request(message, ADMIN, SECRET)
            reply = client.invoke(master.broker_addr, message, 10)
            assert reply.code == ResponseCode.SUCCESS, reply
        top = commit_log_max_offset(client, master.broker_addr)
        deadline = time.monotonic() + 30
        while (commit_log_max_offset(client, slave.addr) or 0) < (top or 0):
            assert time.monotonic() < deadline, "the CommitLog did not follow"
            time.sleep(0.2)
        # Two sync rounds (3 s after start, then every 10 s) pass without the topic.
        time.sleep(14)
        assert not slave_has_topic(client, slave.addr, topic), "an unsigned sync got through"
        white = client.invoke(
            master.broker_addr,
            signed(
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                {"globalWhiteAddrs": "10.10.103.*,127.0.0.1"},
            ),
            10,
        )
        assert white.code == ResponseCode.SUCCESS, white
        deadline = time.monotonic() + 40
        while not slave_has_topic(client, slave.addr, topic):
            assert time.monotonic() < deadline, "the white-listed slave never synced"
            time.sleep(0.5)
    finally:
        client.close()
