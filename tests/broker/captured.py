"""The JSON request headers of one request code in the wire captures of the stock clients
(interop/fixtures' "wire"): what the header readers' tests hold the native readers to."""

from __future__ import annotations

import struct

import orjson

from interop.capture import read_capture
from interop.fixtures import ensure_fixture

CLIENTS = ("java", "java-rocketmq-header", "cpp", "node", "go", "mqadmin")


def captured_headers(code: int) -> list[bytes]:
    """Every captured JSON header of a request with `code`, in capture order."""
    wire = ensure_fixture("wire")
    found = []
    for name in CLIENTS:
        for frame in read_capture(wire / f"{name}.jsonl"):
            _, word = struct.unpack_from(">ii", frame.raw)
            header = frame.raw[8 : 8 + (word & 0xFFFFFF)]
            if word >> 24 == 0 and orjson.loads(header).get("code") == code:
                found.append(header)
    return found
