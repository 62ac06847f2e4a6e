"""The name server process: route table + KV config behind a remoting server (wiring only)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from sidewinder.common.metrics_server import MetricsExporterType, MetricsServer
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.namesrv.kv_config import KVConfig
from sidewinder.namesrv.metrics import NamesrvMetrics
from sidewinder.namesrv.processors import (
    BrokerRegistry,
    KVProcessor,
    NamesrvConfigProcessor,
    RouteQueries,
)
from sidewinder.namesrv.route_table import RouteTable
from sidewinder.protocol.codes import RequestCode as R
from sidewinder.remoting.connection import Connection
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.latency import RpcLatency, Timed
from sidewinder.remoting.server import RemotingServer
from sidewinder.remoting.tls import ServerTls

log = structlog.get_logger(__name__)

SCAN_INTERVAL_S = 10.0


class _BrokerChannels:
    """Connection events: a broker whose connection closes leaves the routes at once."""

    def __init__(self, routes: RouteTable) -> None:
        self.routes = routes

    def on_connect(self, connection: Connection) -> None:
        pass

    def on_close(self, connection: Connection) -> None:
        for addr in self.routes.channel_closed(connection):
            log.info("namesrv.broker_gone", broker=addr, reason="connection closed")

    def on_idle(self, connection: Connection) -> None:
        pass


def build_routes(config: NamesrvConfig, routes: RouteTable, kv: KVConfig) -> ProcessorTable:
    table = ProcessorTable()
    table.register(
        BrokerRegistry(routes, kv), R.REGISTER_BROKER, R.UNREGISTER_BROKER, R.QUERY_DATA_VERSION
    )
    table.register(
        RouteQueries(routes, kv, config),
        R.GET_ROUTEINFO_BY_TOPIC,
        R.GET_BROKER_CLUSTER_INFO,
        R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        R.GET_TOPICS_BY_CLUSTER,
        R.GET_SYSTEM_TOPIC_LIST_FROM_NS,
        R.DELETE_TOPIC_IN_NAMESRV,
        R.WIPE_WRITE_PERM_OF_BROKER,
        R.ADD_WRITE_PERM_OF_BROKER,
        R.GET_UNIT_TOPIC_LIST,
        R.GET_HAS_UNIT_SUB_TOPIC_LIST,
        R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    )
    table.register(
        KVProcessor(kv),
        R.PUT_KV_CONFIG,
        R.GET_KV_CONFIG,
        R.DELETE_KV_CONFIG,
        R.GET_KVLIST_BY_NAMESPACE,
    )
    table.register(NamesrvConfigProcessor(config), R.UPDATE_NAMESRV_CONFIG, R.GET_NAMESRV_CONFIG)
    return table


class NamesrvApp:
    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.routes = RouteTable()
        self.kv = KVConfig(config.kv_config_path)
        table = build_routes(config, self.routes, self.kv)
        self.metrics: MetricsServer | None = None
        if config.metrics_exporter_type is MetricsExporterType.PROM:
            rpc = RpcLatency()
            table.instrument(lambda processor: Timed(processor, rpc))
            self.metrics = MetricsServer(NamesrvMetrics(config, self.routes, rpc).registry())
        tls = ServerTls(config.tls)
        tls.check()  # certificate files that cannot be read stop the start
        self.server = RemotingServer(
            table, config.server, listener=_BrokerChannels(self.routes), tls=tls
        )
        self._scanner: asyncio.Task[None] | None = None

    async def start(self, host: str = "0.0.0.0") -> int:
        self.kv.load()
        port = await self.server.start(host)
        self._scanner = asyncio.get_running_loop().create_task(self._scan(), name="broker-scan")
        if self.metrics is not None:
            await self.metrics.start(
                self.config.metrics_prom_exporter_host, self.config.metrics_prom_exporter_port
            )
        log.info("namesrv.started", port=port)
        return port

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(SCAN_INTERVAL_S)
            for addr in self.routes.expire(time.monotonic()):
                log.warning("namesrv.broker_gone", broker=addr, reason="silent for 120 s")

    async def stop(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        if self._scanner is not None:
            self._scanner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scanner
        await self.server.stop()
        log.info("namesrv.stopped")
