"""Our mqadmin's statistics sub-commands, printed as RocketMQ's mqadmin prints them: statsAll
(per topic and consuming group: lag, in/out TPS over the last minute, messages in the last 24 h)
and brokerConsumeStats (every group's offsets on one broker).

    mqadmin statsAll -n 127.0.0.1:9876 [-t Orders] [-a]
    mqadmin brokerConsumeStats -n 127.0.0.1:9876 -b 127.0.0.1:10911 [-o true] [-l 100]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.route_cache import MASTER_ID, ClientError, MessageQueue
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.headers import ConsumeStatsRequestHeader
from sidewinder.tools.mqadmin.command import command

RETRY_OR_DLQ = ("%RETRY%", "%DLQ%")


def _front(text: str, size: int) -> str:
    """RocketMQ's frontStringAtLeast: at most `size` characters."""
    return text[:size]


def _masters(route: dict[str, Any]) -> list[str]:
    addrs = ({int(k): v for k, v in b["brokerAddrs"].items()} for b in route["brokerDatas"])
    return [found[MASTER_ID] for found in addrs if MASTER_ID in found]


async def _stats_data(admin: Admin, addr: str, name: str, key: str) -> dict[str, Any] | None:
    """VIEW_BROKER_STATS_DATA: the item's minute, hour and day figures, None if it has none."""
    try:
        reply = await admin.ask_broker(
            addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
        )
    except (ClientError, TimeoutError, OSError):
        return None
    return dict(body.loads(reply.body_bytes))


def _day_sum(data: dict[str, Any]) -> int:
    """RocketMQ's compute24HourSum: the first non-zero of the day, hour and minute sums."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        if data[window]["sum"]:
            return int(data[window]["sum"])
    return 0


async def _rates(admin: Admin, masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(TPS over the last minute, messages in the last 24 h) of one item, over the masters."""
    tps, day = 0.0, 0
    for addr in masters:
        data = await _stats_data(admin, addr, name, key)
        if data is not None:
            tps += data["statsMinute"]["tps"]
            day += _day_sum(data)
    return tps, day


async def _consumers(admin: Admin, masters: list[str], topic: str) -> list[str]:
    """The groups with offsets for the topic, as the first master answers (as RocketMQ)."""
    for addr in masters:
        try:
            reply = await admin.ask_broker(
                addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
            )
        except (ClientError, TimeoutError, OSError):
            return []
        return list(body.loads(reply.body_bytes).get("groupList", []))
    return []


async def _lag(admin: Admin, masters: list[str], group: str, topic: str) -> int:
    total = 0
    ext = ConsumeStatsRequestHeader(group, topic).to_ext()
    for addr in masters:
        try:
            reply = await admin.ask_broker(addr, RequestCode.GET_CONSUME_STATS, ext)
        except (ClientError, TimeoutError, OSError):
            continue
        for _, offsets in body.object_keyed_pairs(reply.body_bytes):
            total += int(offsets["brokerOffset"]) - int(offsets["consumerOffset"])
    return max(total, 0)


STATS_ALL_ROW = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"


async def _print_topic(admin: Admin, topic: str, active_only: bool) -> None:
    masters = _masters(await admin.route(topic))
    in_tps, in_day = await _rates(admin, masters, "TOPIC_PUT_NUMS", topic)
    groups = await _consumers(admin, masters, topic)
    if not groups:
        if not active_only or in_day > 0:
            print(
                STATS_ALL_ROW.format(
                    _front(topic, 64), "", 0, f"{in_tps:.2f}", "", in_day, "NO_CONSUMER"
                )
            )
        return
    for group in groups:
        out_tps, out_day = await _rates(admin, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
        lag = await _lag(admin, masters, group, topic)
        if not active_only or in_day > 0 or out_day > 0:
            print(
                STATS_ALL_ROW.format(
                    _front(topic, 64),
                    _front(group, 64),
                    lag,
                    f"{in_tps:.2f}",
                    f"{out_tps:.2f}",
                    in_day,
                    out_day,
                )
            )


@command(
    "topic and consumer TPS statistics",
    ("-a", {"dest": "active", "action": "store_true", "help": "print active topics only"}),
    ("-t", {"dest": "topic", "default": None, "help": "print this topic only"}),
)
async def stats_all(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        print(
            STATS_ALL_ROW.format(
                "#Topic",
                "#Consumer Group",
                "#Accumulation",
                "#InTPS",
                "#OutTPS",
                "#InMsg24Hour",
                "#OutMsg24Hour",
            )
        )
        for topic in await admin.topics():
            if topic.startswith(RETRY_OR_DLQ) or (args.topic and topic != args.topic):
                continue
            try:
                await _print_topic(admin, topic, args.active)
            except (ClientError, TimeoutError, OSError):
                continue  # as RocketMQ: a topic that cannot be read is left out
    return 0


CONSUME_ROW = "{:<64}  {:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"


@command(
    "every consumer group's offsets on one broker",
    ("-b", {"dest": "broker", "required": True}),
    ("-t", {"dest": "timeout_ms", "type": int, "default": 50000}),
    ("-l", {"dest": "level", "type": int, "default": 0, "help": "least diff printed"}),
    ("-o", {"dest": "order", "default": "false", "help": "order topics only"}),
)
async def broker_consume_stats(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        reply = await admin.ask_broker(
            args.broker.strip(),
            RequestCode.GET_BROKER_CONSUME_STATS,
            {"isOrder": "true" if args.order.strip().lower() == "true" else "false"},
        )
    data = body.loads_keyed(reply.body_bytes)
    print(
        CONSUME_ROW.format(
            "#Topic",
            "#Group",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            "#Diff",
            "#LastTime",
        )
    )
    for entry in data.get("consumeStatsList", []):
        for group, stats_of_topics in entry.items():
            for stats in stats_of_topics:
                _print_offsets(group, stats["offsetTable"], args.level)
    print(f"\nDiff Total: {data.get('totalDiff', 0)}")
    return 0


def _print_offsets(group: str, table: dict[Any, dict[str, int]], level: int) -> None:
    """One ConsumeStats' queues in MessageQueue order, those with a last timestamp."""
    queues = sorted(
        (
            (MessageQueue(k.fields["topic"], k.fields["brokerName"], int(k.fields["queueId"])), v)
            for k, v in table.items()
        ),
        key=lambda pair: pair[0],
    )
    for queue, offsets in queues:
        diff = offsets["brokerOffset"] - offsets["consumerOffset"]
        last = offsets.get("lastTimestamp", 0)
        if diff < level or last <= 0:
            continue
        print(
            CONSUME_ROW.format(
                _front(queue.topic, 64),
                group,
                _front(queue.broker_name, 32),
                queue.queue_id,
                offsets["brokerOffset"],
                offsets["consumerOffset"],
                diff,
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last / 1000)),
            )
        )
