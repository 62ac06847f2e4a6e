"""RocketMQ 5's v2 messages and 4.x messages, both ways, as RocketMQ's proxy maps them
(SendMessageActivity on the way in, GrpcConverter.buildMessage on the way out)."""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.protocol.message import MessageConst
from sidewinder.protocol.pop import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from sidewinder.protocol.topics import SYSTEM_GROUP_PREFIX, is_fixed_system_topic
from sidewinder.proxy import grpc_protocol as v2

MAX_BODY_BYTES = 4 << 20  # the proxy's default maxMessageSize for gRPC sends
MAX_MESSAGE_GROUP_BYTES = 64
COMPRESSED_FLAG = 0x1  # MessageSysFlag.COMPRESSED_FLAG
TRANSACTION_PREPARED = 0x1 << 2  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
SHARDING_KEY = "__SHARDINGKEY"
CHECK_IMMUNITY_S = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
# Keys a user property may not take (MessageConst.STRING_HASH_SET, what the proxy checks).
_RESERVED = frozenset(
    value for name, value in vars(MessageConst).items() if name.isupper() and isinstance(value, str)
) | {
    SHARDING_KEY,
    CHECK_IMMUNITY_S,
    TRACE_CONTEXT,
    BORN_HOST,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
}


_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # TopicValidator's characters
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255


def check_topic(name: str) -> None:
    """A topic name as RocketMQ's proxy takes it (GrpcValidator.validateTopic)."""
    if not name:
        raise BadMessage("ILLEGAL_TOPIC", "topic name is empty")
    if len(name) > TOPIC_MAX_LENGTH:
        raise BadMessage("ILLEGAL_TOPIC", f"topic name is longer than {TOPIC_MAX_LENGTH}")
    if not _NAME.match(name):
        raise BadMessage("ILLEGAL_TOPIC", f"topic name {name!r} has illegal characters")
    if is_fixed_system_topic(name):
        raise BadMessage("ILLEGAL_TOPIC", f"cannot access system topic {name}")


def check_group(name: str) -> None:
    """A consumer group name as RocketMQ's proxy takes it (validateConsumerGroup)."""
    if not name:
        raise BadMessage("ILLEGAL_CONSUMER_GROUP", "consumer group is empty")
    if len(name) > GROUP_MAX_LENGTH:
        raise BadMessage(
            "ILLEGAL_CONSUMER_GROUP", f"consumer group name is longer than {GROUP_MAX_LENGTH}"
        )
    if not _NAME.match(name):
        raise BadMessage(
            "ILLEGAL_CONSUMER_GROUP", f"consumer group {name!r} has illegal characters"
        )
    if name.startswith(SYSTEM_GROUP_PREFIX):
        raise BadMessage("ILLEGAL_CONSUMER_GROUP", f"cannot use system consumer group {name}")


class BadMessage(ValueError):
    """A v2 message the broker must not get: its v2 code name and what is wrong."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Outgoing:
    """A v2 message as a 4.x send: what SEND_MESSAGE_V2 carries."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_group: str | None
    reconsume_times: int


def outgoing(message: Any, max_body_bytes: int = MAX_BODY_BYTES) -> Outgoing:
    """The 4.x send of one v2 `Message`; BadMessage for what RocketMQ's proxy refuses."""
    system = message.system_properties
    topic = message.topic.name
    check_topic(topic)
    body = bytes(message.body)
    if len(body) > max_body_bytes:
        raise BadMessage(
            "MESSAGE_BODY_TOO_LARGE",
            f"message body size {len(body)} exceeds the limit of {max_body_bytes} bytes",
        )
    properties: dict[str, str] = {}
    for key, value in message.user_properties.items():
        if key in _RESERVED:
            raise BadMessage(
                "ILLEGAL_MESSAGE_PROPERTY_KEY", f"property key {key!r} is reserved by RocketMQ"
            )
        properties[key] = value
    if not system.message_id:
        raise BadMessage("ILLEGAL_MESSAGE_ID", "message id is empty")
    properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    if system.HasField("tag"):
        properties[MessageConst.TAGS] = system.tag
    if system.keys:
        properties[MessageConst.KEYS] = " ".join(system.keys)
    group: str | None = None
    if system.HasField("message_group"):
        group = system.message_group
        if len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES:
            raise BadMessage(
                "ILLEGAL_MESSAGE_GROUP",
                f"message group is {len(group.encode())} bytes, the limit is "
                f"{MAX_MESSAGE_GROUP_BYTES - 1}",
            )
        properties[SHARDING_KEY] = group
    if system.HasField("delivery_timestamp"):
        properties[MessageConst.TIMER_DELIVER_MS] = str(system.delivery_timestamp.ToMilliseconds())
    if system.HasField("trace_context"):
        properties[TRACE_CONTEXT] = system.trace_context
    sys_flag = 0
    if system.message_type == v2.MessageType.TRANSACTION:
        properties[MessageConst.TRANSACTION_PREPARED] = "true"
        sys_flag |= TRANSACTION_PREPARED
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.ToSeconds()
            properties[CHECK_IMMUNITY_S] = str(seconds)
    if system.body_encoding == v2.Encoding.GZIP:
        # Stored as sent, plain: any consumer reads it, 4.x ones (zlib only) too.
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as exc:
            raise BadMessage(
                "MESSAGE_CORRUPTED", f"the GZIP body does not inflate: {exc}"
            ) from None
    if system.born_host:
        properties[BORN_HOST] = system.born_host
    born = system.born_timestamp.ToMilliseconds() if system.HasField("born_timestamp") else 0
    properties[MessageConst.PRODUCER_GROUP] = topic  # the proxy names the producer by topic
    properties.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true")
    attempt = system.delivery_attempt if system.HasField("delivery_attempt") else 0
    return Outgoing(topic, body, properties, sys_flag, born, group, max(attempt - 1, 0))


def message_type_of(properties: dict[str, str]) -> int:
    """What a stored message is to a 5.x client (GrpcConverter.buildMessageType)."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return int(v2.MessageType.TRANSACTION)
    if (
        MessageConst.DELAY_TIME_LEVEL in properties
        or MessageConst.TIMER_DELIVER_MS in properties
        or MessageConst.TIMER_DELAY_SEC in properties
    ):
        return int(v2.MessageType.DELAY)
    if SHARDING_KEY in properties:
        return int(v2.MessageType.FIFO)
    return int(v2.MessageType.NORMAL)


def incoming(message: ReceivedMessage, receipt_handle: str, invisible_ms: int) -> Any:
    """The v2 `Message` a consumer receives for a 4.x message (its body already plain: a
    compressed one was inflated as it was read)."""
    props = message.properties
    user = {k: v for k, v in props.items() if k not in _RESERVED}
    body = message.body
    digest = hashlib.md5(body).hexdigest().upper()
    system = v2.SystemProperties(
        message_id=message.msg_id,
        body_digest=v2.Digest(type=v2.DigestType.MD5, checksum=digest),
        body_encoding=v2.Encoding.IDENTITY,
        message_type=message_type_of(props),
        born_host=props.get(BORN_HOST) or message.born_host.rsplit(":", 1)[0],
        store_host=message.store_host,
        queue_id=message.queue.queue_id,
        queue_offset=message.queue_offset,
        delivery_attempt=message.reconsume_times + 1,
    )
    if receipt_handle:
        system.receipt_handle = receipt_handle
    tag = props.get(MessageConst.TAGS)
    if tag is not None:
        system.tag = tag
    keys = props.get(MessageConst.KEYS)
    if keys:
        system.keys.extend(keys.split())
    if SHARDING_KEY in props:
        system.message_group = props[SHARDING_KEY]
    if TRACE_CONTEXT in props:
        system.trace_context = props[TRACE_CONTEXT]
    deliver = props.get(MessageConst.TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        system.delivery_timestamp.FromMilliseconds(int(deliver))
    system.born_timestamp.FromMilliseconds(message.born_timestamp)
    system.store_timestamp.FromMilliseconds(message.store_timestamp)
    if invisible_ms:
        system.invisible_duration.FromMilliseconds(invisible_ms)
    return v2.Message(
        topic=v2.Resource(name=message.topic),
        user_properties=user,
        system_properties=system,
        body=body,
    )


@dataclass(frozen=True)
class TransactionId:
    """What END_TRANSACTION needs of a prepared message, carried in the v2 transaction id the
    send answered with (RocketMQ's proxy keeps the same in memory): its broker, its offset in
    the half topic's queue and in the CommitLog."""

    broker_name: str
    queue_offset: int
    commit_log_offset: int

    def encode(self) -> str:
        return f"{self.commit_log_offset:016X}{self.queue_offset:016X}{self.broker_name}"

    @classmethod
    def decode(cls, text: str) -> TransactionId:
        if len(text) <= 32:
            raise ValueError(f"transaction id {text!r} is not one this front gave")
        return cls(text[32:], int(text[16:32], 16), int(text[:16], 16))
