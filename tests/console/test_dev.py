"""sidewinder-dev starts the console beside the name server and broker, prints its URL, and
stops it with them."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from interop.ports import lease_port_block


def test_sidewinder_dev_starts_the_console(tmp_path: Path) -> None:
    namesrv_port, broker_port = lease_port_block(), lease_port_block((-2, 0, 1))
    console_port = lease_port_block()
    out = tmp_path / "dev.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidewinder.dev",
                "--store",
                str(tmp_path / "store"),
                "--namesrv-port",
                str(namesrv_port),
                "--broker-port",
                str(broker_port),
                "--console-port",
                str(console_port),
                "--no-metrics",
                "--no-grpc",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b"boot success" not in out.read_bytes():
            assert proc.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)
        url = re.search(r"console (http://\S+/)", out.read_text())
        assert url and url.group(1) == f"http://127.0.0.1:{console_port}/"
        children = psutil.Process(proc.pid).children()
        page = b""
        while time.monotonic() < deadline and not page:
            try:
                with urllib.request.urlopen(url.group(1), timeout=5) as reply:
                    page = reply.read()
            except OSError:
                time.sleep(0.2)
        assert f"127.0.0.1:{broker_port}".encode() in page
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, out.read_text()[-3000:]
    assert children and not any(c.is_running() and c.status() != "zombie" for c in children)
