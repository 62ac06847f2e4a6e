"""Message properties, offsetMsgId and tags codes as RocketMQ 4.x defines them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.common.native import NATIVE
from sidewinder.protocol import message
from sidewinder.protocol.message import (
    decode_offset_msg_id,
    decode_properties,
    encode_offset_msg_id,
    encode_properties,
    java_string_hash_py,
    tags_code,
)

# Values of String.hashCode() computed by the JVM (java.lang.String, JDK 17).
JAVA_HASHES = {
    "": 0,
    "TagA": 2598919,
    "TagB": 2598920,
    "hello": 99162322,
    "a somewhat longer tag that overflows": 772090828,
    "标签": 857175,
    "\U0001f600": 1772899,
}


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES.items())
@pytest.mark.usefixtures("hot_path")
def test_java_string_hash(text: str, expected: int) -> None:
    # Looked up at call time: the hot_path fixture chooses the implementation.
    assert message.java_string_hash(text) == expected


# Any str, lone surrogates (surrogateescape, surrogatepass) and astral characters included.
any_text = st.text() | st.lists(st.integers(0, 0x10FFFF), max_size=80).map(
    lambda points: "".join(map(chr, points))
)


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
@given(any_text)
def test_native_java_string_hash_is_the_reference(text: str) -> None:
    assert NATIVE is not None
    assert NATIVE.java_string_hash(text) == java_string_hash_py(text)


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
@pytest.mark.parametrize(
    "text",
    [
        "\udc80",
        "\ud800",
        "a\ud83d",  # a high surrogate with no low one after it
        "\ude00\ud83d",  # a pair in the wrong order
        "\ud83d\ude00",  # a pair as two code points: Java sees the same units as for U+1F600
        b"caf\xe9 \xff".decode("utf-8", "surrogateescape"),
        "x" * 100_000,
        "\U0010ffff" * 1000,
    ],
)
def test_native_java_string_hash_of_edge_cases(text: str) -> None:
    assert NATIVE is not None
    assert NATIVE.java_string_hash(text) == java_string_hash_py(text)


@pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")
def test_native_java_string_hash_takes_only_str() -> None:
    assert NATIVE is not None
    with pytest.raises(TypeError):
        NATIVE.java_string_hash(b"TagA")


@pytest.mark.usefixtures("hot_path")
def test_tags_code_is_zero_without_tags() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == JAVA_HASHES["TagA"]


def test_properties_as_java_writes_them() -> None:
    encoded = encode_properties({"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "ABC"})
    assert encoded == b"KEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x01ABC\x02"


def test_properties_tolerate_missing_trailing_separator_and_junk() -> None:
    assert decode_properties(b"a\x011\x02b\x012") == {"a": "1", "b": "2"}
    assert decode_properties(b"noseparator\x02\x02c\x01") == {"c": ""}
    assert decode_properties(b"") == {}


names = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=20,
)
values = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
    max_size=40,
)


@given(st.dictionaries(names, values, max_size=10))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


def test_offset_msg_id_matches_the_broker() -> None:
    # clients.md §5.5: 127.0.0.1:19911 at CommitLog offset 0.
    assert encode_offset_msg_id(b"\x7f\x00\x00\x01", 19911, 0) == "7F00000100004DC70000000000000000"
    assert decode_offset_msg_id("7F00000100004DC70000000000000000") == ("127.0.0.1", 19911, 0)


@given(
    st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_offset_msg_id_round_trip(host: bytes, port: int, offset: int) -> None:
    msg_id = encode_offset_msg_id(host, port, offset)
    assert len(msg_id) == (32 if len(host) == 4 else 56)
    _, got_port, got_offset = decode_offset_msg_id(msg_id)
    assert (got_port, got_offset) == (port, offset)


@pytest.mark.parametrize("bad", ["", "XYZ", "7F000001", "7F00000100004DC7000000000000000000"])
def test_bad_offset_msg_id_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="msgId"):
        decode_offset_msg_id(bad)


@given(st.dictionaries(names, values, max_size=10), names)
def test_one_property_reads_as_the_whole_decode_does(props: dict[str, str], name: str) -> None:
    from sidewinder.protocol.message import property_value

    assert property_value(encode_properties(props), name) == props.get(name)


@given(st.dictionaries(names, values, max_size=10), names, st.booleans())
def test_without_property_drops_one_and_keeps_the_rest(
    props: dict[str, str], name: str, trailing: bool
) -> None:
    from sidewinder.protocol.message import without_property

    data = encode_properties(props, trailing=trailing)
    rest = {k: v for k, v in props.items() if k != name}
    # The same pairs in the same order, as if encoded without it.
    assert without_property(data, name) in (
        encode_properties(rest, trailing=trailing),
        encode_properties(rest, trailing=False),
    )


def test_without_property_matches_whole_names_only() -> None:
    from sidewinder.protocol.message import without_property

    data = b"XWAIT\x01a\x02WAIT\x01true\x02KEYS\x01k"
    assert without_property(data, "WAIT") == b"XWAIT\x01a\x02KEYS\x01k"
    assert without_property(b"WAIT\x01true", "WAIT") == b""
    assert without_property(b"KEYS\x01k\x02WAIT\x01true", "WAIT") == b"KEYS\x01k"
