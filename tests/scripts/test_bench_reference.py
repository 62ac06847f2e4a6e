"""The reference benchmark script runs end to end (a short run; no speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from interop.cache import REPO_ROOT


def test_short_producer_run_reports_a_row(tmp_path: Path) -> None:
    raw = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "bench_reference.py"),
            "--seconds",
            "12",
            "--flush",
            "async",
            "--scenarios",
            "produce-1",
            "--json",
            str(raw),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| ASYNC_FLUSH | produce 1 KiB × 1 thread |" in proc.stdout, proc.stdout
    (row,) = json.loads(raw.read_text())["rows"]
    assert (row["flush"], row["scenario"], row["failures"]) == ("async", "produce-1", 0)
    assert row["tps"] > 0
    assert row["resources"]["max_rss_mib"]["broker"] > 0
