"""RocketMQ 5's POP consumption over remoting, for one group: pop from a broker, ack, change a
message's invisible time. SimpleConsumer and the push consumer's POP mode are built on it; the
protocol is in sidewinder/protocol/pop.py.

A popped message stays invisible to the group until it is acked or its invisible time runs out,
when the broker hands it out again (through the group's retry topic, counting a reconsume).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import ClientError, MessageQueue, RouteCache, check_reply
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.pop import (
    POLLING_FULL,
    POLLING_TIMEOUT,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumeInitMode,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
    parse_start_offsets,
    retry_flag,
)
from sidewinder.protocol.record import message_records
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient

__all__ = ["PopClient", "PoppedMessage", "popped_messages"]

# A pop that found nothing: no messages, not an error.
EMPTY_POP = (POLLING_TIMEOUT, POLLING_FULL, ResponseCode.PULL_NOT_FOUND)
REPLY_MARGIN_S = 5.0  # how much longer than its long polling a pop may take to be answered


@dataclass(frozen=True)
class PoppedMessage(ReceivedMessage):
    """A received message and its receipt handle (the broker's check point for it, which
    ack and change_invisible_duration name). `topic` is the topic it was sent to also when
    it comes back from the group's retry topic."""

    receipt_handle: str = ""

    @property
    def handle(self) -> ExtraInfo:
        return ExtraInfo.decode(self.receipt_handle)


class PopClient:
    """POP requests of one consumer group, over a remoting client and route cache it shares
    with its owner."""

    def __init__(self, group: str, remoting: RemotingClient, routes: RouteCache) -> None:
        self.group = group
        self.remoting = remoting
        self.routes = routes

    async def brokers(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, master address) of each broker `topic` is readable on."""
        route = await self.routes.route(topic)
        if route is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}")
        names = sorted({q.broker_name for q in route.read_queues})
        found = [(name, addr) for name in names if (addr := route.master(name))]
        if not found:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no readable master for {topic}")
        return found

    async def pop(
        self,
        subscription: Subscription,
        broker: tuple[str, str],
        *,
        max_messages: int,
        invisible_s: float,
        await_s: float,
        init_mode: ConsumeInitMode,
    ) -> list[PoppedMessage]:
        """POP_MESSAGE from any queue (-1) of `subscription`'s topic on one (name, address)
        broker; [] when none arrived within `await_s` (long polling, 0: no waiting)."""
        broker_name, addr = broker
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=subscription.topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=int(invisible_s * 1000),
            poll_time=int(await_s * 1000),
            born_time=int(time.time() * 1000),
            init_mode=int(init_mode),
            exp_type=subscription.expression_type,
            exp=subscription.sub_string,
            broker_name=broker_name,
        )
        request = RemotingCommand.request(PopRequestCode.POP_MESSAGE, header.to_ext())
        reply = await self.remoting.invoke(addr, request, await_s + REPLY_MARGIN_S)
        if reply.code in EMPTY_POP:
            return []
        check_reply(reply)
        popped = PopMessageResponseHeader.from_ext(reply.ext_fields)
        return popped_messages(subscription.topic, broker_name, popped, reply.body_bytes)

    async def ack(self, message: PoppedMessage) -> None:
        """Consumed: the group never receives it again. Raises ClientError if the broker
        refuses the handle."""
        info = message.handle
        header = AckMessageRequestHeader(
            consumer_group=self.group,
            topic=info.real_topic(message.topic, self.group),
            queue_id=info.queue_id,
            extra_info=message.receipt_handle,
            offset=_message_offset(info),
            broker_name=info.broker_name,
        )
        request = RemotingCommand.request(PopRequestCode.ACK_MESSAGE, header.to_ext())
        check_reply(await self.remoting.invoke(await self._addr(message, info), request, 5))

    async def change_invisible_duration(
        self, message: PoppedMessage, invisible_duration_s: float
    ) -> PoppedMessage:
        """Hide the message for `invisible_duration_s` from now instead; returns it with its
        new receipt handle, the one to ack it with (the old one no longer settles it)."""
        info = message.handle
        real_topic = info.real_topic(message.topic, self.group)
        offset = _message_offset(info)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group,
            topic=real_topic,
            queue_id=info.queue_id,
            extra_info=message.receipt_handle,
            offset=offset,
            invisible_time=int(invisible_duration_s * 1000),
            broker_name=info.broker_name,
        )
        request = RemotingCommand.request(
            PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext()
        )
        reply = await self.remoting.invoke(await self._addr(message, info), request, 5)
        check_reply(reply)
        changed = ChangeInvisibleTimeResponseHeader.from_ext(reply.ext_fields)
        handle = changed.new_handle(info, real_topic, offset).encode()
        properties = {**message.properties, PROPERTY_POP_CK: handle}
        return dataclasses.replace(message, receipt_handle=handle, properties=properties)

    async def _addr(self, message: PoppedMessage, info: ExtraInfo) -> str:
        queue = MessageQueue(message.topic, info.broker_name, info.queue_id)
        addr = await self.routes.broker_addr(queue)
        if addr is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no master for {queue}")
        return addr


def _message_offset(info: ExtraInfo) -> int:
    return info.ck_queue_offset if info.queue_offset is None else info.queue_offset


def popped_messages(
    topic: str, broker_name: str, popped: PopMessageResponseHeader, data: bytes
) -> list[PoppedMessage]:
    """The messages of a pop reply, each with its receipt handle: the one the broker put in
    POP_CK (messages revived from the retry topic), else built as RocketMQ's client builds it,
    from the check point of its queue (startOffsetInfo) and the message's own offset."""
    starts = parse_start_offsets(popped.start_offset_info)
    messages = []
    for record in message_records(data):
        props = record.properties()
        handle = props.get(PROPERTY_POP_CK)
        if handle is None:
            key = (retry_flag(record.topic), record.queue_id)
            # A broker that sends no startOffsetInfo: each queue's first message starts its CK.
            start = starts.setdefault(key, record.queue_offset)
            handle = ExtraInfo(
                start,
                popped.pop_time,
                popped.invisible_time,
                popped.revive_qid,
                key[0],
                broker_name,
                record.queue_id,
                record.queue_offset,
            ).encode()
            props[PROPERTY_POP_CK] = handle
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(popped.pop_time))
        received = ReceivedMessage.of(MessageQueue(topic, broker_name, record.queue_id), record)
        fields = {f.name: getattr(received, f.name) for f in dataclasses.fields(received)}
        fields["properties"] = props
        messages.append(PoppedMessage(**fields, receipt_handle=handle))
    return messages
