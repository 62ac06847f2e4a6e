"""A streaming query in a process of its own, to be killed with SIGKILL by a test: reads a
topic 30 rows per micro-batch every 200 ms into Parquet, until it is killed.

    python tests/spark/killable_stream.py NAMESRV TOPIC OUT_DIR CHECKPOINT_DIR
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main(namesrv: str, topic: str, out: str, checkpoint: str) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    query = (
        spark.readStream.format("rocketmq")
        .option("namesrvAddr", namesrv)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30")
        .load()
        .select("queueId", "queueOffset", "keys", "body")
        .writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start(out)
    )
    print("STARTED", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
