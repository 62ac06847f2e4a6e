"""The push consumer's POP mode, as RocketMQ 5's push consumer runs for a group set to POP
(`mqadmin setConsumeMode -m POP`): no queues owned and no offsets committed by the client. One
long-polling pop loop per broker of each subscribed topic hands the messages to the listener;
a message it consumed is acked, one it failed is hidden for a retry delay (changing its
invisible time) and then comes back through the group's retry topic, counting a reconsume. The
broker moves it to the DLQ after the group's retry limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from sidewinder.client.pop_client import PopClient, PoppedMessage
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.common.log import library_logger
from sidewinder.protocol.pop import ConsumeInitMode
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.connection import RemotingError

log = library_logger(__name__)

# How long a failed message stays hidden before it comes back, by its reconsume count: RocketMQ's
# delay levels from the third on, which is what a 4.x retry waits too.
RETRY_DELAYS_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
FAILED_POP_PAUSE_S = 3.0  # Java's pullTimeDelayMillsWhenException

Broker = tuple[str, str]  # (broker name, master address)


def retry_delay_s(reconsume_times: int) -> float:
    return float(RETRY_DELAYS_S[min(max(reconsume_times, 0), len(RETRY_DELAYS_S) - 1)])


class PopDelivery:
    """The pop loops of one push consumer. `consume(messages)` runs the listener and says
    whether it succeeded; `running()` is the consumer's."""

    def __init__(
        self,
        pops: PopClient,
        subscriptions: dict[str, Subscription],
        consume: Callable[[list[PoppedMessage]], Awaitable[bool]],
        running: Callable[[], bool],
        *,
        init_mode: ConsumeInitMode,
        batch: int,
        batch_size: int,
        invisible_s: float,
        await_s: float,
        max_in_flight: int,
        retry_delay: Callable[[int], float] = retry_delay_s,
    ) -> None:
        self.pops = pops
        self.subscriptions = subscriptions
        self.consume = consume
        self.running = running
        self.init_mode = init_mode
        self.batch = batch
        self.batch_size = batch_size
        self.invisible_s = invisible_s
        self.await_s = await_s
        self.max_in_flight = max_in_flight
        self.retry_delay = retry_delay
        self.loops: dict[tuple[str, Broker], asyncio.Task[None]] = {}
        self.consuming: set[asyncio.Task[None]] = set()
        self.in_flight = 0

    async def apply(self, _allocated: set[MessageQueue]) -> None:
        """The group member's rebalance callback: pop from every broker serving a subscribed
        topic (every member pops every broker; the broker spreads the queues), whatever the
        average allocation would give this member."""
        wanted: set[tuple[str, Broker]] = set()
        for topic in self.subscriptions:
            try:
                wanted |= {(topic, broker) for broker in await self.pops.brokers(topic)}
            except ClientError:
                continue  # no route yet: the next rebalance looks again
        for key in [k for k in self.loops if k not in wanted]:
            self.loops.pop(key).cancel()
        loop = asyncio.get_running_loop()
        for key in sorted(wanted - self.loops.keys()):
            self.loops[key] = loop.create_task(self._pop_loop(*key))

    async def close(self, drain_timeout_s: float) -> None:
        loops = list(self.loops.values())
        for task in loops:
            task.cancel()
        if loops:
            await asyncio.wait(loops, timeout=self.await_s + 1)
        if self.consuming:
            await asyncio.wait(self.consuming, timeout=drain_timeout_s)

    async def _pop_loop(self, topic: str, broker: Broker) -> None:
        while self.running():
            if self.in_flight >= self.max_in_flight:
                await asyncio.sleep(0.05)  # flow control: the listeners are behind
                continue
            try:
                messages = await self.pops.pop(
                    self.subscriptions[topic],
                    broker,
                    max_messages=self.batch,
                    invisible_s=self.invisible_s,
                    await_s=self.await_s,
                    init_mode=self.init_mode,
                )
            except (ClientError, RemotingError, OSError) as exc:
                log.warning("client.pop_failed", topic=topic, broker=broker[0], error=str(exc))
                await asyncio.sleep(FAILED_POP_PAUSE_S)
                continue
            for start in range(0, len(messages), self.batch_size):
                self._submit(messages[start : start + self.batch_size])

    def _submit(self, messages: Sequence[PoppedMessage]) -> None:
        self.in_flight += len(messages)
        task = asyncio.get_running_loop().create_task(self._settle(list(messages)))
        self.consuming.add(task)
        task.add_done_callback(self.consuming.discard)

    async def _settle(self, messages: list[PoppedMessage]) -> None:
        try:
            consumed = await self.consume(messages)
            for message in messages:
                try:
                    if consumed:
                        await self.pops.ack(message)
                    else:
                        delay_s = self.retry_delay(message.reconsume_times)
                        await self.pops.change_invisible_duration(message, delay_s)
                except (ClientError, RemotingError, OSError) as exc:
                    # The message comes back once its invisible time runs out.
                    log.warning("client.pop_settle_failed", msg_id=message.msg_id, error=str(exc))
        finally:
            self.in_flight -= len(messages)
