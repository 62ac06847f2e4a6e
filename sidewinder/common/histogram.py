"""Histogram counts kept as plain ints, bumped on the event loop, read by metrics collectors.

sizes = Buckets((1024, 4096))
sizes.observe(700)            # counts [1, 0, 0], total 700
sizes.observe(5000, times=3)  # three observations of 5000: counts [1, 0, 3]
"""

from __future__ import annotations

import bisect


class Buckets:
    """`counts[i]`: observations at most `bounds[i]` and above the bound before; the last
    count is above every bound. `total`: their sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """`times` observations of `value`."""
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count at most le) for every bound and "+Inf", as Prometheus buckets are."""
        out = []
        seen = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            seen += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), seen))
        return out
