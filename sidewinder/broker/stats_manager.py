"""RocketMQ's BrokerStatsManager: per stats name and key (a topic, `topic@group`, the cluster)
a running total and how many calls made it, snapshotted into minute, hour and day windows, from
which VIEW_BROKER_STATS_DATA (315) answers sum, tps and avgpt; and BrokerStats, the put and get
totals recorded at midnight for GET_BROKER_RUNTIME_INFO's "today" and "yesterday".

    stats = BrokerStatsManager("DefaultCluster", store.stats, pulls)
    stats.tick()                                  # every 10 s (the broker's timer)
    stats.item(TOPIC_PUT_NUMS, "Orders").minute() # StatsSnapshot(sum, tps, avgpt, times)
    stats.tps_group_get_nums("billing", "Orders") # GET_CONSUME_STATS' consumeTps
    stats.inc_send_back("billing", "Orders")      # SNDBCK_PUT_NUMS, per CONSUMER_SEND_MSG_BACK

Nothing is counted here on the hot path: puts are counted per put or received chunk by the store
(`StoreStats.topics`) and pulls per pull by `PullStats`, as running totals; each tick copies
those totals into the items, then snapshots every item, as RocketMQ's StatsItemSet samples its
own adders. The windows are RocketMQ's: a snapshot every 10 s kept for a minute (7), every
10 minutes kept for an hour (7), every hour kept for a day (25), the first one of each preceded
by a zero one a period back, so an item's first figures count from zero.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sidewinder.broker.pull_stats import PullStats
from sidewinder.store.stats import StoreStats

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
# RocketMQ's other names (queue, disk, latency and commercial stats) have no items here: asked
# for, they are answered as RocketMQ answers a key it has not seen, "not exist".
STATS_NAMES = (
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
)

MINUTE_SAMPLE_MS = 10_000  # the minute window: one snapshot every 10 s ...
MINUTE_SNAPSHOTS = 7  # ... six periods of them
HOUR_SAMPLE_MS = 600_000
HOUR_SNAPSHOTS = 7
DAY_SAMPLE_MS = 3_600_000
DAY_SNAPSHOTS = 25

_Snapshot = tuple[int, int, int]  # (at ms, times, value)


def wall_ms() -> int:
    return int(time.time() * 1000)


def next_morning_ms(now_ms: int) -> int:
    """The next local midnight after `now_ms` (RocketMQ's computeNextMorningTimeMillis)."""
    today = datetime.fromtimestamp(now_ms / 1000).date()
    morning = datetime.combine(today + timedelta(days=1), datetime.min.time())
    return int(morning.timestamp() * 1000)


def stats_key(topic: str, group: str) -> str:
    return f"{topic}@{group}"


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window's figures: `sum` of values and `times` (calls) in it, `tps` the sum per
    second over it, `avgpt` the sum per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


def _figures(window: deque[_Snapshot]) -> StatsSnapshot:
    if not window:
        return StatsSnapshot()
    first_at, first_times, first_value = window[0]
    last_at, last_times, last_value = window[-1]
    total = last_value - first_value
    elapsed_ms = last_at - first_at
    times = last_times - first_times
    return StatsSnapshot(
        total,
        total * 1000.0 / elapsed_ms if elapsed_ms > 0 else 0.0,
        total / times if times > 0 else 0.0,
        times,
    )


class StatsItem:
    """A running `value` and `times` (calls that added to it), and its three windows."""

    __slots__ = ("day", "hour", "minute", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[_Snapshot] = deque(maxlen=MINUTE_SNAPSHOTS)
        self.hour: deque[_Snapshot] = deque(maxlen=HOUR_SNAPSHOTS)
        self.day: deque[_Snapshot] = deque(maxlen=DAY_SNAPSHOTS)

    def add(self, value: int, times: int = 1) -> None:
        self.value += value
        self.times += times

    def sample(self, window: deque[_Snapshot], now_ms: int, period_ms: int) -> None:
        if not window:
            window.append((now_ms - period_ms, 0, 0))
        window.append((now_ms, self.times, self.value))

    def in_minute(self) -> StatsSnapshot:
        return _figures(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return _figures(self.hour)

    def in_day(self) -> StatsSnapshot:
        return _figures(self.day)


@dataclass(slots=True)
class DailyTotals:
    """RocketMQ's BrokerStats: the store's put and get totals as they stood at the last two
    midnights (0 until the broker has seen one)."""

    put_yesterday_morning: int = 0
    put_today_morning: int = 0
    get_yesterday_morning: int = 0
    get_today_morning: int = 0

    def record(self, put_total: int, get_total: int) -> None:
        self.put_yesterday_morning = self.put_today_morning
        self.get_yesterday_morning = self.get_today_morning
        self.put_today_morning = put_total
        self.get_today_morning = get_total


class BrokerStatsManager:
    def __init__(
        self,
        cluster_name: str,
        store_stats: StoreStats,
        pulls: PullStats,
        *,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        """`clock`: milliseconds since the epoch; the hour and day windows take their first
        snapshots at the first tick, as RocketMQ's do when the broker starts."""
        self.cluster_name = cluster_name
        self.store_stats = store_stats
        self.pulls = pulls
        self.clock = clock
        self.sets: dict[str, dict[str, StatsItem]] = {name: {} for name in STATS_NAMES}
        self.daily = DailyTotals()
        start = clock()
        self._next_hour_sample = start
        self._next_day_sample = start
        self._next_morning = next_morning_ms(start)

    # -- counting ------------------------------------------------------------------------------
    def inc_send_back(self, group: str, topic: str) -> None:
        """A message of `topic` the group sent back for a retry (or to its dead letters)."""
        self._item(SNDBCK_PUT_NUMS, stats_key(topic, group)).add(1)

    def sync(self) -> None:
        """Copy the store's and the pulls' running totals into their items (new keys get
        items), as they stand now."""
        put_nums, put_size = self.sets[TOPIC_PUT_NUMS], self.sets[TOPIC_PUT_SIZE]
        for topic, puts in self.store_stats.topics.items():
            _set(put_nums, topic, puts.messages, puts.puts)
            _set(put_size, topic, puts.size, puts.puts)
        get_nums, get_size = self.sets[GROUP_GET_NUMS], self.sets[GROUP_GET_SIZE]
        pulled = 0
        for (topic, group), (messages, size, pulls) in self.pulls.out.items():
            key = stats_key(topic, group)
            _set(get_nums, key, messages, pulls)
            _set(get_size, key, size, pulls)
            pulled += messages
        # RocketMQ adds to these without counting calls: their avgpt is 0.
        if self.store_stats.put_times_total:
            _set(self.sets[BROKER_PUT_NUMS], self.cluster_name, self.store_stats.put_times_total, 0)
        if pulled:
            _set(self.sets[BROKER_GET_NUMS], self.cluster_name, pulled, 0)

    def tick(self) -> None:
        """Every 10 s: snapshot every item's minute window; its hour window every 10 minutes
        and its day window every hour since the first tick; at local midnight, the day's
        totals."""
        now = self.clock()
        self.sync()
        hour = now >= self._next_hour_sample
        day = now >= self._next_day_sample
        for items in self.sets.values():
            for item in items.values():
                item.sample(item.minute, now, MINUTE_SAMPLE_MS)
                if hour:
                    item.sample(item.hour, now, HOUR_SAMPLE_MS)
                if day:
                    item.sample(item.day, now, DAY_SAMPLE_MS)
        while self._next_hour_sample <= now:
            self._next_hour_sample += HOUR_SAMPLE_MS
        while self._next_day_sample <= now:
            self._next_day_sample += DAY_SAMPLE_MS
        if now >= self._next_morning:
            stats = self.store_stats
            self.daily.record(stats.put_times_total, stats.get_transferred_messages)
            self._next_morning = next_morning_ms(now)

    # -- reading -------------------------------------------------------------------------------
    def item(self, name: str, key: str) -> StatsItem | None:
        """The item, None for a name or key never counted (RocketMQ's getStatsItem)."""
        self.sync()
        items = self.sets.get(name)
        return None if items is None else items.get(key)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second the group pulled from the topic over the last minute."""
        item = self.sets[GROUP_GET_NUMS].get(stats_key(topic, group))
        return 0.0 if item is None else item.in_minute().tps

    # -- forgetting ----------------------------------------------------------------------------
    def on_topic_deleted(self, topic: str) -> None:
        """Drop the topic's items and the totals they are copied from."""
        self.store_stats.topics.pop(topic, None)
        for pair in [pair for pair in self.pulls.out if pair[0] == topic]:
            del self.pulls.out[pair]
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].pop(topic, None)
        prefix = f"{topic}@"
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            items = self.sets[name]
            for key in [key for key in items if key.startswith(prefix)]:
                del items[key]

    def on_group_deleted(self, group: str) -> None:
        for pair in [pair for pair in self.pulls.out if pair[1] == group]:
            del self.pulls.out[pair]
        suffix = f"@{group}"
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            items = self.sets[name]
            for key in [key for key in items if key.endswith(suffix)]:
                del items[key]

    def _item(self, name: str, key: str) -> StatsItem:
        items = self.sets[name]
        item = items.get(key)
        if item is None:
            item = items[key] = StatsItem()
        return item


def _set(items: dict[str, StatsItem], key: str, value: int, times: int) -> None:
    item = items.get(key)
    if item is None:
        item = items[key] = StatsItem()
    item.value = value
    item.times = times
