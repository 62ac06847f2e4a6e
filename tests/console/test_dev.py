"""sidewinder-dev starts the console beside the name server and broker, prints its URL, and
stops it with them."""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from pathlib import Path

import psutil

from interop.dev import dev_cluster


def test_sidewinder_dev_starts_the_console(tmp_path: Path) -> None:
    with dev_cluster(tmp_path, console=True) as dev:
        url = re.search(r"console (http://\S+/)", dev.output())
        assert url and url.group(1) == dev.console_url
        children = psutil.Process(dev.process.pid).children()
        page = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not page:
            try:
                with urllib.request.urlopen(url.group(1), timeout=5) as reply:
                    page = reply.read()
            except OSError:
                time.sleep(0.2)
        assert dev.broker_addr.encode() in page
        dev.process.send_signal(signal.SIGTERM)
        code = dev.process.wait(30)
    assert code == 0, dev.output()[-3000:]
    assert children and not any(c.is_running() and c.status() != "zombie" for c in children)
