"""broker.conf and namesrv.conf: Java .properties files of `key=value` lines."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sidewinder.common.fileio import write_atomic


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """`key=value` or `key = value` per line; `#` and `!` start comments; later keys win.

    A line without `=` is an error naming the file and line (Java would take it as a key with
    an empty value, which in broker.conf is always a typo).
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{source}:{number}: not key=value: {raw!r}")
        values[key.strip()] = value.strip()
    return values


def read_properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"), source=str(path))


def update_properties_text(text: str, values: Mapping[str, str]) -> str:
    """`text` with each key of `values` set: its lines rewritten in place (comments and the
    order of the file kept), keys it lacked appended."""
    pending = dict(values)
    lines = []
    for raw in text.splitlines():
        stripped = raw.strip()
        key, sep, _ = stripped.partition("=")
        key = key.strip()
        if sep and not stripped.startswith(("#", "!")) and key in values:
            lines.append(f"{key}={values[key]}")
            pending.pop(key, None)
        else:
            lines.append(raw)
    lines += [f"{key}={value}" for key, value in pending.items()]
    return "\n".join(lines) + "\n"


def update_properties_file(path: Path, values: Mapping[str, str]) -> None:
    """Set `values` in the properties file at `path` (made if missing), its other lines kept,
    written atomically. Blocking."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    write_atomic(path, update_properties_text(text, values))
