"""CONSUMER_SEND_MSG_BACK (36): a message a consumer could not handle goes to %RETRY%group with
a growing delay, or to %DLQ%group once it has been retried maxReconsumeTimes."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.schedule import schedule_for_delay
from sidewinder.broker.topics import RETRY_GROUP_TOPIC_PREFIX, TopicTable
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import NoPermission, SidewinderError, SubscriptionGroupNotExist
from sidewinder.protocol.headers import ConsumerSendMsgBackRequestHeader
from sidewinder.protocol.message import MessageConst, encode_offset_msg_id
from sidewinder.protocol.record import message_from_record
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore, PutStatus


class SendBackProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        max_delay_level: int,
        *,
        topics_changed: Callable[[], Awaitable[None]],
        sent_back: Callable[[str, str], None],
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.max_delay_level = max_delay_level
        # Persist topics and tell the name servers (awaited, as a send that makes a topic is).
        self.topics_changed = topics_changed
        # (group, original topic) of each message sent back: SNDBCK_PUT_NUMS.
        self.sent_back = sent_back

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        group = self.groups.find(header.group)
        if group is None:
            raise SubscriptionGroupNotExist(f"subscription group not exist, {header.group}")
        if not self.config.broker_permission & PERM_WRITE:
            raise NoPermission(f"the broker[{self.config.broker_ip1}] sending message is forbidden")
        if group.retry_queue_nums <= 0:
            return request.reply(ResponseCode.SUCCESS)
        record = self.store.lookup_message_by_offset(header.offset)
        if record is None:
            raise SidewinderError(f"look message by offset failed, {header.offset}")
        props = record.properties()
        props.setdefault(MessageConst.RETRY_TOPIC, record.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        max_times = (
            header.max_reconsume_times
            if header.max_reconsume_times is not None
            else group.retry_max_times
        )
        delay = header.delay_level
        before = len(self.topics.topics)
        if record.reconsume_times >= max_times or delay < 0:
            topic = self.topics.create_dlq_topic(header.group)
            queue_id = 0
            # RocketMQ's setDelayTimeLevel(0): the dead letter says DELAY 0, and is not delayed.
            props[MessageConst.DELAY_TIME_LEVEL] = "0"
        else:
            topic = self.topics.create_retry_topic(
                f"{RETRY_GROUP_TOPIC_PREFIX}{header.group}", group.retry_queue_nums
            )
            queue_id = random.randrange(group.retry_queue_nums)
            props[MessageConst.DELAY_TIME_LEVEL] = str(
                delay if delay > 0 else 3 + record.reconsume_times
            )
        if len(self.topics.topics) != before:
            await self.topics_changed()
        # Tools track a message through its retries by the broker id of its first record: the
        # record sent back, unless it is itself a retry that already names one. The request's
        # originMsgId is the client's id (UNIQ_KEY), which RocketMQ does not store here.
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID, "").strip():
            props[MessageConst.ORIGIN_MESSAGE_ID] = encode_offset_msg_id(
                record.store_host.address, record.store_host.port, record.phy_offset
            )
        message = message_from_record(
            record,
            topic=topic.topic_name,
            queue_id=queue_id,
            properties=props,
            reconsume_times=record.reconsume_times + 1,
            prepared_transaction_offset=0,  # a retry of a committed message is no half's
        )
        result = await self.store.put_message(schedule_for_delay(message, self.max_delay_level))
        if result.status is PutStatus.PUT_OK:
            self.sent_back(header.group, props[MessageConst.RETRY_TOPIC])
            return request.reply(ResponseCode.SUCCESS)
        raise SidewinderError(f"{result.status.name} {result.remark}")
