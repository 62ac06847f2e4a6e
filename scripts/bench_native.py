"""Micro-benchmark of the native hot path (sidewinder._native) beside its Python references.

    .venv/bin/python scripts/bench_native.py [--repeat 5]

Prints µs per call of each function, Python reference and native, best of `--repeat` timings
(the machine is noisy: the best is the least disturbed). The broker-level figure is
scripts/profile_broker.py with SIDEWINDER_NATIVE=0 and without.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidewinder.broker.send.header import send_v2_fields_py
from sidewinder.common.native import NATIVE
from sidewinder.protocol import record
from sidewinder.protocol.message import encode_properties, java_string_hash_py
from sidewinder.protocol.record import Host, MessageToStore, encode_record_py


def cases() -> list[tuple[str, Callable[[], object], Callable[[], object] | None]]:
    """(name, Python call, native call or None) for each function and typical input."""
    out: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = []
    for label, text in (
        ("java_string_hash tag 'TagA'", "TagA"),
        (
            "java_string_hash key topic#uuid (58 ch)",
            "BenchTopic#" + "7F0000010A2B18B4AAC2" * 2 + "0a1b2c7",
        ),
        ("java_string_hash non-ASCII '标签标签'", "标签标签"),
    ):
        native = None if NATIVE is None else (lambda t=text: NATIVE.java_string_hash(t))
        out.append((label, lambda t=text: java_string_hash_py(t), native))
    message = MessageToStore(
        topic=b"BenchTopic",
        queue_id=3,
        body=b"x" * 1024,
        properties=encode_properties(
            {"UNIQ_KEY": "7F0000010A2B18B4AAC2" * 2, "WAIT": "true", "CLUSTER": "DefaultCluster"}
        ),
        born_timestamp=1_700_000_000_000,
        born_host=Host(b"\x0a\x00\x00\x02", 51234),
        store_host=Host(b"\x0a\x00\x00\x01", 10911),
    )
    buffer = memoryview(bytearray(1 << 20))
    stamps = {"queue_offset": 7, "phy_offset": 123456, "store_timestamp": 1_700_000_000_001}

    def python() -> object:
        return encode_record_py(message, buffer, 4096, **stamps)

    def native() -> object:  # record.encode_record: the dispatch the store calls
        return record.encode_record(message, buffer, 4096, **stamps)

    out.append(("encode_record 1 KiB body", python, None if NATIVE is None else native))

    # A SEND_MESSAGE_V2 header as the Java client writes it (the wire captures' shape).
    header = (
        b'{"code":310,"extFields":{"a":"PG_bench","b":"BenchTopic","c":"TBW102","d":"4",'
        b'"e":"3","f":"0","g":"1700000000000","h":"0","i":"UNIQ_KEY\\u0001'
        + b"7F0000010A2B18B4AAC2"
        * 2
        + b'\\u0002WAIT\\u0001true\\u0002TAGS\\u0001TagA","j":"0","k":"false","m":"false"},'
        b'"flag":0,"language":"JAVA","opaque":1234,"serializeTypeCurrentRPC":"JSON",'
        b'"version":373}'
    )
    assert NATIVE is None or NATIVE.send_v2_fields(header) == send_v2_fields_py(header)
    out.append(
        (
            "send_v2_fields Java header (decode + fields)",
            lambda: send_v2_fields_py(header),
            None if NATIVE is None else (lambda: NATIVE.send_v2_fields(header)),
        )
    )
    return out


def best_us(call: Callable[[], object], repeat: int) -> float:
    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat, number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'function':48} {'python µs':>10} {'native µs':>10} {'speed-up':>9}")
    for name, python, native in cases():
        py_us = best_us(python, args.repeat)
        if native is None:
            print(f"{name:48} {py_us:10.3f} {'-':>10}")
            continue
        nat_us = best_us(native, args.repeat)
        print(f"{name:48} {py_us:10.3f} {nat_us:10.3f} {py_us / nat_us:8.1f}x")


if __name__ == "__main__":
    main()
