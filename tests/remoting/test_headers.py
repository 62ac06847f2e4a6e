"""Typed headers: Java's parsing rules, RocketMQ's error wording, V2's short names."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    CommandHeader,
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


PULL_FIELDS = (
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subVersion",
    "subscription",
    "expressionType",
)
LIMITS = [1 << 31, (1 << 31) - 1, -(1 << 31), -(1 << 31) - 1, 1 << 63, (1 << 63) - 1, -(1 << 63)]
ODD = [
    "0",
    "7",
    "-1",
    "+5",
    "007",
    "",
    "-",
    "--5",
    "1.5",
    " 3",
    "\u0663",
    "\u00b2",
    "x",
    "2_0",
    "-0",
]
NUMBERS = st.sampled_from(ODD + [str(n) for n in LIMITS])


def _outcome(parse: Callable[[], PullMessageRequestHeader]) -> object:
    try:
        return parse()
    except HeaderError as exc:
        return str(exc)


@given(
    st.sampled_from(PULL_FIELDS),
    NUMBERS | st.text(max_size=4),
    st.dictionaries(st.sampled_from(PULL_FIELDS), NUMBERS | st.text(max_size=4), max_size=3),
)
def test_the_pull_headers_own_parse_agrees_with_the_generic_one(
    field: str, value: str, others: dict[str, str]
) -> None:
    generic = CommandHeader.from_ext.__func__  # type: ignore[attr-defined]
    valid = {f: "1" for f in PULL_FIELDS}
    without = {f: v for f, v in valid.items() if f != field}
    for fields in ({**valid, field: value}, without, {**valid, **others}, others):
        assert _outcome(lambda f=fields: PullMessageRequestHeader.from_ext(f)) == _outcome(
            lambda f=fields: generic(PullMessageRequestHeader, f)
        )
