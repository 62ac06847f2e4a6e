"""The common sends, many at a time: SendLane serves the plain SEND_MESSAGE_V2 and
SEND_BATCH_MESSAGE requests of one received chunk in one pass (all their messages stored with
one CommitLog append, answered in one write, durable first where the producer waits under
SYNC_FLUSH). It takes them either decoded (`take_batch`, which the processor table hands each
chunk's share of requests) or straight from their frames (`take_frames`, the table's frame lane
with the native extension: a V2 header read by `send_header.send_v2_fields` without the generic
decode; a batch's header, one for all its messages, by `send_header.send_batch_fields`).
Anything that needs a check or a refusal, and every other request, goes the way of
SendProcessor.process, its reference.

A SUCCESS reply comes from a pre-encoded template: byte for byte the frame the generic path
encodes (tests/broker/test_send_batch.py compares the two, and runs the same pipelined frames
through the lane and through `process`).

With metrics on, the lane times what it serves into rocketmq_rpc_latency itself (its requests
never reach the table's timed `process`): one clock reading when a chunk comes in and one when
its replies are written (or, for the sends that wait for the flush, when those are), each
request of the chunk recorded with that time, by request and response code.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson

from sidewinder.broker.config import PERM_WRITE
from sidewinder.broker.processors.send_header import (
    SendV2Fields,
    batch_header_parses,
    send_batch_fields,
    send_v2_fields,
)
from sidewinder.protocol.batch_record import BatchToStore, batch_to_store
from sidewinder.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from sidewinder.protocol.command import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand
from sidewinder.protocol.message import MessageConst, encode_offset_msg_id, property_value
from sidewinder.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageToStore,
)
from sidewinder.remoting.codec import RawFrame, encode_frame
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.remoting.latency import LatencyKey, RpcLatency
from sidewinder.store.commit_log import AppendResult, AppendStatus
from sidewinder.store.message_store import AppendedMany, PutResult, PutStatus

if TYPE_CHECKING:
    from sidewinder.broker.processors.send import SendProcessor

# A stored message's answer: its ids, under the code of what became of it beyond the store
# (RocketMQ's sendOK statuses).
STORED_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}

_PREFIX = struct.Struct(">ii")
_JSON_TYPE = SerializeType.JSON << 24
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
# How a SEND_BATCH_MESSAGE JSON header says its code (the Java and Go clients both write it so);
# the full decode then checks it.
_BATCH_CODE = b'"code":%d' % RequestCode.SEND_BATCH_MESSAGE
# One request the lane serves: opaque, flag, serialize type, the index of its item in the chunk's
# list (a MessageToStore, or a BatchToStore for a batch send), and how many messages that holds.
Ask = tuple[int, int, SerializeType, int, int]
_SINGLE, _BATCH = int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)
Item = MessageToStore | BatchToStore


def strip_wait(properties: str) -> tuple[str, bool]:
    """The properties less WAIT, and whether the producer waits for the flush (RocketMQ: unless
    WAIT is "false"). A plain message is stored without it, as RocketMQ 4.9 stores it."""
    at = properties.find("WAIT\x01")
    while at > 0 and properties[at - 1] != "\x02":  # the tail of another name
        at = properties.find("WAIT\x01", at + 1)
    if at == -1:
        return properties, True
    end = properties.find("\x02", at)
    if end == -1:
        value = properties[at + 5 :]
        rest = properties[: max(at - 1, 0)]
    else:
        value = properties[at + 5 : end]
        rest = properties[:at] + properties[end + 1 :]
    if "WAIT\x01" in rest:  # another one: all go, the first one says (as on the slow path)
        rest, _ = strip_wait(rest)
    return rest, value.lower() != "false"


class SendReplyFrames:
    """Encoded SUCCESS replies to SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, the numbers filled
    into a template: msgId (the offsetMsgIds, comma-joined for a batch), queueId, the queue
    offset of the first message, opaque."""

    def __init__(self, region: str, trace_on: bool, store_host: Host) -> None:
        self.key = (region, trace_on)
        host_hex = encode_offset_msg_id(store_host.address, store_host.port, 0)[:-16]
        self._msg_id = host_hex.encode() + b"%016X"  # the host's hex, then the offset's
        tail = orjson.dumps({"MSG_REGION": region, "TRACE_ON": "true" if trace_on else "false"})
        head = b'{"code":0,"extFields":{"msgId":"'
        rest = (
            b'","queueId":"%d","queueOffset":"%d",'
            + tail[1:-1].replace(b"%", b"%%")
            + b'},"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON",'
            + b'"version":'
            + str(CURRENT_VERSION).encode()
            + b"}"
        )
        self._header = head + self._msg_id + rest
        self._header_many = head + b"%s" + rest

    def success(self, opaque: int, phy_offset: int, queue_id: int, queue_offset: int) -> bytes:
        header = self._header % (phy_offset, queue_id, queue_offset, opaque)
        return _PREFIX.pack(4 + len(header), _JSON_TYPE | len(header)) + header

    def success_many(
        self, opaque: int, phy_offsets: list[int], queue_id: int, queue_offset: int
    ) -> bytes:
        """A batch's: every message's offsetMsgId, comma-joined (AppendResult.msg_ids)."""
        msg_id = self._msg_id
        ids = b",".join([msg_id % phy for phy in phy_offsets])
        header = self._header_many % (ids, queue_id, queue_offset, opaque)
        return _PREFIX.pack(4 + len(header), _JSON_TYPE | len(header)) + header


class _Batches:
    """Where a chunk's batch sends go: its lists of messages, asks and waits (those the intake
    loop fills with the single sends), and the bytes of the records before each batch, summed
    only when a batch asks. Made at the chunk's first batch: single sends pay nothing for it."""

    __slots__ = ("asks", "messages", "size", "sized", "waits")

    def __init__(self, asks: list[Ask], messages: list[Item], waits: list[bool]) -> None:
        self.asks = asks
        self.messages = messages
        self.waits = waits
        self.size = 0  # bytes of the records of messages[:sized]
        self.sized = 0

    def record_bytes(self) -> int:
        """Bytes of the records of the chunk's messages so far."""
        messages = self.messages
        for n in range(self.sized, len(messages)):
            self.size += messages[n].record_size
        self.sized = len(messages)
        return self.size


class SendLane:
    def __init__(self, processor: SendProcessor, latency: RpcLatency | None = None) -> None:
        self.processor = processor
        self.latency = latency  # None: metrics off, nothing timed
        self.config = processor.config
        self.store = processor.store
        self._topics = processor.topics.topics  # name -> TopicConfig, read per send
        self.store_host = processor.store_host
        # The CLUSTER property a stored send ends with (SendProcessor.with_cluster's rule).
        self._cluster_property = processor.cluster_property
        self._cluster_tail = b"\x02" + processor.cluster_property
        # Topic names a plain send may go to without the checks of `process`: name -> its
        # bytes, or b"" for one that needs them.
        self._plain_names: dict[str, bytes] = {}
        self._replies = SendReplyFrames(
            self.config.region_id, self.config.trace_on, self.store_host
        )
        self.enabled = True
        self.batched = 0  # messages the lane stored, ever

    def take_batch(
        self, ctx: RequestContext, requests: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """The decoded requests of one chunk: the plain sends stored and answered, the rest
        returned (for `process`)."""
        if not self.enabled or not self.config.broker_permission & PERM_WRITE:
            return requests
        started = time.perf_counter() if self.latency is not None else 0.0
        born = self.processor.born_host(ctx.remote_address)
        size_limit = self._size_limit()
        others: list[RemotingCommand] = []
        asks: list[Ask] = []
        messages: list[Item] = []
        waits: list[bool] = []
        batches: _Batches | None = None
        rest = iter(requests)
        for request in rest:
            if request.code == RequestCode.SEND_MESSAGE_V2:
                fields = fields_from_ext(request)
                if fields is not None:
                    plain = self._plain(fields, request.body_bytes, born, size_limit)
                    if plain is not None:
                        ask = request.opaque, request.flag, request.serialize_type, len(messages), 1
                        asks.append(ask)
                        messages.append(plain[0])
                        waits.append(plain[1])
                        continue
            elif request.code == RequestCode.SEND_BATCH_MESSAGE:
                fields = fields_from_ext(request)
                if fields is not None and batch_header_parses(request.ext_fields or {}):
                    batches = batches or _Batches(asks, messages, waits)
                    taken = self._take_batch_send(
                        batches, fields, request.serialize_type, request.body_bytes, born
                    )
                    if taken is None:  # this one and the rest go to `process`, in order
                        others.append(request)
                        others += rest
                        break
                    if taken:
                        continue
            others.append(request)
        if messages:
            self._store_and_answer(ctx, asks, messages, waits, started)
        return others

    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """The frames of one chunk: the plain sends, read from their JSON headers, stored and
        answered; the rest returned undecoded."""
        if not self.enabled or not self.config.broker_permission & PERM_WRITE:
            return frames
        started = time.perf_counter() if self.latency is not None else 0.0
        born = self.processor.born_host(ctx.remote_address)
        size_limit = self._size_limit()
        others: list[RawFrame] = []
        asks: list[Ask] = []
        messages: list[Item] = []
        waits: list[bool] = []
        batches: _Batches | None = None
        json = SerializeType.JSON
        rest = iter(frames)
        for frame in rest:
            if frame.serialize_type is json:
                fields = send_v2_fields(frame.header)
                if fields is not None:
                    if fields[1] & RESPONSE_FLAG:
                        plain = None
                    else:
                        plain = self._plain(fields, frame.body or b"", born, size_limit)
                    if plain is not None:
                        asks.append((fields[0], fields[1], json, len(messages), 1))
                        messages.append(plain[0])
                        waits.append(plain[1])
                        continue
                elif _BATCH_CODE in frame.header:
                    fields = send_batch_fields(frame.header)
                    if fields is not None and not fields[1] & RESPONSE_FLAG:
                        batches = batches or _Batches(asks, messages, waits)
                        body = frame.body or b""
                        taken = self._take_batch_send(batches, fields, json, body, born)
                        if taken is None:  # this one and the rest go to `process`, in order
                            others.append(frame)
                            others += rest
                            break
                        if taken:
                            continue
            others.append(frame)
        if messages:
            self._store_and_answer(ctx, asks, messages, waits, started)
        return others

    def _plain(
        self, fields: SendV2Fields, body: bytes, born: Host, size_limit: int
    ) -> tuple[MessageToStore, bool] | None:
        """The message of a single send the lane can store as it is, and whether its producer
        waits for the flush; None for one that goes through `process`: a topic to create or
        refuse, a retry, delayed or transactional send, a number out of range, a message too
        big (`size_limit`: the CommitLog's, see `_size_limit`)."""
        topic_bytes = self._target(fields)
        if topic_bytes is None:
            return None
        _, _, _, queue_id, sys_flag, born_timestamp, flag, reconsume, properties = fields
        properties, wait = strip_wait(properties)
        encoded = properties.encode("utf-8", "surrogateescape").rstrip(b"\x02")
        message = MessageToStore(
            topic_bytes,
            queue_id,
            body,
            encoded + self._cluster_tail if encoded else self._cluster_property,
            flag,
            sys_flag,
            born_timestamp,
            born,
            self.store_host,
            reconsume,
        )
        # A plain name is at most 127 ASCII characters and the numbers fit: what is left of
        # CommitLog.illegal is the sizes.
        if message.record_size > size_limit or len(message.properties) > MAX_PROPERTIES_LENGTH:
            return None
        return message, wait

    def _take_batch_send(
        self,
        batches: _Batches,
        fields: SendV2Fields,
        serialize_type: SerializeType,
        body: bytes,
        born: Host,
    ) -> bool | None:
        """Add a batch send the lane can store as it is to the chunk's sends: True; False for
        one that goes through `process` (see `_target`; a body `process` refuses; a batch the
        CommitLog refuses). None when it would not fit what is left of the CommitLog segment
        after the chunk's sends before it: `process` is to store it in the next segment (a
        batch stays in one, as in RocketMQ) and, to keep their order, the rest of the chunk."""
        topic = self._target(fields)
        # `_target` reads the batch's own properties; a timer message's are its own, in the
        # body: `process` diverts each into the timer topic (a match in a body is only slower).
        if topic is None or b"TIMER_DEL" in body:
            return False
        batch = self._batch(body, topic, fields, born)
        if batch is None:
            return False
        size = batch.record_size
        if size > self.store.max_message_size:
            return False
        if batches.record_bytes() + size + END_FILE_MIN_BLANK_LENGTH > self._segment_room():
            return None
        batches.asks.append(
            (fields[0], fields[1], serialize_type, len(batches.messages), batch.count)
        )
        batches.messages.append(batch)
        # The store's rule for a batch (MessageStore.put_messages): its first message's WAIT.
        wait = property_value(batch.first_properties(), MessageConst.WAIT_STORE_MSG_OK)
        batches.waits.append(wait is None or wait.lower() != "false")
        return True

    def _target(self, fields: SendV2Fields) -> bytes | None:
        """The topic name, encoded, a send (single or batch) may go to without the checks of
        `process`; None for a send that needs them: a topic to create or refuse, a retry,
        delayed or transactional send, a number out of range."""
        _, _, name, queue_id, sys_flag, born_timestamp, flag, reconsume, properties = fields
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
        topic = self._topics.get(name)
        if (
            not topic_bytes
            or topic is None
            or not topic.perm & PERM_WRITE
            or (queue_id >= topic.write_queue_nums and queue_id >= topic.read_queue_nums)
            or "DELAY\x01" in properties
            or "TIMER_DEL" in properties
            or "TRAN_MSG\x01" in properties
        ):
            return None
        return topic_bytes

    def _batch(
        self, data: bytes, topic: bytes, fields: SendV2Fields, born: Host
    ) -> BatchToStore | None:
        """The batch body's messages as `process` stores them (send.decode_batch, then
        SendProcessor._messages: the header's fields shared, each message's properties ending
        with the CLUSTER one), sized and checked but not built: the CommitLog's append writes
        their records in one go (batch_record). None for a body `process` refuses, or a message
        whose properties the CommitLog does."""
        _, _, _, queue_id, sys_flag, born_timestamp, _, reconsume, _ = fields
        shared = MessageToStore(
            topic, queue_id, b"", b"", 0, sys_flag, born_timestamp, born, self.store_host, reconsume
        )
        return batch_to_store(data, shared, self._cluster_property)

    def _size_limit(self) -> int:
        """The largest record the CommitLog takes (maxMessageSize, and a segment's room)."""
        return self.store.largest_record()

    def _segment_room(self) -> int:
        """How many bytes the next append has in the CommitLog's segment: what the current one
        has left, or a whole new one's when there is none or it is full (the append makes it)."""
        return self.store.segment_room()

    def _plain_name(self, name: str) -> bytes:
        if len(self._plain_names) > 100_000:
            self._plain_names.clear()
        encoded = name.encode() if self.processor.plain_topic_name(name) else b""
        self._plain_names[name] = encoded
        return encoded

    # -- answering --------------------------------------------------------------------------------
    def _store_and_answer(
        self,
        ctx: RequestContext,
        asks: list[Ask],
        messages: list[Item],
        waits: list[bool],
        started: float,
    ) -> None:
        appended = self.store.append_many(messages)
        # The asks whose items were appended: the first ones (ask n has item n).
        answered = len(appended.phy_offsets)
        self.batched += sum(ask[4] for ask in asks[:answered])
        now: list[int] = []  # indexes answered at once
        later: list[int] = []  # answered once durable
        late = self.store.acknowledges_late
        for n in range(answered):
            (later if late and waits[n] else now).append(n)
        frames = self._stored_frames(asks, messages, appended, now)
        unavailable = self.processor.unavailable(appended.remark)
        for n in range(answered, len(asks)):
            frames.append(
                self._failed_frame(asks[n], ResponseCode.SERVICE_NOT_AVAILABLE, unavailable)
            )
        if frames:
            ctx.write_frames([f for f in frames if f])
        if self.latency is not None:
            self._observe(asks, messages, now, ResponseCode.SUCCESS, started)
            failed = range(answered, len(asks))
            self._observe(asks, messages, failed, ResponseCode.SERVICE_NOT_AVAILABLE, started)
        if later:
            last = asks[later[-1]][3]
            end = appended.phy_offsets[last] + messages[last].record_size
            self.store.settled(end).add_done_callback(
                lambda done: self._answer_settled(
                    ctx, asks, messages, appended, later, done, started
                )
            )

    def _answer_settled(
        self,
        ctx: RequestContext,
        asks: list[Ask],
        messages: list[Item],
        appended: AppendedMany,
        indexes: list[int],
        done: asyncio.Future[PutStatus],
        started: float,
    ) -> None:
        error = done.exception()
        status = PutStatus.SERVICE_NOT_AVAILABLE if error is not None else done.result()
        code: int = ResponseCode.SUCCESS
        if status is PutStatus.PUT_OK:
            frames = self._stored_frames(asks, messages, appended, indexes)
        else:
            frames = []
            code = STORED_CODES.get(status, ResponseCode.SERVICE_NOT_AVAILABLE)
            for n in indexes:
                first = asks[n][3]
                if error is not None:
                    result = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=str(error))
                else:
                    result = PutResult(
                        status,
                        self._append_result(asks[n], messages, appended),
                        self.store.settle_remark(status),
                    )
                frames.append(self._generic_frame(asks[n], result, messages[first].queue_id))
        ctx.write_frames([f for f in frames if f])
        if self.latency is not None:
            self._observe(asks, messages, indexes, code, started)

    def _observe(
        self,
        asks: list[Ask],
        messages: list[Item],
        indexes: Iterable[int],
        response_code: int,
        started: float,
    ) -> None:
        """Record these answered requests in rocketmq_rpc_latency, each with the time since
        their chunk came in (as `Timed` records a request through `process`)."""
        assert self.latency is not None
        elapsed_ms = (time.perf_counter() - started) * 1000
        counts: dict[LatencyKey, int] = {}
        for n in indexes:
            flag, first = asks[n][1], asks[n][3]
            code = _BATCH if isinstance(messages[first], BatchToStore) else _SINGLE
            if flag & ONEWAY_FLAG:
                key = (code, -1, False, "oneway")
            else:
                key = (code, response_code, False, "success")
            counts[key] = counts.get(key, 0) + 1
        for key, times in counts.items():
            self.latency.observe(key, elapsed_ms, times)

    def _stored_frames(
        self,
        asks: list[Ask],
        messages: list[Item],
        appended: AppendedMany,
        indexes: list[int],
    ) -> list[bytes]:
        """The SUCCESS replies to stored sends (none to a oneway one)."""
        config = self.config
        replies = self._replies
        if replies.key != (config.region_id, config.trace_on):
            replies = self._replies = SendReplyFrames(
                config.region_id, config.trace_on, self.store_host
            )
        success = replies.success
        phys, offsets = appended.phy_offsets, appended.queue_offsets
        json = SerializeType.JSON
        frames: list[bytes] = []
        for n in indexes:
            opaque, flag, serialize_type, first, count = asks[n]
            if flag & ONEWAY_FLAG:
                continue
            if serialize_type is not json:
                result = PutResult(
                    PutStatus.PUT_OK, self._append_result(asks[n], messages, appended)
                )
                frames.append(self._generic_frame(asks[n], result, messages[first].queue_id))
            elif count == 1:
                frames.append(
                    success(opaque, phys[first], messages[first].queue_id, offsets[first])
                )
            else:
                batch = messages[first]
                assert isinstance(batch, BatchToStore)
                frames.append(
                    replies.success_many(opaque, batch.phys, batch.queue_id, offsets[first])
                )
        return frames

    def _generic_frame(self, ask: Ask, result: PutResult, queue_id: int) -> bytes:
        opaque, flag, serialize_type, _, _ = ask
        if flag & ONEWAY_FLAG:
            return b""
        request = _request(opaque, flag, serialize_type)
        return encode_frame(self.processor.reply(request, result, queue_id))

    @staticmethod
    def _failed_frame(ask: Ask, code: int, remark: str) -> bytes:
        opaque, flag, serialize_type, _, _ = ask
        if flag & ONEWAY_FLAG:
            return b""
        return encode_frame(_request(opaque, flag, serialize_type).reply(code, remark))

    def _append_result(
        self, ask: Ask, messages: list[Item], appended: AppendedMany
    ) -> AppendResult:
        """What the store's put of this send alone would have said (for the generic reply)."""
        _, _, _, first, count = ask
        item = messages[first]
        if isinstance(item, BatchToStore):
            phys = tuple(item.phys)
        else:
            phys = (appended.phy_offsets[first],)
        return AppendResult(
            AppendStatus.PUT_OK,
            phys[0],
            item.record_size,
            appended.queue_offsets[first],
            count,
            0,
            phys,
            self.store_host,
        )


def fields_from_ext(request: RemotingCommand) -> SendV2Fields | None:
    """What the lane reads of a decoded send (send_v2_fields's tuple): plain
    decimal numbers only (no sign, space or "_" that int() would take), all required fields
    there; None sends it to `process`, which accepts or refuses it with its own remark."""
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
        # Not used here, but `process` parses them (and refuses what does not parse):
        # defaultTopicQueueNums, and maxReconsumeTimes when there.
        queue_nums, max_reconsume = ext["d"], ext.get("l", "0")
        numbers = queue + sys_text + born_text + flag_text + reconsume_text + queue_nums
        numbers += max_reconsume
        if not (numbers.isdigit() and numbers.isascii()):
            return None
        if max(int(queue_nums), int(max_reconsume)) > INT32_MAX:
            return None
        return (
            request.opaque,
            request.flag,
            name,
            int(queue),
            int(sys_text),
            int(born_text),
            int(flag_text),
            int(reconsume_text),
            ext.get("i") or "",
        )
    except (KeyError, ValueError):
        return None


def _request(opaque: int, flag: int, serialize_type: SerializeType) -> RemotingCommand:
    """Enough of a send request to reply to it the generic way."""
    return RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        LanguageCode.JAVA,
        0,
        opaque,
        flag,
        None,
        None,
        None,
        serialize_type,
    )
