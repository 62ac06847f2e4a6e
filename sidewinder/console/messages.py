"""Finding and showing messages: by topic and time range, by key, by message id; a dead-letter
queue's messages and their resending.

    view = MessageView(admin, producer)
    found = await view.by_time("Orders", begin_ms, end_ms)
    one = await view.by_id("0A00000100002A9F0000000000000F2A")   # an offsetMsgId
    shown = render_body(one.body)                                    # text, JSON or hex
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sidewinder.client.admin import TOOLS_CONSUMER_GROUP, Admin
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage, offset_at, pull, queue_bound
from sidewinder.client.route_cache import MASTER_ID, ClientError, MessageQueue
from sidewinder.console.calls import fan_out
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.message import MessageConst, decode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription

DLQ_PREFIX = "%DLQ%"
# How many messages of each queue a time-range search or a DLQ page reads (the newest).
PER_QUEUE_LIMIT = 64
PULL_BATCH = 32
HEX_LIMIT = 4096
# The properties the brokers and clients set: a resent message gets the user's only.
SYSTEM_PROPERTIES = frozenset(
    {
        MessageConst.KEYS,
        MessageConst.TAGS,
        MessageConst.WAIT_STORE_MSG_OK,
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.RETRY_TOPIC,
        MessageConst.REAL_TOPIC,
        MessageConst.REAL_QUEUE_ID,
        MessageConst.TRANSACTION_PREPARED,
        MessageConst.PRODUCER_GROUP,
        MessageConst.MIN_OFFSET,
        MessageConst.MAX_OFFSET,
        MessageConst.ORIGIN_MESSAGE_ID,
        MessageConst.RECONSUME_TIME,
        MessageConst.MAX_RECONSUME_TIMES,
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.CONSUME_START_TIME,
        MessageConst.CLUSTER,
    }
)


@dataclass(frozen=True)
class RenderedBody:
    kind: str  # "text", "json", "hex" or "empty"
    text: str
    size: int


def render_body(data: bytes) -> RenderedBody:
    """A body as a person reads it: pretty JSON, else UTF-8 text, else a hex dump."""
    if not data:
        return RenderedBody("empty", "", 0)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return RenderedBody("hex", hex_dump(data[:HEX_LIMIT]), len(data))
    if text[:1] in "{[":
        try:
            return RenderedBody("json", json.dumps(json.loads(text), indent=2), len(data))
        except ValueError:
            pass
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return RenderedBody("hex", hex_dump(data[:HEX_LIMIT]), len(data))
    return RenderedBody("text", text, len(data))


def hex_dump(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
    return "\n".join(lines)


def message_json(message: ReceivedMessage, *, with_body: bool = False) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "msg_id": message.msg_id,
        "offset_msg_id": message.offset_msg_id,
        "topic": message.queue.topic,
        "origin_topic": message.topic,
        "broker": message.queue.broker_name,
        "queue_id": message.queue.queue_id,
        "queue_offset": message.queue_offset,
        "tags": message.tags,
        "keys": message.keys,
        "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp,
        "born_host": message.born_host,
        "store_host": message.store_host,
        "reconsume_times": message.reconsume_times,
        "body_size": len(message.body),
        "properties": dict(sorted(message.properties.items())),
    }
    if with_body:
        rendered = render_body(message.body)
        shown["body"] = {"kind": rendered.kind, "text": rendered.text, "size": rendered.size}
    return shown


class MessageView:
    def __init__(self, admin: Admin, producer: Producer | None = None) -> None:
        self.admin = admin
        self.producer = producer

    async def _queues(self, topic: str) -> list[tuple[str, MessageQueue]]:
        """(master address, queue) of every read queue of the topic's route."""
        route = await self.admin.route(topic)
        addrs = {}
        for broker in route.get("brokerDatas") or []:
            addr = {int(k): v for k, v in broker["brokerAddrs"].items()}.get(MASTER_ID)
            if addr is not None:
                addrs[broker["brokerName"]] = addr
        return [
            (addrs[q["brokerName"]], MessageQueue(topic, q["brokerName"], i))
            for q in route.get("queueDatas") or []
            if q["brokerName"] in addrs
            for i in range(int(q["readQueueNums"]))
        ]

    async def _read(
        self, addr: str, queue: MessageQueue, low: int, high: int
    ) -> list[ReceivedMessage]:
        """The messages of [low, high), the newest PER_QUEUE_LIMIT of them."""
        offset, found = max(low, high - PER_QUEUE_LIMIT), []
        subscription = Subscription.of(queue.topic, "*")
        while offset < high:
            result = await pull(
                self.admin.remoting,
                addr,
                TOOLS_CONSUMER_GROUP,
                queue,
                offset,
                subscription,
                batch=PULL_BATCH,
                suspend_s=None,
            )
            found += [m for m in result.messages if m.queue_offset < high]
            if result.code != ResponseCode.SUCCESS or result.next_offset <= offset:
                break
            offset = result.next_offset
        return found

    async def _range(
        self, addr: str, queue: MessageQueue, begin_ms: int | None, end_ms: int | None
    ) -> list[ReceivedMessage]:
        low = await queue_bound(self.admin.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)
        high = await queue_bound(self.admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
        if begin_ms is not None:
            low = max(low, await offset_at(self.admin.remoting, addr, queue, begin_ms))
        if end_ms is not None:
            high = min(high, await offset_at(self.admin.remoting, addr, queue, end_ms))
        messages = await self._read(addr, queue, low, high)
        return [
            m
            for m in messages
            if (begin_ms is None or m.store_timestamp >= begin_ms)
            and (end_ms is None or m.store_timestamp <= end_ms)
        ]

    async def by_time(
        self, topic: str, begin_ms: int | None = None, end_ms: int | None = None
    ) -> tuple[list[ReceivedMessage], list[str]]:
        """The topic's messages stored in [begin_ms, end_ms], newest first; the errors of the
        queues that could not be read."""
        queues = await self._queues(topic)
        outcomes = await fan_out({q: self._range(a, q, begin_ms, end_ms) for a, q in queues})
        found: list[ReceivedMessage] = []
        errors = []
        for queue, outcome in outcomes.items():
            if outcome.ok and outcome.value is not None:
                found += outcome.value
            else:
                errors.append(f"{queue.broker_name} queue {queue.queue_id}: {outcome.error}")
        found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
        return found, errors

    async def by_key(self, topic: str, key: str) -> list[ReceivedMessage]:
        try:
            return await self.admin.query_messages(topic, key)
        except ClientError as exc:
            if exc.code == ResponseCode.NO_MESSAGE:
                return []
            raise

    async def _broker_name(self, addr: str) -> str:
        info = await self.admin.cluster_info()
        for name, broker in (info.get("brokerAddrTable") or {}).items():
            if addr in broker["brokerAddrs"].values():
                return str(name)
        return addr

    async def by_id(self, msg_id: str, topic: str = "") -> list[ReceivedMessage]:
        """A message by its offsetMsgId (the broker's: address and CommitLog offset), else by
        its client id (UNIQ_KEY) in `topic`."""
        try:
            host, port, phy_offset = decode_offset_msg_id(msg_id)
        except ValueError:
            host = ""
        if host:
            addr = f"{host}:{port}"
            try:
                data = await self.admin.view_message(addr, phy_offset)
            except ClientError:
                data = b""
            record = decode_record(data) if data else None
            if isinstance(record, MessageRecord):
                queue = MessageQueue(record.topic, await self._broker_name(addr), record.queue_id)
                return [ReceivedMessage.of(queue, record)]
        if not topic:
            return []
        try:
            return await self.admin.query_messages(topic, msg_id, unique=True)
        except ClientError as exc:
            if exc.code == ResponseCode.NO_MESSAGE:
                return []
            raise

    async def dead_letters(self, group: str) -> list[ReceivedMessage]:
        """The newest messages of the group's %DLQ% topic (none when it has no such topic).
        A broker makes that topic write-only, so they are read as the tools read a queue:
        its consume queue entries (QUERY_CONSUME_QUEUE), then each record by its offset."""
        try:
            queues = await self._queues(DLQ_PREFIX + group)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return []
            raise
        outcomes = await fan_out({q: self._stored(a, q) for a, q in queues})
        found = [m for o in outcomes.values() if o.ok and o.value for m in o.value]
        found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
        return found

    async def _stored(self, addr: str, queue: MessageQueue) -> list[ReceivedMessage]:
        low = await queue_bound(self.admin.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)
        high = await queue_bound(self.admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
        index = max(low, high - PER_QUEUE_LIMIT)
        if index >= high:
            return []
        ext = {
            "topic": queue.topic,
            "queueId": str(queue.queue_id),
            "index": str(index),
            "count": str(high - index),
        }
        reply = await self.admin.ask_broker(addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
        entries = (body.loads(reply.body_bytes).get("queueData") or []) if reply.body else []
        found = []
        for entry in entries:
            record = decode_record(await self.admin.view_message(addr, int(entry["physicOffset"])))
            if isinstance(record, MessageRecord):
                found.append(ReceivedMessage.of(queue, record))
        return found

    async def consume_directly(self, group: str, client_id: str, msg_id: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the broker hands the stored message to one connected
        client of the group, whose listener consumes it; what the client answered."""
        host, port, _ = decode_offset_msg_id(msg_id)
        addr = f"{host}:{port}"
        ext = {
            "consumerGroup": group,
            "clientId": client_id,
            "msgId": msg_id,
            "brokerName": await self._broker_name(addr),
        }
        reply = await self.admin.ask_broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        return dict(body.loads(reply.body_bytes)) if reply.body else {}

    async def resend(self, message: ReceivedMessage) -> dict[str, Any]:
        """Send the message again to the topic it was first sent to (a dead letter's origin),
        with its body, tags, keys and the user's properties."""
        if self.producer is None:
            raise RuntimeError("the console has no producer")
        topic = message.properties.get(MessageConst.RETRY_TOPIC) or message.queue.topic
        if topic.startswith(DLQ_PREFIX):
            raise ValueError(f"{message.msg_id} names no original topic")
        props = {k: v for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES}
        props[MessageConst.ORIGIN_MESSAGE_ID] = message.msg_id
        sent = await self.producer.send(
            Message(topic, message.body, message.tags, message.keys, props)
        )
        return {"topic": topic, "status": sent.status, "msg_id": sent.msg_id}
