"""The processor table: request code -> async processor, each with its own admission limits.

    table = ProcessorTable(default=NotSupported())
    table.register(SendProcessor(store), RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                   limits=Limits(concurrency=64, capacity=10_000, budget_ms=200))

A request waits in its processor's queue while `concurrency` others run. One that waited longer
than `budget_ms` is refused with SYSTEM_BUSY and RocketMQ's `[TIMEOUT_CLEAN_QUEUE]` remark; one
that finds the queue full gets SYSTEM_BUSY `[OVERLOAD]`. Processors sharing nothing never wait
for each other, so a slow pull cannot delay a send. A processor that raises a SidewinderError
(protocol/errors.py) gets its code and remark; any other exception SYSTEM_ERROR with the error in
the remark (and its traceback in the log); an unknown code REQUEST_CODE_NOT_SUPPORTED naming it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sidewinder.common.log import library_logger
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.headers import HeaderError
from sidewinder.remoting.codec import FrameDecoder, RawFrame

if TYPE_CHECKING:
    from sidewinder.remoting.connection import Connection

log = library_logger(__name__)


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

    def write_frames(self, frames: list[bytes]) -> None:
        """Send whole frames already encoded (replies made from templates), in one write."""
        self.connection.send_frames(frames)


class RequestProcessor(Protocol):
    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """The response, or None for none (oneway requests' replies are dropped anyway)."""
        ...


class BatchProcessor(RequestProcessor, Protocol):
    def take_batch(
        self, ctx: RequestContext, requests: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """Serve at once the requests of one received chunk that it can (answering them itself,
        through `ctx.write_frames`); return the others, which then go through `process` one by
        one. Per-message work on the hot path is paid once per chunk this way."""
        ...


class FrameLane(Protocol):
    def take_buffer(
        self, ctx: RequestContext, buffer: bytearray, start: int, max_frame: int
    ) -> tuple[int, list[tuple[int, int]]]:
        """Serve at once the whole request frames of a connection's buffer, from `start`, that
        it can read straight from their bytes (answering them itself, skipping the generic
        decode). Returns where it stopped (the frame decoder goes on from there, and raises
        for bad framing) and the (start, end) spans of the frames before that it left to be
        decoded and dispatched as usual."""
        ...


class FrameTaker(Protocol):
    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """Serve at once the request frames, of one received chunk, that it can read straight
        from their bytes (answering them itself, skipping the generic decode); the frames
        left, in order, to be decoded and dispatched as usual."""
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
# A check every request passes before its processor's pool sees it (the broker's ACL): it
# returns to let the request in, or raises the refusal (a SidewinderError) to answer it with.
Guard = Callable[[RequestContext, RemotingCommand], None]


class _Pool:
    """Admission for one processor: bounded concurrency, a bounded queue, a waiting budget."""

    def __init__(self, processor: RequestProcessor, limits: Limits) -> None:
        self.processor = processor
        self.limits = limits
        self.running = 0
        self.queue: deque[tuple[float, RequestContext, RemotingCommand, Reply]] = deque()
        self.take_batch: Callable[[RequestContext, list[RemotingCommand]], list[RemotingCommand]]
        self.take_batch = getattr(processor, "take_batch", None) or _take_none

    def submit_batch(
        self,
        ctx: RequestContext,
        requests: list[RemotingCommand],
        reply_for: Callable[[RemotingCommand], Reply],
    ) -> None:
        """Requests of one chunk: the processor's batch path first, unless requests wait for
        admission already (then every request queues, as it would alone)."""
        if self.running < self.limits.concurrency and not self.queue:
            try:
                requests = self.take_batch(ctx, requests)
            except Exception as exc:
                # Our bug. Never run a request twice: each gets the error (a client ignores
                # a second answer to an opaque it already had one for).
                for request in requests:
                    reply_for(request)(error_reply(request, exc))
                return
        for request in requests:
            self.submit(ctx, request, reply_for(request))

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
            self._finish(request, reply, error_reply(request, exc))
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
            response = error_reply(request, exc)
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


def _take_none(ctx: RequestContext, requests: list[RemotingCommand]) -> list[RemotingCommand]:
    return requests


def error_reply(request: RemotingCommand, exc: Exception) -> RemotingCommand:
    """The one place a processor's exception becomes a reply: a refusal it raised (its code
    and remark; a body that does not decode is one, BodyError), a header that does not
    decode, or our bug (logged with its traceback). A processor that answers requests of a
    chunk itself (the send pipeline) encodes with it."""
    if isinstance(exc, SidewinderError):
        log.info("remoting.request_refused", code=request.code, response=exc.code, remark=str(exc))
        return request.reply(exc.code, exc.remark)
    if isinstance(exc, HeaderError):
        return request.reply(ResponseCode.SYSTEM_ERROR, str(exc))
    log.error("remoting.processor_failed", code=request.code, error=repr(exc), exc_info=exc)
    return request.reply(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


class ProcessorTable:
    def __init__(self, default: RequestProcessor | None = None, limits: Limits = Limits()) -> None:
        self._default = _Pool(default or NotSupported(), limits)
        self._pools: dict[int, _Pool] = {}
        self._lane: tuple[FrameLane, _Pool] | None = None
        self._takers: list[tuple[FrameTaker, _Pool]] = []
        self._guard: Guard | None = None

    def guard(self, check: Guard) -> None:
        """Put `check` in front of every processor. The frame lane and takers then stand
        aside: their frames are decoded and checked like any other request."""
        self._guard = check

    def _admitted(
        self,
        ctx: RequestContext,
        requests: list[RemotingCommand],
        reply_for: Callable[[RemotingCommand], Reply],
    ) -> list[RemotingCommand]:
        """The requests the guard lets in; the others are answered with its refusal."""
        assert self._guard is not None
        admitted = []
        for request in requests:
            try:
                self._guard(ctx, request)
            except Exception as exc:
                reply_for(request)(error_reply(request, exc))
                continue
            admitted.append(request)
        return admitted

    def set_frame_lane(self, lane: FrameLane, code: int) -> None:
        """Let `lane` read request frames before they are decoded; what it serves is admitted
        as the pool of `code` admits (not while that pool's requests queue)."""
        self._lane = (lane, self._pools[int(code)])

    def take_buffer(self, ctx: RequestContext, decoder: FrameDecoder) -> list[RawFrame]:
        """Let the frame lane serve what it can of the decoder's whole frames; the frames it
        left before where it stopped (none when there is no lane)."""
        if self._lane is None or self._guard is not None:
            return []
        lane, pool = self._lane
        if pool.running >= pool.limits.concurrency or pool.queue:
            return []
        return decoder.served(functools.partial(lane.take_buffer, ctx))

    def set_frame_taker(self, taker: FrameTaker, code: int) -> None:
        """Let `taker` read a chunk's whole request frames before they are decoded; what it
        serves is admitted as the pool of `code` admits (not while that pool's requests
        queue)."""
        self._takers.append((taker, self._pools[int(code)]))

    def frame_takers(self) -> list[FrameTaker]:
        return [taker for taker, _ in self._takers]

    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """Let the frame takers serve what they can of a chunk's frames; the frames left."""
        if self._guard is not None:
            return frames
        for taker, pool in self._takers:
            if frames and pool.running < pool.limits.concurrency and not pool.queue:
                frames = taker.take_frames(ctx, frames)
        return frames

    def register(self, processor: RequestProcessor, *codes: int, limits: Limits = Limits()) -> None:
        """Route `codes` to `processor`; the codes share one pool (one admission queue)."""
        pool = _Pool(processor, limits)
        for code in codes:
            self._pools[int(code)] = pool

    def codes(self) -> list[int]:
        """The request codes registered, in order (the default processor answers the rest)."""
        return sorted(self._pools)

    def dispatch(self, ctx: RequestContext, request: RemotingCommand, reply: Reply) -> None:
        if self._guard is not None and not self._admitted(ctx, [request], lambda _: reply):
            return
        self._pools.get(request.code, self._default).submit(ctx, request, reply)

    def dispatch_many(
        self,
        ctx: RequestContext,
        requests: list[RemotingCommand],
        reply_for: Callable[[RemotingCommand], Reply],
    ) -> None:
        """The requests of one received chunk, each pool's share handed over at once."""
        if self._guard is not None:
            requests = self._admitted(ctx, requests, reply_for)
        if not requests:
            return
        if len(requests) == 1:
            pool = self._pools.get(requests[0].code, self._default)
            pool.submit_batch(ctx, requests, reply_for)
            return
        shares: dict[int, tuple[_Pool, list[RemotingCommand]]] = {}
        for request in requests:
            pool = self._pools.get(request.code, self._default)
            share = shares.get(id(pool))
            if share is None:
                shares[id(pool)] = (pool, [request])
            else:
                share[1].append(request)
        for pool, share_requests in shares.values():
            pool.submit_batch(ctx, share_requests, reply_for)

    def instrument(self, wrap: Callable[[RequestProcessor], RequestProcessor]) -> None:
        """Put `wrap(processor)` in the place of each processor for its `process` calls (the
        metrics' timing); batch paths and the frame lane stay as they are."""
        for pool in {id(p): p for p in [*self._pools.values(), self._default]}.values():
            pool.processor = wrap(pool.processor)

    def queued(self, code: int) -> int:
        """How many requests wait for admission in the pool that serves `code`."""
        return len(self._pools.get(int(code), self._default).queue)

    def expire_queued(self) -> None:
        for pool in {id(p): p for p in [*self._pools.values(), self._default]}.values():
            pool.expire()
