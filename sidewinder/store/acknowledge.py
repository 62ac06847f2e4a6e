"""Producer acknowledgement: what a put's producer is told, and when.

    settled = acks.settled(end_offset)       # PUT_OK once on disk / on a slave, as configured
    settled.add_done_callback(answer)        # FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, ...
    result = await acks.await_settled(put)   # the same for one PutResult

Under SYNC_FLUSH a waiting put is answered once group commit has the CommitLog on disk up to
its end; under SYNC_MASTER once a slave has it too; both are waited for at once, as RocketMQ
combines them. The statuses and result types of a put live here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from sidewinder.protocol.message import MessageConst, property_value
from sidewinder.protocol.record import MessageToStore
from sidewinder.store.commit_log import AppendResult
from sidewinder.store.config import StoreConfig
from sidewinder.store.flush import FlushError, GroupCommit


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


# The puts that are in the CommitLog whatever else went wrong: their producer gets the ids.
STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)


class ReplicaAcks(Protocol):
    """A SYNC_MASTER's slaves, as the store sees them (the broker's HA service gives them)."""

    def slave_ok(self, end_offset: int) -> bool:
        """A slave is connected and not further behind than haSlaveFallbehindMax."""
        ...

    def replicated(self, end_offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """True once a slave has the CommitLog up to `end_offset`; False after `timeout_s`."""
        ...


# Not frozen: a frozen dataclass's __init__ costs a microsecond per put.
@dataclass(slots=True)
class PutResult:
    status: PutStatus
    append: AppendResult | None = None
    remark: str = ""


@dataclass(slots=True)
class AppendedMany:
    """What append_many did: the offsets of the items appended (the first of those given; a
    batch's first record's), and why the rest were not (status and remark)."""

    status: PutStatus
    phy_offsets: list[int]
    queue_offsets: list[int]
    end_offset: int = 0  # where the last appended record ends in the CommitLog
    remark: str = ""


def wants_wait(message: MessageToStore) -> bool:
    """The WAIT property: a producer may ask not to wait for the flush (default: wait)."""
    wait = property_value(message.properties, MessageConst.WAIT_STORE_MSG_OK)
    return wait is None or wait.lower() != "false"


class Acknowledger:
    """Answers "is the CommitLog up to here settled?" from group commit and the slaves."""

    def __init__(
        self,
        group_commit: GroupCommit,
        *,
        sync_flush: bool,
        sync_master: bool,
        config: StoreConfig,
    ) -> None:
        self._group_commit = group_commit
        self.sync_flush = sync_flush
        self.sync_master = sync_master
        self._config = config  # syncFlushTimeout is read per put: updateBrokerConfig sets it
        self.replica_acks: ReplicaAcks | None = None  # given by the broker's HA service

    @property
    def acknowledges_late(self) -> bool:
        """Whether a put that waits (WAIT=true) is answered only once `settled`: SYNC_FLUSH
        (on disk) or SYNC_MASTER (on a slave)."""
        return self.sync_flush or self.sync_master

    def settled(self, end_offset: int) -> asyncio.Future[PutStatus]:
        """What a waiting producer is told about the CommitLog up to `end_offset`: PUT_OK once
        it is on disk (SYNC_FLUSH) and on a slave (SYNC_MASTER), both waited for at once, as
        RocketMQ combines them; FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT (the slave's outcome
        wins when both fail) or SLAVE_NOT_AVAILABLE (no slave, or one too far behind) else.
        FlushError after a disk error. Callers answer from a callback: no task per put."""
        loop = asyncio.get_running_loop()
        settled: asyncio.Future[PutStatus] = loop.create_future()
        timeout_s = self._config.sync_flush_timeout / 1000
        parts: list[tuple[asyncio.Future[bool], PutStatus]] = []
        if self.sync_flush:
            parts.append(
                (self._group_commit.durable(end_offset, timeout_s), PutStatus.FLUSH_DISK_TIMEOUT)
            )
        slave_status = PutStatus.PUT_OK
        if self.sync_master:
            acks = self.replica_acks
            if acks is None or not acks.slave_ok(end_offset):
                slave_status = PutStatus.SLAVE_NOT_AVAILABLE
            else:
                parts.append(
                    (acks.replicated(end_offset, timeout_s), PutStatus.FLUSH_SLAVE_TIMEOUT)
                )
        if not parts:
            settled.set_result(slave_status)
        outcome, remaining = [slave_status], [len(parts)]  # shared by the parts' callbacks
        for part, failed_as in parts:
            part.add_done_callback(_one_part_done(settled, outcome, remaining, failed_as))
        return settled

    def durable(self, end_offset: int) -> asyncio.Future[bool]:
        """Done with True once the CommitLog up to `end_offset` is on disk, False after
        syncFlushTimeout; FlushError after a disk error. Under ASYNC_FLUSH: done at once."""
        if not self.sync_flush:
            future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            future.set_result(True)
            return future
        return self._group_commit.durable(end_offset, self._config.sync_flush_timeout / 1000)

    async def await_settled(self, result: PutResult) -> PutResult:
        """`result` (an appended put) as its producer is told it once settled."""
        append = result.append
        assert append is not None
        try:
            status = await self.settled(append.phy_offset + append.size)
        except FlushError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, append, str(exc))
        if status is PutStatus.PUT_OK:
            return result
        return PutResult(status, append, self.settle_remark(status))

    def settle_remark(self, status: PutStatus) -> str:
        timeout = self._config.sync_flush_timeout
        if status is PutStatus.FLUSH_DISK_TIMEOUT:
            return f"not flushed within syncFlushTimeout {timeout} ms"
        if status is PutStatus.FLUSH_SLAVE_TIMEOUT:
            return f"no slave confirmed it within syncFlushTimeout {timeout} ms"
        if status is PutStatus.SLAVE_NOT_AVAILABLE:
            return "no slave is connected, or the slave is too far behind (haSlaveFallbehindMax)"
        return ""


def _one_part_done(
    settled: asyncio.Future[PutStatus],
    outcome: list[PutStatus],
    remaining: list[int],
    failed_as: PutStatus,
) -> Callable[[asyncio.Future[bool]], None]:
    """The callback of one part of `settled` (disk or slave): the last part to finish sets
    the outcome, a failed part's status kept (the slave's over the disk's)."""

    def one_done(part: asyncio.Future[bool]) -> None:
        if settled.done():
            return
        error = part.exception()
        if error is not None:
            settled.set_exception(error)
            return
        if not part.result() and (
            outcome[0] is PutStatus.PUT_OK or failed_as is PutStatus.FLUSH_SLAVE_TIMEOUT
        ):
            outcome[0] = failed_as
        remaining[0] -= 1
        if remaining[0] == 0:
            settled.set_result(outcome[0])

    return one_done
