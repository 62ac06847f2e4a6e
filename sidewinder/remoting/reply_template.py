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

from sidewinder.protocol.codes import LanguageCode, SerializeType
from sidewinder.protocol.command import RemotingCommand

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
    remark = (
        b""
        if reply.remark is None
        else b',"remark":' + json.dumps(reply.remark, ensure_ascii=False).encode()
    )
    return _PULL_REPLY % (
        reply.code,
        suggest_which_broker_id,
        next_begin,
        low,
        high,
        reply.flag,
        reply.opaque,
        remark,
        reply.version,
    )
