"""mqadmin, ours: RocketMQ's sub-command and option names over the Python admin client.

    mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t Orders -r 8 -w 8
    mqadmin topicList -n 127.0.0.1:9876
    mqadmin consumerProgress -n 127.0.0.1:9876 -g billing

Sub-commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus, clusterList,
brokerStatus, consumerProgress, queryMsgById, queryMsgByKey, queryMsgByOffset, getBrokerConfig,
updateSubGroup, sendMessage, consumeMessage; from cli_admin: updateBrokerConfig,
updateNamesrvConfig, getNamesrvConfig, cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog,
queryCq, producer, deleteSubGroup; from cli_ops: topicClusterList, updateTopicPerm,
wipeWritePerm, addWritePerm, updateKvConfig, deleteKvConfig, updateOrderConf, getConsumerConfig,
producerConnection; from cli_stats: statsAll, brokerConsumeStats; from cli_messages: printMsg,
printMsgByQueue, queryMsgByUniqueKey, queryMsgTraceById; from cli_consumers:
consumerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage,
cloneGroupOffset, allocateMQ; from cli_export: exportMetadata, exportConfigs, exportMetrics;
from cli_latency: sendMsgStatus, checkMsgSendRT, clusterRT, startMonitoring; and from cli_acl:
updateAclConfig, deleteAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop
import yaml

from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.protocol.acl import DEFAULT_CREDENTIALS, Credentials, credentials
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.tls import DEFAULT_CLIENT_TLS, TlsConfig, TlsError, TlsOption

Command = Callable[[argparse.Namespace], Awaitable[int]]
COMMANDS: dict[str, tuple[str, Command, list[tuple[str, dict[str, Any]]]]] = {}


def command(
    name: str, help_text: str, *options: tuple[str, dict[str, Any]]
) -> Callable[[Command], Command]:
    def register(run: Command) -> Command:
        COMMANDS[name] = (help_text, run, list(options))
        return run

    return register


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms > 0 else "-"


@command(
    "updateTopic",
    "create or update a topic on every master of a cluster",
    ("-t", {"dest": "topic", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
    ("-r", {"dest": "read", "type": int, "default": 8}),
    ("-w", {"dest": "write", "type": int, "default": 8}),
    ("-p", {"dest": "perm", "type": int, "default": 6}),
    ("-o", {"dest": "order", "default": "false"}),
)
async def update_topic(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        brokers = await admin.create_topic(
            args.topic,
            queues=args.write,
            cluster=args.cluster,
            perm=args.perm,
            order=args.order.lower() == "true",
        )
    finally:
        await admin.close()
    for addr in brokers:
        print(f"create topic to {addr} success.")
    return 0


@command(
    "deleteTopic",
    "delete a topic from a cluster and the name servers",
    ("-t", {"dest": "topic", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
)
async def delete_topic(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        await admin.delete_topic(args.topic, cluster=args.cluster)
    finally:
        await admin.close()
    print(f"delete topic [{args.topic}] from cluster [{args.cluster}] success.")
    return 0


@command("topicList", "every topic the name servers know")
async def topic_list(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        for topic in await admin.topics():
            print(topic)
    finally:
        await admin.close()
    return 0


@command("topicRoute", "a topic's route as JSON", ("-t", {"dest": "topic", "required": True}))
async def topic_route(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        print(json.dumps(await admin.route(args.topic), indent=2, sort_keys=True))
    finally:
        await admin.close()
    return 0


@command(
    "topicStatus", "min and max offsets of each queue", ("-t", {"dest": "topic", "required": True})
)
async def topic_status(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        rows = await admin.topic_status(args.topic)
    finally:
        await admin.close()
    print(
        table(
            ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
            [[q.broker_name, q.queue_id, low, high, when(stamp)] for q, low, high, stamp in rows],
        )
    )
    return 0


@command("clusterList", "clusters, brokers and their addresses")
async def cluster_list(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        info = await admin.cluster_info()
    finally:
        await admin.close()
    rows = []
    for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
        for name in names:
            for broker_id, addr in sorted(info["brokerAddrTable"][name]["brokerAddrs"].items()):
                rows.append([cluster, name, broker_id, addr])
    print(table(["#Cluster Name", "#Broker Name", "#BID", "#Addr"], rows))
    return 0


@command(
    "brokerStatus", "a broker's runtime statistics", ("-b", {"dest": "broker", "required": True})
)
async def broker_status(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        stats = await admin.broker_runtime(args.broker)
    finally:
        await admin.close()
    width = max((len(k) for k in stats), default=0)
    for key, value in sorted(stats.items()):
        print(f"{key.ljust(width)} : {value}")
    return 0


@command(
    "consumerProgress",
    "offsets and lag of a consumer group",
    ("-g", {"dest": "group", "required": True}),
    ("-t", {"dest": "topic", "default": None}),
)
async def consumer_progress(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        stats = await admin.consume_stats(args.group, args.topic)
        rows = stats.queues
    finally:
        await admin.close()
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


@command(
    "queryMsgById", "a message by its offsetMsgId", ("-i", {"dest": "msg_id", "required": True})
)
async def query_msg_by_id(args: argparse.Namespace) -> int:
    host, port, offset = decode_offset_msg_id(args.msg_id)
    admin = Admin(args.namesrv)
    try:
        data = await admin.view_message(f"{host}:{port}", offset)
    finally:
        await admin.close()
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
    "queryMsgByOffset",
    "the message at an offset of one queue",
    ("-t", {"dest": "topic", "required": True}),
    ("-b", {"dest": "broker_name", "required": True}),
    ("-i", {"dest": "queue_id", "type": int, "required": True}),
    ("-o", {"dest": "offset", "type": int, "required": True}),
)
async def query_msg_by_offset(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    queue = MessageQueue(args.topic, args.broker_name, args.queue_id)
    try:
        message = await admin.message_at(queue, args.offset)
        if message is None:
            print(f"no message at offset {args.offset} of {queue}", file=sys.stderr)
            return 1
        host, port, phy_offset = decode_offset_msg_id(message.offset_msg_id)
        data = await admin.view_message(f"{host}:{port}", phy_offset)
    finally:
        await admin.close()
    return print_record(message.offset_msg_id, data)


@command(
    "getBrokerConfig",
    "the effective settings of a broker (-b) or of every master of a cluster (-c)",
    ("-b", {"dest": "broker", "default": None}),
    ("-c", {"dest": "cluster", "default": None}),
)
async def get_broker_config(args: argparse.Namespace) -> int:
    if not args.broker and not args.cluster:
        print("getBrokerConfig needs -b <broker address> or -c <cluster name>", file=sys.stderr)
        return 1
    admin = Admin(args.namesrv)
    try:
        if args.broker:
            addresses = [args.broker]
        else:
            addresses = list((await admin.masters(args.cluster)).values())
        for addr in sorted(addresses):
            config = await admin.broker_config(addr)
            print(f"============{addr}============")
            for key, value in sorted(config.items()):
                print(f"{key:<50}=  {value}")
    finally:
        await admin.close()
    return 0


@command(
    "queryMsgByKey",
    "messages of a topic with a key",
    ("-t", {"dest": "topic", "required": True}),
    ("-k", {"dest": "key", "required": True}),
)
async def query_msg_by_key(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        bodies = await admin.query_by_key(args.topic, args.key)
    finally:
        await admin.close()
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
    "updateSubGroup",
    "create or update a subscription group on every master of a cluster",
    ("-g", {"dest": "group", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
)
async def update_sub_group(args: argparse.Namespace) -> int:
    admin = Admin(args.namesrv)
    try:
        brokers = await admin.update_group(args.group, cluster=args.cluster)
    finally:
        await admin.close()
    for addr in brokers:
        print(f"create subscription group to {addr} success.")
    return 0


@command(
    "sendMessage",
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
    "consumeMessage",
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


def tool_credentials(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """The keys every request is signed with: the options, else RocketMQ's mqadmin's
    `$ROCKETMQ_HOME/conf/tools.yml` (accessKey, secretKey), else none."""
    given = credentials(access_key, secret_key)
    if given is not None:
        return given
    home = os.environ.get("ROCKETMQ_HOME")
    tools = Path(home) / "conf" / "tools.yml" if home else None
    if tools is None or not tools.is_file():
        return None
    data = yaml.safe_load(tools.read_text()) or {}
    ak, sk = data.get("accessKey"), data.get("secretKey")
    return credentials(str(ak), str(sk)) if ak and sk else None


def tool_tls(enabled: bool, config_file: str | None) -> TlsOption:
    """--tls: RocketMQ's client with -Dtls.enable=true (the keys of
    /etc/rocketmq/tls.properties when it exists); --tls-config FILE: the keys of FILE, which
    must exist (tls.test.mode.enable, tls.client.authServer, tls.client.trustCertPath, ...)."""
    if config_file is None:
        return True if enabled else None
    if not Path(config_file).is_file():
        raise TlsError(f"--tls-config {config_file}: no such file")
    return TlsConfig.load({"tls.config.file": config_file})


def register_commands() -> None:
    """Register the sub-commands of the modules by concern (ACL, config and maintenance,
    operations, statistics, messages, consumer groups, exports, latency): each adds its own
    to COMMANDS when imported."""
    from sidewinder.client import (  # noqa: F401
        cli_acl,
        cli_admin,
        cli_consumers,
        cli_export,
        cli_latency,
        cli_messages,
        cli_ops,
        cli_stats,
    )


def main(argv: list[str] | None = None) -> int:
    register_commands()

    parser = argparse.ArgumentParser(
        prog="mqadmin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    subcommands = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, _, options) in COMMANDS.items():
        sub = subcommands.add_parser(name, help=help_text)
        sub.add_argument("-n", dest="namesrv", default="127.0.0.1:9876", help="ns1:9876;ns2:9876")
        sub.add_argument(
            "--access-key", default=None, help="ACL: sign requests (with --secret-key)"
        )
        sub.add_argument("--secret-key", default=None)
        sub.add_argument(
            "--tls", action="store_true", help="TLS, as RocketMQ's tools with -Dtls.enable=true"
        )
        sub.add_argument(
            "--tls-config",
            metavar="FILE",
            default=None,
            help="TLS with the tls.client.* keys of this tls.config.file (implies --tls)",
        )
        for flag, spec in options:
            sub.add_argument(flag, **spec)
    args = parser.parse_args(argv)
    _, run, _ = COMMANDS[args.command]
    try:
        DEFAULT_CREDENTIALS.set(tool_credentials(args.access_key, args.secret_key))
        DEFAULT_CLIENT_TLS.set(tool_tls(args.tls, args.tls_config))
        return uvloop.run(run(args))
    except (ClientError, ValueError) as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    except (TimeoutError, RemotingError, OSError) as exc:
        print(f"mqadmin {args.command}: cannot reach the cluster: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    # Through the module's own name: cli_admin registers its sub-commands in that module,
    # which `python -m` would otherwise load a second time beside __main__.
    from sidewinder.client.cli import main as _main

    raise SystemExit(_main())
