"""The remoting frame codec, sans IO: bytes in, RemotingCommands out, and back.

    frame  = int32 length (of what follows) · int32 (serialize type << 24 | header length)
             · header · body                                    (big-endian)

    decoder = FrameDecoder(max_frame=16 << 20)
    decoder.feed(chunk)                   # any split, down to one byte at a time
    for command in decoder.commands():    # FrameError on malformed input: close the connection
        ...
    transport.writelines(encode_command(reply))

Header encodings, keyed by the frame's serialize type:
- JSON (0), as RocketMQ's fastjson writes it: keys in alphabetical order, `language` by name,
  extFields values always strings on the way out; on the way in they may be strings, numbers or
  booleans (C++ and Node clients send those) and are turned into the strings Java would see.
- ROCKETMQ (1), RocketMQSerializable's binary layout: code int16 · language int8 · version int16
  · opaque int32 · flag int32 · remark (int32 length + UTF-8) · extFields (int32 length +
  {int16 key length, key, int32 value length, value}*).
- MSGPACK (0x53), ours: [code, language, version, opaque, flag, remark, extFields].
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgpack
import orjson

from sidewinder.protocol.codes import LanguageCode, SerializeType
from sidewinder.protocol.command import RemotingCommand

DEFAULT_MAX_FRAME = 16 << 20  # com.rocketmq.remoting.frameMaxLength

_PREFIX = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remark length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_LANGUAGES: dict[object, LanguageCode] = {language.name: language for language in LanguageCode}
_BY_NUMBER: dict[object, LanguageCode] = {int(language): language for language in LanguageCode}
_SERIALIZE_TYPES = {int(t): t for t in SerializeType}
_BY_NAME_OR_NUMBER: dict[object, LanguageCode] = {**_LANGUAGES, **_BY_NUMBER}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


class FrameError(ValueError):
    """Bytes that are not a valid remoting frame; the message says what is wrong."""


# -- header encodings ---------------------------------------------------------------------------
def _ext_value(value: object) -> str:
    """An inbound extFields value as the string a Java server would hold (fastjson's rules)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _language(value: object) -> LanguageCode:
    if isinstance(value, str) and value in _LANGUAGES:
        return _LANGUAGES[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in _BY_NUMBER:
        return _BY_NUMBER[value]
    raise FrameError(f"unknown language {value!r}")


def _check_ints(**fields: object) -> None:
    """Say which header integer is bad (the fast path found one that is)."""
    for name, value in fields.items():
        if type(value) is not int:
            raise FrameError(f"header field {name!r} is {value!r}, not an integer")
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise FrameError(f"header field {name!r} = {value} does not fit an int32")


def _command(
    code: object,
    language: object,
    version: object,
    opaque: object,
    flag: object,
    remark: object,
    ext: object,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """A command from decoded header values, checked (the decoders' common tail)."""
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        _check_ints(code=code, version=version, opaque=opaque, flag=flag)
    if remark is not None and type(remark) is not str:
        raise FrameError(f"remark is {remark!r}, not a string")
    if ext is not None:
        if type(ext) is not dict:
            raise FrameError(f"extFields is a {type(ext).__name__}, not an object")
        for value in ext.values():
            if type(value) is not str:
                ext = {str(k): _ext_value(v) for k, v in ext.items() if v is not None}
                break
    lang = _BY_NAME_OR_NUMBER.get(language) if type(language) in (str, int) else None
    return RemotingCommand(
        code,  # type: ignore[arg-type]
        lang if lang is not None else _language(language),
        version,  # type: ignore[arg-type]
        opaque,  # type: ignore[arg-type]
        flag,  # type: ignore[arg-type]
        remark,
        ext,
        None,
        serialize_type,
    )


def _from_mapping(header: object, serialize_type: SerializeType) -> RemotingCommand:
    if type(header) is not dict:
        raise FrameError(f"the header is a {type(header).__name__}, not an object")
    if "code" not in header:
        raise FrameError("the header has no code")
    get = header.get
    return _command(
        header["code"],
        get("language", "JAVA"),
        get("version", 0),
        get("opaque", 0),
        get("flag", 0),
        get("remark"),
        get("extFields"),
        serialize_type,
    )


def _outbound(ext: dict[str, str]) -> dict[str, str]:
    """extFields with every value a string: stock clients ignore or loop on anything else."""
    if all(type(value) is str for value in ext.values()):
        return ext
    return {key: _ext_value(value) for key, value in ext.items() if value is not None}


def encode_json_header(command: RemotingCommand) -> bytes:
    header: dict[str, object] = {"code": command.code}
    if command.ext_fields is not None:
        header["extFields"] = _outbound(command.ext_fields)
    header["flag"] = command.flag
    header["language"] = command.language.name
    header["opaque"] = command.opaque
    if command.remark is not None:
        header["remark"] = command.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = command.version
    try:
        # orjson writes what json.dumps(separators=(",", ":"), ensure_ascii=False) does, in a
        # tenth of the time; the header is on every frame.
        return orjson.dumps(header)
    except TypeError as exc:
        raise FrameError(f"the header does not encode as JSON: {exc}") from None


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"JSON header does not parse: {exc}") from None
    return _from_mapping(header, SerializeType.JSON)


def encode_binary_header(command: RemotingCommand) -> bytes:
    remark = command.remark.encode() if command.remark else b""
    parts = [
        _BINARY_FIXED.pack(
            command.code,
            int(command.language),
            command.version,
            command.opaque,
            command.flag,
            len(remark),
        ),
        remark,
    ]
    ext = bytearray()
    for key, value in _outbound(command.ext_fields or {}).items():
        k, v = key.encode(), value.encode()
        ext += _I16.pack(len(k))
        ext += k
        ext += _I32.pack(len(v))
        ext += v
    parts.append(_I32.pack(len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


def decode_binary_header(data: bytes) -> RemotingCommand:
    try:
        code, language, version, opaque, flag, remark_len = _BINARY_FIXED.unpack_from(data, 0)
        at = _BINARY_FIXED.size
        if remark_len < 0 or at + remark_len > len(data):
            raise FrameError(f"remark length {remark_len} runs past the header")
        remark = data[at : at + remark_len].decode() if remark_len else None
        at += remark_len
        (ext_len,) = _I32.unpack_from(data, at)
        at += 4
        if ext_len < 0 or at + ext_len != len(data):
            raise FrameError(f"extFields length {ext_len} does not end the header")
        ext: dict[str, str] | None = None
        if ext_len:
            ext = {}
            end = at + ext_len
            unpack_short, unpack_int = _I16.unpack_from, _I32.unpack_from
            while at < end:
                (key_len,) = unpack_short(data, at)
                key_at = at + 2
                value_at = key_at + key_len + 4
                (value_len,) = unpack_int(data, value_at - 4)
                at = value_at + value_len
                if key_len <= 0 or value_len < 0 or at > end:
                    raise FrameError(f"extFields entry at byte {key_at - 2} runs past its section")
                ext[data[key_at : value_at - 4].decode()] = data[value_at:at].decode()
    except struct.error as exc:
        raise FrameError(f"binary header is truncated: {exc}") from None
    except UnicodeDecodeError as exc:
        raise FrameError(f"binary header holds text that is not UTF-8: {exc}") from None
    if language not in _BY_NUMBER:
        raise FrameError(f"unknown language code {language}")
    return RemotingCommand(
        code, _BY_NUMBER[language], version, opaque, flag, remark, ext, None, SerializeType.ROCKETMQ
    )


def encode_msgpack_header(command: RemotingCommand) -> bytes:
    return msgpack.packb(
        [
            command.code,
            int(command.language),
            command.version,
            command.opaque,
            command.flag,
            command.remark,
            None if command.ext_fields is None else _outbound(command.ext_fields),
        ]
    )


def decode_msgpack_header(data: bytes) -> RemotingCommand:
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError) as exc:
        raise FrameError(f"msgpack header does not parse: {exc}") from None
    if type(fields) is not list or len(fields) != 7:
        raise FrameError("a msgpack header is a list of 7 fields")
    code, language, version, opaque, flag, remark, ext = fields
    if type(language) is bool:
        raise FrameError(f"unknown language {language!r}")
    return _command(code, language, version, opaque, flag, remark, ext, SerializeType.MSGPACK)


_ENCODERS = {
    SerializeType.JSON: encode_json_header,
    SerializeType.ROCKETMQ: encode_binary_header,
    SerializeType.MSGPACK: encode_msgpack_header,
}
_DECODERS = {
    SerializeType.JSON: decode_json_header,
    SerializeType.ROCKETMQ: decode_binary_header,
    SerializeType.MSGPACK: decode_msgpack_header,
}


# -- frames -------------------------------------------------------------------------------------
def encode_command(command: RemotingCommand) -> list[bytes | bytearray | memoryview]:
    """The frame as pieces for `transport.writelines` (the body is not copied)."""
    header = command.encoded_header or _ENCODERS[command.serialize_type](command)
    if len(header) >= 1 << 24:
        raise FrameError(f"a header of {len(header)} bytes does not fit 24 bits")
    body = command.body
    body_len = len(body) if body is not None else 0
    prefix = _PREFIX.pack(4 + len(header) + body_len, (command.serialize_type << 24) | len(header))
    if body_len:
        assert body is not None
        return [prefix + header, body]
    return [prefix + header]


def encode_frame(command: RemotingCommand) -> bytes:
    return b"".join(encode_command(command))


@dataclass(slots=True)
class RawFrame:
    """One whole frame, its header not yet decoded (a frame lane may read it first)."""

    serialize_type: SerializeType
    header: bytes
    body: bytes | None


def decode_raw(frame: RawFrame) -> RemotingCommand:
    """The command of a frame; FrameError for a header that does not decode."""
    serialize_type = frame.serialize_type
    try:
        command = _DECODERS[serialize_type](frame.header)
    except FrameError:
        raise
    except Exception as exc:  # a decoder surprise is still the peer's bad bytes
        raise FrameError(f"{serialize_type.name} header does not decode: {exc!r}") from None
    command.body = frame.body
    return command


class FrameDecoder:
    """Incremental: feed any chunks, take whole frames or commands. Once it raises, it stays
    broken."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._start = 0
        self._error: FrameError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def commands(self) -> Iterator[RemotingCommand]:
        for frame in self.frames():
            try:
                yield decode_raw(frame)
            except FrameError as exc:
                self._error = exc
                raise

    def frames(self) -> Iterator[RawFrame]:
        """The whole frames buffered, headers undecoded; FrameError for bad framing."""
        if self._error is not None:
            raise self._error
        try:
            while (frame := self._next()) is not None:
                yield frame
        except FrameError as exc:
            self._error = exc
            raise
        finally:
            if self._start and self._start * 2 >= len(self._buffer):
                del self._buffer[: self._start]
                self._start = 0

    def served(
        self, lane: Callable[[bytearray, int, int], tuple[int, list[tuple[int, int]]]]
    ) -> list[RawFrame]:
        """Let `lane(buffer, start, max_frame)` serve whole frames from the buffer first: it
        returns where it stopped and the spans of the whole frames before that it left, given
        back here as RawFrames; the decoder goes on from where it stopped."""
        if self._error is not None or len(self._buffer) - self._start < 8:
            return []
        position, spans = lane(self._buffer, self._start, self.max_frame)
        frames = [self._frame_at(start, end) for start, end in spans]
        self._start = position
        return frames

    def _frame_at(self, start: int, end: int) -> RawFrame:
        """The whole, well-framed frame at [start, end) of the buffer, left by a lane."""
        (marker,) = _I32.unpack_from(self._buffer, start + 4)
        body_start = start + 8 + (marker & 0xFFFFFF)
        view = memoryview(self._buffer)
        header = bytes(view[start + 8 : body_start])
        body = bytes(view[body_start:end]) if body_start < end else None
        view.release()
        return RawFrame(_SERIALIZE_TYPES[(marker >> 24) & 0xFF], header, body)

    def fail(self, error: FrameError) -> None:
        """A frame it gave out did not decode: the stream is broken from here on."""
        self._error = error

    def _next(self) -> RawFrame | None:
        buffer, start = self._buffer, self._start
        if len(buffer) - start < 4:
            return None
        (length,) = _I32.unpack_from(buffer, start)
        if length < 4:
            raise FrameError(f"frame length {length} is below the 4-byte minimum")
        if length > self.max_frame:
            raise FrameError(f"frame of {length} bytes is over the {self.max_frame}-byte limit")
        end = start + 4 + length
        if len(buffer) < end:
            return None
        (marker,) = _I32.unpack_from(buffer, start + 4)
        kind = (marker >> 24) & 0xFF
        header_len = marker & 0xFFFFFF
        serialize_type = _SERIALIZE_TYPES.get(kind)
        if serialize_type is None:
            raise FrameError(f"unknown serialize type {kind}")
        if header_len > length - 4:
            raise FrameError(f"header length {header_len} runs past the {length}-byte frame")
        header_start = start + 8
        body_start = header_start + header_len
        self._start = end
        # One copy each (a bytearray slice and bytes() of it would be two); the view is gone
        # before the buffer is trimmed.
        view = memoryview(buffer)
        header = bytes(view[header_start:body_start])
        body = bytes(view[body_start:end]) if body_start < end else None
        view.release()
        return RawFrame(serialize_type, header, body)


def decode_frame(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> RemotingCommand:
    """Exactly one whole frame."""
    decoder = FrameDecoder(max_frame)
    decoder.feed(data)
    commands = list(decoder.commands())
    if len(commands) != 1 or decoder.buffered:
        raise FrameError(f"expected one whole frame, got {len(commands)} and {decoder.buffered}B")
    return commands[0]
