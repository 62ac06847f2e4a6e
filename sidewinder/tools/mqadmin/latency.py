"""Our mqadmin's send-latency and monitoring sub-commands, printed as RocketMQ's mqadmin prints
them: sendMsgStatus, checkMsgSendRT, clusterRT, startMonitoring.

    mqadmin sendMsgStatus -n 127.0.0.1:9876 -b broker-a -s 128 -c 50
    mqadmin checkMsgSendRT -n 127.0.0.1:9876 -t Orders -a 100 -s 128
    mqadmin clusterRT -n 127.0.0.1:9876 -c DefaultCluster -a 100 -s 128 -i 10 [--rounds 1]
    mqadmin startMonitoring -n 127.0.0.1:9876 [--rounds 1 --delay-s 0]

clusterRT and startMonitoring run until stopped, as RocketMQ's do; `--rounds N` stops them
after N rounds (ours only). startMonitoring prints nothing on stdout: its reports, which
RocketMQ's monitor writes to the client log, go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from sidewinder.client.admin import Admin
from sidewinder.client.admin_groups import RETRY_PREFIX, consumer_connection
from sidewinder.client.producer import Message, Producer, SendResult
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.remoting.connection import RemotingError
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.java import queue_text

SEND_ERRORS = (ClientError, RemotingError, TimeoutError, OSError)
ROUNDS = ("--rounds", {"dest": "rounds", "type": int, "default": None})


def _ms() -> int:
    return int(time.time() * 1000)


def _send_result(result: SendResult) -> str:
    queue = queue_text(result.queue.topic, result.queue.broker_name, result.queue.queue_id)
    return (
        f"SendResult [sendStatus={result.status}, msgId={result.msg_id}, "
        f"offsetMsgId={result.offset_msg_id}, messageQueue={queue}, "
        f"queueOffset={result.queue_offset}]"
    )


@command(
    "send messages to a broker's own topic and print each result and its time",
    ("-b", {"dest": "broker_name", "required": True}),
    ("-s", {"dest": "size", "type": int, "default": 128}),
    ("-c", {"dest": "count", "type": int, "default": 50}),
)
async def send_msg_status(args: argparse.Namespace) -> int:
    topic = args.broker_name.strip()

    def message(size: int) -> Message:
        return Message(topic, b"hello jodie" * ((size + 10) // 11))

    producer = Producer("PID_SMSC", args.namesrv, instance_name=f"PID_SMSC_{_ms()}")
    try:
        await producer.send(message(16))
        for _ in range(args.count):
            begin = _ms()
            result = await producer.send(message(args.size))
            print(f"rt={_ms() - begin}ms, SendResult={_send_result(result)}")
    finally:
        await producer.close()
    return 0


@command(
    "send messages to a topic's queues in turn and print each send's time",
    ("-t", {"dest": "topic", "required": True}),
    ("-a", {"dest": "amount", "type": int, "default": 100}),
    ("-s", {"dest": "size", "type": int, "default": 128}),
)
async def check_msg_send_rt(args: argparse.Namespace) -> int:
    message = Message(args.topic.strip(), b"a" * args.size)
    row = "{:<32}  {:<4}  {:<20}    {}"
    print(row.format("#Broker Name", "#QID", "#Send Result", "#RT"))
    picked: list[MessageQueue | None] = [None]
    elapsed = 0
    producer = Producer(str(_ms()), args.namesrv)
    try:
        for i in range(args.amount):

            def select(queues: list[MessageQueue], i: int = i) -> MessageQueue:
                queue = picked[0] = queues[i % len(queues)]
                return queue

            start = _ms()
            try:
                await producer.send(message, selector=select)
                ok = True
            except SEND_ERRORS:
                ok = False
            end = _ms()
            if i:
                elapsed += end - start
            queue = picked[0]
            print(
                row.format(
                    queue.broker_name if queue else "null",
                    queue.queue_id if queue else 0,
                    str(ok).lower(),
                    end - start,
                )
            )
    finally:
        await producer.close()
    print(f"Avg RT: {elapsed / (args.amount - 1) if args.amount > 1 else float('nan'):.2f}")
    return 0


@command(
    "send rounds of messages to every broker of a cluster, a line per broker, until stopped",
    ("-a", {"dest": "amount", "type": int, "default": 100}),
    ("-s", {"dest": "size", "type": int, "default": 128}),
    ("-c", {"dest": "cluster", "default": None}),
    ("-p", {"dest": "tlog", "default": "false"}),
    ("-m", {"dest": "room", "default": "noname"}),
    ("-i", {"dest": "interval_s", "type": int, "default": 10}),
    ROUNDS,
)
async def cluster_rt(args: argparse.Namespace) -> int:
    tlog = args.tlog.strip().lower() == "true"
    async with Admin(args.namesrv) as admin:
        producer = Producer(str(_ms()), args.namesrv)
        try:
            clusters = (await admin.cluster_info()).get("clusterAddrTable", {})
            names = [args.cluster.strip()] if args.cluster else list(clusters)
            if not tlog:
                print(
                    f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  "
                    f"{'#successCount':<8}  {'#failCount':<8}"
                )
            done = 0
            while args.rounds is None or done < args.rounds:
                for cluster in names:
                    if cluster not in clusters:
                        print(f"cluster [{cluster}] not exist", end="")
                        break
                    for broker in clusters[cluster]:
                        await _broker_rt(producer, args, cluster, broker, tlog)
                sys.stdout.flush()
                done += 1
                if args.rounds is None or done < args.rounds:
                    await asyncio.sleep(args.interval_s)
        finally:
            await producer.close()
    return 0


async def _broker_rt(
    producer: Producer, args: argparse.Namespace, cluster: str, broker: str, tlog: bool
) -> None:
    """`-a` sends to the broker's own topic: the mean time of all but the first."""
    message = Message(broker, b"a" * args.size)
    elapsed, ok, failed = 0, 0, 0
    for i in range(args.amount):
        start = _ms()
        try:
            await producer.send(message)
            ok += 1
        except SEND_ERRORS:
            failed += 1
        if i:
            elapsed += _ms() - start
    rt = elapsed / (args.amount - 1) if args.amount > 1 else float("nan")
    if tlog:
        now = datetime.now(UTC) + timedelta(hours=8)  # RocketMQ's tlog is in GMT+8
        rounded = Decimal(rt).quantize(Decimal(1), ROUND_HALF_UP)
        stamp = now.strftime("%Y-%m-%d %H:%M:%S")
        print(f"{stamp}|{args.room}|{cluster}|{broker}|{rounded}")
    else:
        print(f"{cluster:<24}  {broker:<24}  {rt:<8.2f}  {ok:<16}  {failed:<16}")


@command(
    "watch every consumer group's backlog, a round a minute, until stopped",
    ROUNDS,
    ("--delay-s", {"dest": "delay_s", "type": float, "default": 20.0}),
    ("--interval-s", {"dest": "interval_s", "type": float, "default": 60.0}),
)
async def start_monitoring(args: argparse.Namespace) -> int:
    """MonitorService: a first round after 20 s, then one every minute; each reports the
    undone messages of every group (by its retry topic) with a client online."""
    async with Admin(args.namesrv) as admin:
        await asyncio.sleep(args.delay_s)
        done = 0
        while args.rounds is None or done < args.rounds:
            begin = _ms()
            _log("=========================================beginRound")
            for topic in await admin.topics():
                if topic.startswith(RETRY_PREFIX):
                    await _report_undone(admin, topic[len(RETRY_PREFIX) :])
            _log("=========================================endRound")
            _log(f"Execute one round monitor work, spent timemills: {_ms() - begin}")
            done += 1
            if args.rounds is None or done < args.rounds:
                await asyncio.sleep(args.interval_s)
    return 0


def _log(text: str) -> None:
    print(f"[MONITOR] {text}", file=sys.stderr, flush=True)


async def _report_undone(admin: Admin, group: str) -> None:
    """UndoneMsgs of each topic the group consumes: the backlog in all, in its worst queue,
    and how old the oldest message not consumed there is."""
    try:
        stats = await admin.consume_stats(group)
        await consumer_connection(admin, group)
    except (ClientError, RemotingError, TimeoutError, OSError):
        return  # no client online: RocketMQ's monitor skips the group
    for topic in sorted({p.queue.topic for p in stats.queues}):
        queues = [p for p in stats.queues if p.queue.topic == topic]
        total = sum(p.lag for p in queues)
        worst = max(queues, key=lambda p: p.broker_offset - p.consumer_offset)
        delay = 0
        if worst.lag:
            oldest = await admin.message_at(worst.queue, worst.consumer_offset)
            delay = _ms() - oldest.store_timestamp if oldest else 0
        _log(
            f"reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, "
            f"undoneMsgsTotal={total}, "
            f"undoneMsgsSingleMQ={worst.broker_offset - worst.consumer_offset}, "
            f"undoneMsgsDelayTimeMills={delay}]"
        )
