"""RECALL_MESSAGE (370), RocketMQ 5.3.2's RecallMessageProcessor: cancel a timer message not yet
delivered, by the recall handle its send's reply carried (sidewinder/protocol/recall.py).

The recall stores a delete marker for it through the timer (TIMER_DEL_UNIQKEY = topic + "+" +
its UNIQ_KEY, due at the same time), which the timer passes over with the message. Off unless
`recallMessageEnable=true`, as in RocketMQ.
"""

from __future__ import annotations

import time

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.send.request import host_of
from sidewinder.broker.timer import TimerRefusal, TimerSettings, timer_for_send
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import MessageConst, encode_properties
from sidewinder.protocol.recall import (
    ILLEGAL_OPERATION,
    RECALL_TAG,
    RecallHandle,
    RecallHandleError,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
)
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.config import BrokerRole
from sidewinder.store.message_store import STORED, MessageStore


class RecallProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        timer: TimerSettings,
        store_host: Host,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.timer = timer
        self.store_host = store_host

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = RecallMessageRequestHeader.from_ext(request.ext_fields)
        config = self.config
        if not config.recall_message_enable:
            forbidden = "recall failed, operation is forbidden"
            return request.reply(ResponseCode.NO_PERMISSION, forbidden)
        unavailable = "recall failed, broker service not available"
        if config.store.broker_role is BrokerRole.SLAVE:
            return request.reply(ResponseCode.SLAVE_NOT_AVAILABLE, unavailable)
        if not config.broker_permission & PERM_WRITE and not (
            config.allow_recall_when_broker_not_writeable
        ):
            return request.reply(ResponseCode.SERVICE_NOT_AVAILABLE, unavailable)
        if self.topics.get(header.topic) is None:
            return request.reply(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist"
            )
        try:
            handle = RecallHandle.decode(header.recall_handle)
        except RecallHandleError as exc:
            return request.reply(ILLEGAL_OPERATION, str(exc))
        if handle.topic != header.topic:
            return request.reply(ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != config.broker_name:
            return request.reply(ILLEGAL_OPERATION, unavailable)
        now_ms = int(time.time() * 1000)
        deliver_ms = int(handle.timestamp) if handle.timestamp.lstrip("-").isdigit() else -1
        left_ms = deliver_ms - now_ms
        if left_ms <= 0 or left_ms >= self.timer.max_delay_sec * 1000:
            return request.reply(ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = timer_for_send(self._marker(ctx, header, handle, now_ms), self.timer, now_ms)
        if isinstance(marker, TimerRefusal):
            return request.reply(marker.code, marker.remark)
        result = await self.store.put_message(marker, wait=True)
        if result.status not in STORED:
            return request.reply(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        answer = RecallMessageResponseHeader(handle.message_id)
        return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

    def _marker(
        self,
        ctx: RequestContext,
        header: RecallMessageRequestHeader,
        handle: RecallHandle,
        now_ms: int,
    ) -> MessageToStore:
        """The delete marker RocketMQ builds (buildMessage): body "0", queue 0, due when the
        message is."""
        props = {
            MessageConst.TAGS: RECALL_TAG,
            MessageConst.TIMER_DEL_UNIQKEY: f"{handle.topic}+{handle.message_id}",
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            MessageConst.TIMER_DELIVER_MS: handle.timestamp,
            MessageConst.PRODUCER_GROUP: header.producer_group or "",
        }
        return MessageToStore(
            topic=handle.topic.encode(),
            queue_id=0,
            body=b"0",
            properties=encode_properties(props, trailing=False),
            born_timestamp=now_ms,
            born_host=(
                host_of(ctx.remote_address) if ctx.remote_address != "?" else self.store_host
            ),
            store_host=self.store_host,
        )
