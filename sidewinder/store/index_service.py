"""The index directory: message keys to CommitLog offsets across rolling IndexFiles."""

from __future__ import annotations

import time
from pathlib import Path

from sidewinder.store.index_file import IndexFile, index_key


def index_file_name(now_ms: int) -> str:
    """yyyyMMddHHmmssSSS in local time, as RocketMQ names index files."""
    seconds, millis = divmod(now_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"


class IndexService:
    def __init__(self, directory: Path, hash_slot_num: int, max_index_num: int) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.max_index_num = max_index_num
        self.files: list[IndexFile] = []

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*.creating"):
            leftover.unlink(missing_ok=True)  # a file a crash interrupted being made
        for path in sorted(p for p in self.directory.iterdir() if p.name.isdigit()):
            self.files.append(IndexFile(path, self.hash_slot_num, self.max_index_num))

    def drop_files_past(self, commitlog_end: int) -> bool:
        """Delete index files holding entries at or past the CommitLog's end (after a cut).

        Their keys point at records that are gone, and their end offset would make new
        messages at those offsets look indexed already. Returns whether any was dropped.
        """
        dropped = False
        while (
            self.files
            and self.files[-1].index_count > 1
            and self.files[-1].end_phy_offset >= commitlog_end
        ):
            last = self.files.pop()
            last.close()
            last.path.unlink(missing_ok=True)
            dropped = True
        return dropped

    def drop_expired(self, min_phy_offset: int) -> list[IndexFile]:
        """Take out leading index files whose every entry lies below `min_phy_offset` (the last
        file always stays); the caller closes and deletes them once no query can hold them."""
        files = self.files
        expired = 0
        for index in files[:-1]:
            if index.end_phy_offset >= min_phy_offset:
                break
            expired += 1
        if not expired:
            return []
        self.files = files[expired:]  # replaced, not edited: a query may be walking the old one
        return files[:expired]

    @property
    def end_phy_offset(self) -> int:
        return self.files[-1].end_phy_offset if self.files else 0

    def build_index(
        self, topic: str, keys: list[str], phy_offset: int, store_timestamp: int
    ) -> None:
        """Index a message's keys (UNIQ_KEY first, then each KEYS word) unless done before."""
        if self._indexed_anything() and phy_offset <= self.end_phy_offset:
            # A repeated dispatch. RocketMQ skips only offsets below the end, so re-dispatching
            # the last message would index it twice; each offset is one message, so <= is exact.
            return
        keys = [key for key in keys if key]
        if not keys:
            return
        # Room for every key first (the next file too, when this one fills mid-message): a
        # full disk then leaves nothing written, and the retry indexes the message whole. Half
        # its keys written would make the retry skip the rest, as a repeat.
        current = self._writable()
        room = current.max_index_num - current.index_count
        current.reserve(min(room, len(keys)))
        following = None
        if room < len(keys):
            following = self._roll()
            following.reserve(len(keys) - room)
        for n, key in enumerate(keys):
            target = current if n < room or following is None else following
            target.put_key(index_key(topic, key), phy_offset, store_timestamp)

    def repeated_to(self) -> int:
        """Messages at or below this offset are indexed already (-1: none is)."""
        return self.end_phy_offset if self._indexed_anything() else -1

    def has_room(self, keys: int) -> bool:
        """Whether the next `keys` keys fit the current file in room already allocated:
        `writable_for` would then make no file and no syscall."""
        if not self.files or self.files[-1].is_full:
            return False
        return self.files[-1].has_room(keys)

    def writable_for(self, keys: int) -> IndexFile | None:
        """The file the next `keys` keys go to, their room allocated (DiskFullError if the
        disk has none); None when they do not all fit in it (build_index rolls, key by key)."""
        current = self._writable()
        if current.max_index_num - current.index_count < keys:
            return None
        current.reserve(keys)
        return current

    def _indexed_anything(self) -> bool:
        return len(self.files) > 1 or bool(self.files and self.files[0].index_count > 1)

    def _writable(self) -> IndexFile:
        return self.files[-1] if self.files and not self.files[-1].is_full else self._roll()

    def _roll(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        now = int(time.time() * 1000)
        while (self.directory / index_file_name(now)).exists():
            now += 1
        created = IndexFile(
            self.directory / index_file_name(now),
            self.hash_slot_num,
            self.max_index_num,
            end_phy_offset=last.end_phy_offset if last else 0,
            end_timestamp=last.end_timestamp if last else 0,
        )
        self.files.append(created)
        return created

    def query(
        self, topic: str, key: str, max_count: int = 64, begin_ms: int = 0, end_ms: int = 2**63 - 1
    ) -> list[int]:
        """CommitLog offsets for `key`, newest files first (hash matches: check the message)."""
        found: list[int] = []
        for index in reversed(self.files):
            if len(found) >= max_count:
                break
            if not index.slots_readable():
                continue  # a sparse file on a full disk: unreadable until there is room
            found += index.view.lookup(
                index_key(topic, key), begin_ms, end_ms, max_count - len(found)
            )
        return found

    def flush(self) -> None:
        for index in self.files:
            index.flush()

    def close(self) -> None:
        for index in self.files:
            index.close()
        self.files.clear()
