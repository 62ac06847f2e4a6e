"""conf/2m-2s-sync: RocketMQ's two-group set (broker-a and broker-b, each a SYNC_MASTER and a
SLAVE, ASYNC_FLUSH) with two name servers, laid out to run on one machine. Each file loads with
our config loaders, knows every key it sets, and no two processes need the same port or store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewinder.broker.__main__ import load_config as load_broker_config
from sidewinder.broker.config import BrokerConfig
from sidewinder.common.properties import read_properties
from sidewinder.dev_cluster import ClusterError, find_conf_set, plan
from sidewinder.namesrv.__main__ import load_config as load_namesrv_config
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.store.config import BrokerRole, FlushDiskType

CONF_SET = Path(__file__).resolve().parents[1] / "conf" / "2m-2s-sync"
BROKERS = {
    # file stem: (brokerName, brokerId, brokerRole)
    "broker-a": ("broker-a", 0, BrokerRole.SYNC_MASTER),
    "broker-a-s": ("broker-a", 1, BrokerRole.SLAVE),
    "broker-b": ("broker-b", 0, BrokerRole.SYNC_MASTER),
    "broker-b-s": ("broker-b", 1, BrokerRole.SLAVE),
}
NAMESRVS = ("namesrv-1", "namesrv-2")


def test_the_set_is_four_brokers_and_two_name_servers() -> None:
    assert {p.stem for p in CONF_SET.glob("*.conf")} == set(BROKERS) | set(NAMESRVS)


@pytest.mark.parametrize("stem", sorted(BROKERS))
def test_each_broker_file_loads_with_known_keys_and_its_identity(stem: str) -> None:
    path = CONF_SET / f"{stem}.conf"
    assert set(read_properties(path)) <= BrokerConfig.conf_keys()
    config = load_broker_config(path, None)
    name, broker_id, role = BROKERS[stem]
    assert (config.broker_name, config.broker_id, config.store.broker_role) == (
        name,
        broker_id,
        role,
    )
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.store.flush_disk_type is FlushDiskType.ASYNC_FLUSH  # as RocketMQ's set
    # Its own store: the CommitLog inside its root, the root named after the file.
    assert config.store.store_path_root_dir == Path("store") / stem
    assert config.store.store_path_commit_log == Path("store") / stem / "commitlog"


def test_every_broker_registers_with_both_name_servers() -> None:
    namesrvs = [
        f"127.0.0.1:{load_namesrv_config(CONF_SET / f'{n}.conf').server.listen_port}"
        for n in NAMESRVS
    ]
    for stem in BROKERS:
        assert load_broker_config(CONF_SET / f"{stem}.conf", None).namesrv_addrs == namesrvs


@pytest.mark.parametrize("stem", NAMESRVS)
def test_each_name_server_file_loads_with_known_keys_and_files_of_its_own(stem: str) -> None:
    path = CONF_SET / f"{stem}.conf"
    assert set(read_properties(path)) <= NamesrvConfig.conf_keys()
    config = load_namesrv_config(path)
    assert config.kv_config_path.parent == Path("store") / stem
    assert config.config_store_path.parent == Path("store") / stem


def test_no_two_processes_need_the_same_port() -> None:
    """A broker takes listenPort, listenPort-2 (the VIP channel) and listenPort+1 (HA)."""
    taken: dict[int, str] = {}
    for stem in NAMESRVS:
        port = load_namesrv_config(CONF_SET / f"{stem}.conf").server.listen_port
        taken[port] = stem
    for stem in BROKERS:
        config = load_broker_config(CONF_SET / f"{stem}.conf", None)
        port = config.server.listen_port
        assert config.ha_port == port + 1
        for used in (port - 2, port, port + 1):
            assert used not in taken, f"{stem} and {taken[used]} both need {used}"
            taken[used] = stem
    assert len(taken) == len(NAMESRVS) + 3 * len(BROKERS)


def test_a_slave_and_its_master_agree_on_what_the_slave_copies() -> None:
    """The slave writes at its master's offsets: same group, same cluster, same segment size."""
    for group in ("broker-a", "broker-b"):
        master = load_broker_config(CONF_SET / f"{group}.conf", None)
        slave = load_broker_config(CONF_SET / f"{group}-s.conf", None)
        assert slave.broker_name == master.broker_name
        assert slave.broker_cluster_name == master.broker_cluster_name
        assert slave.store.mapped_file_size_commit_log == master.store.mapped_file_size_commit_log


def test_sidewinder_dev_plans_the_set_under_one_store(tmp_path: Path) -> None:
    assert find_conf_set("2m-2s-sync", cwd=tmp_path) == CONF_SET
    members = plan(CONF_SET, tmp_path / "store", metrics_port=5557)
    assert [m.name for m in members] == [
        *NAMESRVS,
        "broker-a",
        "broker-b",
        "broker-a-s",
        "broker-b-s",
    ]
    for member in members[2:]:
        assert member.values["storePathRootDir"] == str(tmp_path / "store" / member.name)
        assert member.values["namesrvAddr"] == "127.0.0.1:9876;127.0.0.1:9877"
    ports = [int(m.values["metricsPromExporterPort"]) for m in members]
    assert sorted(ports) == list(range(5557, 5557 + 6))


def test_sidewinder_dev_refuses_a_set_whose_ports_collide(tmp_path: Path) -> None:
    clash = tmp_path / "clash"
    clash.mkdir()
    for p in CONF_SET.glob("*.conf"):
        text = p.read_text()
        if p.stem == "broker-b":
            text = text.replace("listenPort = 10921", "listenPort = 10912")
        (clash / p.name).write_text(text)
    with pytest.raises(ClusterError, match="port 1091"):
        plan(clash, tmp_path / "store", metrics_port=None)
