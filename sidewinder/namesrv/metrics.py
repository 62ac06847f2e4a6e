"""The name server's /metrics: its request latency (rocketmq_rpc_latency), the topics it routes
and the brokers registered with it, read from the route table at scrape time.

    registry = NamesrvMetrics(config, routes, rpc).registry()
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from sidewinder.common.metrics_server import parse_metrics_label
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.namesrv.route_table import RouteTable
from sidewinder.remoting.latency import RpcLatency, rpc_latency_metric


class NamesrvMetrics(Collector):
    def __init__(self, config: NamesrvConfig, routes: RouteTable, rpc: RpcLatency) -> None:
        self.routes = routes
        self.rpc = rpc
        self.base = {
            **parse_metrics_label(config.metrics_label),
            "node_type": "nameserver",
            "node_id": f"namesrv:{config.server.listen_port}",
        }

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        topics = GaugeMetricFamily("rocketmq_topic_number", "Topics routed", labels=list(self.base))
        topics.add_metric(list(self.base.values()), len(self.routes.topic_queues))
        yield topics
        brokers = GaugeMetricFamily(
            "sidewinder_namesrv_brokers",
            "Broker addresses registered, by cluster and broker name",
            labels=[*self.base, "cluster", "broker_name"],
        )
        for name, data in self.routes.brokers.items():
            live = sum(addr in self.routes.live for addr in data.broker_addrs.values())
            brokers.add_metric([*self.base.values(), data.cluster, name], live)
        yield brokers
        yield rpc_latency_metric(self.rpc, self.base)
