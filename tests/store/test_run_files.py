"""checkpoint, lock and abort files: layout, crash signal, and exclusion (also of RocketMQ)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sidewinder.store.checkpoint import PAGE, RECOVERY_MARGIN_MS, StoreCheckpoint
from sidewinder.store.run_markers import CommitLogDirLock, RunMarkers, StoreLockedError

HOLD = """
import sys, time
from pathlib import Path
from sidewinder.store.run_markers import RunMarkers
m = RunMarkers(Path(sys.argv[1]))
print(m.acquire(), flush=True)
time.sleep(60)
"""


def hold_in_child(root: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() in ("True", "False")
    return child


def test_a_second_process_is_refused_at_once(tmp_path: Path) -> None:
    child = hold_in_child(tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(StoreLockedError, match="in use by another process"):
            RunMarkers(tmp_path).acquire()
        assert time.monotonic() - started < 5  # refused, not waited for
    finally:
        child.kill()
        child.wait()


def test_abort_file_tells_a_crash_from_a_clean_stop(tmp_path: Path) -> None:
    markers = RunMarkers(tmp_path)
    assert markers.acquire() is False
    assert (tmp_path / "abort").exists()
    markers.mark_clean_shutdown()
    markers.release()
    assert not (tmp_path / "abort").exists()

    child = hold_in_child(tmp_path)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    again = RunMarkers(tmp_path)
    assert again.acquire() is True  # the killed holder left its abort file; its lock died
    again.release()


def test_only_the_store_removes_a_checkpoint_being_created(tmp_path: Path) -> None:
    """A reader beside a running store leaves the `.creating` file the store is about to rename
    into place (removing it failed the store's flush); the store's own open at start removes a
    crash's leftover."""
    path = tmp_path / "checkpoint"
    creating = tmp_path / "checkpoint.creating"
    creating.write_bytes(b"\0" * PAGE)
    assert StoreCheckpoint.read(path).physic_msg_timestamp == 0
    assert creating.exists()
    StoreCheckpoint.open(path)
    assert not creating.exists()


def test_checkpoint_round_trip_and_page_layout(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    fresh = StoreCheckpoint.open(path)
    assert (fresh.physic_msg_timestamp, fresh.logics_msg_timestamp) == (0, 0)
    fresh.physic_msg_timestamp, fresh.logics_msg_timestamp, fresh.index_msg_timestamp = (
        1_700_000_010_000,
        1_700_000_005_000,
        1_700_000_001_000,
    )
    fresh.flush()
    assert path.stat().st_size == PAGE
    back = StoreCheckpoint.open(path)
    assert back == fresh
    assert back.min_timestamp() == 1_700_000_005_000 - RECOVERY_MARGIN_MS
    assert back.min_timestamp(index_safe=True) == 1_700_000_001_000 - RECOVERY_MARGIN_MS


@pytest.mark.interop
@pytest.mark.reference_fixtures
def test_rocketmqs_checkpoint_reads(tmp_path: Path) -> None:
    from interop.fixtures import ensure_fixture

    fixture = ensure_fixture("store")
    info = json.loads((fixture / "manifest.json").read_text())
    checkpoint = StoreCheckpoint.open(fixture / info["store"] / "checkpoint")
    # The broker flushed while the fixture was being generated.
    finished_ms = int(info["generated_at"] * 1000)
    started_ms = finished_ms - int(info["seconds"] * 1000)
    for stamp in (checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp):
        assert started_ms <= stamp <= finished_ms


@pytest.mark.interop
def test_a_running_rocketmq_broker_holds_the_same_lock(tmp_path: Path) -> None:
    from interop.target import running_target

    with running_target("rocketmq", tmp_path) as cluster:
        with pytest.raises(StoreLockedError):
            RunMarkers(cluster.store_path).acquire()
        assert (cluster.store_path / "abort").exists()
    # Stopped: the lock is free and RocketMQ removed its abort file.
    markers = RunMarkers(cluster.store_path)
    assert markers.acquire() is False
    markers.release()


def test_two_stores_cannot_share_a_commitlog_directory(tmp_path: Path) -> None:
    shared = tmp_path / "home" / "store" / "commitlog"  # RocketMQ's default, for both
    first = CommitLogDirLock(shared, "broker broker-a of cluster C at 127.0.0.1:10911")
    first.acquire()
    try:
        with pytest.raises(StoreLockedError) as refused:
            CommitLogDirLock(shared, "broker broker-b").acquire()
        text = str(refused.value)
        assert str(shared) in text and "broker-a" in text and f"pid {os.getpid()}" in text
        assert "storePathCommitLog" in text
        # Nothing was added to the directory: RocketMQ's loader refuses non-segment files.
        assert os.listdir(shared) == []
    finally:
        first.release()
    second = CommitLogDirLock(shared, "broker broker-b")
    second.acquire()  # free once the first let go
    second.release()


def test_a_killed_holder_frees_the_commitlog_directory(tmp_path: Path) -> None:
    hold = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from sidewinder.store.run_markers import CommitLogDirLock\n"
        "CommitLogDirLock(Path(sys.argv[1]), 'broker broker-a').acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError, match=f"broker broker-a, pid {child.pid}"):
            CommitLogDirLock(tmp_path, "broker broker-b").acquire()
    finally:
        child.kill()
        child.wait()
    after = CommitLogDirLock(tmp_path, "broker broker-b")
    after.acquire()  # the kernel dropped the dead holder's lock
    after.release()
