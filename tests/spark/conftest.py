"""One real name server + broker (processes) and one local[2] SparkSession for the whole module
run; topics are created per test. The data sources are not registered by hand: Spark finds them
through the top-level `pyspark_rocketmq*` modules, which these tests rely on."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.producer import Message, SendResult
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.sync import Admin, Producer, PullConsumer
from tests.helpers import unique


def spark_environment() -> None:
    """Set before the JVM starts: loopback only, and the workers run this interpreter (whose
    environment has the package installed)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidewinderCluster]:
    started = SidewinderCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    spark_environment()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sidewinder-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def admin(cluster: SidewinderCluster) -> Iterator[Admin]:
    with Admin(cluster.namesrv_addr) as client:
        yield client


@pytest.fixture(scope="session")
def producer(cluster: SidewinderCluster) -> Iterator[Producer]:
    with Producer("spark-tests", cluster.namesrv_addr) as client:
        yield client


@pytest.fixture
def topic(admin: Admin) -> str:
    """A fresh topic with 4 queues."""
    name = unique("SparkTopic")
    admin.create_topic(name, queues=4)
    return name


TAGS = ("TagA", "TagB", "TagC")


def produce(producer: Producer, topic: str, first: int, count: int) -> list[SendResult]:
    """Messages `first`..`first+count-1`: body `body-n`, tag TAGS[n % 3], key `key-n`, round
    robin over the queues."""
    return [
        producer.send(Message(topic, f"body-{n}".encode(), tags=TAGS[n % 3], keys=[f"key-{n}"]))
        for n in range(first, first + count)
    ]


def pull_all(cluster: SidewinderCluster, topic: str, expected: int, timeout_s: float = 30):
    """Every message of `topic`, pulled from offset 0 of each queue by our own lite consumer
    (not the Spark source), polling until `expected` arrived and one more poll found nothing."""
    consumer = PullConsumer(unique("spark-check"), cluster.namesrv_addr, poll_timeout_s=0.5)
    try:
        queues = consumer.queues(topic)
        consumer.assign(queues)
        consumer.start()
        for queue in queues:
            consumer.seek(queue, 0)
        messages: list[ReceivedMessage] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            polled = consumer.poll()
            messages += polled
            if len(messages) >= expected and not polled:
                break
        return messages
    finally:
        consumer.close()


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (scripts/ is not a package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
