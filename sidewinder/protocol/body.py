"""Remoting bodies as RocketMQ's fastjson writes and reads them.

fastjson writes map keys that are integers without quotes (`"brokerAddrs":{0:"host:port"}`),
which 4.x clients before 4.9.4 expect in routes; standard JSON is `{"0":...}`. `dumps` writes
either; `loads` reads both. Objects are written with their fields in alphabetical order, as
fastjson does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError

_STRING = json.JSONEncoder(ensure_ascii=False).encode
# A bare integer key right after `{` or `,`, outside string literals.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


class ObjectKey:
    """A map key that is an object (fastjson writes `{{"topic":"T","queueId":0}:...}`)."""

    __slots__ = ("fields",)

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.fields.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and other.fields == self.fields


def dumps(value: Any, *, fastjson: bool = True, sort_keys: bool = True) -> str:
    """JSON text; with `fastjson`, integer dict keys come out unquoted."""
    parts: list[str] = []
    _write(value, parts, fastjson, sort_keys)
    return "".join(parts)


def _write(value: Any, out: list[str], fastjson: bool, sort_keys: bool) -> None:
    if isinstance(value, dict):
        out.append("{")
        items = list(value.items())
        if sort_keys and all(isinstance(k, str) for k in value):
            items.sort()
        for n, (key, item) in enumerate(items):
            if n:
                out.append(",")
            if isinstance(key, ObjectKey):
                _write(key.fields, out, fastjson, sort_keys)
            elif isinstance(key, bool) or not isinstance(key, int):
                out.append(_STRING(str(key)))
            else:
                out.append(str(key) if fastjson else f'"{key}"')
            out.append(":")
            _write(item, out, fastjson, sort_keys)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        out.append("[")
        for n, item in enumerate(value):
            if n:
                out.append(",")
            _write(item, out, fastjson, sort_keys)
        out.append("]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def loads(text: str | bytes) -> Any:
    """Parse standard JSON or fastjson's form of it (BodyError, a ValueError, when it is
    neither: not UTF-8, not JSON, or nested deeper than the parser goes)."""
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError as exc:
            raise BodyError(f"not UTF-8: {exc}") from None

    def quote(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)
        return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'

    try:
        return json.loads(_TOKENS.sub(quote, text))
    except json.JSONDecodeError as exc:
        raise BodyError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise BodyError("not valid JSON: nested too deeply") from None


# What `request_object` checks a body against: a dict of field -> shape (a field absent or
# null passes; the field "*" stands for every field: a map's values), a list of one item
# shape, `int` (an integer, or a string of one, as fastjson reads into an int field) or `str`
# (anything but an object or array: fastjson writes it out).
Shape = dict[str, "Shape"] | list["Shape"] | type


def request_object(request: RemotingCommand, shape: Shape | None = None) -> dict[str, Any]:
    """The JSON object a request's body holds ({} without a body), checked against `shape`:
    BodyError naming the request code and the problem otherwise ("HEART_BEAT body is not
    valid JSON: ...", "LOCK_BATCH_MQ body field mqSet[0].queueId is not an integer: 'x'")."""
    name = _code_name(request.code)
    if not request.body:
        return {}
    try:
        value = loads(request.body_bytes)
    except BodyError as exc:
        raise BodyError(f"{name} body is {exc}") from None
    check_shape(value, shape or {}, f"{name} body")
    return value


def check_shape(value: Any, shape: Shape, what: str) -> None:
    """BodyError "<what> field a.b[2] is not an integer: 'x'" unless `value` is of `shape`."""
    problem = _shape_problem(value, shape, "")
    if problem is not None:
        raise BodyError(f"{what} {problem}")


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


def _shape_problem(value: Any, shape: Shape, at: str) -> str | None:
    """What makes `value` not of `shape`, or None."""
    where = f"field {at} " if at else ""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where}is not a JSON object"
        for key, item_shape in shape.items():
            items = value.items() if key == "*" else [(key, value.get(key))]
            for name, item in items:
                if item is not None:
                    problem = _shape_problem(item, item_shape, f"{at}.{name}" if at else str(name))
                    if problem is not None:
                        return problem
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where}is not a JSON array"
        for n, item in enumerate(value):
            problem = _shape_problem(item, shape[0], f"{at}[{n}]")
            if problem is not None:
                return problem
        return None
    if shape is int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            return f"{where}is not an integer: {value!r:.100}"
        if isinstance(value, str) and not _INTEGER.fullmatch(value.strip()):
            return f"{where}is not an integer: {value!r:.100}"
        return None
    if isinstance(value, dict | list):
        return f"{where}is not a string: {value!r:.100}"
    return None


_INTEGER = re.compile(r"[+-]?\d{1,19}")


def json_decoder() -> json.JSONDecoder:
    """A decoder for walking fastjson text piece by piece (maps keyed by objects)."""
    return json.JSONDecoder()


def object_keyed_pairs(data: bytes | str, field: str = "offsetTable") -> list[tuple[Any, Any]]:
    """The entries of map `field` whose keys are objects (fastjson's form of a Java map keyed by
    MessageQueue), as (key, value) pairs; [] when the map is absent."""
    text = data.decode() if isinstance(data, bytes) else data
    opening = f'"{field}":{{'
    start = text.find(opening)
    if start < 0:
        return []
    at = start + len(opening)
    decoder = json_decoder()
    pairs = []
    while text[at] != "}":
        key, at = decoder.raw_decode(text, at)
        at += 1  # the ':'
        value, at = decoder.raw_decode(text, at)
        pairs.append((key, value))
        if text[at] == ",":
            at += 1
    return pairs


_SCALARS = json.JSONDecoder()


def loads_keyed(text: str | bytes) -> Any:
    """Parse fastjson text whose maps may be keyed by objects (ConsumeStats' offsetTable, in
    whatever it is nested in): such keys come back as ObjectKeys, bare integer keys as ints."""
    if isinstance(text, bytes):
        text = text.decode()
    value, _ = _keyed_value(text, _skip_space(text, 0))
    return value


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _keyed_value(text: str, at: int) -> tuple[Any, int]:
    opening = text[at]
    if opening not in "{[":
        return _SCALARS.raw_decode(text, at)
    closing = "}" if opening == "{" else "]"
    items: list[Any] = []
    pairs: dict[Any, Any] = {}
    at = _skip_space(text, at + 1)
    while text[at] != closing:
        item, at = _keyed_value(text, at)
        at = _skip_space(text, at)
        if opening == "{":
            key = ObjectKey(**item) if isinstance(item, dict) else item
            pairs[key], at = _keyed_value(text, _skip_space(text, at + 1))  # past the ':'
            at = _skip_space(text, at)
        else:
            items.append(item)
        if text[at] == ",":
            at = _skip_space(text, at + 1)
    return (pairs if opening == "{" else items), at + 1
