"""v2 messages as 4.x sends, and the refusals RocketMQ's proxy makes before a broker sees one."""

from __future__ import annotations

from typing import Any

import pytest

from sidewinder.protocol.message import MessageConst, java_string_hash
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.convert import BadMessage, message_type_of, outgoing
from sidewinder.proxy.messaging import consistent_hash


def v2_message(body: bytes = b"hi", **system: Any) -> Any:
    return v2.Message(
        topic=v2.Resource(name="Orders"),
        system_properties=v2.SystemProperties(
            message_id="01C0A8000100001A2B3C4D5E6F00000001", **system
        ),
        body=body,
    )


def test_a_v2_message_maps_to_rocketmqs_properties() -> None:
    message = v2_message(tag="TagA", keys=["k1", "k2"], message_group="g-1", trace_context="tc")
    message.user_properties["color"] = "red"
    message.system_properties.delivery_timestamp.FromMilliseconds(1_800_000_000_000)
    message.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_000)
    sent = outgoing(message)
    assert sent.topic == "Orders" and sent.body == b"hi" and sent.sys_flag == 0
    assert sent.properties[MessageConst.TAGS] == "TagA"
    assert sent.properties[MessageConst.KEYS] == "k1 k2"
    assert sent.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == (
        "01C0A8000100001A2B3C4D5E6F00000001"
    )
    assert sent.properties["__SHARDINGKEY"] == "g-1" and sent.message_group == "g-1"
    assert sent.properties[MessageConst.TIMER_DELIVER_MS] == "1800000000000"
    assert sent.properties[MessageConst.PRODUCER_GROUP] == "Orders"
    assert sent.properties["color"] == "red" and sent.born_timestamp == 1_700_000_000_000
    assert message_type_of(sent.properties) == v2.MessageType.DELAY


def test_a_transaction_message_is_prepared() -> None:
    message = v2_message(message_type=v2.MessageType.TRANSACTION)
    message.system_properties.orphaned_transaction_recovery_duration.FromSeconds(30)
    sent = outgoing(message)
    assert sent.properties[MessageConst.TRANSACTION_PREPARED] == "true"
    assert sent.sys_flag & 0x4
    assert sent.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert message_type_of(sent.properties) == v2.MessageType.TRANSACTION


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda m: m.user_properties.__setitem__("TAGS", "x"), "ILLEGAL_MESSAGE_PROPERTY_KEY"),
        (lambda m: m.user_properties.__setitem__("UNIQ_KEY", "x"), "ILLEGAL_MESSAGE_PROPERTY_KEY"),
        (lambda m: setattr(m, "body", b"x" * ((4 << 20) + 1)), "MESSAGE_BODY_TOO_LARGE"),
        (
            lambda m: setattr(m.system_properties, "message_group", "g" * 64),
            "ILLEGAL_MESSAGE_GROUP",
        ),
        (lambda m: setattr(m.system_properties, "message_id", ""), "ILLEGAL_MESSAGE_ID"),
        (lambda m: setattr(m.topic, "name", ""), "ILLEGAL_TOPIC"),
    ],
)
def test_bad_messages_are_refused_with_the_v2_code(change: Any, code: str) -> None:
    message = v2_message()
    change(message)
    with pytest.raises(BadMessage) as refused:
        outgoing(message)
    assert refused.value.code == code and str(refused.value)


def test_a_body_of_exactly_4_mib_is_taken() -> None:
    assert len(outgoing(v2_message(body=b"x" * (4 << 20))).body) == 4 << 20


def test_message_groups_land_on_the_queue_rocketmqs_proxy_picks() -> None:
    """Guava's consistentHash of String.hashCode, as RocketMQ's proxy picks a FIFO queue;
    the expected values are Guava 31's own (Hashing.consistentHash, run on this machine)."""
    assert [consistent_hash(key, 8) for key in range(10)] == [0, 6, 6, 3, 1, 4, 5, 0, 4, 7]
    assert consistent_hash(java_string_hash("order-1"), 4) == 3
    assert consistent_hash(-123456789, 16) == 1
    assert java_string_hash("hello") == 99162322 and java_string_hash("polygenelubricants") < 0
