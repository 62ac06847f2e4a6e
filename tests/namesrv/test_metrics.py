"""The name server's /metrics: a real name server and broker, scraped over HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path

from interop.ports import lease_port_block
from interop.sidewinder import SidewinderCluster, SidewinderNamesrv
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.metrics_scrape import scrape

DASHBOARD = Path(__file__).parents[2] / "conf/grafana/dashboards/sidewinder.json"
_SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def _dashboard_metrics() -> set[str]:
    """Every metric the dashboard's queries name, as families (no _total, _bucket ...)."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    names = set()
    for name in re.findall(r"\b((?:rocketmq|sidewinder)_[a-z_]+)", " ".join(exprs)):
        for suffix in _SUFFIXES:
            name = name.removesuffix(suffix)
        names.add(name)
    return names


def test_namesrv_metrics_count_requests_and_brokers(tmp_path: Path) -> None:
    port, broker_port = lease_port_block(), lease_port_block()
    cluster = SidewinderCluster(
        tmp_path,
        broker_conf={
            "metricsExporterType": "PROM",
            "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": broker_port,
        },
    )
    # The same name server, with its exporter on.
    cluster.namesrv = SidewinderNamesrv(
        tmp_path / "namesrv",
        conf={
            "listenPort": cluster.namesrv.port,
            "metricsExporterType": "PROM",
            "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": port,
        },
    )
    cluster.start()
    client = SyncRemotingClient()
    try:
        ask = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
        for _ in range(3):
            reply = client.invoke(cluster.namesrv_addr, ask, 5)
            assert reply.code == ResponseCode.TOPIC_NOT_EXIST
        scraped = scrape(port)
        missing = scraped.matching(
            "rocketmq_rpc_latency_count",
            node_type="nameserver",
            request_code="get_routeinfo_by_topic",
            response_code="topic_not_exist",
            result="success",
        )
        assert sum(s.value for s in missing) == 3
        registered = scraped.matching(
            "rocketmq_rpc_latency_count", request_code="register_broker", response_code="success"
        )
        assert sum(s.value for s in registered) >= 1
        assert (
            scraped.value(
                "sidewinder_namesrv_brokers",
                cluster=cluster.cluster_name,
                broker_name=cluster.broker_name,
            )
            == 1
        )
        assert scraped.value("rocketmq_topic_number", node_type="nameserver") >= 1
        # The Grafana dashboard asks only for what the two export.
        exported = scraped.families | scrape(broker_port).families
        assert _dashboard_metrics() - exported == set()
        assert len(_dashboard_metrics()) > 20
    finally:
        client.close()
        cluster.stop()
