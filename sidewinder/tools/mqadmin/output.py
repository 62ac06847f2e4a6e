"""Plain tables and timestamps for the sub-commands that print in our own layout.

print(table(["#Topic", "#QID"], [["Orders", 0]]))
when(1700000000000)  # '2023-11-14 22:13:20' in local time, '-' for 0
"""

from __future__ import annotations

import time
from typing import Any


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms > 0 else "-"
