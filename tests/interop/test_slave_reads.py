"""Reading from a broker group's slave, on RocketMQ 4.9.7's pair and ours: with slaveReadEnable
a master names the slave (whichBrokerWhenConsumeSlowly) to a consumer reading cold data, else
the master; a slave keeps no offset a pull commits, and answers a pull past its queue's end
with a retry rather than moving the consumer's offset. A slave refuses topic and group changes
and transaction ends, with RocketMQ's codes and remarks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.replica import ReplicaBroker, send, wait_for_topic
from interop.target import ClusterTarget, running_target
from sidewinder.client.pulling import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique

pytestmark = pytest.mark.interop

# Every pull that finds a message reads "cold" data when no memory counts as warm.
SLAVE_READS = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"}


@pytest.fixture(params=["rocketmq", "sidewinder"])
def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ClusterTarget, ReplicaBroker]]:
    kind = request.param
    with running_target(kind, tmp_path / "master", SLAVE_READS, discard=True) as master:
        slave = ReplicaBroker(kind, tmp_path / "slave", master).start()
        try:
            yield master, slave
        finally:
            slave.kill()


def pull(
    client: SyncRemotingClient,
    addr: str,
    topic: str,
    group: str,
    offset: int,
    *,
    commit_offset: int = -1,
) -> RemotingCommand:
    flags = FLAG_SUBSCRIPTION | (FLAG_COMMIT_OFFSET if commit_offset >= 0 else 0)
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=flags,
        commit_offset=max(commit_offset, 0),
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
        expression_type="TAG",
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    return client.invoke(addr, request, 10)


def suggested(reply: RemotingCommand) -> int:
    return PullMessageResponseHeader.from_ext(reply.ext_fields).suggest_which_broker_id


def test_reading_from_and_writing_to_a_slave(pair: tuple[ClusterTarget, ReplicaBroker]) -> None:
    master, slave = pair
    topic, group = unique("SlaveRead"), unique("SlaveReadGroup")
    create_topic(master.namesrv_addr, topic, cluster=master.cluster_name, queues=1)
    client = SyncRemotingClient()
    try:
        for n in range(10):
            reply = send(client, master.broker_addr, topic, f"k-{n}")
            assert reply.code == ResponseCode.SUCCESS, reply
        cold = pull(client, master.broker_addr, topic, group, 0)
        assert cold.code == ResponseCode.SUCCESS, cold
        assert suggested(cold) == 1, "cold data: read it from the slave"
        # Without slaveReadEnable the master always names itself.
        args = ["-b", master.broker_addr, "-k", "slaveReadEnable", "-v", "false"]
        mqadmin(master.namesrv_addr, "updateBrokerConfig", *args)
        assert suggested(pull(client, master.broker_addr, topic, group, 0)) == 0

        wait_for_topic(client, slave.addr, topic)
        deadline = time.monotonic() + 30
        while True:
            on_slave = pull(client, slave.addr, topic, group, 0, commit_offset=5)
            if on_slave.code == ResponseCode.SUCCESS:
                break
            assert time.monotonic() < deadline, on_slave
            time.sleep(0.5)
        query = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": topic, "queueId": "0"},
        )
        kept = client.invoke(slave.addr, query, 5)
        # Not 5: the slave kept nothing, and answers as for a group with no offset on a queue
        # that starts at 0.
        assert (kept.code, (kept.ext_fields or {}).get("offset")) == (ResponseCode.SUCCESS, "0")
        past = pull(client, slave.addr, topic, group, 1000)
        assert past.code == ResponseCode.PULL_RETRY_IMMEDIATELY, past
        assert suggested(past) == 0

        changes = [
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "readQueueNums": "2",
                    "writeQueueNums": "2",
                    "perm": "6",
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                },
            ),
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}),
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                {},
                body=b'{"groupName":"%s"}' % group.encode(),
            ),
            RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group}),
        ]
        for change in changes:
            refused = client.invoke(slave.addr, change, 5)
            assert (refused.code, refused.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, "
                "please execute it from master broker.",
            ), change.code
        end = RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            {
                "producerGroup": "SlaveTx",
                "tranStateTableOffset": "0",
                "commitLogOffset": "0",
                "commitOrRollback": "8",
                "fromTransactionCheck": "false",
                "msgId": "7F00000100002A9F0000000000000000",
            },
        )
        assert client.invoke(slave.addr, end, 5).code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        client.close()
