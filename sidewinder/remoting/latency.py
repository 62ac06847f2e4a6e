"""How long requests take to process, by request code and response code (RocketMQ 5's
rocketmq_rpc_latency), recorded by wrapping the processors of a table when metrics are on.

    latency = RpcLatency()
    table.instrument(lambda processor: Timed(processor, latency))
    ...
    latency.buckets[(RequestCode.PULL_MESSAGE, ResponseCode.SUCCESS, False, "success")]

One record per request that goes through a processor's `process` (a pull is one request for
a batch of messages). A path that serves requests without `process` (the broker's send lane)
records its own, one timing per received chunk: `observe(key, elapsed_ms, times=n)`. With
metrics off nothing is wrapped and nothing is timed.
"""

from __future__ import annotations

import time

from prometheus_client.core import HistogramMetricFamily

from sidewinder.common.histogram import Buckets
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError, SidewinderError
from sidewinder.remoting.dispatch import RequestContext, RequestProcessor

# RocketMQ 5's bucket bounds for rocketmq_rpc_latency, in milliseconds.
RPC_LATENCY_BOUNDS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_SUSPEND_FLAG = 0x2  # a pull's sysFlag bit asking to be held (long polling)

# (request code, response code, long polling, result) -> latency buckets (ms).
LatencyKey = tuple[int, int, bool, str]


class RpcLatency:
    def __init__(self) -> None:
        self.buckets: dict[LatencyKey, Buckets] = {}

    def observe(self, key: LatencyKey, elapsed_ms: float, times: int = 1) -> None:
        """`times` requests of one kind that took `elapsed_ms` each."""
        found = self.buckets.get(key)
        if found is None:
            found = self.buckets[key] = Buckets(RPC_LATENCY_BOUNDS_MS)
        found.observe(elapsed_ms, times)


class Timed:
    """A processor whose `process` calls are timed into an RpcLatency."""

    def __init__(self, inner: RequestProcessor, latency: RpcLatency) -> None:
        self.inner = inner
        self.latency = latency

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        started = time.perf_counter()
        try:
            response = await self.inner.process(ctx, request)
        except BodyError:
            self._observe(request, ResponseCode.SYSTEM_ERROR, "process_request_failed", started)
            raise
        except SidewinderError as refused:
            # A refusal is an answer, as RocketMQ's processors return it: counted by its code.
            self._observe(request, refused.code, "success", started)
            raise
        except Exception:
            self._observe(request, ResponseCode.SYSTEM_ERROR, "process_request_failed", started)
            raise
        if request.is_oneway or response is None:
            self._observe(request, -1, "oneway", started)
        else:
            self._observe(request, response.code, "success", started)
        return response

    def _observe(
        self, request: RemotingCommand, response_code: int, result: str, started: float
    ) -> None:
        long_polling = request.code == RequestCode.PULL_MESSAGE and _asks_to_be_held(request)
        self.latency.observe(
            (request.code, response_code, long_polling, result),
            (time.perf_counter() - started) * 1000,
        )


def _asks_to_be_held(request: RemotingCommand) -> bool:
    try:
        return bool(int((request.ext_fields or {}).get("sysFlag", 0)) & _SUSPEND_FLAG)
    except (TypeError, ValueError):
        return False


def code_name(code: int, names: type[RequestCode] | type[ResponseCode]) -> str:
    """RocketMQ's label for a code: its constant's name in lower case, else the number."""
    try:
        return names(code).name.lower()
    except ValueError:
        return str(code)


def rpc_latency_metric(latency: RpcLatency, base: dict[str, str]) -> HistogramMetricFamily:
    """rocketmq_rpc_latency (ms) with RocketMQ's labels, plus `base` (cluster, node ...)."""
    names = [
        *base,
        "protocol_type",
        "request_code",
        "response_code",
        "is_long_polling",
        "result",
    ]
    family = HistogramMetricFamily("rocketmq_rpc_latency", "Rpc latency (ms)", labels=names)
    for (request_code, response_code, long_polling, result), buckets in latency.buckets.items():
        family.add_metric(
            [
                *base.values(),
                "remoting",
                code_name(request_code, RequestCode),
                "" if response_code < 0 else code_name(response_code, ResponseCode),
                "true" if long_polling else "false",
                result,
            ],
            buckets=buckets.cumulative(),
            sum_value=buckets.total,
        )
    return family
