"""Run RocketMQ's own mqadmin (`MQAdminStartup` from rocketmq-tools 4.9.8) against a name server.

out = mqadmin(target.namesrv_addr, "updateTopic", "-c", "DefaultCluster", "-t", "T1")
out = mqadmin(target.namesrv_addr, "consumerProgress", "-g", "G1")
"""

from __future__ import annotations

import atexit
import json
import os
import re
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from interop.cache import BenchCache, bench_cache
from interop.jvm import java_command, java_env

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
# MQADMIN_MAIN, then an exit as soon as the sub-command is done (interop/java): 3 s less a call.
MQADMIN_THEN_EXIT = "MQAdminThenExit"
# MQADMIN_MAIN for one sub-command after another in one JVM (interop/java).
MQADMIN_SERVER = "MQAdminServer"


@dataclass(frozen=True)
class MQAdminResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class MQAdminError(RuntimeError):
    pass


def mqadmin(
    namesrv_addr: str,
    command: str,
    *args: str,
    timeout_s: float = 60.0,
    workdir: Path | None = None,
    cache: BenchCache | None = None,
    check: bool = True,
) -> MQAdminResult:
    """Run one mqadmin sub-command with `-n namesrv_addr`: in this process's mqadmin JVM, or with
    `workdir` (a rocketmq home of its own, for tools.yml) in a JVM of its own.

    mqadmin exits 0 on many failures and prints the Java exception instead, so with `check` an
    exception trace in the output is an error as well as a non-zero exit.
    """
    cache = cache or bench_cache()
    argv = [command, "-n", namesrv_addr, *args]
    result = _run(cache, argv, timeout_s, workdir)
    if command in RETRIED_ON_TIMEOUT and TOOL_TIMEOUT in result.output:
        # The tool gives a broker 3 s; on a loaded 2-core machine a RocketMQ broker has been
        # seen to answer an ACL change later than that. These commands may simply run again.
        result = _run(cache, argv, timeout_s, workdir)
    if check and (result.returncode != 0 or "Exception:" in result.output):
        raise MQAdminError(
            f"mqadmin {' '.join(argv)} failed ({result.returncode}):\n{result.output[-3000:]}"
        )
    return result


# Sub-commands that set a state (run twice, they leave what running once leaves), and what
# the tool prints when a broker did not answer within its fixed timeout.
RETRIED_ON_TIMEOUT = frozenset(
    {"updateAclConfig", "deleteAclConfig", "updateGlobalWhiteAddr", "clusterAclConfigVersion"}
)
TOOL_TIMEOUT = "RemotingTimeoutException"


def _run(
    cache: BenchCache, argv: list[str], timeout_s: float, workdir: Path | None
) -> MQAdminResult:
    if workdir is None:
        returncode, stdout, stderr = _run_in_server(cache, argv, timeout_s)
    else:
        classpath = f"{cache.java_driver_classes}:{cache.classpath('client')}"
        cmd = java_command(workdir, classpath, MQADMIN_THEN_EXIT, argv, heap_mb=256)
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=java_env(workdir),
            cwd=workdir,
            check=False,
        )
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    return MQAdminResult(tuple(argv), returncode, stdout, stderr)


class _AdminServer:
    """One MQAdminServer JVM: sub-commands in turn, each answered with its status and outputs."""

    def __init__(self, cache: BenchCache) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="mqadmin-server-"))
        classpath = f"{cache.java_driver_classes}:{cache.classpath('client')}"
        props = {"java.security.manager": "allow"}  # the server traps System.exit with one
        cmd = java_command(
            self.workdir, classpath, MQADMIN_SERVER, [], heap_mb=256, extra_props=props
        )
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=java_env(self.workdir),
            cwd=self.workdir,
        )
        self.pending = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, argv: list[str], timeout_s: float) -> tuple[int, str, str]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(argv).encode() + b"\n")
            self.proc.stdin.flush()
            deadline = time.monotonic() + timeout_s
            header = self._read_until(b"\n", deadline)
            status, out_len, err_len = (int(f) for f in header[1:].split())
            out = self._read_exactly(out_len, deadline)
            err = self._read_exactly(err_len, deadline)
        except BaseException:
            self.close()
            raise
        return status, out.decode(errors="replace"), err.decode(errors="replace")

    def _fill(self, deadline: float) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise subprocess.TimeoutExpired(MQADMIN_SERVER, left)
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise MQAdminError(f"the mqadmin JVM ended ({self.proc.poll()})")
        self.pending += chunk

    def _read_until(self, end: bytes, deadline: float) -> bytes:
        while end not in self.pending:
            self._fill(deadline)
        line, _, self.pending = self.pending.partition(end)
        return line

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        while len(self.pending) < size:
            self._fill(deadline)
        data, self.pending = self.pending[:size], self.pending[size:]
        return data

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


_servers: dict[Path, _AdminServer] = {}
_servers_lock = threading.Lock()


def _run_in_server(cache: BenchCache, argv: list[str], timeout_s: float) -> tuple[int, str, str]:
    """One sub-command in this process's mqadmin JVM for `cache`, started (or restarted, if it
    died or timed out) on demand; calls from several threads take turns."""
    with _servers_lock:
        server = _servers.get(cache.root)
        if server is None or not server.alive():
            server = _servers[cache.root] = _AdminServer(cache)
        return server.run(argv, timeout_s)


@atexit.register
def _close_servers() -> None:
    for server in _servers.values():
        server.close()


def mqadmin_commands(cache: BenchCache | None = None, timeout_s: float = 60.0) -> list[str]:
    """The sub-commands RocketMQ's mqadmin lists when run without arguments, in its order."""
    cache = cache or bench_cache()
    with tempfile.TemporaryDirectory(prefix="mqadmin-") as scratch:
        workdir = Path(scratch)
        classpath = f"{cache.java_driver_classes}:{cache.classpath('client')}"
        cmd = java_command(workdir, classpath, MQADMIN_THEN_EXIT, [], heap_mb=256)
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=java_env(workdir),
            cwd=workdir,
            check=False,
        )
    if "The most commonly used mqadmin commands are:" not in proc.stdout:
        raise MQAdminError(
            f"mqadmin printed no command list:\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return re.findall(r"^   (\w+)\s", proc.stdout, re.MULTILINE)


def mqadmin_until(
    namesrv_addr: str,
    pattern: str,
    command: str,
    *args: str,
    timeout_s: float = 60.0,
    cache: BenchCache | None = None,
) -> MQAdminResult:
    """Run a sub-command that never ends by itself (clusterRT prints a round, sleeps, prints
    another...) until a line of its output matches `pattern`, then stop it. MQAdminError if no
    line did within `timeout_s` or it ended first; the result holds the output up to that line.
    """
    cache = cache or bench_cache()
    argv = [command, "-n", namesrv_addr, *args]
    with tempfile.TemporaryDirectory(prefix="mqadmin-") as scratch:
        workdir = Path(scratch)
        classpath = f"{cache.java_driver_classes}:{cache.classpath('client')}"
        cmd = java_command(workdir, classpath, MQADMIN_THEN_EXIT, argv, heap_mb=256)
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=java_env(workdir),
            cwd=workdir,
        )
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if re.search(pattern, line):
                    break
            else:
                raise MQAdminError(
                    f"mqadmin {' '.join(argv)} printed no line matching {pattern!r}:\n"
                    + "".join(lines)[-3000:]
                )
        finally:
            timer.cancel()
            proc.kill()
            proc.wait()
    return MQAdminResult(tuple(argv), 0, "".join(lines), "")


def create_topic(
    namesrv_addr: str,
    topic: str,
    *,
    cluster: str = "DefaultCluster",
    queues: int = 4,
    order: bool = False,
    **kw: object,
) -> MQAdminResult:
    """`updateTopic` on every broker of the cluster, with `queues` read and write queues."""
    args = ["-c", cluster, "-t", topic, "-r", str(queues), "-w", str(queues)]
    if order:
        args += ["-o", "true"]
    return mqadmin(namesrv_addr, "updateTopic", *args, **kw)  # type: ignore[arg-type]
