"""Dispatch (RocketMQ's reput): turn CommitLog records into ConsumeQueue entries and index keys.

Synchronous and idempotent: a record dispatched twice (recovery re-dispatching a tail) changes
nothing. The async store runs it behind the flush, so under SYNC_FLUSH nothing becomes visible
to consumers before it is durable.
"""

from __future__ import annotations

import re
from pathlib import Path

from sidewinder.protocol.message import KEY_SEPARATOR, MessageConst, decode_properties, tags_code
from sidewinder.protocol.record import TRANSACTION_TYPE_MASK, MessageSysFlag, ScannedRecord
from sidewinder.store.consume_queue import ConsumeQueue
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


class ConsumeQueueTable:
    """Every (topic, queue) ConsumeQueue under consumequeue/, created on first use."""

    def __init__(self, root: Path, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.name.isdigit():
                    queue = self.get(topic_dir.name, int(queue_dir.name))
                    queue.load()
                    queue.recover()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = ConsumeQueue(self.root, topic, queue_id, self.file_size)
        return queue

    def flush(self) -> None:
        for queue in self.queues.values():
            queue.flush()

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
        self.queues.clear()


class Dispatcher:
    def __init__(
        self, queues: ConsumeQueueTable, index: IndexService | None, delay_levels: dict[int, int]
    ) -> None:
        self.queues = queues
        self.index = index
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

    def dispatch(self, scanned: ScannedRecord) -> None:
        """One message (as CommitLog.scan reads it) into its ConsumeQueue and the index."""
        total, phy, topic_bytes, queue_id, queue_offset, sys_flag, store_ts, raw_props = scanned
        topic = topic_bytes.decode("utf-8", "surrogateescape")
        props = decode_properties(raw_props)
        transaction = sys_flag & TRANSACTION_TYPE_MASK
        if transaction == 0 or transaction == _COMMIT:
            self.queues.get(topic, queue_id).put(
                queue_offset, phy, total, self.cq_tags_code(topic, store_ts, props)
            )
        if self.index is not None and transaction != _ROLLBACK:
            keys = [props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")]
            keys += props.get(MessageConst.KEYS, "").split(KEY_SEPARATOR)
            self.index.build_index(topic, keys, phy, store_ts)
