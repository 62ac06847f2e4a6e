"""Fuzz the frame decoder with real frames mutated at random (slow suite: `-m slow`).

Every case must decode or raise FrameError: nothing else, no hang. Seeds are the golden wire
captures of every client, so mutations land in realistic JSON and binary headers.
"""

from __future__ import annotations

import random
import time

import pytest

from interop.capture import read_capture
from interop.fixtures import ensure_fixture
from sidewinder.remoting.codec import FrameDecoder, FrameError
from tests.remoting.mutations import mutate

CASES = 120_000


@pytest.mark.slow
@pytest.mark.reference_fixtures
def test_mutated_real_frames_decode_or_raise_frame_error_only() -> None:
    wire = ensure_fixture("wire")
    seeds = [
        f.raw
        for name in ("java", "java-rocketmq-header", "cpp", "node", "go", "mqadmin")
        for f in read_capture(wire / f"{name}.jsonl")
    ]
    rng = random.Random(20261123)
    decoded = failed = 0
    deadline = time.monotonic() + 900
    for case in range(CASES):
        assert time.monotonic() < deadline, f"only {case} cases in the time budget"
        data = mutate(rng, rng.choice(seeds), seeds)
        decoder = FrameDecoder(max_frame=1 << 20)
        split = rng.randrange(len(data) + 1)
        try:
            decoder.feed(data[:split])
            decoded += len(list(decoder.commands()))
            decoder.feed(data[split:])
            decoded += len(list(decoder.commands()))
        except FrameError:
            failed += 1
    # Both outcomes happen: mutations that break frames and ones that still parse.
    assert decoded > 1000 and failed > 1000, (decoded, failed)
