"""Consumer offsets (RocketMQ's ConsumerOffsetManager): config/consumerOffset.json,
`{"offsetTable": {"topic@group": {queueId: offset}}}`, persisted every flushConsumerOffsetInterval
and at shutdown."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sidewinder.broker.metadata import JsonTable

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsets:
    def __init__(self, config_dir: Path) -> None:
        self.file = JsonTable(config_dir / "consumerOffset.json")
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        saved = self.file.load_json()
        if saved:
            self.merge(saved)

    def merge(self, saved: dict[str, Any]) -> None:
        """Take every offset in `saved` (the file's shape, or a master's GET_ALL_CONSUMER_OFFSET
        body: a slave keeps its own for groups the master no longer lists, as RocketMQ does)."""
        for key, queues in (saved.get("offsetTable") or {}).items():
            self.table[key] = {int(q): int(o) for q, o in queues.items()}

    def writer(self) -> Callable[[], None]:
        """The write of consumerOffset.json (integer queue ids as fastjson writes them) as the
        table is now (see JsonTable.writer)."""
        self.dirty = False
        write = self.file.writer({"offsetTable": self.table})

        def write_or_retry() -> None:
            if not write():
                self.dirty = True  # the disk refused: the next timer tries again

        return write_or_retry

    def persist(self) -> None:
        """Write consumerOffset.json. Blocking."""
        self.writer()()

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when there is none."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        return {
            key.split(TOPIC_GROUP_SEPARATOR, 1)[1]
            for key in self.table
            if key.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic
        }

    def topics_of_group(self, group: str) -> set[str]:
        return {
            key.split(TOPIC_GROUP_SEPARATOR, 1)[0]
            for key in self.table
            if key.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group
        }

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
            del self.table[key]
            self.dirty = True

    def remove_group(self, group: str) -> None:
        """Forget every offset of a group (deleteSubGroup -r true)."""
        for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1:] == [group]]:
            del self.table[key]
            self.dirty = True

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": self.table}
