"""One remoting connection, either side: frames in through the codec, requests to the processor
table, responses to whoever awaits their opaque, frames out batched once per loop turn.

Server and client use the same class: a broker calls its clients (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED) and clients answer with their own processor table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import cast

from sidewinder.common.deadline import expire_after
from sidewinder.common.log import library_logger
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.remoting.codec import (
    DEFAULT_MAX_FRAME,
    FrameDecoder,
    FrameError,
    RawFrame,
    decode_raw,
    encode_command,
)
from sidewinder.remoting.dispatch import ProcessorTable, RequestContext

log = library_logger(__name__)
# Frames per write when a loop turn queues many: small enough that the peer overlaps its work
# with ours (a whole pipelined window in one write makes the two sides take turns).
FLUSH_EVERY = 16


class RemotingError(Exception):
    """Base of the remoting layer's errors."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response within the timeout; the pending entry is gone."""


class RemotingConnectError(RemotingError, ConnectionError):
    """The connection could not be made, or closed with the call pending."""


class Connection(asyncio.Protocol):
    def __init__(
        self,
        table: ProcessorTable | None,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_open: Callable[[Connection], None] | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.table = table
        self.decoder = FrameDecoder(max_frame)
        self._on_open = on_open
        self._on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.remote_address = "?"
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._outbox: list[bytes | bytearray | memoryview] = []
        self._flush_scheduled = False
        self._queued = 0
        self.last_active = time.monotonic()
        self.closed = asyncio.get_running_loop().create_future()
        self._ctx = RequestContext(self)

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_address = f"{peer[0]}:{peer[1]}"
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self.decoder.feed(data)
        frames: list[RawFrame] = []
        bad: FrameError | None = None
        try:
            if self.table is not None:
                frames = self.table.take_buffer(self._ctx, self.decoder)
            frames.extend(self.decoder.frames())
        except FrameError as exc:
            bad = exc
        if frames and self.table is not None:
            frames = self.table.take_frames(self._ctx, frames)
        requests: list[RemotingCommand] = []
        for frame in frames:
            try:
                command = decode_raw(frame)
            except FrameError as exc:
                self.decoder.fail(exc)
                bad = exc
                break
            if command.is_response:
                self._answered(command)
            else:
                requests.append(command)
        if requests and self.table is not None:
            # The whole chunk at once: a processor with a batch path serves its share in one go.
            self.table.dispatch_many(self._ctx, requests, self._reply_for)
        if bad is not None:
            log.warning("remoting.bad_frame", peer=self.remote_address, error=str(bad))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        error = RemotingConnectError(f"connection to {self.remote_address} closed")
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    # -- traffic ----------------------------------------------------------------------------------
    def _answered(self, response: RemotingCommand) -> None:
        future = self.pending.pop(response.opaque, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _reply_for(self, request: RemotingCommand) -> Callable[[RemotingCommand], None]:
        if request.is_oneway:
            return _drop
        return self.send

    def send(self, command: RemotingCommand) -> None:
        """Queue a frame; the frames queued in one loop turn go out together, in writes of at
        most FLUSH_EVERY frames so the peer starts on the first while we make the rest."""
        if self.transport is None or self.transport.is_closing():
            return
        self._outbox += encode_command(command)
        self._queued += 1
        if self._queued >= FLUSH_EVERY:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def send_frames(self, frames: list[bytes]) -> None:
        """Whole encoded frames, written at once with whatever the outbox holds."""
        if self.transport is None or self.transport.is_closing():
            return
        if self._outbox:
            self._outbox += frames
            self._flush()
        else:
            self.transport.writelines(frames)
            self.last_active = time.monotonic()

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._queued = 0
        out, self._outbox = self._outbox, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)
            self.last_active = time.monotonic()

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and await its response (matched by opaque)."""
        if self.transport is None or self.transport.is_closing():
            raise RemotingConnectError(f"connection to {self.remote_address} is closed")
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.pending[request.opaque] = future
        self.send(request)
        expiry = expire_after(future, timeout_s, error=TimeoutError())
        try:
            return await future
        except TimeoutError:
            raise RemotingTimeoutError(
                f"no response to code {request.code} (opaque {request.opaque}) from "
                f"{self.remote_address} within {timeout_s * 1000:.0f} ms"
            ) from None
        finally:
            expiry.cancel()
            self.pending.pop(request.opaque, None)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.flag |= ONEWAY_FLAG
        self.send(request)

    def close(self) -> None:
        if self.transport is not None:
            self._flush()
            self.transport.close()


def _drop(_: RemotingCommand) -> None:
    """Oneway requests get no response."""
