"""A `scripts/bench.py --quick` run for the bench's smoke tests: its exit, its table and its
JSON figures."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interop.cache import REPO_ROOT


@dataclass(frozen=True)
class QuickBench:
    proc: subprocess.CompletedProcess[str]
    table: dict[str, list[str]]  # a row's label -> its cells
    figures: dict[str, Any]  # the JSON's broker_bound part

    def rate(self, label: str) -> float:
        """The row's msg/s: its first cell reads "13,400 (12,900–14,000)"."""
        return float(self.table[label][0].split(" ")[0].replace(",", ""))


def quick_bench(tmp_path: Path, *args: str, timeout_s: float = 240) -> QuickBench:
    """Run the broker-bound bench quickly with `args`; assert it exited 0."""
    raw = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "bench.py"), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = {
        cells[0]: cells[1:]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| row ")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    return QuickBench(proc, table, json.loads(raw.read_text())["broker_bound"])
