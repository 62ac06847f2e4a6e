"""The broker's /metrics, end to end: a real broker and name server, our Python client sending
and pulling, the exporter scraped over HTTP and read with prometheus_client's parser."""

from __future__ import annotations

import json
import time
from pathlib import Path

from interop.ports import lease_port_block
from interop.sidewinder import SidewinderCluster
from sidewinder.client.producer import Message
from sidewinder.client.sync import Producer, PullConsumer
from sidewinder.protocol.codes import LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.metrics_scrape import Scraped, scrape

TOPIC = "MetricsOrders"
GROUP = "MetricsBilling"


def _poll(consumer: PullConsumer, count: int) -> int:
    got = 0
    deadline = time.monotonic() + 20
    while got < count and time.monotonic() < deadline:
        got += len(consumer.poll(timeout_s=1.0))
    return got


def _producer_heartbeat(client: SyncRemotingClient, broker_addr: str) -> None:
    """A Java producer's heartbeat; its connection stays a producer's until it closes."""
    body = {"clientID": "10.0.0.9@1", "producerDataSet": [{"groupName": "JavaProducers"}]}
    heartbeat = RemotingCommand.request(
        RequestCode.HEART_BEAT, {}, json.dumps(body).encode(), language=LanguageCode.JAVA
    )
    assert client.invoke(broker_addr, heartbeat, 5).code == ResponseCode.SUCCESS


def _metrics_cluster(tmp_path: Path, **conf: str) -> tuple[int, SidewinderCluster]:
    """A started cluster whose broker serves /metrics on the port returned."""
    port = lease_port_block()
    broker_conf: dict[str, str | int] = {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": port,
        **conf,
    }
    return port, SidewinderCluster(tmp_path, broker_conf=broker_conf).start()


def _one(scraped: Scraped, name: str, **labels: str) -> float:
    """The value of the one sample of `name` with `labels`: it must be there (Scraped.value
    reads a missing metric as 0)."""
    found = scraped.matching(name, **labels)
    assert len(found) == 1, (name, labels, found)
    return found[0].value


def _until(port: int, check: str, want: float, **labels: str) -> Scraped:
    """Scrape until `check` reaches `want` (offsets commit and heartbeats land asynchronously)."""
    deadline = time.monotonic() + 10
    while True:
        scraped = scrape(port)
        if scraped.value(check, **labels) == want or time.monotonic() > deadline:
            return scraped
        time.sleep(0.2)


def test_broker_metrics_follow_sends_pulls_and_commits(tmp_path: Path) -> None:
    started_ms = time.time() * 1000
    # ASYNC_FLUSH flushes on its timer once anything is dirty, not from 4 dirty pages on (the
    # test writes less), so the CommitLog flush rounds below count the sends' flushes.
    port, cluster = _metrics_cluster(
        tmp_path, metricsLabel="env:test", flushCommitLogLeastPages="0"
    )
    mine = {"cluster": cluster.cluster_name, "node_type": "broker", "env": "test"}
    try:
        with Producer("MetricsProducers", cluster.namesrv_addr) as producer:
            for n in range(5):
                producer.send(Message(TOPIC, b"x" * 100, keys=[f"k{n}"]))
            producer.send_batch([Message(TOPIC, b"y" * 200) for _ in range(3)])
            scraped = scrape(port)
            topic = {**mine, "topic": TOPIC, "message_type": "normal", "is_system": "false"}
            assert scraped.value("rocketmq_messages_in_total", **topic) == 8
            size = scraped.value("rocketmq_throughput_in_total", **topic)
            assert 5 * 100 + 3 * 200 < size < 8 * 400
            assert scraped.value("rocketmq_message_size_count", **topic) == 8
            assert scraped.value("rocketmq_message_size_sum", **topic) == size
            assert scraped.value("rocketmq_message_size_bucket", le="1024.0", **topic) == 8
            # Our Python producer's heartbeats, and a Java one's, counted by language.
            java = SyncRemotingClient()
            _producer_heartbeat(java, cluster.broker_addr)
            scraped = scrape(port)
            assert scraped.value("rocketmq_producer_connections", language="java") == 1
            assert scraped.value("rocketmq_producer_connections", language="python") == 1
            java.close()

            consumer = PullConsumer(GROUP, cluster.namesrv_addr, auto_commit_interval_s=None)
            try:
                consumer.subscribe(TOPIC)
                assert _poll(consumer, 8) == 8
                out = {**mine, "topic": TOPIC, "consumer_group": GROUP, "is_system": "false"}
                scraped = scrape(port)
                assert scraped.value("rocketmq_messages_out_total", **out) == 8
                # The very records stored go out: bytes out equal bytes in.
                assert scraped.value("rocketmq_throughput_out_total", **out) == size
                consumer.commit()
                unconsumed_since_ms = time.time() * 1000
                for _ in range(4):
                    producer.send(Message(TOPIC, b"z" * 50))
                progress = {**out, "is_retry": "false"}
                scraped = _until(port, "rocketmq_consumer_ready_messages", 4, **progress)
                waited_ms = time.time() * 1000 - unconsumed_since_ms
                assert scraped.value("rocketmq_consumer_lag_messages", **progress) == 4
                assert scraped.value("rocketmq_consumer_ready_messages", **progress) == 4
                assert scraped.value("rocketmq_consumer_inflight_messages", **progress) == 0
                # The age of the first of the four, not of the eight consumed before them.
                assert 0 <= _one(scraped, "rocketmq_consumer_lag_latency", **progress) <= waited_ms
                assert _poll(consumer, 4) == 4
                scraped = scrape(port)  # pulled, not committed: in flight
                assert scraped.value("rocketmq_consumer_inflight_messages", **progress) == 4
                assert scraped.value("rocketmq_consumer_ready_messages", **progress) == 0
                assert scraped.value("rocketmq_consumer_lag_messages", **progress) == 4
                assert scraped.value("rocketmq_consumer_lag_latency", **progress) > 0
                consumer.commit()
                scraped = _until(port, "rocketmq_consumer_lag_messages", 0, **progress)
                assert scraped.value("rocketmq_consumer_inflight_messages", **progress) == 0
                assert scraped.value("rocketmq_messages_out_total", **out) == 12
                assert (
                    scraped.value(
                        "rocketmq_consumer_connections", consumer_group=GROUP, consume_mode="pull"
                    )
                    == 1
                )
            finally:
                consumer.close()

        # Requests through the processor table, by RocketMQ's code names.
        heartbeats = scraped.matching(
            "rocketmq_rpc_latency_count", request_code="heart_beat", response_code="success"
        )
        assert heartbeats and all(s.labels["protocol_type"] == "remoting" for s in heartbeats)
        pulls = scraped.matching("rocketmq_rpc_latency_count", request_code="pull_message")
        assert sum(s.value for s in pulls) >= 2
        assert {s.labels["is_long_polling"] for s in pulls} <= {"true", "false"}
        assert scraped.value("rocketmq_rpc_latency_bucket", request_code="pull_message", le="+Inf")
        assert scraped.value("rocketmq_topic_number", **mine) >= 1
        assert scraped.value("rocketmq_consumer_group_number", **mine) >= 1
        assert scraped.value("rocketmq_processor_watermark", processor="send") == 0
        storage = {"storage_type": "local", "storage_medium": "disk"}
        assert scraped.value("rocketmq_storage_size", **storage) > 0
        assert scraped.matching("rocketmq_storage_flush_behind_bytes", **storage)
        # Every message was pulled, so dispatched; nothing was written since.
        assert _one(scraped, "rocketmq_storage_dispatch_behind_bytes", **storage) == 0
        # The oldest message is the test's first: younger than the test, older than 0 ms.
        oldest_age_ms = _one(scraped, "rocketmq_storage_message_reserve_time", **storage)
        assert 0 < oldest_age_ms <= time.time() * 1000 - started_ms
        assert scraped.matching("sidewinder_store_recovery_seconds", abnormal="false")
        # The flush timer (flushIntervalCommitLog, 500 ms) flushes the sends soon after they
        # are written: within a few of its rounds.
        deadline = time.monotonic() + 5
        flushes = _one(scraped, "sidewinder_store_flush_latency_seconds_count", flush="commitlog")
        while flushes == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            flushes = _one(
                scrape(port), "sidewinder_store_flush_latency_seconds_count", flush="commitlog"
            )
        assert flushes > 0, _one(scrape(port), "rocketmq_storage_flush_behind_bytes", **storage)
        for sample in scraped.samples:  # every metric carries the broker's identity
            assert sample.labels["node_id"] == cluster.broker_name, sample
            assert sample.labels["env"] == "test", sample
    finally:
        cluster.stop()


def test_group_commit_rounds_are_counted_under_sync_flush(tmp_path: Path) -> None:
    port, cluster = _metrics_cluster(tmp_path, flushDiskType="SYNC_FLUSH")
    try:
        before = scrape(port)
        with Producer("MetricsProducers", cluster.namesrv_addr) as producer:
            for _ in range(3):
                producer.send(Message("MetricsSync", b"d" * 64))
        after = scrape(port)
        rounds = "sidewinder_group_commit_waiters_count"
        assert after.value(rounds) >= before.value(rounds) + 1
        # Each acknowledged send waited in some round: at least three released in all.
        released = "sidewinder_group_commit_waiters_sum"
        assert after.value(released) >= before.value(released) + 3
        assert after.value("sidewinder_group_commit_bytes_sum") > before.value(
            "sidewinder_group_commit_bytes_sum"
        )
        assert after.value(
            "sidewinder_store_flush_latency_seconds_count", flush="commitlog"
        ) >= after.value(rounds)
        # The lane's sends that wait for the flush are timed when it is done.
        _lane_sends_are_timed(port, cluster.namesrv_addr, "MetricsSyncLane")
    finally:
        cluster.stop()


def _rpc_count(
    scraped: Scraped, code: str, response: str = "success", result: str = "success"
) -> float:
    return scraped.value(
        "rocketmq_rpc_latency_count", request_code=code, response_code=response, result=result
    )


def _lane_sends_are_timed(port: int, namesrv_addr: str, topic: str) -> None:
    """Sends to a topic that exists take the send lane (the native frame lane when the
    extension is there, else its decoded batch path), which skips the timed `process`: each is
    in rocketmq_rpc_latency all the same, by its own request code, oneway ones as such."""
    with Producer("MetricsLaneProducers", namesrv_addr) as producer:
        producer.send(Message(topic, b"first"))  # creates the topic: through `process`
        before = scrape(port)
        for _ in range(10):
            producer.send(Message(topic, b"x" * 64))
        producer.send_batch([Message(topic, b"y" * 64) for _ in range(3)])
        producer.send_oneway(Message(topic, b"o"))
        oneway = _rpc_count(before, "send_message_v2", "", "oneway") + 1
        after = _until(port, "rocketmq_rpc_latency_count", oneway, result="oneway")
    assert _rpc_count(after, "send_message_v2") - _rpc_count(before, "send_message_v2") == 10
    batches = _rpc_count(after, "send_batch_message") - _rpc_count(before, "send_batch_message")
    assert batches == 1
    assert _rpc_count(after, "send_message_v2", "", "oneway") == oneway
    inf = after.value("rocketmq_rpc_latency_bucket", request_code="send_message_v2", le="+Inf")
    assert inf == after.value("rocketmq_rpc_latency_count", request_code="send_message_v2")
    assert after.value("rocketmq_rpc_latency_sum", request_code="send_message_v2") > 0


def test_sends_served_by_the_send_lane_are_in_rpc_latency(tmp_path: Path) -> None:
    port, cluster = _metrics_cluster(tmp_path)
    try:
        _lane_sends_are_timed(port, cluster.namesrv_addr, "MetricsLane")
    finally:
        cluster.stop()
