"""The store's section of broker.conf: RocketMQ 4.x's MessageStoreConfig keys and defaults.

Attributes are snake_case with RocketMQ's camelCase keys as aliases; defaults are those of
RocketMQ 4.9.7's MessageStoreConfig (tests/store/test_config.py compares them with the real class).
Unlike RocketMQ, which silently ignores a value it cannot parse, a bad value is an error that names
the key.

As in RocketMQ, `storePathCommitLog` does not follow `storePathRootDir`: both default under the
user's home, and a broker.conf that moves the root alone leaves the CommitLog in ~/store/commitlog.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sidewinder.common.config import ConfigError, camel, from_properties

__all__ = ["BrokerRole", "ConfigError", "FlushDiskType", "StoreConfig"]


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _home_store() -> Path:
    return Path.home() / "store"


# RocketMQ's own spellings where they differ from a plain camelCase of the attribute name.
_ALIASES = {
    "check_crc_on_recover": "checkCRCOnRecover",
}


def _alias(name: str) -> str:
    return camel(name, _ALIASES)


class StoreConfig(BaseModel):
    model_config = ConfigDict(
        alias_generator=_alias,
        populate_by_name=True,
        # Not frozen: updateBrokerConfig sets live keys on the one instance the store reads.
        frozen=False,
        validate_assignment=True,
        extra="ignore",
        use_enum_values=False,
    )

    store_path_root_dir: Path = Field(default_factory=_home_store)
    store_path_commit_log: Path = Field(default_factory=lambda: _home_store() / "commitlog")
    mapped_file_size_commit_log: int = Field(1 << 30, gt=0)
    mapped_file_size_consume_queue: int = Field(300_000 * 20, gt=0)

    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_interval_commit_log: int = Field(500, ge=0)
    commit_interval_commit_log: int = Field(200, ge=0)
    flush_commit_log_timed: bool = True
    flush_commit_log_least_pages: int = Field(4, ge=0)
    commit_commit_log_least_pages: int = Field(4, ge=0)
    flush_commit_log_thorough_interval: int = Field(10_000, ge=0)
    commit_commit_log_thorough_interval: int = Field(200, ge=0)
    flush_interval_consume_queue: int = Field(1000, ge=0)
    flush_consume_queue_least_pages: int = Field(2, ge=0)
    flush_consume_queue_thorough_interval: int = Field(60_000, ge=0)
    flush_least_pages_when_warm_maped_file: int = Field(4096, ge=0)
    sync_flush_timeout: int = Field(5000, gt=0)
    use_reentrant_lock_when_put_message: bool = True
    warm_maped_file_enable: bool = False
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = Field(5, gt=0)
    fast_fail_if_no_buffer_in_store_pool: bool = False

    max_message_size: int = Field(4 << 20, gt=0)
    check_crc_on_recover: bool = True
    duplication_enable: bool = False
    disk_fall_recorded: bool = True
    os_page_cache_busy_time_out_mills: int = Field(1000, gt=0)

    message_index_enable: bool = True
    message_index_safe: bool = False
    max_hash_slot_num: int = Field(5_000_000, gt=0)
    max_index_num: int = Field(20_000_000, gt=0)
    max_msgs_num_batch: int = Field(64, gt=0)
    default_query_max_num: int = Field(32, gt=0)
    put_msg_index_hight_water: int = Field(600_000, gt=0)

    max_transfer_bytes_on_message_in_memory: int = Field(256 * 1024, gt=0)
    max_transfer_count_on_message_in_memory: int = Field(32, gt=0)
    max_transfer_bytes_on_message_in_disk: int = Field(64 * 1024, gt=0)
    max_transfer_count_on_message_in_disk: int = Field(8, gt=0)
    access_message_in_memory_max_ratio: int = Field(40, ge=0, le=100)

    delete_when: str = "04"
    file_reserved_time: int = Field(72, ge=0)
    disk_max_used_space_ratio: int = Field(75, ge=10, le=95)
    clean_file_forcibly_enable: bool = True
    # RocketMQ 5's keys, in percent; it clamps them (35-90, 30-85), so they can only lower
    # where puts stop and where files go whatever their age.
    disk_space_warning_level_ratio: int = Field(90, ge=0, le=100)
    disk_space_clean_forcibly_ratio: int = Field(85, ge=0, le=100)
    clean_resource_interval: int = Field(10_000, gt=0)
    delete_commit_log_files_interval: int = Field(100, ge=0)
    delete_consume_queue_files_interval: int = Field(100, ge=0)
    destroy_maped_file_interval_forcibly: int = Field(120_000, ge=0)
    redelete_hanged_file_interval: int = Field(120_000, ge=0)

    # Replication (RocketMQ keeps them in MessageStoreConfig too). BrokerStartup sets the HA
    # port to listenPort + 1 whatever the file says, and so does our broker.
    ha_listen_port: int = Field(10912, ge=0, le=65535)
    ha_master_address: str | None = None
    ha_send_heartbeat_interval: int = Field(5000, gt=0)
    ha_housekeeping_interval: int = Field(20_000, gt=0)
    ha_transfer_batch_size: int = Field(32 * 1024, gt=0, le=4 << 20)
    ha_slave_fallbehind_max: int = Field(256 << 20, ge=0)

    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flush_delay_offset_interval: int = Field(10_000, gt=0)

    @field_validator("*", mode="before")
    @classmethod
    def _java_booleans(cls, value: Any, info: Any) -> Any:
        # broker.conf booleans are strings; only true/false (any case) are accepted here.
        field = cls.model_fields[info.field_name]
        if field.annotation is bool and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"expected true or false, got {value!r}")
            return lowered == "true"
        return value.strip() if isinstance(value, str) else value

    @field_validator("delete_when")
    @classmethod
    def _hours(cls, value: str) -> str:
        for hour in value.split(";"):
            if not hour.isdigit() or not 0 <= int(hour) <= 23:
                raise ValueError(f"deleteWhen is hours 00-23 separated by ';', got {value!r}")
        return value

    @property
    def disk_full_ratio(self) -> float:
        """Where puts stop, as RocketMQ 5 reads diskSpaceWarningLevelRatio."""
        return min(max(self.disk_space_warning_level_ratio, 35), 90) / 100

    @property
    def disk_clean_forcibly_ratio(self) -> float:
        """Above it old files go whatever their age, and the disk-full flag stays set."""
        return min(max(self.disk_space_clean_forcibly_ratio, 30), 85) / 100

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> StoreConfig:
        """The store section of a flat broker.conf mapping (keys of other sections ignored)."""
        return from_properties(cls, values, "broker.conf (store)")

    @classmethod
    def conf_keys(cls) -> set[str]:
        """The broker.conf keys this section owns."""
        return {_alias(name) for name in cls.model_fields}
