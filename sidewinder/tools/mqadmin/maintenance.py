"""Our mqadmin's config and maintenance sub-commands, printed as RocketMQ's mqadmin prints them:
updateBrokerConfig, updateNamesrvConfig, getNamesrvConfig, cleanExpiredCQ, cleanUnusedTopic,
deleteExpiredCommitLog, queryCq, producer, deleteSubGroup.

    mqadmin updateBrokerConfig -n 127.0.0.1:9876 -b 127.0.0.1:10911 -k fileReservedTime -v 48
    mqadmin queryCq -n 127.0.0.1:9876 -t Orders -q 0 -i 0 -c 10
"""

from __future__ import annotations

import argparse
import sys

from sidewinder.client.admin import Admin
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode
from sidewinder.tools.mqadmin.command import command

BROKER_OR_CLUSTER = (
    ("-b", {"dest": "broker", "default": None}),
    ("-c", {"dest": "cluster", "default": None}),
)


async def _brokers(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.broker:
        return [args.broker]
    if args.cluster:
        return sorted((await admin.masters(args.cluster)).values())
    print(f"mqadmin {args.command}: needs -b <broker address> or -c <cluster>", file=sys.stderr)
    return []


@command(
    "set a broker setting, live where it can be, and in the broker's conf file",
    *BROKER_OR_CLUSTER,
    ("-k", {"dest": "key", "required": True}),
    ("-v", {"dest": "value", "required": True}),
)
async def update_broker_config(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        brokers = await _brokers(admin, args)
        payload = f"{args.key.strip()}={args.value.strip()}\n".encode()
        for addr in brokers:
            await admin.ask_broker(addr, RequestCode.UPDATE_BROKER_CONFIG, payload=payload)
            print(f"update broker config success, {addr}")
    return 0 if brokers else 1


@command(
    "set a name server setting",
    ("-k", {"dest": "key", "required": True}),
    ("-v", {"dest": "value", "required": True}),
)
async def update_namesrv_config(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        payload = f"{args.key.strip()}={args.value.strip()}\n".encode()
        await admin.ask_name_server(RequestCode.UPDATE_NAMESRV_CONFIG, payload)
    print(f"update name server config success!\n{args.key} : {args.value}")
    return 0


@command("a name server's settings")
async def get_namesrv_config(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        reply = await admin.ask_name_server(RequestCode.GET_NAMESRV_CONFIG)
    print(f"============{args.namesrv}============")
    for line in reply.body_bytes.decode().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            print(f"{key:<50}=  {value}")
    return 0


async def _maintain(args: argparse.Namespace, code: int) -> int:
    async with Admin(args.namesrv) as admin:
        brokers = await _brokers(admin, args)
        for addr in brokers:
            await admin.ask_broker(addr, code)
    print("success" if brokers else "false")
    return 0 if brokers else 1


@command("drop queues whose messages are all gone", *BROKER_OR_CLUSTER)
async def clean_expired_cq(args: argparse.Namespace) -> int:
    return await _maintain(args, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


@command("drop queues of topics no longer configured", *BROKER_OR_CLUSTER)
async def clean_unused_topic(args: argparse.Namespace) -> int:
    return await _maintain(args, RequestCode.CLEAN_UNUSED_TOPIC)


@command("delete expired CommitLog files now", *BROKER_OR_CLUSTER)
async def delete_expired_commit_log(args: argparse.Namespace) -> int:
    return await _maintain(args, RequestCode.DELETE_EXPIRED_COMMITLOG)


@command(
    "entries of a ConsumeQueue",
    ("-t", {"dest": "topic", "required": True}),
    ("-q", {"dest": "queue", "type": int, "required": True}),
    ("-i", {"dest": "index", "type": int, "required": True}),
    ("-c", {"dest": "count", "type": int, "default": 10}),
    ("-b", {"dest": "broker", "default": None}),
    ("-g", {"dest": "group", "default": None}),
)
async def query_cq(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        broker = args.broker
        if not broker:
            route = await admin.route(args.topic)
            addrs = route["brokerDatas"][0]["brokerAddrs"]
            broker = addrs.get("0") or addrs.get(0)
        ext = {
            "topic": args.topic,
            "queueId": str(args.queue),
            "index": str(args.index),
            "count": str(args.count),
        }
        if args.group:
            ext["consumerGroup"] = args.group
        reply = await admin.ask_broker(broker, RequestCode.QUERY_CONSUME_QUEUE, ext)
    if not reply.body:
        print(reply.remark or "nothing at that index")
        return 1
    data = body.loads(reply.body_bytes)
    rule = "======================================"
    if data.get("subscriptionData") is not None:
        print(f"Subscription data: \n{data['subscriptionData']}\n{rule}")
    if data.get("filterData") is not None:
        print(f"Filter data: \n{data['filterData']}\n{rule}")
    print(f"Queue data: \nmax: {data['maxQueueIndex']}, min: {data['minQueueIndex']}\n{rule}")
    for n, entry in enumerate(data.get("queueData") or [], args.index):
        print(
            f"idx: {n}\nConsumeQueueData{{physicOffset={entry['physicOffset']}, "
            f"physicSize={entry['physicSize']}, tagsCode={entry['tagsCode']}}}\n{rule}"
        )
    return 0


@command("producer instances a broker knows", ("-b", {"dest": "broker", "required": True}))
async def producer(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        reply = await admin.ask_broker(args.broker, RequestCode.GET_ALL_PRODUCER_INFO)
    for group, instances in sorted((body.loads(reply.body_bytes).get("data") or {}).items()):
        for p in instances:
            print(
                f"producer group ({group}) instance : clientId={p['clientId']},"
                f"remoteIP={p['remoteIP']}, language={p['language']}, version={p['version']}, "
                f"lastUpdateTimestamp={p['lastUpdateTimestamp']}"
            )
    return 0


@command(
    "delete a subscription group (-r true: and its offsets)",
    ("-g", {"dest": "group", "required": True}),
    *BROKER_OR_CLUSTER,
    ("-r", {"dest": "remove_offset", "default": "false"}),
)
async def delete_sub_group(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        brokers = await _brokers(admin, args)
        ext = {"groupName": args.group, "removeOffset": args.remove_offset.strip().lower()}
        for addr in brokers:
            await admin.ask_broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
            print(f"delete subscription group [{args.group}] from broker [{addr}] success.")
    return 0 if brokers else 1
