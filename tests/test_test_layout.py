"""The test suite's own layout: what tests share lives in helper modules, never in a test module.

A test module imported by another runs its module-level code (fixtures, marks, parametrization)
in a second place, ties the two files' refactors together, and hides the shared code where
nobody looks for it. Shared code goes to tests/helpers.py, a helper module of its directory
(any name but test_*), or a conftest.py for fixtures.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Child programs the tests write as strings import too: `from tests.x.test_y import z`.
IMPORT_IN_TEXT = re.compile(r"^\s*(?:from|import)\s+(tests(?:\.\w+)*)", re.MULTILINE)


def is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(path: Path, root: Path = ROOT) -> list[str]:
    """The test_* modules `path` (under `root`) imports, in code or in program text it holds."""
    package = ".".join(path.relative_to(root).parent.parts)
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(filter(None, [*parent, base]))
            if is_test_module(base):
                found.append(base)
            # `from tests.x import test_y` names a module too.
            found += [f"{base}.{a.name}" for a in node.names if a.name.startswith("test_")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [m for m in IMPORT_IN_TEXT.findall(node.value) if is_test_module(m)]
    return found


def test_no_test_module_imports_another() -> None:
    offences = []
    for path in sorted(TESTS.rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if path == Path(__file__).resolve():  # its samples offend
            continue
        offences += [f"{relative} imports {name}" for name in imported_test_modules(path)]
    assert not offences, "\n".join(offences)


def test_the_check_sees_every_form(tmp_path: Path) -> None:
    package = tmp_path / "tests" / "store"
    package.mkdir(parents=True)
    sample = package / "test_sample.py"
    sample.write_text(
        "from tests.store.test_a import x\n"
        "import tests.test_b\n"
        "from .test_c import y\n"
        "from tests.interop import test_d\n"
        "from tests.store.small_store import store_config\n"
        'CHILD = """\nfrom tests.store.test_e import z\n"""\n'
    )
    assert sorted(imported_test_modules(sample, tmp_path)) == [
        "tests.interop.test_d",
        "tests.store.test_a",
        "tests.store.test_c",
        "tests.store.test_e",
        "tests.test_b",
    ]
