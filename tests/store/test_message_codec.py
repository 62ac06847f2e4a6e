"""The CommitLog record codec: round trips, damage, and RocketMQ's own records byte for byte."""

from __future__ import annotations

import hashlib
import json
import mmap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.common.native import NATIVE
from sidewinder.protocol.message import (
    MessageConst,
    decode_offset_msg_id,
    encode_properties,
)
from sidewinder.protocol.record import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    BlankRecord,
    Host,
    MessageRecord,
    MessageSysFlag,
    MessageToStore,
    RecordError,
    decode_record,
    encode_blank,
    encode_record,
    encode_record_py,
)
from tests.hot_path import IMPLEMENTATIONS, using

NATIVE_ENCODE = None if NATIVE is None else NATIVE.encode_record

hosts = st.builds(
    Host,
    st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16),
    st.integers(0, 65535),
)
messages = st.builds(
    MessageToStore,
    topic=st.binary(min_size=1, max_size=300).filter(lambda t: b"\x00" not in t[:1]),
    queue_id=st.integers(0, 1023),
    body=st.binary(max_size=2048),
    properties=st.binary(max_size=300),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.sampled_from([0, 0x1, 0x2, 0x4, 0x8, 0xC]),
    born_timestamp=st.integers(0, 2**62),
    born_host=hosts,
    store_host=hosts,
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 2**62),
)


@given(
    messages,
    st.integers(0, 2**40),
    st.integers(0, 2**50),
    st.integers(0, 2**62),
    st.integers(0, 64),
)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_round_trip(
    implementation: str,
    message: MessageToStore,
    queue_offset: int,
    phy_offset: int,
    store_ts: int,
    position: int,
) -> None:
    buf = bytearray(position + message.size() + 16)
    with using(implementation):
        size = encode_record(
            message,
            buf,
            position,
            queue_offset=queue_offset,
            phy_offset=phy_offset,
            store_timestamp=store_ts,
        )
    assert size == message.size()
    record = decode_record(buf, position, check_crc=True)
    assert isinstance(record, MessageRecord)
    assert record.total_size == size
    assert record.magic == (MESSAGE_MAGIC_V2 if len(message.topic) > 127 else MESSAGE_MAGIC)
    assert bytes(record.topic_bytes) == message.topic
    assert bytes(record.body) == message.body
    assert bytes(record.properties_bytes) == message.properties
    assert (record.queue_id, record.flag, record.queue_offset, record.phy_offset) == (
        message.queue_id,
        message.flag,
        queue_offset,
        phy_offset,
    )
    assert (record.born_host, record.store_host) == (message.born_host, message.store_host)
    assert record.sys_flag & MessageSysFlag.BORNHOST_V6 == (0x10 if message.born_host.is_v6 else 0)
    assert record.sys_flag & 0xF == message.sys_flag
    assert (record.born_timestamp, record.store_timestamp) == (message.born_timestamp, store_ts)
    assert record.reconsume_times == message.reconsume_times
    assert record.prepared_transaction_offset == message.prepared_transaction_offset
    # Nothing is after the record yet: the next position reads as unwritten.
    assert decode_record(buf, position + size) is None


needs_native = pytest.mark.skipif(NATIVE_ENCODE is None, reason="sidewinder._native not loaded")
offsets = st.integers(-(2**63), 2**63 - 1)


def encode_both(
    message: MessageToStore, buffers: tuple[object, object], position: int, **stamps: int
) -> tuple[int, int]:
    with using("python"):
        expected = encode_record(message, buffers[0], position, **stamps)  # type: ignore[arg-type]
    with using("native"):
        got = encode_record(message, buffers[1], position, **stamps)  # type: ignore[arg-type]
    return expected, got


@needs_native
@given(messages, offsets, offsets, offsets, st.integers(0, 64), st.binary(min_size=1, max_size=1))
def test_native_record_bytes_are_the_references(
    message: MessageToStore,
    queue_offset: int,
    phy_offset: int,
    store_ts: int,
    position: int,
    fill: bytes,
) -> None:
    # Whatever was in the buffer around the record stays as it was.
    size = position + message.size() + 16
    python, native = bytearray(fill * size), bytearray(fill * size)
    stamps = {"queue_offset": queue_offset, "phy_offset": phy_offset, "store_timestamp": store_ts}
    assert encode_both(message, (python, native), position, **stamps) == (message.size(),) * 2
    assert native == python


@needs_native
@given(messages, st.sampled_from(["memoryview", "mmap", "memoryview of mmap"]))
def test_native_writes_every_kind_of_store_buffer(message: MessageToStore, kind: str) -> None:
    size = message.size() + 8
    python = bytearray(size)
    with mmap.mmap(-1, size) as mm:
        target: object = {"memoryview": memoryview(bytearray(size)), "mmap": mm}.get(
            kind, memoryview(mm)
        )
        stamps = {"queue_offset": 1, "phy_offset": 2, "store_timestamp": 3}
        encode_both(message, (python, target), 4, **stamps)
        assert bytes(target) == python  # type: ignore[call-overload]
        if isinstance(target, memoryview):
            target.release()


def test_the_body_may_be_a_memoryview(hot_path: str) -> None:
    frame = b"head" + b"the body" + b"tail"
    message = MessageToStore(topic=b"T", queue_id=0, body=memoryview(frame)[4:12], properties=b"")
    buf = bytearray(message.size())
    encode_record(message, buf, 0, queue_offset=0, phy_offset=0, store_timestamp=0)
    record = decode_record(buf, 0, check_crc=True)
    assert isinstance(record, MessageRecord) and bytes(record.body) == b"the body"


@needs_native
def test_native_refuses_a_buffer_too_small_and_writes_nothing() -> None:
    message = sample()
    for size in (0, 8, message.size() - 1):
        for buffer in (bytearray(b"\xaa" * size), memoryview(bytearray(b"\xaa" * size))):
            with pytest.raises(IndexError), using("native"):
                encode_record(message, buffer, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
            assert bytes(buffer) == b"\xaa" * size
    buffer = bytearray(b"\xaa" * (message.size() + 10))
    for position in (-1, -(2**62), 11, 2**62):
        with pytest.raises(IndexError), using("native"):
            encode_record(
                message, buffer, position, queue_offset=0, phy_offset=0, store_timestamp=1
            )
        assert buffer == b"\xaa" * (message.size() + 10)


@pytest.mark.parametrize(
    "make",
    [bytes, lambda n: memoryview(bytearray(n)).toreadonly(), lambda n: memoryview(bytes(n)), str],
    ids=["bytes", "readonly view", "view of bytes", "not a buffer"],
)
def test_a_read_only_buffer_is_refused(hot_path: str, make: object) -> None:
    message = sample()
    with pytest.raises(TypeError):
        encode_record(
            message, make(message.size()), 0, queue_offset=0, phy_offset=0, store_timestamp=1
        )  # type: ignore[operator]


def test_properties_over_32767_bytes_are_refused(hot_path: str) -> None:
    message = MessageToStore(topic=b"T", queue_id=0, body=b"", properties=b"p" * 32768)
    buffer = bytearray(message.size())
    with pytest.raises(ValueError, match="exceed 32767"):
        encode_record(message, buffer, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
    assert buffer == bytes(message.size())


@needs_native
def test_native_copies_a_body_that_views_its_own_target() -> None:
    """A body viewing the bytes the record is written over is read before they change."""
    size = sample().size() + 64
    buffer = bytearray(range(256)) * (size // 256 + 1)
    expected = bytearray(buffer)
    view = memoryview(buffer)
    message = MessageToStore(topic=b"T", queue_id=0, body=view[10:74], properties=b"x\x01y")
    copy = MessageToStore(topic=b"T", queue_id=0, body=bytes(view[10:74]), properties=b"x\x01y")
    stamps = {"queue_offset": 0, "phy_offset": 0, "store_timestamp": 1}
    encode_record_py(copy, expected, 0, **stamps)
    with using("native"):
        encode_record(message, buffer, 0, **stamps)
    view.release()
    assert buffer == expected


@needs_native
def test_native_refuses_a_sysflag_that_does_not_match_the_hosts() -> None:
    assert NATIVE_ENCODE is not None
    buffer = bytearray(200)
    args = [b"T", 0, b"body", b"", 0, 0x10, 0, b"\x7f\0\0\1", 1, 0, b"\x7f\0\0\1", 2, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="sysflag"):
        NATIVE_ENCODE(buffer, 0, *args)
    assert buffer == bytes(200)


def sample() -> MessageToStore:
    return MessageToStore(
        topic=b"T", queue_id=1, body=b"hello", properties=encode_properties({"TAGS": "TagA"})
    )


@given(st.integers(1, 200))
def test_a_torn_record_is_an_error_never_a_crash(cut: int) -> None:
    message = sample()
    buf = bytearray(message.size())
    encode_record(message, buf, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
    torn = buf[: max(8, len(buf) - cut)]
    with pytest.raises(RecordError):
        decode_record(torn, 0)


@given(st.integers(0, 500), st.integers(0, 255))
def test_any_flipped_byte_is_caught_or_decodes(at: int, value: int) -> None:
    message = sample()
    buf = bytearray(message.size() + 8)
    encode_record(message, buf, 0, queue_offset=0, phy_offset=0, store_timestamp=1)
    buf[at % message.size()] = value
    try:
        record = decode_record(buf, 0, check_crc=True)
    except RecordError as exc:
        assert exc.position == 0
        return
    # Fields outside the body CRC (ids, offsets, times) can change and still decode, but a
    # result never claims bytes beyond the buffer, and a body that decodes matches its CRC.
    if isinstance(record, MessageRecord | BlankRecord):
        assert record.total_size <= len(buf)
    if isinstance(record, MessageRecord):
        assert record.crc_ok()


def test_blank_tail() -> None:
    buf = bytearray(64)
    encode_blank(buf, 16, 48)
    assert decode_record(buf, 16) == BlankRecord(48)
    assert int.from_bytes(buf[20:24], "big", signed=True) == BLANK_MAGIC
    with pytest.raises(RecordError, match="does not fit"):
        decode_record(buf[:40], 16)


def test_bad_magic_names_it() -> None:
    with pytest.raises(RecordError, match="magic code 0x12345678"):
        decode_record(b"\x00\x00\x00\x40\x12\x34\x56\x78" + bytes(56))


# -- against the store the real RocketMQ broker wrote (interop/fixtures.py) ----------------------
@pytest.fixture(scope="module")
def rocketmq_store() -> tuple[Path, dict]:
    from interop.fixtures import ensure_fixture

    fixture = ensure_fixture("store")
    info = json.loads((fixture / "manifest.json").read_text())
    return fixture / info["store"], info


def read_all(store: Path) -> dict[int, MessageRecord]:
    """Every record of every segment, by physical offset, CRC checked."""
    records: dict[int, MessageRecord] = {}
    for segment in sorted((store / "commitlog").iterdir()):
        data = segment.read_bytes()
        base, pos = int(segment.name), 0
        while (record := decode_record(data, pos, check_crc=True)) is not None:
            if isinstance(record, BlankRecord):
                assert pos + record.total_size == len(data)
                break
            assert record.phy_offset == base + pos
            records[record.phy_offset] = record
            pos += record.total_size
    return records


@pytest.mark.interop
@pytest.mark.reference_fixtures
def test_every_record_rocketmq_wrote_decodes_and_matches_what_was_sent(
    rocketmq_store: tuple[Path, dict],
) -> None:
    store, info = rocketmq_store
    records = read_all(store)
    checked = 0
    for topic, events in info["sent"].items():
        for sent in events:
            if "offsetMsgId" not in sent:
                continue  # the C++ core and transactional sends report none
            _, _, phy = decode_offset_msg_id(sent["offsetMsgId"])
            record = records[phy]
            props = record.properties()
            assert props.get(MessageConst.KEYS) == sent["keys"]
            assert hashlib.md5(record.uncompressed_body()).hexdigest() == sent["bodyMd5"]
            if topic == "FixtureDelay":
                assert record.topic == "SCHEDULE_TOPIC_XXXX"
                assert props[MessageConst.REAL_TOPIC] == topic
            else:
                assert record.topic == topic
                assert (record.queue_id, record.queue_offset) == (
                    sent["queueId"],
                    sent["queueOffset"],
                )
            if sent.get("tags"):
                assert props[MessageConst.TAGS] == sent["tags"]
            if sent["client"] == "java":
                assert props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == sent["msgId"]
            checked += 1
    assert checked >= 600
    compressed = [r for r in records.values() if r.sys_flag & MessageSysFlag.COMPRESSED]
    assert compressed, "the fixture holds compressed bodies"


@pytest.mark.interop
@pytest.mark.reference_fixtures
@pytest.mark.usefixtures("hot_path")
def test_reencoding_rocketmq_records_gives_the_same_bytes(
    rocketmq_store: tuple[Path, dict],
) -> None:
    store, _ = rocketmq_store
    for segment in sorted((store / "commitlog").iterdir())[:2]:
        data = segment.read_bytes()
        pos = 0
        while isinstance(record := decode_record(data, pos), MessageRecord):
            message = MessageToStore(
                topic=bytes(record.topic_bytes),
                queue_id=record.queue_id,
                body=record.body,
                properties=bytes(record.properties_bytes),
                flag=record.flag,
                sys_flag=record.sys_flag,
                born_timestamp=record.born_timestamp,
                born_host=record.born_host,
                store_host=record.store_host,
                reconsume_times=record.reconsume_times,
                prepared_transaction_offset=record.prepared_transaction_offset,
            )
            out = bytearray(record.total_size)
            encode_record(
                message,
                out,
                0,
                queue_offset=record.queue_offset,
                phy_offset=record.phy_offset,
                store_timestamp=record.store_timestamp,
            )
            assert out == data[pos : pos + record.total_size], f"record at {record.phy_offset}"
            pos += record.total_size
