"""Our mqadmin's message sub-commands, printed as RocketMQ's mqadmin prints them: printMsg,
printMsgByQueue, queryMsgByUniqueKey, queryMsgTraceById; and in our own layout queryMsgById,
queryMsgByOffset, queryMsgByKey, sendMessage, consumeMessage.

    mqadmin printMsg -n 127.0.0.1:9876 -t Orders -s 'TagA || TagB' -d true
    mqadmin printMsgByQueue -n 127.0.0.1:9876 -t Orders -a broker-a -i 0 -p true -f true
    mqadmin queryMsgByUniqueKey -n 127.0.0.1:9876 -t Orders -i 7F000001...
    mqadmin queryMsgTraceById -n 127.0.0.1:9876 -i 7F000001... [-t RMQ_SYS_TRACE_TOPIC]

Where RocketMQ's tool prints a MessageTrack after another on one line, ours gives each a line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from sidewinder.client.admin import TOOLS_CONSUMER_GROUP, Admin
from sidewinder.client.admin_groups import message_track
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage, offset_at, pull, queue_bound
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.java import (
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
from sidewinder.tools.mqadmin.output import table, when

PULL_STATUS: dict[int, str] = {
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
    "print the messages of every queue of a topic",
    ("-t", {"dest": "topic", "required": True}),
    ("-d", {"dest": "print_body", "default": "true"}),
    *TIME_OPTIONS,
)
async def print_msg(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
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
    return 0


@command(
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
    async with Admin(args.namesrv) as admin:
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
    # TagCountBean's order: the larger count first (a stable sort of the HashMap's order).
    for tag in sorted(java_hashmap_order(counts), key=lambda t: -counts[t]):
        print(f"Tag: {tag:<30} Count: {counts[tag]}")
    return 0


@command(
    "a message by its id (UNIQ_KEY), the first found or (-a) up to 32",
    ("-i", {"dest": "msg_id", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
    ("-a", {"dest": "show_all", "action": "store_true"}),
)
async def query_msg_by_unique_key(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        found = await admin.query_messages(args.topic, args.msg_id.strip(), unique=True)
        found.sort(key=lambda m: m.store_timestamp)
        for index, message in enumerate(found if args.show_all else found[:1]):
            _show_message(message, index)
            tracks = await message_track(admin, message)
            print("\n\n" + ("\n".join(tracks) if tracks else "WARN: No Consumer"))
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
    "the trace of a message (its send and each consumption) from the trace topic",
    ("-i", {"dest": "msg_id", "required": True}),
    ("-t", {"dest": "trace_topic", "default": TRACE_TOPIC}),
)
async def query_msg_trace_by_id(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        found = await admin.query_messages(
            args.trace_topic.strip(),
            args.msg_id.strip(),
            max_num=64,
            end_ms=int(time.time() * 1000),
        )
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


@command("a message by its offsetMsgId", ("-i", {"dest": "msg_id", "required": True}))
async def query_msg_by_id(args: argparse.Namespace) -> int:
    host, port, offset = decode_offset_msg_id(args.msg_id)
    async with Admin(args.namesrv) as admin:
        data = await admin.view_message(f"{host}:{port}", offset)
    return print_record(args.msg_id, data)


def print_record(msg_id: str, data: bytes) -> int:
    record = decode_record(data)
    if not isinstance(record, MessageRecord):
        print(f"no message at {msg_id}", file=sys.stderr)
        return 1
    props = record.properties()
    for label, value in (
        ("OffsetID", msg_id),
        ("Topic", record.topic),
        ("Tags", f"[{props.get('TAGS', '')}]"),
        ("Keys", f"[{props.get('KEYS', '')}]"),
        ("Queue ID", record.queue_id),
        ("Queue Offset", record.queue_offset),
        ("CommitLog Offset", record.phy_offset),
        ("Reconsume Times", record.reconsume_times),
        ("Born Timestamp", when(record.born_timestamp)),
        ("Store Timestamp", when(record.store_timestamp)),
        ("Born Host", record.born_host),
        ("Store Host", record.store_host),
        ("System Flag", record.sys_flag),
        ("Properties", props),
        ("Body", bytes(record.body).decode(errors="replace")),
    ):
        print(f"{label + ':':<20} {value}")
    return 0


@command(
    "the message at an offset of one queue",
    ("-t", {"dest": "topic", "required": True}),
    ("-b", {"dest": "broker_name", "required": True}),
    ("-i", {"dest": "queue_id", "type": int, "required": True}),
    ("-o", {"dest": "offset", "type": int, "required": True}),
)
async def query_msg_by_offset(args: argparse.Namespace) -> int:
    queue = MessageQueue(args.topic, args.broker_name, args.queue_id)
    async with Admin(args.namesrv) as admin:
        message = await admin.message_at(queue, args.offset)
        if message is None:
            print(f"no message at offset {args.offset} of {queue}", file=sys.stderr)
            return 1
        host, port, phy_offset = decode_offset_msg_id(message.offset_msg_id)
        data = await admin.view_message(f"{host}:{port}", phy_offset)
    return print_record(message.offset_msg_id, data)


@command(
    "messages of a topic with a key",
    ("-t", {"dest": "topic", "required": True}),
    ("-k", {"dest": "key", "required": True}),
)
async def query_msg_by_key(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        bodies = await admin.query_by_key(args.topic, args.key)
    rows = []
    for data in bodies:
        at = 0
        while at < len(data):
            record = decode_record(data, at)
            if not isinstance(record, MessageRecord):
                break
            props = record.properties()
            rows.append([props.get("UNIQ_KEY", ""), record.queue_id, record.queue_offset])
            at += record.total_size
    print(table(["#Message ID", "#QID", "#Offset"], rows))
    return 0


@command(
    "send one message",
    ("-t", {"dest": "topic", "required": True}),
    ("-p", {"dest": "body", "required": True}),
    ("-k", {"dest": "keys", "default": None}),
    ("-c", {"dest": "tags", "default": None}),
)
async def send_message(args: argparse.Namespace) -> int:
    producer = Producer("SIDEWINDER_MQADMIN_PRODUCER", args.namesrv)
    try:
        result = await producer.send(
            Message(args.topic, args.body.encode(), tags=args.tags, keys=(args.keys or "").split())
        )
    finally:
        await producer.close()
    print(
        table(
            ["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"],
            [
                [
                    result.queue.broker_name,
                    result.queue.queue_id,
                    result.status,
                    result.msg_id,
                    result.offset_msg_id,
                ]
            ],
        )
    )
    return 0


@command(
    "print the messages of a topic (from the start by default)",
    ("-t", {"dest": "topic", "required": True}),
    ("-g", {"dest": "group", "default": "SIDEWINDER_MQADMIN_CONSUMER"}),
    ("-c", {"dest": "count", "type": int, "default": 128}),
    ("-s", {"dest": "seconds", "type": float, "default": 5.0}),
)
async def consume_message(args: argparse.Namespace) -> int:
    consumer = PullConsumer(args.group, args.namesrv, poll_timeout_s=1)
    try:
        queues = await consumer.queues(args.topic)
        consumer.assign(queues)
        for queue in queues:
            await consumer.seek(queue, 0)
        printed = 0
        deadline = time.monotonic() + args.seconds
        while printed < args.count and time.monotonic() < deadline:
            for message in await consumer.poll():
                if printed >= args.count:
                    break
                print(
                    f"MSGID: {message.msg_id} QUEUE: {message.queue.queue_id} "
                    f"OFFSET: {message.queue_offset} TAGS: {message.tags} "
                    f"BODY: {message.body.decode(errors='replace')}"
                )
                printed += 1
    finally:
        await consumer.close()
    return 0
