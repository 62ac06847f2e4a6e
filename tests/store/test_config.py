"""StoreConfig: RocketMQ's keys, RocketMQ's defaults (read from the real MessageStoreConfig)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interop.javaconfig import default_config
from sidewinder.store.config import ConfigError, FlushDiskType, StoreConfig

# MessageStoreConfig keys the store section deliberately leaves to other parts, with why.
NOT_STORE_KEYS = {
    # master/slave replication: the slave side, still to come
    "slaveTimeout",
    "offsetCheckInSlave",
    # DLedger (Raft CommitLog): out of scope for 4.x compatibility
    "enableDLegerCommitLog",
    "dLegerGroup",
    "dLegerPeers",
    "dLegerSelfId",
    "preferredLeaderId",
    "storePathDLedgerCommitLog",
    # ConsumeQueue extension files and light message queues (LMQ): not written by default
    "enableConsumeQueueExt",
    "mappedFileSizeConsumeQueueExt",
    "bitMapLengthConsumeQueueExt",
    "enableLmq",
    "enableMultiDispatch",
    "maxLmqConsumeQueueNum",
    # the broker's schedule (delay) service
    "enableScheduleAsyncDeliver",
    "enableScheduleMessageStats",
    "scheduleAsyncDeliverMaxPendingLimit",
    "scheduleAsyncDeliverMaxResendNum2Blocked",
    # Java-only knobs with nothing to configure here
    "debugLockEnable",
    "enableBatchPush",
    "readOnlyCommitLogStorePaths",
}

# Keys RocketMQ 5's MessageStoreConfig added (4.9.7 reads these two from system properties).
FIVE_X_KEYS = {"diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio"}


@pytest.mark.interop
def test_defaults_are_rocketmqs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = default_config("org.apache.rocketmq.store.config.MessageStoreConfig", user_home=tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    ours = StoreConfig().model_dump(by_alias=True, mode="json")
    assert set(java) - set(ours) == NOT_STORE_KEYS, "a MessageStoreConfig key is unaccounted for"
    assert set(ours) - set(java) == FIVE_X_KEYS, "a key RocketMQ does not have"
    differ = {
        k: (ours[k], java[k]) for k in java.keys() & ours.keys() if str(ours[k]) != str(java[k])
    }
    assert not differ, json.dumps(differ, indent=1)


def test_broker_conf_strings_parse_as_java_would() -> None:
    conf = StoreConfig.from_properties(
        {
            "flushDiskType": "SYNC_FLUSH",
            "mappedFileSizeCommitLog": "2097152",
            "checkCRCOnRecover": "FALSE",
            "storePathRootDir": "/data/store",
            "deleteWhen": "04;16",
            "brokerName": "broker-a",  # another section's key: ignored here
        }
    )
    assert conf.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert conf.mapped_file_size_commit_log == 2 << 20
    assert conf.check_crc_on_recover is False
    assert conf.store_path_root_dir == Path("/data/store")
    # RocketMQ's own behaviour: the CommitLog path does not follow the root.
    assert conf.store_path_commit_log == Path.home() / "store" / "commitlog"
    assert "mappedFileSizeCommitLog" in StoreConfig.conf_keys()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("flushDiskType", "NOT_A_FLUSH_TYPE"),
        ("mappedFileSizeCommitLog", "1g"),
        ("checkCRCOnRecover", "yes"),
        ("deleteWhen", "4am"),
        ("diskMaxUsedSpaceRatio", "99"),
    ],
)
def test_a_bad_value_names_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}={value!r}"):
        StoreConfig.from_properties({key: value})
