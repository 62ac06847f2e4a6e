"""Admin codes mqadmin and the Dashboard use: topics, subscription groups, stats, connections,
broker config and runtime info."""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroup, SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.topics import TopicConfig, TopicTable, topic_name_problem
from sidewinder.protocol import body
from sidewinder.protocol.body import ObjectKey
from sidewinder.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    ConsumerGroupHeader,
    ConsumeStatsRequestHeader,
    CreateTopicRequestHeader,
    GroupNameHeader,
    TopicHeader,
)
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

VERSION_DESC = "V4_9_8"


class AdminProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        offsets: ConsumerOffsets,
        clients: Clients,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.boot_ms = int(time.time() * 1000)

    async def metadata_changed(self) -> None:
        """Replaced by the app: persist tables and re-register with the name servers before
        answering, as RocketMQ registers a new topic before its reply."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        handler = self._handlers.get(request.code)
        if handler is None:
            return request.reply(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {request.code} not supported",
            )
        return await handler(self, request)

    async def _create_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext(request.ext_fields)
        problem = topic_name_problem(header.topic)
        if problem:
            return request.reply(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic == self.config.broker_cluster_name:
            return request.reply(
                ResponseCode.SYSTEM_ERROR,
                f"the topic[{header.topic}] is conflict with system reserved words.",
            )
        self.topics.upsert(
            TopicConfig(
                header.topic,
                header.read_queue_nums,
                header.write_queue_nums,
                header.perm,
                header.topic_filter_type,
                header.topic_sys_flag or 0,
                header.order,
            )
        )
        await self.metadata_changed()
        return request.reply(ResponseCode.SUCCESS)

    async def _delete_topic(self, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        self.topics.delete(topic)
        self.offsets.remove_topic(topic)
        await self.store.delete_topic(topic)
        await self.metadata_changed()
        return request.reply(ResponseCode.SUCCESS)

    async def _all_topics(self, request: RemotingCommand) -> RemotingCommand:
        return _json(request, self.topics.to_json())

    async def _update_group(self, request: RemotingCommand) -> RemotingCommand:
        data = body.loads(request.body_bytes) if request.body else None
        if not isinstance(data, dict) or "groupName" not in data:
            return request.reply(
                ResponseCode.SYSTEM_ERROR, "the body is not a SubscriptionGroupConfig"
            )
        self.groups.upsert(SubscriptionGroup.from_json(data))
        await self.metadata_changed()
        return request.reply(ResponseCode.SUCCESS)

    async def _all_groups(self, request: RemotingCommand) -> RemotingCommand:
        return _json(request, self.groups.to_json())

    async def _delete_group(self, request: RemotingCommand) -> RemotingCommand:
        header = GroupNameHeader.from_ext(request.ext_fields)
        self.groups.delete(header.group_name)
        await self.metadata_changed()
        return request.reply(ResponseCode.SUCCESS)

    async def _runtime_info(self, request: RemotingCommand) -> RemotingCommand:
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
        return _json(request, {"table": info})

    async def _topic_stats(self, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        config = self.topics.get(topic)
        if config is None:
            return request.reply(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table: dict[Any, Any] = {}
        for queue in range(config.write_queue_nums):
            high = self.store.max_offset_in_queue(topic, queue)
            stamp = self.store.store_time_at(topic, queue, high - 1) if high > 0 else 0
            table[self._mq(topic, queue)] = {
                "lastUpdateTimestamp": max(stamp, 0),
                "maxOffset": high,
                "minOffset": self.store.min_offset_in_queue(topic, queue),
            }
        return _json(request, {"offsetTable": table})

    async def _consume_stats(self, request: RemotingCommand) -> RemotingCommand:
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
        return _json(request, {"consumeTps": 0.0, "offsetTable": table})

    async def _consumer_connections(self, request: RemotingCommand) -> RemotingCommand:
        group = ConsumerGroupHeader.from_ext(request.ext_fields).consumer_group
        found = self.clients.consumers.get(group)
        if found is None or not found.channels:
            return request.reply(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        return _json(
            request,
            {
                "connectionSet": [
                    {
                        "clientAddr": c.address,
                        "clientId": c.client_id,
                        "language": c.language,
                        "version": c.version,
                    }
                    for c in found.channels.values()
                ],
                "consumeFromWhere": found.consume_from_where,
                "consumeType": found.consume_type,
                "messageModel": found.message_model,
                "subscriptionTable": {t: s.to_json() for t, s in found.subscriptions.items()},
            },
        )

    async def _producer_connections(self, request: RemotingCommand) -> RemotingCommand:
        group = (request.ext_fields or {}).get("producerGroup", "")
        channels = self.clients.producers.get(group) or {}
        if not channels:
            return request.reply(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist"
            )
        return _json(
            request,
            {
                "connectionSet": [
                    {
                        "clientAddr": c.address,
                        "clientId": c.client_id,
                        "language": c.language,
                        "version": c.version,
                    }
                    for c in channels.values()
                ]
            },
        )

    async def _broker_config(self, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.config.as_properties().items())
        version = body.dumps(self.topics.data_version.to_json())
        return request.reply(
            ResponseCode.SUCCESS, ext_fields={"version": version}, body=text.encode()
        )

    async def _consumed_by(self, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        groups = set(self.clients.groups_of_topic(topic)) | self.offsets.groups_of_topic(topic)
        return _json(request, {"groupList": sorted(groups)})

    def _mq(self, topic: str, queue: int) -> ObjectKey:
        return ObjectKey(brokerName=self.config.broker_name, queueId=queue, topic=topic)

    _handlers: ClassVar[dict[int, Callable[..., Awaitable[RemotingCommand]]]] = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: _create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: _delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: _all_topics,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _update_group,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _all_groups,
        RequestCode.DELETE_SUBSCRIPTIONGROUP: _delete_group,
        RequestCode.GET_BROKER_RUNTIME_INFO: _runtime_info,
        RequestCode.GET_TOPIC_STATS_INFO: _topic_stats,
        RequestCode.GET_CONSUME_STATS: _consume_stats,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: _consumer_connections,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: _producer_connections,
        RequestCode.GET_BROKER_CONFIG: _broker_config,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _consumed_by,
    }


def _json(request: RemotingCommand, value: Any) -> RemotingCommand:
    return request.reply(ResponseCode.SUCCESS, body=body.dumps(value).encode())
