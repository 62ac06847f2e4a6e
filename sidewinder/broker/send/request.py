"""The one request type of a send, and the decoders that yield it.

    request = request_from_command(command)   # SEND_MESSAGE, V2 or batch, decoded (reference)
    request = request_from_frame(frame)       # a JSON frame read natively; None: decode it

`request_from_command` reads the header the generic way (SendMessageRequestHeader.from_ext,
long names for SEND_MESSAGE, short ones for V2 and batches) and raises its HeaderError for a
header that does not decode. `request_from_frame` is a faster decoder of the same type: the
native (or Python) `send_v2_fields` reader for SEND_MESSAGE_V2, `send_batch_fields` for a batch.
It reads only what a plain send needs, so what it yields is `complete=False`: the route step
takes it on its fast path or not at all, and the frame is then decoded generically. Where it
gives None the frame is decoded generically too. Either way the request enters the same route.
"""

from __future__ import annotations

import functools
import ipaddress

from sidewinder.broker.send.header import SendV2Fields, send_batch_fields, send_v2_fields
from sidewinder.protocol.codes import RequestCode, SerializeType
from sidewinder.protocol.command import RESPONSE_FLAG, RemotingCommand
from sidewinder.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from sidewinder.protocol.record import Host
from sidewinder.remoting.codec import RawFrame

# How a SEND_BATCH_MESSAGE JSON header says its code (the Java and Go clients both write it so);
# the batch reader's full decode then checks it.
_BATCH_CODE = b'"code":%d' % RequestCode.SEND_BATCH_MESSAGE


@functools.lru_cache(maxsize=4096)
def host_of(address: str) -> Host:
    """A Host from "ip:port" (IPv4 or IPv6)."""
    ip, _, port = address.rpartition(":")
    return Host(ipaddress.ip_address(ip.strip("[]")).packed, int(port))


class SendRequest:
    """A send, whichever way it came in: what the route step reads and the reply answers."""

    __slots__ = (
        "batch",
        "body",
        "born_timestamp",
        "code",
        "command",
        "complete",
        "default_topic",
        "default_topic_queue_nums",
        "flag",
        "max_reconsume_times",
        "msg_flag",
        "opaque",
        "properties",
        "queue_id",
        "reconsume_times",
        "serialize_type",
        "sys_flag",
        "topic",
    )

    def __init__(
        self,
        code: int,
        opaque: int,
        flag: int,
        serialize_type: SerializeType,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        msg_flag: int,
        reconsume_times: int,
        properties: str,
        body: bytes,
        *,
        default_topic: str = "",
        default_topic_queue_nums: int = 0,
        max_reconsume_times: int | None = None,
        command: RemotingCommand | None = None,
        complete: bool = True,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag  # the remoting flag (oneway, response)
        self.serialize_type = serialize_type
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.msg_flag = msg_flag  # the message's own flag
        self.reconsume_times = reconsume_times
        self.properties = properties
        self.body = body
        self.batch = code == RequestCode.SEND_BATCH_MESSAGE
        self.default_topic = default_topic
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_reconsume_times = max_reconsume_times
        # The decoded command, when there is one (a refusal is encoded as a reply to it).
        self.command = command
        # False: read by a fast decoder that skips what only the full route step reads.
        self.complete = complete


def request_from_command(command: RemotingCommand) -> SendRequest:
    """The reference decoder; raises HeaderError for a header that does not decode."""
    names = SEND_V2_NAMES if command.code != RequestCode.SEND_MESSAGE else None
    header = SendMessageRequestHeader.from_ext(command.ext_fields, names=names)
    return SendRequest(
        command.code,
        command.opaque,
        command.flag,
        command.serialize_type,
        header.topic,
        header.queue_id,
        header.sys_flag,
        header.born_timestamp,
        header.flag,
        header.reconsume_times or 0,
        header.properties or "",
        command.body_bytes,
        default_topic=header.default_topic,
        default_topic_queue_nums=header.default_topic_queue_nums,
        max_reconsume_times=header.max_reconsume_times,
        command=command,
    )


def request_from_frame(frame: RawFrame) -> SendRequest | None:
    """A plain JSON send read straight from its frame, or None (decode it generically)."""
    if frame.serialize_type is not SerializeType.JSON:
        return None
    fields = send_v2_fields(frame.header)
    code = RequestCode.SEND_MESSAGE_V2
    if fields is None:
        if _BATCH_CODE not in frame.header:
            return None
        fields = send_batch_fields(frame.header)
        code = RequestCode.SEND_BATCH_MESSAGE
        if fields is None:
            return None
    if fields[1] & RESPONSE_FLAG:
        return None
    return _from_fields(code, fields, frame.body or b"")


def _from_fields(code: int, fields: SendV2Fields, body: bytes) -> SendRequest:
    opaque, flag, topic, queue_id, sys_flag, born_timestamp, msg_flag, reconsume, properties = (
        fields
    )
    return SendRequest(
        code,
        opaque,
        flag,
        SerializeType.JSON,
        topic,
        queue_id,
        sys_flag,
        born_timestamp,
        msg_flag,
        reconsume,
        properties,
        body,
        complete=False,
    )
