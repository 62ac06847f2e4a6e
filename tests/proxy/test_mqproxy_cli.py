"""mqproxy's command line: what it refuses before it starts, each with a line that says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _mqproxy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidewinder.proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize(
    ("conf", "says"),
    [
        ("aclEnable=true\n", "aclEnable needs rocketmqHome or ROCKETMQ_HOME"),
        ("aclEnable=true\nrocketmqHome={home}\n", "secretKey=null"),  # RocketMQ's words
        ("tls.server.mode=sometimes\n", "tls.server.mode"),
    ],
)
def test_a_config_it_cannot_run_with_exits_2_naming_the_problem(
    tmp_path: Path, conf: str, says: str
) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts: [{accessKey: onlyAKey}]\n")
    path = tmp_path / "proxy.conf"
    path.write_text(conf.format(home=home))
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    done = _mqproxy("-n", "127.0.0.1:1", "--grpcServerPort", "0", "-c", str(path), env=env)
    assert done.returncode == 2, done
    assert says in done.stderr, done.stderr


def test_no_name_server_is_a_usage_error() -> None:
    done = _mqproxy("-n", " ; ")
    assert done.returncode == 2 and "no name server" in done.stderr, done
