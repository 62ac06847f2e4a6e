"""Metadata files written while the tables change: a table is encoded on the event loop, where
it changes, and only the write runs in an executor thread."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sidewinder.protocol.codes import ResponseCode
from sidewinder.remoting.client import SyncRemotingClient
from tests.inprocess import InProcessBroker
from tests.interop.pop_requests import create_topic_request

CREATORS = 8
EACH = 100


def test_topics_created_side_by_side_are_all_taken_and_saved(tmp_path: Path) -> None:
    """Eight clients create topics side by side, so the broker's table changes while it saves
    it: every request is SUCCESS (a save that read the live table from a thread failed them
    with "dictionary changed size during iteration"), and topics.json ends up with them all."""
    names = [[f"Many{c}_{i}" for i in range(EACH)] for c in range(CREATORS)]

    def create(topics: list[str]) -> list[tuple[int, str | None]]:
        client = SyncRemotingClient()
        try:
            replies = [
                client.invoke(broker.addr, create_topic_request(topic, 4), 30) for topic in topics
            ]
        finally:
            client.close()
        return [(r.code, r.remark) for r in replies if r.code != ResponseCode.SUCCESS]

    with InProcessBroker(tmp_path) as broker:
        # Threads switch every 10 µs, not every 5 ms: a thread that reads a live table meets
        # the loop's changes at once.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        try:
            with ThreadPoolExecutor(CREATORS) as pool:
                refused = [r for found in pool.map(create, names) for r in found]
        finally:
            sys.setswitchinterval(interval)
        assert refused == []
        wanted = {name for group in names for name in group}
        saved = tmp_path / "store" / "config" / "topics.json"
        deadline = time.monotonic() + 20
        while True:
            table = json.loads(saved.read_text())["topicConfigTable"] if saved.exists() else {}
            if wanted <= set(table) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert wanted - set(table) == set()
