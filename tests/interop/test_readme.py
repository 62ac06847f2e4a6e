"""The README's first message, as written, against every target: the `mqadmin` commands and the
Python example of its Quick start are read from README.md itself (so the page and this test
cannot drift apart) and run in fresh processes, with the target's address and fresh names in
place of the README's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from interop.cache import bench_cache
from interop.drivers import PYTHON5, driver_env
from interop.ports import lease_port_block
from interop.target import ClusterTarget, create_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.interop.our_mqadmin import ours_run
from tests.interop.pop_requests import create_topic_request

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
README_NAMESRV = "127.0.0.1:9876"
README_GRPC = "127.0.0.1:8081"


def quick_start_blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block of the README's Quick start section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w*)\n(.*?)^```", section, re.MULTILINE | re.DOTALL)


def fresh(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


def test_quick_start_mqadmin_commands(target: ClusterTarget) -> None:
    commands = [
        shlex.split(line.split("#", 1)[0])
        for language, code in quick_start_blocks()
        if language == "sh"
        for line in code.splitlines()
        if line.startswith(".venv/bin/mqadmin ")
    ]
    assert [c[1] for c in commands] == ["sendMessage", "consumeMessage"], commands
    topic = fresh("ReadmeHello")
    outputs = []
    for argv in commands:
        n = argv.index("-n")
        assert argv[n + 1] == README_NAMESRV, argv
        args = [topic if a == "Hello" else a for a in argv[1:n] + argv[n + 2 :]]
        done = ours_run(target, *args)  # adds -n with the target's name server
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    sent, consumed = outputs
    assert "SEND_OK" in sent, sent
    assert "BODY: hello, sidewinder" in consumed, consumed


def test_quick_start_python_example(target: ClusterTarget, tmp_path: Path) -> None:
    (code,) = [
        code
        for language, code in quick_start_blocks()
        if language == "python" and "sidewinder.client" in code
    ]
    for name in ('"Hello"', '"hello-producers"', '"hello-readers"', f'"{README_NAMESRV}"'):
        assert name in code, name
    code = code.replace(f'"{README_NAMESRV}"', f'"{target.namesrv_addr}"')
    for name in ("Hello", "hello-producers", "hello-readers"):
        code = code.replace(f'"{name}"', f'"{fresh(name)}"')
    script = tmp_path / "first_message.py"
    script.write_text(code)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "status='SEND_OK'" in done.stdout, done.stdout
    assert "0 b'hello from Python'" in done.stdout, done.stdout


def test_quick_start_5x_client_example(tmp_path: Path) -> None:
    """The README's RocketMQ 5 client example, run by the stock client's own interpreter (the
    reference bench's py5 venv) against a Sidewinder broker's gRPC front."""
    (code,) = [
        code
        for language, code in quick_start_blocks()
        if language == "python" and "from rocketmq import" in code
    ]
    assert f'"{README_GRPC}"' in code and '"Hello"' in code
    port = lease_port_block()
    cluster = create_target("sidewinder", tmp_path / "cluster", {"grpcServerPort": port})
    cluster.start()
    client = SyncRemotingClient()
    try:
        topic = fresh("Hello")  # as the README's mqadmin sendMessage made it, before
        reply = client.invoke(cluster.broker_addr, create_topic_request(topic, 4), 10)
        assert reply.code == ResponseCode.SUCCESS, reply
        script = tmp_path / "first_message_5x.py"
        script.write_text(
            code.replace(f'"{README_GRPC}"', f'"127.0.0.1:{port}"').replace('"Hello"', f'"{topic}"')
        )
        done = subprocess.run(
            [str(bench_cache().py5_python), str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
            env=driver_env(PYTHON5, tmp_path),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "message_id:" in done.stdout, done.stdout
    finally:
        client.close()
        cluster.stop()
