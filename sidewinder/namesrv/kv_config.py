"""The name server's KV config (namespace -> key -> value), kept in kvConfigPath as
`{"configTable": {namespace: {key: value}}}`, written atomically on every change."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from sidewinder.common.fileio import read_with_backup, write_atomic


class KVConfig:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        # put and delete run in executor threads: one change and its write at a time (two
        # writes at once would race on the one temporary file).
        self._changing = threading.Lock()

    def load(self) -> None:
        loaded = read_with_backup(self.path, json.loads)
        if loaded:
            table = loaded.get("configTable", {})
            self.table = {ns: {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}

    def _persist(self) -> None:
        write_atomic(self.path, json.dumps({"configTable": self.table}, indent=1, sort_keys=True))

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._changing:
            self.table.setdefault(namespace, {})[key] = value
            self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._changing:
            values = self.table.get(namespace)
            if values is not None and values.pop(key, None) is not None:
                if not values:
                    del self.table[namespace]
                self._persist()

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))
