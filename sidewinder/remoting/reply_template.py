"""PULL_MESSAGE's reply header pre-encoded: the bytes `encode_json_header` writes for it, made by
one `bytes %` instead of a dict walk and a JSON encoder (every pull answers with one).

    reply = request.reply(code, remark, ext_fields=ext, body=body)
    reply.encoded_header = pull_reply_header(reply, 0, next_begin, min_offset, max_offset)

For a JSON header only (the serialize type stock clients use); for any other, None, and the
codec encodes the header itself. tests/remoting/test_reply_template.py holds the template to
`encode_json_header` byte for byte: a change there must show here.
"""

from __future__ import annotations

import json
import struct

from sidewinder.protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType
from sidewinder.protocol.command import RESPONSE_FLAG, RemotingCommand

_PREFIX = struct.Struct(">ii")  # the frame's length, then serialize type and header length

# encode_json_header's key order: code, extFields (in PullMessageResponseHeader's field order),
# flag, language, opaque, remark (when there is one), serializeTypeCurrentRPC, version.
_PULL_REPLY = (
    b'{"code":%d,"extFields":{"suggestWhichBrokerId":"%d","nextBeginOffset":"%d",'
    b'"minOffset":"%d","maxOffset":"%d"},"flag":%d,"language":"JAVA","opaque":%d%s,'
    b'"serializeTypeCurrentRPC":"JSON","version":%d}'
)


def pull_reply_header(
    reply: RemotingCommand, suggest_which_broker_id: int, next_begin: int, low: int, high: int
) -> bytes | None:
    """`reply`'s JSON header, its extFields PullMessageResponseHeader's four numbers."""
    if reply.serialize_type is not SerializeType.JSON or reply.language is not LanguageCode.JAVA:
        return None
    return _PULL_REPLY % (
        reply.code,
        suggest_which_broker_id,
        next_begin,
        low,
        high,
        reply.flag,
        reply.opaque,
        _remark(reply.remark),
        reply.version,
    )


def pull_reply_frame(
    opaque: int,
    code: int,
    remark: str | None,
    suggest_which_broker_id: int,
    next_begin: int,
    low: int,
    high: int,
    body: bytes | None,
) -> list[bytes]:
    """The whole reply frame to a JSON PULL_MESSAGE request, as pieces for `writelines` (the
    body not copied): what encode_command makes of `request.reply(...)` with that header."""
    header = _PULL_REPLY % (
        code,
        suggest_which_broker_id,
        next_begin,
        low,
        high,
        RESPONSE_FLAG,
        opaque,
        _remark(remark),
        CURRENT_VERSION,
    )
    length = len(header)
    if body:
        return [_PREFIX.pack(4 + length + len(body), length) + header, body]
    return [_PREFIX.pack(4 + length, length) + header]


def _remark(remark: str | None) -> bytes:
    return (
        b"" if remark is None else b',"remark":' + json.dumps(remark, ensure_ascii=False).encode()
    )
