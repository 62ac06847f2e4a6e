"""A Spark driver in a process of its own (a test process holds one SparkContext only), for
the remote tests: batch read, stream read, batch and stream write through a standalone cluster
(batch read and write through a Spark Connect server). Prints one JSON line of results.

    python tests/spark/remote_driver.py MASTER_OR_SC_URL NAMESRV TOPIC OUT_DIR
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from pyspark.sql import SparkSession


def session(url: str) -> SparkSession:
    if url.startswith("sc://"):
        return SparkSession.builder.remote(url).getOrCreate()
    return (
        SparkSession.builder.master(url)
        .appName("sidewinder-remote-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def main(url: str, namesrv: str, topic: str, out: str) -> None:
    spark = session(url)
    results: dict[str, object] = {}
    try:
        frame = (
            spark.read.format("rocketmq")
            .option("namesrvAddr", namesrv)
            .option("subscribe", topic)
            .load()
        )
        rows = frame.select("keys", "queueId").collect()
        results["batch_keys"] = sorted(r.keys for r in rows)
        results["batch_partitions"] = len({r.queueId for r in rows})

        copy = f"{topic}Copy"
        (
            frame.selectExpr("keys", "body", "tags")
            .write.format("rocketmq")
            .option("namesrvAddr", namesrv)
            .option("topic", copy)
            .mode("append")
            .save()
        )
        copied = (
            spark.read.format("rocketmq").option("namesrvAddr", namesrv).option("subscribe", copy)
        )
        results["written_keys"] = sorted(r.keys for r in copied.load().select("keys").collect())

        if not url.startswith("sc://"):
            query = (
                spark.readStream.format("rocketmq")
                .option("namesrvAddr", namesrv)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "40")
                .load()
                .select("keys", "queueId", "queueOffset")
                .writeStream.format("parquet")
                .option("checkpointLocation", f"{out}/ckpt")
                .trigger(availableNow=True)
                .start(f"{out}/stream")
            )
            query.awaitTermination(180)
            streamed = spark.read.parquet(f"{out}/stream").collect()
            results["stream_key_counts"] = dict(Counter(Counter(r.keys for r in streamed).values()))
            results["stream_keys"] = len({r.keys for r in streamed})
            relay = f"{topic}Relay"
            relayed = (
                spark.readStream.format("rocketmq")
                .option("namesrvAddr", namesrv)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr("keys", "body")
                .writeStream.format("rocketmq")
                .option("namesrvAddr", namesrv)
                .option("topic", relay)
                .option("checkpointLocation", f"{out}/relay-ckpt")
                .trigger(availableNow=True)
                .start()
            )
            relayed.awaitTermination(180)
            back = spark.read.format("rocketmq").option("namesrvAddr", namesrv)
            back = back.option("subscribe", relay).load().select("keys").collect()
            results["stream_written_keys"] = sorted(r.keys for r in back)
            # Which executors ran tasks: the work was spread over the cluster's processes.
            status = spark.sparkContext.statusTracker()
            results["executors"] = len(status.getExecutorInfos()) - 1  # minus the driver
    finally:
        spark.stop()
    print("RESULTS " + json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:5])
