"""Our mqadmin's export sub-commands, writing the JSON files RocketMQ's mqadmin writes:
exportConfigs (configs.json), exportMetadata (metadata.json, or topic.json / subscriptionGroup.json
with -t / -g), exportMetrics (metrics.json).

    mqadmin exportConfigs -n 127.0.0.1:9876 -c DefaultCluster -f /tmp/rocketmq/export
    mqadmin exportMetadata -n 127.0.0.1:9876 -c DefaultCluster [-t | -g] [-s]
    mqadmin exportMetadata -n 127.0.0.1:9876 -b 127.0.0.1:10911 -t
    mqadmin exportMetrics -n 127.0.0.1:9876 -c DefaultCluster

The files are fastjson's pretty form (tab indents); system topics and groups are left out, as
DefaultMQAdminExt's getUserTopicConfig and getUserSubscriptionGroup leave them out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.admin_groups import consumer_connection, is_system_group
from sidewinder.client.route_cache import MASTER_ID, ClientError
from sidewinder.protocol import body
from sidewinder.protocol.codes import CURRENT_VERSION, RequestCode, version_desc
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.stats import _day_sum, _stats_data

DEFAULT_DIR = "/tmp/rocketmq/export"
# What exportConfigs keeps of each master's settings.
CONFIG_KEYS = (
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
)
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_without_nulls(data), indent="\t", separators=(",", ":")))


def _without_nulls(value: Any) -> Any:
    """fastjson leaves out a map's null values (no WriteMapNullValue)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


async def _cluster_brokers(admin: Admin, cluster: str) -> dict[str, dict[int, str]]:
    """brokerName -> {brokerId: address} of each broker of the cluster."""
    info = await admin.cluster_info()
    names = info.get("clusterAddrTable", {}).get(cluster) or []
    table = info.get("brokerAddrTable", {})
    return {n: table[n]["brokerAddrs"] for n in names if n in table}


async def user_topics(admin: Admin, addr: str, special: bool) -> dict[str, dict[str, Any]]:
    """GET_ALL_TOPIC_CONFIG less the broker's system topics (and, unless `special`, the
    retry and dead-letter topics)."""
    reply = await admin.ask_broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    topics = dict(body.loads(reply.body_bytes).get("topicConfigTable") or {})
    reply = await admin.ask_broker(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    system = set(body.loads(reply.body_bytes).get("topicList") or [])
    return {
        name: config
        for name, config in topics.items()
        if name not in system and (special or not name.startswith(("%RETRY%", "%DLQ%")))
    }


async def user_groups(admin: Admin, addr: str) -> dict[str, dict[str, Any]]:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG less the system groups."""
    reply = await admin.ask_broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    groups = body.loads(reply.body_bytes).get("subscriptionGroupTable") or {}
    return {name: config for name, config in groups.items() if not is_system_group(name)}


@command(
    "the main settings of each master of a cluster, and its size, as configs.json",
    ("-c", {"dest": "cluster", "required": True}),
    ("-f", {"dest": "path", "default": DEFAULT_DIR}),
)
async def export_configs(args: argparse.Namespace) -> int:
    configs, masters, slaves = {}, 0, 0
    async with Admin(args.namesrv) as admin:
        for addrs in (await _cluster_brokers(admin, args.cluster.strip())).values():
            if MASTER_ID not in addrs:
                continue
            settings = await admin.broker_config(addrs[MASTER_ID])
            masters += 1
            slaves += len(addrs) - 1
            configs[settings.get("brokerName", "")] = {
                k: settings[k] for k in CONFIG_KEYS if k in settings
            }
        scale = {
            "namesrvSize": len(admin.routes.namesrv_addrs),
            "masterBrokerSize": masters,
            "slaveBrokerSize": slaves,
        }
    path = Path(args.path.strip()) / "configs.json"
    _write(path, {"brokerConfigs": configs, "clusterScale": scale})
    print(f"export {path} success", end="")
    return 0


@command(
    "the user topics and groups of a cluster (-c) or broker (-b) as JSON",
    ("-c", {"dest": "cluster", "default": None}),
    ("-b", {"dest": "broker", "default": None}),
    ("-f", {"dest": "path", "default": DEFAULT_DIR}),
    ("-t", {"dest": "topics_only", "action": "store_true"}),
    ("-g", {"dest": "groups_only", "action": "store_true"}),
    ("-s", {"dest": "special", "action": "store_true"}),
)
async def export_metadata(args: argparse.Namespace) -> int:
    if not args.broker and not args.cluster:
        print("usage: mqadmin exportMetadata -c <cluster> | -b <broker address> [-t|-g] [-s]")
        return 0
    directory = Path(args.path.strip())
    async with Admin(args.namesrv) as admin:
        if args.broker:
            return await _export_broker(admin, args, directory)
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for addrs in (await _cluster_brokers(admin, args.cluster.strip())).values():
            if MASTER_ID not in addrs:
                continue
            for name, config in (await user_topics(admin, addrs[MASTER_ID], args.special)).items():
                if name in topics:  # summed over the brokers that serve it
                    config["writeQueueNums"] += topics[name]["writeQueueNums"]
                    config["readQueueNums"] += topics[name]["readQueueNums"]
                topics[name] = config
            for name, config in (await user_groups(admin, addrs[MASTER_ID])).items():
                if name in groups:
                    config["retryQueueNums"] += groups[name]["retryQueueNums"]
                groups[name] = config
    result: dict[str, Any] = {}
    if args.topics_only:
        result["topicConfigTable"], path = topics, directory / "topic.json"
    elif args.groups_only:
        result["subscriptionGroupTable"], path = groups, directory / "subscriptionGroup.json"
    else:
        result = {"topicConfigTable": topics, "subscriptionGroupTable": groups}
        path = directory / "metadata.json"
    result["exportTime"] = int(time.time() * 1000)
    _write(path, result)
    print(f"export {path} success")
    return 0


async def _export_broker(admin: Admin, args: argparse.Namespace, directory: Path) -> int:
    """-b: one broker's topics (-t) or groups (-g), as its wrappers (nothing without either)."""
    addr = args.broker.strip()
    if args.topics_only:
        path = directory / "topic.json"
        reply = await admin.ask_broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = dict(body.loads(reply.body_bytes))
        wrapper["topicConfigTable"] = await user_topics(admin, addr, args.special)
    elif args.groups_only:
        path = directory / "subscriptionGroup.json"
        reply = await admin.ask_broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = dict(body.loads(reply.body_bytes))
        wrapper["subscriptionGroupTable"] = await user_groups(admin, addr)
    else:
        return 0
    _write(path, wrapper)
    print(f"export {path} success", end="")
    return 0


@command(
    "each master's environment, rates and client versions, as metrics.json",
    ("-c", {"dest": "cluster", "required": True}),
    ("-f", {"dest": "path", "default": DEFAULT_DIR}),
)
async def export_metrics(args: argparse.Namespace) -> int:
    totals_tps = dict.fromkeys(
        ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0
    )
    totals_day = dict.fromkeys(
        ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
    )
    report = {}
    async with Admin(args.namesrv) as admin:
        for name, addrs in (await _cluster_brokers(admin, args.cluster.strip())).items():
            if MASTER_ID in addrs:
                report[name] = await _broker_report(admin, addrs[MASTER_ID], totals_tps, totals_day)
    path = Path(args.path.strip()) / "metrics.json"
    totals = {"totalTps": totals_tps, "totalOneDayNum": totals_day}
    _write(path, {"evaluateReport": report, "totalData": totals})
    print(f"export {path} success", end="")
    return 0


def _first_figure(rates: str | None) -> float:
    """The 10-second rate of a "10s 60s 600s" runtime entry (0 before the broker has one)."""
    figures = (rates or "").split()
    return float(figures[0]) if figures else 0.0


async def _broker_report(
    admin: Admin, addr: str, totals_tps: dict[str, float], totals_day: dict[str, int]
) -> dict[str, Any]:
    """runtimeEnv, runtimeQuota and runtimeVersion of one master (ExportMetricsCommand's)."""
    runtime = await admin.broker_runtime(addr)
    settings = await admin.broker_config(addr)
    groups = await user_groups(admin, addr)
    topics = await user_topics(admin, addr, False)
    trans = await _stats_data(admin, addr, "TOPIC_PUT_NUMS", TRANS_HALF_TOPIC)
    schedule = await _stats_data(admin, addr, "TOPIC_PUT_NUMS", SCHEDULE_TOPIC)
    tps = {
        "normalInTps": _first_figure(runtime.get("putTps")),
        "normalOutTps": _first_figure(runtime.get("getTransferedTps")),
        "transInTps": float(trans["statsMinute"]["tps"]) if trans else 0.0,
        "scheduleInTps": float(schedule["statsMinute"]["tps"]) if schedule else 0.0,
    }
    day = {
        "normalOneDayInNum": int(runtime.get("msgPutTotalTodayMorning", 0))
        - int(runtime.get("msgPutTotalYesterdayMorning", 0)),
        "normalOneDayOutNum": int(runtime.get("msgGetTotalTodayMorning", 0))
        - int(runtime.get("msgGetTotalYesterdayMorning", 0)),
        "transOneDayInNum": _day_sum(trans) if trans else 0,
        "scheduleOneDayInNum": _day_sum(schedule) if schedule else 0,
    }
    for key, value in zip(totals_tps, tps.values(), strict=True):
        totals_tps[key] += value
    for key, value in day.items():
        totals_day[key] += value
    clients = set()
    for group in groups:
        try:
            connection = await consumer_connection(admin, group)
        except ClientError:
            continue
        for conn in connection.get("connectionSet") or []:
            clients.add(f"{conn['language']}%{version_desc(int(conn['version']))}")
    return {
        "runtimeEnv": {
            "cpuNum": settings.get("clientCallbackExecutorThreads"),
            "totalMemKBytes": runtime.get("totalMemKBytes"),
        },
        "runtimeQuota": {
            "diskRatio": {
                "commitLogDiskRatio": runtime.get("commitLogDiskRatio"),
                "consumeQueueDiskRatio": runtime.get("consumeQueueDiskRatio"),
            },
            "tps": tps,
            "oneDayNum": day,
            "messageAverageSize": runtime.get("putMessageAverageSize"),
            "topicSize": len(topics),
            "groupSize": len(groups),
        },
        "runtimeVersion": {
            "rocketmqVersion": version_desc(CURRENT_VERSION),
            "clientInfo": sorted(clients),
        },
    }
