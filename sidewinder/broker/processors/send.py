"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) into the store."""

from __future__ import annotations

import functools
import ipaddress
import random
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.processors.send_batch import STORED_CODES, SendLane
from sidewinder.broker.processors.send_check import FAQ, NOT_ALLOWED_SEND_TOPICS, msg_check
from sidewinder.broker.schedule import schedule_for_delay
from sidewinder.broker.timer import (
    TIMER_MARK,
    TimerRefusal,
    TimerSettings,
    timer_for_send,
)
from sidewinder.broker.topics import (
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TopicTable,
    topic_name_problem,
)
from sidewinder.broker.transactions import to_half
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from sidewinder.protocol.message import MessageConst, property_value, without_property
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.remoting.latency import RpcLatency
from sidewinder.store.message_store import MessageStore, PutResult, PutStatus

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen


@functools.lru_cache(maxsize=4096)
def host_of(address: str) -> Host:
    """A Host from "ip:port" (IPv4 or IPv6)."""
    ip, _, port = address.rpartition(":")
    return Host(ipaddress.ip_address(ip.strip("[]")).packed, int(port))


def _is_half(header: SendMessageRequestHeader) -> bool:
    """A transactional send: the TRAN_MSG property set to true (and the PREPARED flag)."""
    return bool(header.properties) and "TRAN_MSG\x01true" in (header.properties or "")


class BatchError(ValueError):
    """A SEND_BATCH_MESSAGE body that does not decode."""


def decode_batch(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(flag, body, properties) of each message of a batch body (MessageDecoder.decodes)."""
    messages = []
    at = 0
    while at < len(data):
        if at + _BATCH_HEAD.size > len(data):
            raise BatchError(f"batch entry at byte {at} is truncated")
        total, _, _, flag, body_len = _BATCH_HEAD.unpack_from(data, at)
        body_at = at + _BATCH_HEAD.size
        props_len_at = body_at + body_len
        if body_len < 0 or props_len_at + 2 > len(data):
            raise BatchError(f"batch entry at byte {at} has a bad body length {body_len}")
        (props_len,) = struct.unpack_from(">h", data, props_len_at)
        end = props_len_at + 2 + props_len
        if props_len < 0 or end > len(data) or (total and at + total != end):
            raise BatchError(f"batch entry at byte {at} does not add up")
        messages.append((flag, data[body_at:props_len_at], data[props_len_at + 2 : end]))
        at = end
    return messages


class SendProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        max_delay_level: int = 0,
        timer: TimerSettings | None = None,
        topics_changed: Callable[[], Awaitable[None]] | None = None,
        latency: RpcLatency | None = None,
    ) -> None:
        self.max_delay_level = max_delay_level
        self.timer = timer  # None: timer properties are left alone, as RocketMQ 4 does
        # Persist topics and tell the name servers, returning once they know (the app's).
        self.topics_changed = topics_changed or _nothing_to_tell
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.store_host = host_of(config.broker_addr)
        self.cluster_property = f"{MessageConst.CLUSTER}\x01{config.broker_cluster_name}".encode()
        # The common send, many at a time (send_batch.SendLane): its `take_batch` is ours.
        # It times its requests into `latency` itself (metrics on): they skip `process`.
        self.lane = SendLane(self, latency)
        self.take_batch = self.lane.take_batch

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        names = SEND_V2_NAMES if request.code != RequestCode.SEND_MESSAGE else None
        header = SendMessageRequestHeader.from_ext(request.ext_fields, names=names)
        topic = await msg_check(
            self.config, self.topics, header, ctx.remote_address, self.topics_changed
        )
        if not topic.perm & PERM_WRITE:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] sending message is forbidden",
            )
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(topic.write_queue_nums, 1))
        born = host_of(ctx.remote_address) if ctx.remote_address != "?" else self.store_host
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            try:
                entries = decode_batch(request.body_bytes)
            except BatchError as exc:
                return request.reply(ResponseCode.MESSAGE_ILLEGAL, str(exc))
            if not entries:
                return request.reply(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
            messages = self._messages(header, header.topic, queue_id, entries, born)
            timed = self._timed_batch(request, messages)
            if isinstance(timed, RemotingCommand):
                return timed
            result = await self.store.put_messages(timed)
        else:
            known_topics = len(self.topics.topics)
            message = self._single_message(request, header, queue_id, born)
            if len(self.topics.topics) != known_topics:
                await self.topics_changed()  # a %DLQ% topic made for this send
            if isinstance(message, RemotingCommand):
                return message
            # What the producer asked for: a plain message is stored without its WAIT.
            wait = property_value(
                (header.properties or "").encode(), MessageConst.WAIT_STORE_MSG_OK
            )
            result = await self.store.put_message(
                message, wait=wait is None or wait.lower() != "false"
            )
        return self.reply(request, result, queue_id)

    def _single_message(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
        born: Host,
    ) -> MessageToStore | RemotingCommand:
        """What a single send stores (a half, a delayed or a plain message), or the refusal."""
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # RocketMQ 4.9 does this for no batch
            dead_letter = self._dead_letter_at_max(request, header)
            if isinstance(dead_letter, RemotingCommand):
                return dead_letter
            if dead_letter is not None:
                topic, queue_id = dead_letter, 0
        entry = (header.flag, request.body_bytes, (header.properties or "").encode())
        message = self._messages(header, topic, queue_id, (entry,), born)[0]
        if not _is_half(header):
            timed = self._timed(request, message)
            if isinstance(timed, RemotingCommand) or timed.topic_name == TIMER_TOPIC:
                return timed  # diverted keeps WAIT, as a delayed message does
            return self._delayed_or_plain(timed)
        if self.config.reject_transaction_message:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden",
            )
        return to_half(message)

    def plain_topic_name(self, name: str) -> bool:
        """Whether sends to `name` need none of the name checks of `process` (a valid name,
        not a system or retry topic)."""
        return (
            not topic_name_problem(name)
            and name not in NOT_ALLOWED_SEND_TOPICS
            and not name.startswith(RETRY_GROUP_TOPIC_PREFIX)
        )

    def born_host(self, address: str) -> Host:
        return host_of(address) if address != "?" else self.store_host

    def _dead_letter_at_max(
        self, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> str | RemotingCommand | None:
        """A send to %RETRY%group (a consumer's fallback when CONSUMER_SEND_MSG_BACK failed)
        that has been consumed maxReconsumeTimes goes to %DLQ%group instead: its name, None to
        keep the retry topic, or the refusal (handleRetryAndDLQ)."""
        group_name = header.topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
        group = self.groups.find(group_name)
        if group is None:
            return request.reply(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group_name} {FAQ}",
            )
        max_times = (
            header.max_reconsume_times
            if header.max_reconsume_times is not None
            else group.retry_max_times
        )
        if (header.reconsume_times or 0) < max_times:
            return None
        return self.topics.create_dlq_topic(group_name).topic_name

    def _timed(
        self, request: RemotingCommand, message: MessageToStore
    ) -> MessageToStore | RemotingCommand:
        """Into the timer topic when TIMER_* properties ask for a later time (RocketMQ 5's
        handleScheduleMessage hook), or the refusal."""
        if self.timer is None or TIMER_MARK not in message.properties:
            return message
        timed = timer_for_send(message, self.timer, int(time.time() * 1000))
        if isinstance(timed, TimerRefusal):
            return request.reply(timed.code, timed.remark)
        return timed

    def _timed_batch(
        self, request: RemotingCommand, messages: list[MessageToStore]
    ) -> list[MessageToStore] | RemotingCommand:
        """A batch's messages that ask for a time, each into the timer topic with its own.
        RocketMQ 5 reads only the batch's own properties (which a Java client leaves without
        them) and stores the messages as they are; a batch being one topic and queue, one
        that mixes timer messages with others is refused."""
        if self.timer is None or not any(TIMER_MARK in m.properties for m in messages):
            return messages
        now_ms = int(time.time() * 1000)
        timed = [timer_for_send(m, self.timer, now_ms, divert_due=True) for m in messages]
        diverted = []
        for message in timed:
            if isinstance(message, TimerRefusal):
                return request.reply(message.code, message.remark)
            diverted.append(message)
        if all(m.topic_name == TIMER_TOPIC for m in diverted):
            return diverted
        if any(m.topic_name == TIMER_TOPIC for m in diverted):
            return request.reply(
                ResponseCode.MESSAGE_ILLEGAL,
                "a batch mixes timer messages with others; send them apart",
            )
        return diverted

    def _delayed_or_plain(self, message: MessageToStore) -> MessageToStore:
        """Into the schedule topic when DELAY asks for it; a plain message is stored without
        the WAIT property, as RocketMQ 4.9 stores it (a delayed one keeps it: CommitLog
        rebuilds the properties from the map the send processor had put WAIT back into)."""
        if self.max_delay_level:
            scheduled = schedule_for_delay(message, self.max_delay_level)
            if scheduled is not message:
                return scheduled
        properties = without_property(message.properties, MessageConst.WAIT_STORE_MSG_OK)
        if properties is message.properties:
            return message
        return replace(message, properties=properties)

    def _messages(
        self,
        header: SendMessageRequestHeader,
        topic: str,
        queue_id: int,
        entries: Sequence[tuple[int, bytes, bytes]],
        born: Host,
    ) -> list[MessageToStore]:
        """What is stored of each (flag, body, properties), the header's fields shared."""
        topic_bytes, store_host = topic.encode(), self.store_host
        sys_flag, born_ts = header.sys_flag, header.born_timestamp
        reconsume, with_cluster = header.reconsume_times or 0, self.with_cluster
        return [
            MessageToStore(
                topic_bytes,
                queue_id,
                body,
                with_cluster(properties),
                flag,
                sys_flag,
                born_ts,
                born,
                store_host,
                reconsume,
            )
            for flag, body, properties in entries
        ]

    def with_cluster(self, properties: bytes) -> bytes:
        """Add the CLUSTER property; like RocketMQ 4.9's messageProperties2String, no trailing
        separator (ali-ons reads an empty property from one)."""
        properties = properties.rstrip(b"\x02")
        if not properties:
            return self.cluster_property
        return properties + b"\x02" + self.cluster_property

    def reply(self, request: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
        status = result.status
        append = result.append
        if status in STORED_CODES and append is not None:
            code = STORED_CODES[status]
            ext = SendMessageResponseHeader(
                ",".join(append.msg_ids), queue_id, append.queue_offset
            ).to_ext()
            ext["MSG_REGION"] = self.config.region_id
            ext["TRACE_ON"] = "true" if self.config.trace_on else "false"
            return request.reply(code, result.remark or None, ext_fields=ext)
        if status is PutStatus.MESSAGE_ILLEGAL:
            return request.reply(ResponseCode.MESSAGE_ILLEGAL, result.remark)
        return request.reply(ResponseCode.SERVICE_NOT_AVAILABLE, self.unavailable(result.remark))

    @staticmethod
    def unavailable(remark: str) -> str:
        return (
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full, messages are put to the slave, message store has been "
            f"shut down, etc. ({remark})"
        )


async def _nothing_to_tell() -> None:
    """topics_changed for a processor with no app around it (tests)."""
