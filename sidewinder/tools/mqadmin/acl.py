"""Our mqadmin's ACL sub-commands, with RocketMQ 4.9.8's options and output: updateAclConfig,
deleteAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr.

    mqadmin updateAclConfig -n 127.0.0.1:9876 -b 127.0.0.1:10911 -a app1 -s secret12 \
        -t "Orders=PUB|SUB" -i DENY -u SUB
    mqadmin clusterAclConfigVersion -n 127.0.0.1:9876 -c DefaultCluster
    mqadmin updateGlobalWhiteAddr -n 127.0.0.1:9876 -c DefaultCluster -g "10.10.103.*"

Each goes to one broker (-b) or to every broker of a cluster (-c: masters and slaves, as
RocketMQ's tool does; clusterAclConfigVersion asks the masters only), signed with the tool's
keys (--access-key/--secret-key, else conf/tools.yml): a broker with ACL on takes them from any
account that passes its check, admin or not, as RocketMQ 4.9's does. As RocketMQ's tool,
updateAclConfig ends with the PlainAccessConfig it sent in Java's default `Class@hash` form and
deleteAclConfig with the account's key, neither followed by a newline; an unknown cluster prints
RocketMQ's `[error]` line and changes nothing.
"""

from __future__ import annotations

import argparse
import sys

from sidewinder.client.admin import Admin
from sidewinder.client.admin_acl import (
    AccessConfig,
    AclVersionInfo,
    ClusterNotFound,
    acl_version_info,
    cluster_broker_addrs,
    delete_access_config,
    update_access_config,
    update_global_white_addrs,
)
from sidewinder.protocol.message import java_string_hash
from sidewinder.tools.mqadmin.command import command
from sidewinder.tools.mqadmin.java import date_time, java_hash_order, java_hashmap_order

NO_CLUSTER = (
    "[error] Make sure the specified clusterName exists or the name server connected to is correct."
)
ACCESS_CONFIG_CLASS = "org.apache.rocketmq.common.PlainAccessConfig"
VERSION_ROW = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"

BROKER_OR_CLUSTER = (
    ("-b", {"dest": "broker", "default": None, "help": "a broker's address"}),
    ("-c", {"dest": "cluster", "default": None, "help": "every broker of a cluster"}),
)


async def _targets(admin: Admin, args: argparse.Namespace, *, masters_only: bool) -> list[str]:
    """-b's address, or the cluster's brokers in the order of RocketMQ's HashSet of them."""
    if args.broker:
        return [args.broker.strip()]
    try:
        found = await cluster_broker_addrs(admin, args.cluster.strip(), masters_only=masters_only)
    except ClusterNotFound:
        print(NO_CLUSTER, end="")
        return []
    return java_hashmap_order(found)


def _one_of_b_or_c(args: argparse.Namespace) -> bool:
    """RocketMQ's required option group: exactly one of -b and -c."""
    if bool(args.broker) == bool(args.cluster):
        print(f"mqadmin {args.command}: give -b <broker address> or -c <cluster>", file=sys.stderr)
        return False
    return True


def _listed(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(text.strip().split(","))


def _trimmed(text: str | None) -> str | None:
    return None if text is None else text.strip()


@command(
    "create or update an account in the brokers' ACL files",
    *BROKER_OR_CLUSTER,
    (
        "-a",
        {
            "dest": "access_key_of",
            "metavar": "accessKey",
            "required": True,
            "help": "the account's accessKey",
        },
    ),
    (
        "-s",
        {
            "dest": "secret_key_of",
            "metavar": "secretKey",
            "required": True,
            "help": "its secretKey",
        },
    ),
    ("-w", {"dest": "white_remote_address", "default": None}),
    ("-i", {"dest": "default_topic_perm", "default": None}),
    ("-u", {"dest": "default_group_perm", "default": None}),
    ("-t", {"dest": "topic_perms", "default": None, "help": "topicA=DENY,topicD=SUB"}),
    ("-g", {"dest": "group_perms", "default": None, "help": "groupD=DENY,groupD=SUB"}),
    ("-m", {"dest": "admin", "default": None, "help": "true: an admin account"}),
)
async def update_acl_config(args: argparse.Namespace) -> int:
    if not _one_of_b_or_c(args):
        return 1
    config = AccessConfig(
        access_key=args.access_key_of.strip(),
        secret_key=args.secret_key_of.strip(),
        white_remote_address=_trimmed(args.white_remote_address),
        admin=(args.admin or "").strip().lower() == "true",  # Boolean.parseBoolean
        default_topic_perm=_trimmed(args.default_topic_perm),
        default_group_perm=_trimmed(args.default_group_perm),
        topic_perms=_listed(args.topic_perms),
        group_perms=_listed(args.group_perms),
    )
    async with Admin(args.namesrv) as admin:
        for addr in await _targets(admin, args, masters_only=False):
            await update_access_config(admin, addr, config)
            print(f"create or update plain access config to {addr} success.")
    # Java's Object.toString: the class and an identity hash (PlainAccessConfig has no other).
    print(f"{ACCESS_CONFIG_CLASS}@{id(config) >> 4 & 0x7FFFFFFF:x}", end="")
    return 0


@command(
    "delete an account from the brokers' ACL files",
    *BROKER_OR_CLUSTER,
    (
        "-a",
        {
            "dest": "access_key_of",
            "metavar": "accessKey",
            "required": True,
            "help": "the account's accessKey",
        },
    ),
)
async def delete_acl_config(args: argparse.Namespace) -> int:
    if not _one_of_b_or_c(args):
        return 1
    key = args.access_key_of.strip()
    async with Admin(args.namesrv) as admin:
        for addr in await _targets(admin, args, masters_only=False):
            await delete_access_config(admin, addr, key)
            print(f"delete plain access config account from {addr} success.")
    print(f"account's accesskey is:{key}", end="")
    return 0


def _version_rows(info: AclVersionInfo) -> None:
    """Each file's version. RocketMQ's tool copies the files into a HashMap sized to them
    (load factor 1), whose order this is."""
    paths = java_hashmap_order(info.files)
    for path in java_hash_order(paths, java_string_hash, sized=len(paths)):
        version = info.files[path]
        print(
            VERSION_ROW.format(
                info.cluster_name,
                info.broker_name,
                info.broker_addr,
                path,
                version.counter,
                date_time(version.timestamp_ms),
            )
        )


@command(
    "the version of each ACL file of a broker, or of every master of a cluster",
    *BROKER_OR_CLUSTER,
)
async def cluster_acl_config_version(args: argparse.Namespace) -> int:
    if not _one_of_b_or_c(args):
        return 1
    async with Admin(args.namesrv) as admin:
        masters = await _targets(admin, args, masters_only=True)
        if args.cluster:
            print(
                VERSION_ROW.format(
                    "#Cluster Name",
                    "#Broker Name",
                    "#Broker Addr",
                    "#AclFilePath",
                    "#AclConfigVersionNum",
                    "#AclLastUpdateTime",
                )
            )
        for addr in masters:
            _version_rows(await acl_version_info(admin, addr))
    print(f"get {'cluster' if args.cluster else 'broker'}'s plain access config version success.")
    return 0


@command(
    "replace the global white list of the brokers' ACL file",
    *BROKER_OR_CLUSTER,
    ("-g", {"dest": "addrs", "required": True, "help": "10.10.103.*,192.168.0.*"}),
    ("-p", {"dest": "acl_file", "default": None, "help": "which ACL file (a path on the broker)"}),
)
async def update_global_white_addr(args: argparse.Namespace) -> int:
    if not _one_of_b_or_c(args):
        return 1
    async with Admin(args.namesrv) as admin:
        for addr in await _targets(admin, args, masters_only=False):
            await update_global_white_addrs(
                admin, addr, args.addrs.strip(), _trimmed(args.acl_file)
            )
            print(f"update global white remote addresses to {addr} success.")
    return 0
