"""Store maintenance: CLEAN_EXPIRED_CONSUMEQUEUE (306), DELETE_EXPIRED_COMMITLOG (329),
CLEAN_UNUSED_TOPIC (316), QUERY_CONSUME_QUEUE (321).

    maintenance = Maintenance(config, store, topics, clients)
"""

from __future__ import annotations

from typing import Any

import structlog

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.processors.replies import json_reply
from sidewinder.broker.topics import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, TopicTable
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.headers import QueryConsumeQueueRequestHeader
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

log = structlog.get_logger(__name__)


class Maintenance:
    def __init__(
        self, config: BrokerConfig, store: MessageStore, topics: TopicTable, clients: Clients
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients

    async def clean_expired_consume_queues(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        # The delay queues' entries point at messages due later, not at old ones: they stay.
        dropped = await self.store.clean_expired_consume_queues(keep={SCHEDULE_TOPIC})
        log.warning("broker.clean_expired_cq", remote=ctx.remote_address, queues=len(dropped))
        return request.reply(ResponseCode.SUCCESS)

    async def delete_expired_commit_log(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """As RocketMQ: the next cleanup rounds delete expired segments whatever the hour; the
        reply does not wait for them."""
        self.store.delete_files_manually()
        log.warning("broker.delete_expired_commitlog", remote=ctx.remote_address)
        return request.reply(ResponseCode.SUCCESS)

    async def clean_unused_topics(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        keep = set(self.topics.topics) | {SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC}
        dropped = await self.store.clean_unused_topics(keep)
        log.warning("broker.clean_unused_topic", remote=ctx.remote_address, topics=dropped)
        return request.reply(ResponseCode.SUCCESS)

    async def query_consume_queue(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        topic, queue_id = header.topic, header.queue_id
        found = self.store.consume_queue_slice(topic, queue_id, header.index, header.count)
        if found is None:
            raise SidewinderError(f"{queue_id}@{topic} is not exist!")
        low, high, entries = found
        answer: dict[str, Any] = {"maxQueueIndex": high, "minQueueIndex": low}
        if header.consumer_group is not None:
            subscription = self.clients.subscription(header.consumer_group, topic)
            if subscription is None:
                answer["filterData"] = f"{header.consumer_group}@{topic} is not online!"
            else:
                answer["subscriptionData"] = subscription.to_json()
                # Filter data is what RocketMQ's ConsumerFilterManager keeps for SQL92
                # consumers; tag filters have none, and it prints "null".
                answer["filterData"] = "null"
        if entries is None:
            return request.reply(
                ResponseCode.SUCCESS,
                f"Index {header.index} of {queue_id}@{topic} is not exist!",
            )
        answer["queueData"] = [
            {
                "eval": False,
                "physicOffset": e.phy_offset,
                "physicSize": e.size,
                "tagsCode": e.tags_code,
            }
            for e in entries
        ]
        return json_reply(request, answer)
