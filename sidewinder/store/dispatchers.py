"""CommitLog dispatchers (RocketMQ's `CommitLogDispatcher` list): what reput feeds each record to.

    dispatchers = [ConsumeQueueDispatcher(queues, parse_delay_levels(spec)), IndexDispatcher(index)]
    reput = Reput(commit_log, dispatchers)
    reput.dispatch_until(limit)   # every record up to `limit`, to each dispatcher in turn

Synchronous and idempotent: a record dispatched twice (recovery re-dispatching a tail) changes
nothing. The async store runs them behind the flush, so under SYNC_FLUSH nothing becomes
visible to consumers before it is durable.
"""

from __future__ import annotations

import re
from typing import Protocol

from sidewinder.protocol.message import KEY_SEPARATOR, MessageConst, decode_properties, tags_code
from sidewinder.protocol.record import TRANSACTION_TYPE_MASK, MessageSysFlag, ScannedRecord
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.index_service import IndexService

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
_ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> dict[int, int]:
    """messageDelayLevel ("1s 5s 10s 30s 1m ... 2h") as {level: milliseconds}, from level 1."""
    levels = {}
    for level, word in enumerate(spec.split(), 1):
        match = re.fullmatch(r"(\d+)([smhd])", word)
        if not match:
            raise ValueError(f"messageDelayLevel word {word!r} is not a number and s/m/h/d")
        levels[level] = int(match.group(1)) * _UNITS_MS[match.group(2)]
    return levels


class CommitLogDispatcher(Protocol):
    """One consumer of the CommitLog's records, fed by reput in CommitLog order."""

    def dispatch(self, record: ScannedRecord) -> None:
        """Write what one record means to this dispatcher; a repeat changes nothing."""


class ConsumeQueueDispatcher:
    """Each committed or non-transactional message into its queue (BuildConsumeQueue)."""

    def __init__(self, queues: ConsumeQueueTable, delay_levels: dict[int, int]) -> None:
        self.queues = queues
        self.delay_levels = delay_levels
        self.max_delay_level = max(delay_levels, default=0)

    def cq_tags_code(self, topic: str, store_timestamp: int, props: dict[str, str]) -> int:
        code = tags_code(props.get(MessageConst.TAGS))
        if topic == SCHEDULE_TOPIC:
            delay = props.get(MessageConst.DELAY_TIME_LEVEL)
            level = min(int(delay), self.max_delay_level) if delay is not None else 0
            if level > 0:
                # A delayed message's entry holds the time it is due, not a tags hash.
                code = store_timestamp + self.delay_levels.get(level, 1000)
        return code

    def dispatch(self, record: ScannedRecord) -> None:
        total, phy, topic_bytes, queue_id, queue_offset, sys_flag, store_ts, raw_props = record
        transaction = sys_flag & TRANSACTION_TYPE_MASK
        if transaction != 0 and transaction != _COMMIT:
            return
        topic = topic_bytes.decode("utf-8", "surrogateescape")
        props = decode_properties(raw_props)
        self.queues.get(topic, queue_id).put(
            queue_offset, phy, total, self.cq_tags_code(topic, store_ts, props)
        )


class IndexDispatcher:
    """Each message's UNIQ_KEY and KEYS into the index, rolled-back ones aside (BuildIndex)."""

    def __init__(self, index: IndexService) -> None:
        self.index = index

    def dispatch(self, record: ScannedRecord) -> None:
        _, phy, topic_bytes, _, _, sys_flag, store_ts, raw_props = record
        if sys_flag & TRANSACTION_TYPE_MASK == _ROLLBACK:
            return
        topic = topic_bytes.decode("utf-8", "surrogateescape")
        props = decode_properties(raw_props)
        keys = [props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")]
        keys += props.get(MessageConst.KEYS, "").split(KEY_SEPARATOR)
        self.index.build_index(topic, keys, phy, store_ts)


def store_dispatchers(
    queues: ConsumeQueueTable, index: IndexService | None, delay_levels: dict[int, int]
) -> list[CommitLogDispatcher]:
    """The store's dispatchers, in RocketMQ's order: the queue first, then the index."""
    dispatchers: list[CommitLogDispatcher] = [ConsumeQueueDispatcher(queues, delay_levels)]
    if index is not None:
        dispatchers.append(IndexDispatcher(index))
    return dispatchers
