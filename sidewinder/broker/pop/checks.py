"""The refusals PEEK_MESSAGE, NOTIFICATION and POLLING_INFO share (RocketMQ 5.3.2's order,
codes and remarks), and where a group reads a queue from without popping."""

from __future__ import annotations

from sidewinder.broker.config import PERM_READ
from sidewinder.broker.pop.context import PopContext
from sidewinder.broker.topics import TopicConfig
from sidewinder.protocol.errors import (
    NoPermission,
    SidewinderError,
    SubscriptionGroupNotExist,
    TopicNotExist,
)
from sidewinder.protocol.pop import (
    INVALID_PARAMETER,
)

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def readable_queue(pop: PopContext, topic_name: str, queue_id: int, group_name: str) -> TopicConfig:
    """The topic, once the broker, topic, queue and group may be read; raises the refusal."""
    ip = pop.config.broker_ip1
    if not pop.config.broker_permission & PERM_READ:
        raise NoPermission(f"the broker[{ip}] peeking message is forbidden")
    topic = pop.topics.get(topic_name)
    if topic is None:
        raise TopicNotExist(f"topic[{topic_name}] not exist, apply first please!{FAQ}")
    if not topic.perm & PERM_READ:
        raise NoPermission(f"the topic[{topic_name}] peeking message is forbidden")
    # RocketMQ checks only the upper bound; below -1 (all queues) is refused here too.
    if queue_id >= topic.read_queue_nums or queue_id < -1:
        raise SidewinderError(
            f"queueId[{queue_id}] is illegal, topic:[{topic_name}] "
            f"topicConfig.readQueueNums:[{topic.read_queue_nums}] consumer:[{group_name}]",
            INVALID_PARAMETER,
        )
    group = pop.groups.find(group_name)
    if group is None:
        raise SubscriptionGroupNotExist(
            f"subscription group [{group_name}] does not exist, {FAQ.strip()}"
        )
    if not group.consume_enable:
        raise NoPermission(f"subscription group no permission, {group_name}")
    return topic


def read_offset(pop: PopContext, topic: str, group: str, queue_id: int) -> int:
    """The group's offset in a queue, or the queue's first (getPopOffset of peek/notify)."""
    offset = pop.offsets.query(group, topic, queue_id)
    return offset if offset >= 0 else pop.store.min_offset_in_queue(topic, queue_id)
