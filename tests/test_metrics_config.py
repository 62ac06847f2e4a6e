"""The metrics keys: RocketMQ 5's names, off unless asked for, on in sidewinder-dev."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewinder.broker.config import BrokerConfig, ConfigError
from sidewinder.common.metrics_server import MetricsExporterType
from sidewinder.dev import argument_parser, configs
from sidewinder.namesrv.config import NamesrvConfig


def test_off_by_default_and_rocketmq_defaults() -> None:
    broker, namesrv = BrokerConfig(), NamesrvConfig()
    for config in (broker, namesrv):
        assert config.metrics_exporter_type is MetricsExporterType.DISABLE
        assert config.metrics_prom_exporter_port == 5557
    assert broker.metrics_prom_exporter_host == ""  # brokerIP1, as RocketMQ
    assert {"metricsExporterType", "metricsPromExporterPort", "metricsPromExporterHost"} <= (
        BrokerConfig.conf_keys() & NamesrvConfig.conf_keys()
    )


def test_unserved_exporter_types_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="metricsExporterType='OTLP_GRPC'"):
        BrokerConfig.from_properties({"metricsExporterType": "OTLP_GRPC"})
    with pytest.raises(ConfigError, match="metricsPromExporterPort"):
        NamesrvConfig.from_properties({"metricsPromExporterPort": "70000"})


def test_sidewinder_dev_serves_metrics_unless_told_not_to(tmp_path: Path) -> None:
    namesrv, broker = configs(argument_parser().parse_args(["--store", str(tmp_path)]))
    assert broker.metrics_exporter_type is namesrv.metrics_exporter_type is MetricsExporterType.PROM
    assert (broker.metrics_prom_exporter_port, namesrv.metrics_prom_exporter_port) == (5557, 5558)
    assert broker.metrics_prom_exporter_host == namesrv.metrics_prom_exporter_host == "127.0.0.1"
    off = argument_parser().parse_args(["--store", str(tmp_path), "--no-metrics"])
    namesrv, broker = configs(off)
    assert broker.metrics_exporter_type is namesrv.metrics_exporter_type
    assert broker.metrics_exporter_type is MetricsExporterType.DISABLE
    conf = tmp_path / "broker.conf"
    conf.write_text("metricsExporterType=DISABLE\n")  # a conf's own choice wins
    _, broker = configs(argument_parser().parse_args(["--store", str(tmp_path), "-c", str(conf)]))
    assert broker.metrics_exporter_type is MetricsExporterType.DISABLE
