"""A run of messages for one (topic, queue), appended as consecutive records in one segment.

    run = MessageRun(messages)               # ValueError: mixed queues or transaction types
    phys, offsets, error = commit_log.put_many([run], now_ms)
    run.phys                                 # each record's CommitLog offset

What MessageStore.put_messages stores (a batch whose messages the broker built one by one):
one item of CommitLog.put_many, as a BatchToStore is for a batch read straight from its body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sidewinder.protocol.record import TRANSACTION_TYPE_MASK, MessageToStore, encode_record


class MessageRun:
    __slots__ = (
        "count",
        "messages",
        "phys",
        "queue_id",
        "record_size",
        "stored_sys_flag",
        "topic",
        "topic_name",
    )
    batch: ClassVar[bool] = True  # one put_many item, many records

    def __init__(self, messages: Sequence[MessageToStore]) -> None:
        if not messages:
            raise ValueError("an empty batch")
        first = messages[0]
        kind = first.stored_sys_flag & TRANSACTION_TYPE_MASK
        for message in messages:
            if message.queue_id != first.queue_id or message.topic != first.topic:
                raise ValueError("a batch goes to one topic and queue")
            if message.stored_sys_flag & TRANSACTION_TYPE_MASK != kind:
                raise ValueError("a batch's messages share one transaction type")
        self.messages = messages
        self.topic, self.topic_name, self.queue_id = first.topic, first.topic_name, first.queue_id
        self.stored_sys_flag = first.stored_sys_flag
        self.count = len(messages)
        self.record_size = sum(message.record_size for message in messages)
        self.phys: list[int] = []


def encode_run(
    run: MessageRun,
    buffer: bytearray | memoryview,
    position: int,
    *,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
    counted: bool,
) -> list[int]:
    """Write the run's records into `buffer` from `position` (the caller checked the room);
    returns each record's CommitLog offset. Uncounted ones (half and rolled-back transaction
    messages) take queue offset 0 and advance none, as in RocketMQ's doAppend."""
    phys = []
    start = position
    for message in run.messages:
        phys.append(phy_offset + position - start)
        position += encode_record(
            message,
            buffer,
            position,
            queue_offset=queue_offset if counted else 0,
            phy_offset=phy_offset + position - start,
            store_timestamp=store_timestamp,
        )
        if counted:
            queue_offset += 1
    return phys
