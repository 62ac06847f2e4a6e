"""The POP wire bits: handles, retry topic names, offset summaries."""

from __future__ import annotations

import pytest

from sidewinder.protocol.pop import (
    ExtraInfo,
    normal_topic,
    offset_info,
    parse_offset_info,
    real_topic,
    retry_topic,
    topic_kind,
)


def test_a_handle_reads_back_as_written() -> None:
    text = "5 1700000000000 30000 3 1 broker-a 0 7"
    extra = ExtraInfo.parse(text)
    assert extra == ExtraInfo(5, 1700000000000, 30000, 3, "1", "broker-a", 0, 7)
    assert extra.format() == text
    assert not extra.is_order
    assert ExtraInfo.parse("0 1 1 999 0 b 0 0").is_order


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        (None, "empty"),
        ("1 2 3", "3 fields"),
        ("a 1 1 1 0 b 0 0", "ckQueueOffset"),
        ("1 1 x 1 0 b 0 0", "invisibleTime"),
        ("1 1 1 1 7 b 0 0", "retry flag"),
        ("1 1 1 1 0 b q 0", "queueId"),
    ],
)
def test_a_malformed_handle_says_what_is_wrong(text: str | None, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ExtraInfo.parse(text)


def test_retry_topic_names_v1_and_v2() -> None:
    assert retry_topic("Orders", "g") == "%RETRY%g_Orders"
    assert retry_topic("Orders", "g", v2=True) == "%RETRY%g+Orders"
    assert [topic_kind(t) for t in ("Orders", "%RETRY%g_Orders", "%RETRY%g+Orders")] == [
        "0",
        "1",
        "2",
    ]
    assert real_topic("Orders", "g", "1") == "%RETRY%g_Orders"
    assert real_topic("Orders", "g", "2") == "%RETRY%g+Orders"
    assert normal_topic("%RETRY%g_Orders", "g") == normal_topic("%RETRY%g+Orders", "g") == "Orders"
    with pytest.raises(ValueError):
        real_topic("Orders", "g", "3")


def test_offset_summaries() -> None:
    text = offset_info([("T", 0, "4"), ("%RETRY%g_T", 0, "1,2")])
    assert text == "0 0 4;1 0 1,2"
    assert parse_offset_info(text) == {"0@0": [4], "1@0": [1, 2]}
    assert parse_offset_info("") == {}
