"""The broker's statistics as the admin codes serve them: VIEW_BROKER_STATS_DATA (315),
GET_BROKER_CONSUME_STATS (317), GET_CONSUME_STATS' consumeTps (208) and the "today" counters of
GET_BROKER_RUNTIME_INFO (28), after real sends, pulls and a send-back to a broker in this
process (tests/inprocess.py); the differential tests are tests/interop/test_mqadmin_stats.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.record import MessageRecord, decode_record
from tests.helpers import send_request
from tests.inprocess import InProcessBroker

TOPIC, GROUP = "StatsTopic", "StatsGroup"
SENT = {0: 5, 1: 3}  # messages per queue
PULLED = 5  # all of queue 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    root: Path = tmp_path_factory.mktemp("stats")
    with InProcessBroker(root) as started:
        _create_topic(started, TOPIC)
        for queue, count in SENT.items():
            for _ in range(count):
                sent = started.invoke(_send(queue))
                assert sent.code == ResponseCode.SUCCESS, sent.remark
        yield started


def _create_topic(broker: InProcessBroker, topic: str) -> None:
    created = broker.invoke(
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
        )
    )
    assert created.code == ResponseCode.SUCCESS, created.remark


def _send(queue_id: int, topic: str = TOPIC) -> RemotingCommand:
    return send_request(
        topic,
        b"0123456789",
        group="StatsProducers",
        queue_id=queue_id,
        properties="WAIT\x01true",
        born_timestamp=1700000000000,
    )


def _pull(queue_id: int, offset: int, commit_offset: int, group: str = GROUP) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": TOPIC,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": str(0x1 | 0x4),  # commit offset, subscription in the header
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": "0",
            "subVersion": "0",
            "subscription": "*",
            "expressionType": "TAG",
        },
    )


def _view(broker: InProcessBroker, name: str, key: str) -> RemotingCommand:
    request = RemotingCommand.request(
        RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
    )
    return broker.invoke(request)


def _figures(reply: RemotingCommand) -> dict[str, Any]:
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    data = body.loads_keyed(reply.body_bytes)
    assert isinstance(data, dict)
    return data


def _tick(broker: InProcessBroker) -> None:
    async def tick() -> None:
        assert broker.app is not None
        broker.app.stats.tick()

    broker.call(tick())


@pytest.fixture(scope="module")
def consumed(broker: InProcessBroker) -> int:
    """Pull queue 0 (committing where the pull ended) and send its first message back."""
    pulled = broker.invoke(_pull(0, 0, -1))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    record = decode_record(memoryview(pulled.body_bytes))
    assert isinstance(record, MessageRecord)
    done = broker.invoke(_pull(0, PULLED, PULLED))
    assert done.code == ResponseCode.PULL_NOT_FOUND
    back = broker.invoke(
        RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(record.phy_offset), "group": GROUP, "delayLevel": "0"},
        )
    )
    assert back.code == ResponseCode.SUCCESS, back.remark
    _tick(broker)
    return PULLED


def test_view_broker_stats_data_counts_puts_gets_and_send_backs(
    broker: InProcessBroker, consumed: int
) -> None:
    puts = _figures(_view(broker, "TOPIC_PUT_NUMS", TOPIC))
    assert set(puts) == {"statsDay", "statsHour", "statsMinute"}
    assert set(puts["statsMinute"]) == {"avgpt", "sum", "tps"}
    assert puts["statsMinute"]["sum"] == sum(SENT.values())
    assert puts["statsMinute"]["avgpt"] == 1.0  # one message per send
    assert puts["statsMinute"]["tps"] > 0
    size = _figures(_view(broker, "TOPIC_PUT_SIZE", TOPIC))["statsMinute"]
    assert size["sum"] > 10 * sum(SENT.values())  # whole records, not bodies
    gets = _figures(_view(broker, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}"))["statsMinute"]
    assert gets["sum"] == consumed
    assert gets["avgpt"] == consumed  # one pull
    back = _figures(_view(broker, "SNDBCK_PUT_NUMS", f"{TOPIC}@{GROUP}"))["statsMinute"]
    assert back["sum"] == 1
    cluster = broker.config.broker_cluster_name
    broker_gets = _figures(_view(broker, "BROKER_GET_NUMS", cluster))["statsMinute"]
    assert broker_gets["sum"] == consumed
    broker_puts = _figures(_view(broker, "BROKER_PUT_NUMS", cluster))["statsMinute"]
    assert broker_puts["sum"] >= sum(SENT.values())


@pytest.mark.parametrize(
    ("name", "key"),
    [("TOPIC_PUT_NUMS", "NoSuchTopic"), ("NO_SUCH_STATS", TOPIC), ("GROUP_GET_NUMS", TOPIC)],
)
def test_view_broker_stats_data_refuses_what_was_never_counted(
    broker: InProcessBroker, name: str, key: str
) -> None:
    reply = _view(broker, name, key)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert reply.remark == f"The stats <{name}> <{key}> not exist"


def test_consume_stats_has_the_group_s_consume_tps(broker: InProcessBroker, consumed: int) -> None:
    reply = broker.invoke(
        RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})
    )
    data = _figures(reply)
    assert data["consumeTps"] > 0
    offsets = sorted(
        (q.fields["queueId"], o["consumerOffset"]) for q, o in data["offsetTable"].items()
    )
    assert offsets == [(0, 5), (1, 0)]


def test_broker_consume_stats_lists_every_group_and_the_total_lag(
    broker: InProcessBroker, consumed: int
) -> None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    data = _figures(broker.invoke(request))
    assert data["brokerAddr"] == broker.addr
    groups = {name: stats for entry in data["consumeStatsList"] for name, stats in entry.items()}
    assert len(groups[GROUP]) == 1
    assert groups[GROUP][0]["consumeTps"] > 0
    assert data["totalDiff"] == sum(SENT.values()) - consumed
    ordered = RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    only_order = _figures(broker.invoke(ordered))
    assert all(stats == [] for e in only_order["consumeStatsList"] for stats in e.values())
    assert only_order["totalDiff"] == 0


def test_missing_header_fields_read_as_rocketmq_reads_them(
    broker: InProcessBroker, consumed: int
) -> None:
    """RocketMQ's reflective header decoding logs a missing @CFNotNull field and goes on: no
    isOrder is false, no statsName or statsKey is null."""
    for ext in (None, {"other": "x"}):
        request = RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, ext)
        assert _figures(broker.invoke(request))["totalDiff"] == sum(SENT.values()) - consumed
    reply = broker.invoke(
        RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "X"})
    )
    assert (reply.code, reply.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "The stats <X> <null> not exist",
    )


def test_runtime_info_counts_today(broker: InProcessBroker, consumed: int) -> None:
    data = _figures(broker.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)))
    table = data["table"]
    assert int(table["msgPutTotalTodayNow"]) >= sum(SENT.values())
    assert int(table["msgGetTotalTodayNow"]) == consumed
    for key in ("msgPutTotalTodayMorning", "msgGetTotalYesterdayMorning"):
        assert table[key] == "0"  # no midnight yet


def test_a_deleted_topic_s_and_group_s_stats_are_gone(broker: InProcessBroker) -> None:
    """As RocketMQ's onTopicDeleted and onGroupDeleted."""
    _create_topic(broker, "DoomedTopic")
    assert broker.invoke(_send(0, "DoomedTopic")).code == ResponseCode.SUCCESS
    assert _view(broker, "TOPIC_PUT_NUMS", "DoomedTopic").code == ResponseCode.SUCCESS
    deleted = broker.invoke(
        RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "DoomedTopic"})
    )
    assert deleted.code == ResponseCode.SUCCESS, deleted.remark
    assert _view(broker, "TOPIC_PUT_NUMS", "DoomedTopic").code == ResponseCode.SYSTEM_ERROR
    pulled = broker.invoke(_pull(1, 0, -1, group="DoomedGroup"))
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    key = f"{TOPIC}@DoomedGroup"
    assert _view(broker, "GROUP_GET_NUMS", key).code == ResponseCode.SUCCESS
    deleted = broker.invoke(
        RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "DoomedGroup"})
    )
    assert deleted.code == ResponseCode.SUCCESS, deleted.remark
    assert _view(broker, "GROUP_GET_NUMS", key).code == ResponseCode.SYSTEM_ERROR
