"""The send lane (sidewinder/broker/send/lane.py): the Rust `SendLane` against its Python
reference `SendLanePy`, on generated chunks of frames (plain sends, sends it must leave, other
requests, batches, broken framing, cut tails) and on the mutated real frames of the wire
captures: the same result, the same window bytes, the same queue offsets, the same topics asked
for. The reference reads headers with `send_v2_fields`, whose native reader may give None where
the Python one reads a header (tests/broker/send/test_header.py): on mutated bytes the
reference runs with the native reader, on generated ones with both. The full pipeline through
the lane is tests/broker/send/test_pipeline.py's "frames" entry."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from interop.capture import read_capture
from interop.fixtures import ensure_fixture
from sidewinder.broker.send.lane import SendLanePy, served_sends
from sidewinder.broker.send.reply import SendReplyFrames
from sidewinder.common.native import NATIVE
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.record import Host, MessageRecord, decode_record
from sidewinder.remoting.codec import FrameDecoder, decode_frame
from tests.hot_path import using
from tests.remoting.mutations import mutate

pytestmark = pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")

STORE = bytes([192, 168, 0, 7])
CLUSTER = b"CLUSTER\x01DefaultCluster"
PIECES = SendReplyFrames('r%d-"ü', True, Host(STORE, 10911)).pieces
MAX_FRAME = 1 << 20
TOPICS = {"T": ("T", b"T", 4), "U": ("U", b"U", 8), "é": ("é", "é".encode(), 2)}
AT, PHY, STAMP = 16, 5000, 1_700_000_000_123


def frame(header: bytes, body: bytes = b"", kind: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), kind << 24 | len(header)) + header + body


def send_header(
    topic: str = "T",
    queue: str = "1",
    properties: str = "",
    *,
    opaque: int = 7,
    flag: int = 0,
    sys_flag: str = "0",
    code: int = 310,
) -> bytes:
    ext = {"a": "G", "b": topic, "c": "TBW102", "d": "4", "e": queue, "f": sys_flag}
    ext |= {"g": "1700000000000", "h": "0", "i": properties, "j": "0"}
    header = {"code": code, "extFields": ext, "flag": flag, "language": "JAVA"}
    header |= {"opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 373}
    return json.dumps(header, separators=(",", ":")).encode()


def run(
    lane: Any,
    frames: bytes,
    *,
    room: int = 1 << 16,
    largest: int = 4 << 20,
    late: bool = False,
    offsets: dict[tuple[str, int], int] | None = None,
    born: bytes = bytes([10, 0, 0, 9]),
) -> tuple[Any, ...]:
    out = bytearray(AT + room + 8)
    asked: list[str] = []

    def topic_of(name: str) -> tuple[str, bytes, int] | None:
        asked.append(name)
        return TOPICS.get(name)

    queue_offsets = dict(offsets or {("T", 1): 41})
    result = lane.serve(
        bytearray(frames), 0, memoryview(out), AT, room, PHY, STAMP, queue_offsets, topic_of,
        born, 55555, largest, late,
    )  # fmt: skip
    return tuple(result), bytes(out), queue_offsets, asked


def lanes() -> tuple[Any, Any]:
    assert NATIVE is not None
    args = (STORE, 10911, CLUSTER, PIECES, MAX_FRAME)
    return SendLanePy(*args), NATIVE.SendLane(*args)


def agree(
    frames: bytes, legs: tuple[str, ...] = ("native", "python"), **kw: Any
) -> tuple[Any, ...]:
    """The native lane's result is the reference's (with each leg's header reader)."""
    reference, native = lanes()
    got = run(native, frames, **kw)
    for leg in legs:
        with using(leg):  # type: ignore[arg-type]
            expected = run(reference, frames, **kw)
        assert got == expected, (leg, frames)
    return got


def record_at(out: bytes, at: int) -> MessageRecord:
    record = decode_record(out, at)
    assert isinstance(record, MessageRecord)
    return record


# -- what a plain chunk gives -------------------------------------------------------------------
def test_plain_sends_are_stored_and_answered() -> None:
    frames = b"".join(
        [
            frame(send_header(opaque=1, properties="KEYS\x01k\x02WAIT\x01true"), b"one"),
            frame(send_header("U", "3", opaque=2, flag=2), b"two"),  # oneway
            frame(send_header(opaque=3, properties="WAIT\x01false\x02"), b"three"),
        ]
    )
    (result, out, offsets, asked) = agree(frames, late=True)
    position, used, need, skipped, replies, later, served, settle_end = result[:8]
    topics, touched, stored, counts = result[8:]
    assert (position, need, skipped, stored) == (len(frames), 0, [], 3)
    assert counts == (1, 1, 1, 0, 0, 0)  # one answered now, one oneway, one later
    assert asked == ["T", "U"]
    assert offsets == {("T", 1): 43, ("U", 3): 1}
    assert touched == [(("T", 1), 41), (("U", 3), 0)]
    records = []
    at = AT
    while at < AT + used:
        record = record_at(out, at)
        records.append(record)
        at += record.total_size
    assert [(r.topic, r.queue_id, bytes(r.body), r.queue_offset) for r in records] == [
        ("T", 1, b"one", 41),
        ("U", 3, b"two", 0),
        ("T", 1, b"three", 42),
    ]
    assert records[0].phy_offset == PHY
    assert bytes(records[0].properties_bytes) == b"KEYS\x01k\x02" + CLUSTER  # no WAIT
    assert bytes(records[2].properties_bytes) == CLUSTER
    assert records[0].born_host == Host(bytes([10, 0, 0, 9]), 55555)
    assert records[0].store_timestamp == STAMP
    assert topics == [("T", 2, records[0].total_size + records[2].total_size, 2),
                      ("U", 1, records[1].total_size, 1)]  # fmt: skip
    # The first waits (SYNC_FLUSH: answered once settled), the third asked not to.
    waiting = decode_frame(later)
    assert waiting.opaque == 1 and waiting.code == ResponseCode.SUCCESS
    assert settle_end == PHY + records[0].total_size
    now = decode_frame(replies)
    assert now.opaque == 3 and now.ext_fields is not None
    assert now.ext_fields["queueOffset"] == "42" and now.ext_fields["MSG_REGION"] == 'r%d-"ü'
    assert list(served_sends(served)) == [
        (1, 1, [PHY], 41, True),
        (3, 1, [PHY + records[0].total_size + records[1].total_size], 42, False),
    ]


def batch_body(entries: list[tuple[int, bytes, bytes]]) -> bytes:
    """A SEND_BATCH_MESSAGE body: (flag, body, properties) per message."""
    out = b""
    for flag, body, properties in entries:
        total = 20 + len(body) + 2 + len(properties)
        out += struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body
        out += struct.pack(">H", len(properties)) + properties
    return out


def test_a_batch_is_stored_as_a_run_of_records() -> None:
    body = batch_body([(0, b"a", b"KEYS\x01k\x02"), (3, b"bb", b""), (0, b"ccc", b"WAIT\x01false")])
    plain = frame(send_header(opaque=2), b"one")
    frames = frame(send_header("U", "3", opaque=1, code=320), body) + plain
    result, out, offsets, _ = agree(frames, late=True)
    assert result[0] == len(frames) and result[10] == 4
    assert result[11] == (0, 0, 1, 0, 0, 1)  # both wait (the batch: as its first message)
    records = []
    at = AT
    while at < AT + result[1]:
        records.append(record_at(out, at))
        at += records[-1].total_size
    assert [(r.topic, r.queue_offset, bytes(r.body), r.flag) for r in records] == [
        ("U", 0, b"a", 0), ("U", 1, b"bb", 3), ("U", 2, b"ccc", 0), ("T", 41, b"one", 0)
    ]  # fmt: skip
    assert bytes(records[0].properties_bytes) == b"KEYS\x01k\x02" + CLUSTER
    assert bytes(records[2].properties_bytes) == b"WAIT\x01false\x02" + CLUSTER  # kept
    assert offsets[("U", 3)] == 3
    sizes = [r.total_size for r in records]
    assert result[8] == [("U", 3, sum(sizes[:3]), 1), ("T", 1, sizes[3], 1)]  # a batch: 1 put
    decoder = FrameDecoder()
    decoder.feed(result[5])
    reply, plain_reply = decoder.commands()
    assert reply.ext_fields is not None and (reply.opaque, plain_reply.opaque) == (1, 2)
    assert reply.ext_fields["msgId"].count(",") == 2 and reply.ext_fields["queueOffset"] == "0"
    phys = [PHY + sum(r.total_size for r in records[:n]) for n in range(3)]
    assert next(iter(served_sends(result[6]))) == (1, 3, phys, 0, True)


def test_a_send_it_cannot_serve_stops_it_and_other_requests_are_left() -> None:
    heartbeat = frame(b'{"code":34,"flag":0,"opaque":9}', b"{}")
    plain = frame(send_header(opaque=1), b"x")
    delayed = frame(send_header(opaque=2, properties="DELAY\x013"), b"y")
    result, *_ = agree(heartbeat + plain + delayed + plain)
    position, _, need, skipped = result[:4]
    assert skipped == [(0, len(heartbeat))]
    assert (position, need, result[10]) == (len(heartbeat) + len(plain), 0, 1)


@pytest.mark.parametrize(
    "header",
    [
        send_header("V"),  # no such topic
        send_header("T", "4"),  # past its queues
        send_header(sys_flag="4"),  # a transaction half
        send_header(properties="TIMER_DELIVER_MS\x011"),
        send_header(properties="TRAN_MSG\x01true"),
        send_header(flag=1),  # a response
        send_header(code=320),  # a batch whose body is not one
        send_header(code=10),  # SEND_MESSAGE: its long names are the generic decode's
        send_header(queue="-1"),
        b'{"opaque":1,"code":11}',  # not opening with its code: taken for a send
    ],
)
def test_sends_the_shortcut_does_not_take_stop_the_lane(header: bytes) -> None:
    result, *_ = agree(frame(header, b"x") + frame(send_header(), b"y"))
    assert result[0] == 0 and result[10] == 0


def test_a_record_that_does_not_fit_the_window_asks_for_room() -> None:
    one = frame(send_header(opaque=1), b"a" * 100)
    size = agree(one)[0][1]
    result, *_ = agree(one * 3, room=2 * size + size // 2)
    position, used, need = result[:3]
    assert (position, result[10]) == (len(one) * 2, 2) and need == used // 2
    assert agree(one * 3, largest=100)[0][:3] == (0, 0, 0)  # over the largest: left


@pytest.mark.parametrize(
    "tail",
    [
        struct.pack(">i", 3) + b"\0" * 8,  # a length below 4
        struct.pack(">ii", 8, 1 << 24 | 4) + b"\0" * 4,  # ROCKETMQ serialized: the decoder's
        struct.pack(">ii", 8, 40) + b"\0" * 4,  # a header past its frame
        struct.pack(">ii", MAX_FRAME + 1, 4),  # over the frame limit
        frame(send_header(), b"x")[:-1],  # not whole yet
    ],
)
def test_framing_it_does_not_take_stops_it(tail: bytes) -> None:
    plain = frame(send_header(), b"x")
    result, *_ = agree(plain + tail)
    assert result[0] == len(plain) and result[10] == 1


def test_ipv6_hosts_set_their_flags() -> None:
    _, out, *_ = agree(frame(send_header(), b"x"), born=bytes(range(16)))
    record = record_at(out, AT)
    assert record.born_host == Host(bytes(range(16)), 55555) and record.sys_flag & 0x10


# -- generated chunks ---------------------------------------------------------------------------
PROPERTY_PIECES = [
    "KEYS\x01k", "WAIT\x01true", "WAIT\x01false", "WAIT\x01FaLsE", "XWAIT\x01false",
    "UNIQ_KEY\x01AC1", "é\x01ü\U0001f600", "DELAY\x013", "TIMER_DELAY_SEC\x015", "TRAN_MSG\x01true",
    "TAGS\x01a", "", "\x02",
]  # fmt: skip


@st.composite
def chunks(draw: st.DrawFn) -> bytes:
    frames = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["send", "send", "send", "other", "raw"]))
        if kind == "send":
            pieces = draw(st.lists(st.sampled_from(PROPERTY_PIECES), max_size=4))
            header = send_header(
                draw(st.sampled_from(["T", "U", "é", "V"])),
                draw(st.sampled_from(["0", "1", "3", "7", "12", "007"])),
                "\x02".join(pieces),
                opaque=draw(st.integers(-(2**31), 2**31 - 1)),
                flag=draw(st.sampled_from([0, 0, 2, 1, 3])),
                sys_flag=draw(st.sampled_from(["0", "0", "4", "8", "16", "32", "131072"])),
                code=draw(st.sampled_from([310, 310, 310, 10, 320])),
            )
            if b'"code":320' in header and draw(st.booleans()):
                entries = draw(
                    st.lists(
                        st.tuples(
                            st.integers(0, 9),
                            st.binary(max_size=30),
                            st.sampled_from(PROPERTY_PIECES).map(lambda p: p.encode()),
                        ),
                        max_size=4,
                    )
                )
                body = batch_body(entries)
            else:
                body = draw(st.binary(max_size=200))
            frames.append(frame(header, body))
        elif kind == "other":
            code = draw(st.sampled_from([11, 34, 14, 0, 10]))
            frames.append(frame(b'{"code":%d,"flag":0,"opaque":5}' % code, b"{}"))
        else:
            frames.append(draw(st.binary(max_size=40)))
    return b"".join(frames)


@given(chunks(), st.sampled_from([1 << 16, 400, 90]), st.booleans())
def test_generated_chunks_are_served_the_same(chunk: bytes, room: int, late: bool) -> None:
    agree(chunk, room=room, late=late)


# -- the wire captures, mutated -----------------------------------------------------------------
def send_frames() -> list[bytes]:
    """Every SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE frame of the wire captures, to topic "T"."""
    wire = ensure_fixture("wire")
    found = []
    for name in ("java", "cpp", "node", "go"):
        for captured in read_capture(wire / f"{name}.jsonl"):
            _, word = struct.unpack_from(">ii", captured.raw)
            header = captured.raw[8 : 8 + (word & 0xFFFFFF)]
            if word >> 24 != 0:
                continue
            decoded = orjson.loads(header)
            if decoded.get("code") in (310, 320):
                decoded["extFields"]["b"] = "T"
                decoded["extFields"]["e"] = "1"
                found.append(frame(orjson.dumps(decoded), captured.raw[8 + len(header) :]))
    return found


def fuzz(cases: int, seed: int) -> int:
    seeds = send_frames()
    rng = random.Random(seed)
    stored = 0
    for _ in range(cases):
        chunk = b"".join(rng.choice(seeds) for _ in range(rng.randint(1, 3)))
        result, *_ = agree(mutate(rng, chunk, seeds), legs=("native",))
        stored += result[10]
    return stored


@pytest.mark.reference_fixtures
def test_mutated_real_frames_are_served_the_same() -> None:
    assert fuzz(2_000, 20261128) > 200  # many mutations leave sends the lane stores


@pytest.mark.slow
@pytest.mark.reference_fixtures
def test_mutated_real_frames_are_served_the_same_long() -> None:
    assert fuzz(100_000, 20261129) > 10_000
