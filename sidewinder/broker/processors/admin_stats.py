"""Stats admin: GET_BROKER_RUNTIME_INFO (28), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS
(208), QUERY_CONSUME_TIME_SPAN (303).

    stats = StatsAdmin(config, store, topics, offsets, clients)
"""

from __future__ import annotations

import shutil
import time
from typing import Any

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.processors.replies import json_reply, message_queue, queue_key
from sidewinder.broker.topics import TopicConfig, TopicTable
from sidewinder.protocol.codes import CURRENT_VERSION
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import TopicNotExist
from sidewinder.protocol.headers import (
    ConsumeStatsRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    TopicHeader,
)
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

VERSION_DESC = "V4_9_8"


class StatsAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsets,
        clients: Clients,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.clients = clients
        self.boot_ms = int(time.time() * 1000)

    async def runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        info = self.store.runtime_info()
        info["brokerVersionDesc"] = VERSION_DESC
        info["brokerVersion"] = str(CURRENT_VERSION)
        info["bootTimestamp"] = str(self.boot_ms)
        info["msgPutTotalTodayNow"] = str(self.store.stats.put_times_total)
        info["msgGetTotalTodayNow"] = str(self.store.stats.get_transferred_messages)
        for key in (
            "msgPutTotalYesterdayMorning",
            "msgPutTotalTodayMorning",
            "msgGetTotalYesterdayMorning",
            "msgGetTotalTodayMorning",
        ):
            info.setdefault(key, "0")
        root = self.config.store.store_path_commit_log
        try:
            usage = shutil.disk_usage(root if root.exists() else root.parent)
            info["commitLogDirCapacity"] = (
                f"Total : {usage.total / 2**30:.1f} GiB, Free : {usage.free / 2**30:.1f} GiB."
            )
        except OSError:
            pass
        return json_reply(request, {"table": info})

    async def topic_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        config = self._topic(topic)
        table: dict[Any, Any] = {}
        for queue in range(config.write_queue_nums):
            high = self.store.max_offset_in_queue(topic, queue)
            stamp = self.store.store_time_at(topic, queue, high - 1) if high > 0 else 0
            table[self._mq(topic, queue)] = {
                "lastUpdateTimestamp": max(stamp, 0),
                "maxOffset": high,
                "minOffset": self.store.min_offset_in_queue(topic, queue),
            }
        return json_reply(request, {"offsetTable": table})

    async def consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = header.consumer_group
        topics = [header.topic] if header.topic else sorted(self.offsets.topics_of_group(group))
        table: dict[Any, Any] = {}
        for topic in topics:
            config = self.topics.get(topic)
            if config is None:
                continue
            online = self.clients.consumers.get(group)
            if online is not None and online.channels and topic not in online.subscriptions:
                continue
            committed = self.offsets.queue_offsets(group, topic)
            for queue in range(config.write_queue_nums):
                broker_offset = self.store.max_offset_in_queue(topic, queue)
                consumer_offset = max(committed.get(queue, 0), 0)
                last = (
                    self.store.store_time_at(topic, queue, consumer_offset - 1)
                    if consumer_offset > 0
                    else 0
                )
                table[self._mq(topic, queue)] = {
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": max(last, 0),
                }
        return json_reply(request, {"consumeTps": 0.0, "offsetTable": table})

    async def consume_time_span(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """Per queue: the oldest and newest store times, the store time of the last message
        the group consumed, and how long the next one has waited (RocketMQ's QueueTimeSpan)."""
        header = QueryConsumeTimeSpanRequestHeader.from_ext(request.ext_fields)
        topic = header.topic
        config = self._topic(topic)
        spans = []
        now_ms = int(time.time() * 1000)
        for queue in range(config.write_queue_nums):
            min_time = self.store.earliest_message_time(topic, queue)
            high = self.store.max_offset_in_queue(topic, queue)
            consumed = self.offsets.query(header.group, topic, queue)
            span = {
                "consumeTimeStamp": (
                    self.store.store_time_at(topic, queue, consumed - 1)
                    if consumed > 0
                    else min_time
                ),
                "delayTime": 0,
                "maxTimeStamp": self.store.store_time_at(topic, queue, high - 1),
                "messageQueue": message_queue(self.config.broker_name, topic, queue),
                "minTimeStamp": min_time,
            }
            if consumed < high:
                span["delayTime"] = now_ms - self.store.store_time_at(topic, queue, consumed)
            spans.append(span)
        return json_reply(request, {"consumeTimeSpanSet": spans})

    def _topic(self, topic: str) -> TopicConfig:
        config = self.topics.get(topic)
        if config is None:
            raise TopicNotExist(f"topic[{topic}] not exist")
        return config

    def _mq(self, topic: str, queue: int) -> Any:
        return queue_key(self.config.broker_name, topic, queue)
