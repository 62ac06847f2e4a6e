"""broker.conf: RocketMQ 4.x's BrokerConfig keys, plus the store's and the server's sections.

One flat file, as RocketMQ reads it; each section takes the keys it owns. Defaults follow
RocketMQ 4.9's BrokerConfig where the key exists there.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sidewinder.common.config import ConfigError, camel, from_properties
from sidewinder.common.metrics_server import DEFAULT_PORT, MetricsExporterType
from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.tls import TLS_KEYS, TlsConfig
from sidewinder.store.config import BrokerRole, StoreConfig

__all__ = [
    "RESTART_KEYS",
    "BrokerConfig",
    "ConfigError",
    "apply_update",
    "black_listed",
]

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1
# Sections with keys of their own (the TLS keys are RocketMQ's system properties, read once).
SECTIONS = ("store", "server", "tls")


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class BrokerConfig(BaseModel):
    # Not frozen: updateBrokerConfig sets live keys on the one instance every part reads.
    model_config = ConfigDict(
        alias_generator=camel, populate_by_name=True, validate_assignment=True, extra="ignore"
    )

    rocketmq_home: str = ""
    namesrv_addr: str | None = None
    broker_ip1: str = Field(default_factory=_local_ip, alias="brokerIP1")
    broker_ip2: str | None = Field(None, alias="brokerIP2")
    broker_name: str = Field(default_factory=socket.gethostname)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = Field(0, ge=0)
    broker_permission: int = Field(PERM_READ | PERM_WRITE, ge=0, le=15)
    default_topic_queue_nums: int = Field(8, gt=0)
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    trace_topic_enable: bool = False
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    store_reply_message_enable: bool = True
    flush_consumer_offset_interval: int = Field(5000, gt=0)
    register_name_server_period: int = Field(30_000, gt=0)
    register_broker_timeout_mills: int = Field(6000, gt=0)
    long_polling_enable: bool = True
    short_polling_time_mills: int = Field(1000, ge=0)
    notify_consumer_ids_changed_enable: bool = True
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = Field(200, ge=0)
    wait_time_mills_in_pull_queue: int = Field(5000, ge=0)
    wait_time_mills_in_heartbeat_queue: int = Field(31_000, ge=0)
    wait_time_mills_in_transaction_queue: int = Field(3000, ge=0)
    send_thread_pool_queue_capacity: int = Field(10_000, gt=0)
    pull_thread_pool_queue_capacity: int = Field(100_000, gt=0)
    query_thread_pool_queue_capacity: int = Field(20_000, gt=0)
    client_manager_thread_pool_queue_capacity: int = Field(1_000_000, gt=0)
    heartbeat_thread_pool_queue_capacity: int = Field(50_000, gt=0)
    enable_property_filter: bool = False
    compressed_register: bool = False
    force_register: bool = True
    channel_not_active_interval: int = Field(60_000, ge=0)
    max_delay_time: int = 40
    reject_transaction_message: bool = False
    transaction_time_out: int = Field(6000, ge=0)
    transaction_check_max: int = Field(15, ge=0)
    transaction_check_interval: int = Field(60_000, gt=0)
    slave_read_enable: bool = False
    # ACL 1.0: every request checked against plain_acl.yml under the RocketMQ home (acl/).
    acl_enable: bool = False
    # RocketMQ 5's metadata and load-balancing keys (its BrokerConfig).
    enable_mixed_message_type: bool = False
    lite_pull_message_enable: bool = True
    recall_message_enable: bool = False
    # RocketMQ 5's gRPC front in this process (its proxy's local mode, off unless a port is
    # set; RocketMQ's proxy default is 8081). It finds routes through namesrvAddr.
    grpc_server_port: int | None = Field(None, ge=0, le=65535)
    allow_recall_when_broker_not_writeable: bool = True
    server_load_balancer_enable: bool = True
    default_message_request_mode: Literal["PULL", "POP"] = "PULL"
    default_pop_share_queue_num: int = -1
    # RocketMQ 5's timer message keys (its MessageStoreConfig; here, as 4.9.7's store has none).
    timer_wheel_enable: bool = True
    timer_max_delay_sec: int = Field(3 * 86_400, gt=0)
    timer_precision_ms: int = Field(1000, gt=0)
    timer_roll_window_slot: int = Field(2 * 86_400, gt=0)
    timer_flush_interval_ms: int = Field(1000, gt=0)
    mapped_file_size_timer_log: int = Field(100 << 20, gt=0)
    # RocketMQ 5's POP keys (its BrokerConfig): see sidewinder/broker/pop/.
    revive_queue_num: int = Field(8, gt=0)
    revive_interval: int = Field(1000, gt=0)
    pop_from_retry_probability: int = Field(20, ge=0, le=100)
    enable_retry_topic_v2: bool = False
    retrieve_message_from_pop_retry_topic_v1: bool = True
    max_pop_polling_size: int = Field(100_000, ge=0)
    pop_polling_size: int = Field(1024, ge=0)
    # Ours: an un-acked message that has been delivered retryMaxTimes + 1 times goes to the
    # group's DLQ at revive (RocketMQ 5's proxy does it at the next receive; its broker alone
    # retries for ever).
    pop_revive_dlq_enable: bool = True
    # RocketMQ 5's Prometheus exporter keys: /metrics on host:port when the type is PROM
    # (a blank host is brokerIP1, as there).
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    metrics_label: str = ""
    config_black_list: str = "configBlackList;brokerConfigPath"
    # Read by mqadmin's exportConfigs and exportMetrics from GET_BROKER_CONFIG (a key missing
    # there fails exportConfigs); no filter servers, no TLS here.
    filter_server_nums: int = Field(0, ge=0)
    use_tls: bool = Field(False, alias="useTLS")
    client_callback_executor_threads: int = Field(default_factory=lambda: os.cpu_count() or 1)
    store: StoreConfig = Field(default_factory=StoreConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    tls: TlsConfig = Field(default_factory=TlsConfig)

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> BrokerConfig:
        store = StoreConfig.from_properties(values)
        server = from_properties(ServerConfig, values, "broker.conf (server)")
        tls = TlsConfig.load(values)
        own_values = {k: v for k, v in values.items() if k not in SECTIONS}
        own = from_properties(cls, own_values, "broker.conf")
        update: dict[str, Any] = {"store": store, "server": server, "tls": tls}
        if own.broker_id != 0 and store.broker_role is not BrokerRole.SLAVE:
            # As RocketMQ's BrokerStartup: a master is broker 0, whatever brokerId says.
            update["broker_id"] = 0
        return own.model_copy(update=update)

    @classmethod
    def conf_keys(cls) -> set[str]:
        own = {f.alias or n for n, f in cls.model_fields.items() if n not in SECTIONS}
        server = {f.alias or n for n, f in ServerConfig.model_fields.items()}
        return own | server | StoreConfig.conf_keys() | TLS_KEYS

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.server.listen_port}"

    @property
    def ha_port(self) -> int:
        """Where a master listens for slaves: listenPort + 1, as RocketMQ's BrokerStartup sets
        it whatever haListenPort says (listenPort 0, a test's, gives an ephemeral one)."""
        port = self.server.listen_port
        return port + 1 if port else 0

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha_port}"

    @property
    def rocketmq_home_path(self) -> Path | None:
        """rocketmqHome, else $ROCKETMQ_HOME (RocketMQ's default for the key); None if neither."""
        home = self.rocketmq_home or os.environ.get("ROCKETMQ_HOME", "")
        return Path(home) if home else None

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    def as_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for section in (self, self.server, self.store):
            for name, f in type(section).model_fields.items():
                if name in SECTIONS:
                    continue
                value = getattr(section, name)
                text = str(value.value if hasattr(value, "value") else value)
                out[f.alias or name] = text.lower() if text in ("True", "False") else text
        return dict(sorted(out.items()))


# Keys the running broker read once at start: its identity (registered with the name servers),
# its sockets, its store's layout and flush machinery. An update of one is written to the conf
# file and takes effect at the next start; changing it under the running broker would make it
# register an address it does not listen on, or roll segments of another size.
RESTART_KEYS = frozenset(
    {
        "brokerName",
        "brokerClusterName",
        "brokerIP1",
        "brokerIP2",
        "brokerId",
        "namesrvAddr",
        "rocketmqHome",
        "storePathRootDir",
        "storePathCommitLog",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "flushDiskType",
        "brokerRole",
        "transientStorePoolEnable",
        "transientStorePoolSize",
        "messageDelayLevel",
        "messageIndexEnable",
        "maxHashSlotNum",
        "maxIndexNum",
    }
)

# Never updatable at run time whatever configBlackList says (RocketMQ 4.9.8's fixed list).
_ALWAYS_BLACK_LISTED = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


def black_listed(config: BrokerConfig, keys: Iterable[str]) -> list[str]:
    """The keys updateBrokerConfig must refuse (NO_PERMISSION, as RocketMQ 4.9.8)."""
    listed = _ALWAYS_BLACK_LISTED | {k.strip() for k in config.config_black_list.split(";")}
    return sorted(k for k in keys if k in listed)


def apply_update(config: BrokerConfig, values: Mapping[str, str]) -> dict[str, str]:
    """Validate `values` and set the live ones on `config` in place (every part of the broker
    holds this one instance, so a key read per use takes effect at once).

    Returns the known keys, to persist; unknown keys are left out, as RocketMQ's Configuration
    drops keys it has no field for. A bad value raises ConfigError naming the key and changes
    nothing (RocketMQ would ignore it silently and persist it anyway).
    """
    sections: list[BaseModel] = [config, config.store, config.server]
    validated: list[tuple[BaseModel, BaseModel, dict[str, str]]] = []
    for section in sections:
        fields = _fields_by_key(type(section))
        own = {k: v for k, v in values.items() if k in fields}
        if not own:
            continue
        current = section.model_dump(by_alias=True, exclude=set(SECTIONS))
        candidate = from_properties(type(section), {**current, **own}, "updateBrokerConfig")
        validated.append((section, candidate, own))
    known: dict[str, str] = {}
    for section, candidate, own in validated:
        fields = _fields_by_key(type(section))
        for key, value in own.items():
            known[key] = value
            if key in RESTART_KEYS or section is config.server:
                continue
            setattr(section, fields[key], getattr(candidate, fields[key]))
    return known


def _fields_by_key(model: type[BaseModel]) -> dict[str, str]:
    return {f.alias or name: name for name, f in model.model_fields.items() if name not in SECTIONS}
