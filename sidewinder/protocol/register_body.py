"""REGISTER_BROKER's body, RegisterBrokerBody: JSON, or with `compressedRegister` RocketMQ's
deflated binary form (the data version as JSON, then one `name read write perm filterType` line
per topic, then the filter server list as JSON; every part length-prefixed, big-endian).
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

from sidewinder.protocol import body
from sidewinder.protocol.errors import BodyError


def encode_register_body(data: dict[str, Any], compressed: bool) -> bytes:
    """`data` is {"topicConfigSerializeWrapper": {...}, "filterServerList": [...]}."""
    if not compressed:
        return body.dumps(data).encode()
    wrapper = data["topicConfigSerializeWrapper"]
    parts = [_sized(body.dumps(wrapper["dataVersion"]).encode())]
    topics = list(wrapper["topicConfigTable"].values())
    parts.append(struct.pack(">i", len(topics)))
    for topic in topics:
        line = " ".join(
            str(topic[k])
            for k in ("topicName", "readQueueNums", "writeQueueNums", "perm", "topicFilterType")
        )
        parts.append(_sized(line.encode()))
    parts.append(_sized(body.dumps(data.get("filterServerList") or []).encode()))
    return zlib.compress(b"".join(parts))


def _sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


class RegisterBodyError(BodyError):
    """A REGISTER_BROKER body that does not decode (answered SYSTEM_ERROR, naming why)."""


# The parts of RegisterBrokerBody the name server reads (body.check_shape).
REGISTER_BODY_SHAPE: body.Shape = {
    "topicConfigSerializeWrapper": {
        "topicConfigTable": {
            "*": {
                "topicName": str,
                "readQueueNums": int,
                "writeQueueNums": int,
                "perm": int,
                "topicSysFlag": int,
            }
        },
        "dataVersion": {"counter": int, "timestamp": int},
    },
    "filterServerList": [str],
}


def decode_register_body(data: bytes, compressed: bool) -> dict[str, Any]:
    """RegisterBrokerBody: JSON, or (compressedRegister) RocketMQ's deflated binary form;
    RegisterBodyError when it is neither, or its topic configs are not of their shape."""
    if compressed:
        try:
            decoded = _decode_compressed(data)
        except RegisterBodyError:
            raise
        except (ValueError, IndexError) as exc:
            raise RegisterBodyError(f"compressed register body does not decode: {exc}") from None
    else:
        try:
            decoded = body.loads(data) if data else {}
        except ValueError as exc:
            raise RegisterBodyError(f"register body is not JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise RegisterBodyError("register body is not an object")
    try:
        body.check_shape(decoded, REGISTER_BODY_SHAPE, "register body")
    except BodyError as exc:
        raise RegisterBodyError(str(exc)) from None
    wrapper = decoded.get("topicConfigSerializeWrapper") or {}
    for name, config in (wrapper.get("topicConfigTable") or {}).items():
        if not isinstance(config, dict) or "topicName" not in config:
            raise RegisterBodyError(f"register body: the config of topic {name} has no topicName")
    return decoded


def _decode_compressed(data: bytes) -> dict[str, Any]:
    try:
        stream = io.BytesIO(zlib.decompress(data))
    except zlib.error as exc:
        raise RegisterBodyError(f"compressed register body does not inflate: {exc}") from None

    def read(n: int) -> bytes:
        chunk = stream.read(n)
        if len(chunk) != n:
            raise RegisterBodyError("compressed register body is truncated")
        return chunk

    def read_int() -> int:
        return int(struct.unpack(">i", read(4))[0])

    data_version = body.loads(read(read_int()))
    topics = {}
    for _ in range(read_int()):
        words = read(read_int()).decode().split(" ")
        name, read_nums, write_nums, perm = words[0], *map(int, words[1:4])
        topics[name] = {
            "topicName": name,
            "readQueueNums": read_nums,
            "writeQueueNums": write_nums,
            "perm": perm,
            "topicFilterType": words[4] if len(words) > 4 else "SINGLE_TAG",
        }
    filters = body.loads(read(read_int())) if stream.tell() < len(stream.getbuffer()) else []
    return {
        "topicConfigSerializeWrapper": {"dataVersion": data_version, "topicConfigTable": topics},
        "filterServerList": filters or [],
    }
