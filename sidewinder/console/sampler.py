"""The console's charts: what it samples itself, since brokers keep no history a client can
read. Each cluster's put and get TPS, and the total lag of each group someone looked at in the
last hour; one sample per interval, an hour's worth, lost on restart.

    sampler = Sampler(cluster_view, group_view, interval_s=10)
    task = asyncio.create_task(sampler.run())
    sampler.watch("billing")                 # the group page does this
    chart = sampler.chart("cluster", "DefaultCluster")   # SVG polyline points, axes
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from sidewinder.console.calls import fan_out
from sidewinder.console.cluster import ClusterView
from sidewinder.console.groups import GroupView

HOUR_S = 3600
CHART_WIDTH = 600
CHART_HEIGHT = 120


@dataclass(frozen=True)
class Point:
    at_s: float
    values: dict[str, float]


class Sampler:
    def __init__(self, clusters: ClusterView, groups: GroupView, interval_s: float = 10.0) -> None:
        self.clusters = clusters
        self.groups = groups
        self.interval_s = interval_s
        self.series: dict[tuple[str, str], deque[Point]] = {}
        self.watched: dict[str, float] = {}  # group -> when its page was last shown

    def watch(self, group: str, lag: int | None = None) -> None:
        """Sample the group's lag from now on (for an hour after its page was last shown);
        `lag`, just read by the page, is a sample at once unless one is recent."""
        now = self.watched[group] = time.time()
        kept = self.series.get(("group", group))
        if lag is not None and (not kept or now - kept[-1].at_s > self.interval_s / 2):
            self._add("group", group, Point(now, {"lag": float(lag)}))

    def _add(self, kind: str, key: str, point: Point) -> None:
        kept = self.series.setdefault(
            (kind, key), deque(maxlen=max(int(HOUR_S / self.interval_s), 2))
        )
        kept.append(point)

    async def sample(self) -> None:
        now = time.time()
        overview = await self.clusters.overview()
        for cluster, brokers in overview.clusters.items():
            alive = [b for b in brokers if b.alive and b.role == "MASTER"]
            tps = {"put": sum(b.put_tps for b in alive), "get": sum(b.get_tps for b in alive)}
            self._add("cluster", cluster, Point(now, tps))
        for group, seen in list(self.watched.items()):
            if now - seen > HOUR_S:
                del self.watched[group]
        stats = await fan_out({g: self.groups.admin.consume_stats(g) for g in self.watched})
        for group, outcome in stats.items():
            if outcome.ok and outcome.value is not None:
                lag = float(sum(q.lag for q in outcome.value.queues))
                self._add("group", group, Point(now, {"lag": lag}))

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval_s)

    def chart(self, kind: str, key: str) -> dict[str, Any]:
        """One series' samples as SVG polyline points in a CHART_WIDTH x CHART_HEIGHT box:
        time across, since the first sample kept (a minute to an hour), values up; with the
        peak and the span for the axes."""
        kept = list(self.series.get((kind, key), ()))
        names = sorted({name for p in kept for name in p.values})
        peak = max((v for p in kept for v in p.values.values()), default=0.0) or 1.0
        now = time.time()
        span_s = min(max(now - kept[0].at_s, 60.0), HOUR_S) if kept else HOUR_S

        def points(name: str) -> str:
            return " ".join(
                f"{CHART_WIDTH * (1 - (now - p.at_s) / span_s):.1f},"
                f"{CHART_HEIGHT * (1 - p.values.get(name, 0.0) / peak):.1f}"
                for p in kept
            )

        return {
            "width": CHART_WIDTH,
            "height": CHART_HEIGHT,
            "peak": peak,
            "span_min": round(span_s / 60),
            "series": {name: points(name) for name in names},
            "samples": len(kept),
            "last": kept[-1].values if kept else None,
        }
