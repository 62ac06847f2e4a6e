"""Our mqadmin's consumer-group sub-commands, printed as RocketMQ's mqadmin prints them:
consumerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset,
allocateMQ; and consumerProgress (offsets and lag) in our own table.

    mqadmin consumerConnection -n 127.0.0.1:9876 -g billing
    mqadmin consumerStatus -n 127.0.0.1:9876 -g billing [-i 10.0.0.5@1234]
    mqadmin resetOffsetByTime -n 127.0.0.1:9876 -g billing -t Orders -s 2024-01-02#03:04:05:000
    mqadmin skipAccumulatedMessage -n 127.0.0.1:9876 -g billing -t Orders
    mqadmin cloneGroupOffset -n 127.0.0.1:9876 -s billing -d billing-copy -t Orders
    mqadmin allocateMQ -n 127.0.0.1:9876 -t Orders -i 10.0.0.5@a,10.0.0.6@b

A reset goes through the broker to the group's clients (INVOKE_BROKER_TO_RESET_OFFSET); with
none online the tool writes the offsets itself and prints RocketMQ's rollback table instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.admin_groups import (
    RollbackStats,
    clone_offsets,
    consumer_connection,
    reset_offset,
    reset_offset_old,
    running_info,
)
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.body import ObjectKey
from sidewinder.protocol.codes import ResponseCode, version_desc
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.java import (
    compact_ms,
    java_bool,
    java_hash_order,
    java_hashmap_order,
    parse_timestamp,
    queue_hash,
    queue_text,
    subscribe_queues,
)
from sidewinder.tools.mqadmin.output import table, when

PQ_FIELDS = (
    "commitOffset",
    "cachedMsgMinOffset",
    "cachedMsgMaxOffset",
    "cachedMsgCount",
    "cachedMsgSizeInMiB",
    "transactionMsgMinOffset",
    "transactionMsgMaxOffset",
    "transactionMsgCount",
    "locked",
    "tryUnlockTimes",
    "lastLockTimestamp",
    "droped",
    "lastPullTimestamp",
    "lastConsumeTimestamp",
)
RATE_FIELDS = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS")


def _java(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@command(
    "a group's clients (address, language, version) and subscriptions",
    ("-g", {"dest": "group", "required": True}),
    ("-b", {"dest": "broker", "default": None}),
)
async def consumer_connection_cmd(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        connection = await consumer_connection(admin, args.group.strip(), args.broker)
    print(f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version")
    for conn in connection.get("connectionSet") or []:
        print(
            f"{conn['clientId']:<36} {conn['clientAddr']:<22} {conn['language']:<10} "
            f"{version_desc(int(conn['version']))}"
        )
    print("\nBelow is subscription:")
    print(f"{'#Topic':<20} #SubExpression")
    subscriptions = connection.get("subscriptionTable") or {}
    for topic in java_hashmap_order(subscriptions, concurrent=True):
        print(f"{subscriptions[topic]['topic']:<20} {subscriptions[topic]['subString']}")
    print()
    print(f"ConsumeType: {connection.get('consumeType')}")
    print(f"MessageModel: {connection.get('messageModel')}")
    print(f"ConsumeFromWhere: {connection.get('consumeFromWhere')}")
    return 0


def _queue_entries(table: dict[Any, Any]) -> list[tuple[MessageQueue, Any]]:
    """A TreeMap<MessageQueue, ...> of a running info, in MessageQueue's order."""
    entries = []
    for key, value in table.items():
        fields = key.fields if isinstance(key, ObjectKey) else key
        queue = MessageQueue(fields["topic"], fields["brokerName"], int(fields["queueId"]))
        entries.append((queue, value))
    return sorted(entries, key=lambda e: e[0])


def running_info_text(info: dict[str, Any]) -> str:
    """ConsumerRunningInfo.formatString."""
    lines = ["#Consumer Properties#"]
    properties = info.get("properties") or {}
    for key in java_hashmap_order(properties, concurrent=True):
        lines.append(f"{key:<40}: {properties[key]}")
    lines += ["", "", "#Consumer Subscription#"]
    subscriptions = sorted(
        info.get("subscriptionSet") or [], key=lambda s: f"{s['topic']}@{s['subString']}"
    )
    for n, sub in enumerate(subscriptions, 1):
        lines.append(
            f"{n:03d} Topic: {sub['topic']:<40} "
            f"ClassFilter: {_java(bool(sub.get('classFilterMode'))):<8} "
            f"SubExpression: {sub['subString']}"
        )
    queues = _queue_entries(info.get("mqTable") or {})
    lines += ["", "", "#Consumer Offset#"]
    lines.append(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}")
    for queue, pq in queues:
        lines.append(
            f"{queue.topic:<32}  {queue.broker_name:<32}  {queue.queue_id:<4}  "
            f"{pq.get('commitOffset', 0):<20}"
        )
    lines += ["", "", "#Consumer MQ Detail#"]
    lines.append(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}")
    for queue, pq in queues:
        lines.append(
            f"{queue.topic:<64}  {queue.broker_name:<32}  {queue.queue_id:<4}  {_pq_text(pq)}"
        )
    lines += ["", "", "#Consumer RT&TPS#"]
    heads = ("#Pull RT", "#Pull TPS", "#Consume RT", "#ConsumeOK TPS")
    lines.append(
        f"{'#Topic':<64}  " + " ".join(f"{h:>14}" for h in heads)
        + f" {'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}"
    )  # fmt: skip
    status = info.get("statusTable") or {}
    for topic in sorted(status):
        rates = status[topic]
        figures = " ".join(f"{float(rates.get(f, 0)):14.2f}" for f in RATE_FIELDS[:4])
        lines.append(
            f"{topic:<32}  {figures} {float(rates.get('consumeFailedTPS', 0)):18.2f} "
            f"{int(rates.get('consumeFailedMsgs', 0)):25d}"
        )
    text = "\n".join(lines) + "\n"
    if info.get("jstack") is not None:
        text += "\n\n#Consumer jstack#\n" + str(info["jstack"])
    return text


def _pq_text(pq: dict[str, Any]) -> str:
    parts = []
    for name in PQ_FIELDS:
        value = pq.get(name, 0)
        if name.endswith("Timestamp"):
            value = compact_ms(int(value))
        parts.append(f"{name}={_java(value)}")
    return "ProcessQueueInfo [" + ", ".join(parts) + "]"


def _analyze_process_queue(client_id: str, info: dict[str, Any]) -> str:
    """ConsumerRunningInfo.analyzeProcessQueue: a push consumer's queues that look stuck."""
    properties = info.get("properties") or {}
    if properties.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
        return ""
    orderly = java_bool(properties.get("PROP_CONSUMEORDERLY"))
    now = int(time.time() * 1000)
    out = []
    for queue, pq in _queue_entries(info.get("mqTable") or {}):
        mq = queue_text(queue.topic, queue.broker_name, queue.queue_id)
        if orderly and not pq.get("locked"):
            waited = now - int(pq.get("lastLockTimestamp", 0))
            out.append(f"{client_id} {mq} can't lock for a while, {waited}ms\n")
        elif orderly and pq.get("droped") and int(pq.get("tryUnlockTimes", 0)) > 0:
            out.append(f"{client_id} {mq} unlock {pq['tryUnlockTimes']} times, still failed\n")
        elif not orderly:
            idle = now - int(pq.get("lastConsumeTimestamp", 0))
            if idle > 60_000 and int(pq.get("cachedMsgCount", 0)) > 0:
                out.append(f"{client_id} {mq} can't consume for a while, maybe blocked, {idle}ms\n")
    return "".join(out)


def _same_subscription(infos: dict[str, dict[str, Any]]) -> bool:
    """ConsumerRunningInfo.analyzeSubscription: push consumers started over 2 minutes ago
    must all subscribe alike, and to something."""
    first = infos[min(infos)]
    properties = first.get("properties") or {}
    started = int(properties.get("PROP_CONSUMER_START_TIMESTAMP", 0) or 0)
    if properties.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
        return True
    if time.time() * 1000 - started <= 120_000:
        return True

    def subs(info: dict[str, Any]) -> list[str]:
        return sorted(json.dumps(s, sort_keys=True) for s in info.get("subscriptionSet") or [])

    return all(subs(i) == subs(first) for i in infos.values()) and bool(subs(first))


@command(
    "what each client of a group reports of itself (-i: one client, in full)",
    ("-g", {"dest": "group", "required": True}),
    ("-i", {"dest": "client_id", "default": None}),
    ("-b", {"dest": "broker", "default": None}),
    ("-s", {"dest": "jstack", "action": "store_true"}),
)
async def consumer_status(args: argparse.Namespace) -> int:
    group = args.group.strip()
    async with Admin(args.namesrv) as admin:
        connection = await consumer_connection(admin, group, args.broker)
        if args.client_id:
            info = await running_info(admin, group, args.client_id.strip(), jstack=args.jstack)
            print(running_info_text(info), end="")
            return 0
        print(f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile")
        now, infos = int(time.time() * 1000), {}
        for conn in connection.get("connectionSet") or []:
            client_id = conn["clientId"]
            try:
                info = await running_info(admin, group, client_id, jstack=args.jstack)
            except ClientError as exc:
                print(f"{client_id}: {exc}")
                continue
            infos[client_id] = info
            path = Path(str(now), client_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(running_info_text(info))
            version = version_desc(int(conn["version"]))
            print(f"{len(infos):<10} {client_id:<40} {version:<20} {path}")
    if infos:
        if _same_subscription(infos):
            print("\n\nSame subscription in the same group of consumer", end="")
            print("\n\nRebalance OK")
            for client_id in sorted(infos):
                print(_analyze_process_queue(client_id, infos[client_id]), end="")
        else:
            print("\n\nWARN: Different subscription in the same group of consumer!!!", end="")
    return 0


def _timestamp(text: str) -> int:
    """resetOffsetByTime's -s: now (-1), milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS."""
    return -1 if text.strip() == "now" else parse_timestamp(text)


def _reset_table(result: list[tuple[MessageQueue, int]] | list[RollbackStats]) -> None:
    """The old tool's rollback table, or the new one's offsets, whichever the reset gave."""
    rollback = [row for row in result if isinstance(row, RollbackStats)]
    if rollback:
        _rollback_table(rollback)
    else:
        _offset_table([row for row in result if not isinstance(row, RollbackStats)])


def _rollback_table(rows: list[RollbackStats]) -> None:
    heads = (
        "#brokerName",
        "#queueId",
        "#brokerOffset",
        "#consumerOffset",
        "#timestampOffset",
        "#rollbackOffset",
    )
    print("  ".join(f"{h:<20}" for h in heads))
    for row in rows:
        figures = (
            row.queue.queue_id,
            row.broker_offset,
            row.consumer_offset,
            row.timestamp_offset,
            row.rollback_offset,
        )
        print("  ".join(f"{v:<20}" for v in (row.queue.broker_name[:32], *figures)))


def _offset_table(table: list[tuple[MessageQueue, int]]) -> None:
    print(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}")
    offsets = dict(table)
    for queue in java_hash_order(offsets, queue_hash):
        print(f"{queue.broker_name[:32]:<40}  {queue.queue_id:<40}  {offsets[queue]:<40}")


async def _reset(
    admin: Admin, group: str, topic: str, timestamp_ms: int, force: bool, cplus: bool = False
) -> list[tuple[MessageQueue, int]] | list[RollbackStats]:
    """The broker's reset through the group's clients; the tool's own when none is online."""
    try:
        return await reset_offset(admin, topic, group, timestamp_ms, force=force, cplus=cplus)
    except ClientError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    rows = await reset_offset_old(admin, group, topic, timestamp_ms, force=force)
    order = java_hash_order([r.queue for r in rows], queue_hash)
    return sorted(rows, key=lambda r: order.index(r.queue))


@command(
    "move a group's offsets of a topic to a time (now, milliseconds, yyyy-MM-dd#HH:mm:ss:SSS)",
    ("-g", {"dest": "group", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
    ("-s", {"dest": "timestamp", "required": True}),
    ("-f", {"dest": "force", "default": "true"}),
    ("-c", {"dest": "cplus", "action": "store_true"}),
)
async def reset_offset_by_time(args: argparse.Namespace) -> int:
    group, topic, stamp = args.group.strip(), args.topic.strip(), args.timestamp.strip()
    timestamp_ms, force = _timestamp(stamp), java_bool(args.force)
    async with Admin(args.namesrv) as admin:
        result = await _reset(admin, group, topic, timestamp_ms, force, args.cplus)
    old = bool(result) and isinstance(result[0], RollbackStats)
    what = "consumerGroup" if old else "group"
    print(
        f"rollback consumer offset by specified {what}[{group}], topic[{topic}], "
        f"force[{_java(force)}], timestamp(string)[{stamp}], timestamp(long)[{timestamp_ms}]"
    )
    _reset_table(result)
    return 0


@command(
    "move a group's offsets of a topic to the end of each queue",
    ("-g", {"dest": "group", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
    ("-f", {"dest": "force", "default": "true"}),
)
async def skip_accumulated_message(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        result = await _reset(
            admin, args.group.strip(), args.topic.strip(), -1, java_bool(args.force)
        )
    _reset_table(result)
    return 0


@command(
    "give a group the offsets another group committed",
    ("-s", {"dest": "source", "required": True}),
    ("-d", {"dest": "dest", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
    ("-o", {"dest": "offline", "default": None}),
)
async def clone_group_offset(args: argparse.Namespace) -> int:
    source, dest, topic = args.source.strip(), args.dest.strip(), args.topic.strip()
    async with Admin(args.namesrv) as admin:
        await clone_offsets(admin, source, dest, topic)
    print(
        f"clone group offset success. srcGroup[{source}], destGroup=[{dest}], topic[{topic}]",
        end="",
    )
    return 0


@command(
    "how the queues of a topic split among client ids (AllocateMessageQueueAveragely)",
    ("-t", {"dest": "topic", "required": True}),
    ("-i", {"dest": "ip_list", "required": True}),
)
async def allocate_mq(args: argparse.Namespace) -> int:
    topic = args.topic.strip()
    async with Admin(args.namesrv) as admin:
        queues = subscribe_queues(await admin.route(topic), topic)
    clients = args.ip_list.strip().split(",")
    result = {client: _allocate(queues, clients, client) for client in clients}
    entries = ",".join(
        json.dumps(client) + ":" + json.dumps(result[client], separators=(",", ":"))
        for client in java_hashmap_order(result)
    )
    print('{"result":{' + entries + "}}")
    return 0


def _allocate(queues: list[MessageQueue], clients: list[str], me: str) -> list[dict[str, Any]]:
    """AllocateMessageQueueAveragely: consecutive queues, the first `mod` clients one more."""
    if me not in clients or not queues:
        return []
    index, mod = clients.index(me), len(queues) % len(clients)
    if len(queues) <= len(clients):
        size = 1
    else:
        size = len(queues) // len(clients) + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    picked = [queues[(start + i) % len(queues)] for i in range(min(size, len(queues) - start))]
    return [{"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic} for q in picked]


@command(
    "offsets and lag of a consumer group",
    ("-g", {"dest": "group", "required": True}),
    ("-t", {"dest": "topic", "default": None}),
)
async def consumer_progress(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        stats = await admin.consume_stats(args.group, args.topic)
        rows = stats.queues
    if not rows:  # RocketMQ's tool fails so too (examineConsumeStats)
        print(
            f"mqadmin consumerProgress: no consume stats of {args.group}: no offsets",
            file=sys.stderr,
        )
        return 1
    print(
        table(
            [
                "#Topic",
                "#Broker Name",
                "#QID",
                "#Broker Offset",
                "#Consumer Offset",
                "#Diff",
                "#LastTime",
            ],
            [
                [
                    r.queue.topic,
                    r.queue.broker_name,
                    r.queue.queue_id,
                    r.broker_offset,
                    r.consumer_offset,
                    r.lag,
                    when(r.last_timestamp),
                ]
                for r in rows
            ],
        )
    )
    print(f"\nConsume TPS: {stats.consume_tps:.2f}")
    print(f"Diff Total: {sum(r.lag for r in rows)}")
    return 0
