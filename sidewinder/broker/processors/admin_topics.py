"""Topic admin: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
GET_ALL_TOPIC_CONFIG (21), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), QUERY_TOPIC_CONSUME_BY_WHO
(300).

    topics = TopicAdmin(
        config, store, topic_table, offsets, clients,
        metadata_saved=app.saved, topic_deleted=stats.on_topic_deleted,
    )
    reply = await topics.create_topic(ctx, request)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sidewinder.broker.attributes import (
    MESSAGE_TYPE,
    TOPIC_ATTRIBUTES,
    alter_attributes,
    parse_modification,
)
from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.processors.replies import json_reply
from sidewinder.broker.topics import (
    TopicConfig,
    TopicTable,
    is_system_topic,
    system_topics,
    topic_name_problem,
)
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.headers import CreateTopicRequestHeader, TopicHeader
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

MIXED_KEY = f"+{MESSAGE_TYPE}"


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsets,
        clients: Clients,
        *,
        metadata_saved: Callable[[], Awaitable[None]],
        topic_deleted: Callable[[str], None],
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.clients = clients
        # Persist and re-register before answering, as RocketMQ registers a new topic first.
        self.metadata_saved = metadata_saved
        self.topic_deleted = topic_deleted  # the statistics forget the topic

    async def create_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.from_ext(request.ext_fields)
        self._check_name(header.topic)
        changes = parse_modification(header.attributes)
        if not self.config.enable_mixed_message_type and changes.get(MIXED_KEY) == "MIXED":
            raise SidewinderError(
                "MIXED message type is not supported.", ResponseCode.INVALID_PARAMETER
            )
        existing = self.topics.get(header.topic)
        current = existing.attributes if existing is not None else {}
        # TopicConfigManager.updateTopicConfig: a create takes only "+"; an update keeps the
        # attributes it does not name.
        attributes = alter_attributes(TOPIC_ATTRIBUTES, current, changes, create=existing is None)
        self.topics.upsert(
            TopicConfig(
                header.topic,
                header.read_queue_nums,
                header.write_queue_nums,
                header.perm,
                header.topic_filter_type,
                header.topic_sys_flag or 0,
                header.order,
                attributes,
            )
        )
        await self.metadata_saved()
        return request.reply(ResponseCode.SUCCESS)

    async def delete_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        self._check_name(topic)
        self.topics.delete(topic)
        self.offsets.remove_topic(topic)
        await self.store.delete_topic(topic)
        self.topic_deleted(topic)
        await self.metadata_saved()
        return request.reply(ResponseCode.SUCCESS)

    def _check_name(self, topic: str) -> None:
        """A name an admin may create or delete: valid, and none of the system topics (with
        this broker's cluster and broker names and <cluster>_REPLY_TOPIC), as RocketMQ's
        TopicValidator.validateTopic and isSystemTopic refuse them."""
        problem = topic_name_problem(topic)
        if problem:
            raise SidewinderError(problem)
        if is_system_topic(topic, self.config):
            raise SidewinderError(f"The topic[{topic}] is conflict with system topic.")

    async def all_topics(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return json_reply(request, self.topics.to_json())

    async def topic_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351, RocketMQ 5): one topic's config with its attributes and the
        message type they give (TopicConfigAndQueueMapping; no static-topic mapping here)."""
        name = TopicHeader.from_ext(request.ext_fields).topic
        topic = self.topics.get(name)
        if topic is None:
            return request.reply(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {name}"
            )
        value = {"attributes": {}} | topic.to_json() | {"topicMessageType": topic.message_type}
        return json_reply(request, value)

    async def system_topics(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """What exportMetadata leaves out (with %RETRY% and %DLQ% topics, which it drops
        itself): the fixed system topics and the ones this broker's names make."""
        return json_reply(request, {"topicList": sorted(system_topics(self.config))})

    async def consumed_by(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        groups = set(self.clients.groups_of_topic(topic)) | self.offsets.groups_of_topic(topic)
        return json_reply(request, {"groupList": sorted(groups)})
