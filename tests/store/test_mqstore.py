"""`mqstore verify` / `print` on stores the real RocketMQ wrote, intact and damaged."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.store.consume_queue import CQ_ENTRY_SIZE
from sidewinder.store.index_file import HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE

pytestmark = [pytest.mark.interop, pytest.mark.reference_fixtures]


def mqstore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidewinder.tools.mqstore", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def fixture() -> tuple[Path, dict[str, Any]]:
    from interop.fixtures import ensure_fixture

    path = ensure_fixture("store")
    info = json.loads((path / "manifest.json").read_text())
    return path / info["store"], info


@pytest.fixture
def damaged(fixture: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(fixture[0], store)
    return store


def test_verify_passes_on_rocketmqs_store(fixture: tuple[Path, dict[str, Any]]) -> None:
    store, info = fixture
    proc = mqstore("verify", str(store))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    for topic in ("FixtureTags", "FixtureSizes", "FixtureEmpty", "FixtureBatch"):
        assert report["topics"][topic] == len(info["sent"][topic])
    # Every record, system topics included, is dispatched to exactly one consume queue.
    assert report["cq_entries"] == report["records"]
    assert report["index_entries"] > report["records"]


def first_offset(info: dict[str, Any], topic: str, n: int = 0) -> int:
    return decode_offset_msg_id(info["sent"][topic][n]["offsetMsgId"])[2]


def patch(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def segment_of(store: Path, phy: int) -> tuple[Path, int]:
    segments = sorted((store / "commitlog").iterdir())
    size = segments[0].stat().st_size
    return segments[phy // size], phy % size


def assert_fails_at(store: Path, offset: int, words: str) -> None:
    proc = mqstore("verify", str(store))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is False
    assert result["offset"] == offset, result
    assert words in result["problem"], result


def test_a_flipped_body_byte_is_found_by_crc(
    damaged: Path, fixture: tuple[Path, dict[str, Any]]
) -> None:
    phy = first_offset(fixture[1], "FixtureSizes", 6)  # 1 MiB, sent uncompressed
    segment, pos = segment_of(damaged, phy)
    patch(segment, pos + 4096, b"\xff\xfe")
    assert_fails_at(damaged, phy, "CRC")


def test_a_torn_record_is_found(damaged: Path, fixture: tuple[Path, dict[str, Any]]) -> None:
    phy = first_offset(fixture[1], "FixtureTags", 10)
    segment, pos = segment_of(damaged, phy)
    patch(segment, pos + 4, b"\x00\x00\x00\x01")  # the magic code
    assert_fails_at(damaged, phy, "magic code")


def test_a_cq_entry_pointing_nowhere_is_found(damaged: Path) -> None:
    queue = damaged / "consumequeue" / "FixtureTags" / "2"
    first_file = sorted(queue.iterdir())[0]
    patch(first_file, 3 * CQ_ENTRY_SIZE, struct.pack(">q", 12345))
    assert_fails_at(damaged, 3, "no record starts")


def test_an_index_entry_with_a_foreign_key_is_found(damaged: Path) -> None:
    (index,) = (damaged / "index").iterdir()
    entry_at = INDEX_HEADER_SIZE + 5_000_000 * HASH_SLOT_SIZE + 7 * INDEX_ENTRY_SIZE
    patch(index, entry_at, struct.pack(">i", 42))
    assert_fails_at(damaged, 7, "key hash 42")


def test_print_records_and_cq_entries(fixture: tuple[Path, dict[str, Any]]) -> None:
    store, info = fixture
    rows = [
        json.loads(line)
        for line in mqstore("print", str(store), "--topic", "FixtureEmpty").stdout.splitlines()
    ]
    assert [r["bodyLen"] for r in rows] == [0, 0]
    assert [r["properties"]["KEYS"] for r in rows] == ["empty-0", "empty-1"]
    cq = [
        json.loads(line)
        for line in mqstore(
            "print",
            str(store),
            "--cq",
            "--topic",
            "FixtureTags",
            "--queue",
            "1",
            "--from",
            "10",
            "--to",
            "15",
        ).stdout.splitlines()
    ]
    assert [r["queueOffset"] for r in cq] == [10, 11, 12, 13, 14]
    by_offset = {decode_offset_msg_id(e["offsetMsgId"])[2]: e for e in info["sent"]["FixtureTags"]}
    assert all(by_offset[r["phyOffset"]]["queueOffset"] == r["queueOffset"] for r in cq)


def test_a_bad_broker_conf_value_is_named(
    fixture: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum = lots\n")
    proc = mqstore("verify", str(fixture[0]), "-c", str(conf))
    assert proc.returncode == 2
    assert "maxHashSlotNum='lots'" in proc.stderr
