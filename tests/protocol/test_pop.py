"""The POP protocol's strings and headers (sidewinder/protocol/pop.py), against the forms
RocketMQ 5.3.2 puts on the wire (seen in replies of the rocketmq5 target)."""

from __future__ import annotations

import pytest

from sidewinder.protocol.pop import (
    NORMAL,
    RETRY_V1,
    RETRY_V2,
    AckMessageRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    format_msg_offsets,
    format_start_offsets,
    normal_topic,
    parse_msg_offsets,
    parse_start_offsets,
    polling_key,
    pop_retry_topic,
    real_topic,
    retry_flag,
    revive_topic,
)


def test_extra_info_round_trip() -> None:
    # A handle of a message revived through the retry topic, as 5.3.2 wrote it in POP_CK.
    text = "0 1795808135722 5000 7 1 broker-a 0 1"
    info = ExtraInfo.decode(text)
    assert info == ExtraInfo(0, 1795808135722, 5000, 7, RETRY_V1, "broker-a", 0, 1)
    assert info.encode() == text
    assert not info.is_order
    # The seven-field form (no message offset) of a check point's own key.
    short = ExtraInfo.decode("12 1795808135722 5000 999 0 broker-b 3")
    assert (short.queue_offset, short.is_order, short.encode()) == (
        None,
        True,
        "12 1795808135722 5000 999 0 broker-b 3",
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("garbage", "1 fields"),
        ("0 1 2 3 0 b 0 0 9", "9 fields"),
        ("0 1 2 3 7 b 0 0", "retry flag '7'"),
        ("0 x 2 3 0 b 0 0", "not a number"),
    ],
)
def test_extra_info_refuses_malformed(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ExtraInfo.decode(text)


def test_retry_topics() -> None:
    assert pop_retry_topic("Orders", "billing") == "%RETRY%billing_Orders"
    assert pop_retry_topic("Orders", "billing", v2=True) == "%RETRY%billing+Orders"
    assert [retry_flag(t) for t in ("Orders", "%RETRY%billing_Orders", "%RETRY%b+Orders")] == [
        NORMAL,
        RETRY_V1,
        RETRY_V2,
    ]
    info = ExtraInfo(0, 1, 2, 3, RETRY_V1, "broker-a", 0, 0)
    assert info.real_topic("Orders", "billing") == "%RETRY%billing_Orders"
    assert ExtraInfo(0, 1, 2, 3, NORMAL, "b", 0, 0).real_topic("Orders", "g") == "Orders"


def test_offset_infos() -> None:
    # As 5.3.2 answered a pop of three messages from two queues.
    starts, offsets = "0 0 0;0 1 0", "0 0 0,1;0 1 0"
    assert parse_start_offsets(starts) == {("0", 0): 0, ("0", 1): 0}
    assert parse_msg_offsets(offsets) == {("0", 0): [0, 1], ("0", 1): [0]}
    assert format_start_offsets(parse_start_offsets(starts)) == starts
    assert format_msg_offsets(parse_msg_offsets(offsets)) == offsets
    assert parse_start_offsets("") == {} and parse_msg_offsets(None) == {}
    with pytest.raises(ValueError, match="twice"):
        parse_start_offsets("0 0 1;0 0 2")
    with pytest.raises(ValueError, match="not '<retry> <queueId> <value>'"):
        parse_msg_offsets("0 0")


def test_header_wire_names() -> None:
    pop = PopMessageRequestHeader("g", "t", -1, 16, 30000, 5000, 1795808129634, 1, "TAG", "*")
    assert pop.to_ext() == {
        "consumerGroup": "g",
        "topic": "t",
        "queueId": "-1",
        "maxMsgNums": "16",
        "invisibleTime": "30000",
        "pollTime": "5000",
        "bornTime": "1795808129634",
        "initMode": "1",
        "expType": "TAG",
        "exp": "*",
        "order": "false",
    }
    reply = PopMessageResponseHeader.from_ext(
        {
            "invisibleTime": "5000",
            "startOffsetInfo": "",
            "restNum": "0",
            "popTime": "1795808157035",
            "reviveQid": "7",
            "msgOffsetInfo": "",
        }
    )
    assert (reply.pop_time, reply.revive_qid, reply.start_offset_info) == (1795808157035, 7, "")
    ack = AckMessageRequestHeader("g", "t", 0, "0 1 2 3 0 b 0 0", 0, broker_name="b")
    assert ack.to_ext()["extraInfo"] == "0 1 2 3 0 b 0 0" and ack.to_ext()["bname"] == "b"
    changed = ChangeInvisibleTimeResponseHeader.from_ext(
        {"invisibleTime": "3000", "popTime": "1795808159754", "reviveQid": "0"}
    )
    assert changed.invisible_time == 3000


def test_the_broker_side_names() -> None:
    assert real_topic("Orders", "g", NORMAL) == "Orders"
    assert real_topic("Orders", "g", RETRY_V1) == "%RETRY%g_Orders"
    assert real_topic("Orders", "g", RETRY_V2) == "%RETRY%g+Orders"
    with pytest.raises(ValueError, match="retry flag"):
        real_topic("Orders", "g", "3")
    assert normal_topic("%RETRY%g_Orders", "g") == normal_topic("%RETRY%g+Orders", "g") == "Orders"
    assert normal_topic("Orders", "g") == "Orders"
    assert polling_key("Orders", "g", -1) == "Orders@g@-1"
    assert revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
