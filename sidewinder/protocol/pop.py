"""POP consumption on the wire, as RocketMQ 5.3.2 speaks it: request and response codes, the
headers, the receipt handle ("extraInfo") and the offset summaries a pop answers with.

    extra = ExtraInfo.parse(handle)             # ValueError naming what is wrong
    handle = ExtraInfo(ck_offset, pop_time, invisible, revive_qid, topic_kind(topic),
                       broker, queue_id, queue_offset).format()

The extraInfo is eight space-separated fields: ckQueueOffset popTime invisibleTime reviveQid
retry-kind (0 normal, 1 retry V1, 2 retry V2) brokerName queueId queueOffset. Shared by the
broker (which hands handles out and takes them back) and the client (which echoes them).
"""

from __future__ import annotations

from dataclasses import dataclass

from sidewinder.protocol.headers import CommandHeader, wire

# -- codes ------------------------------------------------------------------------------------
POP_MESSAGE = 200050
ACK_MESSAGE = 200051
PEEK_MESSAGE = 200052
CHANGE_MESSAGE_INVISIBLETIME = 200053
NOTIFICATION = 200054
POLLING_INFO = 200055
POP_ROLLBACK = 200056
BATCH_ACK_MESSAGE = 200151

POLLING_FULL = 209
POLLING_TIMEOUT = 210
INVALID_PARAMETER = 29

# -- names ------------------------------------------------------------------------------------
RETRY_PREFIX = "%RETRY%"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
ACK_TIME_INTERVAL_MS = 1000  # a CK is due this long before its revive time
POP_CK = "POP_CK"  # the property a popped message's handle travels in
FIRST_POP_TIME = "1ST_POP_TIME"
MAX_POP_NUMS = 32

NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"


def revive_topic(cluster: str) -> str:
    return f"{REVIVE_TOPIC_PREFIX}{cluster}"


def retry_topic(topic: str, group: str, *, v2: bool = False) -> str:
    """The group's pop retry topic for `topic`: `%RETRY%group_topic`, or with `+` (V2)."""
    return f"{RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_retry_v2(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) and "+" in topic


def topic_kind(topic: str) -> str:
    """The retry flag of a topic in extraInfo and the offset summaries."""
    if is_retry_v2(topic):
        return RETRY_V2
    return RETRY_V1 if topic.startswith(RETRY_PREFIX) else NORMAL


def real_topic(topic: str, group: str, kind: str) -> str:
    """The topic a handle's message lives in (ExtraInfoUtil.getRealTopic)."""
    if kind == NORMAL:
        return topic
    if kind == RETRY_V1:
        return retry_topic(topic, group)
    if kind == RETRY_V2:
        return retry_topic(topic, group, v2=True)
    raise ValueError(f"retry flag {kind!r} is none of 0, 1, 2")


def normal_topic(topic: str, group: str) -> str:
    """The topic a pop retry topic retries (KeyBuilder.parseNormalTopic)."""
    for sep in ("+", "_"):
        prefix = f"{RETRY_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    kind: str
    broker_name: str
    queue_id: int
    queue_offset: int

    @classmethod
    def parse(cls, text: str | None) -> ExtraInfo:
        """The eight fields of a handle; ValueError saying which is missing or not a number."""
        if not text:
            raise ValueError("extraInfo is empty")
        parts = text.split(" ")
        if len(parts) < 8:
            raise ValueError(f"extraInfo has {len(parts)} fields, 8 expected: {text!r}")
        names = ("ckQueueOffset", "popTime", "invisibleTime", "reviveQid")
        numbers = []
        for name, raw in zip(names, parts[:4], strict=True):
            try:
                numbers.append(int(raw))
            except ValueError:
                raise ValueError(f"extraInfo's {name} {raw!r} is not a number") from None
        if parts[4] not in (NORMAL, RETRY_V1, RETRY_V2):
            raise ValueError(f"extraInfo's retry flag {parts[4]!r} is none of 0, 1, 2")
        try:
            queue_id, queue_offset = int(parts[6]), int(parts[7])
        except ValueError:
            raise ValueError(
                f"extraInfo's queueId or queueOffset is not a number: {text!r}"
            ) from None
        ck_offset, pop_time, invisible, revive_qid = numbers
        return cls(
            ck_offset, pop_time, invisible, revive_qid, parts[4], parts[5], queue_id, queue_offset
        )

    def format(self) -> str:
        return (
            f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.kind} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE


def offset_info(entries: list[tuple[str, int, str]]) -> str:
    """startOffsetInfo / msgOffsetInfo / orderCountInfo: `kind queueId value;...`."""
    return ";".join(f"{topic_kind(topic)} {queue_id} {value}" for topic, queue_id, value in entries)


def parse_offset_info(text: str | None) -> dict[str, list[int]]:
    """`{"kind@queueId": [values]}` of an offset summary (ExtraInfoUtil.parseMsgOffsetInfo)."""
    out: dict[str, list[int]] = {}
    for one in (text or "").split(";"):
        if not one:
            continue
        kind, queue_id, values = one.split(" ")
        out[f"{kind}@{queue_id}"] = [int(v) for v in values.split(",")]
    return out


# -- headers ----------------------------------------------------------------------------------
@dataclass(slots=True)
class PopMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    max_msg_nums: int = wire("maxMsgNums", required=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)
    poll_time: int = wire("pollTime", required=True, long=True)
    born_time: int = wire("bornTime", required=True, long=True)
    init_mode: int = wire("initMode", required=True)
    exp_type: str | None = wire("expType")
    exp: str | None = wire("exp")
    order: bool | None = wire("order")
    attempt_id: str | None = wire("attemptId")


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
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    extra_info: str = wire("extraInfo", required=True)
    offset: int = wire("offset", required=True, long=True)


@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    extra_info: str = wire("extraInfo", required=True)
    offset: int = wire("offset", required=True, long=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)


@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: int = wire("popTime", required=True, long=True)
    invisible_time: int = wire("invisibleTime", required=True, long=True)
    revive_qid: int = wire("reviveQid", required=True)


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
    order: bool | None = wire("order")
    attempt_id: str | None = wire("attemptId")


@dataclass(slots=True)
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = wire("hasMsg", required=True)
    polling_full: bool = wire("pollingFull")


@dataclass(slots=True)
class PollingInfoRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)


@dataclass(slots=True)
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int = wire("pollingNum", required=True)


def polling_key(topic: str, group: str, queue_id: int) -> str:
    """KeyBuilder.buildPollingKey: what held pops are counted by."""
    return f"{topic}@{group}@{queue_id}"
