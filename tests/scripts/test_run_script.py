"""The README's run command: installs the project, then (until the broker exists) benchmarks
the store; its table comes out on stdout with every row filled."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_run_script_installs_and_benchmarks_the_store() -> None:
    done = subprocess.run(
        ["bash", "scripts/run.sh", "--seconds", "0.5", "--recovery-mib", "8"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if "|" in line}
    for measure in ("ASYNC_FLUSH puts/s", "SYNC_FLUSH puts/s", "recovery of 8 MiB"):
        assert measure in rows, done.stdout
        ratio = rows[measure].rstrip(" |").rsplit("|", 1)[1].strip()
        assert ratio.endswith("%") and float(ratio[:-1]) > 0, rows[measure]
    # Logs go to stderr, never into the table.
    assert "store.recovered" not in done.stdout
