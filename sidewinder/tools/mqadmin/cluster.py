"""Our mqadmin's cluster sub-commands: clusterList, brokerStatus, getBrokerConfig.

mqadmin clusterList -n 127.0.0.1:9876
mqadmin getBrokerConfig -n 127.0.0.1:9876 -c DefaultCluster
"""

from __future__ import annotations

import argparse
import sys

from sidewinder.client.admin import Admin
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.output import table


@command("clusters, brokers and their addresses")
async def cluster_list(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        info = await admin.cluster_info()
    rows = []
    for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
        for name in names:
            for broker_id, addr in sorted(info["brokerAddrTable"][name]["brokerAddrs"].items()):
                rows.append([cluster, name, broker_id, addr])
    print(table(["#Cluster Name", "#Broker Name", "#BID", "#Addr"], rows))
    return 0


@command("a broker's runtime statistics", ("-b", {"dest": "broker", "required": True}))
async def broker_status(args: argparse.Namespace) -> int:
    async with Admin(args.namesrv) as admin:
        stats = await admin.broker_runtime(args.broker)
    width = max((len(k) for k in stats), default=0)
    for key, value in sorted(stats.items()):
        print(f"{key.ljust(width)} : {value}")
    return 0


@command(
    "the effective settings of a broker (-b) or of every master of a cluster (-c)",
    ("-b", {"dest": "broker", "default": None}),
    ("-c", {"dest": "cluster", "default": None}),
)
async def get_broker_config(args: argparse.Namespace) -> int:
    if not args.broker and not args.cluster:
        print("getBrokerConfig needs -b <broker address> or -c <cluster name>", file=sys.stderr)
        return 1
    async with Admin(args.namesrv) as admin:
        if args.broker:
            addresses = [args.broker]
        else:
            addresses = list((await admin.masters(args.cluster)).values())
        for addr in sorted(addresses):
            config = await admin.broker_config(addr)
            print(f"============{addr}============")
            for key, value in sorted(config.items()):
                print(f"{key:<50}=  {value}")
    return 0
