"""Stats admin: GET_BROKER_RUNTIME_INFO (28), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS
(208), QUERY_CONSUME_TIME_SPAN (303), VIEW_BROKER_STATS_DATA (315), GET_BROKER_CONSUME_STATS
(317).

    stats = StatsAdmin(config, store, topics, groups, offsets, clients, stats_manager)
"""

from __future__ import annotations

import shutil
import time
from typing import Any

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.processors.replies import json_reply, message_queue, queue_key
from sidewinder.broker.stats_manager import BrokerStatsManager, StatsSnapshot
from sidewinder.broker.topics import TopicConfig, TopicTable
from sidewinder.protocol.codes import CURRENT_VERSION
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError, TopicNotExist
from sidewinder.protocol.headers import (
    ConsumeStatsRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryConsumeTimeSpanRequestHeader,
    TopicHeader,
    ViewBrokerStatsDataRequestHeader,
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
        groups: SubscriptionGroups,
        offsets: ConsumerOffsets,
        clients: Clients,
        stats: BrokerStatsManager,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.stats = stats
        self.boot_ms = int(time.time() * 1000)

    async def runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        info = self.store.runtime_info()
        info["brokerVersionDesc"] = VERSION_DESC
        info["brokerVersion"] = str(CURRENT_VERSION)
        info["bootTimestamp"] = str(self.boot_ms)
        daily = self.stats.daily
        info["msgPutTotalYesterdayMorning"] = str(daily.put_yesterday_morning)
        info["msgPutTotalTodayMorning"] = str(daily.put_today_morning)
        info["msgPutTotalTodayNow"] = str(self.store.stats.put_times_total)
        info["msgGetTotalYesterdayMorning"] = str(daily.get_yesterday_morning)
        info["msgGetTotalTodayMorning"] = str(daily.get_today_morning)
        info["msgGetTotalTodayNow"] = str(self.store.stats.get_transferred_messages)
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
        """The group's offsets per queue of each topic it consumes (or the one asked for), and
        the messages per second it pulled from them over the last minute."""
        header = ConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = header.consumer_group
        topics = [header.topic] if header.topic else sorted(self.offsets.topics_of_group(group))
        table: dict[Any, Any] = {}
        tps = 0.0
        for topic in topics:
            config = self._consumed_topic(group, topic)
            if config is None:
                continue
            table.update(self._offset_table(group, topic, config.read_queue_nums))
            tps += self.stats.tps_group_get_nums(group, topic)
        return json_reply(request, {"consumeTps": tps, "offsetTable": table})

    async def broker_consume_stats(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """Every subscription group's ConsumeStats per topic it has offsets for (only order
        topics with isOrder), and the broker's total lag (RocketMQ's ConsumeStatsList)."""
        is_order = bool(GetConsumeStatsInBrokerHeader.from_ext(request.ext_fields).is_order)
        groups: list[dict[str, list[dict[str, Any]]]] = []
        total_diff = 0
        for group in list(self.groups.groups):
            stats_of_topics = []
            for topic in sorted(self.offsets.topics_of_group(group)):
                config = self._consumed_topic(group, topic)
                if config is None or (is_order and not config.order):
                    continue
                table = self._offset_table(group, topic, config.write_queue_nums)
                total_diff += sum(o["brokerOffset"] - o["consumerOffset"] for o in table.values())
                tps = self.stats.tps_group_get_nums(group, topic)
                stats_of_topics.append({"consumeTps": tps, "offsetTable": table})
            groups.append({group: stats_of_topics})
        return json_reply(
            request,
            {
                "brokerAddr": self.config.broker_addr,
                "consumeStatsList": groups,
                "totalDiff": total_diff,
            },
        )

    async def view_stats_data(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """One statistics item's minute, hour and day figures (RocketMQ's BrokerStatsData)."""
        header = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        name, key = header.stats_name, header.stats_key
        item = self.stats.item(name, key) if name is not None and key is not None else None
        if item is None:
            # Java's String.format writes a missing field as "null".
            raise SidewinderError(f"The stats <{name or 'null'}> <{key or 'null'}> not exist")
        return json_reply(
            request,
            {
                "statsDay": _stats_item(item.in_day()),
                "statsHour": _stats_item(item.in_hour()),
                "statsMinute": _stats_item(item.in_minute()),
            },
        )

    def _consumed_topic(self, group: str, topic: str) -> TopicConfig | None:
        """The topic's config, None if it is gone or the group, online, does not subscribe
        to it (RocketMQ leaves such topics out of a group's stats)."""
        config = self.topics.get(topic)
        if config is None:
            return None
        online = self.clients.consumers.get(group)
        if online is not None and online.channels and topic not in online.subscriptions:
            return None
        return config

    def _offset_table(self, group: str, topic: str, queues: int) -> dict[Any, dict[str, int]]:
        committed = self.offsets.queue_offsets(group, topic)
        table: dict[Any, dict[str, int]] = {}
        for queue in range(queues):
            broker_offset = max(self.store.max_offset_in_queue(topic, queue), 0)
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
        return table

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


def _stats_item(figures: StatsSnapshot) -> dict[str, Any]:
    """A BrokerStatsItem: RocketMQ leaves out a window's count of calls."""
    return {"avgpt": figures.avgpt, "sum": figures.sum, "tps": figures.tps}
