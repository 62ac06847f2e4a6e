"""Our mqadmin's topic, name server and group sub-commands: updateTopic, deleteTopic, topicList,
topicRoute, topicStatus, and, printed as RocketMQ's mqadmin prints them,
topicClusterList, updateTopicPerm, wipeWritePerm, addWritePerm, updateKvConfig, deleteKvConfig,
updateOrderConf, getConsumerConfig, producerConnection.

    mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t Orders -r 8 -w 8

    mqadmin updateTopicPerm -n 127.0.0.1:9876 -t Orders -p 4 -c DefaultCluster
    mqadmin updateOrderConf -n 127.0.0.1:9876 -t Orders -m put -v broker-a:8
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.protocol import body
from sidewinder.protocol.codes import CURRENT_VERSION, RequestCode
from sidewinder.protocol.headers import CreateTopicRequestHeader
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.output import table, when

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # the name servers' KV namespace of order confs
MASTER_ID = "0"
# SubscriptionGroupConfig's fields in the order RocketMQ's getConsumerConfig prints them.
GROUP_FIELDS = (
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
)
# RocketMQ 5's SubscriptionGroupConfig, in its declared order (what 5.x's getConsumerConfig
# prints), for a group that has RocketMQ 5 fields.
GROUP_FIELDS_5 = (
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "consumeMessageOrderly",
    "retryQueueNums",
    "retryMaxTimes",
    "groupRetryPolicy",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
    "groupSysFlag",
    "consumeTimeoutMinute",
    "subscriptionDataSet",
    "attributes",
)


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def _java(value: Any) -> str:
    """A field as Java's toString shows it; maps as {k=v}, a retry policy as its JSON, null as
    nothing."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict) and "type" in value:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in value.items()) + "}"
    return str(value)


@command("the clusters serving a topic", ("-t", {"dest": "topic", "required": True}))
async def topic_cluster_list(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        route = await admin.route(args.topic)
    for cluster in sorted({b["cluster"] for b in route.get("brokerDatas") or []}):
        print(cluster)
    return 0


@command(
    "change a topic's permission (2 write, 4 read, 6 both) on a broker (-b) or cluster (-c)",
    ("-t", {"dest": "topic", "required": True}),
    ("-p", {"dest": "perm", "type": int, "required": True}),
    ("-b", {"dest": "broker", "default": None}),
    ("-c", {"dest": "cluster", "default": None}),
)
async def update_topic_perm(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        route = await admin.route(args.topic)
        queues = {q["brokerName"]: q for q in route.get("queueDatas") or []}
        masters = {
            b["brokerName"]: b["brokerAddrs"].get(MASTER_ID) or b["brokerAddrs"].get(0)
            for b in route.get("brokerDatas") or []
            if args.cluster is None or b["cluster"] == args.cluster
        }
        if args.broker:
            masters = {n: a for n, a in masters.items() if a == args.broker}
        if not masters or not (args.broker or args.cluster):
            print("updateTopicPerm needs -b <a master of the topic> or -c <its cluster>")
            return 1
        for name, addr in sorted(masters.items()):
            queue = queues[name]
            if queue["perm"] == args.perm:
                print("new perm equals to the old one!")
                continue
            header = CreateTopicRequestHeader(
                args.topic,
                "TBW102",
                queue["readQueueNums"],
                queue["writeQueueNums"],
                args.perm,
                "SINGLE_TAG",
                queue.get("topicSysFlag", 0),
                False,
            )
            await admin.ask_broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
            print(f"update topic perm from {queue['perm']} to {args.perm} in {addr} success.")
            if args.broker:
                print(
                    f"TopicConfig [topicName={args.topic}, "
                    f"readQueueNums={queue['readQueueNums']}, "
                    f"writeQueueNums={queue['writeQueueNums']}, perm={_perm_text(args.perm)}, "
                    f"topicFilterType=SINGLE_TAG, topicSysFlag={queue.get('topicSysFlag', 0)}, "
                    "order=false]."
                )
    return 0


async def _write_perm(args: argparse.Namespace, code: int, verb: str, count_key: str) -> int:
    async with Admin(args.namesrv) as admin:
        replies = await admin.ask_each_name_server(code, {"brokerName": args.broker_name})
    for addr, reply in replies.items():
        count = (reply.ext_fields or {}).get(count_key, "0")
        print(f"{verb} write perm of broker[{args.broker_name}] in name server[{addr}] OK, {count}")
    return 0


@command(
    "take write permission from a broker's topics on every name server given",
    ("-b", {"dest": "broker_name", "required": True}),
)
async def wipe_write_perm(args: argparse.Namespace) -> int:
    return await _write_perm(args, RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipe", "wipeTopicCount")


@command(
    "give write permission back to a broker's topics on every name server given",
    ("-b", {"dest": "broker_name", "required": True}),
)
async def add_write_perm(args: argparse.Namespace) -> int:
    return await _write_perm(args, RequestCode.ADD_WRITE_PERM_OF_BROKER, "add", "addTopicCount")


@command(
    "set a KV config entry on every name server given",
    ("-s", {"dest": "namespace", "required": True}),
    ("-k", {"dest": "key", "required": True}),
    ("-v", {"dest": "value", "required": True}),
)
async def update_kv_config(args: argparse.Namespace) -> int:
    ext = {"namespace": args.namespace.strip(), "key": args.key.strip(), "value": args.value}
    async with Admin(args.namesrv) as admin:
        await admin.ask_each_name_server(RequestCode.PUT_KV_CONFIG, ext)
    print("create or update kv config to namespace success.")
    return 0


@command(
    "delete a KV config entry on every name server given",
    ("-s", {"dest": "namespace", "required": True}),
    ("-k", {"dest": "key", "required": True}),
)
async def delete_kv_config(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        ext = {"namespace": args.namespace.strip(), "key": args.key.strip()}
        await admin.ask_each_name_server(RequestCode.DELETE_KV_CONFIG, ext)
    print("delete kv config from namespace success.")
    return 0


@command(
    "get, put or delete a topic's order conf (brokerName:queues;...)",
    ("-t", {"dest": "topic", "required": True}),
    ("-m", {"dest": "method", "required": True, "choices": ["get", "put", "delete"]}),
    ("-v", {"dest": "order_conf", "default": ""}),
)
async def update_order_conf(args: argparse.Namespace) -> int:
    topic = args.topic.strip()
    key = {"namespace": ORDER_TOPIC_CONFIG, "key": topic}
    async with Admin(args.namesrv) as admin:
        if args.method == "get":
            reply = await admin.ask_name_server(RequestCode.GET_KV_CONFIG, ext=key)
            conf = (reply.ext_fields or {}).get("value")
            print(f"get orderConf success. topic=[{topic}], orderConf=[{conf}] ")
        elif args.method == "put":
            conf = args.order_conf.strip()
            if not conf:
                print("please set orderConf with option -v.", file=sys.stderr)
                return 1
            await admin.ask_each_name_server(RequestCode.PUT_KV_CONFIG, {**key, "value": conf})
            print(f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
        else:
            await admin.ask_each_name_server(RequestCode.DELETE_KV_CONFIG, key)
            print(f"delete orderConf success. topic=[{topic}]")
    return 0


@command(
    "a subscription group's settings on every master that has it",
    ("-g", {"dest": "group", "required": True}),
)
async def get_consumer_config(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        info = await admin.cluster_info()
        for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
            for name in sorted(names):
                addr = info["brokerAddrTable"][name]["brokerAddrs"].get(0)
                if addr is None:
                    continue
                reply = await admin.ask_broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                groups = body.loads(reply.body_bytes).get("subscriptionGroupTable") or {}
                config = groups.get(args.group)
                if config is None:
                    continue
                print(f"{'=' * 29}{cluster}:{name}{'=' * 29}")
                fields = GROUP_FIELDS_5 if "groupRetryPolicy" in config else GROUP_FIELDS
                for field in fields:
                    print(f"{field:<40}=  {_java(config.get(field))}")
    return 0


@command(
    "the producers of a group connected to a topic's broker",
    ("-g", {"dest": "group", "required": True}),
    ("-t", {"dest": "topic", "required": True}),
)
async def producer_connection(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        route = await admin.route(args.topic)
        brokers = route.get("brokerDatas") or []
        addrs = brokers[0]["brokerAddrs"] if brokers else {}
        addr = addrs.get(MASTER_ID) or addrs.get(0) or next(iter(addrs.values()), None)
        if addr is None:
            print(f"no broker serves {args.topic}", file=sys.stderr)
            return 1
        ext = {"producerGroup": args.group}
        reply = await admin.ask_broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, ext)
    for n, conn in enumerate(body.loads(reply.body_bytes).get("connectionSet") or [], 1):
        version = conn.get("version")
        desc = "V4_9_8" if version == CURRENT_VERSION else f"version {version}"
        print(
            f"{n:04d}  {conn.get('clientId', ''):<32} {conn.get('clientAddr', ''):<22} "
            f"{conn.get('language', ''):<8} {desc}"
        )
    return 0


@command(
    "create or update a topic on every master of a cluster",
    ("-t", {"dest": "topic", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
    ("-r", {"dest": "read", "type": int, "default": 8}),
    ("-w", {"dest": "write", "type": int, "default": 8}),
    ("-p", {"dest": "perm", "type": int, "default": 6}),
    ("-o", {"dest": "order", "default": "false"}),
    # RocketMQ 5: topic attributes to add, alter or delete, "+message.type=FIFO,-key".
    ("-a", {"dest": "attributes", "default": None}),
)
async def update_topic(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        brokers = await admin.create_topic(
            args.topic,
            queues=args.write,
            cluster=args.cluster,
            perm=args.perm,
            order=args.order.lower() == "true",
            attributes=args.attributes.strip() if args.attributes else None,
        )
    for addr in brokers:
        print(f"create topic to {addr} success.")
    if args.attributes:
        # RocketMQ 5's tool then prints the config it sent, the modification as a Java map.
        items = (x if "=" in x else f"{x}=" for x in args.attributes.strip().split(","))
        order = "true" if args.order.lower() == "true" else "false"
        print(
            f"TopicConfig [topicName={args.topic}, readQueueNums={args.write}, "
            f"writeQueueNums={args.write}, perm={_perm_text(args.perm)}, "
            f"topicFilterType=SINGLE_TAG, topicSysFlag=0, order={order}, "
            f"attributes={{{', '.join(items)}}}]"
        )
    return 0


@command(
    "delete a topic from a cluster and the name servers",
    ("-t", {"dest": "topic", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
)
async def delete_topic(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        await admin.delete_topic(args.topic, cluster=args.cluster)
    print(f"delete topic [{args.topic}] from cluster [{args.cluster}] success.")
    return 0


@command("every topic the name servers know")
async def topic_list(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        for topic in await admin.topics():
            print(topic)
    return 0


@command("a topic's route as JSON", ("-t", {"dest": "topic", "required": True}))
async def topic_route(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        print(json.dumps(await admin.route(args.topic), indent=2, sort_keys=True))
    return 0


@command("min and max offsets of each queue", ("-t", {"dest": "topic", "required": True}))
async def topic_status(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        rows = await admin.topic_status(args.topic)
    print(
        table(
            ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
            [[q.broker_name, q.queue_id, low, high, when(stamp)] for q, low, high, stamp in rows],
        )
    )
    return 0
