"""`python -m interop.rocketmq`, the by-hand RocketMQ: SIGTERM (as from `kill`, a supervisor or a
closed session) stops both of its JVMs, started or still starting, as Ctrl-C does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from interop.cache import REPO_ROOT

pytestmark = pytest.mark.interop


def processes_naming(text: str, *, besides: int) -> set[int]:
    """Live processes whose command line mentions `text` (the JVMs carry their workdir's conf
    paths), other than pid `besides`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == besides:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if text.encode() in cmdline and state != "Z":
            found.add(int(entry.name))
    return found


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out after {seconds} s waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`python -m interop.rocketmq --workdir W` running; whatever it leaves behind is killed."""
    workdir = tmp_path / "rocketmq"
    out = tmp_path / "bench.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "interop.rocketmq", "--workdir", str(workdir)],
            cwd=REPO_ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc, workdir
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in processes_naming(str(workdir), besides=proc.pid):
            os.kill(pid, signal.SIGKILL)  # a JVM the bench failed to stop


def test_sigterm_stops_both_jvms(bench: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, workdir = bench
    out = workdir.parent / "bench.out"
    wait_for(lambda: b"broker 127.0.0.1:" in out.read_bytes(), 120, "the cluster's banner")
    jvms = processes_naming(str(workdir), besides=proc.pid)
    assert len(jvms) == 2, out.read_text()

    proc.send_signal(signal.SIGTERM)
    code = proc.wait(90)
    assert processes_naming(str(workdir), besides=proc.pid) == set()
    assert code == 0, out.read_text()


def test_sigterm_while_the_broker_starts_stops_both_jvms(
    bench: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, workdir = bench
    # The broker's output file is opened just before its JVM starts: the name server is up.
    wait_for(lambda: (workdir / "broker.out").exists(), 120, "the broker's start")
    wait_for(lambda: len(processes_naming(str(workdir), besides=proc.pid)) == 2, 30, "two JVMs")

    proc.send_signal(signal.SIGTERM)
    code = proc.wait(90)
    assert processes_naming(str(workdir), besides=proc.pid) == set()
    assert code == 0
