"""Read recording-proxy captures back into frames, and peek at their headers.

This is bench tooling: just enough of the remoting frame layout to check a capture and to index
it by request code. Sidewinder's own codec (sidewinder/remoting) is tested *against* these files.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

LANGUAGES = [
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
]


class CaptureError(ValueError):
    pass


@dataclass(frozen=True)
class CapturedFrame:
    conn: int
    proxy: str
    direction: str
    t: float
    raw: bytes

    @property
    def total_length(self) -> int:
        return struct.unpack_from(">i", self.raw)[0]

    @property
    def serialize_type(self) -> int:
        return self.raw[4]

    @property
    def header_length(self) -> int:
        return struct.unpack_from(">i", self.raw, 4)[0] & 0xFFFFFF

    @property
    def header_bytes(self) -> bytes:
        return self.raw[8 : 8 + self.header_length]

    @property
    def body(self) -> bytes:
        return self.raw[8 + self.header_length :]

    def header(self) -> dict[str, Any]:
        """The header as a dict with JSON's field names, whichever serialize type it used."""
        if self.serialize_type == SERIALIZE_JSON:
            return json.loads(self.header_bytes)
        if self.serialize_type == SERIALIZE_ROCKETMQ:
            return decode_rocketmq_header(self.header_bytes)
        raise CaptureError(f"unknown serialize type {self.serialize_type}")

    def check(self) -> None:
        """A whole frame: the length prefix covers exactly the rest, the header fits inside."""
        if len(self.raw) < 8:
            raise CaptureError(f"frame of {len(self.raw)} bytes is shorter than 8")
        if self.total_length != len(self.raw) - 4:
            raise CaptureError(f"length prefix {self.total_length} != {len(self.raw) - 4}")
        if 8 + self.header_length > len(self.raw):
            raise CaptureError(f"header length {self.header_length} overruns the frame")


def decode_rocketmq_header(data: bytes) -> dict[str, Any]:
    code, lang, version, opaque, flag, remark_len = struct.unpack_from(">hBhiii", data)
    pos = 17
    remark = data[pos : pos + remark_len].decode() if remark_len > 0 else None
    pos += max(remark_len, 0)
    (ext_len,) = struct.unpack_from(">i", data, pos)
    pos += 4
    end = pos + ext_len
    ext: dict[str, str] = {}
    while pos < end:
        (klen,) = struct.unpack_from(">h", data, pos)
        key = data[pos + 2 : pos + 2 + klen].decode()
        pos += 2 + klen
        (vlen,) = struct.unpack_from(">i", data, pos)
        ext[key] = data[pos + 4 : pos + 4 + vlen].decode()
        pos += 4 + vlen
    if pos != len(data):
        raise CaptureError(f"ROCKETMQ header has {len(data) - pos} trailing bytes")
    header: dict[str, Any] = {
        "code": code,
        "language": LANGUAGES[lang] if lang < len(LANGUAGES) else lang,
        "version": version,
        "opaque": opaque,
        "flag": flag,
        "extFields": ext,
    }
    if remark is not None:
        header["remark"] = remark
    return header


def read_capture(path: Path) -> list[CapturedFrame]:
    """Every whole frame of a capture file. A torn tail (part of a frame a peer was writing when
    its connection closed) is not a frame and is passed over; raw records (a stream that was
    not frames at all) raise CaptureError."""
    frames = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        rec = json.loads(line)
        if "torn" in rec:
            continue
        if "frame" not in rec:
            raise CaptureError(f"{path}:{lineno}: unframed bytes on connection {rec['conn']}")
        frames.append(
            CapturedFrame(
                rec["conn"], rec["proxy"], rec["dir"], rec["t"], base64.b64decode(rec["frame"])
            )
        )
    return frames


def is_response(header: dict[str, Any]) -> bool:
    return bool(int(header.get("flag", 0)) & 1)


def request_codes(frames: list[CapturedFrame]) -> set[int]:
    """Codes of every request (client to server, and server-originated requests too)."""
    return {int(h["code"]) for h in (f.header() for f in frames) if not is_response(h)}
