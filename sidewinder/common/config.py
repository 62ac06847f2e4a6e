"""Shared by every config section: camelCase keys from attribute names, and errors naming keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key and the value."""


def camel(name: str, aliases: Mapping[str, str] | None = None) -> str:
    """broker.conf's spelling of an attribute: camelCase, or RocketMQ's own where it differs."""
    if aliases and name in aliases:
        return aliases[name]
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def from_properties(model: type[M], values: Mapping[str, Any], file_label: str) -> M:
    """Validate a flat key=value mapping into `model`; errors name each bad key and value."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            field = model.model_fields.get(name)
            key = field.alias if field is not None and field.alias else name
            problems.append(f"{key}={values.get(key, err.get('input'))!r}: {err['msg']}")
        raise ConfigError(f"bad setting(s) in {file_label}: " + "; ".join(problems)) from None
