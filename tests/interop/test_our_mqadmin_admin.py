"""Our mqadmin's config and maintenance sub-commands on every target, printed as RocketMQ's."""

from __future__ import annotations

import re

import pytest

from interop.mqadmin import create_topic
from interop.target import ClusterTarget
from sidewinder.protocol.message import java_string_hash
from tests.helpers import unique
from tests.interop.our_mqadmin import mqadmin
from tests.interop.scenarios import produce

pytestmark = pytest.mark.interop


def test_config_commands(target: ClusterTarget) -> None:
    broker = target.broker_addr
    try:
        out = mqadmin(
            target, "updateBrokerConfig", "-b", broker, "-k", "brokerPermission", "-v", "4"
        )
        assert f"update broker config success, {broker}" in out
        config = mqadmin(target, "getBrokerConfig", "-b", broker)
        assert re.search(r"^brokerPermission\s+=\s+4$", config, re.MULTILINE), config
    finally:
        mqadmin(target, "updateBrokerConfig", "-b", broker, "-k", "brokerPermission", "-v", "6")
    out = mqadmin(target, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert "update name server config success!" in out
    shown = mqadmin(target, "getNamesrvConfig")
    assert re.search(r"^orderMessageEnable\s+=  false$", shown, re.MULTILINE), shown


def test_maintenance_and_inspection_commands(target: ClusterTarget) -> None:
    topic, broker = unique("OurMaint"), target.broker_addr
    create_topic(target.namesrv_addr, topic, queues=1)
    produce(target, "java", topic, 3, group=unique("PG"), tag="TagOurCq")
    for name in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        assert mqadmin(target, name, "-b", broker).strip() == "success", name
    out = mqadmin(target, "queryCq", "-t", topic, "-q", "0", "-i", "0", "-c", "2")
    assert "max: 3, min: 0" in out, out
    assert out.count(f"tagsCode={java_string_hash('TagOurCq')}") == 2, out
    mqadmin(target, "producer", "-b", broker)  # exits 0, a line per producer that heartbeats
    group = unique("OurDelGroup")
    mqadmin(target, "updateSubGroup", "-g", group)
    out = mqadmin(target, "deleteSubGroup", "-g", group, "-b", broker, "-r", "true")
    assert f"delete subscription group [{group}] from broker [{broker}] success." in out
