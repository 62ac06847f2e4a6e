"""Our mqadmin as a process against a target, whatever its outcome, for the tests that run it
beside RocketMQ's tool (interop/mqadmin.py runs that one).

    done = ours_run(target, "topicList")                      # a CompletedProcess
    out = mqadmin(target, "topicList")                        # stdout; must exit 0
    stderr = ours_failing(target, "queryMsgById", "-i", "X")  # must exit 1
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from interop.target import ClusterTarget


def ours_run(
    target: ClusterTarget, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Our tool, whatever its outcome; `env` adds to this process's environment
    (ROCKETMQ_HOME for conf/tools.yml)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sidewinder.client.cli",
            args[0],
            "-n",
            target.namesrv_addr,
            *args[1:],
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env} if env else None,
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
