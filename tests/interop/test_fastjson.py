"""The bench's reader for fastjson output (RocketMQ's integer map keys are unquoted)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from interop import fastjson


def test_unquoted_integer_keys() -> None:
    text = '{"brokerAddrs":{0:"127.0.0.1:10911",1:"x"},"offsetTable":{"T@G":{0:12,-1:3}}}'
    assert fastjson.loads(text) == {
        "brokerAddrs": {"0": "127.0.0.1:10911", "1": "x"},
        "offsetTable": {"T@G": {"0": 12, "-1": 3}},
    }


def test_strings_that_look_like_keys_are_left_alone() -> None:
    assert fastjson.loads('{"a":"{0:1}, ,2:"}') == {"a": "{0:1}, ,2:"}


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    )
)
def test_standard_json_parses_unchanged(value: object) -> None:
    assert fastjson.loads(json.dumps(value)) == value
