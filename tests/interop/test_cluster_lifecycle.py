"""The bench's cluster targets: start on free ports, crash and recover, stop by pid."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from interop.cache import REPO_ROOT
from interop.mqadmin import create_topic, mqadmin
from interop.processes import StartupError, can_connect
from interop.target import ClusterTarget, create_target, running_target
from sidewinder.common.properties import read_properties
from tests.helpers import unique
from tests.interop.scenarios import assert_received_all, consume, produce

pytestmark = pytest.mark.interop


def test_kill_9_then_restart_keeps_acknowledged_sync_flush_messages(
    make_target: Callable[..., ClusterTarget],
) -> None:
    cluster = make_target(flushDiskType="SYNC_FLUSH")
    topic = unique("CrashTopic")
    create_topic(cluster.namesrv_addr, topic)
    sent = produce(cluster, "java", topic, 100, group=unique("PG"))
    assert (cluster.store_path / "abort").exists(), "a running store keeps its abort file"
    cluster.kill_broker()
    assert not can_connect("127.0.0.1", int(cluster.broker_addr.rsplit(":", 1)[1]))
    cluster.start_broker()
    run = consume(cluster, "java", topic, 100, group=unique("CG"))
    assert_received_all(run, sent, topic=topic)


def test_graceful_stop_removes_abort_and_frees_ports(
    make_target: Callable[..., ClusterTarget],
) -> None:
    cluster = make_target()
    port = int(cluster.broker_addr.rsplit(":", 1)[1])
    commitlog = cluster.store_path / "commitlog"
    assert commitlog.is_dir()
    cluster.stop()
    assert not (cluster.store_path / "abort").exists()
    assert (cluster.store_path / "checkpoint").exists()
    assert not can_connect("127.0.0.1", port)


def test_startup_failure_shows_the_jvm_log_tail(target_kind: str, tmp_path: Path) -> None:
    # A broker port already taken makes the broker exit; the error must carry its log's reason.
    with socket.create_server(("0.0.0.0", 0)) as taken:
        port = taken.getsockname()[1]
        cluster = create_target(target_kind, tmp_path, {"listenPort": port})
        try:
            with pytest.raises(StartupError) as excinfo:
                cluster.start()
        finally:
            cluster.stop()  # whatever start did, nothing it started outlives the test
    message = str(excinfo.value)
    assert "broker" in message
    assert "Address already in use" in message, message


def test_the_shipped_broker_conf_starts_a_broker(target_kind: str, tmp_path: Path) -> None:
    conf = read_properties(REPO_ROOT / "conf" / "broker.conf")
    assert conf["brokerName"] == "broker-a"
    with running_target(target_kind, tmp_path, conf, discard=True) as cluster:
        # Right after start a 4.9 broker cannot report runtime stats yet (mqadmin prints the
        # row, then the broker's NoSuchElementException); the row is what this test is about.
        clusters = mqadmin(cluster.namesrv_addr, "clusterList", check=False).stdout
        assert re.search(
            r"DefaultCluster\s+broker-a\s+0\s+" + re.escape(cluster.broker_addr), clusters
        ), clusters
