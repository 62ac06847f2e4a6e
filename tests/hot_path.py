"""Switch the native hot path (sidewinder._native) off for one test, to run it on the reference.

The `hot_path` fixture (tests/conftest.py) runs a test twice, "native" and "python": golden wire
and store tests take it so both implementations must give the same bytes. Hypothesis tests, which
cannot take function-scoped fixtures, parametrize over IMPLEMENTATIONS and enter `using(...)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sidewinder.broker.send import header as send_header
from sidewinder.broker.send import request as send_request
from sidewinder.common.native import NATIVE
from sidewinder.protocol import batch_record, message, record
from sidewinder.store import dispatch_scan, flush, index_file, reput

IMPLEMENTATIONS = ("native", "python")


def use_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every place that bound a native function gets its Python reference back."""
    monkeypatch.setattr(message, "java_string_hash", message.java_string_hash_py)
    monkeypatch.setattr(index_file, "java_string_hash", message.java_string_hash_py)
    monkeypatch.setattr(index_file, "ascii_hash", index_file.ascii_hash_py)
    monkeypatch.setattr(index_file, "put_keys", index_file.put_keys_py)
    monkeypatch.setattr(reput, "scan_segment", dispatch_scan.scan_segment_py)
    monkeypatch.setattr(flush, "default_syncer", flush.ThreadSyncer)
    monkeypatch.setattr(record, "_native_encode_record", None)
    monkeypatch.setattr(batch_record, "_native_batch_sizes", None)
    monkeypatch.setattr(batch_record, "_native_encode_batch", None)
    monkeypatch.setattr(send_request, "send_v2_fields", send_header.send_v2_fields_py)


def choose(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    message.tags_code.cache_clear()
    if implementation == "python":
        use_python(monkeypatch)
    elif NATIVE is None:
        pytest.skip("sidewinder._native is not loaded (SIDEWINDER_NATIVE=0?)")


def reset() -> None:
    """After the test (monkeypatch undoes the rest): no tags code cached from either."""
    message.tags_code.cache_clear()


@contextmanager
def using(implementation: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        choose(implementation, monkeypatch)
        try:
            yield
        finally:
            reset()
