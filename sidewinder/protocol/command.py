"""RemotingCommand: one request or response of RocketMQ's remoting protocol (wire-independent).

    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
    reply = request.reply(ResponseCode.SUCCESS, ext_fields={"offset": "42"})

`ext_fields` carries the typed "custom header" as strings (see headers.py); `body` is raw bytes
(or a memoryview of store memory on the way out). Which header encoding a command travels in
is `serialize_type`: a reply keeps its request's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from sidewinder.protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType

RESPONSE_FLAG = 0x1
ONEWAY_FLAG = 0x2

_opaques = itertools.count(1)


def next_opaque() -> int:
    """A process-wide request id (int32, wrapping), as RocketMQ's requestId counter."""
    return next(_opaques) & 0x7FFFFFFF


@dataclass(slots=True, eq=True)
class RemotingCommand:
    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | bytearray | memoryview | None = field(default=None, compare=False)
    serialize_type: SerializeType = field(default=SerializeType.JSON, compare=False)
    # The header already encoded in `serialize_type`, by a maker of hot replies (a pull's):
    # the codec sends it as is. It must say what the fields above say.
    encoded_header: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
        language: LanguageCode = LanguageCode.PYTHON,
    ) -> RemotingCommand:
        return cls(
            code,
            language,
            CURRENT_VERSION,
            next_opaque(),
            ONEWAY_FLAG if oneway else 0,
            None,
            ext_fields,
            body,
            serialize_type,
        )

    def reply(
        self,
        code: int,
        remark: str | None = None,
        *,
        ext_fields: dict[str, str] | None = None,
        body: bytes | bytearray | memoryview | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque and header encoding, response flag set."""
        return RemotingCommand(
            code,
            LanguageCode.JAVA,  # what RocketMQ's servers say; clients expect nothing else
            CURRENT_VERSION,
            self.opaque,
            RESPONSE_FLAG,
            remark,
            ext_fields,
            body,
            self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    @property
    def body_bytes(self) -> bytes:
        return bytes(self.body) if self.body is not None else b""

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        body = len(self.body) if self.body is not None else 0
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={body}B)"
        )
