"""scripts/bench_spark.py runs end to end on a small load with every figure present (no speed is
asserted), in this process's Spark session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from interop.sidewinder import SidewinderCluster
from tests.spark.conftest import load_script

pytestmark = pytest.mark.xdist_group(name="spark")


def test_short_run_reports_every_scenario(
    spark: SparkSession, cluster: SidewinderCluster, tmp_path: Path
) -> None:
    bench = load_script("bench_spark")
    figures = bench.run(spark, cluster.namesrv_addr, 2000, 256, tmp_path)
    for name in ("fill", "raw_pull", "batch_read", "stream_read", "write"):
        assert figures[f"{name}_rows_s"] > 0
    table = bench.report(figures)
    assert "batch read / raw pull" in table and "| write |" in table
