"""The checks a message passes before it is stored, shared by sends (route.py) and replies
(reply_message.py), as RocketMQ's SendMessageProcessor and ReplyMessageProcessor share
AbstractSendMessageProcessor.msgCheck.

    topic = await msg_check(config, topics, header, ctx.remote_address, topics_changed)

In order: a broker that is not writable refuses sends to its order topics only (a send to
another topic that reaches it anyway is stored: RocketMQ keeps the refusal to order topics,
whose producers pick their queue and must not write while the broker is being drained); the
topic's name; the topics no client may send to; the topic itself, auto-created from the
request's default topic (a %RETRY% one made with one queue when that fails); the queue id.
Each refusal is raised with RocketMQ's code and remark. `check_topic` is the same without
waiting: None where the topic is to be made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.topics import (
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TopicConfig,
    TopicTable,
    topic_name_problem,
)
from sidewinder.protocol.errors import NoPermission, SidewinderError, TopicNotExist

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# TopicValidator's NOT_ALLOWED_SEND_TOPIC_SET.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        # RocketMQ 5 takes sends to it; what it holds decides deliveries to any topic.
        TIMER_TOPIC,
    }
)


class SendHeader(Protocol):
    """What the checks read of a send's (or a reply's) header."""

    @property
    def topic(self) -> str: ...
    @property
    def default_topic(self) -> str: ...
    @property
    def default_topic_queue_nums(self) -> int: ...
    @property
    def queue_id(self) -> int: ...


def check_topic(
    config: BrokerConfig, topics: TopicTable, header: SendHeader, remote_address: str
) -> TopicConfig | None:
    """msg_check without waiting: the topic, the refusal raised, or None for a topic the send
    is to make (msg_check makes it)."""
    name = header.topic
    topic = topics.get(name)
    if not config.broker_permission & PERM_WRITE and topic is not None and topic.order:
        raise NoPermission(f"the broker[{config.broker_ip1}] sending message is forbidden")
    problem = topic_name_problem(name)
    if problem:
        raise SidewinderError(problem)
    if name in NOT_ALLOWED_SEND_TOPICS:
        raise NoPermission(f"Sending message to topic[{name}] is forbidden.")
    if topic is None:
        return None
    _check_queue(topic, header, remote_address)
    return topic


async def msg_check(
    config: BrokerConfig,
    topics: TopicTable,
    header: SendHeader,
    remote_address: str,
    topics_changed: Callable[[], Awaitable[None]],
) -> TopicConfig:
    """The topic the message goes to (created if the send may create it, the name servers told
    before this returns), or the refusal raised."""
    topic = check_topic(config, topics, header, remote_address)
    if topic is not None:
        return topic
    name = header.topic
    topic = topics.create_for_send(name, header.default_topic, header.default_topic_queue_nums)
    if topic is None and name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        topic = topics.create_retry_topic(name, 1)
    if topic is None:
        raise TopicNotExist(f"topic[{name}] not exist, apply first please!{FAQ}")
    # As createTopicInSendMessageMethod: the name servers know the new topic before the
    # producer hears back, so a consumer started next finds it.
    await topics_changed()
    _check_queue(topic, header, remote_address)
    return topic


def _check_queue(topic: TopicConfig, header: SendHeader, remote_address: str) -> None:
    if header.queue_id >= max(topic.write_queue_nums, topic.read_queue_nums):
        raise SidewinderError(
            f"request queueId[{header.queue_id}] is illegal, {topic} Producer: {remote_address}"
        )


def plain_topic_name(name: str) -> bool:
    """Whether sends to `name` need none of the name checks (a valid name, not a system or
    retry topic): the route step's fast path may take them."""
    return (
        not topic_name_problem(name)
        and name not in NOT_ALLOWED_SEND_TOPICS
        and not name.startswith(RETRY_GROUP_TOPIC_PREFIX)
    )
