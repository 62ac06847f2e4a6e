"""Whether the disk has room for puts: RocketMQ's disk-full flag, and our allocation failures.

Two things stop puts, each with a remark that says "disk full" and why:
- the cleanup timer finds the disk above the full ratio (RocketMQ's
  diskSpaceWarningLevelRatio, 90 % unless set lower), until a later round finds it at or below
  the clean-forcibly ratio (diskSpaceCleanForciblyRatio, 85 %);
- a store file could not be given its blocks (a new CommitLog segment, a ConsumeQueue or index
  file). Puts are then refused for `ALLOCATION_RETRY_S`, after which the next put tries again,
  so puts resume on their own once space is back; the next cleanup round counts the disk as
  full (as it would be above 90 %): old segments go, forcibly with cleanFileForciblyEnable.

`check_room` is asked before a CommitLog segment is made: one that does not fit, or while the
disk is above the full ratio, is refused before anything is allocated.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from sidewinder.store.mapped_file import DiskFullError
from sidewinder.store.stats import partition_usage

log = structlog.get_logger(__name__)

DISK_FULL_RATIO = 0.90  # RocketMQ's diskSpaceWarningLevelRatio, and its ceiling
DISK_CLEAN_FORCIBLY_RATIO = 0.85  # diskSpaceCleanForciblyRatio; also where the flag clears
ALLOCATION_RETRY_S = 1.0


class DiskOverLimitError(DiskFullError):
    """Room on the disk, but it is above the ratio where puts stop."""


class DiskSpace:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        full_ratio: float = DISK_FULL_RATIO,
        clean_forcibly_ratio: float = DISK_CLEAN_FORCIBLY_RATIO,
    ) -> None:
        self._clock = clock
        self.full_ratio = full_ratio
        self.clean_forcibly_ratio = clean_forcibly_ratio
        self.full_by_ratio = False
        self._ratio_remark = ""
        self.allocation_remark = ""
        self._retry_at = 0.0
        # Set by a failed allocation, taken by the next cleanup round.
        self.space_wanted = False

    def refusal(self) -> str:
        """Why puts are refused now, or "" when they may go ahead."""
        if self.full_by_ratio:
            return self._ratio_remark
        if self.allocation_remark and self._clock() < self._retry_at:
            return self.allocation_remark
        return ""

    def judge_ratio(self, ratio: float) -> None:
        """The cleanup timer's measure: set the refusal above the full ratio, clear it at the
        clean-forcibly ratio or below (RocketMQ's hysteresis: between the two the flag stays)."""
        if self.full_by_ratio and ratio > self.clean_forcibly_ratio:
            return
        if ratio > self.full_ratio:
            if not self.full_by_ratio:
                log.error("store.disk_full", used_ratio=round(ratio, 3), refusing_puts=True)
            self.full_by_ratio = True
            self._ratio_remark = (
                f"disk full: the store's disk is {ratio:.0%} used, above {self.full_ratio:.0%}"
            )
            return
        if self.full_by_ratio:
            log.info("store.disk_ok", used_ratio=round(ratio, 3))
        self.full_by_ratio = False
        self._ratio_remark = ""

    def allocation_failed(self, error: OSError) -> str:
        """A store file could not get its blocks: refuse puts for a while; the remark."""
        reason = error.strerror or str(error)
        if not self.allocation_remark:
            log.error("store.disk_full", reason=reason, refusing_puts=True)
        self.allocation_remark = reason if "disk full" in reason else f"disk full: {reason}"
        self._retry_at = self._clock() + ALLOCATION_RETRY_S
        if not isinstance(error, DiskOverLimitError):
            # No room for a file at all: the disk is full for what comes next.
            self.space_wanted = True
        return self.allocation_remark

    def allocation_succeeded(self) -> None:
        if self.allocation_remark:
            log.info("store.disk_ok", allocated=True)
        self.allocation_remark = ""

    def check_room(self, directory: Path, size: int) -> None:
        """Refuse a new `size`-byte file in `directory` (DiskFullError) that does not fit, or
        (DiskOverLimitError) while the disk is above the full ratio, as RocketMQ stops puts."""
        used, usable = partition_usage(directory)
        if size > usable:
            raise DiskFullError(
                errno.ENOSPC,
                f"disk full: a new {size}-byte segment does not fit the {usable} bytes free "
                f"in {directory}",
                str(directory),
            )
        ratio = used / max(used + usable, 1)
        if ratio > self.full_ratio:
            raise DiskOverLimitError(
                errno.ENOSPC,
                f"disk full: {directory} is on a disk {ratio:.0%} used "
                f"(puts stop above {self.full_ratio:.0%})",
                str(directory),
            )
