"""SQL92 message filters (RocketMQ's ExpressionType.SQL92) over message properties.

    matches = compile_sql("a > 5 AND color IN ('red', 'blue') AND b IS NOT NULL")
    matches({"a": "7", "color": "red", "b": "x"})   # True

The subset RocketMQ documents: comparisons (= <> > >= < <=), BETWEEN, IN, IS [NOT] NULL, AND, OR,
NOT, parentheses; string literals in single quotes, numbers, TRUE/FALSE, NULL. A property that
is missing, or that does not parse as a number where a number is compared, makes its comparison
false (SQL's unknown), as in RocketMQ's evaluator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[dict[str, str]], bool]
_Value = Callable[[dict[str, str]], Any]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<op><>|>=|<=|=|>|<|\(|\)|,)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.%|-]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE"}


class SqlFilterError(ValueError):
    """An expression that does not parse; the message says where."""


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    at = 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise SqlFilterError(f"unexpected {text[at : at + 10]!r} at {at}")
        at = match.end()
        if match.group("num") is not None:
            raw = match.group("num")
            out.append(("value", float(raw) if "." in raw else int(raw)))
        elif match.group("str") is not None:
            out.append(("value", match.group("str")[1:-1].replace("''", "'")))
        elif match.group("op") is not None:
            out.append(("op", match.group("op")))
        else:
            word = match.group("word")
            upper = word.upper()
            if upper == "TRUE" or upper == "FALSE":
                out.append(("value", upper == "TRUE"))
            elif upper == "NULL":
                out.append(("null", None))
            elif upper in _KEYWORDS:
                out.append(("kw", upper))
            else:
                out.append(("name", word))
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _compare(op: str, left: Any, right: Any) -> bool:
    if left is None or right is None:
        return False
    if op in ("=", "<>") and isinstance(left, str) and isinstance(right, str):
        return (left == right) == (op == "=")
    if isinstance(left, bool) or isinstance(right, bool):
        lb = left if isinstance(left, bool) else str(left).lower() == "true"
        rb = right if isinstance(right, bool) else str(right).lower() == "true"
        return (lb == rb) == (op == "=") if op in ("=", "<>") else False
    a, b = _number(left), _number(right)
    if a is None or b is None:
        return False
    return {
        "=": a == b,
        "<>": a != b,
        ">": a > b,
        ">=": a >= b,
        "<": a < b,
        "<=": a <= b,
    }[op]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self, kind: str, value: Any = None) -> bool:
        if self.at >= len(self.tokens):
            return False
        k, v = self.tokens[self.at]
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: Any = None) -> Any:
        if not self.peek(kind, value):
            found = self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")
            raise SqlFilterError(f"expected {value or kind}, found {found[1]!r}")
        self.at += 1
        return self.tokens[self.at - 1][1]

    def parse(self) -> Predicate:
        predicate = self.or_()
        if self.at != len(self.tokens):
            raise SqlFilterError(f"unexpected {self.tokens[self.at][1]!r}")
        return predicate

    def or_(self) -> Predicate:
        left = self.and_()
        while self.peek("kw", "OR"):
            self.at += 1
            right = self.and_()
            left = (lambda a, b: lambda p: a(p) or b(p))(left, right)
        return left

    def and_(self) -> Predicate:
        left = self.not_()
        while self.peek("kw", "AND"):
            self.at += 1
            right = self.not_()
            left = (lambda a, b: lambda p: a(p) and b(p))(left, right)
        return left

    def not_(self) -> Predicate:
        if self.peek("kw", "NOT"):
            self.at += 1
            inner = self.not_()
            return lambda p: not inner(p)
        return self.condition()

    def operand(self) -> _Value:
        if self.peek("name"):
            name = self.take("name")
            return lambda p: p.get(name)
        if self.peek("value"):
            value = self.take("value")
            return lambda p: value
        if self.peek("null"):
            self.at += 1
            return lambda p: None
        raise SqlFilterError("expected a property name or a literal")

    def condition(self) -> Predicate:
        if self.peek("op", "("):
            self.at += 1
            inner = self.or_()
            self.take("op", ")")
            return inner
        if self.peek("value") and isinstance(self.tokens[self.at][1], bool) and not self._op_next():
            value = self.take("value")
            return lambda p: value
        left = self.operand()
        if self.peek("kw", "IS"):
            self.at += 1
            negate = self.peek("kw", "NOT")
            if negate:
                self.at += 1
            self.take("null")
            return (lambda p: left(p) is not None) if negate else (lambda p: left(p) is None)
        negate = self.peek("kw", "NOT")
        if negate:
            self.at += 1
        if self.peek("kw", "BETWEEN"):
            self.at += 1
            low = self.operand()
            self.take("kw", "AND")
            high = self.operand()

            def between(p: dict[str, str]) -> bool:
                value = left(p)
                inside = _compare(">=", value, low(p)) and _compare("<=", value, high(p))
                return (not inside) if negate and value is not None else inside

            return between
        if self.peek("kw", "IN"):
            self.at += 1
            self.take("op", "(")
            options = [self.take("value")]
            while self.peek("op", ","):
                self.at += 1
                options.append(self.take("value"))
            self.take("op", ")")
            choices = {str(o) for o in options}

            def within(p: dict[str, str]) -> bool:
                value = left(p)
                if value is None:
                    return False
                return (str(value) not in choices) if negate else (str(value) in choices)

            return within
        if negate:
            raise SqlFilterError("NOT must precede BETWEEN or IN here")
        op = self.take("op")
        if op not in ("=", "<>", ">", ">=", "<", "<="):
            raise SqlFilterError(f"{op!r} is not a comparison")
        right = self.operand()
        return lambda p: _compare(op, left(p), right(p))

    def _op_next(self) -> bool:
        nxt = self.tokens[self.at + 1] if self.at + 1 < len(self.tokens) else None
        return nxt is not None and (nxt[0] == "op" and nxt[1] not in ("(", ")", ","))


def compile_sql(expression: str) -> Predicate:
    """A predicate over message properties; SqlFilterError when the expression is malformed."""
    if not expression or not expression.strip():
        raise SqlFilterError("the expression is empty")
    return _Parser(expression).parse()
