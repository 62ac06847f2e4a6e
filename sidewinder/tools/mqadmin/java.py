"""How RocketMQ's mqadmin writes values, for our sub-commands that print what it prints: Java's
HashMap order and toString, printf-style columns, its timestamp formats.

    java_map({"KEYS": "k1", "TAGS": "TagA"})  # '{KEYS=k1, TAGS=TagA}', in HashMap's order
    parse_timestamp("2024-01-02#03:04:05:006")  # epoch milliseconds, local time
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import MessageQueue
from sidewinder.protocol.message import java_string_hash

T = TypeVar("T")
PERM_READ = 4


def java_hash_order(
    items: Iterable[T],
    hash_code: Callable[[T], int],
    *,
    concurrent: bool = False,
    sized: int | None = None,
) -> list[T]:
    """The order a java.util.HashMap (or HashSet) iterates these keys, put in this order: by
    bucket (the spread hash masked by the table size, grown past 3/4 full), then by insertion.
    `concurrent`: a ConcurrentHashMap's (java.util.Properties' since Java 9), grown at 3/4.
    `sized`: a `new HashMap(sized, 1)`, its table the power of two from `sized`, never grown."""
    listed = list(items)
    if sized is not None:
        capacity = 1 << (max(sized, 1) - 1).bit_length()
    else:
        capacity = 16
        while len(listed) > capacity * 3 // 4 - (1 if concurrent else 0):
            capacity *= 2

    def bucket(item: T) -> int:
        h = hash_code(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, k in sorted(enumerate(listed), key=lambda e: (bucket(e[1]), e[0]))]


def java_hashmap_order(keys: Iterable[str], *, concurrent: bool = False) -> list[str]:
    """The iteration order of a HashMap (or Properties) of these String keys."""
    return java_hash_order(keys, java_string_hash, concurrent=concurrent)


def queue_hash(queue: MessageQueue) -> int:
    """MessageQueue.hashCode (int arithmetic)."""
    h = 31 + java_string_hash(queue.broker_name)
    h = 31 * h + queue.queue_id
    return (31 * h + java_string_hash(queue.topic)) & 0xFFFFFFFF


def subscribe_queues(route: dict[str, Any], topic: str) -> list[MessageQueue]:
    """The readable queues of a route in the order of the HashSet the Java client makes of
    them (MQClientInstance.topicRouteData2TopicSubscribeInfo)."""
    queues = [
        MessageQueue(topic, data["brokerName"], queue_id)
        for data in route.get("queueDatas") or []
        if int(data["perm"]) & PERM_READ
        for queue_id in range(int(data["readQueueNums"]))
    ]
    return java_hash_order(queues, queue_hash)


def java_map(values: dict[str, str]) -> str:
    """AbstractMap.toString of a HashMap<String, String>: {k=v, k=v}."""
    return "{" + ", ".join(f"{k}={values[k]}" for k in java_hashmap_order(values)) + "}"


def java_bool(value: str | None) -> bool:
    """Boolean.parseBoolean: true only for 'true', in any case."""
    return (value or "").strip().lower() == "true"


def human_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local time with milliseconds after a comma."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def compact_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS, local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms / 1000)) + f"{ms % 1000:03d}"


def date_time(ms: int) -> str:
    """DateFormatUtils.format(ms, "yyyy-MM-dd HH:mm:ss"), local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def parse_timestamp(text: str) -> int:
    """A [currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS] option: epoch milliseconds."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        parsed = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
        return int(parsed.timestamp() * 1000)


def message_ext(message: ReceivedMessage, broker_name: str, extra: dict[str, str]) -> str:
    """MessageExt.toString of a pulled message: its fields, then Message's, with the
    properties the pull adds (`extra`: MIN_OFFSET, MAX_OFFSET) after its own."""
    props = java_map({**message.properties, **extra})
    body = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in message.body) + "]"
    return (
        f"MessageExt [brokerName={broker_name}, queueId={message.queue.queue_id}, "
        f"storeSize={message.store_size}, queueOffset={message.queue_offset}, "
        f"sysFlag={message.sys_flag}, bornTimestamp={message.born_timestamp}, "
        f"bornHost=/{message.born_host}, storeTimestamp={message.store_timestamp}, "
        f"storeHost=/{message.store_host}, msgId={message.offset_msg_id}, "
        f"commitLogOffset={message.commit_log_offset}, bodyCRC={message.body_crc}, "
        f"reconsumeTimes={message.reconsume_times}, "
        f"preparedTransactionOffset={message.prepared_transaction_offset}, "
        f"toString()=Message{{topic='{message.queue.topic}', flag={message.flag}, "
        f"properties={props}, body={body}, transactionId='null'}}]"
    )


def queue_text(topic: str, broker_name: str, queue_id: int) -> str:
    """MessageQueue.toString."""
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"
