"""The simple consumer: RocketMQ 5's POP consumption over the remoting protocol. No queues to
own and no offsets to commit: the broker hands out messages and hides each one from the group
until it is acked or its invisible duration runs out, when it is handed out again.

    consumer = SimpleConsumer("billing", "127.0.0.1:9876")
    consumer.subscribe("Orders", "paid || refunded")
    await consumer.start()                        # checks the topics have routes
    for message in await consumer.receive(16, invisible_duration_s=30, await_duration_s=5):
        ...
        await consumer.ack(message)               # else it comes back after 30 s
    later = await consumer.change_invisible_duration(message, 60)   # a new handle: ack `later`
    await consumer.close()

Each receive pops (POP_MESSAGE, queue -1: any queue) from one broker serving one subscribed
topic, taking them in turn; with `await_duration_s` the broker holds the pop until a message
arrives or the time is up (long polling). The protocol is in sidewinder/protocol/pop.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import ClientError, MessageQueue, RouteCache, check_reply
from sidewinder.protocol.acl import request_hook
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
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.tls import TlsOption

__all__ = ["PoppedMessage", "SimpleConsumer"]

CONSUME_FROM = {"last": ConsumeInitMode.MAX, "first": ConsumeInitMode.MIN}
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


class SimpleConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        invisible_duration_s: float = 30.0,
        await_duration_s: float = 5.0,
        consume_from: str = "last",
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        if consume_from not in CONSUME_FROM:
            raise ValueError(f"consume_from must be one of {', '.join(CONSUME_FROM)}")
        self.group = group
        self.invisible_duration_s = invisible_duration_s
        self.await_duration_s = await_duration_s
        self.init_mode = CONSUME_FROM[consume_from]
        self.remoting = RemotingClient(before_request=request_hook(access_key, secret_key), tls=tls)
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self.subscriptions: dict[str, Subscription] = {}
        self._turn = itertools.count()

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self.subscriptions[topic] = Subscription.of(
            topic, expression, expression_type=expression_type
        )

    async def start(self) -> None:
        """Look up every subscribed topic's route; a topic with none raises TOPIC_NOT_EXIST."""
        for topic in self.subscriptions:
            await self._brokers(topic)

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> SimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- receiving -------------------------------------------------------------------------------
    async def receive(
        self,
        max_messages: int = 16,
        invisible_duration_s: float | None = None,
        await_duration_s: float | None = None,
    ) -> list[PoppedMessage]:
        """Up to `max_messages` (at most 32) messages of one broker serving one subscribed
        topic (the next in turn), each invisible to the group for `invisible_duration_s`;
        [] when none arrived within `await_duration_s` (0: no waiting)."""
        if not self.subscriptions:
            raise ValueError("subscribe to a topic before receiving")
        invisible_s = (
            self.invisible_duration_s if invisible_duration_s is None else invisible_duration_s
        )
        await_s = self.await_duration_s if await_duration_s is None else max(await_duration_s, 0)
        targets = [(t, b) for t in sorted(self.subscriptions) for b in await self._brokers(t)]
        topic, (broker_name, addr) = targets[next(self._turn) % len(targets)]
        subscription = self.subscriptions[topic]
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=int(invisible_s * 1000),
            poll_time=int(await_s * 1000),
            born_time=int(time.time() * 1000),
            init_mode=int(self.init_mode),
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
        return popped_messages(topic, broker_name, popped, reply.body_bytes)

    async def _brokers(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, master address) of each broker `topic` is readable on."""
        route = await self.routes.route(topic)
        if route is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}")
        names = sorted({q.broker_name for q in route.read_queues})
        found = [(name, addr) for name in names if (addr := route.master(name))]
        if not found:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no readable master for {topic}")
        return found

    # -- settling --------------------------------------------------------------------------------
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
        # The new check point covers this one message: it starts at the message's offset.
        handle = ExtraInfo(
            offset,
            changed.pop_time,
            changed.invisible_time,
            changed.revive_qid,
            retry_flag(real_topic),
            info.broker_name,
            info.queue_id,
            offset,
        ).encode()
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
    at = 0
    while at < len(data):
        record = decode_record(data, at)
        if not isinstance(record, MessageRecord):
            break
        at += record.total_size
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
