"""The kill -9 soak (scripts/soak_kill9.py), 100 cycles a flush mode: `scripts/test.sh -m slow`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak_kill9.py"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_100_kill_9_cycles_lose_no_acknowledged_message(tmp_path: Path) -> None:
    report_path = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--cycles",
            "100",
            "--flush",
            "both",
            "--json",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    print(done.stdout)
    reports = {r["flush"]: r for r in json.loads(report_path.read_text())}
    for flush in ("SYNC_FLUSH", "ASYNC_FLUSH"):
        report = reports[flush]
        assert report["cycles"] == 100
        assert report["acknowledged"] > 10_000, report
        # SYNC_FLUSH's promise. ASYNC_FLUSH's unflushed tail lives in the page cache, which a
        # process kill leaves alone, so it loses nothing here either.
        assert report["lost"] == 0, report
        assert report["store_records"] >= report["acknowledged"], report
    assert done.returncode == 0, done.stderr
