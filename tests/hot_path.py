"""Run a test on the native hot path (sidewinder._native) and again on its Python reference.

The `hot_path` fixture (tests/conftest.py) runs a test twice, "native" and "python": golden wire
and store tests take it so both implementations must give the same bytes. Hypothesis tests, which
cannot take function-scoped fixtures, parametrize over IMPLEMENTATIONS and enter `using(...)`.
Either way every call site switches at once, through sidewinder.common.native's one table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sidewinder.common import native
from sidewinder.protocol import message

IMPLEMENTATIONS: tuple[native.Leg, ...] = ("native", "python")


@contextmanager
def using(implementation: native.Leg) -> Iterator[None]:
    """Every call site bound to one leg for the block (skipped without the extension)."""
    if implementation == "native" and native.NATIVE is None:
        pytest.skip("sidewinder._native is not loaded (SIDEWINDER_NATIVE=0?)")
    # Tags codes cached by the other leg would spare this one the hashing under test.
    message.tags_code.cache_clear()
    previous = native.use(implementation)
    try:
        yield
    finally:
        native.use(previous)
        message.tags_code.cache_clear()
