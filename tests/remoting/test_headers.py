"""Typed headers: Java's parsing rules, RocketMQ's error wording, V2's short names."""

from __future__ import annotations

import pytest

from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    HeaderError,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

V2 = {
    "a": "G",
    "b": "T",
    "c": "TBW102",
    "d": "4",
    "e": "1",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "KEYS\x01k\x02",
    "j": "0",
    "k": "false",
    "m": "TRUE",
}


def test_v2_short_names_parse_into_the_full_header_and_back() -> None:
    header = SendMessageRequestHeader.from_ext(V2, names=SEND_V2_NAMES)
    assert (header.producer_group, header.topic, header.queue_id) == ("G", "T", 1)
    assert header.born_timestamp == 1_700_000_000_000
    assert header.unit_mode is False and header.batch is True  # "TRUE": any case
    assert header.max_reconsume_times is None and header.broker_name is None
    assert header.to_ext(names=SEND_V2_NAMES) == {**V2, "m": "true"}


def test_missing_and_bad_fields_say_which_in_rocketmqs_words() -> None:
    with pytest.raises(HeaderError, match=r"the custom field <topic> is null"):
        SendMessageRequestHeader.from_ext(
            {k: v for k, v in V2.items() if k != "b"}, names=SEND_V2_NAMES
        )
    bad = {**V2, "e": "1.5"}
    with pytest.raises(HeaderError, match=r"<queueId> is '1.5', not a number"):
        SendMessageRequestHeader.from_ext(bad, names=SEND_V2_NAMES)
    with pytest.raises(HeaderError, match="out of range"):
        SendMessageRequestHeader.from_ext({**V2, "e": str(1 << 31)}, names=SEND_V2_NAMES)
    with pytest.raises(HeaderError, match="<consumerGroup> is null"):
        PullMessageRequestHeader.from_ext(None)


def test_long_fields_take_64_bits_and_bools_write_as_text() -> None:
    reply = SendMessageResponseHeader("7F00000100002A9F0000000000000000", 3, (1 << 62))
    assert reply.to_ext() == {
        "msgId": "7F00000100002A9F0000000000000000",
        "queueId": "3",
        "queueOffset": str(1 << 62),
    }
    assert SendMessageResponseHeader.from_ext(reply.to_ext()) == reply
