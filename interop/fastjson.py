"""Read the JSON that RocketMQ's fastjson writes: integer map keys come unquoted (`{0:"a"}`)."""

from __future__ import annotations

import json
import re
from typing import Any

# A bare integer key right after `{` or `,` (strings cannot contain a raw `{0:` outside quotes
# in what RocketMQ prints, but be safe: only rewrite outside string literals).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


def loads(text: str) -> Any:
    """Parse standard JSON or fastjson's form of it."""

    def quote(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)
        return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'

    return json.loads(_TOKENS.sub(quote, text))


def loads_from(text: str) -> Any:
    """Parse the first JSON document in `text` (mqadmin prints lines before it)."""
    return loads(text[text.index("{") :])
