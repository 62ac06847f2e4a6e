"""Where a push consumer keeps its progress: on the brokers for a clustering group (every member
must see it), in a local file for a broadcasting one (each member has its own), as the Java
client's RemoteBrokerOffsetStore and LocalFileOffsetStore do.

The local file is Java's: `<dir>/<clientId>/<group>/offsets.json`, an OffsetSerializeWrapper
with MessageQueue objects as map keys, written atomically.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

from sidewinder.client.membership import GroupMember
from sidewinder.client.pulling import commit_offset, committed_offset
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.common.fileio import read_with_backup, write_atomic
from sidewinder.common.log import library_logger
from sidewinder.protocol import body
from sidewinder.remoting.connection import RemotingError

log = library_logger(__name__)
DEFAULT_LOCAL_DIR = Path.home() / ".rocketmq_offsets"


class OffsetStore(Protocol):
    async def read(self, queue: MessageQueue) -> int:
        """The stored offset of `queue`, -1 when there is none."""
        ...

    async def persist(self, offsets: dict[MessageQueue, int]) -> None: ...


class BrokerOffsetStore:
    def __init__(self, member: GroupMember) -> None:
        self.member = member

    # Reads and commits go to the queue's master, else (a group whose master is gone) its slave,
    # as the Java client's RemoteBrokerOffsetStore does.
    async def read(self, queue: MessageQueue) -> int:
        addr, _ = await self.member.reader_of(queue)
        return await committed_offset(self.member.remoting, addr, self.member.group, queue)

    async def persist(self, offsets: dict[MessageQueue, int]) -> None:
        for queue, offset in offsets.items():
            try:
                addr, _ = await self.member.reader_of(queue)
                await commit_offset(self.member.remoting, addr, self.member.group, queue, offset)
            except (ClientError, RemotingError, OSError) as exc:
                # The next round sends it again; one broker down must not stop the others.
                log.warning("client.offset_commit_failed", queue=str(queue), error=str(exc))


class LocalOffsetStore:
    def __init__(self, directory: Path, client_id: str, group: str) -> None:
        self.path = directory / client_id / group / "offsets.json"
        self._table: dict[MessageQueue, int] | None = None

    def _load(self) -> dict[MessageQueue, int]:
        parsed = read_with_backup(self.path, body.object_keyed_pairs)
        return {
            MessageQueue(str(key["topic"]), str(key["brokerName"]), int(key["queueId"])): int(value)
            for key, value in parsed or []
        }

    async def _loaded(self) -> dict[MessageQueue, int]:
        """The table, read from the file (off the loop) the first time it is needed."""
        if self._table is None:
            self._table = await asyncio.get_running_loop().run_in_executor(None, self._load)
        return self._table

    async def read(self, queue: MessageQueue) -> int:
        return (await self._loaded()).get(queue, -1)

    async def persist(self, offsets: dict[MessageQueue, int]) -> None:
        known = await self._loaded()
        known.update(offsets)
        table = {
            body.ObjectKey(brokerName=q.broker_name, queueId=q.queue_id, topic=q.topic): offset
            for q, offset in sorted(known.items())
        }
        text = body.dumps({"offsetTable": table})
        await asyncio.get_running_loop().run_in_executor(None, write_atomic, self.path, text)
