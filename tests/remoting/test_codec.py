"""The frame codec against frames real clients and RocketMQ sent, and against itself."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interop.capture import read_capture
from interop.fixtures import ensure_fixture
from sidewinder.protocol.codes import LanguageCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.codec import (
    FrameDecoder,
    FrameError,
    decode_frame,
    encode_binary_header,
    encode_frame,
)

CAPTURES = ["java", "java-rocketmq-header", "cpp", "node", "go", "mqadmin"]


@pytest.fixture(scope="module")
def wire_fixture() -> Path:
    return ensure_fixture("wire")


@pytest.mark.reference_fixtures
@pytest.mark.parametrize("capture", CAPTURES)
def test_every_captured_frame_decodes_and_reencodes(wire_fixture: Path, capture: str) -> None:
    frames = read_capture(wire_fixture / f"{capture}.jsonl")
    assert frames
    for frame in frames:
        command = decode_frame(frame.raw)
        assert command.code == int(frame.header()["code"])
        assert command.body_bytes == frame.body
        again = decode_frame(encode_frame(command))
        assert again == command and again.body_bytes == command.body_bytes
        assert again.serialize_type == command.serialize_type
        if frame.serialize_type == SerializeType.ROCKETMQ:
            assert encode_binary_header(command) == frame.header_bytes
            assert encode_frame(command) == frame.raw


@pytest.mark.reference_fixtures
def test_the_whole_capture_stream_decodes_fed_in_odd_chunks(wire_fixture: Path) -> None:
    frames = [f for f in read_capture(wire_fixture / "java.jsonl") if f.direction == "s2c"]
    stream = b"".join(f.raw for f in frames)
    decoder = FrameDecoder()
    got = []
    for at in range(0, len(stream), 7):
        decoder.feed(stream[at : at + 7])
        got += list(decoder.commands())
    assert [c.opaque for c in got] == [decode_frame(f.raw).opaque for f in frames]
    assert decoder.buffered == 0


def json_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body


def test_json_ext_values_of_any_scalar_become_java_strings() -> None:
    command = decode_frame(
        json_frame(
            {
                "code": 11,
                "language": "CPP",
                "version": 63,
                "opaque": 5,
                "flag": 0,
                "remark": "",
                "unknownKey": [1, 2],
                "extFields": {"queueId": 3, "commitOffset": -1, "flag": True, "x": None, "f": 1.5},
            }
        )
    )
    assert command.language is LanguageCode.CPP
    assert command.ext_fields == {"queueId": "3", "commitOffset": "-1", "flag": "true", "f": "1.5"}
    bare = decode_frame(json_frame({"code": 34, "opaque": 1}))
    assert bare.ext_fields is None and bare.language is LanguageCode.JAVA and bare.flag == 0


def test_outgoing_json_writes_strings_only_in_fastjson_key_order() -> None:
    request = RemotingCommand(code=11, opaque=9)
    reply = request.reply(0, ext_fields={"nextBeginOffset": 5, "ok": True})  # type: ignore[dict-item]
    header = encode_frame(reply)[8:]
    text = header.decode()
    assert '"nextBeginOffset":"5"' in text and '"ok":"true"' in text
    keys = list(json.loads(text))
    assert keys == sorted(keys)
    assert json.loads(text)["flag"] == 1 and json.loads(text)["opaque"] == 9


commands = st.builds(
    RemotingCommand,
    code=st.integers(-(1 << 15), (1 << 15) - 1),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(1 << 15), (1 << 15) - 1),
    opaque=st.integers(-(1 << 31), (1 << 31) - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=40),
    ext_fields=st.none()
    | st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=30), min_size=1),
    body=st.none() | st.binary(min_size=1, max_size=300),
    serialize_type=st.sampled_from(list(SerializeType)),
)


@settings(max_examples=300, deadline=None)
@given(commands, st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_round_trip_in_every_header_type_and_any_split(
    command: RemotingCommand, cuts: list[int]
) -> None:
    data = encode_frame(command) * 2
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    at = 0
    for cut in cuts * (len(data) // max(sum(cuts), 1) + 1):
        decoder.feed(data[at : at + cut])
        got += list(decoder.commands())
        at += cut
        if at >= len(data):
            break
    assert len(got) == 2
    for again in got:
        assert again == command
        assert again.body_bytes == command.body_bytes
        assert again.serialize_type == command.serialize_type


def test_byte_at_a_time() -> None:
    command = RemotingCommand(310, ext_fields={"a": "G", "b": "T"}, body=b"x" * 20, opaque=7)
    decoder = FrameDecoder()
    got = []
    for byte in encode_frame(command):
        decoder.feed(bytes([byte]))
        got += list(decoder.commands())
    assert got == [command]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (struct.pack(">i", 2) + b"xx", "below the 4-byte minimum"),
        (struct.pack(">ii", 100 << 20, 0), "over the"),
        (struct.pack(">ii", 8, 0x07000004) + b"abcd", "unknown serialize type 7"),
        (struct.pack(">ii", 8, 99) + b"abcd", "runs past"),
        (json_frame({"code": "x"}), "not an integer"),
        (json_frame({"code": 1, "language": "KLINGON"}), "unknown language"),
        (json_frame({"code": 1, "extFields": [1]}), "not an object"),
        (struct.pack(">ii", 9, 5) + b"{oops", "does not parse"),
        (struct.pack(">ii", 7, 0x01000003) + b"\x00\x01\x00", "truncated"),
    ],
)
def test_malformed_frames_raise_frame_error_naming_the_problem(data: bytes, problem: str) -> None:
    decoder = FrameDecoder(max_frame=16 << 20)
    decoder.feed(data)
    with pytest.raises(FrameError, match=problem):
        list(decoder.commands())
    with pytest.raises(FrameError):  # and it stays broken
        list(decoder.commands())


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_nothing_but_frame_error(data: bytes) -> None:
    decoder = FrameDecoder(max_frame=1 << 16)
    decoder.feed(data)
    with contextlib.suppress(FrameError):
        list(decoder.commands())
