"""Our mqadmin's message-reading sub-commands, printed as RocketMQ's mqadmin prints them:
printMsg, printMsgByQueue, queryMsgByUniqueKey, queryMsgTraceById.

    mqadmin printMsg -n 127.0.0.1:9876 -t Orders -s 'TagA || TagB' -d true
    mqadmin printMsgByQueue -n 127.0.0.1:9876 -t Orders -a broker-a -i 0 -p true -f true
    mqadmin queryMsgByUniqueKey -n 127.0.0.1:9876 -t Orders -i 7F000001...
    mqadmin queryMsgTraceById -n 127.0.0.1:9876 -i 7F000001... [-t RMQ_SYS_TRACE_TOPIC]

Where RocketMQ's tool prints a MessageTrack after another on one line, ours gives each a line.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from pathlib import Path

from sidewinder.client.admin import TOOLS_CONSUMER_GROUP, Admin
from sidewinder.client.admin_groups import message_track
from sidewinder.client.cli import command
from sidewinder.client.cli_java import (
    date_time,
    human_ms,
    java_bool,
    java_hashmap_order,
    java_map,
    message_ext,
    parse_timestamp,
    queue_text,
    subscribe_queues,
)
from sidewinder.client.pulling import ReceivedMessage, offset_at, pull, queue_bound
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.subscription import Subscription

PULL_STATUS = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}
BODY_DIR = Path("/tmp/rocketmq/msgbodys")  # where queryMsgByUniqueKey leaves the bodies
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TIME_OPTIONS = (
    ("-b", {"dest": "begin", "default": None}),
    ("-e", {"dest": "end", "default": None}),
    ("-c", {"dest": "charset", "default": "UTF-8"}),
    ("-s", {"dest": "expression", "default": "*"}),
)


async def _bounds(
    admin: Admin, addr: str, queue: MessageQueue, args: argparse.Namespace
) -> tuple[int, int]:
    """The queue's min and max offsets, or the offsets at -b and -e when given."""
    low = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)
    high = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
    if args.begin:
        low = await offset_at(admin.remoting, addr, queue, parse_timestamp(args.begin))
    if args.end:
        high = await offset_at(admin.remoting, addr, queue, parse_timestamp(args.end))
    return low, high


async def _pulls(
    admin: Admin, addr: str, queue: MessageQueue, expression: str, low: int, high: int
) -> AsyncIterator[tuple[str, int, list[ReceivedMessage]]]:
    """(status, next offset, messages) of each pull of 32 from `low` on, as the tools'
    DefaultMQPullConsumer reads a queue; ends at `high` or when the queue has no more."""
    subscription = Subscription.of(queue.topic, expression)
    offset = low
    while offset < high:
        result = await pull(
            admin.remoting,
            addr,
            TOOLS_CONSUMER_GROUP,
            queue,
            offset,
            subscription,
            batch=32,
            suspend_s=None,
        )
        offset = result.next_offset
        status = PULL_STATUS.get(result.code, "NO_MATCHED_MSG")
        if status == "FOUND" and not result.messages:
            status = "NO_MATCHED_MSG"
        yield status, offset, result.messages
        if status in ("NO_NEW_MSG", "OFFSET_ILLEGAL"):
            return


def _message_line(
    message: ReceivedMessage, bounds: tuple[int, int], charset: str, body: bool
) -> str:
    extra = {"MIN_OFFSET": str(bounds[0]), "MAX_OFFSET": str(bounds[1])}
    text = message.body.decode(charset, errors="replace") if body else "NOT PRINT BODY"
    ext = message_ext(message, message.queue.broker_name, extra)
    return f"MSGID: {message.msg_id} {ext} BODY: {text}"


async def _queue_addr(admin: Admin, queue: MessageQueue) -> str:
    addr = await admin.routes.wait_broker_addr(queue, 3.0)
    if addr is None:
        raise ClientError(
            ResponseCode.TOPIC_NOT_EXIST, f"no broker {queue.broker_name} for {queue.topic}"
        )
    return addr


@command(
    "printMsg",
    "print the messages of every queue of a topic",
    ("-t", {"dest": "topic", "required": True}),
    ("-d", {"dest": "print_body", "default": "true"}),
    *TIME_OPTIONS,
)
async def print_msg(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        route = await admin.route(args.topic)
        for queue in subscribe_queues(route, args.topic):
            addr = await _queue_addr(admin, queue)
            low, high = await _bounds(admin, addr, queue, args)
            mq = queue_text(queue.topic, queue.broker_name, queue.queue_id)
            print(f"minOffset={low}, maxOffset={high}, {mq}")
            async for status, offset, messages in _pulls(
                admin, addr, queue, args.expression, low, high
            ):
                if status == "FOUND":
                    for message in messages:
                        print(
                            _message_line(
                                message, (low, high), args.charset, java_bool(args.print_body)
                            )
                        )
                elif status == "NO_MATCHED_MSG":
                    print(f"{mq} no matched msg. status={status}, offset={offset}")
                else:
                    print(f"{mq} print msg finished. status={status}, offset={offset}")
            print("-" * 56)
    finally:
        await admin.close()
    return 0


@command(
    "printMsgByQueue",
    "print (-p) or count by tag (-f) the messages of one queue",
    ("-t", {"dest": "topic", "required": True}),
    ("-a", {"dest": "broker_name", "required": True}),
    ("-i", {"dest": "queue_id", "type": int, "required": True}),
    ("-p", {"dest": "print_msg", "default": "false"}),
    ("-d", {"dest": "print_body", "default": "false"}),
    ("-f", {"dest": "by_tag", "default": "false"}),
    *TIME_OPTIONS,
)
async def print_msg_by_queue(args: argparse.Namespace) -> int:
    queue = MessageQueue(args.topic, args.broker_name, args.queue_id)
    by_tag = java_bool(args.by_tag)
    counts: dict[str, int] = {}
    admin = Admin(args.namesrv)
    try:
        addr = await _queue_addr(admin, queue)
        low, high = await _bounds(admin, addr, queue, args)
        async for status, _, messages in _pulls(admin, addr, queue, args.expression, low, high):
            if status != "FOUND":
                break
            for message in messages:
                if by_tag and (message.tags or "").strip():
                    counts[message.tags or ""] = counts.get(message.tags or "", 0) + 1
                if java_bool(args.print_msg):
                    print(
                        _message_line(
                            message, (low, high), args.charset, java_bool(args.print_body)
                        )
                    )
    finally:
        await admin.close()
    # TagCountBean's order: the larger count first (a stable sort of the HashMap's order).
    for tag in sorted(java_hashmap_order(counts), key=lambda t: -counts[t]):
        print(f"Tag: {tag:<30} Count: {counts[tag]}")
    return 0


@command(
    "queryMsgByUniqueKey",
    "a message by its id (UNIQ_KEY), the first found or (-a) up to 32",
    ("-i", {"dest": "msg_id", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
    ("-a", {"dest": "show_all", "action": "store_true"}),
)
async def query_msg_by_unique_key(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        found = await admin.query_messages(args.topic, args.msg_id.strip(), unique=True)
        found.sort(key=lambda m: m.store_timestamp)
        for index, message in enumerate(found if args.show_all else found[:1]):
            _show_message(message, index)
            tracks = await message_track(admin, message)
            print("\n\n" + ("\n".join(tracks) if tracks else "WARN: No Consumer"))
    finally:
        await admin.close()
    return 0


def _show_message(message: ReceivedMessage, index: int) -> None:
    BODY_DIR.mkdir(parents=True, exist_ok=True)
    path = BODY_DIR / (message.msg_id + (f"_{index}" if index else ""))
    path.write_bytes(message.body)
    for label, value in (
        ("Topic:", message.topic),
        ("Tags:", f"[{message.tags}]"),
        ("Keys:", f"[{message.properties.get('KEYS')}]"),
        ("Queue ID:", message.queue.queue_id),
        ("Queue Offset:", message.queue_offset),
        ("CommitLog Offset:", message.commit_log_offset),
        ("Reconsume Times:", message.reconsume_times),
        ("Born Timestamp:", human_ms(message.born_timestamp)),
        ("Store Timestamp:", human_ms(message.store_timestamp)),
        ("Born Host:", message.born_host),
        ("Store Host:", message.store_host),
        ("System Flag:", message.sys_flag),
        ("Properties:", java_map(message.properties)),
        ("Message Body Path:", path),
    ):
        print(f"{label:<20} {value}")


@command(
    "queryMsgTraceById",
    "the trace of a message (its send and each consumption) from the trace topic",
    ("-i", {"dest": "msg_id", "required": True}),
    ("-t", {"dest": "trace_topic", "default": TRACE_TOPIC}),
)
async def query_msg_trace_by_id(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        found = await admin.query_messages(
            args.trace_topic.strip(),
            args.msg_id.strip(),
            max_num=64,
            end_ms=int(time.time() * 1000),
        )
    finally:
        await admin.close()
    views = [view for message in found for view in _trace_views(args.msg_id.strip(), message)]
    row = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"
    by_group: dict[str, list[list[str]]] = {}
    for kind, group, *rest in views:
        if kind == "Pub":
            print(
                row.format(
                    "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"
                )
            )
            print(row.format("Pub", group, *rest))
            print()
        elif kind == "SubAfter":
            by_group.setdefault(group, []).append(["Sub", group, *rest])
    for group in java_hashmap_order(by_group):
        print(
            row.format(
                "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"
            )
        )
        for line in by_group[group]:
            print(row.format(*line))
        print()
    return 0


def _trace_views(msg_id: str, message: ReceivedMessage) -> list[list[str]]:
    """[type, group, client host, time, cost, status] of each Pub and SubAfter context of a
    trace message about `msg_id` (TraceDataEncoder's layout: fields by \\x01, contexts by
    \\x02)."""
    host = message.born_host.rsplit(":", 1)[0]
    views = []
    for context in message.body.decode(errors="replace").split("\x02"):
        line = context.split("\x01")
        if line[0] == "Pub" and len(line) >= 13 and line[5] == msg_id:
            ok = line[12] if len(line) == 13 else line[13]
            views.append(
                ["Pub", line[3], host, date_time(int(line[1])), f"{line[10]}ms", _status(ok)]
            )
        elif line[0] == "SubAfter" and len(line) >= 5 and line[2] == msg_id:
            stamp = date_time(int(line[7])) if len(line) >= 9 else "null"
            group = line[8] if len(line) >= 9 else "null"
            views.append(["SubAfter", group, host, stamp, f"{line[3]}ms", _status(line[4])])
    return views


def _status(success: str) -> str:
    return "success" if java_bool(success) else "failed"
