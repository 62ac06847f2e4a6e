"""White-list address patterns, as RocketMQ 4.9's RemoteAddressStrategyFactory reads them.

    matches = address_matcher("192.168.1.*")
    matches("192.168.1.7")  # True

A blank pattern matches nothing; `*`, `*.*.*.*` and `*:*:*:*:*:*:*:*` match everything;
`10.1.1.{1,2,3}` or `a,b,c` is a set of addresses; a `*` or an `a-b` range in one field
(`192.168.*.*`, `192.168.1.1-100`, `1050::ac5:*`) is a range in that field; anything else is one
IPv4 or IPv6 address. A pattern RocketMQ refuses raises AclConfigError with its message.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from sidewinder.acl.errors import AclConfigError

AddressMatcher = Callable[[str], bool]

_ANY = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_ipv6(address: str, parts: int = 8) -> str:
    """AclUtils.expandIP: upper case, `::` widened to `parts` fields, each padded to 4 digits."""
    address = address.upper()
    pad = parts - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1))
    return ":".join(field.rjust(4, "0") for field in address.split(":"))


def _split(text: str, separator: str) -> list[str]:
    """StringUtils.split: empty pieces dropped."""
    return [piece for piece in text.split(separator) if piece]


def address_matcher(pattern: str | None) -> AddressMatcher:
    if pattern is None or not pattern.strip():
        return lambda address: False
    if pattern in _ANY:
        return lambda address: True
    if pattern.endswith("}"):
        separator = ":" if ":" in pattern else "."
        fields = _split(pattern, separator)
        last = fields[-1]
        if separator == "." and len(fields) < 4:
            raise AclConfigError("MultipleRemoteAddressStrategy has got a/some wrong format IP(s) ")
        if not last.startswith("{"):
            raise AclConfigError(
                "MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress"
            )
        head = pattern[: pattern.index("{")]
        return _one_of([head + tail for tail in _split(last[1:-1], ",")])
    if "," in pattern:
        return _one_of(_split(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return _one(pattern)


def _one_of(addresses: list[str]) -> AddressMatcher:
    allowed: set[str] = set()
    for address in addresses:
        if is_ipv4(address):
            allowed.add(address)
        elif is_ipv6(address):
            allowed.add(expand_ipv6(address))
        else:
            raise AclConfigError(f"Netaddress examine Exception netaddress is {address}")

    def matches(address: str) -> bool:
        return (expand_ipv6(address) if is_ipv6(address) else address) in allowed

    return matches


def _one(pattern: str) -> AddressMatcher:
    if not (is_ipv4(pattern) or is_ipv6(pattern)):
        raise AclConfigError(f"Netaddress examine Exception netaddress is {pattern}")
    expected = expand_ipv6(pattern)
    return lambda address: expand_ipv6(address) == expected


def _field_range(value: str, base: int, top: int) -> tuple[int, int] | None:
    """The bounds a `*` or `a-b` field stands for, else None (a literal field)."""
    value = value.strip()
    if value == "*":
        return 0, top
    if "-" in value:
        if value.startswith("-"):
            raise AclConfigError(
                f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} "
            )
        low, high = (int(v, base) for v in _split(value, "-")[:2])
        if not (0 <= low <= high <= top):
            raise AclConfigError(
                "RangeRemoteAddressStrategy netaddress examine scope Exception "
                f"start is {low} , end is {high}"
            )
        return low, high
    return None


def _range(pattern: str) -> AddressMatcher:
    if ":" in pattern:
        return _range_v6(pattern)
    fields = _split(pattern, ".")
    for index in (1, 2, 3):
        bounds = _field_range(fields[index], 10, 255) if index < len(fields) else None
        if bounds is not None and bounds[1] > 0:
            break
    else:
        return lambda address: False  # RocketMQ leaves such a strategy without a head
    for field in fields[:index]:
        if not field.strip().isdigit() or int(field) > 255:
            raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    head = "".join(field.strip() + "." for field in fields[:index])
    low, high = bounds

    def matches(address: str) -> bool:
        if not is_ipv4(address) or not address.startswith(head):
            return False
        value = address[len(head) :].split(".")[0]
        return low <= int(value) <= high

    return matches


def _range_v6(pattern: str) -> AddressMatcher:
    fields = _split(pattern, ":")
    for index in range(1, len(fields)):
        bounds = _field_range(fields[index], 16, 0xFFFF)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        return lambda address: False
    star, minus = "*" in pattern, "-" in pattern
    # AclUtils.v6ipProcess: the fields before the ranged one, expanded.
    if star and minus:
        parts, sub = 6, pattern[: pattern[: pattern.rindex(":")].rindex(":")]
    elif star or minus:
        parts, sub = 7, pattern[: pattern.rindex(":")]
    else:
        parts, sub = 8, pattern
    head = expand_ipv6(sub, parts)
    field_index = len(_split(head, ":"))
    low, high = bounds

    def matches(address: str) -> bool:
        if not is_ipv6(address):
            return False
        expanded = expand_ipv6(address)
        if not expanded.startswith(head):
            return False
        value = expanded[5 * field_index : 5 * field_index + 4]
        return low <= int(value, 16) <= high

    return matches
