"""Typed request and response headers, built from and into a command's extFields.

Each header is a dataclass whose fields say their wire name, whether RocketMQ marks them
@CFNotNull, and their Java type; parsing follows Java's rules (Integer/Long.parseLong digits
only, Boolean.parseBoolean: only "true" in any case is true). A missing required field or a bad
number raises HeaderError with RocketMQ's wording, which processors put in the remark.

    header = SendMessageRequestHeader.from_ext(request.ext_fields, v2=True)
    reply = request.reply(0, ext_fields=SendMessageResponseHeader(msg_id, 0, 7).to_ext())
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

_INTEGER = re.compile(r"[+-]?\d+")
_RANGES = {32: (-(1 << 31), (1 << 31) - 1), 64: (-(1 << 63), (1 << 63) - 1)}


class HeaderError(ValueError):
    """A request header that is missing a required field or holds an unparsable value."""


def wire(name: str, *, required: bool = False, long: bool = False, default: Any = None) -> Any:
    """A header field: its extFields key, @CFNotNull, and (for ints) Java long or int."""
    return field(default=default, metadata={"wire": name, "required": required, "long": long})


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: type
    required: bool
    bits: int


class CommandHeader:
    """Base of every typed header (a dataclass using `wire()` fields)."""

    _specs: ClassVar[tuple[_Spec, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._specs = ()  # filled lazily: the dataclass decorator runs after this hook

    @classmethod
    def specs(cls) -> tuple[_Spec, ...]:
        if not cls._specs:
            hints = typing.get_type_hints(cls)
            specs = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                kind = hints[f.name]
                base = next(
                    (t for t in (bool, int, str) if t is kind or t in typing.get_args(kind)), str
                )
                bits = 64 if f.metadata.get("long") else 32
                specs.append(_Spec(f.name, f.metadata["wire"], base, f.metadata["required"], bits))
            cls._specs = tuple(specs)
        return cls._specs

    @classmethod
    def from_ext(cls, ext: dict[str, str] | None, *, names: dict[str, str] | None = None) -> Self:
        """Parse extFields; `names` maps wire names to the short ones a V2 header uses."""
        ext = ext or {}
        values: dict[str, Any] = {}
        for spec in cls.specs():
            key = names.get(spec.wire, spec.wire) if names else spec.wire
            raw = ext.get(key)
            if raw is None:
                if spec.required:
                    raise HeaderError(f"the custom field <{spec.wire}> is null")
                continue
            values[spec.attr] = _parse(spec, raw)
        return cls(**values)

    def to_ext(self, *, names: dict[str, str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {}
        for spec in self.specs():
            value = getattr(self, spec.attr)
            if value is None:
                continue
            key = names.get(spec.wire, spec.wire) if names else spec.wire
            if spec.kind is bool:
                out[key] = "true" if value else "false"
            else:
                out[key] = str(value)
        return out


_INT32_MAX, _INT64_MAX = (1 << 31) - 1, (1 << 63) - 1


def _plain_int(raw: str | None, high: int) -> int | None:
    """ASCII digits, perhaps after a minus, within [-high - 1, high]; None for anything else
    (which the generic parse judges)."""
    if raw is None or not raw.isascii():
        return None
    if not (raw.isdigit() or (raw[:1] == "-" and raw[1:].isdigit())):
        return None
    value = int(raw)
    return value if -high - 1 <= value <= high else None


def _parse(spec: _Spec, raw: str) -> Any:
    if spec.kind is str:
        return raw
    if spec.kind is bool:
        return raw.lower() == "true"
    if not _INTEGER.fullmatch(raw):
        raise HeaderError(f"the custom field <{spec.wire}> is {raw!r}, not a number")
    value = int(raw)
    low, high = _RANGES[spec.bits]
    if not low <= value <= high:
        raise HeaderError(f"the custom field <{spec.wire}> = {raw} is out of range")
    return value


# -- headers ----------------------------------------------------------------------------------
@dataclass(slots=True)
class SendMessageRequestHeader(CommandHeader):
    producer_group: str = wire("producerGroup", required=True)
    topic: str = wire("topic", required=True)
    default_topic: str = wire("defaultTopic", required=True)
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", required=True)
    queue_id: int = wire("queueId", required=True)
    sys_flag: int = wire("sysFlag", required=True)
    born_timestamp: int = wire("bornTimestamp", required=True, long=True)
    flag: int = wire("flag", required=True)
    properties: str | None = wire("properties")
    reconsume_times: int | None = wire("reconsumeTimes")
    unit_mode: bool | None = wire("unitMode")
    batch: bool | None = wire("batch")
    max_reconsume_times: int | None = wire("maxReconsumeTimes")
    broker_name: str | None = wire("brokerName")


# SendMessageRequestHeaderV2 (code 310, 320): the same fields under one-letter names.
SEND_V2_NAMES = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "maxReconsumeTimes": "l",
    "batch": "m",
    "brokerName": "n",
}


@dataclass(slots=True)
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the reply's send header, plus where it came from."""

    producer_group: str = wire("producerGroup", required=True)
    topic: str = wire("topic", required=True)
    default_topic: str = wire("defaultTopic", required=True)
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", required=True)
    queue_id: int = wire("queueId", required=True)
    sys_flag: int = wire("sysFlag", required=True)
    born_timestamp: int = wire("bornTimestamp", required=True, long=True)
    flag: int = wire("flag", required=True)
    properties: str | None = wire("properties")
    reconsume_times: int | None = wire("reconsumeTimes")
    unit_mode: bool | None = wire("unitMode")
    born_host: str = wire("bornHost", required=True)
    store_host: str = wire("storeHost", required=True)
    store_timestamp: int = wire("storeTimestamp", required=True, long=True)


@dataclass(slots=True)
class SendMessageResponseHeader(CommandHeader):
    msg_id: str = wire("msgId", required=True)
    queue_id: int = wire("queueId", required=True)
    queue_offset: int = wire("queueOffset", required=True, long=True)
    transaction_id: str | None = wire("transactionId")


@dataclass(slots=True)
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    queue_offset: int = wire("queueOffset", required=True, long=True)
    max_msg_nums: int = wire("maxMsgNums", required=True)
    sys_flag: int = wire("sysFlag", required=True)
    commit_offset: int = wire("commitOffset", required=True, long=True)
    suspend_timeout_millis: int = wire("suspendTimeoutMillis", required=True, long=True)
    sub_version: int = wire("subVersion", required=True, long=True)
    subscription: str | None = wire("subscription")
    expression_type: str | None = wire("expressionType")

    @classmethod
    def from_ext(cls, ext: dict[str, str] | None, *, names: dict[str, str] | None = None) -> Self:
        """Every pull parses this: the fields read by name, plain numbers converted at once;
        anything else (a missing field, a sign, a number out of range) takes the generic
        parse, which accepts or refuses it by the same rules and names the field."""
        # super() by name: the zero-argument form fails in a slots dataclass (Python 3.11).
        generic = super(PullMessageRequestHeader, cls).from_ext
        if ext is None or names is not None:
            return generic(ext, names=names)
        get = ext.get
        group, topic = get("consumerGroup"), get("topic")
        queue_id = _plain_int(get("queueId"), _INT32_MAX)
        queue_offset = _plain_int(get("queueOffset"), _INT64_MAX)
        max_msg_nums = _plain_int(get("maxMsgNums"), _INT32_MAX)
        sys_flag = _plain_int(get("sysFlag"), _INT32_MAX)
        commit_offset = _plain_int(get("commitOffset"), _INT64_MAX)
        suspend = _plain_int(get("suspendTimeoutMillis"), _INT64_MAX)
        sub_version = _plain_int(get("subVersion"), _INT64_MAX)
        if (
            group is None
            or topic is None
            or queue_id is None
            or queue_offset is None
            or max_msg_nums is None
            or sys_flag is None
            or commit_offset is None
            or suspend is None
            or sub_version is None
        ):
            return generic(ext)
        return cls(
            group,
            topic,
            queue_id,
            queue_offset,
            max_msg_nums,
            sys_flag,
            commit_offset,
            suspend,
            sub_version,
            get("subscription"),
            get("expressionType"),
        )


@dataclass(slots=True)
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int = wire("suggestWhichBrokerId", required=True, long=True)
    next_begin_offset: int = wire("nextBeginOffset", required=True, long=True)
    min_offset: int = wire("minOffset", required=True, long=True)
    max_offset: int = wire("maxOffset", required=True, long=True)


@dataclass(slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly")


@dataclass(slots=True)
class TopicQueueRequestHeader(CommandHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME."""

    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)


@dataclass(slots=True)
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    timestamp: int = wire("timestamp", required=True, long=True)


@dataclass(slots=True)
class OffsetResponseHeader(CommandHeader):
    offset: int = wire("offset", required=True, long=True)


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str = wire("topic", required=True)
    queue_id: int = wire("queueId", required=True)
    commit_offset: int = wire("commitOffset", required=True, long=True)


@dataclass(slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID", required=True)
    producer_group: str | None = wire("producerGroup")
    consumer_group: str | None = wire("consumerGroup")


@dataclass(slots=True)
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName", required=True)
    broker_addr: str = wire("brokerAddr", required=True)
    cluster_name: str = wire("clusterName", required=True)
    ha_server_addr: str = wire("haServerAddr", required=True)
    broker_id: int = wire("brokerId", required=True, long=True)
    compressed: bool | None = wire("compressed")
    body_crc32: int | None = wire("bodyCrc32")
    enable_acting_master: bool | None = wire("enableActingMaster")  # RocketMQ 5
    zone_name: str | None = wire("zoneName")  # RocketMQ 5


@dataclass(slots=True)
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = wire("haServerAddr")
    master_addr: str | None = wire("masterAddr")


@dataclass(slots=True)
class BrokerIdentityHeader(CommandHeader):
    """UNREGISTER_BROKER and QUERY_DATA_VERSION."""

    broker_name: str = wire("brokerName", required=True)
    broker_addr: str = wire("brokerAddr", required=True)
    cluster_name: str = wire("clusterName", required=True)
    broker_id: int = wire("brokerId", required=True, long=True)


@dataclass(slots=True)
class TopicHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV, DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, ..."""

    topic: str = wire("topic", required=True)


@dataclass(slots=True)
class ClusterHeader(CommandHeader):
    cluster: str = wire("cluster", required=True)


@dataclass(slots=True)
class BrokerNameHeader(CommandHeader):
    broker_name: str = wire("brokerName", required=True)


@dataclass(slots=True)
class KVConfigHeader(CommandHeader):
    namespace: str = wire("namespace", required=True)
    key: str | None = wire("key")
    value: str | None = wire("value")


@dataclass(slots=True)
class QueryMessageRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    key: str = wire("key", required=True)
    max_num: int = wire("maxNum", required=True)
    begin_timestamp: int = wire("beginTimestamp", required=True, long=True)
    end_timestamp: int = wire("endTimestamp", required=True, long=True)


@dataclass(slots=True)
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp", required=True, long=True)
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset", required=True, long=True)


@dataclass(slots=True)
class ViewMessageRequestHeader(CommandHeader):
    offset: int = wire("offset", required=True, long=True)


@dataclass(slots=True)
class CreateTopicRequestHeader(CommandHeader):
    topic: str = wire("topic", required=True)
    default_topic: str = wire("defaultTopic", required=True)
    read_queue_nums: int = wire("readQueueNums", required=True)
    write_queue_nums: int = wire("writeQueueNums", required=True)
    perm: int = wire("perm", required=True)
    topic_filter_type: str = wire("topicFilterType", required=True)
    topic_sys_flag: int | None = wire("topicSysFlag")
    order: bool = wire("order", required=True)
    attributes: str | None = wire("attributes")  # RocketMQ 5: "+key=value,-key"


@dataclass(slots=True)
class ConsumerGroupHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST."""

    consumer_group: str = wire("consumerGroup", required=True)


@dataclass(slots=True)
class ConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup", required=True)
    topic: str | None = wire("topic")


@dataclass(slots=True)
class GroupNameHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP."""

    group_name: str = wire("groupName", required=True)
    remove_offset: bool | None = wire("removeOffset")


@dataclass(slots=True)
class GroupHeader(CommandHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, RocketMQ 5)."""

    group: str = wire("group", required=True)


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = wire("offset", required=True, long=True)
    group: str = wire("group", required=True)
    delay_level: int = wire("delayLevel", required=True)
    origin_msg_id: str | None = wire("originMsgId")
    origin_topic: str | None = wire("originTopic")
    unit_mode: bool | None = wire("unitMode")
    max_reconsume_times: int | None = wire("maxReconsumeTimes")


@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str = wire("producerGroup", required=True)
    tran_state_table_offset: int = wire("tranStateTableOffset", required=True, long=True)
    commit_log_offset: int = wire("commitLogOffset", required=True, long=True)
    commit_or_rollback: int = wire("commitOrRollback", required=True)
    from_transaction_check: bool | None = wire("fromTransactionCheck")
    msg_id: str = wire("msgId", required=True)
    transaction_id: str | None = wire("transactionId")


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: int = wire("tranStateTableOffset", required=True, long=True)
    commit_log_offset: int = wire("commitLogOffset", required=True, long=True)
    msg_id: str | None = wire("msgId")
    transaction_id: str | None = wire("transactionId")
    offset_msg_id: str | None = wire("offsetMsgId")


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str = wire("topic", required=True)
    group: str = wire("group", required=True)


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315): one BrokerStatsManager item. Both fields are @CFNotNull
    in RocketMQ, but its reflective header decoding logs a missing field and goes on: a
    request without them asks for the item <null> <null>."""

    stats_name: str | None = wire("statsName")
    stats_key: str | None = wire("statsKey")


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317); `is_order`: only topics marked order (a missing
    isOrder is false in RocketMQ, @CFNotNull notwithstanding, as in the header above)."""

    is_order: bool | None = wire("isOrder")


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (321): Java primitives, so a missing number reads as 0."""

    topic: str = wire("topic", default="")
    queue_id: int = wire("queueId", default=0)
    index: int = wire("index", long=True, default=0)
    count: int = wire("count", default=0)
    consumer_group: str | None = wire("consumerGroup")
