"""The Python producer: routes from the name servers, SEND_MESSAGE_V2 to a master broker,
round-robin over the topic's write queues, another queue (another broker first) on failure.

    producer = Producer("my-group", "127.0.0.1:9876")
    await producer.start()
    result = await producer.send(Message("Orders", b"...", tags="paid", keys=["order-7"]))
    await producer.close()

As RocketMQ's producers, it sends HEART_BEAT with its group to every master of the routes it
knows, at `start` (TBW102's, so every broker that may auto-create a topic) and every 30 s
(heartbeatBrokerInterval), which is how a broker lists it (mqadmin producerConnection,
GET_ALL_PRODUCER_INFO); a producer used without `start` begins at its first send. `close`
unregisters it (UNREGISTER_CLIENT) from every broker that heard it.

Request-reply (`request`, `reply`): see `sidewinder.client.reply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from sidewinder.client.membership import masters_of, new_client_id
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.reply import (
    ReplyMessage,
    ReplyReceiver,
    is_reply,
    new_correlation_id,
    reply_properties,
    request_properties,
)
from sidewinder.client.route_cache import AUTO_CREATE_TOPIC, ClientError, MessageQueue, RouteCache
from sidewinder.protocol.acl import request_hook
from sidewinder.protocol.codes import RequestCode, ResponseCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from sidewinder.protocol.message import MessageConst, encode_properties
from sidewinder.protocol.recall import (
    RECALL_TAG,
    RecallHandle,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
)
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.tls import TlsOption

# The 4.9 Java producer retries another broker on these (retryResponseCodes).
RETRY_CODES = {17, 14, 1, 16, 204, 205}
_STATUS = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
_BATCH_HEAD = struct.Struct(">iiiii")
HEARTBEAT_INTERVAL_S = 30.0  # heartbeatBrokerInterval


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: Sequence[str] = ()
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    flag: int = 0
    # A timer message (RocketMQ 5's, honoured by Sidewinder on the 4.x wire): delivered at
    # `deliver_at` (an aware datetime, or epoch milliseconds), or `delay` seconds after the
    # broker stores it. At most one of the two; not with delay_level.
    deliver_at: datetime | int | None = None
    delay: float | None = None


@dataclass(frozen=True)
class SendResult:
    status: str
    msg_id: str  # the client's id (UNIQ_KEY)
    offset_msg_id: str  # the broker's (store host + CommitLog offset)
    queue: MessageQueue
    queue_offset: int
    # A timer message's handle for recall_message (RocketMQ 5 brokers give one; 4.x do not).
    recall_handle: str | None = None


class _UniqueIds:
    """UNIQ_KEY values: host, pid and a random part, then time and a counter (32 hex)."""

    def __init__(self) -> None:
        try:
            host = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            host = b"\x7f\x00\x00\x01"
        self.prefix = (host + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)).hex()
        self.counter = itertools.count()

    def next(self) -> str:
        tail = struct.pack(">IH", int(time.time() * 1000) & 0xFFFFFFFF, next(self.counter) & 0xFFFF)
        return (self.prefix + tail.hex()).upper()


class Producer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        send_timeout_s: float = 3.0,
        retries: int = 2,
        default_topic_queue_nums: int = 4,
        serialize_type: SerializeType = SerializeType.JSON,
        instance_name: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        """`access_key`/`secret_key`: sign every request for a broker with ACL on."""
        self.group = group
        self.client_id = new_client_id(instance_name)
        self.replies = ReplyReceiver()
        table = ProcessorTable()
        table.register(self.replies, RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT)
        self.remoting = RemotingClient(
            table, before_request=request_hook(access_key, secret_key), tls=tls
        )
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self.send_timeout_s = send_timeout_s
        self.retries = retries
        self.default_topic_queue_nums = default_topic_queue_nums
        self.serialize_type = serialize_type
        self._ids = _UniqueIds()
        self._turn = itertools.count(random.randrange(1 << 16))
        self._heard_by: set[str] = set()  # brokers that took our heartbeat (they push replies)
        self._heartbeats: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Heartbeat to the brokers of TBW102's route (and of any route already known), then
        every HEARTBEAT_INTERVAL_S, as DefaultMQProducer.start does. Optional: the first send
        starts the heartbeats of a producer not started."""
        with contextlib.suppress(ClientError, RemotingError, OSError):
            await self.routes.route(AUTO_CREATE_TOPIC)  # no name server yet: later rounds
        await self.heartbeat()
        self._start_heartbeats()

    async def close(self) -> None:
        """Stop heartbeating and unregister from every broker that heard us."""
        self._closing = True
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeats
        try:
            await self._unregister()
        finally:
            await self.remoting.close()

    async def _unregister(self) -> None:
        header = UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=self.group, consumer_group=None
        )
        for addr in sorted(self._heard_by):
            request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext())
            with contextlib.suppress(RemotingError, OSError):
                await self.remoting.invoke(addr, request, self.send_timeout_s)
        self._heard_by.clear()

    async def request(self, message: Message, timeout_s: float = 3.0) -> ReplyMessage:
        """Send `message` and wait for its reply (DefaultMQProducer.request): the broker pushes
        the replier's answer to this producer's connection. RequestTimeoutError when none came
        within `timeout_s`; the send's own errors as `send` raises them."""
        deadline = time.monotonic() + timeout_s
        correlation_id = new_correlation_id()
        props = request_properties(correlation_id, self.client_id, int(timeout_s * 1000))
        message = replace(message, properties={**message.properties, **props})
        await self._heartbeat_for(message.topic)
        self.replies.expect(correlation_id)
        try:
            await self.send(message)
        except BaseException:
            self.replies.waiting.pop(correlation_id, None)
            raise
        return await self.replies.wait(correlation_id, deadline - time.monotonic())

    async def reply(self, request: ReceivedMessage, body: bytes) -> SendResult:
        """Answer a request a consumer received (MessageUtil.createReplyMessage, then send)."""
        return await self.send(create_reply_message(request, body))

    async def heartbeat(self) -> None:
        """HEART_BEAT as a producer of our group to every master we know a route to: the broker
        finds our connection by client id to push replies."""
        masters = masters_of(list(self.routes.routes.values()))
        body = json.dumps(
            {
                "clientID": self.client_id,
                "producerDataSet": [{"groupName": self.group}],
                "consumerDataSet": [],
            }
        ).encode()
        for addr in sorted(masters):
            request = RemotingCommand.request(RequestCode.HEART_BEAT, None, body)
            try:
                answer = await self.remoting.invoke(addr, request, self.send_timeout_s)
            except (RemotingError, OSError):
                self._heard_by.discard(addr)
                continue
            if answer.code == ResponseCode.SUCCESS:
                self._heard_by.add(addr)

    async def _heartbeat_for(self, topic: str) -> None:
        """As prepareSendRequest: a topic whose brokers have not heard from us yet gets its
        route and a heartbeat to every broker first; then one every HEARTBEAT_INTERVAL_S."""
        await self.queues(topic)
        route = self.routes.routes.get(topic)
        if route is None or not masters_of([route]) <= self._heard_by:
            await self.heartbeat()
        self._start_heartbeats()

    def _start_heartbeats(self, *, at_once: bool = False) -> None:
        if self._heartbeats is None:
            beats = self._heartbeat_forever(at_once=at_once)
            self._heartbeats = asyncio.get_running_loop().create_task(beats)

    async def _heartbeat_forever(self, *, at_once: bool) -> None:
        if at_once:
            await self.heartbeat()
        # The flag as well as the cancel: a cancellation can be lost in a call that completes
        # in the same loop turn (asyncio.wait_for on 3.11), and close() would wait for ever.
        while not self._closing:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            if not self._closing:
                await self.heartbeat()

    async def queues(self, topic: str) -> list[MessageQueue]:
        """Where `topic` can be written; for an unknown topic, TBW102's shape (auto-create)."""
        route = await self.routes.route(topic)
        if route is not None and route.write_queues:
            return route.write_queues
        template = await self.routes.route(AUTO_CREATE_TOPIC)
        if template is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}")
        per_broker: dict[str, int] = {}
        for mq in template.write_queues:
            per_broker[mq.broker_name] = per_broker.get(mq.broker_name, 0) + 1
        queues = [
            MessageQueue(topic, name, i)
            for name, count in sorted(per_broker.items())
            for i in range(min(count, self.default_topic_queue_nums))
        ]
        self.routes.routes[topic] = type(template)(
            topic, template.brokers, queues, queues, template.fetched_at
        )
        return queues

    async def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: Callable[[list[MessageQueue]], MessageQueue] | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer; ClientError when every attempt failed."""
        uniq = self._uniq(message)
        data = message.body
        properties = self._properties(message, uniq)
        last: Exception | None = None
        tried: set[str] = set()
        # A reply goes as SEND_REPLY_MESSAGE_V2, as MQClientAPIImpl.sendMessage sends it.
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if is_reply(message.properties) else None
        for attempt in range(1 + (0 if queue or selector else self.retries)):
            target = queue or await self._pick(message.topic, selector, tried)
            try:
                return await self._send_to(
                    target, code or RequestCode.SEND_MESSAGE_V2, message, properties, data, uniq
                )
            except ClientError as exc:
                last = exc
                if exc.code not in RETRY_CODES:
                    raise
            except (RemotingError, OSError) as exc:
                last = exc
            tried.add(target.broker_name)
            if attempt == 0:
                await self.routes.route(message.topic, refresh=True)
        assert last is not None
        raise last if isinstance(last, ClientError) else ClientError(-1, str(last))

    async def recall(self, sent: SendResult, deliver_at: datetime | int) -> SendResult:
        """Cancel a timer message not yet delivered: `sent` is its send's result, `deliver_at`
        the time it was sent with. A delete marker for the same time goes to the same broker
        (RocketMQ 5's RecallMessageProcessor builds the same one): TIMER_DEL_UNIQKEY names the
        message by topic and UNIQ_KEY, and the broker delivers neither. A time past is refused
        (ClientError, MESSAGE_ILLEGAL): it may be delivered already."""
        topic = sent.queue.topic
        marker = Message(
            topic,
            b"0",
            tags=RECALL_TAG,
            deliver_at=deliver_at,
            properties={
                MessageConst.TIMER_DEL_UNIQKEY: f"{topic}+{sent.msg_id}",
                MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: sent.msg_id,
            },
        )
        return await self.send(marker, queue=sent.queue)

    async def recall_message(self, topic: str, recall_handle: str) -> str:
        """Cancel a timer message not yet delivered by the recall handle its send's result
        carries (RECALL_MESSAGE, RocketMQ 5.3.2's recallMessage): the message id recalled.
        The broker must allow it (recallMessageEnable=true); ClientError otherwise, or for a
        handle it cannot use (ILLEGAL_OPERATION: a bad handle, another topic, a time past)."""
        try:
            broker_name = RecallHandle.decode(recall_handle).broker_name
        except ValueError as exc:
            raise ClientError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        route = await self.routes.route(topic)
        addr = route.master(broker_name) if route is not None else None
        if addr is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route to {broker_name} of {topic}")
        header = RecallMessageRequestHeader(topic, recall_handle, self.group, broker_name)
        request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext())
        reply = await self.remoting.invoke(addr, request, self.send_timeout_s)
        if reply.code != ResponseCode.SUCCESS:
            raise ClientError(reply.code, reply.remark or "")
        return RecallMessageResponseHeader.from_ext(reply.ext_fields).msg_id

    async def send_oneway(self, message: Message) -> None:
        target = await self._pick(message.topic, None, set())
        header = self._header(message, target, self._properties(message, self._ids.next()))
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2,
            header.to_ext(names=SEND_V2_NAMES),
            message.body,
            oneway=True,
            serialize_type=self.serialize_type,
        )
        addr = await self._master(target)
        await self.remoting.invoke_oneway(addr, request)

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> list[SendResult]:
        """SEND_BATCH_MESSAGE: one topic, one queue (`queue`, or the next in turn), consecutive
        offsets."""
        if not messages:
            raise ValueError("an empty batch")
        topic = messages[0].topic
        if any(m.topic != topic or m.delay_level for m in messages):
            raise ValueError("a batch is one topic, without delay levels")
        target = queue or await self._pick(topic, None, set())
        ids = [self._uniq(m) for m in messages]
        encoded = b"".join(
            _batch_entry(m, self._properties(m, uniq))
            for m, uniq in zip(messages, ids, strict=True)
        )
        header = self._header(messages[0], target, "")
        header.batch = True
        request = RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE,
            header.to_ext(names=SEND_V2_NAMES),
            encoded,
            serialize_type=self.serialize_type,
        )
        reply = await self.remoting.invoke(await self._master(target), request, self.send_timeout_s)
        result = self._result(reply, target, ",".join(ids))
        offsets = result.offset_msg_id.split(",")
        return [
            SendResult(result.status, uniq, off, target, result.queue_offset + n)
            for n, (uniq, off) in enumerate(zip(ids, offsets, strict=True))
        ]

    # -- internals -------------------------------------------------------------------------------
    async def _pick(
        self,
        topic: str,
        selector: Callable[[list[MessageQueue]], MessageQueue] | None,
        avoid: set[str],
    ) -> MessageQueue:
        queues = await self.queues(topic)
        if not queues:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} has no write queue")
        if selector is not None:
            return selector(queues)
        preferred = [q for q in queues if q.broker_name not in avoid] or queues
        return preferred[next(self._turn) % len(preferred)]

    async def _master(self, queue: MessageQueue) -> str:
        if self._heartbeats is None:  # not started: heartbeats from the first send on
            self._start_heartbeats(at_once=True)
        route = await self.routes.route(queue.topic)
        addr = route.master(queue.broker_name) if route else None
        if addr is None:
            template = await self.routes.route(AUTO_CREATE_TOPIC)
            addr = template.master(queue.broker_name) if template else None
        if addr is None:
            raise ClientError(
                ResponseCode.SERVICE_NOT_AVAILABLE, f"no master for {queue.broker_name}"
            )
        return addr

    def _uniq(self, message: Message) -> str:
        """A UNIQ_KEY the caller set is kept, as the Java client's MessageClientIDSetter does."""
        preset = message.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return preset or self._ids.next()

    def _properties(self, message: Message, uniq: str) -> str:
        props = dict(message.properties)
        if message.keys:
            props[MessageConst.KEYS] = " ".join(message.keys)
        if message.tags:
            props[MessageConst.TAGS] = message.tags
        if message.delay_level:
            props[MessageConst.DELAY_TIME_LEVEL] = str(message.delay_level)
        props.update(timer_properties(message))
        props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        props.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true")
        return encode_properties(props, trailing=False).decode()

    def _header(
        self, message: Message, queue: MessageQueue, properties: str
    ) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.group,
            topic=message.topic,
            default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=queue.queue_id,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=message.flag,
            properties=properties,
            reconsume_times=0,
            unit_mode=False,
            batch=False,
        )

    async def _send_to(
        self,
        queue: MessageQueue,
        code: int,
        message: Message,
        properties: str,
        data: bytes,
        uniq: str,
    ) -> SendResult:
        header = self._header(message, queue, properties)
        request = RemotingCommand.request(
            code, header.to_ext(names=SEND_V2_NAMES), data, serialize_type=self.serialize_type
        )
        reply = await self.remoting.invoke(await self._master(queue), request, self.send_timeout_s)
        return self._result(reply, queue, uniq)

    @staticmethod
    def _result(reply: RemotingCommand, queue: MessageQueue, uniq: str) -> SendResult:
        status = _STATUS.get(reply.code)  # type: ignore[call-overload]
        if status is None:
            raise ClientError(reply.code, reply.remark or "")
        header = SendMessageResponseHeader.from_ext(reply.ext_fields)
        return SendResult(
            status,
            uniq,
            header.msg_id,
            MessageQueue(queue.topic, queue.broker_name, header.queue_id),
            header.queue_offset,
            (reply.ext_fields or {}).get("recallHandle"),
        )


def create_reply_message(request: ReceivedMessage, body: bytes) -> Message:
    """The answer to `request`, to its cluster's reply topic (MessageUtil.createReplyMessage)."""
    topic, properties = reply_properties(request)
    return Message(topic, body, properties=properties)


def timer_properties(message: Message) -> dict[str, str]:
    """TIMER_DELIVER_MS for `deliver_at`, TIMER_DELAY_SEC (whole seconds) or TIMER_DELAY_MS
    for `delay`, as RocketMQ 5's Message.setDeliverTimeMs / setDelayTimeSec / setDelayTimeMs."""
    if message.deliver_at is not None and message.delay is not None:
        raise ValueError("a message has deliver_at or delay, not both")
    if message.deliver_at is not None:
        at = message.deliver_at
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("deliver_at needs a timezone (datetime.now(timezone.utc) ...)")
            at = round(at.timestamp() * 1000)
        return {MessageConst.TIMER_DELIVER_MS: str(int(at))}
    if message.delay is not None:
        if message.delay < 0:
            raise ValueError(f"delay is {message.delay} s; it cannot be negative")
        if float(message.delay).is_integer():
            return {MessageConst.TIMER_DELAY_SEC: str(int(message.delay))}
        return {MessageConst.TIMER_DELAY_MS: str(round(message.delay * 1000))}
    return {}


def _batch_entry(message: Message, properties: str) -> bytes:
    props = properties.encode()
    size = _BATCH_HEAD.size + len(message.body) + 2 + len(props)
    return (
        _BATCH_HEAD.pack(size, 0, 0, message.flag, len(message.body))
        + message.body
        + struct.pack(">h", len(props))
        + props
    )
