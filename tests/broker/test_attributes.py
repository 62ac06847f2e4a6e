"""RocketMQ 5's attribute modifications, retry policies and queue assignment, as pure functions;
the broker's answers to them are in tests/interop/test_rocketmq5_metadata.py."""

from __future__ import annotations

import pytest

from sidewinder.broker.attributes import (
    TOPIC_ATTRIBUTES,
    alter_attributes,
    format_modification,
    parse_modification,
)
from sidewinder.broker.groups import SubscriptionGroup
from sidewinder.broker.processors.assignment import (
    allocate_averagely,
    allocate_by_circle,
    allocate_for_pop,
)
from sidewinder.broker.retry_policy import next_delay_ms, retry_policy_from_json
from sidewinder.broker.topics import TopicConfig
from sidewinder.protocol.errors import SidewinderError


def test_a_modification_parses_with_its_signs_and_formats_back() -> None:
    changes = parse_modification("+message.type=FIFO,-cleanup.policy")
    assert changes == {"+message.type": "FIFO", "-cleanup.policy": ""}
    assert format_modification(changes) == "+message.type=FIFO,-cleanup.policy"
    assert parse_modification("") == {} and parse_modification(None) == {}


@pytest.mark.parametrize(
    ("text", "remark"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        ("message.type", "delete attribute format is wrong: message.type"),
        ("+a=1,+a=2", "key duplication: +a"),
        ("+message.type=", "+message.type has no value"),
    ],
)
def test_malformed_modifications_are_refused_naming_the_key(text: str, remark: str) -> None:
    with pytest.raises(SidewinderError, match=remark.replace("+", r"\+")):
        parse_modification(text)


def test_create_takes_known_attributes_and_update_keeps_the_unnamed_ones() -> None:
    created = alter_attributes(
        TOPIC_ATTRIBUTES,
        {},
        parse_modification("+message.type=FIFO,+queue.type=BatchCQ"),
        create=True,
    )
    assert created == {"message.type": "FIFO", "queue.type": "BatchCQ"}
    altered = alter_attributes(
        TOPIC_ATTRIBUTES, created, parse_modification("+message.type=DELAY"), create=False
    )
    assert altered == {"message.type": "DELAY", "queue.type": "BatchCQ"}
    deleted = alter_attributes(
        TOPIC_ATTRIBUTES, altered, parse_modification("-message.type"), create=False
    )
    assert deleted == {"queue.type": "BatchCQ"}


@pytest.mark.parametrize(
    ("current", "text", "create", "remark"),
    [
        ({}, "+colour=red", True, "unsupported key: colour"),
        ({}, "+message.type=QUEUE", True, "value is not in set: .*message.type"),
        ({}, "+reserve.time=soon", True, "reserve.time takes a number"),
        ({}, "+reserve.time=-2", True, r"not in range\(-1, .*reserve.time"),
        ({}, "-message.type", True, "only add attribute is supported while creating topic"),
        ({}, "-message.type", False, "attempt to delete a nonexistent key: message.type"),
        (
            {"queue.type": "SimpleCQ"},
            "+queue.type=BatchCQ",
            False,
            "attempt to update an unchangeable attribute. key: queue.type",
        ),
    ],
)
def test_refusals_name_the_attribute(
    current: dict[str, str], text: str, create: bool, remark: str
) -> None:
    with pytest.raises(SidewinderError, match=remark) as refused:
        alter_attributes(TOPIC_ATTRIBUTES, current, parse_modification(text), create=create)
    assert refused.value.code == 1  # SYSTEM_ERROR, as RocketMQ answers its RuntimeException


def test_topic_json_is_4x_without_attributes_and_5x_with_them() -> None:
    plain = TopicConfig("T", 4, 4)
    assert "attributes" not in plain.to_json()
    fifo = TopicConfig("T", 4, 4, attributes={"message.type": "FIFO"})
    assert fifo.to_json()["attributes"] == {"message.type": "FIFO"}
    assert next(iter(fifo.to_json())) == "attributes"  # fastjson's order: sorted
    assert TopicConfig.from_json(fifo.to_json()) == fifo and fifo.message_type == "FIFO"
    assert TopicConfig.from_json(plain.to_json()).message_type == "NORMAL"


def test_a_group_writes_rocketmq5_fields_only_once_one_is_set() -> None:
    plain = SubscriptionGroup("G")
    assert "groupRetryPolicy" not in plain.to_json()
    assert plain.to_json(full=True)["groupRetryPolicy"] == {"type": "CUSTOMIZED"}
    orderly = SubscriptionGroup.from_json({"groupName": "G", "consumeMessageOrderly": True})
    value = orderly.to_json()
    assert value["consumeMessageOrderly"] is True and value["consumeTimeoutMinute"] == 15
    assert SubscriptionGroup.from_json(value) == orderly


def test_a_group_field_sent_as_null_keeps_its_default() -> None:
    nulls = {"retryQueueNums": None, "consumeEnable": None, "consumeTimeoutMinute": None}
    assert SubscriptionGroup.from_json({"groupName": "G", **nulls}) == SubscriptionGroup("G")


def test_retry_policies_normalize_and_give_rocketmqs_delays() -> None:
    exponential = retry_policy_from_json(
        {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}
    )
    assert exponential == {
        "exponentialRetryPolicy": {"initial": 1000, "max": 7_200_000, "multiplier": 2},
        "type": "EXPONENTIAL",
    }
    assert [next_delay_ms(exponential, n) for n in (0, 1, 3)] == [1000, 2000, 8000]
    assert next_delay_ms({"type": "CUSTOMIZED"}, 0) == 10_000  # index reconsumeTimes + 2
    assert next_delay_ms({"type": "CUSTOMIZED"}, 99) == 7_200_000
    with pytest.raises(SidewinderError, match=r"groupRetryPolicy\.type 'LINEAR'"):
        retry_policy_from_json({"type": "LINEAR"})


QUEUES = [("broker-a", n) for n in range(5)]


def test_allocation_strategies_split_as_rocketmqs() -> None:
    clients = ["c1", "c2"]
    assert allocate_averagely(QUEUES, clients, "c1") == QUEUES[:3]
    assert allocate_averagely(QUEUES, clients, "c2") == QUEUES[3:]
    assert allocate_by_circle(QUEUES, clients, "c2") == [QUEUES[1], QUEUES[3]]
    assert allocate_averagely(QUEUES, clients, "stranger") == []


def test_pop_assignment_is_every_queue_unless_shared() -> None:
    clients = ["c1", "c2", "c3"]
    assert allocate_for_pop(allocate_averagely, QUEUES, clients, "c1", 0) == [("broker-a", -1)]
    shared = allocate_for_pop(allocate_averagely, QUEUES, clients, "c1", 1)
    assert shared == QUEUES[:2] + QUEUES[2:4]  # its own and the next client's
