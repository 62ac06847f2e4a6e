"""The HA wire (protocol/ha.py): frames and reports survive any chunking; bad frames are
refused by name."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol.ha import (
    HAProtocolError,
    OffsetReports,
    TransferFrames,
    encode_frame_header,
    encode_report,
)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(
    frames=st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=8),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_frames_come_out_whole_and_in_order_from_any_chunking(
    frames: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    wire = b"".join(encode_frame_header(offset, len(data)) + data for offset, data in frames)
    reader = TransferFrames(max_size=300)
    got: list[tuple[int, bytes]] = []
    for chunk in _chunks(wire, cuts):
        reader.feed(chunk)
        got.extend(reader.take())
    assert got == frames


@given(
    offsets=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 100), max_size=8),
)
def test_the_newest_whole_report_wins(offsets: list[int], cuts: list[int]) -> None:
    reports = OffsetReports()
    for chunk in _chunks(b"".join(map(encode_report, offsets)), cuts):
        reports.feed(chunk)
    assert reports.latest == offsets[-1]


def test_a_partial_report_is_kept_for_the_next_read() -> None:
    reports = OffsetReports()
    wire = encode_report(123_456)
    assert reports.feed(wire[:5]) is None
    assert reports.feed(wire[5:]) == 123_456


@pytest.mark.parametrize(
    ("offset", "size", "words"),
    [(0, -1, "size -1"), (-5, 0, "offset -5"), (0, 301, "limit is 300")],
)
def test_a_frame_no_master_sends_is_refused(offset: int, size: int, words: str) -> None:
    reader = TransferFrames(max_size=300)
    reader.feed(encode_frame_header(offset, size))
    with pytest.raises(HAProtocolError, match=words):
        list(reader.take())


def test_a_negative_report_is_refused() -> None:
    with pytest.raises(HAProtocolError, match="negative"):
        OffsetReports().feed(encode_report(-1))
