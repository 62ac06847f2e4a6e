"""CommitLog dispatchers (RocketMQ's `CommitLogDispatcher` list): what reput feeds each record to.

    dispatchers = [ConsumeQueueDispatcher(queues, parse_delay_levels(spec)), IndexDispatcher(index)]
    reput = Reput(commit_log, dispatchers)
    reput.dispatch_until(limit)   # every record up to `limit`, to each dispatcher in turn

Synchronous and idempotent: a record dispatched twice (recovery re-dispatching a tail) changes
nothing. The async store runs them behind the flush, so under SYNC_FLUSH nothing becomes
visible to consumers before it is durable.

Dispatch is on the broker's hot path (every message), so the common way in is a batch that
the dispatch scan worked out (dispatch_scan.DispatchBatch: per queue its packed entries, the
index keys hashed), and a dispatcher does per queue, not per message, what is left. One record
at a time (`dispatch`), a record arrives as a plain tuple of the few fields dispatch reads
(`DispatchRecord`), its properties searched as bytes for the names a dispatcher needs
(`last_property`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from sidewinder.protocol.message import MessageConst, decode_properties, tags_code
from sidewinder.protocol.record import TRANSACTION_TYPE_MASK, MessageSysFlag
from sidewinder.store.consume_queue import CQ_ENTRY_SIZE, ConsumeQueue, ConsumeQueueTable
from sidewinder.store.dispatch_scan import DispatchBatch, ScanRules
from sidewinder.store.index_file import KEY_ENTRY, KEY_ENTRY_SIZE, IndexFile
from sidewinder.store.index_service import IndexService

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_SCHEDULE_TOPIC = SCHEDULE_TOPIC.encode()
_COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
_ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TAGS = MessageConst.TAGS.encode() + b"\x01"
_KEYS = MessageConst.KEYS.encode() + b"\x01"
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"
_TAGS_CACHE = 4096  # distinct TAGS values whose hash is kept (a broker sees few)

# (TOTALSIZE, PHYSICALOFFSET, topic, QUEUEID, QUEUEOFFSET, SYSFLAG, STORETIMESTAMP, properties)
DispatchRecord = tuple[int, int, bytes, int, int, int, int, bytes]


def parse_delay_levels(spec: str) -> dict[int, int]:
    """messageDelayLevel ("1s 5s 10s 30s 1m ... 2h") as {level: milliseconds}, from level 1."""
    levels = {}
    for level, word in enumerate(spec.split(), 1):
        match = re.fullmatch(r"(\d+)([smhd])", word)
        if not match:
            raise ValueError(f"messageDelayLevel word {word!r} is not a number and s/m/h/d")
        levels[level] = int(match.group(1)) * _UNITS_MS[match.group(2)]
    return levels


def last_property(props: bytes, needle: bytes) -> bytes | None:
    """The value of property `needle` (its name and \\x01) in encoded properties, the last one
    when repeated (as decode_properties and Java's HashMap keep it), None when absent."""
    at = props.rfind(needle)
    if at < 0:
        return None
    if at and props[at - 1] != 2:
        # The tail of another name, or inside a value: let the full decoder judge.
        value = decode_properties(props).get(needle[:-1].decode())
        return None if value is None else value.encode("utf-8", "surrogateescape")
    start = at + len(needle)
    end = props.find(b"\x02", start)
    return props[start:] if end < 0 else props[start:end]


class CommitLogDispatcher(Protocol):
    """One consumer of the CommitLog's records, fed by reput in CommitLog order.

    A batch goes `prepare` then `write_prepared` when every dispatcher's prepare says yes,
    else record by record through `dispatch`. Each way a repeat changes nothing.
    """

    def prepare(self, batch: DispatchBatch) -> bool:
        """Work out what the batch writes and allocate its room, writing nothing readers see.
        False when it needs a file made (or more than room-making); DiskFullError when the
        disk has no room."""

    def write_prepared(self) -> None:
        """Write what the last `prepare` worked out: its room is there, nothing can fail."""

    def fits(self, batch: DispatchBatch) -> bool:
        """Whether `prepare` would take the batch without making a file or allocating room
        (no blocking I/O: it may then run on the event loop)."""

    def dispatch(self, record: DispatchRecord) -> None:
        """One record, making files as needed; DiskFullError leaves nothing of it written."""


class ConsumeQueueDispatcher:
    """Each committed or non-transactional message into its queue (BuildConsumeQueue)."""

    def __init__(self, queues: ConsumeQueueTable, delay_levels: dict[int, int]) -> None:
        self.queues = queues
        self.delay_levels = delay_levels
        self.max_delay_level = max(delay_levels, default=0)
        self._tags_codes: dict[bytes, int] = {}  # TAGS value -> its hashCode
        self._prepared: list[tuple[ConsumeQueue, bytes, int]] = []

    def cq_tags_code(self, topic: bytes, store_timestamp: int, props: bytes) -> int:
        """The entry's tags code: the TAGS hash, or for a delayed message the time it is due."""
        tags = last_property(props, _TAGS)
        code = self._tags_code(tags) if tags else 0
        if topic == _SCHEDULE_TOPIC:
            delay = last_property(props, b"DELAY\x01")
            level = min(int(delay), self.max_delay_level) if delay is not None else 0
            if level > 0:
                # A delayed message's entry holds the time it is due, not a tags hash.
                code = store_timestamp + self.delay_levels.get(level, 1000)
        return code

    def _tags_code(self, tags: bytes) -> int:
        code = self._tags_codes.get(tags)
        if code is None:
            if len(self._tags_codes) >= _TAGS_CACHE:
                self._tags_codes.clear()
            code = tags_code(tags.decode("utf-8", "surrogateescape"))
            self._tags_codes[tags] = code
        return code

    def prepare(self, batch: DispatchBatch) -> bool:
        self._prepared = []
        prepared = []
        for topic, queue_id, _, first, count, one_run, entries, max_phy_offset in batch.queues:
            if not count:
                continue
            if not one_run:
                return False  # `put` refuses what does not follow
            queue = self.queues.get(topic.decode("utf-8", "surrogateescape"), queue_id)
            present = queue.reserve(first, count)
            if present is None:
                return False
            if present < count:
                prepared.append((queue, entries[present * CQ_ENTRY_SIZE :], max_phy_offset))
        self._prepared = prepared
        return True

    def fits(self, batch: DispatchBatch) -> bool:
        queues = self.queues.queues
        for topic, queue_id, _, first, count, one_run, _, _ in batch.queues:
            if not count:
                continue
            queue = queues.get((topic.decode("utf-8", "surrogateescape"), queue_id))
            if queue is None or not one_run or not queue.has_room(first, count):
                return False
        return True

    def write_prepared(self) -> None:
        for queue, entries, max_phy_offset in self._prepared:
            queue.write_reserved(entries, max_phy_offset)
        self._prepared = []

    def dispatch(self, record: DispatchRecord) -> None:
        total, phy, topic, queue_id, queue_offset, sys_flag, store_ts, props = record
        transaction = sys_flag & TRANSACTION_TYPE_MASK
        if transaction and transaction != _COMMIT:
            return
        self.queues.get(topic.decode("utf-8", "surrogateescape"), queue_id).put(
            queue_offset, phy, total, self.cq_tags_code(topic, store_ts, props)
        )


class IndexDispatcher:
    """Each message's UNIQ_KEY and KEYS into the index, rolled-back ones aside (BuildIndex)."""

    def __init__(self, index: IndexService) -> None:
        self.index = index
        self._prepared: tuple[IndexFile, bytes] | None = None

    @staticmethod
    def keys(props: bytes) -> list[bytes]:
        """UNIQ_KEY, then each word of KEYS; empty ones left out."""
        uniq = last_property(props, _UNIQ_KEY)
        keys = [uniq] if uniq else []
        words = last_property(props, _KEYS)
        if words:
            keys += [word for word in words.split(b" ") if word]
        return keys

    def prepare(self, batch: DispatchBatch) -> bool:
        self._prepared = None
        keys = batch.keys
        if keys and batch.start <= self.index.repeated_to():
            keys = _keys_past(keys, self.index.repeated_to())  # a repeated dispatch
        if keys:
            target = self.index.writable_for(len(keys) // KEY_ENTRY_SIZE)
            if target is None:
                return False  # the keys need the next file: build_index rolls to it
            self._prepared = (target, keys)
        return True

    def fits(self, batch: DispatchBatch) -> bool:
        keys = batch.keys
        if not keys:
            return True
        if batch.start <= self.index.repeated_to():
            return False  # a repeated dispatch: prepare trims it, the thread may take it
        return self.index.has_room(len(keys) // KEY_ENTRY_SIZE)

    def write_prepared(self) -> None:
        if self._prepared is not None:
            target, keys = self._prepared
            target.put_keys(keys)
            self._prepared = None

    def dispatch(self, record: DispatchRecord) -> None:
        _, phy, topic, _, _, sys_flag, store_ts, props = record
        if sys_flag & TRANSACTION_TYPE_MASK == _ROLLBACK:
            return
        keys = [key.decode("utf-8", "surrogateescape") for key in self.keys(props)]
        self.index.build_index(topic.decode("utf-8", "surrogateescape"), keys, phy, store_ts)


def _keys_past(keys: bytes, offset: int) -> bytes:
    """The packed keys of messages past CommitLog `offset` (they come in CommitLog order)."""
    for n, (_, phy, _) in enumerate(KEY_ENTRY.iter_unpack(keys)):
        if phy > offset:
            return keys[n * KEY_ENTRY_SIZE :]
    return b""


def scan_rules(dispatchers: Sequence[CommitLogDispatcher]) -> ScanRules:
    """What the dispatch scan works out for these dispatchers: the queue's delay levels, and
    index keys when there is an index."""
    levels: dict[int, int] = {}
    keys = False
    for dispatcher in dispatchers:
        if isinstance(dispatcher, ConsumeQueueDispatcher):
            levels = dispatcher.delay_levels
        keys = keys or isinstance(dispatcher, IndexDispatcher)
    return ScanRules.of(levels, keys)


def store_dispatchers(
    queues: ConsumeQueueTable, index: IndexService | None, delay_levels: dict[int, int]
) -> list[CommitLogDispatcher]:
    """The store's dispatchers, in RocketMQ's order: the queue first, then the index."""
    dispatchers: list[CommitLogDispatcher] = [ConsumeQueueDispatcher(queues, delay_levels)]
    if index is not None:
        dispatchers.append(IndexDispatcher(index))
    return dispatchers
