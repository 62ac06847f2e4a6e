"""Users-file lines and Basic credentials for the console's login tests."""

from __future__ import annotations

import base64
import subprocess
import sys


def user_line(name: str, role: str, password: str) -> str:
    """A users-file line as `mqconsole --hash-password` prints it."""
    answer = subprocess.run(
        [sys.executable, "-m", "sidewinder.console", "--hash-password", name, role],
        input=password + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return answer.stdout.strip()


def basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def refused_start(*options: str) -> str:
    """What mqconsole says on stderr when it will not start with `options` (exit 2)."""
    answer = subprocess.run(
        [sys.executable, "-m", "sidewinder.console", *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 2, answer.stdout + answer.stderr
    return answer.stderr
