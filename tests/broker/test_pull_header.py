"""pull_fields: the Rust reader of PULL_MESSAGE JSON headers against its Python reference.

The native one may say None (the generic path decodes the pull) where the reference reads the
header, never something else: hypothesis generates headers in the ways the clients write them
(and some they do not), and the mutated real frames of the wire captures feed both. The pull
headers the stock clients send must be read natively.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sidewinder.broker.processors.pull_lane import PULL_HEAD, pull_fields_py
from sidewinder.common.native import NATIVE
from tests.broker.captured import captured_headers
from tests.remoting.mutations import mutate

pytestmark = pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded")


def agree(header: bytes) -> object:
    """Both readings; the native one is the reference's or None. Returns the reference's."""
    assert NATIVE is not None
    expected = pull_fields_py(header)
    got = NATIVE.pull_fields(header)
    assert got is None or got == expected, header
    return expected


def pull_headers() -> list[bytes]:
    """The JSON headers of every PULL_MESSAGE in the wire captures."""
    return captured_headers(11)


PLAIN: dict[str, Any] = {
    "code": 11,
    "extFields": {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "1",
        "queueOffset": "42",
        "maxMsgNums": "32",
        "sysFlag": "7",
        "commitOffset": "-1",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1700000000000",
        "subscription": "*",
        "expressionType": "TAG",
    },
    "flag": 0,
    "language": "JAVA",
    "opaque": 5,
    "serializeTypeCurrentRPC": "JSON",
    "version": 409,
}
NAMES = list(PLAIN["extFields"])
number_text = st.integers(-(2**64), 2**64).map(str) | st.sampled_from(
    ["", "-", "01", "-0", "+5", " 5", "1e3", "٣", "1.5", "9223372036854775807", "2147483648"]
)
ext_value = st.one_of(
    number_text,
    st.text(max_size=12),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    """A plain pull header, then up to three things changed at random."""
    header = json.loads(json.dumps(PLAIN))
    ext = header["extFields"]
    for _ in range(draw(st.integers(0, 3))):
        change = draw(st.integers(0, 6))
        if change == 0:
            ext[draw(st.sampled_from(NAMES))] = draw(ext_value)
        elif change == 1:
            ext.pop(draw(st.sampled_from(NAMES)), None)
        elif change == 2:
            ext[draw(st.text(max_size=6))] = draw(st.text(max_size=6))  # a key of another kind
        elif change == 3:
            header[draw(st.sampled_from(["code", "flag", "opaque", "version"]))] = draw(
                st.integers(-(2**33), 2**33) | st.sampled_from([11, 2, 3, 0]) | st.text(max_size=3)
            )
        elif change == 4:
            header["language"] = draw(st.sampled_from(["JAVA", "GO", "PYTHON", "COBOL", 3]))
        elif change == 5:
            header["remark"] = draw(st.none() | st.text(max_size=5))
        else:
            del header[draw(st.sampled_from(sorted(header)))]
    return header


def dumps(header: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return orjson.dumps(header)
    if style == 1:  # every non-ASCII character escaped
        return json.dumps(header, ensure_ascii=True).encode()
    return json.dumps(header, ensure_ascii=False, indent=1).encode("utf-8", "surrogatepass")


@given(headers(), st.integers(0, 2))
@example(PLAIN, 0)
@example(PLAIN, 2)
def test_generated_headers_read_the_same(header: dict[str, Any], style: int) -> None:
    agree(dumps(header, style))


def test_a_plain_header_is_read_natively_as_the_reference_reads_it() -> None:
    assert NATIVE is not None
    for style in range(3):
        data = dumps(PLAIN, style)
        expected = agree(data)
        assert expected == (5, "G", "T", 1, 42, 32, 7, -1, 15000, 1700000000000, "*", "TAG")
        assert NATIVE.pull_fields(data) == expected
        assert NATIVE.pull_fields(memoryview(data)) == expected
    with pytest.raises(TypeError):
        NATIVE.pull_fields(dumps(PLAIN, 0).decode())


@pytest.mark.parametrize(
    "data", [b"", b"{}", b"[]", b'{"code":10}', b'{"code":11,"flag":2,"extFields":{}}', b"\xff"]
)
def test_not_a_plain_pull_header(data: bytes) -> None:
    assert NATIVE is not None
    assert NATIVE.pull_fields(data) is None
    agree(data)


@pytest.mark.interop
def test_the_stock_clients_pull_headers_are_read_natively() -> None:
    headers = pull_headers()
    assert len(headers) >= 5
    for header in headers:
        expected = agree(header)
        assert expected is not None
        assert NATIVE is not None and NATIVE.pull_fields(header) == expected
        assert header.startswith(PULL_HEAD)  # what the lane looks for before it reads


def fuzz(cases: int, seed: int) -> int:
    seeds = pull_headers()
    rng = random.Random(seed)
    read = 0
    for _ in range(cases):
        data = mutate(rng, rng.choice(seeds), seeds)
        agree(data)
        assert NATIVE is not None
        read += NATIVE.pull_fields(data) is not None
    return read


@pytest.mark.interop
def test_mutated_real_pull_headers_read_the_same_or_none() -> None:
    assert fuzz(5_000, 20261128) > 20  # some mutations leave a header the lane takes


@pytest.mark.slow
def test_mutated_real_pull_headers_read_the_same_or_none_long() -> None:
    assert fuzz(200_000, 20261129) > 1000
