"""What both consumers send a broker: PULL_MESSAGE and the offset queries around it, and the
messages a pull returns (decoded from the stored record format, filtered again by tag).
"""

from __future__ import annotations

from dataclasses import dataclass

from sidewinder.client.route_cache import MessageQueue, check_reply
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from sidewinder.protocol.message import MessageConst, encode_offset_msg_id
from sidewinder.protocol.record import MessageRecord, message_records
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient

FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
# A pull answered with one of these moves the position; anything else is an error.
PULL_ANSWERS = (
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)
STALE_SUBSCRIPTION = (ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST)


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
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_host: str = ""  # "ip:port", as MessageExt.getBornHostString gives it
    store_host: str = ""
    # The rest of MessageExt, for mqadmin's printMsg (its toString).
    store_size: int = 0
    body_crc: int = 0
    flag: int = 0
    prepared_transaction_offset: int = 0

    @property
    def topic(self) -> str:
        """The topic it was sent to (a redelivery from %RETRY%group names its origin)."""
        return self.properties.get(MessageConst.RETRY_TOPIC, self.queue.topic)

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
            record.phy_offset,
            record.sys_flag,
            str(record.born_host),
            str(record.store_host),
            record.total_size,
            record.body_crc,
            record.flag,
            record.prepared_transaction_offset,
        )


@dataclass(frozen=True)
class PullResult:
    code: int
    next_offset: int
    messages: list[ReceivedMessage]
    stale_subscription: bool = False
    # The broker to pull this queue from next (suggestWhichBrokerId): the slave, when the
    # master finds the consumer reading data it no longer holds in memory.
    suggested_broker_id: int = 0


def decode_messages(
    queue: MessageQueue, data: bytes, subscription: Subscription | None = None
) -> list[ReceivedMessage]:
    messages = []
    for record in message_records(data):
        message = ReceivedMessage.of(queue, record)
        if subscription is None or subscription.matches_tag(message.tags):
            messages.append(message)
    return messages


async def pull(
    remoting: RemotingClient,
    addr: str,
    group: str,
    queue: MessageQueue,
    offset: int,
    subscription: Subscription,
    *,
    batch: int,
    suspend_s: float | None,
    commit_offset: int = -1,
) -> PullResult:
    """One PULL_MESSAGE; held by the broker up to `suspend_s` when nothing is there yet.
    `commit_offset` (> 0) rides along for the broker to store: only a master's is kept, so
    callers pulling from a slave pass none, as the Java client clears the flag there."""
    flags = FLAG_SUBSCRIPTION
    if suspend_s:
        flags |= FLAG_SUSPEND
    if commit_offset > 0:
        flags |= FLAG_COMMIT_OFFSET
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=offset,
        max_msg_nums=batch,
        sys_flag=flags,
        commit_offset=max(commit_offset, 0),
        suspend_timeout_millis=int((suspend_s or 0) * 1000),
        sub_version=subscription.sub_version,
        subscription=subscription.sub_string,
        expression_type=subscription.expression_type,
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    reply = await remoting.invoke(addr, request, (suspend_s or 0) + 10)
    if reply.code in STALE_SUBSCRIPTION:
        return PullResult(reply.code, offset, [], stale_subscription=True)
    if reply.code not in PULL_ANSWERS:
        check_reply(reply)
    pulled = PullMessageResponseHeader.from_ext(reply.ext_fields)
    messages = []
    if reply.code == ResponseCode.SUCCESS and reply.body:
        messages = decode_messages(queue, reply.body_bytes, subscription)
    return PullResult(
        reply.code, pulled.next_begin_offset, messages, False, pulled.suggest_which_broker_id
    )


async def committed_offset(
    remoting: RemotingClient, addr: str, group: str, queue: MessageQueue
) -> int:
    """The group's stored offset of `queue`, -1 when it has none (QUERY_NOT_FOUND)."""
    header = QueryConsumerOffsetRequestHeader(group, queue.topic, queue.queue_id)
    request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
    reply = await remoting.invoke(addr, request, 5)
    if reply.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    check_reply(reply)
    return OffsetResponseHeader.from_ext(reply.ext_fields).offset


async def commit_offset(
    remoting: RemotingClient, addr: str, group: str, queue: MessageQueue, offset: int
) -> None:
    header = UpdateConsumerOffsetRequestHeader(group, queue.topic, queue.queue_id, offset)
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
    check_reply(await remoting.invoke(addr, request, 5))


async def queue_bound(remoting: RemotingClient, addr: str, queue: MessageQueue, code: int) -> int:
    """GET_MIN_OFFSET or GET_MAX_OFFSET of one queue."""
    header = TopicQueueRequestHeader(queue.topic, queue.queue_id)
    reply = await remoting.invoke(addr, RemotingCommand.request(code, header.to_ext()), 5)
    check_reply(reply)
    return OffsetResponseHeader.from_ext(reply.ext_fields).offset


async def offset_at(
    remoting: RemotingClient, addr: str, queue: MessageQueue, timestamp_ms: int
) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp_ms`."""
    header = SearchOffsetRequestHeader(queue.topic, queue.queue_id, timestamp_ms)
    request = RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
    reply = await remoting.invoke(addr, request, 5)
    check_reply(reply)
    return OffsetResponseHeader.from_ext(reply.ext_fields).offset
