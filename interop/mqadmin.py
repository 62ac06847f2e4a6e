"""Run RocketMQ's own mqadmin (`MQAdminStartup` from rocketmq-tools 4.9.8) against a name server.

out = mqadmin(target.namesrv_addr, "updateTopic", "-c", "DefaultCluster", "-t", "T1")
out = mqadmin(target.namesrv_addr, "consumerProgress", "-g", "G1")
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from interop.cache import BenchCache, bench_cache
from interop.jvm import java_command, java_env

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
# MQADMIN_MAIN, then an exit as soon as the sub-command is done (interop/java): 3 s less a call.
MQADMIN_THEN_EXIT = "MQAdminThenExit"


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
    """Run one mqadmin sub-command with `-n namesrv_addr`.

    mqadmin exits 0 on many failures and prints the Java exception instead, so with `check` an
    exception trace in the output is an error as well as a non-zero exit.
    """
    cache = cache or bench_cache()
    argv = [command, "-n", namesrv_addr, *args]
    with contextlib.ExitStack() as scratch:
        if workdir is None:
            workdir = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="mqadmin-")))
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
    result = MQAdminResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
    if check and (proc.returncode != 0 or "Exception:" in result.output):
        raise MQAdminError(
            f"mqadmin {' '.join(argv)} failed ({proc.returncode}):\n{result.output[-3000:]}"
        )
    return result


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
