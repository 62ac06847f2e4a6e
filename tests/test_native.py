"""The Rust extension (native/ -> sidewinder._native), its loader and its one table of
references, sidewinder.common.native.

The test command installs the project, which builds the extension: its absence is a failure
here, not a skip. The functions themselves are compared with their Python references beside the
tests of those (tests/protocol, tests/store, tests/broker). Here: every export has a reference,
every call site goes through the table, and each leg binds what it says everywhere, checked
in fresh processes that import every module of the package (this file, run as a script).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sidewinder
from sidewinder.common import native

PACKAGE = Path(sidewinder.__file__).resolve().parent
# What the rest of the package may take from common/native.py: the table's two doors.
SITE_NAMES = {"implementation", "is_native"}


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


def extension_exports() -> dict[str, object]:
    """The public functions and classes of the extension (not API_VERSION and other constants),
    imported directly whatever SIDEWINDER_NATIVE says; empty when it is not built."""
    try:
        module = importlib.import_module("sidewinder._native")
    except ImportError:
        return {}
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_") and not name.isupper() and callable(value)
    }


def resolve(where: str) -> object:
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)


def test_every_export_of_the_extension_has_a_reference() -> None:
    exports = extension_exports()
    assert exports, "sidewinder._native is not built: reinstall the project"
    assert set(exports) == set(native.REFERENCES)


@pytest.mark.parametrize("name", sorted(native.REFERENCES))
def test_every_reference_resolves_and_its_call_site_uses_the_table(name: str) -> None:
    where = native.REFERENCES[name]
    module = importlib.import_module(where.python.split(":")[0])
    assert hasattr(module, where.site)
    assert native._bound[name].python is resolve(where.python)


def test_only_the_table_reaches_the_extension() -> None:
    """No module binds the extension itself: each goes through implementation()."""
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "common" / "native.py":
            continue
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name.startswith("sidewinder._native")]
            elif isinstance(node, ast.ImportFrom) and node.module == "sidewinder.common.native":
                bad = [a.name for a in node.names if a.name not in SITE_NAMES]
            elif isinstance(node, ast.ImportFrom) and (node.level or node.module == "sidewinder"):
                bad = [a.name for a in node.names if a.name == "_native"]
            elif isinstance(node, ast.Attribute) and node.attr == "NATIVE":
                bad = [node.attr]
            else:
                continue
            offences += [f"{where}:{node.lineno} uses {name}" for name in bad]
    assert not offences, "\n".join(offences)


def _every_module() -> list[types.ModuleType]:
    for info in pkgutil.walk_packages(sidewinder.__path__, "sidewinder."):
        if info.name.endswith(("__main__", "._native")):
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("sidewinder"):
                raise
            # An optional extra that is not installed (pyspark): nothing there runs anyway.
    return [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith("sidewinder.") and not name.endswith("._native")
    ]


def _names(module: types.ModuleType) -> list[tuple[str, object]]:
    """(where, value) of a module's globals and of the attributes of the classes it defines."""
    found = [(f"{module.__name__}.{name}", value) for name, value in vars(module).items()]
    for name, cls in list(vars(module).items()):
        if isinstance(cls, type) and cls.__module__ == module.__name__:
            found += [(f"{module.__name__}.{name}.{a}", v) for a, v in vars(cls).items()]
    return found


def _unwrapped(value: object) -> object:
    try:
        return inspect.unwrap(value)  # type: ignore[arg-type]
    except Exception:  # whatever a module holds: a proxy may raise on __wrapped__
        return value


def leg_offences(leg: native.Leg, modules: list[types.ModuleType]) -> list[str]:
    """Where the package does not bind what leg `leg` says: each call site must hold the
    reference ("python") or the extension's export ("native"), no module may hold an export
    in the python leg, nor a reference under another name (a copy not rebound) in the native."""
    offences = []
    exports = extension_exports()
    for name, where in native.REFERENCES.items():
        module = importlib.import_module(where.python.split(":")[0])
        site = getattr(module, where.site)
        if leg == "python" and site is not resolve(where.python):
            offences.append(f"{module.__name__}.{where.site} is {site!r}, not {where.python}")
        if leg == "native" and _unwrapped(site) is not exports[name]:
            offences.append(f"{module.__name__}.{where.site} is {site!r}, not the extension's")
    export_names = {id(value): name for name, value in exports.items()}
    # A reference may be held under its own name (code that means to call it, the tests).
    reference_names = {
        id(resolve(w.python)): w.python.split(":")[1] for w in native.REFERENCES.values()
    }
    for module in modules:
        for where, value in _names(module):
            export = export_names.get(id(_unwrapped(value)))
            if leg == "python" and export is not None:
                offences.append(f"{where} is the extension's {export}")
            own_name = reference_names.get(id(value))
            if leg == "native" and own_name not in (None, where.rsplit(".", 1)[1]):
                offences.append(f"{where} is the reference {own_name} in the native leg")
    return offences


def check_legs(steps: list[str]) -> list[str]:
    """Run in a fresh process: import every module, then for each step ("python", "native",
    or "use:<leg>" to switch) the offences found."""
    modules = _every_module()
    offences = []
    for step in steps:
        if step.startswith("use:"):
            native.use(step.removeprefix("use:"))  # type: ignore[arg-type]
        else:
            offences += [f"{step} leg: {o}" for o in leg_offences(step, modules)]  # type: ignore[arg-type]
    return offences


def run_check(setting: str, *steps: str) -> list[str]:
    env = {**os.environ, native.ENV: setting}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, __file__, *steps], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_without_the_extension_every_call_site_is_the_python_reference() -> None:
    assert run_check("0", "python") == []


def test_with_the_extension_every_call_site_is_native_and_switches_as_one() -> None:
    assert extension_exports(), "sidewinder._native is not built: reinstall the project"
    assert run_check("1", "native", "use:python", "python", "use:native", "native") == []


def test_the_native_leg_cannot_be_chosen_without_the_extension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "NATIVE", None)
    with pytest.raises(RuntimeError, match="not loaded"):
        native.use("native")


if __name__ == "__main__":
    print(json.dumps(check_legs(sys.argv[1:])))
