"""The Spark connector: PySpark data sources (the Python Data Source API, pyspark 4.x).

    spark.read.format("rocketmq").option("namesrvAddr", "127.0.0.1:9876")
         .option("subscribe", "Orders").load()

Installed with the `spark` extra, the sources are found by name without registering them (the
top-level `pyspark_rocketmq*` modules); `register(spark)` does it by hand where that lookup is off.
"""

from __future__ import annotations

from typing import Any

from sidewinder.spark.commitlog_source import CommitLogDataSource
from sidewinder.spark.source import RocketMQDataSource

__all__ = ["CommitLogDataSource", "RocketMQDataSource", "register"]


def register(spark: Any) -> None:
    """Register the data sources with a SparkSession (classic or Connect)."""
    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(CommitLogDataSource)
