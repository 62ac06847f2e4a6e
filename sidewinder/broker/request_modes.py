"""Message request modes (RocketMQ 5's MessageRequestModeManager): per topic and group, whether
the group's remoting consumers pull or pop, in config/messageRequestMode.json.

    modes = RequestModes(config_dir)
    modes.set({"topic": "T", "consumerGroup": "G", "mode": "POP", "popShareQueueNum": 0})
    modes.get("T", "G")  # the body SET_MESSAGE_REQUEST_MODE gave, normalized
    modes.persist()      # {"messageRequestModeMap": {"T": {"G": {...}}}}
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sidewinder.broker.metadata import JsonTable
from sidewinder.protocol.errors import BodyError

MODES = ("PULL", "POP")


def request_mode(value: dict[str, Any]) -> dict[str, Any]:
    """A SetMessageRequestModeRequestBody as fastjson writes it (keys sorted), checked."""
    mode = value.get("mode") or "PULL"
    if mode not in MODES:
        raise BodyError(f"the body is not a SetMessageRequestModeRequestBody: mode {mode!r}")
    share = value.get("popShareQueueNum", 0)
    if isinstance(share, bool) or not isinstance(share, int):
        raise BodyError(
            "the body is not a SetMessageRequestModeRequestBody: "
            f"popShareQueueNum is not an integer: {share!r}"
        )
    return {
        "consumerGroup": str(value.get("consumerGroup") or ""),
        "mode": mode,
        "popShareQueueNum": share,
        "topic": str(value.get("topic") or ""),
    }


class RequestModes:
    def __init__(self, config_dir: Path) -> None:
        self.file = JsonTable(config_dir / "messageRequestMode.json")
        self.modes: dict[str, dict[str, dict[str, Any]]] = {}  # topic -> group -> body

    def load(self) -> None:
        saved = self.file.load_json()
        if isinstance(saved, dict):
            self.mirror(saved)

    def set(self, value: dict[str, Any]) -> None:
        body = request_mode(value)
        self.modes.setdefault(body["topic"], {})[body["consumerGroup"]] = body

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.modes.get(topic, {}).get(group)

    def mirror(self, master: dict[str, Any]) -> None:
        """A slave takes its master's table whole (GET_ALL_MESSAGE_REQUEST_MODE's body)."""
        self.modes = {}
        table = master.get("messageRequestModeMap") or {}
        for topic, groups in table.items():
            for group, value in (groups or {}).items():
                self.modes.setdefault(topic, {})[group] = request_mode(value)

    def to_json(self) -> dict[str, Any]:
        return {"messageRequestModeMap": self.modes}

    def writer(self) -> Callable[[], bool]:
        """The write of messageRequestMode.json as the table is now (see JsonTable.writer)."""
        return self.file.writer(self.to_json())

    def persist(self) -> None:
        """Write messageRequestMode.json. Blocking."""
        self.writer()()
