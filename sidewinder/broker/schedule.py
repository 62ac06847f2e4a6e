"""Delayed delivery (RocketMQ's ScheduleMessageService).

A message with a DELAY level is stored in SCHEDULE_TOPIC_XXXX, queue level-1, its real topic and
queue kept in REAL_TOPIC / REAL_QID; its ConsumeQueue entry holds the time it is due. One timer
per level walks that queue from its saved offset (config/delayOffset.json) and, for each entry
that is due, puts the real message into its real topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from sidewinder.broker.metadata import JsonTable
from sidewinder.broker.topics import SCHEDULE_TOPIC
from sidewinder.common.service import cancel_and_wait
from sidewinder.protocol.message import MessageConst, decode_properties, encode_properties
from sidewinder.protocol.record import MessageRecord, MessageToStore, message_from_record
from sidewinder.store.message_store import MessageStore, PutStatus

log = structlog.get_logger(__name__)

IDLE_CHECK_S = 0.1  # RocketMQ's DELAY_FOR_A_WHILE


def schedule_for_delay(message: MessageToStore, max_level: int) -> MessageToStore:
    """Redirect a message whose DELAY property asks for a level into the schedule topic."""
    if f"{MessageConst.DELAY_TIME_LEVEL}\x01".encode() not in message.properties:
        return message  # the common send: no need to decode its properties
    props = decode_properties(message.properties)
    raw = props.get(MessageConst.DELAY_TIME_LEVEL)
    try:
        level = int(raw) if raw is not None else 0
    except ValueError:
        level = 0
    if level <= 0 or message.sys_flag & 0xC not in (0, 0x8):  # not for half or rollback
        return message
    level = min(level, max_level)
    props[MessageConst.DELAY_TIME_LEVEL] = str(level)
    props[MessageConst.REAL_TOPIC] = message.topic_name
    props[MessageConst.REAL_QUEUE_ID] = str(message.queue_id)
    return replace(
        message,
        topic=SCHEDULE_TOPIC.encode(),
        queue_id=level - 1,
        properties=encode_properties(props, trailing=False),
    )


def message_timeup(record: MessageRecord) -> MessageToStore:
    """The real message of a due schedule record (ScheduleMessageService.messageTimeup): put into
    REAL_TOPIC / REAL_QID with the schedule record's properties as they are. RocketMQ clears
    DELAY only in the map that decides whether to delay again, after it built the stored
    properties: consumers of a delayed message see DELAY, REAL_TOPIC and REAL_QID."""
    props = record.properties()
    return message_from_record(
        record,
        topic=props.get(MessageConst.REAL_TOPIC, record.topic),
        queue_id=int(props.get(MessageConst.REAL_QUEUE_ID, "0")),
        properties=bytes(record.properties_bytes),
        prepared_transaction_offset=0,
    )


class ScheduleService:
    def __init__(self, store: MessageStore, config_dir: Path, delay_levels: dict[int, int]) -> None:
        self.store = store
        self.levels = delay_levels
        self.file = JsonTable(config_dir / "delayOffset.json")
        self.offsets: dict[int, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def load(self) -> None:
        saved = self.file.load_json()
        if saved:
            self.mirror(saved)

    def mirror(self, saved: dict[str, Any]) -> None:
        """Take the delay levels' offsets from `saved` (the file's shape; a slave's copy of its
        master's GET_ALL_DELAY_OFFSET)."""
        self.offsets = {int(k): int(v) for k, v in (saved.get("offsetTable") or {}).items()}

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": dict(sorted(self.offsets.items()))}

    def writer(self) -> Callable[[], bool]:
        """The write of delayOffset.json as the table is now (see JsonTable.writer)."""
        return self.file.writer(self.to_json())

    def persist(self) -> None:
        """Write delayOffset.json. Blocking."""
        self.writer()()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._deliver(level)) for level in sorted(self.levels)]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []

    async def _deliver(self, level: int) -> None:
        queue_id = level - 1
        while True:
            wait = await self._deliver_due(level, queue_id)
            await asyncio.sleep(wait)

    async def _deliver_due(self, level: int, queue_id: int) -> float:
        """Deliver what is due; seconds until the next check."""
        offset = max(
            self.offsets.get(level, 0), self.store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        )
        while offset < self.store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id):
            entry = self.store.queue_entry(SCHEDULE_TOPIC, queue_id, offset)
            if entry is None:
                break
            now_ms = int(time.time() * 1000)
            due = entry.tags_code
            if due > now_ms:
                self.offsets[level] = offset
                return min((due - now_ms) / 1000, IDLE_CHECK_S * 10)
            record = self.store.lookup_message_by_offset(entry.phy_offset)
            if record is not None:
                real = message_timeup(record)
                result = await self.store.put_message(real)
                if result.status is not PutStatus.PUT_OK:
                    log.warning("schedule.redeliver_failed", level=level, status=result.status.name)
                    self.offsets[level] = offset
                    return IDLE_CHECK_S * 10
            offset += 1
            self.offsets[level] = offset
        return IDLE_CHECK_S
