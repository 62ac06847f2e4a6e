"""The overview's chart: cluster put and get TPS over the last hour, sampled by the console.

    sampler = TpsSampler(cluster_view, interval_s=10)
    task = asyncio.create_task(sampler.run())
    chart = sampler.chart("DefaultCluster")   # SVG polyline points, axis labels

Brokers keep no history a client can read, so the console keeps its own: one sample per
interval, an hour's worth, lost on restart.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from sidewinder.console.cluster import ClusterView

HOUR_S = 3600
CHART_WIDTH = 600
CHART_HEIGHT = 120


@dataclass(frozen=True)
class Sample:
    at_s: float
    put_tps: float
    get_tps: float


class TpsSampler:
    def __init__(self, view: ClusterView, interval_s: float = 10.0) -> None:
        self.view = view
        self.interval_s = interval_s
        self.samples: dict[str, deque[Sample]] = {}

    async def sample(self) -> None:
        overview = await self.view.overview()
        now = time.time()
        for cluster, brokers in overview.clusters.items():
            kept = self.samples.setdefault(
                cluster, deque(maxlen=max(int(HOUR_S / self.interval_s), 2))
            )
            alive = [b for b in brokers if b.alive and b.role == "MASTER"]
            kept.append(Sample(now, sum(b.put_tps for b in alive), sum(b.get_tps for b in alive)))

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval_s)

    def chart(self, cluster: str) -> dict[str, Any]:
        """The samples of one cluster as SVG polyline points in a CHART_WIDTH x CHART_HEIGHT
        box (time across, since the first sample kept, at most an hour, at least a minute;
        TPS up), with the peak and the span for the axes."""
        kept = list(self.samples.get(cluster, ()))
        peak = max((max(s.put_tps, s.get_tps) for s in kept), default=0.0) or 1.0
        now = time.time()
        span_s = min(max(now - kept[0].at_s, 60.0), HOUR_S) if kept else HOUR_S

        def points(attr: str) -> str:
            return " ".join(
                f"{CHART_WIDTH * (1 - (now - s.at_s) / span_s):.1f},"
                f"{CHART_HEIGHT * (1 - getattr(s, attr) / peak):.1f}"
                for s in kept
            )

        return {
            "width": CHART_WIDTH,
            "height": CHART_HEIGHT,
            "peak": peak,
            "put": points("put_tps"),
            "get": points("get_tps"),
            "samples": len(kept),
            "span_min": round(span_s / 60),
            "last": {"put_tps": kept[-1].put_tps, "get_tps": kept[-1].get_tps} if kept else None,
        }
