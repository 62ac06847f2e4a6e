"""Our mqadmin as a process against a target, whatever its outcome, for the tests that run it
beside RocketMQ's tool (interop/mqadmin.py runs that one).

    done = ours_run(target, "topicList")                      # a CompletedProcess
    out = mqadmin(target, "topicList")                        # stdout; must exit 0
    stderr = ours_failing(target, "queryMsgById", "-i", "X")  # must exit 1
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from interop.target import ClusterTarget

REPO_ROOT = Path(__file__).parents[2]


@functools.cache
def scratch_dir() -> str:
    """This test process's working directory for the tool: consumerStatus writes its running-info
    dumps (<epoch ms>/<client id>) where it runs, as RocketMQ's does, and the checkout must stay
    clean. Removed when the process exits."""
    path = tempfile.mkdtemp(prefix="our-mqadmin-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _tool_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    """This environment with `extra`, and the checkout importable from any working directory."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def ours_run(
    target: ClusterTarget, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Our tool, whatever its outcome; `env` adds to this process's environment
    (ROCKETMQ_HOME for conf/tools.yml)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sidewinder.tools.mqadmin",
            args[0],
            "-n",
            target.namesrv_addr,
            *args[1:],
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_tool_env(env),
        cwd=scratch_dir(),
    )


def mqadmin(target: ClusterTarget, *args: str) -> str:
    """Our tool's stdout for a sub-command that must succeed."""
    done = ours_run(target, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def ours_failing(target: ClusterTarget, *args: str) -> str:
    """Our tool's stderr for a sub-command that must fail (exit 1)."""
    done = ours_run(target, *args)
    assert done.returncode == 1, done.stdout
    return done.stderr
