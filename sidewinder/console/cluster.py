"""What the console shows of brokers and topics, read over remoting with `Admin`.

    view = ClusterView(Admin("127.0.0.1:9876"))
    overview = await view.overview()          # brokers per cluster, their rates and disks
    topics = await view.topics(kind="normal")  # names, kinds, queue counts

Every broker call goes through calls.fan_out: a broker that does not answer in time is shown
as not answering, and the rest of the page is there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.admin_groups import topic_consumers
from sidewinder.client.route_cache import MASTER_ID
from sidewinder.console.calls import Outcome, fan_out, guarded
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, version_desc
from sidewinder.protocol.command import RemotingCommand

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
TOPIC_KINDS = ("normal", "retry", "dlq", "system")
# Topics every broker keeps for itself, beside the ones the name server lists as system topics.
SYSTEM_PREFIXES = ("rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_", "TBW102", "OFFSET_MOVED_EVENT")
# TopicValidator's system topics and the request-reply topic each cluster makes for itself.
SYSTEM_TOPICS = frozenset(
    {"SELF_TEST_TOPIC", "BenchmarkTest", "TRANS_CHECK_MAX_TIME_TOPIC", "RMQ_SYS_TRACE_TOPIC"}
)
SYSTEM_SUFFIXES = ("_REPLY_TOPIC",)


class NameServerDown(ConnectionError):
    """No name server of the list answered: the console can show nothing of the cluster."""


@dataclass
class BrokerRow:
    cluster: str
    name: str
    broker_id: int
    addr: str
    role: str
    alive: bool = True
    error: str | None = None
    version: str = ""
    put_tps: float = 0.0
    get_tps: float = 0.0
    disk_ratio: float | None = None
    disk_capacity: str = ""
    put_today: int = 0
    get_today: int = 0
    commit_log_max_offset: int = 0
    dispatch_behind_bytes: int = 0


@dataclass
class TopicRow:
    name: str
    kind: str
    write_queues: int = 0
    read_queues: int = 0
    perm: int = 0
    order: bool = False


@dataclass
class Overview:
    clusters: dict[str, list[BrokerRow]] = field(default_factory=dict)
    namesrv: str = ""
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "namesrv": self.namesrv,
            "error": self.error,
            "clusters": {c: [asdict(b) for b in rows] for c, rows in self.clusters.items()},
        }


def _first_number(value: str | None) -> float:
    """RocketMQ's TPS values are "10s 60s 600s" figures: the first one."""
    try:
        return float((value or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def fill_runtime(row: BrokerRow, table: dict[str, str]) -> None:
    """The figures `mqadmin brokerStatus` prints, from GET_BROKER_RUNTIME_INFO's table."""
    row.version = table.get("brokerVersionDesc", "")
    row.put_tps = _first_number(table.get("putTps"))
    row.get_tps = _first_number(table.get("getTransferedTps"))
    ratio = table.get("commitLogDiskRatio")
    row.disk_ratio = float(ratio) if ratio not in (None, "") else None
    row.disk_capacity = table.get("commitLogDirCapacity", "")
    row.put_today = _int(table.get("msgPutTotalTodayNow"))
    row.get_today = _int(table.get("msgGetTotalTodayNow"))
    row.commit_log_max_offset = _int(table.get("commitLogMaxOffset"))
    row.dispatch_behind_bytes = _int(table.get("dispatchBehindBytes"))


def topic_kind(name: str, system: set[str]) -> str:
    if name.startswith(RETRY_PREFIX):
        return "retry"
    if name.startswith(DLQ_PREFIX):
        return "dlq"
    if name in system or name in SYSTEM_TOPICS or name.startswith(SYSTEM_PREFIXES):
        return "system"
    if name.endswith(SYSTEM_SUFFIXES):
        return "system"
    return "normal"


def master_addrs(info: dict[str, Any]) -> dict[str, str]:
    """brokerName -> master address, from GET_BROKER_CLUSTER_INFO."""
    found = {}
    for name, broker in (info.get("brokerAddrTable") or {}).items():
        addr = broker["brokerAddrs"].get(MASTER_ID)
        if addr is not None:
            found[name] = addr
    return found


def registered_brokers(info: dict[str, Any]) -> list[BrokerRow]:
    """Every broker of GET_BROKER_CLUSTER_INFO, masters and slaves, by cluster, name and id."""
    rows: list[BrokerRow] = []
    for cluster, names in sorted((info.get("clusterAddrTable") or {}).items()):
        for name in sorted(names):
            broker = (info.get("brokerAddrTable") or {}).get(name)
            for broker_id, addr in sorted((broker or {}).get("brokerAddrs", {}).items()):
                role = "MASTER" if broker_id == MASTER_ID else "SLAVE"
                rows.append(BrokerRow(cluster, name, broker_id, addr, role))
    return rows


class ClusterView:
    def __init__(self, admin: Admin, namesrv: str = "") -> None:
        self.admin = admin
        self.namesrv = namesrv

    async def cluster_info(self) -> dict[str, Any]:
        outcome = await guarded(self.admin.cluster_info())
        if not outcome.ok or outcome.value is None:
            raise NameServerDown(f"name server {self.namesrv}: {outcome.error}")
        return outcome.value

    async def masters(self) -> dict[str, str]:
        return master_addrs(await self.cluster_info())

    async def clusters(self) -> list[str]:
        return sorted((await self.cluster_info()).get("clusterAddrTable") or {})

    async def overview(self) -> Overview:
        overview = Overview(namesrv=self.namesrv)
        try:
            info = await self.cluster_info()
        except NameServerDown as exc:
            overview.error = str(exc)
            return overview
        rows = registered_brokers(info)
        runtimes = await fan_out({row.addr: self.admin.broker_runtime(row.addr) for row in rows})
        for row in rows:
            outcome = runtimes[row.addr]
            if outcome.ok and outcome.value is not None:
                fill_runtime(row, outcome.value)
            else:
                # A broker that answers with an error is up (RocketMQ 4.9's fails its first
                # seconds with NoSuchElementException, before its first TPS sample).
                row.alive, row.error = outcome.answered, outcome.error
            overview.clusters.setdefault(row.cluster, []).append(row)
        return overview

    async def ask_masters(self, code: int) -> dict[str, Outcome[RemotingCommand]]:
        """One request to every master at once: each one's reply, or what went wrong."""
        masters = await self.masters()
        return await fan_out({a: self.admin.ask_broker(a, code) for a in masters.values()})

    async def system_topics(self) -> set[str]:
        outcome = await guarded(
            self.admin.ask_name_server(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        )
        if not outcome.ok or outcome.value is None:
            return set()
        return set(body.loads(outcome.value.body_bytes).get("topicList") or [])

    async def topic_configs(self) -> dict[str, dict[str, Any]]:
        """Every master's topic configs merged (queue counts summed over the brokers)."""
        replies = await self.ask_masters(RequestCode.GET_ALL_TOPIC_CONFIG)
        merged: dict[str, dict[str, Any]] = {}
        for outcome in replies.values():
            if not outcome.ok or outcome.value is None:
                continue
            table = body.loads(outcome.value.body_bytes).get("topicConfigTable") or {}
            for name, config in table.items():
                seen = merged.setdefault(name, {"w": 0, "r": 0, "perm": 0, "order": False})
                seen["w"] += int(config.get("writeQueueNums", 0))
                seen["r"] += int(config.get("readQueueNums", 0))
                seen["perm"] = int(config.get("perm", 0))
                seen["order"] = bool(config.get("order", False))
        return merged

    async def topics(self, kind: str | None = None, search: str = "") -> list[TopicRow]:
        names = await guarded(self.admin.topics())
        if not names.ok or names.value is None:
            raise NameServerDown(f"name server {self.namesrv}: {names.error}")
        system = await self.system_topics() | set(await self.clusters())
        system |= set(master_addrs(await self.cluster_info()))
        configs = await self.topic_configs()
        rows = []
        for name in names.value:
            row = TopicRow(name, topic_kind(name, system))
            if (kind and row.kind != kind) or search.lower() not in name.lower():
                continue
            config = configs.get(name)
            if config:
                row.write_queues, row.read_queues = config["w"], config["r"]
                row.perm, row.order = config["perm"], config["order"]
            rows.append(row)
        return rows

    async def topic_detail(self, topic: str) -> dict[str, Any]:
        """The route, each queue's min and max offsets, and the groups that consume it."""
        route = await guarded(self.admin.route(topic))
        status: Outcome[Any] = await guarded(self.admin.topic_status(topic))
        groups = await guarded(topic_consumers(self.admin, topic))
        queues = [
            {
                "broker": q.broker_name,
                "queue_id": q.queue_id,
                "min_offset": low,
                "max_offset": high,
                "last_update_ms": stamp,
            }
            for q, low, high, stamp in (status.value or [])
        ]
        return {
            "topic": topic,
            "route": route.value,
            "route_error": route.error,
            "queues": queues,
            "queues_error": status.error,
            "messages": sum(q["max_offset"] - q["min_offset"] for q in queues),
            "groups": groups.value or [],
            "groups_error": groups.error,
        }

    async def producers(self) -> dict[str, Any]:
        """Every producer group the masters know, with its instances (GET_ALL_PRODUCER_INFO:
        client id, address, language, version, last heartbeat), merged over the brokers."""
        replies = await self.ask_masters(RequestCode.GET_ALL_PRODUCER_INFO)
        groups: dict[str, dict[str, dict[str, Any]]] = {}
        errors = []
        for addr, outcome in replies.items():
            if not outcome.ok or outcome.value is None:
                errors.append(f"{addr}: {outcome.error}")
                continue
            for group, instances in (
                body.loads(outcome.value.body_bytes).get("data") or {}
            ).items():
                for p in instances:
                    seen = groups.setdefault(group, {}).setdefault(p.get("clientId", ""), {})
                    seen.update(
                        client_id=p.get("clientId", ""),
                        address=p.get("remoteIP", ""),
                        language=p.get("language", ""),
                        version=version_desc(int(p.get("version", 0))),
                        last_heartbeat_ms=max(
                            int(p.get("lastUpdateTimestamp", 0)), seen.get("last_heartbeat_ms", 0)
                        ),
                    )
        return {
            "groups": [
                {"group": g, "instances": sorted(i.values(), key=lambda x: x["client_id"])}
                for g, i in sorted(groups.items())
            ],
            "errors": errors,
        }

    async def save_topic(
        self,
        topic: str,
        cluster: str,
        queues: int,
        perm: int,
        order: bool,
        attributes: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master; `attributes`: RocketMQ 5's changes
        ("+message.type=FIFO,-key"), which 4.x brokers ignore."""
        return await self.admin.create_topic(
            topic, queues=queues, cluster=cluster, perm=perm, order=order, attributes=attributes
        )

    async def delete_topic(self, topic: str, cluster: str) -> None:
        await self.admin.delete_topic(topic, cluster=cluster)
