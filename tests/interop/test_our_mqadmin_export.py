"""Our mqadmin's export and latency sub-commands (tools/mqadmin/export.py, latency.py) beside
RocketMQ's own tool on every target: the same files, the same lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from interop.mqadmin import create_topic, mqadmin_until
from interop.mqadmin import mqadmin as rocketmq_mqadmin
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.admin_queries import broker_status_after_warm_up
from tests.interop.our_mqadmin import mqadmin, ours_run

pytestmark = pytest.mark.interop


def _shape(value: Any) -> Any:
    """The keys of a JSON document, nested, without the values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__ if value is not None else None


def test_exports(target: ClusterTarget, tmp_path: Path) -> None:
    ns, cluster = target.namesrv_addr, target.cluster_name
    topic, group = unique("OurExportTopic"), unique("OurExportGroup")
    create_topic(ns, topic, queues=3)
    mqadmin(target, "updateSubGroup", "-g", group, "-c", cluster)
    ours_dir, theirs_dir = tmp_path / "ours", tmp_path / "theirs"

    for name, file in (("exportConfigs", "configs.json"), ("exportMetadata", "metadata.json")):
        out = mqadmin(target, name, "-c", cluster, "-f", str(ours_dir))
        assert out.strip() == f"export {ours_dir / file} success", out
        rocketmq_mqadmin(ns, name, "-c", cluster, "-f", str(theirs_dir))
    ours = json.loads((ours_dir / "configs.json").read_text())
    assert ours == json.loads((theirs_dir / "configs.json").read_text())

    ours = json.loads((ours_dir / "metadata.json").read_text())
    theirs = json.loads((theirs_dir / "metadata.json").read_text())
    assert (
        sorted(ours)
        == sorted(theirs)
        == ["exportTime", "subscriptionGroupTable", "topicConfigTable"]
    )
    # Other tests' topics and groups come and go: the two files hold the same of ours.
    assert ours["topicConfigTable"][topic] == theirs["topicConfigTable"][topic]
    assert ours["topicConfigTable"][topic]["writeQueueNums"] == 3
    assert ours["subscriptionGroupTable"][group] == theirs["subscriptionGroupTable"][group]
    assert not [t for t in ours["topicConfigTable"] if t.startswith(("%RETRY%", "%DLQ%"))]
    assert "TBW102" not in ours["topicConfigTable"], ours
    assert "TOOLS_CONSUMER" not in ours["subscriptionGroupTable"], ours

    per_broker = (
        ("-t", "topic.json", "topicConfigTable"),
        ("-g", "subscriptionGroup.json", "subscriptionGroupTable"),
    )
    for flag, file, table in per_broker:
        out = mqadmin(target, "exportMetadata", "-b", target.broker_addr, flag, "-f", str(ours_dir))
        assert out == f"export {ours_dir / file} success", out
        rocketmq_mqadmin(
            ns, "exportMetadata", "-b", target.broker_addr, flag, "-f", str(theirs_dir)
        )
        ours = json.loads((ours_dir / file).read_text())
        theirs = json.loads((theirs_dir / file).read_text())
        assert sorted(ours) == sorted(theirs), (ours.keys(), theirs.keys())
        mine = topic if flag == "-t" else group
        assert ours[table][mine] == theirs[table][mine], (ours, theirs)

    broker_status_after_warm_up(target)
    out = mqadmin(target, "exportMetrics", "-c", cluster, "-f", str(ours_dir))
    assert out == f"export {ours_dir / 'metrics.json'} success", out
    rocketmq_mqadmin(ns, "exportMetrics", "-c", cluster, "-f", str(theirs_dir))
    ours = json.loads((ours_dir / "metrics.json").read_text())
    theirs = json.loads((theirs_dir / "metrics.json").read_text())
    assert _shape(ours) == _shape(theirs), (ours, theirs)
    report = ours["evaluateReport"][target.broker_name]
    reference = theirs["evaluateReport"][target.broker_name]
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    assert report["runtimeEnv"] == reference["runtimeEnv"], (report, reference)
    assert report["runtimeQuota"]["topicSize"] >= 1


def test_send_latency_commands(target: ClusterTarget) -> None:
    ns, name, cluster = target.namesrv_addr, target.broker_name, target.cluster_name
    topic = unique("OurRtTopic")
    create_topic(ns, topic, queues=2)

    result = re.compile(
        r"^rt=\d+ms, SendResult=SendResult \[sendStatus=(\w+), msgId=\w+, offsetMsgId=\w+, "
        r"messageQueue=(MessageQueue \[topic=\S+, brokerName=\S+, queueId=\d+\]), "
        r"queueOffset=\d+\]",
        re.M,
    )
    ours = mqadmin(target, "sendMsgStatus", "-b", name, "-s", "16", "-c", "2")
    theirs = rocketmq_mqadmin(ns, "sendMsgStatus", "-b", name, "-s", "16", "-c", "2").stdout
    assert result.findall(ours) == result.findall(theirs), (ours, theirs)
    assert len(result.findall(ours)) == 2

    ours = mqadmin(target, "checkMsgSendRT", "-t", topic, "-a", "4", "-s", "16")
    theirs = rocketmq_mqadmin(ns, "checkMsgSendRT", "-t", topic, "-a", "4", "-s", "16").stdout
    assert ours.splitlines()[0] == theirs.splitlines()[0], ours
    # The queues in turn, each send a success; the times differ.
    assert [r.split()[:3] for r in ours.splitlines()[1:5]] == [
        r.split()[:3] for r in theirs.splitlines()[1:5]
    ], (ours, theirs)
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", ours.splitlines()[5]), ours

    args = ["-a", "3", "-s", "16", "-c", cluster, "-i", "60"]
    ours = mqadmin(target, "clusterRT", *args, "--rounds", "1")
    theirs = mqadmin_until(ns, rf"^{cluster}\s+{name}\s", "clusterRT", *args).stdout
    assert ours.splitlines()[0] == theirs.splitlines()[-2], (ours, theirs)
    row = ours.splitlines()[1]
    assert row.split()[:2] + row.split()[3:] == [cluster, name, "3", "0"], ours
    assert re.fullmatch(r"\d+\.\d\d", row.split()[2]), ours
    out = mqadmin(target, "clusterRT", "-a", "2", "-c", "NoSuchCluster", "--rounds", "1")
    assert out.endswith("cluster [NoSuchCluster] not exist"), out

    # It runs until stopped; printing nothing on stdout, as RocketMQ's.
    done = ours_run(target, "startMonitoring", "--rounds", "1", "--delay-s", "0")
    assert done.returncode == 0 and done.stdout == "", done
    assert "[MONITOR] =========================================endRound" in done.stderr, done
    assert rocketmq_mqadmin(ns, "startMonitoring").output.strip() == ""
