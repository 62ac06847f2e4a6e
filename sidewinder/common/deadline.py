"""A deadline on a future without asyncio.wait_for or asyncio.timeout.

    handle = expire_after(future, 3.0, error=TimeoutError())
    try:
        return await future          # the future itself: a cancellation of the waiter stays one
    finally:
        handle.cancel()

wait_for (3.11) loses a cancellation that comes in the loop turn the future completes in, and
asyncio.timeout needs a task, which a processor the dispatcher runs eagerly has not got yet.
"""

from __future__ import annotations

import asyncio
from typing import Any


def expire_after(
    future: asyncio.Future[Any],
    timeout_s: float,
    *,
    error: BaseException | None = None,
    result: Any = None,
) -> asyncio.TimerHandle:
    """After `timeout_s`, complete `future` if it is still pending: with `error` when given,
    else with `result`. Cancel the returned handle once the future is done."""

    def expire() -> None:
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    return asyncio.get_running_loop().call_later(max(timeout_s, 0.0), expire)
