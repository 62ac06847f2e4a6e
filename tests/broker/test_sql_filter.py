"""SQL92 filters: RocketMQ's documented subset, unknowns false, malformed input named."""

from __future__ import annotations

import pytest

from sidewinder.broker.sql_filter import SqlFilterError, compile_sql

PROPS = {"a": "1", "b": "7", "color": "red", "flag": "true", "name": "o'neil"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a = '1'", True),
        ("a = 1", True),
        ("a <> 1", False),
        ("b > 5 AND b < 10", True),
        ("b >= 7 and b <= 7", True),
        ("b BETWEEN 1 AND 6", False),
        ("b NOT BETWEEN 1 AND 6", True),
        ("color IN ('red', 'blue')", True),
        ("color NOT IN ('red', 'blue')", False),
        ("missing IS NULL", True),
        ("a IS NOT NULL", True),
        ("missing = 1", False),
        ("NOT (missing = 1)", True),
        ("color > 3", False),  # not a number: unknown, so false
        ("flag = TRUE", True),
        ("name = 'o''neil'", True),
        ("(a = 2 OR b = 7) AND NOT color = 'blue'", True),
        ("TRUE", True),
        ("a = -1", False),
        ("b > 6.5", True),
    ],
)
def test_expressions(expression: str, expected: bool) -> None:
    assert compile_sql(expression)(PROPS) is expected


@pytest.mark.parametrize("bad", ["", "a =", "a = 'open", "a == 1", "(a = 1", "a IN 1", "a ~ 2"])
def test_malformed_expressions_raise_one_error(bad: str) -> None:
    with pytest.raises(SqlFilterError):
        compile_sql(bad)
