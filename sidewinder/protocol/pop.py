"""RocketMQ 5's POP consumption on the remoting protocol: its request codes, headers, and the
strings a broker and a client pass between them (the check point's "extra info", which is the
receipt handle of a popped message, and the per-queue offset lists of a pop reply).

A pop (POP_MESSAGE) hands out messages of a topic, queue -1 meaning any queue of the topic on
that broker, each invisible to the group for `invisibleTime` ms. The broker records a check
point (CK) per queue it read; each message's handle names that CK:

    "<ckQueueOffset> <popTime> <invisibleTime> <reviveQid> <retry> <brokerName> <queueId> <offset>"

`retry` says which topic the message was read from: "0" the topic itself, "1" the group's POP
retry topic `%RETRY%<group>_<topic>`, "2" its v2 form `%RETRY%<group>+<topic>`. ACK_MESSAGE with
the handle ends it; CHANGE_MESSAGE_INVISIBLETIME moves its deadline and gives a new handle; a
message neither acked nor changed before its deadline is popped again (revived through the
retry topic, its reconsume times one higher).

    info = ExtraInfo.decode(handle)
    AckMessageRequestHeader(group, info.real_topic(topic, group), info.queue_id,
                            handle, info.queue_offset)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from sidewinder.protocol.headers import CommandHeader, wire


class PopRequestCode(IntEnum):
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    POP_ROLLBACK = 200056
    BATCH_ACK_MESSAGE = 200151


# Response codes of a pop that found nothing (they share numbers with 4.x ACL codes, so they
# are not members of ResponseCode). A pop without long polling answers POLLING_TIMEOUT at once.
POLLING_FULL = 209  # the broker holds too many long-polling pops already
POLLING_TIMEOUT = 210  # nothing arrived within pollTime

INVALID_PARAMETER = 29  # RocketMQ 5's code for a bad pop (maxMsgNums > 32, a queueId too high)
MAX_POP_MESSAGES = 32  # a larger maxMsgNums is refused with INVALID_PARAMETER


class ConsumeInitMode(IntEnum):
    """Where a group's first pop of a queue starts (no offset committed yet)."""

    MIN = 0  # the queue's first message
    MAX = 1  # its last one (RocketMQ 5.3.2 also starts at 0 when offset 0 is still in memory)


# Properties a pop sets on the messages it returns.
PROPERTY_POP_CK = "POP_CK"  # the handle, set by the broker on messages read from a retry topic
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"

ORDER_REVIVE_QID = 999  # the reviveQid of an orderly pop's handles
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"
_SEPARATOR = " "


def pop_retry_topic(topic: str, group: str, *, v2: bool = False) -> str:
    """Where a group's unacked messages of `topic` are revived to."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_flag(topic: str) -> str:
    """The `retry` field for a message read from `topic`."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_V2 if "+" in topic else RETRY_V1
    return NORMAL


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A popped message's receipt handle, decoded. `queue_offset` is None in the 7-field form
    a check point's own key takes (ExtraInfoUtil's buildExtraInfo without a message offset)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None

    def encode(self) -> str:
        fields = [
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
        ]
        if self.queue_offset is not None:
            fields.append(self.queue_offset)
        return _SEPARATOR.join(map(str, fields))

    @classmethod
    def decode(cls, text: str) -> ExtraInfo:
        """Raises ValueError naming what is wrong with a malformed handle."""
        parts = text.split(_SEPARATOR)
        if len(parts) not in (7, 8):
            raise ValueError(f"extraInfo {text!r} has {len(parts)} fields, not 7 or 8")
        if parts[4] not in (NORMAL, RETRY_V1, RETRY_V2):
            raise ValueError(f"extraInfo {text!r}: retry flag {parts[4]!r} is not 0, 1 or 2")
        try:
            return cls(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                int(parts[6]),
                int(parts[7]) if len(parts) == 8 else None,
            )
        except ValueError:
            raise ValueError(f"extraInfo {text!r} holds a field that is not a number") from None

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was read from, given the one it was sent to."""
        if self.retry == NORMAL:
            return topic
        return pop_retry_topic(topic, group, v2=self.retry == RETRY_V2)


# -- the offset lists of a pop reply ---------------------------------------------------------------
# startOffsetInfo "<retry> <queueId> <ckStartOffset>;..." and msgOffsetInfo
# "<retry> <queueId> <offset>,<offset>...;...", one entry per queue the pop read, keyed here as
# (retry, queueId).
QueueKey = tuple[str, int]


def format_start_offsets(entries: dict[QueueKey, int]) -> str:
    return ";".join(f"{r}{_SEPARATOR}{q}{_SEPARATOR}{o}" for (r, q), o in entries.items())


def format_msg_offsets(entries: dict[QueueKey, list[int]]) -> str:
    return ";".join(
        f"{r}{_SEPARATOR}{q}{_SEPARATOR}{','.join(map(str, offsets))}"
        for (r, q), offsets in entries.items()
    )


def _entries(text: str | None, what: str) -> list[tuple[QueueKey, str]]:
    out: list[tuple[QueueKey, str]] = []
    seen: set[QueueKey] = set()
    for entry in (text or "").split(";") if text else []:
        parts = entry.split(_SEPARATOR)
        if len(parts) != 3 or not parts[1].lstrip("-").isdigit():
            raise ValueError(f"{what} entry {entry!r} is not '<retry> <queueId> <value>'")
        key = (parts[0], int(parts[1]))
        if key in seen:
            raise ValueError(f"{what} names queue {key} twice")
        seen.add(key)
        out.append((key, parts[2]))
    return out


def parse_start_offsets(text: str | None) -> dict[QueueKey, int]:
    return {key: int(value) for key, value in _entries(text, "startOffsetInfo")}


def parse_msg_offsets(text: str | None) -> dict[QueueKey, list[int]]:
    return {
        key: [int(v) for v in value.split(",")] for key, value in _entries(text, "msgOffsetInfo")
    }


# -- headers ---------------------------------------------------------------------------------------
# `bname` (the broker the request is meant for) comes from RocketMQ's RpcRequestHeader; the
# broker reads it only for static topics, the client sends it as the Java client does.


@dataclass(slots=True)
class PopMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)  # -1: any queue of the topic
    max_msg_nums: int = wire("maxMsgNums", required=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)  # ms
    poll_time: int = wire("pollTime", required=True, long=True)  # ms of long polling
    born_time: int = wire("bornTime", required=True, long=True)  # the client's clock, ms
    init_mode: int = wire("initMode", required=True)
    exp_type: str | None = wire("expType")  # TAG or SQL92
    exp: str | None = wire("exp")
    order: bool = wire("order", default=False)
    attempt_id: str | None = wire("attemptId")
    broker_name: str | None = wire("bname")


@dataclass(slots=True)
class PopMessageResponseHeader(CommandHeader):
    pop_time: int = wire("popTime", required=True, long=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)
    revive_qid: int = wire("reviveQid", required=True)
    rest_num: int = wire("restNum", required=True, long=True)
    start_offset_info: str | None = wire("startOffsetInfo")
    msg_offset_info: str | None = wire("msgOffsetInfo")
    order_count_info: str | None = wire("orderCountInfo")


@dataclass(slots=True)
class AckMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)  # the real topic: the retry topic for a revived one
    queue_id: int = wire("queueId", required=True)
    extra_info: str = wire("extraInfo", required=True)
    offset: int = wire("offset", required=True, long=True)
    broker_name: str | None = wire("bname")


@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    extra_info: str = wire("extraInfo", required=True)
    offset: int = wire("offset", required=True, long=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)  # ms from now
    broker_name: str | None = wire("bname")


@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: int = wire("popTime", required=True, long=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)
    revive_qid: int = wire("reviveQid", required=True)

    def new_handle(self, old: ExtraInfo, real_topic: str, offset: int) -> ExtraInfo:
        """The message's handle after the change, as a client builds it: the new check point
        covers this one message, so it starts at the message's offset."""
        return ExtraInfo(
            offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            retry_flag(real_topic),
            old.broker_name,
            old.queue_id,
            offset,
        )


def real_topic(topic: str, group: str, retry: str) -> str:
    """The topic a message was read from, given the one it was sent to and its retry flag
    (a batch ack names the flag without a handle); ValueError for an unknown flag."""
    if retry == NORMAL:
        return topic
    if retry in (RETRY_V1, RETRY_V2):
        return pop_retry_topic(topic, group, v2=retry == RETRY_V2)
    raise ValueError(f"retry flag {retry!r} is not 0, 1 or 2")


def normal_topic(topic: str, group: str) -> str:
    """The topic a group's pop retry topic retries (KeyBuilder.parseNormalTopic)."""
    for separator in ("+", "_"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{separator}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic


def polling_key(topic: str, group: str, queue_id: int) -> str:
    """KeyBuilder.buildPollingKey: what a broker counts held pops by (POLLING_INFO)."""
    return f"{topic}@{group}@{queue_id}"


# -- the broker's revive topic ---------------------------------------------------------------------
# Check points and acks are JSON records in `rmq_sys_REVIVE_LOG_<cluster>`, read back by the
# revive service as the group CID_RMQ_SYS_REVIVE_GROUP (sidewinder/broker/pop/records.py).
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
ACK_TIME_INTERVAL_MS = 1000  # a check point is due this long before its revive time


def revive_topic(cluster: str) -> str:
    return f"{REVIVE_TOPIC_PREFIX}{cluster}"


# -- the other POP codes' headers ------------------------------------------------------------------
@dataclass(slots=True)
class PeekMessageRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    max_msg_nums: int = wire("maxMsgNums", required=True)
    consumer_group: str = wire("consumerGroup", required=True)


@dataclass(slots=True)
class NotificationRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    poll_time: int = wire("pollTime", required=True, long=True)
    born_time: int = wire("bornTime", required=True, long=True)
    order: bool = wire("order", default=False)
    attempt_id: str | None = wire("attemptId")


@dataclass(slots=True)
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = wire("hasMsg", required=True)
    polling_full: bool = wire("pollingFull", default=False)


@dataclass(slots=True)
class PollingInfoRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)


@dataclass(slots=True)
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int = wire("pollingNum", required=True)
