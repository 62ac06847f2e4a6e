"""Found by Spark's data source lookup (a top-level `pyspark_*` module with a `DefaultSource`):
`spark.read.format("rocketmq-commitlog")` works without `spark.dataSource.register`."""

from sidewinder.spark.commitlog_source import CommitLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
