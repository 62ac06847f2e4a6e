"""The rocketmq data source over TLS: a Sidewinder name server and broker that enforce it (their
certificate chained to a test CA), read and written with `tls=true` and RocketMQ's client keys
verifying the server; without them the query fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from interop.sidewinder import SidewinderCluster
from sidewinder.client.sync import Admin, Producer
from sidewinder.remoting.tls import TlsConfig
from tests.helpers import unique
from tests.spark.conftest import produce
from tests.tls_certs import enforcing, make_certs

pytestmark = pytest.mark.xdist_group(name="spark")


@pytest.fixture(scope="module")
def tls_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SidewinderCluster, dict[str, str], TlsConfig]]:
    workdir = tmp_path_factory.mktemp("spark-tls")
    server, client, ours = enforcing(workdir, make_certs(workdir / "certs"))
    cluster = SidewinderCluster(workdir / "cluster", system_props=server).start()
    options = {"tls": "true", **{k: v for k, v in client.items() if k != "tls.enable"}}
    assert isinstance(ours, TlsConfig)
    try:
        yield cluster, options, ours
    finally:
        cluster.stop()


def test_read_and_write_over_tls(
    spark: SparkSession, tls_cluster: tuple[SidewinderCluster, dict[str, str], TlsConfig]
) -> None:
    cluster, tls_options, ours = tls_cluster
    source, copy = unique("SparkTlsTopic"), unique("SparkTlsCopy")
    with Admin(cluster.namesrv_addr, tls=ours) as admin:
        admin.create_topic(source, queues=2)
        admin.create_topic(copy, queues=2)
    with Producer(unique("spark-tls"), cluster.namesrv_addr, tls=ours) as producer:
        produce(producer, source, 0, 30)

    def read(topic: str, **options: str) -> DataFrame:
        frame = spark.read.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
        return frame.option("subscribe", topic).options(**options).load()

    rows = read(source, **tls_options).select("keys", "body").collect()
    assert sorted(r.body for r in rows) == sorted(f"body-{n}".encode() for n in range(30))
    frame = read(source, **tls_options).selectExpr("keys", "body")
    writer = frame.write.format("rocketmq").option("namesrvAddr", cluster.namesrv_addr)
    writer.option("topic", copy).options(**tls_options).mode("append").save()
    copied = read(copy, **tls_options).select("body").collect()
    assert sorted(r.body for r in copied) == sorted(r.body for r in rows)
    with pytest.raises(PySparkException):
        read(source, pullTimeoutMs="3000").collect()
