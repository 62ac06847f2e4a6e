"""Broker calls with a deadline, fanned out: what keeps a page from hanging on a dead broker.

results = await fan_out({addr: admin.broker_runtime(addr) for addr in addrs})
for addr, outcome in results.items():
    print(addr, outcome.value if outcome.ok else outcome.error)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sidewinder.client.route_cache import ClientError
from sidewinder.remoting.connection import RemotingError

T = TypeVar("T")
K = TypeVar("K")

# A broker that has not answered in this long is shown as not answering; the page goes on.
CALL_TIMEOUT_S = 3.0
# How many calls one fan-out has in flight at once (500 groups' stats at a broker, say).
FAN_OUT_LIMIT = 64


@dataclass(frozen=True)
class Outcome(Generic[T]):
    value: T | None = None
    error: str | None = None
    # The far end answered, with a refusal or an error of its own: it is up.
    answered: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


def describe_error(exc: BaseException) -> str:
    """What a page says of a failed call: the broker's code and remark, or what went wrong."""
    if isinstance(exc, ClientError):
        return f"code {exc.code}: {exc.remark}"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    if isinstance(exc, RemotingError | OSError):
        return f"unreachable: {exc}"
    return f"{type(exc).__name__}: {exc}"


async def guarded(call: Awaitable[T], timeout_s: float = CALL_TIMEOUT_S) -> Outcome[T]:
    """The call's value, or what went wrong; never raises for a broker's failure or silence."""
    try:
        async with asyncio.timeout(timeout_s):
            return Outcome(await call)
    except ClientError as exc:
        return Outcome(error=describe_error(exc))
    except (RemotingError, OSError, TimeoutError, ValueError, KeyError) as exc:
        return Outcome(error=describe_error(exc), answered=False)


async def fan_out(
    calls: Mapping[K, Awaitable[T]],
    timeout_s: float = CALL_TIMEOUT_S,
    limit: int = FAN_OUT_LIMIT,
) -> dict[K, Outcome[T]]:
    """Every call at once (at most `limit` in flight), each with its own deadline."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[T]) -> Outcome[T]:
        async with gate:
            return await guarded(call, timeout_s)

    keys = list(calls)
    outcomes = await asyncio.gather(*(one(calls[k]) for k in keys))
    return dict(zip(keys, outcomes, strict=True))


def value_or(outcome: Outcome[Any], default: T) -> Any:
    return outcome.value if outcome.ok else default
