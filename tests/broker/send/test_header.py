"""send_v2_fields: the Rust reader of SEND_MESSAGE_V2 JSON headers against its Python reference.

The native one may say None (take the slow path) where the reference reads the header, never
something else: hypothesis generates headers in the ways the clients write them (and some they
do not), and the mutated real frames of the wire captures (tests/remoting/test_codec_fuzz.py's
mutations) feed both. The headers the stock Java and Node clients send must be read natively.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sidewinder.broker.send.header import send_batch_fields_py, send_v2_fields_py
from sidewinder.broker.send.request import SendRequest
from sidewinder.common.native import NATIVE
from sidewinder.protocol.codes import SerializeType
from tests.broker.captured import captured_headers
from tests.remoting.mutations import mutate

pytestmark = [
    pytest.mark.skipif(NATIVE is None, reason="sidewinder._native is not loaded"),
    pytest.mark.reference_fixtures,
]


def native(header: bytes) -> object:
    assert NATIVE is not None
    return NATIVE.send_v2_fields(header)


# What the send pipeline has the readers make: its request, the fields between these.
HEAD, TAIL = (310,), (SerializeType.JSON, b"body", False, "", 0, None, None, False)


def agree(header: bytes) -> object:
    """Both readings; the native one is the reference's or None. Returns the reference's.
    Read into a SendRequest, each is that request (or None where it gives None)."""
    assert NATIVE is not None
    expected = send_v2_fields_py(header)
    got = native(header)
    assert got is None or got == expected, header
    for fields, request in [
        (expected, send_v2_fields_py(header, SendRequest, HEAD, TAIL)),
        (got, NATIVE.send_v2_fields(header, SendRequest, HEAD, TAIL)),
    ]:
        if fields is None:
            assert request is None
        else:
            assert type(request) is SendRequest
            assert request == HEAD + fields + TAIL
    return expected


def send_headers() -> list[bytes]:
    """The JSON headers of every SEND_MESSAGE_V2 in the wire captures."""
    return captured_headers(310)


@pytest.mark.interop
def test_the_stock_clients_headers_are_read_natively() -> None:
    headers = send_headers()
    assert len(headers) >= 20
    for header in headers:
        expected = agree(header)
        assert expected is not None
        assert native(header) == expected


digit_text = st.integers(0, 10**18).map(str)
odd_text = st.text(max_size=30) | st.sampled_from(["", "-1", "01", "1234567890", "1e3", "٣"])
any_text = st.text() | st.lists(st.integers(0, 0x10FFFF), max_size=40).map(
    lambda points: "".join(map(chr, points))  # lone surrogates and astral characters too
)
properties = st.lists(
    st.tuples(st.sampled_from(["TAGS", "KEYS", "WAIT", "UNIQ_KEY", "DELAY"]), any_text), max_size=5
).map(lambda pairs: "".join(f"{k}\x01{v}\x02" for k, v in pairs))
ext_value = st.one_of(
    digit_text,
    odd_text,
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


small = st.integers(0, 10**9)
field_value = small.map(str) | small  # Java sends strings; Node sends numbers


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    """A plain header as a client writes it, then up to three things changed at random."""
    ext: dict[str, Any] = {
        "a": draw(st.sampled_from(["PG", "PG_node"]) | any_text),
        "b": draw(st.sampled_from(["T", "Topic_1"]) | any_text),
        "c": "TBW102",
        "d": draw(st.sampled_from(["4", 4])),
        "e": draw(field_value),
        "f": draw(field_value),
        "g": draw(st.integers(0, 10**18).map(str) | st.integers(0, 10**18)),
        "h": draw(field_value),
        "i": draw(properties),
        "j": draw(field_value),
        "k": draw(st.sampled_from(["false", False])),
        "m": "false",
    }
    header: dict[str, Any] = {
        "code": 310,
        "extFields": ext,
        "flag": draw(st.sampled_from([0, 1, 2])),
        "language": draw(st.sampled_from(["JAVA", "GO", "CPP"])),
        "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
        "serializeTypeCurrentRPC": "JSON",
        "version": draw(st.integers(0, 500)),
    }
    for _ in range(draw(st.integers(0, 3))):
        change = draw(st.integers(0, 7))
        if change == 0 and ext:
            del ext[draw(st.sampled_from(sorted(ext)))]
        elif change == 1:
            ext[draw(st.sampled_from(list("abcdefghijklmn")))] = draw(ext_value | odd_text)
        elif change == 2:
            ext[draw(st.text(max_size=5))] = draw(ext_value | odd_text)
        elif change == 3:
            header["code"] = draw(st.sampled_from([10, -310, 2**31, 310.0, "310"]) | st.integers())
        elif change == 4:
            header["language"] = draw(st.sampled_from(["NOPE", "java", 0, None]))
        elif change == 5:
            del header[draw(st.sampled_from(sorted(header)))]
        elif change == 6:
            header[draw(st.sampled_from(["flag", "opaque", "version"]))] = draw(
                st.integers() | st.sampled_from([True, None, "0", 1.5])
            )
        else:
            header[draw(st.sampled_from(["remark", "extra"]))] = draw(
                st.none() | st.text(max_size=10) | st.integers()
            )
    return header


def dumps(header: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return orjson.dumps(header)  # as our client and the Java one (UTF-8, few escapes)
    if style == 1:  # every non-ASCII character escaped, surrogate pairs included
        return json.dumps(header, ensure_ascii=True).encode()
    return json.dumps(header, ensure_ascii=False, indent=1).encode("utf-8", "surrogatepass")


PLAIN = {
    "code": 310,
    "extFields": {
        "a": "G",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "1",
        "f": "0",
        "g": "17",
        "h": "0",
    },
    "flag": 0,
    "language": "JAVA",
    "opaque": 5,
    "serializeTypeCurrentRPC": "JSON",
    "version": 373,
}


@given(headers(), st.integers(0, 2))
@example(PLAIN, 0)
@example({**PLAIN, "extFields": {**PLAIN["extFields"], "i": "K\x01\U0001f600\x02"}}, 1)
def test_generated_headers_read_the_same(header: dict[str, Any], style: int) -> None:
    try:
        data = dumps(header, style)
    except (TypeError, UnicodeEncodeError, orjson.JSONEncodeError):
        return  # not something a header can be
    agree(data)


@given(headers(), st.integers(0, 2))
@example({**PLAIN, "code": 320}, 0)
def test_generated_batch_headers_read_the_same(header: dict[str, Any], style: int) -> None:
    """send_batch_fields: the same reader for a SEND_BATCH_MESSAGE header, and never for any
    other code (nor send_v2_fields for a batch's)."""
    assert NATIVE is not None
    header = {**header, "code": 320 if header.get("code") == 310 else header.get("code")}
    try:
        data = dumps(header, style)
    except (TypeError, UnicodeEncodeError, orjson.JSONEncodeError):
        return
    expected = send_batch_fields_py(data)
    got = NATIVE.send_batch_fields(data)
    assert got is None or got == expected, data
    assert native(data) is None and send_v2_fields_py(data) is None
    if header == {**PLAIN, "code": 320}:
        assert got == (5, 0, "T", 1, 0, 17, 0, 0, "")


def test_a_plain_header_is_read_natively_in_every_style() -> None:
    for style in range(3):
        data = dumps(PLAIN, style)
        assert native(data) == send_v2_fields_py(data) == (5, 0, "T", 1, 0, 17, 0, 0, "")


@pytest.mark.parametrize(
    "text",
    [
        b'"\\ud800"',  # a lone surrogate, escaped
        b'"\\udc00\\ud800"',
        b'"\\ud83d\\u0041"',
        b'"\xed\xa0\x80"',  # a surrogate in UTF-8: not UTF-8
        b'"\xff"',
        b'"a\x01b"',  # a raw control character
        b'"\\x41"',
        b'"\\u00"',
        b'"\\u004G"',
    ],
)
def test_bad_strings_are_none_or_what_the_reference_makes_of_them(text: bytes) -> None:
    data = dumps(PLAIN, 0).replace(b'"b":"T"', b'"b":' + text)
    assert native(data) is None
    agree(data)


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"{}", b"[]", b"null", b'{"code":310}', b'{"code":310,"code":310}', b"{} x"],
)
def test_not_a_send_header(data: bytes) -> None:
    assert agree(data) is None
    assert native(data) is None


def test_into_is_a_tuple_type_and_head_and_tail_are_optional() -> None:
    assert NATIVE is not None
    data = dumps(PLAIN, 0)
    fields = (5, 0, "T", 1, 0, 17, 0, 0, "")
    for read in (NATIVE.send_v2_fields, send_v2_fields_py):
        assert type(read(data)) is tuple
        whole = read(data, None, HEAD, None)
        assert type(whole) is tuple and whole == HEAD + fields
        assert read(data, SendRequest, None, TAIL[:0]) == fields
        with pytest.raises(TypeError):
            read(data, list, HEAD, TAIL)


def test_only_bytes_like_input() -> None:
    assert NATIVE is not None
    data = dumps(PLAIN, 0)
    assert NATIVE.send_v2_fields(memoryview(data)) == NATIVE.send_v2_fields(bytearray(data))
    with pytest.raises(TypeError):
        NATIVE.send_v2_fields(data.decode())


def fuzz(cases: int, seed: int) -> tuple[int, int]:
    seeds = send_headers()
    rng = random.Random(seed)
    read = differs = 0
    for _ in range(cases):
        data = mutate(rng, rng.choice(seeds), seeds)
        expected = agree(data)
        got = native(data)
        read += got is not None
        differs += expected is not None and got is None
    return read, differs


@pytest.mark.interop
def test_mutated_real_headers_read_the_same_or_none() -> None:
    read, _ = fuzz(5_000, 20261124)
    assert read > 100  # some mutations leave a header the lane takes


@pytest.mark.slow
def test_mutated_real_headers_read_the_same_or_none_long() -> None:
    read, _ = fuzz(200_000, 20261125)
    assert read > 1000
