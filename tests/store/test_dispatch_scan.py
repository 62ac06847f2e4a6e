"""The dispatch scan: the Rust one against its Python reference, and the reference against the
one-record dispatch it stands in for.

Segments are written with encode_record: plain messages over several topics and queues, non-ASCII
and astral tags and keys, delayed messages in SCHEDULE_TOPIC_XXXX, transactional ones (prepared,
committed, rolled back), IPv6 hosts, a V2 record with a 200-byte topic, the odd messages a scan
leaves to the reference reader (a name inside another, tags that are not UTF-8, a DELAY that is
not digits), and a blank tail. Both scans must give the same tuple from every record start, for
every limit and count; mutated segments feed both (neither may read past the buffer or differ).
The store-level golden test (RocketMQ's own CommitLog dispatched into its queue and index files
byte for byte) runs on both in tests/store/test_rocketmq_store_formats.py.
"""

from __future__ import annotations

import random
import struct

import pytest

from sidewinder.common.native import NATIVE
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import (
    BLANK_MAGIC,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageSysFlag,
    MessageToStore,
    encode_record,
    scan_record,
)
from sidewinder.store.consume_queue import CQ_ENTRY
from sidewinder.store.dispatch_scan import (
    DEFERRED,
    STOPPED,
    ScanRules,
    scan_segment_py,
)
from sidewinder.store.dispatchers import ConsumeQueueDispatcher, IndexDispatcher, parse_delay_levels
from sidewinder.store.index_file import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    KEY_ENTRY,
    index_key,
    index_key_hash,
    put_keys_py,
)
from tests.remoting.mutations import mutate

needs_native = pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")

V4 = Host(b"\x7f\x00\x00\x01", 10911)
V6 = Host(bytes(15) + b"\x01", 10911)
LEVELS = parse_delay_levels("1s 5s 10s 30s 1m 2m")
RULES = [
    ScanRules.of(LEVELS, keys=True),
    ScanRules.of(LEVELS, keys=False),
    ScanRules.of({}, keys=True),
]
PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED)
COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)


def plain(n: int) -> tuple[bytes, dict[str, str], int]:
    """(topic, properties, sysflag) of the n-th message of a mixed stream."""
    topic = [b"T", b"Orders", "主题".encode()][n % 3]
    props = {"UNIQ_KEY": f"{n:032X}", "TAGS": ["TagA", "标签", "😀x", ""][n % 4]}
    if n % 5 == 0:
        props["KEYS"] = f"k{n} 键{n}  order-{n % 7}"
    sys_flag = [0, 0, 0, PREPARED, COMMIT, ROLLBACK][n % 6]
    return topic, props, sys_flag


def build_segment(messages: list[tuple[bytes, bytes | dict[str, str], int, Host]]) -> bytearray:
    """A 64 KiB segment of these (topic, properties, sysflag, host) records, queue offsets
    counted per (topic, queue), then a blank tail."""
    segment = bytearray(64 << 10)
    position = 0
    next_offset: dict[tuple[bytes, int], int] = {}
    for n, (topic, props, sys_flag, host) in enumerate(messages):
        queue_id = n % 2
        encoded = props if isinstance(props, bytes) else encode_properties(props, trailing=False)
        message = MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=bytes(n % 40),
            properties=encoded,
            sys_flag=sys_flag,
            born_host=host,
            store_host=V4 if n % 4 else host,
        )
        offset = next_offset.get((topic, queue_id), 0)
        next_offset[(topic, queue_id)] = offset + 1
        position += encode_record(
            message,
            segment,
            position,
            queue_offset=offset,
            phy_offset=position,
            store_timestamp=1_700_000_000_000 + n,
        )
    struct.pack_into(">ii", segment, position, len(segment) - position, BLANK_MAGIC)
    return segment


def mixed_segment() -> tuple[bytearray, list[int]]:
    """Plain, delayed, transactional, IPv6 and V2 records, with odd ones among them; their
    starts."""
    messages: list[tuple[bytes, bytes | dict[str, str], int, Host]] = []
    for n in range(60):
        topic, props, sys_flag = plain(n)
        messages.append((topic, props, sys_flag, V6 if n % 7 == 0 else V4))
    schedule = b"SCHEDULE_TOPIC_XXXX"
    for level in ("1", "3", "6", "17", "0"):
        messages.append((schedule, {"DELAY": level, "TAGS": "d", "UNIQ_KEY": "A" * 32}, 0, V4))
    messages.append((b"L" * 200, {"TAGS": "long", "KEYS": "x"}, 0, V4))  # the V2 magic
    # Names inside other names or values are passed over, as decode_properties does.
    messages.append((b"T", {"KEYS": "k", "BIZ_KEYS": "b", "ORDER_TAGS": "o", "TAGS": "t"}, 0, V4))
    messages.append((b"T", {"XTAGS": "a", "UNIQ_KEY": "B" * 32}, 0, V4))
    messages.append((b"T", {"A": "xKEYS\x01", "TAGS": "t"}, 0, V4))
    messages.append((schedule, {"DELAY": "0" * 5 + "9" * 30, "TAGS": "d"}, 0, V4))  # past any
    odd: list[bytes | dict[str, str]] = [
        b"TAGS\x01\xff\xfe\x02UNIQ_KEY\x01" + b"C" * 32,  # tags not UTF-8
        b"KEYS\x01ok \xc3(\x02TAGS\x01t",  # a key not UTF-8
    ]
    for props in odd:
        messages.append((b"T", props, 0, V4))
        messages.append((b"T", {"TAGS": "after"}, 0, V4))
    messages.append((schedule, {"DELAY": "x1", "TAGS": "d"}, 0, V4))  # not digits
    messages.append((b"T", {"TAGS": "after"}, 0, V4))
    segment = build_segment(messages)
    starts, position = [], 0
    while struct.unpack_from(">i", segment, position + 4)[0] != BLANK_MAGIC:
        starts.append(position)
        position += struct.unpack_from(">i", segment, position)[0]
    return segment, [*starts, position]


def native_scan(data: bytes | bytearray, *args: int, rules: ScanRules) -> object:
    assert NATIVE is not None
    return NATIVE.scan_segment(data, *args, rules)


def outcome(scan: object) -> object:
    """A scan's tuple, or the type and text of what it raised."""
    try:
        return scan()  # type: ignore[operator]
    except (ValueError, IndexError, OverflowError) as exc:
        return type(exc).__name__


def agree(data: bytes | bytearray, *args: int, rules: ScanRules) -> object:
    reference = outcome(lambda: scan_segment_py(data, *args, rules))
    assert outcome(lambda: native_scan(data, *args, rules=rules)) == reference, args
    return reference


@needs_native
@pytest.mark.parametrize("rules", RULES)
def test_both_scans_agree_from_every_record_for_every_limit_and_count(rules: ScanRules) -> None:
    segment, starts = mixed_segment()
    readable = starts[-1] + 64  # into the blank
    for n, start in enumerate(starts):
        ends = starts[n + 1 :]
        for stop in {readable, ends[0] if ends else readable, ends[len(ends) // 2] if ends else 0}:
            for max_records in (0, 1, 7, 4096):
                agree(segment, start, stop - 1, readable, max_records, rules=rules)
                agree(segment, start, stop, readable, max_records, rules=rules)


@needs_native
def test_a_delay_of_thousands_of_digits_is_past_every_level_for_both() -> None:
    schedule = b"SCHEDULE_TOPIC_XXXX"
    segment = build_segment([(schedule, {"DELAY": "7" * 5000, "TAGS": "d"}, 0, V4)])
    scanned = agree(segment, 0, len(segment), len(segment), 10, rules=RULES[0])
    assert isinstance(scanned, tuple) and scanned[2] == 1
    (entry,) = CQ_ENTRY.iter_unpack(scanned[4][0][6])
    assert entry[2] == 1_700_000_000_000 + LEVELS[max(LEVELS)]  # due at the top level


@needs_native
def test_bad_arguments_are_refused_by_both() -> None:
    segment, _ = mixed_segment()
    rules = RULES[0]
    for args in [(-1, 100, 100, 5), (0, 100, len(segment) + 1, 5), (50, 100, 40, 5), (0, 9, 9, -1)]:
        assert agree(segment, *args, rules=rules) == "ValueError"


@needs_native
def test_mutated_segments_get_the_same_answer_from_both() -> None:
    segment, starts = mixed_segment()
    readable = starts[-1] + 64
    rng = random.Random(19)
    statuses = set()
    for round_ in range(3000):
        n = rng.randrange(len(starts) - 1)
        start = starts[n]
        end = min(start + rng.choice([100, 400, 2000]), readable)
        piece = bytes(segment[start:end])
        mutated = bytearray(segment)
        others = [bytes(segment[s : s + 64]) for s in starts[:3]]
        mutated[start:end] = mutate(rng, piece, others)[: end - start].ljust(end - start, b"\0")
        from_ = starts[max(n - rng.randrange(4), 0)]  # the records before it scanned too
        max_records = rng.choice([1, 4096])
        scanned = agree(mutated, from_, readable, readable, max_records, rules=RULES[round_ % 3])
        statuses.add(scanned[0] if isinstance(scanned, tuple) else scanned)
    assert statuses == {STOPPED, DEFERRED}  # mutations that read as records, and those that do not


def test_the_reference_scan_gives_what_dispatch_one_record_at_a_time_gives() -> None:
    """Entries, tags codes, delay due times and index hashes as ConsumeQueueDispatcher and
    IndexService compute them; each odd message deferred, alone, to them."""
    segment, starts = mixed_segment()
    position, deferred = 0, 0
    while position < starts[-1]:
        status, end, count, _, runs, keys = scan_segment_py(
            segment, position, starts[-1], starts[-1], 4096, RULES[0]
        )
        if not count:
            assert status == DEFERRED
            deferred += 1
            position = starts[starts.index(position) + 1]
            continue
        entries, expected_keys = one_by_one(segment, [s for s in starts if position <= s < end])
        assert {
            (topic, queue_id): list(CQ_ENTRY.iter_unpack(packed))
            for topic, queue_id, _, _, n, _, packed, _ in runs
            if n
        } == entries
        assert list(KEY_ENTRY.iter_unpack(keys)) == expected_keys
        position = end
    assert deferred == 3  # the odd messages, and nothing else


def one_by_one(
    segment: bytearray, starts: list[int]
) -> tuple[dict[tuple[bytes, int], list[tuple[int, int, int]]], list[tuple[int, int, int]]]:
    """The ConsumeQueue entries and index keys one-record dispatch makes of these records."""
    queues = ConsumeQueueDispatcher(None, LEVELS)  # type: ignore[arg-type]
    entries: dict[tuple[bytes, int], list[tuple[int, int, int]]] = {}
    keys: list[tuple[int, int, int]] = []
    for start in starts:
        scanned = scan_record(memoryview(segment), start, check_crc=True)
        assert isinstance(scanned, tuple)
        total, phy, topic_view, queue_id, _, sys_flag, store_ts, props_view = scanned
        topic, props = bytes(topic_view), bytes(props_view)
        transaction = sys_flag & TRANSACTION_TYPE_MASK
        if not transaction or transaction == COMMIT:
            code = queues.cq_tags_code(topic, store_ts, props)
            entries.setdefault((topic, queue_id), []).append((phy, total, code))
        if transaction != ROLLBACK:
            name = topic.decode("utf-8", "surrogateescape")
            for key in IndexDispatcher.keys(props):
                text = key.decode("utf-8", "surrogateescape")
                keys.append((index_key_hash(index_key(name, text)), phy, store_ts))
    return entries, keys


def test_the_scan_stops_before_a_record_past_the_limit_or_the_count() -> None:
    segment, starts = mixed_segment()
    scanned = scan_segment_py(segment, 0, starts[3], starts[-1], 4096, RULES[0])
    assert scanned[:3] == (STOPPED, starts[3], 3)
    scanned = scan_segment_py(segment, 0, starts[-1], starts[-1], 2, RULES[0])
    assert scanned[:3] == (STOPPED, starts[2], 2)
    grown = {(run[0], run[1]): run[2] for run in scanned[4]}
    assert grown == {(b"T", 0): 1, (b"Orders", 1): 1}


# -- the index writer ------------------------------------------------------------------------
SLOTS = 7


def index_buffer(entries: int) -> bytearray:
    return bytearray(INDEX_HEADER_SIZE + SLOTS * 4 + entries * INDEX_ENTRY_SIZE)


@needs_native
def test_both_index_writers_write_the_same_bytes() -> None:
    assert NATIVE is not None
    rng = random.Random(7)
    for _ in range(200):
        a, b = index_buffer(64), index_buffer(64)
        # Slots that name entries past the count (a crash left them) are stale for both.
        for slot in range(SLOTS):
            stale = rng.choice([0, 0, 3, 50, -4])
            struct.pack_into(">i", a, INDEX_HEADER_SIZE + 4 * slot, stale)
            struct.pack_into(">i", b, INDEX_HEADER_SIZE + 4 * slot, stale)
        counts = (rng.choice([1, 5]), 0, rng.choice([0, 1_700_000_000_000]), 0, 0, 0)
        keys = b"".join(
            KEY_ENTRY.pack(
                rng.choice([0, 1, 0x7FFFFFFF, rng.randrange(1 << 31)]),
                rng.randrange(1 << 40),
                1_700_000_000_000 + rng.randrange(-5000, 10**9),
            )
            for _ in range(rng.randrange(0, 40))
        )
        assert NATIVE.put_keys(a, SLOTS, counts, keys) == put_keys_py(b, SLOTS, counts, keys)
        assert a == b


@needs_native
def test_both_index_writers_refuse_what_does_not_fit_and_write_nothing() -> None:
    assert NATIVE is not None
    key = KEY_ENTRY.pack(5, 100, 1)
    cases = [
        (index_buffer(2), SLOTS, (2, 0, 0, 0, 0, 0), key, IndexError),  # no room for entry 2
        (index_buffer(4), SLOTS, (1, 0, 0, 0, 0, 0), KEY_ENTRY.pack(-1, 1, 1), IndexError),
        (index_buffer(4), SLOTS, (1, 0, 0, 0, 0, 0), key[:-1], ValueError),
        (index_buffer(4), 0, (1, 0, 0, 0, 0, 0), key, ValueError),
        (bytes(index_buffer(4)), SLOTS, (1, 0, 0, 0, 0, 0), key, TypeError),
    ]
    for buffer, slots, counts, keys, error in cases:
        for put in (NATIVE.put_keys, put_keys_py):
            target = bytearray(buffer) if isinstance(buffer, bytearray) else buffer
            with pytest.raises(error):
                put(target, slots, counts, keys)
            assert target == buffer
