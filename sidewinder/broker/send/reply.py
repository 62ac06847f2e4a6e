"""The one reply encoder of a send: stored, not stored, or refused.

    replies = SendReplies(config, store_host)
    frames = replies.stored_frames(asks, phy_offsets, queue_offsets, indexes)  # SUCCESS, bytes
    command = replies.stored(routed, phy_offset, queue_offset, status, remark)
    command = replies.refused(request, error)       # remoting.dispatch's error_reply

A SUCCESS reply to a JSON request comes from a pre-encoded template (SendReplyFrames): byte for
byte the frame the generic encode gives (tests/broker/send compare the two); any other
serialize type, a message the timer holds (its reply carries RocketMQ 5's recall handle), and
every other outcome, is encoded the generic way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import orjson

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.send.body import unavailable
from sidewinder.broker.send.request import SendRequest
from sidewinder.broker.send.route import Routed
from sidewinder.broker.topics import RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from sidewinder.protocol.batch_record import BatchToStore
from sidewinder.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.headers import SendMessageResponseHeader
from sidewinder.protocol.message import MessageConst, decode_properties, encode_offset_msg_id
from sidewinder.protocol.recall import recall_handle
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.remoting.codec import encode_frame
from sidewinder.remoting.dispatch import error_reply
from sidewinder.store.message_store import MessageRun, PutStatus

# A stored message's answer: its ids, under the code of what became of it beyond the store
# (RocketMQ's sendOK statuses).
STORED_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}

_TIMER_TOPIC = TIMER_TOPIC.encode()
_PREFIX = struct.Struct(">ii")
_JSON_TYPE = SerializeType.JSON << 24


ReplyPieces = tuple[bytes, bytes, bytes, bytes, bytes, bytes]


def success_frame(
    pieces: ReplyPieces, opaque: int, phys: list[int], queue_id: int, queue_offset: int
) -> bytes:
    """A SUCCESS frame from a template's pieces (SendReplyFrames.pieces)."""
    head, host, at_queue, at_offset, at_opaque, tail = pieces
    ids = b",".join([b"%s%016X" % (host, phy) for phy in phys])
    header = b"%s%s%s%d%s%d%s%d%s" % (
        head, ids, at_queue, queue_id, at_offset, queue_offset, at_opaque, opaque, tail
    )  # fmt: skip
    return _PREFIX.pack(4 + len(header), _JSON_TYPE | len(header)) + header


class SendReplyFrames:
    """Encoded SUCCESS replies to SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, the numbers filled
    into a template: msgId (the offsetMsgIds, comma-joined for a batch), queueId, the queue
    offset of the first message, opaque."""

    def __init__(self, region: str, trace_on: bool, store_host: Host) -> None:
        self.key = (region, trace_on)
        host_hex = encode_offset_msg_id(store_host.address, store_host.port, 0)[:-16]
        tail = orjson.dumps({"MSG_REGION": region, "TRACE_ON": "true" if trace_on else "false"})
        # The header in pieces (the send lane's too): [0] msgId: [1] and a physical offset's
        # %016X, comma-joined for a batch; [2] queueId [3] queueOffset [4] opaque [5].
        self.pieces: ReplyPieces = (
            b'{"code":0,"extFields":{"msgId":"',
            host_hex.encode(),
            b'","queueId":"',
            b'","queueOffset":"',
            b'",' + tail[1:-1] + b'},"flag":1,"language":"JAVA","opaque":',
            b',"serializeTypeCurrentRPC":"JSON","version":' + str(CURRENT_VERSION).encode() + b"}",
        )

    def success(self, opaque: int, phy_offset: int, queue_id: int, queue_offset: int) -> bytes:
        return success_frame(self.pieces, opaque, [phy_offset], queue_id, queue_offset)

    def success_many(
        self, opaque: int, phy_offsets: list[int], queue_id: int, queue_offset: int
    ) -> bytes:
        """A batch's: every message's offsetMsgId, comma-joined."""
        return success_frame(self.pieces, opaque, phy_offsets, queue_id, queue_offset)


class SendReplies:
    def __init__(self, config: BrokerConfig, store_host: Host) -> None:
        self.config = config
        self.store_host = store_host
        self._frames = SendReplyFrames(config.region_id, config.trace_on, store_host)

    def current_frames(self) -> SendReplyFrames:
        """The templates for the region and trace switch configured now."""
        frames, config = self._frames, self.config
        if frames.key != (config.region_id, config.trace_on):
            frames = self._frames = SendReplyFrames(
                config.region_id, config.trace_on, self.store_host
            )
        return frames

    def stored_frames(
        self,
        asks: Sequence[Routed],
        phys: list[int],
        offsets: list[int],
        indexes: Iterable[int],
    ) -> list[bytes]:
        """SUCCESS to stored sends (`asks[n]` stored at `phys[n]`, `offsets[n]`), encoded;
        none to a oneway one."""
        frames = self.current_frames()
        success, json = frames.success, SerializeType.JSON
        out: list[bytes] = []
        for n in indexes:
            routed = asks[n]
            request, item, _, queue_id = routed
            if request.flag & ONEWAY_FLAG:
                continue
            opaque = request.opaque
            if request.serialize_type is not json or item.topic == _TIMER_TOPIC:
                out.append(encode_frame(self.stored(routed, phys[n], offsets[n])))
            elif item.batch:
                assert isinstance(item, BatchToStore | MessageRun)
                out.append(frames.success_many(opaque, item.phys, queue_id, offsets[n]))
            else:
                out.append(success(opaque, phys[n], queue_id, offsets[n]))
        return out

    def stored(
        self,
        routed: Routed,
        phy: int,
        offset: int,
        status: PutStatus = PutStatus.PUT_OK,
        remark: str = "",
    ) -> RemotingCommand:
        """A stored send's reply, the generic way: its ids, the code of `status`."""
        request, item, _, queue_id = routed
        phys = item.phys if isinstance(item, BatchToStore | MessageRun) else (phy,)
        ext = self._stored_ext(phys, queue_id, offset)
        if isinstance(item, MessageToStore) and item.topic == _TIMER_TOPIC:
            handle = self._recall_handle(item)
            if handle is not None:
                ext["recallHandle"] = handle
        return _command(request).reply(STORED_CODES[status], remark or None, ext_fields=ext)

    def lane_stored(
        self,
        opaque: int,
        phys: list[int],
        queue_id: int,
        offset: int,
        status: PutStatus,
        remark: str,
    ) -> RemotingCommand:
        """`stored` for a send the send lane stored (lane.py; `phys`: its records')."""
        ext = self._stored_ext(phys, queue_id, offset)
        return _lane_command(opaque).reply(STORED_CODES[status], remark or None, ext_fields=ext)

    @staticmethod
    def unavailable_to(opaque: int, remark: str) -> RemotingCommand:
        """`unavailable` for a send the send lane served."""
        return _lane_command(opaque).reply(ResponseCode.SERVICE_NOT_AVAILABLE, unavailable(remark))

    def _stored_ext(self, phys: Sequence[int], queue_id: int, offset: int) -> dict[str, str]:
        host = self.store_host
        prefix = encode_offset_msg_id(host.address, host.port, 0)[:-16]
        msg_ids = ",".join([f"{prefix}{p:016X}" for p in phys])
        ext = SendMessageResponseHeader(msg_ids, queue_id, offset).to_ext()
        ext["MSG_REGION"] = self.config.region_id
        ext["TRACE_ON"] = "true" if self.config.trace_on else "false"
        return ext

    def _recall_handle(self, item: MessageToStore) -> str | None:
        """A timer message's recall handle (attachRecallHandle): its topic, this broker, its
        slot's time plus one, its UNIQ_KEY; none for a retry topic's message."""
        props = decode_properties(item.properties)
        slot_ms, topic = props.get(MessageConst.TIMER_OUT_MS), props.get(MessageConst.REAL_TOPIC)
        if not slot_ms or not topic or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        return recall_handle(topic, self.config.broker_name, int(slot_ms) + 1, uniq)

    @staticmethod
    def unavailable(request: SendRequest, remark: str) -> RemotingCommand:
        """A send the store did not take (or that failed to settle)."""
        return _command(request).reply(ResponseCode.SERVICE_NOT_AVAILABLE, unavailable(remark))

    @staticmethod
    def refused(request: SendRequest, error: Exception) -> RemotingCommand:
        """A refusal raised by the route step (or our bug), as the table answers one."""
        return error_reply(_command(request), error)


def _command(request: SendRequest) -> RemotingCommand:
    """The decoded request, or enough of one to reply to it (a frame read natively)."""
    if request.command is not None:
        return request.command
    return RemotingCommand(
        RequestCode(request.code),
        LanguageCode.JAVA,
        0,
        request.opaque,
        request.flag,
        None,
        None,
        None,
        request.serialize_type,
    )


def _lane_command(opaque: int) -> RemotingCommand:
    """Enough of a JSON send request to reply to it (a reply does not say the request's code)."""
    return RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 0, opaque, 0, None, None, None,
        SerializeType.JSON,
    )  # fmt: skip
