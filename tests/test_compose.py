"""docker-compose.yml, without a Docker engine: the compose-spec schema and yamllint (as the
Dockerfile gets hadolint), and its services, ports and paths checked against the conf files
they mount: the broker's and name server's confs, prometheus.yml, Grafana's provisioning."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidewinder.broker.config import BrokerConfig
from sidewinder.common.metrics_server import MetricsExporterType
from sidewinder.common.properties import read_properties
from sidewinder.namesrv.config import NamesrvConfig

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
YAML_FILES = [
    COMPOSE,
    ROOT / "conf/prometheus.yml",
    *sorted((ROOT / "conf/grafana/provisioning").rglob("*.yml")),
]
YAMLLINT_CONFIG = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"


def _tool(name: str) -> str:
    # Installed beside this interpreter by the dev extra, whether or not its bin is on PATH.
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is missing: it comes with the dev extra (pip install -e '.[dev]')"
    return found


def _run(*command: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_file_passes_the_compose_schema_and_yamllint() -> None:
    _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    _run(_tool("yamllint"), "--strict", "-d", YAMLLINT_CONFIG, *map(str, YAML_FILES))


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = _load(COMPOSE)
    found = compose["services"]
    assert {"namesrv", "broker", "prometheus", "grafana"} <= found.keys()
    return dict(found)


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> source (a repository path for binds, a volume name otherwise)."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        out[target] = source
    return out


def _bound(service: dict[str, Any], target: str) -> Path:
    source = _mounts(service)[target]
    assert source.startswith("./"), f"{target} should be a file of the repository: {source}"
    path = ROOT / source
    assert path.exists(), f"{source} is mounted at {target} but does not exist"
    return path


def _published(service: dict[str, Any]) -> set[int]:
    """Container ports published on the same host port."""
    out = set()
    for mapping in service.get("ports", []):
        host, _, container = str(mapping).rpartition(":")
        assert host == container, f"{mapping}: RocketMQ clients are told the container's port"
        out.add(int(container))
    return out


def _conf_of(service: dict[str, Any]) -> Path:
    command = service["command"]
    return _bound(service, command[command.index("-c") + 1])


def test_servers_listen_where_compose_publishes_and_prometheus_scrapes(
    services: dict[str, Any],
) -> None:
    namesrv = NamesrvConfig.from_properties(read_properties(_conf_of(services["namesrv"])))
    broker_values = read_properties(_conf_of(services["broker"]))
    broker = BrokerConfig.from_properties(broker_values)
    assert services["namesrv"]["command"][0] == "mqnamesrv"
    assert services["broker"]["command"][0] == "mqbroker"
    assert namesrv.server.listen_port in _published(services["namesrv"])
    ports = _published(services["broker"])
    assert {broker.server.listen_port, broker.server.listen_port - 2} <= ports
    command = services["broker"]["command"]
    assert command[command.index("-n") + 1] == f"namesrv:{namesrv.server.listen_port}"
    # Both export to Prometheus, reachable from its container, on the ports it scrapes.
    targets = {}
    for config, name in ((namesrv, "namesrv"), (broker, "broker")):
        assert config.metrics_exporter_type is MetricsExporterType.PROM, name
        assert config.metrics_prom_exporter_host == "0.0.0.0", name
        targets[name] = f"{name}:{config.metrics_prom_exporter_port}"
    prometheus = _load(_bound(services["prometheus"], "/etc/prometheus/prometheus.yml"))
    scraped = {
        target
        for job in prometheus["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert scraped == set(targets.values())
    # The repository's own conf files leave metrics off.
    for conf in ("conf/broker.conf", "conf/namesrv.conf"):
        assert read_properties(ROOT / conf)["metricsExporterType"] == "DISABLE", conf


def test_broker_store_lives_on_the_compose_volume(services: dict[str, Any]) -> None:
    broker = BrokerConfig.from_properties(read_properties(_conf_of(services["broker"])))
    root = str(broker.store.store_path_root_dir)
    assert broker.store.store_path_commit_log.is_relative_to(root)
    volume = _mounts(services["broker"])[root]
    assert volume in _load(COMPOSE)["volumes"], f"{volume} is not a named volume"
    # The image declares the same directory a volume, and builds the stage compose names.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f'VOLUME ["{root}"]' in dockerfile
    build = services["namesrv"]["build"]
    assert f"AS {build['target']}" in dockerfile and build["context"] == "."
    assert services["broker"]["image"] == services["namesrv"]["image"]


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(
    services: dict[str, Any],
) -> None:
    grafana = services["grafana"]
    provisioning = _bound(grafana, "/etc/grafana/provisioning")
    sources = _load(provisioning / "datasources/prometheus.yml")["datasources"]
    prometheus_port = next(iter(_published(services["prometheus"])))
    assert [s["url"] for s in sources] == [f"http://prometheus:{prometheus_port}"]
    (provider,) = _load(provisioning / "dashboards/sidewinder.yml")["providers"]
    dashboards = _bound(grafana, provider["options"]["path"])
    assert dashboards == ROOT / "conf/grafana/dashboards"
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home.parent == Path(provider["options"]["path"])
    dashboard = json.loads((dashboards / home.name).read_text())
    assert dashboard["uid"] and dashboard["panels"]
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
