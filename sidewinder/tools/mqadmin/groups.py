"""Our mqadmin's subscription-group sub-commands with RocketMQ 5's options: updateSubGroup and
setConsumeMode.

    mqadmin updateSubGroup -n 127.0.0.1:9876 -c DefaultCluster -g billing -o true \\
        -p '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000}}'
    mqadmin setConsumeMode -n 127.0.0.1:9876 -c DefaultCluster -t Orders -g billing -m POP
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.tools.mqadmin.command import command


def _flag(text: str) -> bool:
    """Java's Boolean.parseBoolean: "true" in any case is true, anything else false."""
    return text.strip().lower() == "true"


# Option letter -> (SubscriptionGroupConfig field, how its text reads), RocketMQ 5's names.
GROUP_OPTIONS: dict[str, tuple[str, Any]] = {
    "s": ("consumeEnable", _flag),
    "m": ("consumeFromMinEnable", _flag),
    "d": ("consumeBroadcastEnable", _flag),
    "o": ("consumeMessageOrderly", _flag),
    "q": ("retryQueueNums", int),
    "r": ("retryMaxTimes", int),
    "p": ("groupRetryPolicy", json.loads),
    "i": ("brokerId", int),
    "w": ("whichBrokerWhenConsumeSlowly", int),
    "a": ("notifyConsumerIdsChangedEnable", _flag),
}


@command(
    "create or update a subscription group on a broker (-b) or every master of a cluster (-c)",
    ("-g", {"dest": "group", "required": True}),
    ("-c", {"dest": "cluster", "default": "DefaultCluster"}),
    ("-b", {"dest": "broker", "default": None}),
    *((f"-{letter}", {"dest": f"opt_{letter}", "default": None}) for letter in GROUP_OPTIONS),
    ("--attributes", {"dest": "attributes", "default": None}),
)
async def update_sub_group(args: argparse.Namespace) -> int:
    settings: dict[str, Any] = {}
    for letter, (field, read) in GROUP_OPTIONS.items():
        text = getattr(args, f"opt_{letter}")
        if text is not None:
            settings[field] = read(text.strip())
    if args.attributes is not None:
        settings["attributes"] = _modification(args.attributes.strip())
    async with Admin(args.namesrv) as admin:
        brokers = await admin.update_group(
            args.group, cluster=args.cluster, settings=settings, broker=args.broker
        )
    for addr in brokers:
        print(f"create subscription group to {addr} success.")
    return 0


def _modification(text: str) -> dict[str, str]:
    """AttributeParser.parseToMap as the tool runs it: "+a=b,-c" to {"+a": "b", "-c": ""}."""
    changes: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        changes[key] = value
    return changes


@command(
    "set whether a group pulls or pops a topic, on a broker (-b) or every master of a cluster",
    ("-t", {"dest": "topic", "required": True}),
    ("-g", {"dest": "group", "required": True}),
    ("-m", {"dest": "mode", "required": True, "choices": ("PULL", "POP")}),
    ("-q", {"dest": "share", "type": int, "default": 0}),
    ("-b", {"dest": "broker", "default": None}),
    ("-c", {"dest": "cluster", "default": None}),
)
async def set_consume_mode(args: argparse.Namespace) -> int:
    if not (args.broker or args.cluster):
        print("setConsumeMode needs -b <broker address> or -c <cluster>")
        return 1
    async with Admin(args.namesrv) as admin:
        if args.broker:
            addrs = [args.broker]
        else:
            addrs = sorted((await admin.masters(args.cluster)).values())
        for addr in addrs:
            await admin.set_message_request_mode(
                addr, args.topic, args.group, args.mode, args.share
            )
            print(f"set consume mode to {addr} success.")
    print(
        f"topic[{args.topic}] group[{args.group}] consume mode[{args.mode}] "
        f"popShareQueueNum[{args.share}]"
    )
    return 0
