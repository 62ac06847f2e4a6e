"""Topic and subscription-group attributes, as RocketMQ 5 keeps them (TopicAttributes,
AttributeParser, AttributeUtil).

A request carries a modification string; the table applies it to what it holds:

    changes = parse_modification("+message.type=FIFO,-cleanup.policy")
    # {"+message.type": "FIFO", "-cleanup.policy": ""}
    attributes = alter_attributes(TOPIC_ATTRIBUTES, current, changes, create=False)

On a create only "+" is allowed; an update may add, alter ("+") or delete ("-") attributes that
are changeable. Unknown keys and values out of a key's set or range are refused. Every refusal
is a SidewinderError (SYSTEM_ERROR, as RocketMQ answers the RuntimeException) whose remark
keeps RocketMQ's words and names the attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sidewinder.protocol.errors import SidewinderError

MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


@dataclass(frozen=True)
class Attribute:
    """One known attribute: an enumeration (`values`) or a long range (`low`..`high`)."""

    name: str
    changeable: bool
    default: str
    values: tuple[str, ...] = ()
    low: int = 0
    high: int = 0

    def verify(self, value: str) -> None:
        if self.values:
            if value not in self.values:
                raise SidewinderError(
                    f"value is not in set: [{', '.join(sorted(self.values))}]"
                    f" (attribute {self.name}, value {value!r})"
                )
            return
        try:
            number = int(value)
        except ValueError:
            raise SidewinderError(
                f'For input string: "{value}" (attribute {self.name} takes a number)'
            ) from None
        if not self.low <= number <= self.high:
            raise SidewinderError(
                f"value is not in range({self.low}, {self.high}) (attribute {self.name})"
            )


LONG_MAX = (1 << 63) - 1

TOPIC_ATTRIBUTES: dict[str, Attribute] = {
    a.name: a
    for a in (
        Attribute("queue.type", False, "SimpleCQ", values=("BatchCQ", "SimpleCQ")),
        Attribute("cleanup.policy", False, "DELETE", values=("DELETE", "COMPACTION")),
        Attribute(MESSAGE_TYPE, True, "NORMAL", values=MESSAGE_TYPES),
        Attribute("reserve.time", True, "-1", low=-1, high=LONG_MAX),
    )
}
# RocketMQ 5.3.2 defines no subscription-group attribute: every key is unknown.
GROUP_ATTRIBUTES: dict[str, Attribute] = {}


def parse_modification(text: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: "+k=v,-k" to {"+k": "v", "-k": ""}, signs kept."""
    if not text:
        return {}
    changes: dict[str, str] = {}
    for item in text.split(","):
        if "=" in item:
            key, _, value = item.partition("=")
            value = value.split("=", 1)[0]
            if "+" not in key:
                raise SidewinderError(f"add/alter attribute format is wrong: {key}")
            if not value:
                raise SidewinderError(f"attribute {key} has no value after '='")
        else:
            key, value = item, ""
            if "-" not in key:
                raise SidewinderError(f"delete attribute format is wrong: {key}")
        if key in changes:
            raise SidewinderError(f"key duplication: {key}")
        changes[key] = value
    return changes


def format_modification(changes: Mapping[str, str]) -> str:
    """AttributeParser.parseToString: the header form of a parsed modification."""
    return ",".join(f"{k}={v}" if v else k for k, v in changes.items())


def alter_attributes(
    known: Mapping[str, Attribute],
    current: Mapping[str, str],
    changes: Mapping[str, str],
    *,
    create: bool,
) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes: `current` with `changes` applied, or a refusal."""
    final = dict(current)
    seen: set[str] = set()
    for key, value in changes.items():
        name = key[1:]
        if not name or "+" in name or "-" in name:
            raise SidewinderError(f"kv string format wrong: {key}")
        if name in seen:
            raise SidewinderError(f"alter duplication key. key: {name}")
        seen.add(name)
        if create and not key.startswith("+"):
            raise SidewinderError(
                f"only add attribute is supported while creating topic. key: {name}"
            )
        if not key.startswith(("+", "-")):
            raise SidewinderError(f"wrong format key: {name}")
        deleting = key.startswith("-")
        if deleting and name not in current:
            raise SidewinderError(f"attempt to delete a nonexistent key: {name}")
        attribute = known.get(name)
        if attribute is None:
            raise SidewinderError(f"unsupported key: {name}")
        if not create and not attribute.changeable:
            raise SidewinderError(f"attempt to update an unchangeable attribute. key: {name}")
        if deleting:
            final.pop(name, None)
        else:
            attribute.verify(value)
            final[name] = value
    return final
