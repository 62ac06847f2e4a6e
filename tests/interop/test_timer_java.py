"""A stock RocketMQ 4.9 Java client's timer messages: TIMER_DELAY_SEC set as a user property.

Against Sidewinder only: RocketMQ 4.9.7, the reference broker, knows nothing of these properties
and delivers such a message at once (it is RocketMQ 5's feature, which Sidewinder serves on the
4.x wire), so the same scenario would fail there by design, not as a wrong test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from interop.mqadmin import create_topic
from interop.sidewinder import SidewinderCluster
from tests.helpers import unique
from tests.interop.scenarios import produce_all, start_consumer, wait_with_arrivals

pytestmark = pytest.mark.interop

DELAY_S = 3
CLOCK_SLACK_MS = 100  # born and store times are read from the same machine clock
LATE_MS = 1000 + 1000  # a tick of precision, and a slow shared machine


def test_java_timer_delay_sec_holds_each_message_back(tmp_path: Path) -> None:
    cluster = SidewinderCluster(tmp_path).start()
    try:
        topic = unique("TimerJava")
        create_topic(cluster.namesrv_addr, topic, queues=4)
        count = 10
        proc = start_consumer(cluster, "java", topic, count, group=unique("CG"), timeout_s=60)
        try:
            sent = produce_all(
                cluster,
                "java",
                topic,
                count,
                group=unique("PG"),
                prop=[f"TIMER_DELAY_SEC={DELAY_S}"],
                timeout_s=60,
            )
            run, seen = wait_with_arrivals(proc)
        finally:
            proc.kill()
        run.check()
        assert len(sent) == count
        received = [e for e in run.events if e.get("event") == "received"]
        assert sorted(e["msgId"] for e in received) == sorted(e["msgId"] for e in sent)
        for e, seen_at in zip(run.events, seen, strict=True):
            if e.get("event") != "received":
                continue
            held_ms = e["storeTimestamp"] - e["bornTimestamp"]
            assert DELAY_S * 1000 - CLOCK_SLACK_MS <= held_ms <= DELAY_S * 1000 + LATE_MS, e
            assert seen_at * 1000 - e["bornTimestamp"] >= DELAY_S * 1000 - CLOCK_SLACK_MS
            assert e["topic"] == topic and e["properties"].get("TIMER_DELAY_SEC") == str(DELAY_S)
    finally:
        cluster.stop()
