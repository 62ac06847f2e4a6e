"""The name server's route table (RocketMQ's RouteInfoManager), pure data: no sockets, no clock.

Brokers register their topic configs; clients ask which brokers serve a topic. A master's
topics become queue data; a slave only adds its address. A broker that has not registered
for `BROKER_EXPIRED_S` (or whose connection closed) is removed, with every topic left without
a broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MASTER_ID = 0
BROKER_EXPIRED_S = 120.0
PERM_WRITE = 2


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    # RocketMQ 5's name server writes these in every broker entry; 5.x clients (rocketmq-rust's
    # among them) refuse an entry without enableActingMaster. A 4.x broker sends neither.
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        zone = {"zoneName": self.zone_name} if self.zone_name is not None else {}
        return {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        } | zone


@dataclass
class BrokerLive:
    last_update_s: float
    data_version: dict[str, Any]
    channel: object  # the connection it registered on
    ha_server_addr: str


@dataclass(frozen=True)
class RegisterResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteTable:
    def __init__(self) -> None:
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.brokers: dict[str, BrokerData] = {}  # brokerName -> addresses by id
        self.clusters: dict[str, set[str]] = {}  # cluster -> brokerNames
        self.live: dict[str, BrokerLive] = {}  # brokerAddr -> liveness
        self.filter_servers: dict[str, list[str]] = {}

    # -- brokers ---------------------------------------------------------------------------------
    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: dict[str, dict[str, Any]] | None,
        data_version: dict[str, Any],
        filter_servers: list[str],
        channel: object,
        now_s: float,
        enable_acting_master: bool = False,
        zone_name: str | None = None,
    ) -> RegisterResult:
        self.clusters.setdefault(cluster, set()).add(broker_name)
        broker = self.brokers.get(broker_name)
        first = broker is None
        if broker is None:
            broker = self.brokers[broker_name] = BrokerData(cluster, broker_name)
        broker.enable_acting_master = enable_acting_master
        broker.zone_name = zone_name
        # A slave turned master (or the reverse) registers the same address under a new id.
        for old_id, addr in list(broker.broker_addrs.items()):
            if addr == broker_addr and old_id != broker_id:
                del broker.broker_addrs[old_id]
        first = broker.broker_addrs.get(broker_id) is None or first
        broker.broker_addrs[broker_id] = broker_addr
        if (
            topic_configs is not None
            and broker_id == MASTER_ID
            and (first or self.topic_config_changed(broker_addr, data_version))
        ):
            for config in topic_configs.values():
                self._update_queue_data(broker_name, config)
        self.live[broker_addr] = BrokerLive(now_s, data_version, channel, ha_server_addr)
        if filter_servers:
            self.filter_servers[broker_addr] = list(filter_servers)
        else:
            self.filter_servers.pop(broker_addr, None)
        if broker_id != MASTER_ID:
            master = broker.broker_addrs.get(MASTER_ID)
            if master is not None:
                master_live = self.live.get(master)
                return RegisterResult(master_live.ha_server_addr if master_live else None, master)
        return RegisterResult()

    def _update_queue_data(self, broker_name: str, config: dict[str, Any]) -> None:
        queue = QueueData(
            broker_name,
            int(config.get("readQueueNums", 0)),
            int(config.get("writeQueueNums", 0)),
            int(config.get("perm", 6)),
            int(config.get("topicSysFlag", 0)),
        )
        self.topic_queues.setdefault(str(config["topicName"]), {})[broker_name] = queue

    def topic_config_changed(self, broker_addr: str, data_version: dict[str, Any]) -> bool:
        live = self.live.get(broker_addr)
        return live is None or live.data_version != data_version

    def touch(self, broker_addr: str, now_s: float) -> None:
        live = self.live.get(broker_addr)
        if live is not None:
            live.last_update_s = now_s

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        broker = self.brokers.get(broker_name)
        if broker is not None and broker.broker_addrs.get(broker_id) == broker_addr:
            del broker.broker_addrs[broker_id]
        if broker is not None and not broker.broker_addrs:
            self._forget_broker_name(broker_name, cluster)

    def _forget_broker_name(self, broker_name: str, cluster: str | None = None) -> None:
        broker = self.brokers.pop(broker_name, None)
        clusters = [cluster] if cluster else list(self.clusters)
        if broker is not None and not cluster:
            clusters = [broker.cluster]
        for name in clusters:
            names = self.clusters.get(name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.clusters[name]
        for topic in list(self.topic_queues):
            queues = self.topic_queues[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queues[topic]

    def channel_closed(self, channel: object) -> list[str]:
        """A broker's connection closed: forget it at once (onChannelDestroy). Its addresses."""
        gone = [addr for addr, live in self.live.items() if live.channel is channel]
        for addr in gone:
            self._remove_address(addr)
        return gone

    def expire(self, now_s: float) -> list[str]:
        """Drop brokers silent for BROKER_EXPIRED_S (scanNotActiveBroker); their addresses."""
        stale = [
            a for a, live in self.live.items() if now_s - live.last_update_s > BROKER_EXPIRED_S
        ]
        for addr in stale:
            self._remove_address(addr)
        return stale

    def _remove_address(self, broker_addr: str) -> None:
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        for name, broker in list(self.brokers.items()):
            for broker_id, addr in list(broker.broker_addrs.items()):
                if addr == broker_addr:
                    del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                self._forget_broker_name(name, broker.cluster)

    # -- queries ---------------------------------------------------------------------------------
    def topic_route(self, topic: str) -> dict[str, Any] | None:
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        broker_datas = []
        filter_table: dict[str, list[str]] = {}
        for name in queues:
            broker = self.brokers.get(name)
            if broker is None:
                continue
            broker_datas.append(broker.to_json())
            for addr in broker.broker_addrs.values():
                if addr in self.filter_servers:
                    filter_table[addr] = self.filter_servers[addr]
        if not broker_datas:
            return None
        return {
            "brokerDatas": broker_datas,
            "filterServerTable": filter_table,
            "queueDatas": [q.to_json() for q in queues.values()],
        }

    def cluster_info(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: b.to_json() for name, b in self.brokers.items()},
            "clusterAddrTable": {c: sorted(names) for c, names in self.clusters.items()},
        }

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster, set())
        return sorted(t for t, queues in self.topic_queues.items() if names & set(queues))

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (RocketMQ treats them as topics) and one broker address."""
        topics = sorted({*self.clusters, *(n for names in self.clusters.values() for n in names)})
        addr = next((a for b in self.brokers.values() for a in b.broker_addrs.values()), None)
        return topics, addr

    def delete_topic(self, topic: str) -> None:
        self.topic_queues.pop(topic, None)

    def change_write_perm(self, broker_name: str, *, allow: bool) -> int:
        """wipeWritePermOfBroker / addWritePermOfBroker: how many topics changed."""
        changed = 0
        for queues in self.topic_queues.values():
            queue = queues.get(broker_name)
            if queue is not None:
                queue.perm = queue.perm | PERM_WRITE if allow else queue.perm & ~PERM_WRITE
                changed += 1
        return changed
