"""Timer messages at any time (RocketMQ 5's TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS).

    diverted = timer_for_send(message, settings, now_ms)   # the send path (HookUtils)
    service = TimerService(store, timers, flush_interval_ms=1000)
    await service.load(); service.start(); ...; await service.stop()

A send asking for a later time is stored in `rmq_sys_wheel_timer` queue 0, its real topic and
queue in REAL_TOPIC / REAL_QID and its due time, rounded down to the precision, in TIMER_OUT_MS
(a time already past is stored as a plain message: delivered at once). The service then, on the
event loop:

- enqueues each new timer-topic entry into the timer log and wheel (store/timer_store.py);
- at each tick, once a slot's time has passed, puts each of its messages to its real topic and
  queue without REAL_TOPIC / REAL_QID, with TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS; a message
  parked beyond the roll window goes back into the timer topic instead (TIMER_ROLL_TIMES);
- passes over a delete marker (TIMER_DEL_UNIQKEY = real topic + "+" + UNIQ_KEY, sent for the
  same time: RocketMQ 5's recall) and the message of its slot it names: neither is put;
- every timerFlushIntervalMs, flushes log, wheel and checkpoint on an executor, and every 30 s
  deletes the timer log files wholly delivered (RocketMQ 5 deletes those whose messages the
  CommitLog no longer holds; here the CommitLog keeps what pending timers read, see
  MessageStore.add_commit_log_floor, so the delivered mark is the one to go by).

Exactly once across a kill, where RocketMQ 5 delivers again what it delivered since its last
checkpoint: after each put, how far the slot got (and the CommitLog end of that put) is written
to the checkpoint's map at once. At start, the next unit of a half-delivered slot is looked
for in the CommitLog after that end, where a put the kill interrupted before the note would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from sidewinder.broker.topics import TIMER_TOPIC
from sidewinder.common.service import cancel_and_wait
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.message import MessageConst, decode_properties, encode_properties
from sidewinder.protocol.record import MessageRecord, MessageToStore, message_from_record
from sidewinder.store.mapped_file import DiskFullError, MappedFile
from sidewinder.store.message_store import MessageStore, PutStatus
from sidewinder.store.timer_log import TimerUnit
from sidewinder.store.timer_store import TimerStore

log = structlog.get_logger(__name__)

# In each of TIMER_DELIVER_MS, TIMER_DELAY_SEC and TIMER_DELAY_MS: the send path's cheap test.
TIMER_MARK = b"TIMER_DEL"
_ASKS = (MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS)
RETRY_PAUSE_S = 0.05  # RocketMQ's holdMomentForUnknownError
ENQUEUE_CHUNK = 1000  # entries between yields to the loop
EMPTY_SLOT_CHUNK = 4096  # empty slots walked between yields (a restart after a long stop)
TIMER_LOG_CLEAN_S = 30.0  # RocketMQ 5 cleans its timer log every 30 s


@dataclass(frozen=True, slots=True)
class TimerSettings:
    enabled: bool = True  # timerWheelEnable
    precision_ms: int = 1000  # timerPrecisionMs
    max_delay_sec: int = 3 * 86_400  # timerMaxDelaySec


@dataclass(frozen=True, slots=True)
class TimerRefusal:
    code: int
    remark: str


def snap_precision(precision_ms: int) -> int:
    """RocketMQ 5's setTimerPrecisionMs: the largest of 100, 200, 500, 1000 not above it."""
    candidates = (100, 200, 500, 1000)
    return max((c for c in candidates if c <= precision_ms), default=candidates[0])


def _deliver_ms(props: dict[str, str], now_ms: int) -> int:
    """When the producer asked for (ValueError for a number that does not parse); DELAY_SEC
    first, then DELAY_MS, then DELIVER_MS, as transformTimerMessage reads them."""
    if MessageConst.TIMER_DELAY_SEC in props:
        return now_ms + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000
    if MessageConst.TIMER_DELAY_MS in props:
        return now_ms + int(props[MessageConst.TIMER_DELAY_MS])
    return int(props[MessageConst.TIMER_DELIVER_MS])


def timer_for_send(
    message: MessageToStore, settings: TimerSettings, now_ms: int, *, divert_due: bool = False
) -> MessageToStore | TimerRefusal:
    """The message to store for a send asking for a time (HookUtils.handleScheduleMessage):
    diverted into the timer topic, as it is (not a timer message, or due already), or
    refused. `divert_due`: one due already is diverted too, due now (a batch goes to one
    topic)."""
    if TIMER_MARK not in message.properties or message.sys_flag & 0xC not in (0, 0x8):
        return message  # not asked, or a half / rollback: RocketMQ leaves those alone
    props = decode_properties(message.properties)
    if not any(name in props for name in _ASKS):
        return message
    level = props.get(MessageConst.DELAY_TIME_LEVEL, "0")
    if level.isdigit() and int(level) > 0:
        # A delay level wins: the timer properties are dropped (checkIfTimerMessage).
        for name in _ASKS:
            props.pop(name, None)
        return _with(message, props)
    if message.topic_name == TIMER_TOPIC or MessageConst.TIMER_OUT_MS in props:
        return message  # a rolled timer message, put back by the service
    if not settings.enabled:
        return TimerRefusal(
            ResponseCode.SYSTEM_ERROR,
            "accurate timer message is not enabled, timerWheelEnable is false",
        )
    try:
        deliver_ms = _deliver_ms(props, now_ms)
    except ValueError:
        return _illegal(settings)
    if deliver_ms <= now_ms:
        if MessageConst.TIMER_DEL_UNIQKEY in props:
            return _illegal(settings)  # a delete marker for a time past: nothing to cancel
        if not divert_due:
            return message  # due already: stored as it is, delivered at once
        deliver_ms = now_ms
    if deliver_ms - now_ms > settings.max_delay_sec * 1000:
        return _illegal(settings)
    precision = settings.precision_ms
    # Into the slot before the time: a slot is delivered once its time has wholly passed.
    deliver_ms = deliver_ms - precision if deliver_ms % precision == 0 else deliver_ms
    props[MessageConst.TIMER_OUT_MS] = str(deliver_ms // precision * precision)
    props[MessageConst.REAL_TOPIC] = message.topic_name
    props[MessageConst.REAL_QUEUE_ID] = str(message.queue_id)
    return _with(message, props, topic=TIMER_TOPIC, queue_id=0)


def _with(message: MessageToStore, props: dict[str, str], **changes: object) -> MessageToStore:
    fields = {
        "topic": message.topic,
        "queue_id": message.queue_id,
        "body": message.body,
        "properties": encode_properties(props, trailing=False),
        "flag": message.flag,
        "sys_flag": message.sys_flag,
        "born_timestamp": message.born_timestamp,
        "born_host": message.born_host,
        "store_host": message.store_host,
        "reconsume_times": message.reconsume_times,
        "prepared_transaction_offset": message.prepared_transaction_offset,
    }
    if "topic" in changes:
        changes["topic"] = str(changes["topic"]).encode()
    fields.update(changes)
    return MessageToStore(**fields)  # type: ignore[arg-type]


def _illegal(settings: TimerSettings) -> TimerRefusal:
    return TimerRefusal(
        ResponseCode.MESSAGE_ILLEGAL,
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{settings.max_delay_sec * 1000}ms; or if set del msg, the delay time should be "
        "bigger than the current time",
    )


def delivery_of(record: MessageRecord, unit: TimerUnit, now_ms: int) -> MessageToStore:
    """What a due unit puts (convert / convertMessage): the real message, or for a roll the
    timer message again, one roll more."""
    props = record.properties()
    props[MessageConst.TIMER_ENQUEUE_MS] = str(unit.write_time_ms)
    if unit.rolls:
        rolls = int(props.get(MessageConst.TIMER_ROLL_TIMES, "0") or 0) + 1
        props[MessageConst.TIMER_ROLL_TIMES] = str(rolls)
        topic, queue_id = record.topic, record.queue_id
    else:
        topic = props.pop(MessageConst.REAL_TOPIC, record.topic)
        queue_id = int(props.pop(MessageConst.REAL_QUEUE_ID, "0") or 0)
    props[MessageConst.TIMER_DEQUEUE_MS] = str(now_ms)
    return message_from_record(
        record, topic=topic, queue_id=queue_id, properties=props, prepared_transaction_offset=0
    )


def delete_key(record: MessageRecord) -> str:
    """What a delete marker's TIMER_DEL_UNIQKEY names this timer message by (buildDeleteKey:
    its real topic, "+", its UNIQ_KEY)."""
    props = record.properties()
    topic = props.get(MessageConst.REAL_TOPIC, record.topic)
    return f"{topic}+{props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, '')}"


def _destroy_all(files: list[MappedFile]) -> None:
    for f in files:
        f.destroy()


def _same_delivery(found: MessageRecord, source: MessageRecord, unit: TimerUnit) -> bool:
    """Whether `found` is the put of `unit` (whose timer message is `source`)."""
    props = source.properties()
    topic = source.topic if unit.rolls else props.get(MessageConst.REAL_TOPIC, source.topic)
    if found.topic != topic or found.born_timestamp != source.born_timestamp:
        return False
    if found.body_crc != source.body_crc or bytes(found.body) != bytes(source.body):
        return False
    theirs = found.properties()
    return all(
        theirs.get(name) == props.get(name)
        for name in (MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.TIMER_OUT_MS)
    ) and theirs.get(MessageConst.TIMER_ENQUEUE_MS) == str(unit.write_time_ms)


class TimerService:
    def __init__(
        self,
        store: MessageStore,
        timers: TimerStore,
        *,
        flush_interval_ms: int = 1000,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.store = store
        self.timers = timers
        self.flush_interval_s = flush_interval_ms / 1000
        self.clock = clock
        self._arrived = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._resume: tuple[int, int] = (-1, 0)  # (slot, units delivered) of a cut slot
        self.delivered = 0
        self.cancelled = 0  # messages a delete marker cancelled
        self._loaded = False
        store.arrival_listeners.append(self._on_arrival)
        if not store.is_slave:
            # A slave's timer does not run (its master delivers): its timer-topic entries are
            # never taken, and a floor on them would keep its CommitLog for ever.
            store.add_commit_log_floor(self._commit_log_floor)

    @property
    def delivered_before_ms(self) -> int:
        """Every timer message stored so far that is due before this time has been put. 0 while
        some of the timer topic is not enqueued yet: those may be due already."""
        if self.timers.queue_offset < self.store.max_offset_in_queue(TIMER_TOPIC, 0):
            return 0
        return self.timers.delivered_before_ms()

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self._arrived.set()

    # -- start and stop ------------------------------------------------------------------------
    async def load(self) -> None:
        """Recover, once the store has (it reads the CommitLog). Blocking work on an executor."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        end = await loop.run_in_executor(None, self.timers.recover, self.clock(), self._after)
        self._resume = self._find_cut_slot()
        self._loaded = True
        log.info(
            "timer.recovered",
            timer_log_end=end,
            queue_offset=self.timers.queue_offset,
            read_time_ms=self.timers.read_time_ms,
            resume=self._resume,
            took_ms=round((time.perf_counter() - started) * 1000),
        )

    def _commit_log_floor(self) -> int | None:
        """What CommitLog cleanup must keep: the message of the first pending unit, or of the
        first timer-topic entry not enqueued yet; everything before the timer store is
        recovered."""
        if not self._loaded:
            return 0
        floors = []
        pending = self.timers.commit_log_floor()
        if pending is not None:
            floors.append(pending)
        offset = max(self.timers.queue_offset, self.store.min_offset_in_queue(TIMER_TOPIC, 0))
        if offset < self.store.max_offset_in_queue(TIMER_TOPIC, 0):
            entry = self.store.queue_entry(TIMER_TOPIC, 0, offset)
            floors.append(0 if entry is None else entry.phy_offset)
        return min(floors, default=None)

    def _after(self, unit: TimerUnit) -> int | None:
        record = self.store.lookup_message_by_offset(unit.phy_offset)
        return None if record is None else record.queue_offset + 1

    def _find_cut_slot(self) -> tuple[int, int]:
        """The slot a stop cut short and how many of its units are delivered, counting one
        whose put reached the CommitLog though the note of it did not."""
        read = self.timers.read_time_ms
        noted = self.timers.checkpoint.dequeued
        if noted.slot_ms != read or noted.phy_offset <= 0:
            return (-1, 0)
        units = self.timers.units_of(read)
        done = min(noted.done, len(units))
        if done < len(units):
            source = self.store.lookup_message_by_offset(units[done][1].phy_offset)
            if source is not None and noted.phy_offset <= self.store.max_phy_offset:
                for found in self.store.records_from(noted.phy_offset):
                    if _same_delivery(found, source, units[done][1]):
                        done += 1
                        self.timers.delivered(read, done, found.phy_offset + found.total_size)
                        break
        return (read, done)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(), name="timer"),
            loop.create_task(self._flush_periodically(), name="timer-flush"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await asyncio.get_running_loop().run_in_executor(None, self.timers.close)

    async def _flush_periodically(self) -> None:
        """Flush every timerFlushIntervalMs; every TIMER_LOG_CLEAN_S, after a flush (never
        beside one), delete the timer log files wholly delivered."""
        loop = asyncio.get_running_loop()
        cleaned_at = time.monotonic()
        while True:
            await asyncio.sleep(self.flush_interval_s)
            try:
                await loop.run_in_executor(None, self.timers.flush)
                if time.monotonic() - cleaned_at >= TIMER_LOG_CLEAN_S:
                    cleaned_at = time.monotonic()
                    await self.clean_timer_log()
            except OSError as exc:
                log.error("timer.flush_failed", error=str(exc))

    async def clean_timer_log(self) -> list[str]:
        """Delete the timer log files no pending unit is in; their names."""
        dropped = self.timers.drop_delivered_files()  # on the loop, which appends to the log
        if dropped:
            await asyncio.get_running_loop().run_in_executor(None, _destroy_all, dropped)
            log.info("timer.log_cleaned", deleted=[f.path.name for f in dropped])
        return [f.path.name for f in dropped]

    # -- the tick ------------------------------------------------------------------------------
    async def _run(self) -> None:
        precision = self.timers.precision_ms
        disk_full_since: float | None = None
        while True:
            now = self.clock()
            self.timers.move_write_time(now)
            try:
                while self._enqueue_some():
                    await asyncio.sleep(0)
            except DiskFullError as exc:
                # The entry stays next in the queue; it is enqueued once there is room again.
                if disk_full_since is None:
                    disk_full_since = time.monotonic()
                    log.error("timer.enqueue_paused", reason=str(exc))
            else:
                if disk_full_since is not None:
                    log.info("timer.enqueue_resumed", paused_s=time.monotonic() - disk_full_since)
                    disk_full_since = None
            await self._deliver_due()
            # Wake at the next tick (a slot becomes due), or when a timer message arrives.
            wait_ms = self.timers.write_time_ms + precision - self.clock()
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(wait_ms, 1) / 1000):
                    await self._arrived.wait()

    def _enqueue_some(self) -> bool:
        """Enqueue up to ENQUEUE_CHUNK new timer-topic entries; whether any are left."""
        timers, store = self.timers, self.store
        low = store.min_offset_in_queue(TIMER_TOPIC, 0)
        if timers.queue_offset < low:
            log.warning("timer.queue_offset_below_min", offset=timers.queue_offset, min=low)
            timers.queue_offset = low
        high = store.max_offset_in_queue(TIMER_TOPIC, 0)
        for _ in range(ENQUEUE_CHUNK):
            offset = timers.queue_offset
            if offset >= high:
                return False
            entry = store.queue_entry(TIMER_TOPIC, 0, offset)
            record = None if entry is None else store.lookup_message_by_offset(entry.phy_offset)
            if entry is None or record is None:
                log.warning("timer.entry_unreadable", queue_offset=offset)
                timers.queue_offset = offset + 1
                continue
            props = record.properties()
            try:
                deliver_ms = int(props[MessageConst.TIMER_OUT_MS])
            except (KeyError, ValueError):
                log.warning("timer.no_deliver_time", queue_offset=offset)
                timers.queue_offset = offset + 1
                continue
            real_topic = props.get(MessageConst.REAL_TOPIC, "")
            delete = MessageConst.TIMER_DEL_UNIQKEY in props
            timers.enqueue(
                entry.phy_offset, entry.size, deliver_ms, real_topic, offset, delete=delete
            )
        return True

    async def _deliver_due(self) -> None:
        timers = self.timers
        empty = 0
        while (slot_ms := timers.due_slot()) is not None:
            units = timers.units_of(slot_ms)
            if not units:
                timers.advance()
                empty += 1
                if empty % EMPTY_SLOT_CHUNK == 0:
                    await asyncio.sleep(0)
                continue
            resume_slot, done = self._resume
            start = done if resume_slot == slot_ms else 0
            if start == 0:
                timers.delivered(slot_ms, 0, self.store.max_phy_offset)
            # Read from the whole slot each time, a resumed one too: its markers come first.
            cancelled = self._cancelled_in(units)
            for index in range(start, len(units)):
                await self._deliver(slot_ms, index, units[index][1], cancelled)
            self._resume = (-1, 0)
            timers.advance()

    def _cancelled_in(self, units: list[tuple[int, TimerUnit]]) -> set[str]:
        """The delete keys (real topic + "+" + UNIQ_KEY) the slot's delete markers carry."""
        keys: set[str] = set()
        for _, unit in units:
            if unit.deletes:
                record = self.store.lookup_message_by_offset(unit.phy_offset)
                props = {} if record is None else record.properties()
                if props.get(MessageConst.TIMER_DEL_UNIQKEY):
                    keys.add(props[MessageConst.TIMER_DEL_UNIQKEY])
        return keys

    async def _deliver(
        self, slot_ms: int, index: int, unit: TimerUnit, cancelled: set[str]
    ) -> None:
        """Put one due unit's message, retrying until the store takes it; a delete marker and
        the message one cancels are passed over (RocketMQ 5 never puts either)."""
        record = self.store.lookup_message_by_offset(unit.phy_offset)
        if record is None:
            log.warning("timer.message_gone", phy_offset=unit.phy_offset)
            self.timers.delivered(slot_ms, index + 1, self.store.max_phy_offset)
            return
        if unit.deletes or (cancelled and not unit.rolls and delete_key(record) in cancelled):
            if not unit.deletes:
                self.cancelled += 1
            self.timers.delivered(slot_ms, index + 1, self.store.max_phy_offset)
            return
        while True:
            message = delivery_of(record, unit, self.clock())
            result = await self.store.put_message(message, wait=False)
            if result.status is PutStatus.PUT_OK and result.append is not None:
                end = result.append.phy_offset + result.append.size
                self.timers.delivered(slot_ms, index + 1, end)
                self.delivered += 1
                return
            if result.status is PutStatus.MESSAGE_ILLEGAL:
                log.warning("timer.delivery_illegal", remark=result.remark, topic=message.topic)
                self.timers.delivered(slot_ms, index + 1, self.store.max_phy_offset)
                return
            log.warning("timer.delivery_failed", status=result.status.name, remark=result.remark)
            await asyncio.sleep(RETRY_PAUSE_S * 10)
