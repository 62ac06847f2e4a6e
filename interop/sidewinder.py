"""Sidewinder's own daemons as bench processes: started on free 127.0.0.1 ports, stopped by pid.

namesrv = SidewinderNamesrv(workdir).start()     # python -m sidewinder.namesrv -c conf
... namesrv.addr ...
namesrv.stop()                                   # SIGTERM, then the exit code
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from interop.processes import ManagedProcess, can_connect, free_port_block
from interop.rocketmq import write_properties

REPO_ROOT = Path(__file__).resolve().parent.parent


def python_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["HOME"] = str(workdir)  # defaults under ~ (kvConfig, store) stay in the test's dir
    env.setdefault("SIDEWINDER_LOG_LEVEL", "INFO")
    return env


class SidewinderNamesrv:
    def __init__(
        self, workdir: Path, conf: dict[str, Any] | None = None, startup_timeout_s: float = 30.0
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = int((conf or {}).get("listenPort") or free_port_block())
        values = {
            "listenPort": self.port,
            "kvConfigPath": self.workdir / "namesrv" / "kvConfig.json",
            **(conf or {}),
        }
        write_properties(self.workdir / "namesrv.conf", values)
        self.startup_timeout_s = startup_timeout_s
        self.process = ManagedProcess(
            "sidewinder name server",
            [sys.executable, "-m", "sidewinder.namesrv", "-c", str(self.workdir / "namesrv.conf")],
            self.workdir / "namesrv.out",
            env=python_env(self.workdir),
            cwd=self.workdir,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SidewinderNamesrv:
        self.process.start()
        self.process.wait_ready(
            lambda: (
                self.process.output_contains("boot success") and can_connect("127.0.0.1", self.port)
            ),
            self.startup_timeout_s,
        )
        return self

    def stop(self, timeout_s: float = 15.0) -> int | None:
        return self.process.stop(timeout_s)

    def kill(self) -> int | None:
        return self.process.kill()
