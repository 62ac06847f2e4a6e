"""Random edits of real frames, for the fuzz tests of the codec and of the decoders behind it.

broken = mutate(random.Random(seed), frame, other_frames)
"""

from __future__ import annotations

import random


def mutate(rng: random.Random, frame: bytes, others: list[bytes]) -> bytes:
    """One to four random edits of `frame`: a flipped bit, a telling byte, bytes cut or inserted,
    a piece of another frame appended, the tail cut off."""
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
