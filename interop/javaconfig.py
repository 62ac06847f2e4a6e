"""The defaults of RocketMQ's own config classes, read from the real jars (interop/java/DumpConfig).

default_config("org.apache.rocketmq.store.config.MessageStoreConfig", user_home=tmp)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from interop.cache import BenchCache, bench_cache
from interop.jvm import java_binary


def default_config(
    class_name: str, *, user_home: Path, role: str = "server", cache: BenchCache | None = None
) -> dict[str, Any]:
    """A fresh instance's getters as a dict; `user_home` fixes the paths derived from it."""
    cache = cache or bench_cache()
    classpath = f"{cache.java_driver_classes}:{cache.classpath(role)}"
    proc = subprocess.run(
        [java_binary(), f"-Duser.home={user_home}", "-cp", classpath, "DumpConfig", class_name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"DumpConfig {class_name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)
