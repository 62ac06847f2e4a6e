"""The connector beyond one process, against a real broker: a Spark standalone master and two
workers (batch read, stream read, batch and stream write), and a Spark Connect server (batch read
and write). Each driver runs in a subprocess: this test process keeps its local SparkContext."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Producer
from tests.spark.conftest import produce
from tests.spark.remote import ConnectServer, StandaloneCluster, spark_env

# One worker runs every Spark test (scripts/test.sh uses xdist): one JVM, not one per worker.
pytestmark = pytest.mark.xdist_group(name="spark")

DRIVER = Path(__file__).with_name("remote_driver.py")


def run_driver(url: str, cluster: SidewinderCluster, topic: str, workdir: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(DRIVER), url, cluster.namesrv_addr, topic, str(workdir / "out")],
        capture_output=True,
        text=True,
        env=spark_env(workdir),
        timeout=420,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULTS "))


def test_standalone_cluster_reads_streams_and_writes(
    cluster: SidewinderCluster, producer: Producer, topic: str, tmp_path: Path
) -> None:
    produce(producer, topic, 0, 120)
    spark_cluster = StandaloneCluster(tmp_path / "standalone").start()
    try:
        results = run_driver(spark_cluster.url, cluster, topic, tmp_path)
    finally:
        spark_cluster.stop()
    keys = sorted(f"key-{n}" for n in range(120))
    assert results["batch_keys"] == keys and results["batch_partitions"] == 4
    assert results["written_keys"] == keys
    assert results["stream_keys"] == 120 and results["stream_key_counts"] == {"1": 120}
    assert results["stream_written_keys"] == keys
    assert results["executors"] == 2


def test_spark_connect_session_reads_and_writes(
    cluster: SidewinderCluster, producer: Producer, topic: str, tmp_path: Path
) -> None:
    produce(producer, topic, 0, 60)
    server = ConnectServer(tmp_path / "connect").start()
    try:
        results = run_driver(server.url, cluster, topic, tmp_path)
    finally:
        server.stop()
    keys = sorted(f"key-{n}" for n in range(60))
    assert results["batch_keys"] == keys and results["written_keys"] == keys
