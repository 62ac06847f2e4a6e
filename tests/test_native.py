"""The Rust extension (native/ -> sidewinder._native) and its loader, sidewinder.common.native.

The test command installs the project, which builds the extension: its absence is a failure
here, not a skip. The functions themselves are compared with their Python references beside the
tests of those (tests/protocol).
"""

from __future__ import annotations

import importlib
import os
import types

import pytest

from sidewinder.common import native


def test_the_installed_project_has_the_extension() -> None:
    module = importlib.import_module("sidewinder._native")
    assert module.API_VERSION == native.API_VERSION, "a stale build: reinstall the project"
    if os.environ.get(native.ENV) != "0":
        assert native.NATIVE is module


def test_zero_forces_the_python_reference() -> None:
    assert native.load("0") is None


def test_one_insists_on_the_extension() -> None:
    assert native.load("1") is importlib.import_module("sidewinder._native")


def test_a_stale_build_is_ignored_with_a_warning_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stale = types.ModuleType("sidewinder._native")
    stale.API_VERSION = native.API_VERSION + 1  # type: ignore[attr-defined]
    monkeypatch.setattr(native.importlib, "import_module", lambda name: stale)
    with pytest.warns(RuntimeWarning, match="stale"):
        assert native.load("") is None
    with pytest.raises(ImportError, match="stale"):
        native.load("1")


def test_a_missing_build_falls_back_unless_insisted_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> types.ModuleType:
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(native.importlib, "import_module", missing)
    assert native.load("") is None
    with pytest.raises(ImportError):
        native.load("1")
