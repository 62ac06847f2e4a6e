"""A pull consumer (RocketMQ's lite pull consumer): you assign queues, poll, commit.

    consumer = PullConsumer("my-group", "127.0.0.1:9876")
    await consumer.start()
    consumer.assign(await consumer.queues("Orders"))
    for message in await consumer.poll():
        ...
    await consumer.commit()                        # UPDATE_CONSUMER_OFFSET per queue
    await consumer.close()

Positions start from the group's committed offset (QUERY_CONSUMER_OFFSET), else from the
queue's minimum; `seek` moves one. Polls use long polling: a queue with nothing new is held by
the broker up to `poll_timeout_s`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from sidewinder.client.route_cache import ClientError, MessageQueue, RouteCache
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from sidewinder.protocol.message import MessageConst, encode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.remoting.client import RemotingClient

FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x2, 0x4


@dataclass(frozen=True)
class ReceivedMessage:
    queue: MessageQueue
    queue_offset: int
    body: bytes
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    store_timestamp: int
    born_timestamp: int
    reconsume_times: int

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> list[str]:
        return self.properties.get(MessageConst.KEYS, "").split()

    @classmethod
    def of(cls, queue: MessageQueue, record: MessageRecord) -> ReceivedMessage:
        props = record.properties()
        offset_id = encode_offset_msg_id(
            record.store_host.address, record.store_host.port, record.phy_offset
        )
        return cls(
            queue,
            record.queue_offset,
            record.uncompressed_body(),
            props,
            props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, offset_id),
            offset_id,
            record.store_timestamp,
            record.born_timestamp,
            record.reconsume_times,
        )


class PullConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        subscription: str = "*",
        batch: int = 32,
        poll_timeout_s: float = 5.0,
    ) -> None:
        self.group = group
        self.remoting = RemotingClient()
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])
        self.subscription = subscription
        self.batch = batch
        self.poll_timeout_s = poll_timeout_s
        self.positions: dict[MessageQueue, int] = {}
        self._client_id = f"sidewinder@{id(self):x}"

    async def start(self) -> None:
        """Nothing to do before `assign`; kept for symmetry with the producer."""

    async def close(self) -> None:
        await self.remoting.close()

    async def queues(self, topic: str) -> list[MessageQueue]:
        route = await self.routes.route(topic)
        if route is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic}")
        return route.read_queues

    def assign(self, queues: list[MessageQueue]) -> None:
        self.positions = {q: self.positions.get(q, -1) for q in queues}

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        self.positions[queue] = offset

    async def committed(self, queue: MessageQueue) -> int:
        """The group's committed offset of `queue`, -1 if it has none."""
        header = QueryConsumerOffsetRequestHeader(self.group, queue.topic, queue.queue_id)
        reply = await self._ask(queue, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        _check(reply)
        return OffsetResponseHeader.from_ext(reply.ext_fields).offset

    async def _start_position(self, queue: MessageQueue) -> int:
        committed = await self.committed(queue)
        if committed >= 0:
            return committed
        header = TopicQueueRequestHeader(queue.topic, queue.queue_id)
        reply = await self._ask(queue, RequestCode.GET_MIN_OFFSET, header.to_ext())
        _check(reply)
        return OffsetResponseHeader.from_ext(reply.ext_fields).offset

    async def poll(self) -> list[ReceivedMessage]:
        """Messages from every assigned queue that has some, after at most one long poll."""
        for queue, position in list(self.positions.items()):
            if position < 0:
                self.positions[queue] = await self._start_position(queue)
        results = await asyncio.gather(*(self._pull(q, suspend=False) for q in self.positions))
        messages = [m for batch in results for m in batch]
        if messages or not self.positions:
            return messages
        results = await asyncio.gather(*(self._pull(q, suspend=True) for q in self.positions))
        return [m for batch in results for m in batch]

    async def _pull(self, queue: MessageQueue, *, suspend: bool) -> list[ReceivedMessage]:
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=self.positions[queue],
            max_msg_nums=self.batch,
            sys_flag=FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend else 0),
            commit_offset=0,
            suspend_timeout_millis=int(self.poll_timeout_s * 1000),
            sub_version=0,
            subscription=self.subscription,
            expression_type="TAG",
        )
        reply = await self._ask(
            queue, RequestCode.PULL_MESSAGE, header.to_ext(), timeout_s=self.poll_timeout_s + 5
        )
        if reply.code in (
            ResponseCode.SUBSCRIPTION_NOT_EXIST,
            ResponseCode.SUBSCRIPTION_NOT_LATEST,
        ):
            await self._heartbeat(queue)
            return []
        if reply.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            _check(reply)
        pulled = PullMessageResponseHeader.from_ext(reply.ext_fields)
        self.positions[queue] = pulled.next_begin_offset
        if reply.code != ResponseCode.SUCCESS or not reply.body:
            return []
        return _decode(queue, reply.body_bytes)

    async def commit(self) -> None:
        """Store every queue's position as the group's offset (oneway per broker in Java)."""
        for queue, position in self.positions.items():
            if position < 0:
                continue
            header = UpdateConsumerOffsetRequestHeader(
                self.group, queue.topic, queue.queue_id, position
            )
            _check(await self._ask(queue, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext()))

    async def _heartbeat(self, queue: MessageQueue) -> None:
        data = {
            "clientID": self._client_id,
            "consumerDataSet": [
                {
                    "groupName": self.group,
                    "consumeType": "CONSUME_ACTIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {"topic": queue.topic, "subString": self.subscription, "subVersion": 0}
                    ],
                }
            ],
            "producerDataSet": [],
        }
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, json.dumps(data).encode())
        await self.remoting.invoke(await self._broker(queue), request, 3)

    async def _broker(self, queue: MessageQueue) -> str:
        route = await self.routes.route(queue.topic)
        addr = route.master(queue.broker_name) if route else None
        if addr is None:
            raise ClientError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no broker {queue.broker_name}")
        return addr

    async def _ask(
        self, queue: MessageQueue, code: int, ext: dict[str, str], timeout_s: float = 5.0
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, ext)
        return await self.remoting.invoke(await self._broker(queue), request, timeout_s)


def _decode(queue: MessageQueue, data: bytes) -> list[ReceivedMessage]:
    messages = []
    at = 0
    while at < len(data):
        record = decode_record(data, at)
        if not isinstance(record, MessageRecord):
            break
        messages.append(ReceivedMessage.of(queue, record))
        at += record.total_size
    return messages


def _check(reply: RemotingCommand) -> None:
    if reply.code != ResponseCode.SUCCESS:
        raise ClientError(reply.code, reply.remark or "")
