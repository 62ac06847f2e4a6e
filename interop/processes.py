"""Child processes the bench starts: waiting for readiness, stopping by pid (their ports come
from interop/ports.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# interop/fixtures.py still imports the old name: its text is part of the golden fixtures'
# digest, so editing it would regenerate them; it moves to interop.ports with their next change.
from interop.ports import lease_port_block as free_port_block  # noqa: F401


class StartupError(RuntimeError):
    """A server did not come up; the message carries the tail of its logs."""


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no {path.name})"
    return "\n".join(text.splitlines()[-lines:])


def can_connect(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


@dataclass
class ManagedProcess:
    """One child process whose stdout and stderr go to `out_path`."""

    name: str
    cmd: list[str]
    out_path: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    log_paths: list[Path] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def diagnostics(self, lines: int = 40) -> str:
        parts = [f"--- {self.out_path}\n{tail(self.out_path, lines)}"]
        parts += [f"--- {p}\n{tail(p, lines)}" for p in self.log_paths]
        return "\n".join(parts)

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise StartupError(
                    f"{self.name} exited with {code} during startup\n{self.diagnostics()}"
                )
            if ready():
                return
            time.sleep(0.1)
        self.kill()
        raise StartupError(f"{self.name} not ready after {timeout_s:.0f} s\n{self.diagnostics()}")

    def output_contains(self, needle: str) -> bool:
        try:
            return needle in self.out_path.read_text(errors="replace")
        except OSError:
            return False

    def signal(self, sig: int) -> None:
        if self.alive() and self.proc is not None:
            # The process leads its own session, so this reaches any child it started too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit status."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL at once (crash tests) and reap."""
        if self.proc is None:
            return None
        self.signal(signal.SIGKILL)
        return self.proc.wait(30)


def start_until_banner(
    process: ManagedProcess, port: int, timeout_s: float, banner: bytes = b"boot success"
) -> None:
    """Start (or restart) `process` and wait until it prints `banner` anew and `port` accepts."""
    out = process.out_path
    marker = out.stat().st_size if out.exists() else 0

    def booted() -> bool:
        with open(out, "rb") as stream:
            stream.seek(marker)
            return banner in stream.read()

    process.start()
    process.wait_ready(lambda: booted() and can_connect("127.0.0.1", port), timeout_s)
