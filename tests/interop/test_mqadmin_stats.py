"""The broker's statistics (RocketMQ's BrokerStatsManager) through RocketMQ's own mqadmin on
every target: statsAll, brokerConsumeStats, consumerProgress's TPS, brokerStatus's "today"
counters, and VIEW_BROKER_STATS_DATA (315) / GET_BROKER_CONSUME_STATS (317) as raw requests.

The figures compared are the counts of what the test sent, consumed and sent back; rates depend
on when the broker's 10 s samples fall, so only their being non-zero is. The minute window
holds a minute: each figure is read within a minute of the traffic.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.offsets import settle_consumed_group
from interop.target import ClusterTarget
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import broker_status_after_warm_up
from tests.interop.our_mqadmin import mqadmin as our_mqadmin
from tests.interop.scenarios import consume, produce

pytestmark = pytest.mark.interop

COUNT, LATER = 100, 2  # messages sent and consumed; of them refused once (sent back)


@dataclass(frozen=True)
class Traffic:
    topic: str
    group: str
    before: dict[str, int]  # brokerStatus's today counters before it


def today_counters(target: ClusterTarget) -> dict[str, int]:
    status = broker_status_after_warm_up(target)
    found = dict(re.findall(r"^(msg(?:Put|Get)Total\w+)\s*:\s*(\d+)\s*$", status, re.MULTILINE))
    return {key: int(value) for key, value in found.items()}


@pytest.fixture(scope="module")
def traffic(target: ClusterTarget) -> Traffic:
    """COUNT messages sent to a new topic and consumed by a new group, LATER of them refused
    once (sent back, then consumed from the retry topic); the consumer commits and leaves."""
    topic, group = unique("StatsTopic"), unique("StatsGroup")
    create_topic(target.namesrv_addr, topic)
    before = today_counters(target)
    produce(target, "java", topic, COUNT, group=unique("StatsProducers"))
    consume(target, "java", topic, COUNT, group=group, reconsume_later=LATER)
    settle_consumed_group(target.broker_addr, group, topic, queues=4, total=COUNT)
    return Traffic(topic, group, before)


def view(client: SyncRemotingClient, target: ClusterTarget, name: str, key: str) -> RemotingCommand:
    request = RemotingCommand.request(
        RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
    )
    return client.invoke(target.broker_addr, request, 5)


def minute_sums(
    client: SyncRemotingClient, target: ClusterTarget, items: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """Each item's minute sum, once every item shows one (the broker samples every 10 s)."""
    deadline = time.monotonic() + 25
    while True:
        sums: dict[str, Any] = {}
        for label, (name, key) in items.items():
            reply = view(client, target, name, key)
            if reply.code == ResponseCode.SUCCESS:
                data = body.loads(reply.body_bytes)
                assert set(data) == {"statsDay", "statsHour", "statsMinute"}, data
                assert all(set(v) == {"avgpt", "sum", "tps"} for v in data.values()), data
                sums[label] = data["statsMinute"]["sum"]
            else:
                sums[label] = (reply.code, reply.remark)
        if all(isinstance(v, int) and v for v in sums.values()) or time.monotonic() > deadline:
            return sums
        time.sleep(1)


def test_live_figures_after_traffic(
    target: ClusterTarget, client: SyncRemotingClient, traffic: Traffic
) -> None:
    """315's minute sums, then statsAll, consumerProgress and brokerStatus: within a minute."""
    topic, group, ns = traffic.topic, traffic.group, target.namesrv_addr
    sums = minute_sums(
        client,
        target,
        {
            "in": ("TOPIC_PUT_NUMS", topic),
            "out": ("GROUP_GET_NUMS", f"{topic}@{group}"),
            "back": ("SNDBCK_PUT_NUMS", f"{topic}@{group}"),
        },
    )
    assert sums == {"in": COUNT, "out": COUNT, "back": LATER}

    out = mqadmin(ns, "statsAll", "-t", topic).stdout
    ours = our_mqadmin(target, "statsAll", "-t", topic)
    for printed in (out, ours):
        header, *rows = [line.split() for line in printed.splitlines() if line.strip()]
        assert header == [
            *("#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS", "#OutTPS"),
            *("#InMsg24Hour", "#OutMsg24Hour"),
        ]
        assert len(rows) == 1, printed
        name, consumer, accumulation, in_tps, out_tps, in_day, out_day = rows[0]
        assert (name, consumer, accumulation) == (topic, group, "0")
        assert float(in_tps) > 0 and float(out_tps) > 0, printed
        assert (int(in_day), int(out_day)) == (COUNT, COUNT), printed
    # Our mqadmin's table is RocketMQ's, column for column.
    assert [len(line) for line in ours.splitlines()] == [len(line) for line in out.splitlines()]

    progress = mqadmin(ns, "consumerProgress", "-g", group).stdout
    tps = re.search(r"^Consume TPS: (\d+\.\d\d)$", progress, re.MULTILINE)
    assert tps is not None and float(tps.group(1)) > 0, progress
    assert re.search(r"^Diff Total: 0$", progress, re.MULTILINE), progress

    after = today_counters(target)
    assert set(after) == {
        f"msg{kind}Total{when}"
        for kind in ("Put", "Get")
        for when in ("YesterdayMorning", "TodayMorning", "TodayNow")
    }
    # Puts: the sends, each send-back (to SCHEDULE_TOPIC_XXXX) and its delivery to %RETRY%;
    # gets: every message pulled, the retried ones twice; a consumer whose pull of a batch
    # timed out on a loaded machine pulls it again, so gets may be more.
    put = after["msgPutTotalTodayNow"] - traffic.before["msgPutTotalTodayNow"]
    got = after["msgGetTotalTodayNow"] - traffic.before["msgGetTotalTodayNow"]
    assert put == COUNT + 2 * LATER and got >= COUNT + LATER, (put, got)


def test_missing_stats_item_is_a_system_error(
    target: ClusterTarget, client: SyncRemotingClient, traffic: Traffic
) -> None:
    for name, key in (
        ("TOPIC_PUT_NUMS", unique("NoSuchTopic")),
        ("GROUP_GET_NUMS", f"{traffic.topic}@{unique('NoSuchGroup')}"),
        ("NO_SUCH_STATS", traffic.topic),
    ):
        reply = view(client, target, name, key)
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"The stats <{name}> <{key}> not exist",
        )


def test_broker_consume_stats(target: ClusterTarget, traffic: Traffic) -> None:
    ns, addr = target.namesrv_addr, target.broker_addr
    out = mqadmin(ns, "brokerConsumeStats", "-b", addr).stdout
    lines = out.splitlines()
    assert lines[0].split() == [
        *("#Topic", "#Group", "#Broker", "Name", "#QID", "#Broker", "Offset"),
        *("#Consumer", "Offset", "#Diff", "#LastTime"),
    ]
    rows = [line.split() for line in lines if line.startswith(f"{traffic.topic} ")]
    # topic, group, broker name, queue, broker offset, consumer offset, diff, date, time
    assert sorted(int(r[3]) for r in rows) == [0, 1, 2, 3], out
    assert all(r[1] == traffic.group and len(r) == 9 for r in rows), out
    assert sum(int(r[4]) for r in rows) == sum(int(r[5]) for r in rows) == COUNT, out
    assert all(r[6] == "0" for r in rows), out
    assert re.search(r"^Diff Total: \d+$", out, re.MULTILINE), out
    ordered = mqadmin(ns, "brokerConsumeStats", "-b", addr, "-o", "true").stdout
    assert traffic.topic not in ordered  # not an order topic
    assert re.search(r"^Diff Total: \d+$", ordered, re.MULTILINE), ordered
    # Our mqadmin prints the same table: the same lines for the test's topic.
    ours = our_mqadmin(target, "brokerConsumeStats", "-b", addr)
    assert ours.splitlines()[0] == lines[0]
    assert [ln for ln in ours.splitlines() if ln.startswith(f"{traffic.topic} ")] == [
        ln for ln in lines if ln.startswith(f"{traffic.topic} ")
    ]
    assert re.search(r"^Diff Total: \d+$", ours, re.MULTILINE), ours


def test_broker_consume_stats_raw(
    target: ClusterTarget, client: SyncRemotingClient, traffic: Traffic
) -> None:
    """317's ConsumeStatsList: the group's topics (its retry topic too). RocketMQ's reflective
    header decoding logs a missing @CFNotNull isOrder and goes on with false."""
    for ext in ({"isOrder": "false"}, None, {"other": "x"}):
        request = RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, ext)
        reply = client.invoke(target.broker_addr, request, 10)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        data = body.loads_keyed(reply.body_bytes)
        assert set(data) == {"brokerAddr", "consumeStatsList", "totalDiff"}
        assert data["brokerAddr"] == target.broker_addr
        groups = {g: stats for entry in data["consumeStatsList"] for g, stats in entry.items()}
        topics = {
            key.fields["topic"] for stats in groups[traffic.group] for key in stats["offsetTable"]
        }
        assert topics == {traffic.topic, f"%RETRY%{traffic.group}"}
        assert all(set(s) == {"consumeTps", "offsetTable"} for s in groups[traffic.group])


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        ({"statsName": "TOPIC_PUT_NUMS"}, "The stats <TOPIC_PUT_NUMS> <null> not exist"),
        (None, "The stats <null> <null> not exist"),
    ],
)
def test_view_broker_stats_data_without_its_fields(
    target: ClusterTarget, client: SyncRemotingClient, ext: dict[str, str] | None, remark: str
) -> None:
    request = RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA, ext)
    reply = client.invoke(target.broker_addr, request, 5)
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, remark)
