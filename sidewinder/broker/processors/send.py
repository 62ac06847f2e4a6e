"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) into the store."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import random
import struct
from dataclasses import replace

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.processors.send_batch import (
    INT32_MAX,
    INT64_MAX,
    SendReplyFrames,
    strip_wait,
)
from sidewinder.broker.schedule import schedule_for_delay
from sidewinder.broker.topics import RETRY_GROUP_TOPIC_PREFIX, TopicTable, topic_name_problem
from sidewinder.broker.transactions import to_half
from sidewinder.protocol.codes import RequestCode, ResponseCode, SerializeType
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from sidewinder.protocol.message import MessageConst, property_value, without_property
from sidewinder.protocol.record import TRANSACTION_TYPE_MASK, Host, MessageToStore
from sidewinder.remoting.codec import encode_frame
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.commit_log import AppendResult, AppendStatus
from sidewinder.store.flush import FlushError
from sidewinder.store.message_store import AppendedMany, MessageStore, PutResult, PutStatus

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
NOT_ALLOWED_SEND_TOPICS = {
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
}
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
    ) -> None:
        self.max_delay_level = max_delay_level
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.store_host = host_of(config.broker_addr)
        self.cluster_property = f"{MessageConst.CLUSTER}\x01{config.broker_cluster_name}".encode()
        # Topic names a plain send may go to without the checks of `process` (valid, not a
        # system or retry topic): name -> its bytes, or b"" for one that needs them.
        self._plain_names: dict[str, bytes] = {}
        self._replies = SendReplyFrames(config.region_id, config.trace_on, self.store_host)
        self.batch_enabled = True
        self.batched = 0  # sends the batch path stored, ever

    # -- the batch path ------------------------------------------------------------------------
    def take_batch(
        self, ctx: RequestContext, requests: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """The plain SEND_MESSAGE_V2 of one received chunk, stored in one pass and answered in
        one write (durable first when the producer waits under SYNC_FLUSH). Everything else,
        and anything that needs a refusal, goes back to `process`."""
        if not self.batch_enabled or not self.config.broker_permission & PERM_WRITE:
            return requests
        address = ctx.remote_address
        born = host_of(address) if address != "?" else self.store_host
        others: list[RemotingCommand] = []
        taken: list[RemotingCommand] = []
        messages: list[MessageToStore] = []
        waits: list[bool] = []
        for request in requests:
            plain = None
            if request.code == RequestCode.SEND_MESSAGE_V2:
                plain = self._plain(request, born)
            if plain is None:
                others.append(request)
            else:
                taken.append(request)
                messages.append(plain[0])
                waits.append(plain[1])
        if messages:
            self.batched += len(messages)
            self._store_and_answer(ctx, taken, messages, waits)
        return others

    def _store_and_answer(
        self,
        ctx: RequestContext,
        requests: list[RemotingCommand],
        messages: list[MessageToStore],
        waits: list[bool],
    ) -> None:
        appended = self.store.append_many(messages)
        stored = len(appended.phy_offsets)
        now: list[int] = []  # indexes answered at once
        later: list[int] = []  # answered once durable
        sync = self.store.sync_flush
        for n in range(stored):
            (later if sync and waits[n] else now).append(n)
        frames = [self._stored_frame(requests[n], messages[n], appended, n) for n in now]
        for n in range(stored, len(requests)):
            reply = requests[n].reply(
                ResponseCode.SERVICE_NOT_AVAILABLE, self._unavailable(appended.remark)
            )
            frames.append(encode_frame(reply))
        if frames:
            ctx.write_frames([f for f in frames if f])
        if later:
            last = later[-1]
            end = appended.phy_offsets[last] + messages[last].record_size
            self.store.durable(end).add_done_callback(
                lambda done: self._answer_durable(ctx, requests, messages, appended, later, done)
            )

    def _answer_durable(
        self,
        ctx: RequestContext,
        requests: list[RemotingCommand],
        messages: list[MessageToStore],
        appended: AppendedMany,
        indexes: list[int],
        done: asyncio.Future[bool],
    ) -> None:
        error = done.exception()
        if error is None and done.result():
            frames = [self._stored_frame(requests[n], messages[n], appended, n) for n in indexes]
        else:
            frames = []
            for n in indexes:
                if isinstance(error, FlushError):
                    result = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=str(error))
                else:
                    result = PutResult(
                        PutStatus.FLUSH_DISK_TIMEOUT,
                        self._append_result(messages[n], appended, n),
                        "not flushed within syncFlushTimeout "
                        f"{self.store.config.sync_flush_timeout} ms",
                    )
                request = requests[n]
                if not request.flag & ONEWAY_FLAG:
                    frames.append(encode_frame(self._reply(request, result, messages[n].queue_id)))
        ctx.write_frames([f for f in frames if f])

    def _stored_frame(
        self, request: RemotingCommand, message: MessageToStore, appended: AppendedMany, n: int
    ) -> bytes:
        """The SUCCESS reply to a stored send, b"" for a oneway one."""
        if request.flag & ONEWAY_FLAG:
            return b""
        config = self.config
        if request.serialize_type is SerializeType.JSON:
            replies = self._replies
            if replies.key != (config.region_id, config.trace_on):
                replies = self._replies = SendReplyFrames(
                    config.region_id, config.trace_on, self.store_host
                )
            return replies.success(
                request.opaque, appended.phy_offsets[n], message.queue_id, appended.queue_offsets[n]
            )
        result = PutResult(PutStatus.PUT_OK, self._append_result(message, appended, n))
        return encode_frame(self._reply(request, result, message.queue_id))

    def _append_result(
        self, message: MessageToStore, appended: AppendedMany, n: int
    ) -> AppendResult:
        phy = appended.phy_offsets[n]
        return AppendResult(
            AppendStatus.PUT_OK,
            phy,
            message.record_size,
            appended.queue_offsets[n],
            1,
            0,
            (phy,),
            self.store_host,
        )

    def _plain(self, request: RemotingCommand, born: Host) -> tuple[MessageToStore, bool] | None:
        """The message of a SEND_MESSAGE_V2 the batch path can store as it is, and whether its
        producer waits for the flush; None for one that goes through `process`: a header that
        needs checking, a topic to create or refuse, a retry, delayed or transactional send."""
        ext = request.ext_fields
        if ext is None or "a" not in ext or "c" not in ext or "d" not in ext:
            return None
        try:
            name, queue, sys_text, born_text, flag_text = (
                ext["b"],
                ext["e"],
                ext["f"],
                ext["g"],
                ext["h"],
            )
            reconsume_text = ext.get("j", "0")
            # Plain decimal digits only (no sign, space or "_" that int() would take), then
            # the ranges: anything else is for process() to accept or refuse.
            numbers = queue + sys_text + born_text + flag_text + reconsume_text
            if not (numbers.isdigit() and numbers.isascii()):
                return None
            queue_id, sys_flag, flag = int(queue), int(sys_text), int(flag_text)
            born_timestamp, reconsume = int(born_text), int(reconsume_text)
        except (KeyError, ValueError):
            return None
        if (
            sys_flag & TRANSACTION_TYPE_MASK
            or sys_flag > INT32_MAX
            or flag > INT32_MAX
            or reconsume > INT32_MAX
            or born_timestamp > INT64_MAX
        ):
            return None
        topic_bytes = self._plain_names.get(name)
        if topic_bytes is None:
            topic_bytes = self._plain_name(name)
        topic = self.topics.get(name)
        if (
            not topic_bytes
            or topic is None
            or not topic.perm & PERM_WRITE
            or (queue_id >= topic.write_queue_nums and queue_id >= topic.read_queue_nums)
        ):
            return None
        properties = ext.get("i") or ""
        if "DELAY\x01" in properties or "TRAN_MSG\x01" in properties:
            return None
        properties, wait = strip_wait(properties)
        message = MessageToStore(
            topic_bytes,
            queue_id,
            request.body_bytes,
            self._with_cluster(properties.encode("utf-8", "surrogateescape")),
            flag,
            sys_flag,
            born_timestamp,
            born,
            self.store_host,
            reconsume,
        )
        if self.store.illegal(message):
            return None
        return message, wait

    def _plain_name(self, name: str) -> bytes:
        if len(self._plain_names) > 100_000:
            self._plain_names.clear()
        plain = (
            not topic_name_problem(name)
            and name not in NOT_ALLOWED_SEND_TOPICS
            and not name.startswith(RETRY_GROUP_TOPIC_PREFIX)
        )
        encoded = name.encode() if plain else b""
        self._plain_names[name] = encoded
        return encoded

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        names = SEND_V2_NAMES if request.code != RequestCode.SEND_MESSAGE else None
        header = SendMessageRequestHeader.from_ext(request.ext_fields, names=names)
        refusal = self._check(request, header)
        if refusal is not None:
            return refusal
        topic = self.topics.get(header.topic)
        if topic is None:
            topic = self.topics.create_for_send(
                header.topic, header.default_topic, header.default_topic_queue_nums
            )
            if topic is not None:
                # As RocketMQ's createTopicInSendMessageMethod: the name servers know the new
                # topic before the producer hears back, so a consumer started next finds it.
                await self.topics_changed()
        if topic is None:
            return request.reply(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!{FAQ}",
            )
        if not topic.perm & PERM_WRITE:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] sending message is forbidden",
            )
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(topic.write_queue_nums, 1))
        if queue_id >= max(topic.write_queue_nums, topic.read_queue_nums):
            return request.reply(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {topic} Producer: {ctx.remote_address}",
            )
        born = host_of(ctx.remote_address) if ctx.remote_address != "?" else self.store_host
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            try:
                entries = decode_batch(request.body_bytes)
            except BatchError as exc:
                return request.reply(ResponseCode.MESSAGE_ILLEGAL, str(exc))
            if not entries:
                return request.reply(ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
            messages = [
                self._message(header, header.topic, queue_id, flag, body, props, born)
                for flag, body, props in entries
            ]
            result = await self.store.put_messages(messages)
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
        return self._reply(request, result, queue_id)

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
        message = self._message(
            header,
            topic,
            queue_id,
            header.flag,
            request.body_bytes,
            (header.properties or "").encode(),
            born,
        )
        if not _is_half(header):
            return self._delayed_or_plain(message)
        if self.config.reject_transaction_message:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden",
            )
        return to_half(message)

    def _check(
        self, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | None:
        if not self.config.broker_permission & PERM_WRITE:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending message is forbidden",
            )
        problem = topic_name_problem(header.topic)
        if problem:
            return request.reply(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            return request.reply(
                ResponseCode.NO_PERMISSION,
                f"Sending message to topic[{header.topic}] is forbidden.",
            )
        return None

    async def topics_changed(self) -> None:
        """Replaced by the app: persist topics and tell the name servers, returning once the
        name servers know."""

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

    def _message(
        self,
        header: SendMessageRequestHeader,
        topic: str,
        queue_id: int,
        flag: int,
        body: bytes,
        properties: bytes,
        born: Host,
    ) -> MessageToStore:
        return MessageToStore(
            topic=topic.encode(),
            queue_id=queue_id,
            body=body,
            properties=self._with_cluster(properties),
            flag=flag,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born,
            store_host=self.store_host,
            reconsume_times=header.reconsume_times or 0,
        )

    def _with_cluster(self, properties: bytes) -> bytes:
        """Add the CLUSTER property; like RocketMQ 4.9's messageProperties2String, no trailing
        separator (ali-ons reads an empty property from one)."""
        properties = properties.rstrip(b"\x02")
        if not properties:
            return self.cluster_property
        return properties + b"\x02" + self.cluster_property

    def _reply(self, request: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
        status = result.status
        append = result.append
        if status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT) and append is not None:
            code = (
                ResponseCode.SUCCESS
                if status is PutStatus.PUT_OK
                else ResponseCode.FLUSH_DISK_TIMEOUT
            )
            ext = SendMessageResponseHeader(
                ",".join(append.msg_ids), queue_id, append.queue_offset
            ).to_ext()
            ext["MSG_REGION"] = self.config.region_id
            ext["TRACE_ON"] = "true" if self.config.trace_on else "false"
            return request.reply(code, result.remark or None, ext_fields=ext)
        if status is PutStatus.MESSAGE_ILLEGAL:
            return request.reply(ResponseCode.MESSAGE_ILLEGAL, result.remark)
        return request.reply(ResponseCode.SERVICE_NOT_AVAILABLE, self._unavailable(result.remark))

    @staticmethod
    def _unavailable(remark: str) -> str:
        return (
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full, messages are put to the slave, message store has been "
            f"shut down, etc. ({remark})"
        )
