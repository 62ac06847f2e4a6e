"""RocketMQ's DataVersion: a timestamp and a counter bumped on every change, as metadata files
and their remoting bodies carry it (`"dataVersion": {"counter": N, "timestamp": ms}`)."""

from __future__ import annotations

import time
from typing import Any


class DataVersion:
    def __init__(self, timestamp: int | None = None, counter: int = 0) -> None:
        self.timestamp = timestamp if timestamp is not None else int(time.time() * 1000)
        self.counter = counter

    def bump(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, value: Any) -> DataVersion:
        value = value or {}
        return cls(int(value.get("timestamp", 0)), int(value.get("counter", 0)))
