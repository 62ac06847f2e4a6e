"""The common send, many at a time: SendLane serves the plain SEND_MESSAGE_V2 of one received
chunk in one pass (stored with one CommitLog append, answered in one write, durable first where
the producer waits under SYNC_FLUSH). It takes them either decoded (`take_batch`, which the
processor table hands each chunk's share of requests) or, with the native extension, straight
from their frames (`take_frames`, the table's frame lane: the header read by
`send_header.send_v2_fields` without the generic decode). Anything that needs a check or a
refusal, and every other request, goes the way of SendProcessor.process, its reference.

A SUCCESS reply comes from a pre-encoded template: byte for byte the frame the generic path
encodes (tests/broker/test_send_batch.py compares the two, and runs the same pipelined frames
through the lane and through `process`).
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING

import orjson

from sidewinder.broker.config import PERM_WRITE
from sidewinder.broker.processors.send_header import SendV2Fields, send_v2_fields
from sidewinder.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from sidewinder.protocol.command import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand
from sidewinder.protocol.message import encode_offset_msg_id
from sidewinder.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageToStore,
)
from sidewinder.remoting.codec import RawFrame, encode_frame
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.commit_log import AppendResult, AppendStatus
from sidewinder.store.flush import FlushError
from sidewinder.store.message_store import AppendedMany, PutResult, PutStatus

if TYPE_CHECKING:
    from sidewinder.broker.processors.send import SendProcessor

_PREFIX = struct.Struct(">ii")
_JSON_TYPE = SerializeType.JSON << 24
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


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
    """Encoded SUCCESS replies to SEND_MESSAGE_V2, four numbers filled into a template."""

    def __init__(self, region: str, trace_on: bool, store_host: Host) -> None:
        self.key = (region, trace_on)
        host_hex = encode_offset_msg_id(store_host.address, store_host.port, 0)[:-16]
        tail = orjson.dumps({"MSG_REGION": region, "TRACE_ON": "true" if trace_on else "false"})
        header = (
            b'{"code":0,"extFields":{"msgId":"'
            + host_hex.encode()
            + b'%016X","queueId":"%d","queueOffset":"%d",'
            + tail[1:-1].replace(b"%", b"%%")
            + b'},"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON",'
            + b'"version":'
            + str(CURRENT_VERSION).encode()
            + b"}"
        )
        self._header = header

    def success(self, opaque: int, phy_offset: int, queue_id: int, queue_offset: int) -> bytes:
        header = self._header % (phy_offset, queue_id, queue_offset, opaque)
        return _PREFIX.pack(4 + len(header), _JSON_TYPE | len(header)) + header


class SendLane:
    def __init__(self, processor: SendProcessor) -> None:
        self.processor = processor
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
        self.batched = 0  # sends the lane stored, ever

    def take_batch(
        self, ctx: RequestContext, requests: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """The decoded requests of one chunk: the plain sends stored and answered, the rest
        returned (for `process`)."""
        if not self.enabled or not self.config.broker_permission & PERM_WRITE:
            return requests
        born = self.processor.born_host(ctx.remote_address)
        size_limit = self._size_limit()
        others: list[RemotingCommand] = []
        asks: list[tuple[int, int, SerializeType]] = []
        messages: list[MessageToStore] = []
        waits: list[bool] = []
        for request in requests:
            plain = None
            if request.code == RequestCode.SEND_MESSAGE_V2:
                fields = fields_from_ext(request)
                if fields is not None:
                    plain = self._plain(fields, request.body_bytes, born, size_limit)
            if plain is None:
                others.append(request)
            else:
                asks.append((request.opaque, request.flag, request.serialize_type))
                messages.append(plain[0])
                waits.append(plain[1])
        if messages:
            self._store_and_answer(ctx, asks, messages, waits)
        return others

    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """The frames of one chunk: the plain sends, read from their JSON headers, stored and
        answered; the rest returned undecoded."""
        if not self.enabled or not self.config.broker_permission & PERM_WRITE:
            return frames
        born = self.processor.born_host(ctx.remote_address)
        size_limit = self._size_limit()
        others: list[RawFrame] = []
        asks: list[tuple[int, int, SerializeType]] = []
        messages: list[MessageToStore] = []
        waits: list[bool] = []
        json = SerializeType.JSON
        for frame in frames:
            plain = None
            if frame.serialize_type is json:
                fields = send_v2_fields(frame.header)
                if fields is not None and not fields[1] & RESPONSE_FLAG:
                    plain = self._plain(fields, frame.body or b"", born, size_limit)
            if plain is None:
                others.append(frame)
            else:
                asks.append((fields[0], fields[1], json))  # type: ignore[index]
                messages.append(plain[0])
                waits.append(plain[1])
        if messages:
            self._store_and_answer(ctx, asks, messages, waits)
        return others

    def _plain(
        self, fields: SendV2Fields, body: bytes, born: Host, size_limit: int
    ) -> tuple[MessageToStore, bool] | None:
        """The message of a send the lane can store as it is, and whether its producer waits
        for the flush; None for one that goes through `process`: a topic to create or refuse,
        a retry, delayed or transactional send, a number out of range, a message too big
        (`size_limit`: the CommitLog's, see `_size_limit`)."""
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
            or "TRAN_MSG\x01" in properties
        ):
            return None
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

    def _size_limit(self) -> int:
        """The largest record the CommitLog takes (maxMessageSize, and a segment's room)."""
        commit_log = self.store.commit_log
        return min(
            commit_log.max_message_size, commit_log.files.file_size - END_FILE_MIN_BLANK_LENGTH
        )

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
        asks: list[tuple[int, int, SerializeType]],
        messages: list[MessageToStore],
        waits: list[bool],
    ) -> None:
        self.batched += len(messages)
        appended = self.store.append_many(messages)
        stored = len(appended.phy_offsets)
        now: list[int] = []  # indexes answered at once
        later: list[int] = []  # answered once durable
        sync = self.store.sync_flush
        for n in range(stored):
            (later if sync and waits[n] else now).append(n)
        frames = self._stored_frames(asks, messages, appended, now)
        unavailable = self.processor.unavailable(appended.remark)
        for n in range(stored, len(asks)):
            frames.append(
                self._failed_frame(asks[n], ResponseCode.SERVICE_NOT_AVAILABLE, unavailable)
            )
        if frames:
            ctx.write_frames([f for f in frames if f])
        if later:
            last = later[-1]
            end = appended.phy_offsets[last] + messages[last].record_size
            self.store.durable(end).add_done_callback(
                lambda done: self._answer_durable(ctx, asks, messages, appended, later, done)
            )

    def _answer_durable(
        self,
        ctx: RequestContext,
        asks: list[tuple[int, int, SerializeType]],
        messages: list[MessageToStore],
        appended: AppendedMany,
        indexes: list[int],
        done: asyncio.Future[bool],
    ) -> None:
        error = done.exception()
        if error is None and done.result():
            frames = self._stored_frames(asks, messages, appended, indexes)
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
                frames.append(self._generic_frame(asks[n], result, messages[n].queue_id))
        ctx.write_frames([f for f in frames if f])

    def _stored_frames(
        self,
        asks: list[tuple[int, int, SerializeType]],
        messages: list[MessageToStore],
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
            opaque, flag, serialize_type = asks[n]
            if flag & ONEWAY_FLAG:
                continue
            if serialize_type is json:
                frames.append(success(opaque, phys[n], messages[n].queue_id, offsets[n]))
            else:
                result = PutResult(PutStatus.PUT_OK, self._append_result(messages[n], appended, n))
                frames.append(self._generic_frame(asks[n], result, messages[n].queue_id))
        return frames

    def _generic_frame(
        self, ask: tuple[int, int, SerializeType], result: PutResult, queue_id: int
    ) -> bytes:
        opaque, flag, serialize_type = ask
        if flag & ONEWAY_FLAG:
            return b""
        request = _request(opaque, flag, serialize_type)
        return encode_frame(self.processor.reply(request, result, queue_id))

    @staticmethod
    def _failed_frame(ask: tuple[int, int, SerializeType], code: int, remark: str) -> bytes:
        opaque, flag, serialize_type = ask
        if flag & ONEWAY_FLAG:
            return b""
        return encode_frame(_request(opaque, flag, serialize_type).reply(code, remark))

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


def fields_from_ext(request: RemotingCommand) -> SendV2Fields | None:
    """What the lane reads of a decoded SEND_MESSAGE_V2 (send_v2_fields's tuple): plain
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
        numbers = queue + sys_text + born_text + flag_text + reconsume_text
        if not (numbers.isdigit() and numbers.isascii()):
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
