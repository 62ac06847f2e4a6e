"""Store statistics for GET_BROKER_RUNTIME_INFO, under RocketMQ's StoreStatsService key names,
and the per-topic put totals the broker's statistics (BrokerStatsManager) and metrics read.

Counters are bumped on the event loop (plain ints, no locks), once per put or per received
chunk of puts, never per message; `sample()` runs once a second and keeps a ring of
snapshots, from which rates over 10 s, 1 min and 10 min are computed.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from sidewinder.common.histogram import Buckets

# Upper bounds (ms) of the put-latency buckets, as RocketMQ prints putMessageDistributeTime.
LATENCY_BOUNDS_MS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
LATENCY_LABELS = (
    *("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s"),
    *("1~2s", "2~3s", "3~4s", "4~5s", "5~10s", "10s~"),
)
RATE_WINDOWS_S = (10, 60, 600)
# Upper bounds (bytes) of RocketMQ 5's rocketmq_message_size buckets: 1 KB .. 4 MB.
MESSAGE_SIZE_BOUNDS = (1024, 4096, 512 * 1024, 1 << 20, 2 << 20, 4 << 20)


@dataclass(slots=True)
class TopicPuts:
    """Messages and bytes (record sizes) put to one topic, by how many puts (a batch send is
    one), and, for metrics, their sizes in buckets."""

    messages: int = 0
    size: int = 0
    puts: int = 0
    sizes: Buckets | None = None

    def record(self, count: int, size: int, puts: int) -> None:
        """`count` messages of `size` bytes in all, put together by `puts` puts: each is counted
        at their average size (one bucket search per put or per received chunk, not per
        message)."""
        self.messages += count
        self.size += size
        self.puts += puts
        if self.sizes is not None:
            self.sizes.observe(size / count, count)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    at: float
    puts: int
    gets_found: int
    gets_miss: int
    transferred: int


@dataclass
class StoreStats:
    boot_timestamp_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    put_times_total: int = 0
    put_size_total: int = 0
    put_failed_times: int = 0
    put_time_max_ms: int = 0
    put_latency: list[int] = field(default_factory=lambda: [0] * len(LATENCY_LABELS))
    get_found_times: int = 0
    get_miss_times: int = 0
    get_transferred_messages: int = 0
    get_time_max_ms: int = 0
    topics: dict[str, TopicPuts] = field(default_factory=dict)
    size_buckets: bool = False  # per-topic size histograms (for metrics) beside the totals
    _ring: deque[_Snapshot] = field(default_factory=lambda: deque(maxlen=max(RATE_WINDOWS_S) + 1))

    def record_put(self, count: int, size: int, elapsed_ms: float, puts: int = 1) -> None:
        """`count` messages of `size` bytes in all, stored by `puts` puts (sends) together."""
        self.put_times_total += count
        self.put_size_total += size
        millis = int(elapsed_ms)
        if millis == 0:  # nearly always: skip the search
            self.put_latency[0] += puts
            return
        if millis > self.put_time_max_ms:
            self.put_time_max_ms = millis
        self.put_latency[bisect.bisect_left(LATENCY_BOUNDS_MS, millis)] += puts

    def record_topic_put(self, topic: str, count: int, size: int, puts: int = 1) -> None:
        totals = self.topics.get(topic)
        if totals is None:
            totals = self.topics[topic] = TopicPuts(
                sizes=Buckets(MESSAGE_SIZE_BOUNDS) if self.size_buckets else None
            )
        totals.record(count, size, puts)

    def record_get(self, found: int, elapsed_ms: float) -> None:
        if found:
            self.get_found_times += 1
            self.get_transferred_messages += found
        else:
            self.get_miss_times += 1
        self.get_time_max_ms = max(self.get_time_max_ms, int(elapsed_ms))

    async def sample_every_second(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(1)

    def sample(self, now: float | None = None) -> None:
        self._ring.append(
            _Snapshot(
                time.monotonic() if now is None else now,
                self.put_times_total,
                self.get_found_times,
                self.get_miss_times,
                self.get_transferred_messages,
            )
        )

    def _rates(self, pick: str) -> str:
        """Per-second rates over each window with enough samples, space separated."""
        if not self._ring:
            return ""
        last = self._ring[-1]
        words = []
        for window in RATE_WINDOWS_S:
            if len(self._ring) <= window:
                words.append("")
                continue
            first = self._ring[-window - 1]
            elapsed = last.at - first.at
            words.append(repr((getattr(last, pick) - getattr(first, pick)) / elapsed))
        return " ".join(words)

    def latency_percentile_ms(self, fraction: float) -> int:
        """Upper bound of the bucket holding the `fraction` quantile of put latency."""
        total = sum(self.put_latency)
        if total == 0:
            return 0
        seen = 0
        for bound, count in zip(
            (*LATENCY_BOUNDS_MS, 2 * LATENCY_BOUNDS_MS[-1]), self.put_latency, strict=True
        ):
            seen += count
            if seen >= fraction * total:
                return bound
        return 2 * LATENCY_BOUNDS_MS[-1]

    def runtime_info(self) -> dict[str, str]:
        up = int(time.time() * 1000) - self.boot_timestamp_ms
        days, rest = divmod(up // 1000, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        average = self.put_size_total / self.put_times_total if self.put_times_total else 0.0
        return {
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "putMessageTimesTotal": str(self.put_times_total),
            "putMessageSizeTotal": str(self.put_size_total),
            "putMessageAverageSize": repr(average),
            "putMessageFailedTimes": str(self.put_failed_times),
            "putMessageEntireTimeMax": str(self.put_time_max_ms),
            "putMessageDistributeTime": " ".join(
                f"[{label}]:{count}"
                for label, count in zip(LATENCY_LABELS, self.put_latency, strict=True)
            )
            + " ",
            "putLatency99": f"{self.latency_percentile_ms(0.99):.2f}",
            "putLatency999": f"{self.latency_percentile_ms(0.999):.2f}",
            "getMessageEntireTimeMax": str(self.get_time_max_ms),
            "putTps": self._rates("puts"),
            "getFoundTps": self._rates("gets_found"),
            "getMissTps": self._rates("gets_miss"),
            "getTransferedTps": self._rates("transferred"),
            "getTotalTps": _sum_rates(self._rates("gets_found"), self._rates("gets_miss")),
        }


def _sum_rates(a: str, b: str) -> str:
    return " ".join(
        "" if not x or not y else repr(float(x) + float(y))
        for x, y in zip(a.split(" "), b.split(" "), strict=True)
    )


def partition_usage(path: Path) -> tuple[int, int]:
    """(bytes used, bytes usable) of the partition holding `path` (or its nearest existing
    parent), as `df` counts them: root-reserved blocks are neither. OSError if unreadable."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    fs = os.statvfs(probe)
    return (fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_bavail * fs.f_frsize


def disk_used_ratio(path: Path) -> float:
    """Used fraction of the partition holding `path`, as RocketMQ 4.9's
    getDiskPartitionSpaceUsedPercent (and `df`) count it: used / (used + usable), rounded up to
    a whole percent, where the root-reserved blocks count as neither; -1 if it cannot be read."""
    try:
        used, usable = partition_usage(path)
    except OSError:
        return -1.0
    entire = used + usable
    if entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100
