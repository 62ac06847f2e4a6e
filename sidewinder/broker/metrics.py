"""The broker's /metrics: RocketMQ 5.1's broker metrics (names, labels, units), read from the
broker's own tables and the store's counters at scrape time.

    metrics = BrokerMetrics(config, sources)
    registry = metrics.registry()        # for common.metrics_server.MetricsServer

Nothing here runs on the send path: puts are counted by the store per put or per received
chunk (`StoreStats.topics`), pulls by the pull processor per pull (`PullStats`), requests
through `process` by `remoting.latency.Timed` (the send lane's by the lane, per chunk); every
gauge is worked out when scraped (on the event loop, which owns every table read here).

Where ours differ from RocketMQ 5.1's: a delayed or half (transactional) message counts in
rocketmq_messages_in_total under the system topic that holds it until it is due or committed
(SCHEDULE_TOPIC_XXXX with message_type delay, RMQ_SYS_TRANS_HALF_TOPIC with transaction), then
under its own topic; rocketmq_message_size has one observation per message, at the average
size of the put (or received chunk) that stored it; `version` labels carry the client's version
number; the send lane's requests (plain sends served a received chunk at a time) are in
rocketmq_rpc_latency with their chunk's time, from its arrival to its replies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.pull_stats import PullStats
from sidewinder.broker.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TopicTable,
    is_system_topic,
)
from sidewinder.common.histogram import Buckets
from sidewinder.common.metrics_server import parse_metrics_label
from sidewinder.protocol.codes import LanguageCode
from sidewinder.protocol.codes import RequestCode as R
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.latency import RpcLatency, rpc_latency_metric
from sidewinder.store.message_store import MessageStore
from sidewinder.store.stats import partition_usage

# RocketMQ's processor names for rocketmq_processor_watermark, each by a code its pool serves.
PROCESSORS = {
    "send": R.SEND_MESSAGE,
    "pull": R.PULL_MESSAGE,
    "query_message": R.QUERY_MESSAGE,
    "heartbeat": R.HEART_BEAT,
    "transaction": R.END_TRANSACTION,
    "consumer_manager": R.QUERY_CONSUMER_OFFSET,
    "admin": R.UPDATE_AND_CREATE_TOPIC,
}
_STORAGE = {"storage_type": "local", "storage_medium": "disk"}
_CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push"}
_Family = TypeVar("_Family", CounterMetricFamily, GaugeMetricFamily)
_SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"


@dataclass(frozen=True)
class BrokerSources:
    """What the broker's metrics read: the broker's tables, the store, the processor table."""

    store: MessageStore
    topics: TopicTable
    groups: SubscriptionGroups
    clients: Clients
    offsets: ConsumerOffsets
    pulls: PullStats
    table: ProcessorTable
    rpc: RpcLatency


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _is_system_group(group: str) -> bool:
    return group.lower().startswith(_SYSTEM_GROUP_PREFIX)


def _is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def _message_type(topic: str) -> str:
    if topic == SCHEDULE_TOPIC:
        return "delay"
    if topic == TRANS_HALF_TOPIC:
        return "transaction"
    return "normal"


def _language(name: str) -> str:
    return name.lower() if name else LanguageCode.OTHER.name.lower()


def _histogram(
    family: HistogramMetricFamily, labels: list[str], buckets: Buckets
) -> HistogramMetricFamily:
    family.add_metric(labels, buckets=buckets.cumulative(), sum_value=buckets.total)
    return family


class BrokerMetrics(Collector):
    def __init__(self, config: BrokerConfig, sources: BrokerSources) -> None:
        self.config = config
        self.sources = sources
        self.base = {
            **parse_metrics_label(config.metrics_label),
            "cluster": config.broker_cluster_name,
            "node_type": "broker",
            "node_id": config.broker_name,
        }

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        yield from self._traffic_in()
        yield from self._traffic_out()
        yield from _ConsumerProgress(self.base, self.sources).metrics()
        yield from self._connections()
        yield from self._stats()
        yield from self._storage()
        yield from self._flushes()
        yield rpc_latency_metric(self.sources.rpc, self.base)

    def _family(self, kind: type[_Family], name: str, doc: str, *labels: str) -> _Family:
        return kind(name, doc, labels=[*self.base, *labels])

    def _traffic_in(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        labels = [*self.base, "topic", "message_type", "is_system"]
        messages = CounterMetricFamily("rocketmq_messages_in", "Messages put", labels=labels)
        size = CounterMetricFamily("rocketmq_throughput_in", "Bytes put", labels=labels)
        sizes = HistogramMetricFamily("rocketmq_message_size", "Message size", labels=labels)
        for topic, puts in self.sources.store.stats.topics.items():
            if _is_retry_or_dlq(topic):
                continue  # as RocketMQ: retries and dead letters are not incoming messages
            system = _bool(is_system_topic(topic, self.config))
            values = [*self.base.values(), topic, _message_type(topic), system]
            messages.add_metric(values, puts.messages)
            size.add_metric(values, puts.size)
            if puts.sizes is not None:
                _histogram(sizes, values, puts.sizes)
        yield from (messages, size, sizes)

    def _traffic_out(self) -> Iterator[CounterMetricFamily]:
        labels = [*self.base, "topic", "consumer_group", "is_system"]
        messages = CounterMetricFamily("rocketmq_messages_out", "Messages pulled", labels=labels)
        size = CounterMetricFamily("rocketmq_throughput_out", "Bytes pulled", labels=labels)
        for (topic, group), (count, total, _pulls) in self.sources.pulls.out.items():
            if _is_retry_or_dlq(topic):
                continue
            system = is_system_topic(topic, self.config) or _is_system_group(group)
            values = [*self.base.values(), topic, group, _bool(system)]
            messages.add_metric(values, count)
            size.add_metric(values, total)
        yield from (messages, size)

    def _connections(self) -> Iterator[GaugeMetricFamily]:
        clients = self.sources.clients
        producers: dict[tuple[str, str], int] = {}
        for channels in clients.producers.values():
            for channel in channels.values():
                key = (_language(channel.language), str(channel.version))
                producers[key] = producers.get(key, 0) + 1
        family = self._family(
            GaugeMetricFamily,
            "rocketmq_producer_connections",
            "Producer connections",
            "language",
            "version",
            "protocol_type",
        )
        for (language, version), count in producers.items():
            family.add_metric([*self.base.values(), language, version, "remoting"], count)
        yield family
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group in clients.consumers.values():
            mode = _CONSUME_MODES.get(group.consume_type, "push")
            for channel in group.channels.values():
                group_key = (group.name, _language(channel.language), str(channel.version), mode)
                consumers[group_key] = consumers.get(group_key, 0) + 1
        family = self._family(
            GaugeMetricFamily,
            "rocketmq_consumer_connections",
            "Consumer connections",
            "consumer_group",
            "language",
            "version",
            "consume_mode",
            "protocol_type",
            "is_system",
        )
        for (group_name, language, version, mode), count in consumers.items():
            system = _bool(_is_system_group(group_name))
            values = [group_name, language, version, mode, "remoting", system]
            family.add_metric([*self.base.values(), *values], count)
        yield family

    def _gauge(self, name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=[*self.base, *labels])
        family.add_metric([*self.base.values(), *labels.values()], value)
        return family

    def _stats(self) -> Iterator[GaugeMetricFamily]:
        sources = self.sources
        yield self._gauge("rocketmq_topic_number", "Topics", len(sources.topics.topics))
        yield self._gauge("rocketmq_consumer_group_number", "Groups", len(sources.groups.groups))
        yield self._gauge(
            "rocketmq_broker_permission", "Broker permission", self.config.broker_permission
        )
        family = self._family(
            GaugeMetricFamily,
            "rocketmq_processor_watermark",
            "Requests waiting for admission",
            "processor",
        )
        for name, code in PROCESSORS.items():
            family.add_metric([*self.base.values(), name], sources.table.queued(code))
        yield family

    def _storage(self) -> Iterator[GaugeMetricFamily]:
        store = self.sources.store
        try:
            used, _ = partition_usage(Path(store.config.store_path_root_dir))
        except OSError:
            used = -1
        if used >= 0:
            yield self._gauge("rocketmq_storage_size", "Disk used (bytes)", used, **_STORAGE)
        yield self._gauge(
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes not yet flushed",
            store.flush_behind_bytes,
            **_STORAGE,
        )
        yield self._gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched",
            store.dispatch_behind_bytes,
            **_STORAGE,
        )
        reserve = GaugeMetricFamily(
            "rocketmq_storage_message_reserve_time",
            "Age of the oldest stored message (ms)",
            labels=[*self.base, *_STORAGE],
        )
        earliest = store.earliest_message_time() if store.max_phy_offset > 0 else -1
        if earliest > 0:  # none while the store holds no message
            age = max(int(time.time() * 1000) - earliest, 0)
            reserve.add_metric([*self.base.values(), *_STORAGE.values()], age)
        yield reserve
        if store.recovery is not None:
            yield self._gauge(
                "sidewinder_store_recovery_seconds",
                "How long the store's recovery took at start",
                store.recovery.took_ms / 1000,
                abnormal=_bool(store.recovery.crashed),
            )

    def _flushes(self) -> Iterator[HistogramMetricFamily]:
        store = self.sources.store
        labels = [*self.base, "flush"]
        seconds = HistogramMetricFamily(
            "sidewinder_store_flush_latency_seconds",
            "fdatasync rounds: CommitLog (group commit or the flush timer), ConsumeQueues",
            labels=labels,
        )
        timings = store.flush_timings()
        _histogram(seconds, [*self.base.values(), "commitlog"], timings.commit_log_seconds)
        _histogram(seconds, [*self.base.values(), "consumequeue"], timings.consume_queue_seconds)
        yield seconds
        yield _histogram(
            HistogramMetricFamily(
                "sidewinder_group_commit_bytes",
                "CommitLog bytes made durable per group-commit round (SYNC_FLUSH)",
                labels=list(self.base),
            ),
            list(self.base.values()),
            timings.group_commit_bytes,
        )
        yield _histogram(
            HistogramMetricFamily(
                "sidewinder_group_commit_waiters",
                "Waiting puts released per group-commit round (SYNC_FLUSH)",
                labels=list(self.base),
            ),
            list(self.base.values()),
            timings.group_commit_waiters,
        )


class _ConsumerProgress:
    """The consumer gauges of RocketMQ's ConsumerLagCalculator for remoting (pull and push)
    consumers: per online group and subscribed topic, summed over the topic's write queues.
    lag: max offset - committed offset; inflight: pulled - committed; ready: max - pulled;
    the latencies: now - store time of the first message not consumed (lag) or not pulled
    (queueing), 0 when there is none."""

    NAMES = (
        ("rocketmq_consumer_lag_messages", "Consumer lag messages"),
        ("rocketmq_consumer_lag_latency", "Consumer lag time (ms)"),
        ("rocketmq_consumer_inflight_messages", "Consumer inflight messages"),
        ("rocketmq_consumer_queueing_latency", "Consumer queueing time (ms)"),
        ("rocketmq_consumer_ready_messages", "Consumer ready messages"),
    )

    def __init__(self, base: dict[str, str], sources: BrokerSources) -> None:
        self.base = base
        self.sources = sources
        self.config = sources.topics.config

    def metrics(self) -> Iterator[GaugeMetricFamily]:
        labels = [*self.base, "topic", "consumer_group", "is_retry", "is_system"]
        families = [GaugeMetricFamily(n, doc, labels=labels) for n, doc in self.NAMES]
        now_ms = int(time.time() * 1000)
        for group, topic, queues in self._subscriptions():
            values = self._progress(group, topic, queues, now_ms)
            system = _bool(is_system_topic(topic, self.config) or _is_system_group(group))
            label_values = [*self.base.values(), topic, group, "false", system]
            for family, value in zip(families, values, strict=True):
                family.add_metric(label_values, value)
        yield from families

    def _subscriptions(self) -> Iterator[tuple[str, str, int]]:
        sources = self.sources
        for name, group in sources.clients.consumers.items():
            if name not in sources.groups.groups:
                continue
            for topic in group.subscriptions:
                config = sources.topics.get(topic)
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or config is None:
                    continue
                yield name, topic, config.write_queue_nums

    def _progress(self, group: str, topic: str, queues: int, now_ms: int) -> list[int]:
        store, offsets, pulls = self.sources.store, self.sources.offsets, self.sources.pulls
        lag = inflight = ready = 0
        oldest_unconsumed = oldest_unpulled = 0
        for queue_id in range(queues):
            broker = max(store.max_offset_in_queue(topic, queue_id), 0)
            committed = offsets.query(group, topic, queue_id)
            pulled = pulls.pull_offset(group, topic, queue_id)
            consumed_to = committed if committed >= 0 else broker
            lag += max(broker - consumed_to, 0)
            oldest_unconsumed = _older(oldest_unconsumed, store, topic, queue_id, consumed_to)
            pulled_to = max(pulled, 0)
            inflight += max(pulled_to - (committed if committed >= 0 else pulled_to), 0)
            oldest_unpulled = _older(oldest_unpulled, store, topic, queue_id, pulled_to)
            ready += max(broker - (pulled if pulled >= 0 else broker), 0)
        return [
            lag,
            now_ms - oldest_unconsumed if oldest_unconsumed else 0,
            inflight,
            now_ms - oldest_unpulled if oldest_unpulled else 0,
            ready,
        ]


def _older(oldest: int, store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    """The older of `oldest` (0: none yet) and the store time at `offset` (if a message)."""
    stored = store.store_time_at(topic, queue_id, offset)
    if stored <= 0:
        return oldest
    return stored if not oldest else min(oldest, stored)
