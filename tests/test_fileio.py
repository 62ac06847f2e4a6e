"""Atomic metadata files: content replaced whole, the previous kept as .bak, backups read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sidewinder.common.fileio import MetadataFileError, read_with_backup, write_atomic


def test_write_replaces_whole_and_keeps_the_previous_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    write_atomic(path, json.dumps({"v": 1}))
    assert json.loads(path.read_text()) == {"v": 1}
    assert not path.with_name("topics.json.bak").exists()
    write_atomic(path, json.dumps({"v": 2}).encode())
    assert json.loads(path.read_text()) == {"v": 2}
    assert json.loads(path.with_name("topics.json.bak").read_text()) == {"v": 1}
    assert not path.with_name("topics.json.tmp").exists()


def test_a_torn_file_falls_back_to_its_backup(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    write_atomic(path, json.dumps({"offset": 5}))
    write_atomic(path, json.dumps({"offset": 6}))
    path.write_text('{"offset": ')  # what a non-atomic writer would leave after a crash
    assert read_with_backup(path, json.loads) == {"offset": 5}
    os.unlink(path)
    assert read_with_backup(path, json.loads) == {"offset": 5}


def test_missing_is_none_and_unreadable_names_both_files(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    assert read_with_backup(path, json.loads) is None
    path.write_text("{")
    path.with_name("subscriptionGroup.json.bak").write_text("[")
    with pytest.raises(MetadataFileError, match=r"subscriptionGroup\.json.*\.bak"):
        read_with_backup(path, json.loads)
