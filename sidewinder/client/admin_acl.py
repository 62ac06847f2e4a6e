"""Admin calls of ACL 1.0, beside admin.py: an account created, changed or deleted in a broker's
ACL files, the global white list replaced, each file's version, and every account with the global
white list (request codes 50-54).

    admin = Admin("127.0.0.1:9876", access_key="AclAdmin1", secret_key="AdminSecret1")
    await update_access_config(admin, "127.0.0.1:10911", AccessConfig("app1", "secret12"))
    info = await acl_version_info(admin, "127.0.0.1:10911")
    for path, version in info.files.items():
        print(path, version.counter)
    config = await broker_acl_config(admin, "127.0.0.1:10911")   # RocketMQ 4.9.7 and ours
    print(config.global_white_addrs, [a.access_key for a in config.accounts])

The requests carry the fields RocketMQ's MQClientAPIImpl puts in them, and are signed with the
admin's keys. Our broker takes 50, 51, 53 and 54 from admin accounts only; RocketMQ 4.9's
takes them from any account that passes its check.
A refusal is a ClientError with the broker's code (209, 210, 211 without ACL, as RocketMQ's
broker answers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.route_cache import MASTER_ID, check_reply
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand

TIMEOUT_S = 5.0  # DefaultMQAdminExt's timeoutMillis


@dataclass(frozen=True)
class AccessConfig:
    """An account as PlainAccessConfig carries it; None leaves a setting out of the request
    (the broker then keeps its default)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None  # DENY, PUB, SUB or PUB|SUB
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] | None = None  # "Orders=PUB|SUB", ...
    group_perms: tuple[str, ...] | None = None

    def to_ext(self) -> dict[str, str]:
        """CreateAccessConfigRequestHeader: the lists joined by commas, nulls left out."""
        fields: dict[str, str | None] = {
            "accessKey": self.access_key,
            "secretKey": self.secret_key,
            "whiteRemoteAddress": self.white_remote_address,
            "admin": "true" if self.admin else "false",
            "defaultTopicPerm": self.default_topic_perm,
            "defaultGroupPerm": self.default_group_perm,
            "topicPerms": None if self.topic_perms is None else ",".join(self.topic_perms),
            "groupPerms": None if self.group_perms is None else ",".join(self.group_perms),
        }
        return {k: v for k, v in fields.items() if v is not None}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> AccessConfig:
        """A PlainAccessConfig as GET_BROKER_CLUSTER_ACL_CONFIG's body gives it."""

        def texts(key: str) -> tuple[str, ...] | None:
            items = value.get(key)
            return None if items is None else tuple(str(i) for i in items)

        return cls(
            access_key=str(value.get("accessKey") or ""),
            secret_key=value.get("secretKey"),
            white_remote_address=value.get("whiteRemoteAddress"),
            admin=bool(value.get("admin", False)),
            default_topic_perm=value.get("defaultTopicPerm"),
            default_group_perm=value.get("defaultGroupPerm"),
            topic_perms=texts("topicPerms"),
            group_perms=texts("groupPerms"),
        )


@dataclass(frozen=True)
class BrokerAclConfig:
    """GET_BROKER_CLUSTER_ACL_CONFIG's answer: the global white addresses of all the broker's
    ACL files, and each account (the first file's, where two define one access key) with its
    secret key."""

    global_white_addrs: tuple[str, ...]
    accounts: tuple[AccessConfig, ...]

    def account(self, access_key: str) -> AccessConfig | None:
        return next((a for a in self.accounts if a.access_key == access_key), None)


@dataclass(frozen=True)
class DataVersion:
    counter: int
    timestamp_ms: int

    @classmethod
    def of(cls, value: dict[str, Any]) -> DataVersion:
        return cls(int(value.get("counter", 0)), int(value.get("timestamp", 0)))


@dataclass(frozen=True)
class AclVersionInfo:
    """GET_BROKER_CLUSTER_ACL_INFO's answer: the broker, the version of its default file and
    of each ACL file by path (in the answer's order)."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    version: DataVersion
    files: dict[str, DataVersion]


async def _ask(admin: Admin, addr: str, code: int, ext: dict[str, str] | None) -> RemotingCommand:
    reply = await admin.remoting.invoke(addr, RemotingCommand.request(code, ext), TIMEOUT_S)
    check_reply(reply)
    return reply


async def update_access_config(admin: Admin, broker_addr: str, config: AccessConfig) -> None:
    """UPDATE_AND_CREATE_ACL_CONFIG: the account created, or changed where the broker's
    files hold it."""
    await _ask(admin, broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, config.to_ext())


async def delete_access_config(admin: Admin, broker_addr: str, access_key: str) -> None:
    """DELETE_ACL_CONFIG: the account removed from the file that holds it."""
    await _ask(admin, broker_addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})


async def update_global_white_addrs(
    admin: Admin, broker_addr: str, addrs: str, acl_file: str | None = None
) -> None:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: `addrs` (comma-separated) become the global white
    list of `acl_file` (a path on the broker), else of the default plain_acl.yml."""
    ext = {"globalWhiteAddrs": addrs}
    if acl_file is not None:
        ext["aclFileFullPath"] = acl_file
    await _ask(admin, broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext)


async def acl_version_info(admin: Admin, broker_addr: str) -> AclVersionInfo:
    """GET_BROKER_CLUSTER_ACL_INFO: the answer is all in its header."""
    reply = await _ask(admin, broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, None)
    ext = reply.ext_fields or {}
    files = json.loads(ext.get("allAclFileVersion") or "{}")
    return AclVersionInfo(
        cluster_name=ext.get("clusterName", ""),
        broker_name=ext.get("brokerName", ""),
        broker_addr=ext.get("brokerAddr", ""),
        version=DataVersion.of(json.loads(ext.get("version") or "{}")),
        files={str(path): DataVersion.of(v) for path, v in files.items()},
    )


async def broker_acl_config(admin: Admin, broker_addr: str) -> BrokerAclConfig:
    """GET_BROKER_CLUSTER_ACL_CONFIG, as RocketMQ 4.9.7's examineBrokerClusterAclConfig. A
    4.9.7 broker without ACL never answers (a timeout); ours refuses at once (SYSTEM_ERROR);
    RocketMQ 4.9.8 and 5.x answer REQUEST_CODE_NOT_SUPPORTED."""
    reply = await _ask(admin, broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, None)
    data = body.loads(reply.body_bytes) if reply.body_bytes else {}
    return BrokerAclConfig(
        global_white_addrs=tuple(str(a) for a in data.get("globalWhiteAddrs") or []),
        accounts=tuple(AccessConfig.from_json(a) for a in data.get("plainAccessConfigs") or []),
    )


async def cluster_broker_addrs(admin: Admin, cluster: str, *, masters_only: bool) -> list[str]:
    """The addresses of a cluster's brokers, masters and slaves or masters only
    (CommandUtil.fetchMasterAndSlaveAddrByClusterName / fetchMasterAddrByClusterName), in
    the order they were found; ClusterNotFound when the name servers know no such cluster."""
    info = await admin.cluster_info()
    names = info.get("clusterAddrTable", {}).get(cluster)
    if names is None:
        raise ClusterNotFound(cluster)
    found: list[str] = []
    for name in names:
        broker = info.get("brokerAddrTable", {}).get(name)
        if broker is None:
            continue
        addrs: dict[int, str] = broker["brokerAddrs"]
        chosen = [addrs[MASTER_ID]] if MASTER_ID in addrs else []
        for addr in chosen if masters_only else list(addrs.values()):
            if addr not in found:
                found.append(addr)
    return found


class ClusterNotFound(LookupError):
    """No cluster of that name on the name servers (RocketMQ's tools print an error and go on
    with no broker)."""
