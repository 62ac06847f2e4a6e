"""What the POP processors and the revive service share: the broker's tables and store, the
revive topic, and the writing of CK and ACK records into it (as timer messages)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from sidewinder.broker.config import PERM_READ, PERM_WRITE, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.pop.order import ConsumerOrderInfo
from sidewinder.broker.pop.records import Ack, CheckPoint, ck_deliver_ms, revive_message
from sidewinder.broker.timer import TimerRefusal, TimerSettings, timer_for_send
from sidewinder.broker.topics import TopicConfig, TopicTable
from sidewinder.protocol.pop import (
    CK_TAG,
    pop_retry_topic,
    revive_topic,
)
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.store.message_store import STORED, MessageStore

log = structlog.get_logger(__name__)

RETRY_QUEUE_NUM = 1  # PopAckConstants.retryQueueNum


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PopContext:
    config: BrokerConfig
    store: MessageStore
    topics: TopicTable
    groups: SubscriptionGroups
    offsets: ConsumerOffsets
    timer: TimerSettings
    store_host: Host
    orders: ConsumerOrderInfo

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.config.broker_cluster_name)

    def ensure_revive_topic(self) -> None:
        """RocketMQ 5's TopicConfigManager makes the cluster's revive topic at start."""
        name, queues = self.revive_topic, self.config.revive_queue_num
        found = self.topics.get(name)
        if found is None or found.read_queue_nums < queues:
            self.topics.upsert(TopicConfig(name, queues, queues, PERM_READ | PERM_WRITE))

    def retry_topic(self, topic: str, group: str) -> str:
        return pop_retry_topic(topic, group, v2=self.config.enable_retry_topic_v2)

    def ensure_retry_topic(self, topic: str, group: str) -> None:
        """A pop retry topic of one queue, the group's offset in it from 0
        (addRetryTopicIfNotExist)."""
        if self.topics.get(topic) is not None:
            return
        self.topics.upsert(
            TopicConfig(topic, RETRY_QUEUE_NUM, RETRY_QUEUE_NUM, PERM_READ | PERM_WRITE)
        )
        if self.offsets.query(group, topic, 0) < 0:
            self.offsets.commit(group, topic, 0, 0)

    async def put(self, message: MessageToStore) -> bool:
        """Store a record through the timer (when it asks for a later time), waiting as a
        producer asking WAIT would: on disk under SYNC_FLUSH before it counts."""
        diverted = timer_for_send(message, self.timer, now_ms())
        if isinstance(diverted, TimerRefusal):
            log.error("pop.put_refused", topic=message.topic_name, remark=diverted.remark)
            return False
        result = await self.store.put_message(diverted, wait=True)
        if result.status not in STORED:
            log.error("pop.put_failed", topic=message.topic_name, status=result.status.name)
            return False
        return True

    async def write_ck(self, ck: CheckPoint, revive_qid: int) -> bool:
        message = revive_message(
            self.revive_topic,
            revive_qid,
            CK_TAG,
            ck.to_json(),
            ck.unique_id(),
            ck_deliver_ms(ck),
            self.store_host,
            now_ms(),
        )
        return await self.put(message)

    async def write_ack(self, ack: Ack, revive_qid: int, deliver_ms: int) -> bool:
        message = revive_message(
            self.revive_topic,
            revive_qid,
            ack.tag,
            ack.to_json(),
            ack.unique_id(),
            deliver_ms,
            self.store_host,
            now_ms(),
        )
        return await self.put(message)
