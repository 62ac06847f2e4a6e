"""A consumer's subscription to one topic: the tag expression as heartbeats and pulls carry it
(`*`, or `TagA || TagB` matched by the tags' Java hash codes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidewinder.protocol.message import tags_code


@dataclass
class Subscription:
    topic: str
    sub_string: str
    tags: list[str]
    codes: frozenset[int] | None  # None: every message ("*")
    sub_version: int
    expression_type: str = "TAG"

    @classmethod
    def of(
        cls, topic: str, expression: str, *, sub_version: int = 0, expression_type: str = "TAG"
    ) -> Subscription:
        """`expression` is a tag expression, or a SQL92 filter when `expression_type` is SQL92."""
        text = expression.strip() or "*"
        tags, codes = parse_tag_expression(text) if expression_type == "TAG" else ([], None)
        return cls(topic, text, tags, codes, sub_version, expression_type)

    def matches_tag(self, tag: str | None) -> bool:
        """The client's second check: the broker matched tag hash codes, which can collide."""
        if self.expression_type != "TAG" or self.codes is None:
            return True
        return tag in self.tags

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": sorted(self.codes or ()),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags,
            "topic": self.topic,
        }


def parse_tag_expression(expression: str | None) -> tuple[list[str], frozenset[int] | None]:
    """`*` (or empty) matches everything; `TagA || TagB` the listed tags (by hash code)."""
    text = (expression or "").strip()
    if not text or text == "*":
        return [], None
    tags = [t.strip() for t in text.split("||") if t.strip()]
    return tags, frozenset(tags_code(t) for t in tags)
