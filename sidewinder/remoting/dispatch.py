"""The processor table: request code -> async processor, each with its own admission limits.

    table = ProcessorTable(default=NotSupported())
    table.register(SendProcessor(store), RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                   limits=Limits(concurrency=64, capacity=10_000, budget_ms=200))

A request waits in its processor's queue while `concurrency` others run. One that waited longer
than `budget_ms` is refused with SYSTEM_BUSY and RocketMQ's `[TIMEOUT_CLEAN_QUEUE]` remark; one
that finds the queue full gets SYSTEM_BUSY `[OVERLOAD]`. Processors sharing nothing never wait
for each other, so a slow pull cannot delay a send. A processor that raises gets SYSTEM_ERROR
with the error in the remark; an unknown code REQUEST_CODE_NOT_SUPPORTED naming the code.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import HeaderError

if TYPE_CHECKING:
    from sidewinder.remoting.connection import Connection

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a processor may know of where a request came from, and how to call back."""

    connection: Connection

    @property
    def remote_address(self) -> str:
        return self.connection.remote_address

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the peer of this connection and await its reply."""
        return await self.connection.invoke(request, timeout_s)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        self.connection.invoke_oneway(request)


class RequestProcessor(Protocol):
    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """The response, or None for none (oneway requests' replies are dropped anyway)."""
        ...


@dataclass(frozen=True, slots=True)
class Limits:
    concurrency: int = 64
    capacity: int = 10_000
    budget_ms: int = 0  # 0: no waiting budget


class NotSupported:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.reply(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f" request type {request.code} not supported",
        )


Reply = Callable[[RemotingCommand], None]


class _Pool:
    """Admission for one processor: bounded concurrency, a bounded queue, a waiting budget."""

    def __init__(self, processor: RequestProcessor, limits: Limits) -> None:
        self.processor = processor
        self.limits = limits
        self.running = 0
        self.queue: deque[tuple[float, RequestContext, RemotingCommand, Reply]] = deque()

    def submit(self, ctx: RequestContext, request: RemotingCommand, reply: Reply) -> None:
        if self.running < self.limits.concurrency and not self.queue:
            self._start(ctx, request, reply)
            return
        if len(self.queue) >= self.limits.capacity:
            reply(
                request.reply(
                    ResponseCode.SYSTEM_BUSY,
                    "[OVERLOAD]system busy, start flow control for a while",
                )
            )
            return
        self.queue.append((time.monotonic(), ctx, request, reply))

    def _start(self, ctx: RequestContext, request: RemotingCommand, reply: Reply) -> None:
        """Run the processor at once; only if it suspends does it get a task (eagerly, as
        Python 3.12's eager tasks do): most requests finish without ever waiting."""
        self.running += 1
        coroutine = self.processor.process(ctx, request)
        try:
            awaited = coroutine.send(None)
        except StopIteration as done:
            self._finish(request, reply, done.value)
            return
        except Exception as exc:
            self._finish(request, reply, _error_reply(request, exc))
            return
        asyncio.get_running_loop().create_task(self._resume(coroutine, awaited, request, reply))

    async def _resume(
        self,
        coroutine: Coroutine[Any, Any, RemotingCommand | None],
        awaited: Any,
        request: RemotingCommand,
        reply: Reply,
    ) -> None:
        """Drive a processor that suspended: wait for what it awaits, then step it on."""
        try:
            while True:
                try:
                    if awaited is None:
                        await asyncio.sleep(0)  # a bare yield: let the loop turn
                    else:
                        await asyncio.wait([awaited])  # its outcome is the processor's to see
                except asyncio.CancelledError:
                    awaited = coroutine.throw(asyncio.CancelledError())
                    continue
                awaited = coroutine.send(None)
        except StopIteration as done:
            response = done.value
        except Exception as exc:
            response = _error_reply(request, exc)
        self._finish(request, reply, response)

    def _finish(
        self, request: RemotingCommand, reply: Reply, response: RemotingCommand | None
    ) -> None:
        self.running -= 1
        if self.queue:
            self._pump()
        if response is not None:
            reply(response)

    def _pump(self) -> None:
        budget = self.limits.budget_ms / 1000
        while self.queue and self.running < self.limits.concurrency:
            enqueued, ctx, request, reply = self.queue.popleft()
            waited = time.monotonic() - enqueued
            if budget and waited > budget:
                reply(
                    request.reply(
                        ResponseCode.SYSTEM_BUSY,
                        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                        f"period in queue: {waited * 1000:.0f}ms, size of queue: {len(self.queue)}",
                    )
                )
                continue
            self._start(ctx, request, reply)

    def expire(self) -> None:
        """Refuse queued requests past their budget now (BrokerFastFailure's sweep)."""
        if not self.limits.budget_ms or not self.queue:
            return
        budget = self.limits.budget_ms / 1000
        now = time.monotonic()
        while self.queue and now - self.queue[0][0] > budget:
            enqueued, _, request, reply = self.queue.popleft()
            reply(
                request.reply(
                    ResponseCode.SYSTEM_BUSY,
                    "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                    f"period in queue: {(now - enqueued) * 1000:.0f}ms, "
                    f"size of queue: {len(self.queue)}",
                )
            )


def _error_reply(request: RemotingCommand, exc: Exception) -> RemotingCommand:
    if isinstance(exc, HeaderError):
        return request.reply(ResponseCode.SYSTEM_ERROR, str(exc))
    log.warning("remoting.processor_failed", code=request.code, error=repr(exc))
    return request.reply(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


class ProcessorTable:
    def __init__(self, default: RequestProcessor | None = None, limits: Limits = Limits()) -> None:
        self._default = _Pool(default or NotSupported(), limits)
        self._pools: dict[int, _Pool] = {}

    def register(self, processor: RequestProcessor, *codes: int, limits: Limits = Limits()) -> None:
        """Route `codes` to `processor`; the codes share one pool (one admission queue)."""
        pool = _Pool(processor, limits)
        for code in codes:
            self._pools[int(code)] = pool

    def dispatch(self, ctx: RequestContext, request: RemotingCommand, reply: Reply) -> None:
        self._pools.get(request.code, self._default).submit(ctx, request, reply)

    def expire_queued(self) -> None:
        for pool in {id(p): p for p in [*self._pools.values(), self._default]}.values():
            pool.expire()
