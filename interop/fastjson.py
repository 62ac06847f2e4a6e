"""Read the JSON that RocketMQ's fastjson writes (the product's parser, re-exported for tests)."""

from __future__ import annotations

from typing import Any

from sidewinder.protocol.body import loads

__all__ = ["loads", "loads_from"]


def loads_from(text: str) -> Any:
    """Parse the first JSON document in `text` (mqadmin prints lines before it)."""
    return loads(text[text.index("{") :])
