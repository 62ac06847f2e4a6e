"""`sidewinder-dev` (a name server and a broker in one process, with the web console when asked)
on leased ports, started and stopped around a block: for the install step's training runs, the
console's bench and the tests of sidewinder-dev itself.

    with dev_cluster(workdir, console=True) as dev:
        print(dev.namesrv_addr, dev.broker_addr, dev.console_url)
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from interop.ports import lease_port_block
from interop.processes import StartupError


@dataclass(frozen=True)
class DevCluster:
    process: subprocess.Popen[bytes]
    namesrv_addr: str
    broker_addr: str
    console_url: str | None  # http://127.0.0.1:P/ when started with the console
    log_path: Path  # its stdout and stderr

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def dev_cluster(
    workdir: Path, *, console: bool = False, within_s: float = 60
) -> Iterator[DevCluster]:
    """sidewinder-dev with its store in `workdir`, no metrics and no gRPC front; StartupError
    (with the output's tail) when it exits or prints no boot banner within `within_s`. Stopped
    with SIGTERM at the end of the block, unless the block stopped it."""
    namesrv_port, broker_port = lease_port_block(), lease_port_block((-2, 0, 1))
    console_port = lease_port_block() if console else None
    log_path = workdir / "sidewinder-dev.out"
    command = [
        sys.executable, "-m", "sidewinder.dev", "--store", str(workdir / "store"),
        "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
        "--no-metrics", "--no-grpc",
        *(["--console-port", str(console_port)] if console_port else ["--no-console"]),
    ]  # fmt: skip
    with log_path.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    dev = DevCluster(
        process,
        f"127.0.0.1:{namesrv_port}",
        f"127.0.0.1:{broker_port}",
        f"http://127.0.0.1:{console_port}/" if console_port else None,
        log_path,
    )
    try:
        deadline = time.monotonic() + within_s
        while "boot success" not in dev.output():
            if process.poll() is not None or time.monotonic() > deadline:
                raise StartupError(f"sidewinder-dev did not start:\n{dev.output()[-3000:]}")
            time.sleep(0.1)
        yield dev
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
