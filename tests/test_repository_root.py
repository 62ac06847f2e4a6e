"""The repository's top level holds only what a newcomer should see there, tracked or not.

A test or tool that writes into the checkout (consumerStatus's <epoch ms>/ dumps, a store left by
a broker run from the root) fails here, whether or not anyone commits the leftovers. What a
build or a run makes on purpose (.venv, store, caches) is ignored by .gitignore, and ignored
entries are allowed. Documents carry no issue numbers: the history lives in CHANGELOG.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every entry the top level may hold, tracked or untracked-but-not-ignored.
ALLOWED_AT_ROOT = {
    ".ci",
    ".dockerignore",
    ".gitignore",
    "CHANGELOG.md",
    "Dockerfile",
    "LICENSE",
    "MANIFEST.in",
    "NOTICE",
    "README.md",
    "conf",
    "docker-compose.yml",
    "docs",
    "interop",
    "native",
    "pyproject.toml",
    "pyspark_rocketmq.py",
    "pyspark_rocketmq_commitlog.py",
    "scripts",
    "sidewinder",
    "tests",
}

# "issue 12", "issues 3 and 4", "#12", "(#12)": how an issue number reads in prose.
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    return done.stdout


@pytest.fixture(scope="module")
def checkout() -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a copy): nothing to check")
    return ROOT


def _top_level(paths: str) -> set[str]:
    """The first component of each NUL-separated path."""
    return {p.split("/", 1)[0] for p in paths.split("\0") if p}


def test_tracked_top_level_is_allowed(checkout: Path) -> None:
    tracked = _top_level(_git("ls-files", "-z"))
    assert tracked <= ALLOWED_AT_ROOT, f"tracked at the root: {sorted(tracked - ALLOWED_AT_ROOT)}"


def test_untracked_top_level_is_ignored_or_allowed(checkout: Path) -> None:
    """What a test, a tool or a run left in the working tree, minus what .gitignore ignores."""
    untracked = _top_level(_git("ls-files", "-z", "--others", "--exclude-standard"))
    stray = sorted(untracked - ALLOWED_AT_ROOT)
    assert not stray, (
        f"left at the root and not ignored: {stray}; a test or tool wrote into the checkout "
        "(give it a temp directory as its working directory), or .gitignore misses a build output"
    )


def test_license_and_notice_are_present(checkout: Path) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert "Sidewinder" in (ROOT / "NOTICE").read_text()


def test_documents_carry_no_issue_numbers(checkout: Path) -> None:
    documents = [ROOT / p for p in _git("ls-files", "-z", "--", "*.md").split("\0") if p]
    assert ROOT / "README.md" in documents
    found = {
        f"{path.relative_to(ROOT)}:{n}": line.strip()
        for path in documents
        if path.exists()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    }
    assert not found, found
