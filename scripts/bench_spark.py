"""Spark connector benchmark: rows/s of batch read, stream read and write through
`format("rocketmq")`, beside the broker's raw pull rate measured in the same run.

    .venv/bin/python scripts/bench_spark.py [--messages 1000000] [--size 1024] [--json PATH]

Starts our name server and broker (processes, ASYNC_FLUSH, a temp store) and a local[2] Spark
session (UI off). Fills one 8-queue topic with `--messages` bodies of `--size` bytes, then:
- raw pull: our Python client pulling every queue from 0 to its end, all queues at once
  (32 messages a pull, as the broker answers), in this process: the rate to compare with;
- batch read: `spark.read.format("rocketmq")...` into Spark's `noop` sink (every row built);
- stream read: `readStream` with availableNow into the `noop` sink, one micro-batch;
- write: `df.write.format("rocketmq")` of the same number of rows to a new topic (exactly-once
  markers on, hash routing by key).
Target (issue 20): batch read >= 50 % of raw pull. The machine is noisy; ratios are what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from interop.sidewinder import SidewinderCluster
from sidewinder.client.admin import Admin
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import pull, queue_bound
from sidewinder.client.route_cache import MessageQueue
from sidewinder.common.loop_thread import LoopThread
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.subscription import Subscription

QUEUES = 8
BATCH = 64  # messages per SEND_BATCH_MESSAGE while filling


async def fill(namesrv: str, topic: str, messages: int, size: int) -> None:
    admin = Admin(namesrv)
    producer = Producer("bench-spark-fill", namesrv)
    try:
        await admin.create_topic(topic, queues=QUEUES)
        body = b"x" * size
        batches = [
            [Message(topic, body, keys=[f"k{n}"]) for n in range(at, min(at + BATCH, messages))]
            for at in range(0, messages, BATCH)
        ]
        for at in range(0, len(batches), 16):  # 16 batches in flight
            await asyncio.gather(*(producer.send_batch(b) for b in batches[at : at + 16]))
    finally:
        await producer.close()
        await admin.close()


async def raw_pull(namesrv: str, topic: str) -> tuple[int, float]:
    """Every message of every queue, one pull in flight per queue: (messages, seconds)."""
    admin = Admin(namesrv)
    try:
        route = await admin.routes.route(topic, refresh=True)
        assert route is not None
        everything = Subscription.of(topic, "*")

        async def drain(queue: MessageQueue) -> int:
            addr = route.master(queue.broker_name)
            assert addr is not None
            end = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
            offset, count = 0, 0
            while offset < end:
                result = await pull(
                    admin.remoting,
                    addr,
                    "bench-raw",
                    queue,
                    offset,
                    everything,
                    batch=32,
                    suspend_s=None,
                )
                count += len(result.messages)
                offset = result.next_offset
            return count

        started = time.perf_counter()
        counts = await asyncio.gather(*(drain(q) for q in route.read_queues))
        return sum(counts), time.perf_counter() - started
    finally:
        await admin.close()


def spark_session() -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(spark: SparkSession, namesrv: str, messages: int, size: int, workdir: Path) -> dict:
    """Every figure of one run against a running cluster; rows/s per scenario."""
    topic, copy = f"BenchSpark{int(time.time())}", f"BenchSparkCopy{int(time.time())}"
    loop = LoopThread("bench-spark")
    try:
        fill_s = timed(lambda: loop.call(fill(namesrv, topic, messages, size)))
        pulled, pull_s = loop.call(raw_pull(namesrv, topic))
    finally:
        loop.stop()
    assert pulled == messages, (pulled, messages)

    def source() -> Any:
        return (
            spark.read.format("rocketmq").option("namesrvAddr", namesrv).option("subscribe", topic)
        )

    source().load().limit(10).collect()  # warm the Python workers and the data source lookup
    batch_s = timed(lambda: source().load().write.format("noop").mode("overwrite").save())

    def stream() -> None:
        query = (
            spark.readStream.format("rocketmq")
            .option("namesrvAddr", namesrv)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(workdir / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows == messages, (rows, messages)

    stream_s = timed(stream)

    rows = spark.range(messages).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
        F.expr(f"unhex(repeat('78', {size}))").alias("body"),
    )
    write_s = timed(
        lambda: (
            rows.write.format("rocketmq")
            .option("namesrvAddr", namesrv)
            .option("topic", copy)
            .mode("append")
            .save()
        )
    )
    figures = {
        "messages": messages,
        "size": size,
        "fill_rows_s": messages / fill_s,
        "raw_pull_rows_s": messages / pull_s,
        "batch_read_rows_s": messages / batch_s,
        "stream_read_rows_s": messages / stream_s,
        "write_rows_s": messages / write_s,
    }
    figures["batch_read_vs_raw_pull"] = figures["batch_read_rows_s"] / figures["raw_pull_rows_s"]
    return figures


def report(figures: dict) -> str:
    lines = [
        f"{figures['messages']:,} messages of {figures['size']} B, local[2]",
        "| scenario | rows/s |",
        "|---|---|",
    ]
    for name in ("fill", "raw_pull", "batch_read", "stream_read", "write"):
        lines.append(f"| {name.replace('_', ' ')} | {figures[f'{name}_rows_s']:,.0f} |")
    ratio = figures["batch_read_vs_raw_pull"]
    verdict = "met" if ratio >= 0.5 else "NOT met"
    lines.append(f"batch read / raw pull: {ratio:.2f} (target >= 0.50: {verdict})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        workdir = Path(tmp)
        cluster = SidewinderCluster(
            workdir / "cluster", broker_conf={"mappedFileSizeCommitLog": str(256 << 20)}
        ).start()
        spark = spark_session()
        try:
            figures = run(spark, cluster.namesrv_addr, args.messages, args.size, workdir)
        finally:
            spark.stop()
            cluster.stop()
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
