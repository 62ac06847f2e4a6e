"""BrokerStatsManager's windows and midnight totals on a fake clock: no sleeping."""

from __future__ import annotations

import pytest

from sidewinder.broker.pull_stats import PullStats
from sidewinder.broker.stats_manager import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    StatsSnapshot,
    next_morning_ms,
)
from sidewinder.store.stats import StoreStats

START_MS = 1_700_000_000_000


class Clock:
    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store() -> StoreStats:
    return StoreStats()


@pytest.fixture
def pulls() -> PullStats:
    return PullStats()


@pytest.fixture
def stats(store: StoreStats, pulls: PullStats, clock: Clock) -> BrokerStatsManager:
    return BrokerStatsManager("DefaultCluster", store, pulls, clock=clock)


def tick_for(stats: BrokerStatsManager, clock: Clock, seconds: int) -> None:
    """Tick every 10 s for `seconds`, as the broker's timer does."""
    for _ in range(seconds // 10):
        clock.now_ms += 10_000
        stats.tick()


def put(store: StoreStats, topic: str, count: int, size: int, puts: int = 1) -> None:
    store.record_put(count, size, 0.0, puts)
    store.record_topic_put(topic, count, size, puts)


def test_an_item_appears_with_its_first_count_and_reads_zero_until_sampled(
    stats: BrokerStatsManager, store: StoreStats
) -> None:
    assert stats.item(TOPIC_PUT_NUMS, "Orders") is None
    put(store, "Orders", 10, 1000)
    item = stats.item(TOPIC_PUT_NUMS, "Orders")
    assert item is not None
    assert item.in_minute() == StatsSnapshot() == item.in_hour() == item.in_day()


def test_first_snapshot_counts_from_zero_a_period_back(
    stats: BrokerStatsManager, store: StoreStats, clock: Clock
) -> None:
    stats.tick()  # the broker's first tick, before anything was put
    put(store, "Orders", 30, 3000, puts=3)
    tick_for(stats, clock, 10)
    nums = stats.item(TOPIC_PUT_NUMS, "Orders")
    size = stats.item(TOPIC_PUT_SIZE, "Orders")
    assert nums is not None and size is not None
    assert nums.in_minute() == StatsSnapshot(30, 3.0, 10.0, 3)
    assert size.in_minute() == StatsSnapshot(3000, 300.0, 1000.0, 3)
    # The hour and day windows sampled at the first tick, when the item did not exist.
    assert nums.in_hour() == StatsSnapshot() == nums.in_day()


def test_minute_window_forgets_what_is_older_than_a_minute(
    stats: BrokerStatsManager, store: StoreStats, clock: Clock
) -> None:
    stats.tick()
    put(store, "Orders", 60, 600)
    tick_for(stats, clock, 10)
    item = stats.item(TOPIC_PUT_NUMS, "Orders")
    assert item is not None
    tick_for(stats, clock, 50)
    assert item.in_minute().sum == 60  # six periods back: still in the window
    assert item.in_minute().tps == pytest.approx(1.0)
    tick_for(stats, clock, 10)
    assert item.in_minute() == StatsSnapshot(0, 0.0, 0.0, 0)
    put(store, "Orders", 6, 60)
    tick_for(stats, clock, 10)
    assert item.in_minute().sum == 6
    assert item.in_minute().tps == pytest.approx(0.1)


def test_hour_window_samples_every_ten_minutes_and_day_window_every_hour(
    stats: BrokerStatsManager, store: StoreStats, clock: Clock
) -> None:
    stats.tick()
    put(store, "Orders", 5, 50)
    tick_for(stats, clock, 590)
    item = stats.item(TOPIC_PUT_NUMS, "Orders")
    assert item is not None
    assert item.in_hour().sum == 0  # the first 10-minute sample is due at 600 s
    tick_for(stats, clock, 10)
    assert item.in_hour() == StatsSnapshot(5, 5 / 600, 5.0, 1)
    put(store, "Orders", 7, 70)
    tick_for(stats, clock, 3000)  # at 3600 s: the first hourly sample
    assert item.in_hour().sum == 12
    assert item.in_day().sum == 12
    tick_for(stats, clock, 3600)  # the hour window slides past both puts
    assert item.in_hour().sum == 0
    assert item.in_day().sum == 12
    tick_for(stats, clock, 24 * 3600)
    assert item.in_day().sum == 0


def test_group_gets_and_consume_tps(
    stats: BrokerStatsManager, pulls: PullStats, clock: Clock
) -> None:
    stats.tick()
    pulls.pulled("Orders", "billing", 0, 32, 3200, 32)
    pulls.pulled("Orders", "billing", 1, 28, 2800, 28)
    pulls.pulled("Orders", "billing", 1, 0, 0, 28)  # found nothing: not a get
    tick_for(stats, clock, 10)
    nums = stats.item(GROUP_GET_NUMS, "Orders@billing")
    size = stats.item(GROUP_GET_SIZE, "Orders@billing")
    broker = stats.item(BROKER_GET_NUMS, "DefaultCluster")
    assert nums is not None and size is not None and broker is not None
    assert nums.in_minute() == StatsSnapshot(60, 6.0, 30.0, 2)
    assert size.in_minute().sum == 6000
    assert broker.in_minute() == StatsSnapshot(60, 6.0, 0.0, 0)  # RocketMQ counts no calls
    assert stats.tps_group_get_nums("billing", "Orders") == pytest.approx(6.0)
    assert stats.tps_group_get_nums("billing", "Other") == 0.0


def test_broker_puts_and_send_backs(
    stats: BrokerStatsManager, store: StoreStats, clock: Clock
) -> None:
    stats.tick()
    put(store, "Orders", 4, 400)
    stats.inc_send_back("billing", "Orders")
    stats.inc_send_back("billing", "Orders")
    tick_for(stats, clock, 10)
    broker = stats.item(BROKER_PUT_NUMS, "DefaultCluster")
    back = stats.item(SNDBCK_PUT_NUMS, "Orders@billing")
    assert broker is not None and back is not None
    assert broker.in_minute().sum == 4
    assert back.in_minute() == StatsSnapshot(2, 0.2, 1.0, 2)
    assert stats.item("NO_SUCH_STATS", "Orders") is None


def test_midnight_records_today_and_yesterday(
    store: StoreStats, pulls: PullStats, clock: Clock
) -> None:
    morning = next_morning_ms(START_MS)
    clock.now_ms = morning - 25_000
    stats = BrokerStatsManager("DefaultCluster", store, pulls, clock=clock)
    store.record_put(100, 1000, 0.0)
    store.record_get(40, 0.0)
    tick_for(stats, clock, 20)  # 5 s before midnight
    assert (stats.daily.put_today_morning, stats.daily.get_today_morning) == (0, 0)
    tick_for(stats, clock, 10)
    assert (stats.daily.put_today_morning, stats.daily.get_today_morning) == (100, 40)
    assert stats.daily.put_yesterday_morning == 0
    store.record_put(50, 500, 0.0)
    tick_for(stats, clock, 3600)
    assert stats.daily.put_today_morning == 100  # once a day
    clock.now_ms = next_morning_ms(clock.now_ms) + 1_000
    stats.tick()
    assert (stats.daily.put_yesterday_morning, stats.daily.put_today_morning) == (100, 150)
    assert (stats.daily.get_yesterday_morning, stats.daily.get_today_morning) == (40, 40)


def test_deleting_a_topic_or_group_drops_their_items(
    stats: BrokerStatsManager, store: StoreStats, pulls: PullStats
) -> None:
    put(store, "Orders", 1, 10)
    put(store, "Orders2", 1, 10)
    pulls.pulled("Orders", "billing", 0, 1, 10, 1)
    pulls.pulled("Orders2", "billing", 0, 1, 10, 1)
    pulls.pulled("Orders2", "audit", 0, 1, 10, 1)
    stats.inc_send_back("billing", "Orders")
    stats.on_topic_deleted("Orders")
    assert stats.item(TOPIC_PUT_NUMS, "Orders") is None
    assert stats.item(GROUP_GET_NUMS, "Orders@billing") is None
    assert stats.item(SNDBCK_PUT_NUMS, "Orders@billing") is None
    assert stats.item(TOPIC_PUT_NUMS, "Orders2") is not None
    stats.on_group_deleted("billing")
    assert stats.item(GROUP_GET_NUMS, "Orders2@billing") is None
    assert stats.item(GROUP_GET_NUMS, "Orders2@audit") is not None
