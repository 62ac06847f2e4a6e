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

CASES = 120_000


def mutate(rng: random.Random, frame: bytes, others: list[bytes]) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(data)) if data else 0
        if kind == 0 and data:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:
            data[at] = rng.choice((0, 0xFF, 0x7F, 0x80, ord("{"), ord('"'), 1))
        elif kind == 2:
            del data[at : at + rng.randint(1, 16)]
        elif kind == 3:
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == 4:
            data += rng.choice(others)[: rng.randint(1, 64)]
        else:
            data = data[: rng.randrange(len(data) + 1)]
    return bytes(data)


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
