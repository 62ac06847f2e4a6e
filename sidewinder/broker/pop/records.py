"""The checkpoint (CK) and ack records of the revive topic, in RocketMQ 5's JSON (fastjson's
field names and order), and the timer messages that carry them.

A CK says "these messages of (topic, group, queue) were popped at popTime for invisibleTime";
an ACK (or a batch ack) clears one of its bits. Both go into `rmq_sys_REVIVE_LOG_<cluster>` as
timer messages: a CK due one second before its revive time, an ACK at the revive time, so the
revive service reads each CK and then every ack that matters to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sidewinder.protocol.message import MessageConst, encode_properties
from sidewinder.protocol.pop import (
    ACK_TAG,
    ACK_TIME_INTERVAL_MS,
    BATCH_ACK_TAG,
    CK_TAG,
)
from sidewinder.protocol.record import Host, MessageToStore

SPLIT = "@"


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(slots=True)
class CheckPoint:
    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    broker_name: str
    diffs: list[int] = field(default_factory=list)  # queue offset - start offset, per message
    bitmap: int = 0  # acked messages, by index
    revive_offset: int = 0  # where in the revive queue the CK was read
    reput_times: str | None = None

    @property
    def num(self) -> int:
        return len(self.diffs)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def merge_key(self) -> str:
        """What acks find their CK by (the revive service's map key)."""
        return (
            f"{self.topic}{self.group}{self.queue_id}{self.start_offset}{self.pop_time}"
            f"{self.broker_name}"
        )

    def index_of(self, ack_offset: int) -> int:
        """The bit of a message's queue offset, or -1 (PopCheckPoint.indexOfAck)."""
        if ack_offset < self.start_offset:
            return -1
        try:
            return self.diffs.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def offset_at(self, index: int) -> int:
        return self.start_offset + self.diffs[index]

    def acked(self, index: int) -> bool:
        return bool(self.bitmap >> index & 1)

    def unique_id(self) -> str:
        return SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.start_offset),
                self.group,
                str(self.pop_time),
                self.broker_name,
                CK_TAG,
            )
        )

    def to_json(self) -> bytes:
        value: dict[str, Any] = {
            "bm": self.bitmap,
            "bn": self.broker_name,
            "c": self.group,
            "d": self.diffs,
            "it": self.invisible_time,
            "n": self.num,
            "pt": self.pop_time,
            "q": self.queue_id,
            "reviveTime": self.revive_time,
            "ro": self.revive_offset,
            "so": self.start_offset,
            "t": self.topic,
        }
        if self.reput_times is not None:
            value["rp"] = self.reput_times
        return _dumps(value)

    @classmethod
    def from_json(cls, raw: bytes | str) -> CheckPoint:
        """A CK body; ValueError (or KeyError) for one that is not."""
        value = json.loads(raw)
        start = int(value["so"])
        diffs = value.get("d")
        if not diffs:  # an old checkpoint: n consecutive offsets
            diffs = list(range(int(value.get("n", 0))))
        return cls(
            topic=str(value["t"]),
            group=str(value["c"]),
            queue_id=int(value["q"]),
            start_offset=start,
            pop_time=int(value["pt"]),
            invisible_time=int(value["it"]),
            broker_name=str(value.get("bn") or ""),
            diffs=[int(d) for d in diffs],
            bitmap=int(value.get("bm", 0)),
            revive_offset=int(value.get("ro", 0)),
            reput_times=value.get("rp"),
        )


@dataclass(slots=True)
class Ack:
    """AckMsg, or BatchAckMsg when `offsets` is given (then `ack_offset` is -1)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    ack_offset: int
    pop_time: int
    broker_name: str
    offsets: list[int] | None = None

    @property
    def tag(self) -> str:
        return ACK_TAG if self.offsets is None else BATCH_ACK_TAG

    @property
    def merge_key(self) -> str:
        return (
            f"{self.topic}{self.group}{self.queue_id}{self.start_offset}{self.pop_time}"
            f"{self.broker_name}"
        )

    def acked_offsets(self) -> list[int]:
        return [self.ack_offset] if self.offsets is None else list(self.offsets)

    def unique_id(self) -> str:
        """genAckUniqueId, which RocketMQ puts last on a batch ack's record too."""
        parts = (self.topic, str(self.queue_id), str(self.ack_offset), self.group)
        return SPLIT.join((*parts, str(self.pop_time), self.broker_name, ACK_TAG))

    def to_json(self) -> bytes:
        value: dict[str, Any] = {
            "ao": self.ack_offset,
            "bn": self.broker_name,
            "c": self.group,
            "pt": self.pop_time,
            "q": self.queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }
        if self.offsets is not None:
            value["aol"] = self.offsets
        return _dumps(value)

    @classmethod
    def from_json(cls, raw: bytes | str, *, batch: bool = False) -> Ack:
        value = json.loads(raw)
        offsets = [int(o) for o in value.get("aol") or []] if batch else None
        return cls(
            topic=str(value["t"]),
            group=str(value["c"]),
            queue_id=int(value["q"]),
            start_offset=int(value["so"]),
            ack_offset=int(value.get("ao", -1)),
            pop_time=int(value["pt"]),
            broker_name=str(value.get("bn") or ""),
            offsets=offsets,
        )


def revive_message(
    revive_topic: str,
    revive_qid: int,
    tag: str,
    body: bytes,
    unique_id: str,
    deliver_ms: int,
    store_host: Host,
    now_ms: int,
) -> MessageToStore:
    """A CK or ACK record as the timer message RocketMQ puts (buildCkMsg / appendAck)."""
    props = {
        MessageConst.TAGS: tag,
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: unique_id,
        MessageConst.TIMER_DELIVER_MS: str(deliver_ms),
    }
    return MessageToStore(
        topic=revive_topic.encode(),
        queue_id=revive_qid,
        body=body,
        properties=encode_properties(props, trailing=False),
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def ck_deliver_ms(ck: CheckPoint) -> int:
    return ck.revive_time - ACK_TIME_INTERVAL_MS
