"""IndexFile layout: `index/{yyyyMMddHHmmssSSS}`, a hash index of message keys.

    header 40 B: beginTimestamp 8 · endTimestamp 8 · beginPhyOffset 8 · endPhyOffset 8
                 · hashSlotCount 4 · indexCount 4
    slots:       hashSlotNum × int32, the newest entry number of each slot (0 = empty)
    entries:     maxIndexNum × 20 B: keyHash 4 · phyOffset 8 · timeDiff 4 (s) · prevIndex 4

Entry number 0 is never used (indexCount starts at 1), so 0 ends every chain. A key is
`topic#key` for each word of KEYS and for UNIQ_KEY; its hash is abs(String.hashCode()).

Blocks: the header and slots (written anywhere) are allocated when the file is made; entries
(written in order) a step at a time, ahead of the next one. A full disk then fails an
allocation (DiskFullError) instead of a write into a page with no block (SIGBUS), and a fresh
broker does not take its whole index file (420 MB by default) from the disk at once.

One writer, readers on another thread. Keys are written by dispatch, one job at a time under
the store's dispatch lock: on the dispatch thread (the native put_keys releases the GIL, and
put_keys_py may lose it between two keys) or on the loop (inline dispatch). Meanwhile lookups
(QUERY_MESSAGE, a message by key) read the same mapping on the event loop. The writer's bytes:

    per key, in this order: its entry at indexCount (never written before in this run; after a
    crash, a stale one from the last), then its slot (the entry's number), then the header's
    running fields with indexCount + 1, as RocketMQ's putKey does. beginTimestamp and
    beginPhyOffset are set by the first key and stored again unchanged after every other.

A lookup reads the slot, then indexCount, then follows the chain: only numbers above 0 and
below the count it read, for at most that many links. Python reads a field a byte at a time,
so a lookup that runs during a write may see a slot or the count mid-store (the native writer
stores each field in order, but cannot make a reader's bytes one load). It then follows an entry
that is complete, zeroed (not written yet) or stale, whose hash it compares; and every CommitLog
offset it finds is checked against that message's own topic and keys (MessageStore's
query_message). So a lookup racing a write can miss the key being written, as if it had run a
moment earlier, but never answers with another message, loops, or reads outside the file.
"""

from __future__ import annotations

import binascii
import operator
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidewinder.common.native import implementation
from sidewinder.protocol.message import java_string_hash
from sidewinder.store.mapped_file import DiskFullError, MappedFile

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
_SLOT = struct.Struct(">i")
ALLOCATION_STEP = 1 << 20  # entry bytes allocated ahead at a time
KEY_ENTRY = struct.Struct("<qqq")  # a hashed key to write: hash, phy offset, store timestamp
KEY_ENTRY_SIZE = KEY_ENTRY.size


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def index_key_hash(key: str) -> int:
    """abs(hashCode) as Java computes it: abs(Integer.MIN_VALUE) stays negative, hence 0."""
    h = abs(java_string_hash(key))
    return h if h <= 0x7FFFFFFF else 0


# 31**k mod 2**32, k ascending: a hash of ASCII bytes is one C-level sum over them, reversed.
_POWERS_31 = [pow(31, k, 1 << 32) for k in range(1025)]
_HEX_DIGITS = b"0123456789ABCDEF"
_U16X8 = struct.Struct(">8H")
_P4, _P8, _P12, _P16, _P20, _P24, _P28 = (_POWERS_31[k] for k in range(4, 32, 4))
_TOPICS_CACHED = 65536


# For each 16-bit value, the hashCode of its 4 uppercase hex digits (made on first use).
_HEX_QUADS: list[int] = []


def _hex_quad_hashes() -> list[int]:
    if not _HEX_QUADS:
        pairs = [_HEX_DIGITS[b >> 4] * 31 + _HEX_DIGITS[b & 15] for b in range(256)]
        _HEX_QUADS[:] = [high * 961 + low for high in pairs for low in pairs]
    return _HEX_QUADS


def ascii_hash_py(data: bytes) -> int:
    """String.hashCode() of ASCII text (its bytes are its UTF-16 units), unsigned; at most
    1024 bytes. A 32-digit uppercase hex string (a UNIQ_KEY) takes 8 table look-ups."""
    if len(data) == 32 and data.isupper():
        try:
            raw = binascii.unhexlify(data)
        except binascii.Error:
            pass
        else:
            t = _HEX_QUADS or _hex_quad_hashes()
            a, b, c, d, e, f, g, h = _U16X8.unpack(raw)
            return (
                t[a] * _P28
                + t[b] * _P24
                + t[c] * _P20
                + t[d] * _P16
                + t[e] * _P12
                + t[f] * _P8
                + t[g] * _P4
                + t[h]
            ) & 0xFFFFFFFF
    return sum(map(operator.mul, data[::-1], _POWERS_31)) & 0xFFFFFFFF


class TopicKeyHasher:
    """index_key_hash(index_key(topic, key)) from the topic's and the key's bytes: the hash of
    `topic#` is kept per topic, so only the key's own bytes are hashed per message."""

    def __init__(self) -> None:
        self._prefixes: dict[bytes, int] = {}  # topic -> hash of "topic#", -1 if not ASCII

    def key_hash(self, topic: bytes, key: bytes) -> int:
        prefix = self._prefixes.get(topic)
        if prefix is None:
            if len(self._prefixes) >= _TOPICS_CACHED:
                self._prefixes.clear()
            prefix = ascii_hash(topic + b"#") if topic.isascii() and len(topic) < 1024 else -1
            self._prefixes[topic] = prefix
        if prefix < 0 or len(key) > 1024 or not key.isascii():
            text = key.decode("utf-8", "surrogateescape")
            return index_key_hash(index_key(topic.decode("utf-8", "surrogateescape"), text))
        h = (prefix * _POWERS_31[len(key)] + ascii_hash(key)) & 0xFFFFFFFF
        # abs() of the signed int; abs(Integer.MIN_VALUE) stays negative, hence 0.
        return h if h < 0x80000000 else (0x100000000 - h) & 0x7FFFFFFF


def index_file_size(hash_slot_num: int, max_index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + max_index_num * INDEX_ENTRY_SIZE


@dataclass(frozen=True, slots=True)
class IndexHeader:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclass(frozen=True, slots=True)
class IndexEntry:
    key_hash: int
    phy_offset: int
    time_diff_s: int
    prev_index: int


class IndexFileView:
    """Reads one index file held in a buffer (bytes or an mmap) with known slot count."""

    def __init__(self, buffer: bytes | bytearray | memoryview, hash_slot_num: int) -> None:
        self.view = memoryview(buffer)
        self.hash_slot_num = hash_slot_num
        if len(self.view) < INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE:
            raise ValueError(
                f"an index file of {len(self.view)} bytes cannot hold {hash_slot_num} hash slots"
            )

    @property
    def header(self) -> IndexHeader:
        """Read afresh each time: the writer updates it in place."""
        return IndexHeader(*INDEX_HEADER.unpack_from(self.view, 0))

    def slot(self, key_hash: int) -> int:
        position = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        return _SLOT.unpack_from(self.view, position)[0]

    def entry(self, number: int) -> IndexEntry:
        position = (
            INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + number * INDEX_ENTRY_SIZE
        )
        return IndexEntry(*INDEX_ENTRY.unpack_from(self.view, position))

    def chain(self, key_hash: int) -> Iterator[IndexEntry]:
        """The entries of the key's slot, newest first (other keys of the slot included)."""
        number = self.slot(key_hash)
        seen = 0
        count = self.header.index_count
        while 0 < number < count and seen < count:
            entry = self.entry(number)
            yield entry
            if entry.prev_index == number:
                return  # a self-loop would be corruption; never spin on it
            number = entry.prev_index
            seen += 1

    def lookup(
        self, key: str, begin_ms: int = 0, end_ms: int = 2**63 - 1, max_count: int = 64
    ) -> list[int]:
        """CommitLog offsets of entries whose hash is the key's and time is in range.

        Hashes collide: the caller checks each message's real keys.
        """
        key_hash = index_key_hash(key)
        found: list[int] = []
        begin = self.header.begin_timestamp
        for entry in self.chain(key_hash):
            if len(found) >= max_count:
                break
            stamp = begin + entry.time_diff_s * 1000
            if entry.key_hash == key_hash and begin_ms <= stamp <= end_ms:
                found.append(entry.phy_offset)
        return found


Counts = tuple[int, int, int, int, int, int]
# The IndexFile attributes that make up Counts, in its order.
_RUNNING_FIELDS = (
    "index_count",
    "hash_slot_count",
    "begin_timestamp",
    "begin_phy_offset",
    "end_phy_offset",
    "end_timestamp",
)


def put_keys_py(buffer: Any, hash_slot_num: int, counts: Counts, keys: bytes) -> Counts:
    """Write hashed keys (KEY_ENTRY each) after entry `counts[0]` of an index file's buffer,
    as RocketMQ's IndexFile.putKey does key by key; `counts` and the result are the header's
    running fields: (indexCount, hashSlotCount, beginTimestamp, beginPhyOffset, endPhyOffset,
    endTimestamp). The reference of the native put_keys (which releases the GIL meanwhile)."""
    count, slot_count, begin_ts, begin_phy, phy, ts = counts
    entries_at = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
    if hash_slot_num <= 0 or count < 0 or len(keys) % KEY_ENTRY_SIZE:
        raise ValueError(f"{len(keys)} key bytes, {hash_slot_num} slots and count {count}")
    flat = struct.unpack(f"<{len(keys) // KEY_ENTRY_SIZE * 3}q", keys)
    n = len(flat) // 3
    if entries_at + (count + n) * INDEX_ENTRY_SIZE > len(buffer):
        raise IndexError(f"index entries do not fit a file of {len(buffer)} bytes")
    if any(not 0 <= key_hash <= 0x7FFFFFFF for key_hash in flat[::3]):
        raise IndexError("a key hash is not a non-negative int32")
    unpack_slot, pack_slot = _SLOT.unpack_from, _SLOT.pack_into
    pack_entry, pack_header = INDEX_ENTRY.pack_into, INDEX_HEADER.pack_into
    it = iter(flat)
    for key_hash, phy, ts in zip(it, it, it, strict=True):
        slot_at = INDEX_HEADER_SIZE + key_hash % hash_slot_num * HASH_SLOT_SIZE
        (previous,) = unpack_slot(buffer, slot_at)
        # Only entries below the count exist; a slot naming another is stale (a crash).
        if previous <= 0 or previous >= count:
            previous = 0
            slot_count += 1
        time_diff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), 0x7FFFFFFF)
        pack_entry(
            buffer, entries_at + count * INDEX_ENTRY_SIZE, key_hash, phy, time_diff, previous
        )
        pack_slot(buffer, slot_at, count)
        if count <= 1:
            begin_phy, begin_ts = phy, ts
        count += 1
        # The header after every key, as RocketMQ does: a crash must not leave slots pointing
        # past the header's count, where the entries they name would be rewritten.
        pack_header(buffer, 0, begin_ts, ts, begin_phy, phy, slot_count, count)
    return count, slot_count, begin_ts, begin_phy, phy, ts


class IndexFile:
    """A writable index file (RocketMQ's IndexFile.putKey, entry for entry)."""

    def __init__(
        self,
        path: Path,
        hash_slot_num: int,
        max_index_num: int,
        *,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> None:
        self.path = path
        self.max_index_num = max_index_num
        fresh = not path.exists()
        entries_at = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self.file = MappedFile(
            path,
            index_file_size(hash_slot_num, max_index_num),
            allocate_on_create=entries_at + ALLOCATION_STEP,
        )
        self._slots_end = entries_at
        self.view = IndexFileView(self.file.buffer, hash_slot_num)
        h = self.view.header
        self.begin_timestamp, self.end_timestamp = h.begin_timestamp, h.end_timestamp
        self.begin_phy_offset, self.end_phy_offset = h.begin_phy_offset, h.end_phy_offset
        self.hash_slot_count, self.index_count = h.hash_slot_count, h.index_count
        if fresh:
            # Entry 0 is never used, and a follow-on file starts where the last one ended.
            self.index_count = 1
            if end_phy_offset > 0:
                self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                self.begin_timestamp = self.end_timestamp = end_timestamp
            self._write_header()

    def has_room(self, entries: int) -> bool:
        """Whether the next `entries` keys fit, in room `reserve` already allocated."""
        if self.max_index_num - self.index_count < entries:
            return False
        end = self._slots_end + (self.index_count + entries) * INDEX_ENTRY_SIZE
        return end <= self.file.allocated_to

    def reserve(self, entries: int) -> None:
        """Allocate room for the next `entries` keys (DiskFullError, nothing written, if the
        disk has none). Blocking."""
        end = self._slots_end + (self.index_count + entries) * INDEX_ENTRY_SIZE
        if end > self.file.allocated_to:
            self.file.ensure_allocated(end + ALLOCATION_STEP)

    def slots_readable(self) -> bool:
        """Whether lookups may read the slots. A file found on disk may be sparse (RocketMQ's
        are); on tmpfs a read of a hole takes a block, a SIGBUS on a full disk, so its slots
        are allocated first, and the file is skipped while there is no room. Blocking."""
        if self.file.allocated_to >= self._slots_end:
            return True
        try:
            self.file.ensure_allocated(self._slots_end)
        except DiskFullError:
            return False
        return True

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one key; False when the file is full."""
        if self.is_full:
            return False
        entry_end = self._slots_end + (self.index_count + 1) * INDEX_ENTRY_SIZE
        if entry_end > self.file.allocated_to:
            # Before any write of this key: DiskFullError leaves the file as it was.
            self.file.ensure_allocated(entry_end + ALLOCATION_STEP)
        self.put_keys(KEY_ENTRY.pack(index_key_hash(key), phy_offset, store_timestamp))
        return True

    def put_keys(self, keys: bytes) -> None:
        """Add keys already hashed (KEY_ENTRY each: the dispatch scan's). The caller saw that
        they fit and reserved their room (IndexService.writable_for)."""
        counts = tuple(getattr(self, name) for name in _RUNNING_FIELDS)
        written = put_keys(self.file.buffer, self.view.hash_slot_num, counts, keys)
        for name, value in zip(_RUNNING_FIELDS, written, strict=True):
            setattr(self, name, value)

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(
            self.file.buffer,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def flush(self) -> None:
        """Blocking: run in an executor."""
        self.file.sync()

    def close(self) -> None:
        self.view.view.release()
        self.file.close()


# The extension's when it is in use (common/native.py): the same answers, the same bytes.
ascii_hash = implementation("ascii_hash", ascii_hash_py)
put_keys = implementation("put_keys", put_keys_py)
