"""What consumers pulled: per topic and group the messages and bytes handed out by how many
pulls that found messages, and per queue
the offset each group's next pull starts at (RocketMQ's pullOffsetTable).

    stats = PullStats()
    stats.pulled("Orders", "billing", queue_id=0, messages=32, size=8192, next_offset=132)
    stats.out[("Orders", "billing")]        # [32, 8192, 1]: messages, bytes, pulls
    stats.pull_offset("billing", "Orders", 0)  # 132 (-1 before any pull)

Recorded once per pull (a batch of messages), on the event loop; the broker's metrics read it
for rocketmq_messages_out_total, rocketmq_throughput_out_total and the consumer gauges, and its
statistics (BrokerStatsManager) for GROUP_GET_NUMS and GROUP_GET_SIZE.
"""

from __future__ import annotations


class PullStats:
    def __init__(self) -> None:
        # (topic, group) -> [messages, bytes, pulls]
        self.out: dict[tuple[str, str], list[int]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}  # (group, topic, queue) -> next

    def pulled(
        self, topic: str, group: str, queue_id: int, messages: int, size: int, next_offset: int
    ) -> None:
        self.offsets[(group, topic, queue_id)] = next_offset
        if messages:
            counts = self.out.get((topic, group))
            if counts is None:
                self.out[(topic, group)] = [messages, size, 1]
            else:
                counts[0] += messages
                counts[1] += size
                counts[2] += 1

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Where the group's next pull of the queue starts; -1 before it pulled it."""
        return self.offsets.get((group, topic, queue_id), -1)
