"""A broker's own components on the test's event loop, serving a real socket: store, tables and
processor table, no name server, one topic TOPIC of two queues.

    async with broker(tmp_path) as (app, addr):      # addr: "127.0.0.1:PORT"
        reply = await client.invoke(addr, request, 5)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.topics import TopicConfig
from sidewinder.store.config import StoreConfig

TOPIC, GROUP = "PullTopic", "PullGroup"


@asynccontextmanager
async def broker(root: Path, **store: object) -> AsyncIterator[tuple[BrokerApp, str]]:
    config = BrokerConfig(
        store=StoreConfig(
            store_path_root_dir=root, store_path_commit_log=root / "commitlog", **store
        )
    )
    app = BrokerApp(config)
    await app.store.start()
    app.topics.upsert(TopicConfig(TOPIC, 2, 2, 6))
    port = await app.server.start("127.0.0.1", 0)
    try:
        yield app, f"127.0.0.1:{port}"
    finally:
        await app.server.stop()
        await app.store.shutdown()
