"""The remoting benchmark runs end to end with every row present (no speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from interop.cache import REPO_ROOT


def test_short_run_reports_codec_and_round_trip_rows(tmp_path: Path) -> None:
    raw = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "bench_remoting.py"),
            "--seconds",
            "0.6",
            "--json",
            str(raw),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for row in ("JSON decode", "ROCKETMQ decode", "MSGPACK decode", "round trips"):
        assert row in proc.stdout, proc.stdout
    figures = json.loads(raw.read_text())
    assert figures["ours"] > 0 and figures["bare"] > 0
    assert set(figures["codec"]) == {"JSON", "ROCKETMQ", "MSGPACK"}
