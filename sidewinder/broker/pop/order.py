"""FIFO pop state (RocketMQ 5's ConsumerOrderInfoManager): config/consumerOrderInfo.json,
`{"table": {"topic@group": {queueId: OrderInfo}}}`.

An orderly pop (order=true) does not move the group's offset: it notes the batch it handed out
(popTime, invisibleTime, the offsets) and the queue stays blocked for the group until each
message of the batch is acked or its invisible time runs out. An ack sets the message's bit and
moves the offset to the first message not acked; once the batch is done or expired the next pop
reads from there (so an un-acked message comes again, first, counted in orderCountInfo). A
retried pop with the same attemptId is not blocked by its own batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidewinder.broker.metadata import JsonTable

DAY_MS = 24 * 3600 * 1000  # CLEAN_SPAN_FROM_LAST


def _now() -> int:
    return int(time.time() * 1000)


@dataclass
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offsets: list[int]  # [first offset, then each other's distance from it]
    next_visible: dict[int, int] = field(default_factory=dict)  # queue offset -> time
    consumed: dict[int, int] = field(default_factory=dict)  # queue offset -> times, > 0
    last_consume: int = 0
    commit_bits: int = 0
    attempt_id: str | None = None

    @staticmethod
    def compact(queue_offsets: list[int]) -> list[int]:
        first = queue_offsets[0]
        return [first] + [o - first for o in queue_offsets[1:]]

    def queue_offset(self, index: int) -> int:
        return self.offsets[0] if index == 0 else self.offsets[0] + self.offsets[index]

    def queue_offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offsets))]

    def acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

    def blocks(self, attempt_id: str | None, invisible_time: int, now: int) -> bool:
        """needBlock: a message of the batch neither acked nor past its visible time."""
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if not self.invisible_time or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        for i in range(len(self.offsets)):
            if self.acked(i):
                continue
            visible = self.next_visible.get(
                self.queue_offset(i), self.pop_time + self.invisible_time
            )
            if now < visible:
                return True
        return False

    def next_offset(self) -> int:
        """The first message not acked, or past the last when all are (getNextOffset)."""
        if not self.offsets:
            return -2
        for i in range(len(self.offsets)):
            if not self.acked(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offsets) - 1) + 1

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "a": self.attempt_id,
            "cm": self.commit_bits,
            "i": self.invisible_time,
            "l": self.last_consume,
            "o": self.offsets,
            "popTime": self.pop_time,
        }
        if self.next_visible:
            value["ot"] = dict(self.next_visible)
        if self.consumed:
            value["oc"] = dict(self.consumed)
        return {k: v for k, v in value.items() if v is not None}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> OrderInfo:
        invisible = value.get("i", value.get("invisibleTime"))
        return cls(
            pop_time=int(value.get("popTime", 0)),
            invisible_time=None if invisible is None else int(invisible),
            offsets=[int(o) for o in value.get("o", value.get("offsetList")) or []],
            next_visible={int(k): int(v) for k, v in (value.get("ot") or {}).items()},
            consumed={int(k): int(v) for k, v in (value.get("oc") or {}).items()},
            last_consume=int(value.get("l", 0)),
            commit_bits=int(value.get("cm", 0)),
            attempt_id=value.get("a"),
        )


class ConsumerOrderInfo:
    def __init__(self, config_dir: Path) -> None:
        self.file = JsonTable(config_dir / "consumerOrderInfo.json")
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self.dirty = False

    def load(self) -> None:
        saved = self.file.load_json() or {}
        for key, queues in (saved.get("table") or {}).items():
            self.table[key] = {int(q): OrderInfo.from_json(v) for q, v in queues.items()}

    def writer(self) -> Callable[[], None]:
        """The write of consumerOrderInfo.json as the table is now (see JsonTable.writer)."""
        self.dirty = False
        now = _now()
        snapshot = {
            key: {
                q: info.to_json() for q, info in queues.items() if now - info.last_consume < DAY_MS
            }
            for key, queues in self.table.items()
        }
        write = self.file.writer({"table": {k: v for k, v in snapshot.items() if v}})

        def write_or_retry() -> None:
            if not write():
                self.dirty = True

        return write_or_retry

    def persist(self) -> None:
        """Write consumerOrderInfo.json. Blocking."""
        self.writer()()

    def _get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(f"{topic}@{group}", {}).get(queue_id)

    def blocked(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible: int
    ) -> bool:
        info = self._get(topic, group, queue_id)
        return info is not None and info.blocks(attempt_id, invisible, _now())

    def update(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible: int,
        queue_offsets: list[int],
    ) -> list[tuple[str, int]]:
        """Note a popped batch; the orderCountInfo entries it makes: (`qo<queue>%<offset>`,
        times delivered before) per message delivered before, then (queue id, the least)."""
        queues = self.table.setdefault(f"{topic}@{group}", {})
        old = queues.get(queue_id)
        info = OrderInfo(
            pop_time,
            invisible,
            OrderInfo.compact(queue_offsets),
            last_consume=_now(),
            attempt_id=attempt_id,
        )
        if old is not None:
            if old.attempt_id is not None and old.attempt_id == attempt_id:
                info.consumed = dict(old.consumed)
            else:
                before = set(old.queue_offsets())
                info.consumed = {
                    o: old.consumed.get(o, 0) + 1 for o in queue_offsets if o in before
                }
        queues[queue_id] = info
        self.dirty = True
        entries = [(f"qo{queue_id}%{o}", n) for o, n in info.consumed.items()]
        least = min(info.consumed.values(), default=0)
        if len(info.consumed) != len(info.offsets):
            least = 0
        return [*entries, (str(queue_id), least)]

    def commit_and_next(
        self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int
    ) -> int:
        """Mark one message acked: the offset to commit (>= 0), -1 for a message not in the
        batch, -2 for an ack of an older batch (commitAndNext)."""
        info = self._get(topic, group, queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offsets:
            return -1
        if pop_time != info.pop_time:
            return -2
        offsets = info.queue_offsets()
        if queue_offset not in offsets:
            return -1
        info.commit_bits |= 1 << offsets.index(queue_offset)
        info.last_consume = _now()
        self.dirty = True
        return info.next_offset()

    def update_next_visible(
        self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int, at: int
    ) -> None:
        info = self._get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time:
            return
        info.next_visible[queue_offset] = at
        self.dirty = True

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        self.table.get(f"{topic}@{group}", {}).pop(queue_id, None)
