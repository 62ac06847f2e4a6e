"""The store's reads: messages by queue offset, by key, by time; queue bounds and entries.

    queries = StoreQueries(config, commit_log, queues, index, stats)
    got = queries.get_messages("T", 0, offset, 32)       # FOUND + views of mapped memory
    queries.offset_by_time("T", 0, timestamp_ms)         # RocketMQ's getOffsetInQueueByTime
    queries.query_message("T", "order-42")               # by KEYS or UNIQ_KEY, via the index

All of them run on the event loop over mapped memory, without blocking; MessageStore hands
them out.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sidewinder.protocol.message import KEY_SEPARATOR, MessageConst
from sidewinder.protocol.record import MessageRecord
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import CQ_ENTRY, ConsumeQueueTable, CQEntry
from sidewinder.store.get_message import GetLimits, GetResult, GetStatus, get_message
from sidewinder.store.index_service import IndexService
from sidewinder.store.stats import StoreStats, disk_used_ratio


class StoreQueries:
    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        stats: StoreStats,
    ) -> None:
        self._config = config
        self._commit_log, self._queues, self._index, self._stats = commit_log, queues, index, stats

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags_codes: frozenset[int] | None,
        record_filter: Callable[[memoryview], bool] | None,
        joined: bool = False,
    ) -> GetResult:
        started = time.perf_counter()
        queue = self._queues.queues.get((topic, queue_id))
        if queue is None:
            result = GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        else:
            result = get_message(
                queue,
                self._commit_log.files,
                offset,
                max_count,
                GetLimits(
                    self._config.max_transfer_bytes_on_message_in_memory,
                    self._config.max_transfer_count_on_message_in_memory,
                ),
                tags_codes,
                record_filter,
                joined,
            )
        self._stats.record_get(result.count, (time.perf_counter() - started) * 1000)
        return result

    def commit_log_data(self, phy_offset: int, max_bytes: int) -> bytes | None:
        segment = self._commit_log.files.find(phy_offset)
        if segment is None:
            return None
        start = phy_offset - segment.file_from_offset
        end = min(segment.read_position, start + max_bytes)
        if end <= start:
            return None
        try:
            return bytes(segment.buffer[start:end])
        except ValueError:  # cleanup unmapped it meanwhile
            return None

    def record_bytes(self, phy_offset: int, size: int) -> memoryview | None:
        segment = self._commit_log.files.find(phy_offset)
        if segment is None or phy_offset + size > segment.end_offset:
            return None
        start = phy_offset - segment.file_from_offset
        return segment.buffer[start : start + size]

    def consume_queue_slice(
        self, topic: str, queue_id: int, index: int, count: int
    ) -> tuple[int, int, list[CQEntry] | None] | None:
        queue = self._queues.queues.get((topic, queue_id))
        if queue is None:
            return None
        low, high = queue.min_offset, queue.max_offset
        if not low <= index < high:
            return low, high, None
        view = queue.entries(index, min(high, index + count))
        entries = [
            CQEntry(index + n, phy, size, tags)
            for n, (phy, size, tags) in enumerate(CQ_ENTRY.iter_unpack(view))
        ]
        return low, high, entries

    def query_message(
        self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int
    ) -> list[MessageRecord]:
        if self._index is None:
            return []
        found = []
        for phy in self._index.query(topic, key, max_count * 4, begin_ms, end_ms):
            record = self._commit_log.record_at(phy)
            if record is None or record.topic != topic:
                continue
            props = record.properties()
            keys = props.get(MessageConst.KEYS, "").split(KEY_SEPARATOR)
            if key in keys or props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
                found.append(record)
            if len(found) >= max_count:
                break
        return found

    def index_last_update(self) -> tuple[int, int]:
        index = self._index
        last_stamp = index.files[-1].end_timestamp if index and index.files else 0
        return last_stamp, index.end_phy_offset if index else 0

    def queue_entry(self, topic: str, queue_id: int, queue_offset: int) -> CQEntry | None:
        queue = self._queues.queues.get((topic, queue_id))
        return queue.entry(queue_offset) if queue else None

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._queues.queues.get((topic, queue_id))
        return queue.min_offset if queue else 0

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._queues.queues.get((topic, queue_id))
        return queue.max_offset if queue else 0

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        queue = self._queues.queues.get((topic, queue_id))
        entry = queue.entry(queue_offset) if queue else None
        if entry is None or entry.is_blank:
            return -1
        return self._commit_log.store_timestamp_at(entry.phy_offset)

    def earliest_message_time(self, topic: str | None, queue_id: int) -> int:
        if topic is None:
            return self._commit_log.store_timestamp_at(self._commit_log.files.min_offset)
        return self.store_time_at(topic, queue_id, self.min_offset_in_queue(topic, queue_id))

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._queues.queues.get((topic, queue_id))
        if queue is None or queue.max_offset == queue.min_offset:
            return 0
        min_phy_offset = self._commit_log.files.min_offset
        low, high = queue.min_offset, queue.max_offset - 1
        left = right = -1
        left_time = right_time = -1
        while low <= high:
            mid = (low + high) // 2
            entry = queue.entry(mid)
            if entry is None:
                return 0
            if entry.is_blank or entry.phy_offset < min_phy_offset:
                low, left = mid + 1, mid
                continue
            stamp = self._commit_log.store_timestamp_at(entry.phy_offset)
            if stamp < 0:
                return 0
            if stamp == timestamp_ms:
                return mid
            if stamp > timestamp_ms:
                high, right, right_time = mid - 1, mid, stamp
            else:
                low, left, left_time = mid + 1, mid, stamp
        if left_time == -1:
            return right if right >= 0 else left
        if right_time == -1:
            return left
        return right if abs(timestamp_ms - left_time) > abs(timestamp_ms - right_time) else left

    def runtime_info(
        self, *, dispatch_behind: int, flush_behind: int, pool_buffers: int
    ) -> dict[str, str]:
        info = self._stats.runtime_info()
        commit_log_path = self._config.store_path_commit_log
        commit_log_ratio = repr(disk_used_ratio(commit_log_path))
        info["commitLogDiskRatio"] = commit_log_ratio
        info[f"commitLogDiskRatio_{commit_log_path}"] = commit_log_ratio
        info["consumeQueueDiskRatio"] = repr(disk_used_ratio(self._queues.root))
        info["commitLogMinOffset"] = str(self._commit_log.files.min_offset)
        info["commitLogMaxOffset"] = str(self._commit_log.max_offset)
        info["dispatchBehindBytes"] = str(dispatch_behind)
        info["dispatchMaxBuffer"] = "0"
        info["pageCacheLockTimeMills"] = "0"
        info["remainHowManyDataToFlush"] = f"{flush_behind} B"
        info["earliestMessageTimeStamp"] = str(self.earliest_message_time(None, 0))
        info["remainTransientStoreBufferNumbs"] = str(pool_buffers)
        return info
