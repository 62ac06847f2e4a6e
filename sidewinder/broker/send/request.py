"""The one request type of a send, and its decoder.

    request = request_from_command(command)   # SEND_MESSAGE, V2 or batch, decoded

`request_from_command` reads the header the generic way (SendMessageRequestHeader.from_ext,
long names for SEND_MESSAGE, short ones for V2 and batches) and raises its HeaderError for a
header that does not decode. The plain SEND_MESSAGE_V2 frames of a chunk skip it: the send lane
(lane.py) stores them straight from their bytes; what it leaves comes here.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import NamedTuple

from sidewinder.protocol.codes import RequestCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from sidewinder.protocol.record import Host


@functools.lru_cache(maxsize=4096)
def host_of(address: str) -> Host:
    """A Host from "ip:port" (IPv4 or IPv6)."""
    ip, _, port = address.rpartition(":")
    return Host(ipaddress.ip_address(ip.strip("[]")).packed, int(port))


class SendRequest(NamedTuple):
    """A send, whichever way it came in: what the route step reads and the reply answers.

    A NamedTuple (a slotted, immutable class) because the decoders of a chunk make one per
    message: `_new` builds it at C speed, its fields read as fast as slots."""

    code: int
    opaque: int
    flag: int  # the remoting flag (oneway, response)
    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    msg_flag: int  # the message's own flag
    reconsume_times: int
    properties: str
    serialize_type: SerializeType
    body: bytes
    batch: bool  # SEND_BATCH_MESSAGE: the body holds the messages
    default_topic: str = ""
    default_topic_queue_nums: int = 0
    max_reconsume_times: int | None = None
    # The decoded command, when there is one (a refusal is encoded as a reply to it).
    command: RemotingCommand | None = None
    # False: read by a fast decoder that skips what only the full route step reads.
    complete: bool = True


# SendRequest from a tuple of all its fields, without the Python-level __new__:
# _new(SendRequest, fields).
_new = tuple.__new__
_BATCH, _V2 = RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_MESSAGE_V2
# SEND_MESSAGE as a plain int: a member read off the enum class costs a lookup per message.
_SINGLE = int(RequestCode.SEND_MESSAGE)
INT32_MAX, INT64_MAX = (1 << 31) - 1, (1 << 63) - 1


def _generic(command: RemotingCommand) -> SendRequest:
    """Any send's header, by SendMessageRequestHeader.from_ext (HeaderError raised)."""
    names = SEND_V2_NAMES if command.code != RequestCode.SEND_MESSAGE else None
    header = SendMessageRequestHeader.from_ext(command.ext_fields, names=names)
    return SendRequest(
        command.code,
        command.opaque,
        command.flag,
        header.topic,
        header.queue_id,
        header.sys_flag,
        header.born_timestamp,
        header.flag,
        header.reconsume_times or 0,
        header.properties or "",
        command.serialize_type,
        command.body_bytes,
        command.code == _BATCH,
        default_topic=header.default_topic,
        default_topic_queue_nums=header.default_topic_queue_nums,
        max_reconsume_times=header.max_reconsume_times,
        command=command,
    )


def request_from_command(command: RemotingCommand) -> SendRequest:
    """The reference decoder; raises HeaderError for a header that does not decode.

    A V2 (or batch) header whose numbers are plain decimals in the generic parse's ranges
    (int32, int64 for bornTimestamp) is read by name, without that parse (which gives the same
    values); any other goes to `_generic`, which accepts or refuses it (inline: it runs per
    message)."""
    ext = command.ext_fields
    if command.code == _SINGLE or ext is None or "a" not in ext:
        return _generic(command)
    try:  # a missing field: the generic parse's to refuse
        topic, default_topic, nums, queue = ext["b"], ext["c"], ext["d"], ext["e"]
        sys_flag, born, flag = ext["f"], ext["g"], ext["h"]
    except KeyError:
        return _generic(command)
    reconsume, max_reconsume = ext.get("j", "0"), ext.get("l")
    numbers = nums + queue + sys_flag + born + flag + reconsume + (max_reconsume or "")
    if not (numbers.isdigit() and numbers.isascii()):
        return _generic(command)
    try:  # an empty number: the generic parse's to refuse
        queue_nums, queue_id, sys_flag_value = int(nums), int(queue), int(sys_flag)
        flag_value, reconsume_times = int(flag), int(reconsume)
        max_times = None if max_reconsume is None else int(max_reconsume)
        born_timestamp = int(born)
    except ValueError:
        return _generic(command)
    if (
        max(queue_nums, queue_id, sys_flag_value, flag_value, reconsume_times, max_times or 0)
        > INT32_MAX
        or born_timestamp > INT64_MAX
    ):
        return _generic(command)
    code, body = command.code, command.body
    if type(body) is not bytes:  # bytes as they are (body_bytes: a property and a bytes() call)
        body = command.body_bytes
    return _new(
        SendRequest,
        (
            code,
            command.opaque,
            command.flag,
            topic,
            queue_id,
            sys_flag_value,
            born_timestamp,
            flag_value,
            reconsume_times,
            ext.get("i") or "",
            command.serialize_type,
            body,
            code == _BATCH,
            default_topic,
            queue_nums,
            max_times,
            command,
            True,
        ),
    )
