"""Export one topic's messages of a time range from a store directory to Parquet, partitioned
by date, with Spark and the `rocketmq-commitlog` data source (no broker needed; a live store is
read up to what it has flushed).

    .venv/bin/python scripts/export_commitlog.py --store ./store --topic Orders \\
        --from 2026-01-01T00:00:00 --to 2026-02-01T00:00:00 --out ./orders-parquet

Times are UTC. Output: one `date=YYYY-MM-DD` directory per day of storeTimestamp.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def export(
    spark: SparkSession, store: Path, topic: str, start: datetime, end: datetime, out: Path
) -> int:
    """Messages of `topic` stored in [start, end) to Parquet under `out`; how many it holds."""
    frame: DataFrame = (
        spark.read.format("rocketmq-commitlog")
        .option("path", str(store))
        .option("topic", topic)
        .load()
        .where((F.col("storeTimestamp") >= start) & (F.col("storeTimestamp") < end))
        .withColumn("date", F.to_date(F.col("storeTimestamp")))
    )
    frame.write.mode("append").partitionBy("date").parquet(str(out))
    if not any(out.glob("date=*")):
        return 0  # nothing in the range: Spark wrote no partition to read back
    return spark.read.parquet(str(out)).count()


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="storePathRootDir")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--from", dest="start", type=_utc, required=True, help="ISO time, UTC")
    parser.add_argument("--to", dest="end", type=_utc, required=True, help="ISO time, UTC")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("export-commitlog")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        count = export(spark, args.store, args.topic, args.start, args.end, args.out)
    finally:
        spark.stop()
    print(f"{count} rows of {args.topic} under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
