"""Found by Spark's data source lookup (a top-level `pyspark_*` module with a `DefaultSource`):
`spark.read.format("rocketmq")` works without `spark.dataSource.register`."""

from sidewinder.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
