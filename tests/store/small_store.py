"""A store with small files for the store tests, and messages to put in it.

store = MessageStore(store_config(tmp_path), store_host=HOST)   # 1 MiB CommitLog segments
await store.put_message(message("T", 0, n))                     # key k-n, tag TagA
await wait_dispatched(store, "T", 0, count)                     # the ConsumeQueue caught up
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.store.config import StoreConfig
from sidewinder.store.message_store import MessageStore

HOST = Host(b"\x7f\x00\x00\x01", 10911)


def store_config(root: Path, **extra: object) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        store_path_commit_log=root / "commitlog",
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=600,
        max_hash_slot_num=100,
        max_index_num=1000,
        **extra,
    )


def message(
    topic: str, queue: int, n: int, *, tag: str = "TagA", size: int = 100, wait: bool = True
) -> MessageToStore:
    props = {"KEYS": f"k-{n}", "TAGS": tag, "UNIQ_KEY": f"{n:032X}"}
    if not wait:
        props["WAIT"] = "false"
    return MessageToStore(
        topic=topic.encode(),
        queue_id=queue,
        body=(f"{n}|".encode() * size)[:size],
        properties=encode_properties(props),
        born_host=HOST,
        store_host=HOST,
    )


async def wait_dispatched(store: MessageStore, topic: str, queue: int, count: int) -> None:
    for _ in range(200):
        if store.max_offset_in_queue(topic, queue) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{topic}/{queue} has {store.max_offset_in_queue(topic, queue)}")
