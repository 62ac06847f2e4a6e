"""The audit of RocketMQ 4.9.8's mqadmin against Sidewinder: every sub-command the tool lists,
the differential test(s) that run it on both targets, and whether our own mqadmin has it.

A sub-command the tool lists with no entry here fails the first test; an entry naming a test
that does not exist fails the second; docs/mqadmin.md must list each one (the third).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from interop.mqadmin import mqadmin_commands
from sidewinder.tools.mqadmin import COMMANDS

ROOT = Path(__file__).resolve().parents[2]

MQADMIN = "tests/interop/test_mqadmin.py"
ADMIN = "tests/interop/test_mqadmin_admin.py"
CALLS = "tests/interop/test_client_calls.py"
CMDS = "tests/interop/test_mqadmin_commands.py"
STATS = "tests/interop/test_mqadmin_stats.py"
ACL = "tests/interop/test_acl.py"


@dataclass(frozen=True)
class Covered:
    tests: tuple[str, ...]  # "path::test_name", or a whole file
    note: str = ""


def by(*tests: str, note: str = "") -> Covered:
    return Covered(tests, note)


COVERAGE: dict[str, Covered] = {
    "updateTopic": by(
        f"{MQADMIN}::test_update_topic_then_list_and_route",
        f"{CMDS}::test_topic_perm_cluster_and_order_conf",
    ),
    "deleteTopic": by(f"{MQADMIN}::test_group_queue_and_config_commands"),
    "updateSubGroup": by(f"{MQADMIN}::test_group_queue_and_config_commands"),
    "deleteSubGroup": by(f"{ADMIN}::test_delete_sub_group_removes_offsets"),
    "updateBrokerConfig": by(
        f"{ADMIN}::test_update_broker_config_is_live_persisted_and_shown",
        f"{ADMIN}::test_update_broker_config_ignores_an_unknown_key",
        f"{ADMIN}::test_update_broker_config_refusals",
        note="the refusals are 4.9.8's configBlackList; the 4.9.7 reference predates it",
    ),
    "updateTopicPerm": by(f"{CMDS}::test_topic_perm_cluster_and_order_conf"),
    "topicRoute": by(f"{MQADMIN}::test_update_topic_then_list_and_route"),
    "topicStatus": by(f"{MQADMIN}::test_group_queue_and_config_commands"),
    "topicClusterList": by(f"{CMDS}::test_topic_perm_cluster_and_order_conf"),
    "brokerStatus": by(
        f"{MQADMIN}::test_cluster_list_and_broker_status",
        STATS,
        note="live figures (TPS, today/yesterday counters): the statistics tests",
    ),
    "queryMsgById": by(
        f"{MQADMIN}::test_query_message_by_id_and_by_key",
        f"{CALLS}::test_python_consumer_online",
        note="-g -d (CONSUME_MESSAGE_DIRECTLY) in test_client_calls",
    ),
    "queryMsgByKey": by(f"{MQADMIN}::test_query_message_by_id_and_by_key"),
    "queryMsgByUniqueKey": by(f"{CMDS}::test_query_and_print_messages"),
    "queryMsgByOffset": by(f"{MQADMIN}::test_group_queue_and_config_commands"),
    "queryMsgTraceById": by(
        f"{CMDS}::test_query_message_trace",
        note="trace data written as a traced client writes it; no built-in trace topic",
    ),
    "printMsg": by(f"{CMDS}::test_query_and_print_messages"),
    "printMsgByQueue": by(f"{CMDS}::test_query_and_print_messages"),
    "sendMsgStatus": by(f"{CMDS}::test_send_and_consume_commands"),
    "brokerConsumeStats": by(STATS, note="GET_BROKER_CONSUME_STATS (317)"),
    "producerConnection": by(f"{CMDS}::test_producer_connection_and_consumer_config"),
    "consumerConnection": by(
        f"{MQADMIN}::test_group_queue_and_config_commands",
        f"{CALLS}::test_java_consumer_online",
    ),
    "consumerProgress": by(
        f"{MQADMIN}::test_consumer_progress_after_a_group_consumed",
        f"{ADMIN}::test_delete_sub_group_removes_offsets",
        STATS,
        note="Consume TPS: the statistics tests",
    ),
    "consumerStatus": by(
        f"{CALLS}::test_java_consumer_online",
        f"{CALLS}::test_python_consumer_online",
        f"{CALLS}::test_calls_to_a_client_that_is_not_there",
    ),
    "cloneGroupOffset": by(f"{CMDS}::test_clone_group_offset"),
    "producer": by(f"{ADMIN}::test_producer_instances"),
    "clusterList": by(f"{MQADMIN}::test_cluster_list_and_broker_status"),
    "topicList": by(f"{MQADMIN}::test_update_topic_then_list_and_route"),
    "updateKvConfig": by(f"{CMDS}::test_kv_config_and_write_perm"),
    "deleteKvConfig": by(f"{CMDS}::test_kv_config_and_write_perm"),
    "wipeWritePerm": by(f"{CMDS}::test_kv_config_and_write_perm"),
    "addWritePerm": by(f"{CMDS}::test_kv_config_and_write_perm"),
    "resetOffsetByTime": by(
        f"{CALLS}::test_java_consumer_online",
        f"{CALLS}::test_offline_group_resets_through_the_fallback",
        f"{CALLS}::test_calls_to_a_client_that_is_not_there",
    ),
    "skipAccumulatedMessage": by(f"{CALLS}::test_offline_group_resets_through_the_fallback"),
    "updateOrderConf": by(
        f"{CMDS}::test_topic_perm_cluster_and_order_conf",
        f"{CMDS}::test_kv_config_and_write_perm",
    ),
    "cleanExpiredCQ": by(
        f"{ADMIN}::test_maintenance_commands_answer_success",
        f"{ADMIN}::test_expired_commit_log_and_queues_go_on_request",
    ),
    "deleteExpiredCommitLog": by(
        f"{ADMIN}::test_maintenance_commands_answer_success",
        f"{ADMIN}::test_expired_commit_log_and_queues_go_on_request",
    ),
    "cleanUnusedTopic": by(f"{ADMIN}::test_maintenance_commands_answer_success"),
    "startMonitoring": by(
        f"{CMDS}::test_start_monitoring_starts_and_returns",
        note="the monitor runs in the tool's JVM; the tool returns at once on both",
    ),
    "statsAll": by(STATS, note="VIEW_BROKER_STATS_DATA (315)"),
    "allocateMQ": by(f"{CMDS}::test_query_and_print_messages"),
    "checkMsgSendRT": by(f"{CMDS}::test_send_and_consume_commands"),
    "clusterRT": by(
        f"{CMDS}::test_send_and_consume_commands", note="runs until stopped: its first round"
    ),
    "getNamesrvConfig": by(f"{ADMIN}::test_update_namesrv_config"),
    "updateNamesrvConfig": by(f"{ADMIN}::test_update_namesrv_config"),
    "getBrokerConfig": by(
        f"{MQADMIN}::test_group_queue_and_config_commands",
        f"{ADMIN}::test_update_broker_config_is_live_persisted_and_shown",
    ),
    "getConsumerConfig": by(f"{CMDS}::test_producer_connection_and_consumer_config"),
    "queryCq": by(f"{ADMIN}::test_query_consume_queue"),
    "sendMessage": by(f"{CMDS}::test_send_and_consume_commands"),
    "consumeMessage": by(f"{CMDS}::test_send_and_consume_commands"),
    "updateAclConfig": by(
        f"{ACL}::test_mqadmin_acl_commands",
        f"{CMDS}::test_acl_commands_answer_as_without_acl",
        note="with ACL on: written to plain_acl.yml; without: UPDATE_AND_CREATE_ACL_CONFIG_FAILED",
    ),
    "deleteAclConfig": by(
        f"{ACL}::test_mqadmin_acl_commands",
        f"{CMDS}::test_acl_commands_answer_as_without_acl",
        note="with ACL on: removed from its file; without: DELETE_ACL_CONFIG_FAILED (210)",
    ),
    "clusterAclConfigVersion": by(
        f"{ACL}::test_mqadmin_acl_commands",
        f"{CMDS}::test_acl_commands_answer_as_without_acl",
        note="with ACL on: each file's version; without, RocketMQ never answers, we fail at once",
    ),
    "updateGlobalWhiteAddr": by(
        f"{ACL}::test_mqadmin_acl_commands",
        f"{CMDS}::test_acl_commands_answer_as_without_acl",
        note="with ACL on: the white list replaced; without: code 211",
    ),
    "exportMetadata": by(f"{ADMIN}::test_export_configs_metadata_and_metrics"),
    "exportConfigs": by(f"{ADMIN}::test_export_configs_metadata_and_metrics"),
    "exportMetrics": by(f"{ADMIN}::test_export_configs_metadata_and_metrics"),
}


@pytest.mark.interop
def test_every_subcommand_of_rocketmqs_mqadmin_is_covered() -> None:
    listed = mqadmin_commands()
    assert len(listed) == 56, listed
    missing = [name for name in listed if name not in COVERAGE]
    assert not missing, f"mqadmin sub-commands no test is named for: {missing}"
    assert not set(COVERAGE) - set(listed), set(COVERAGE) - set(listed)


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_covering_tests_exist() -> None:
    assert len(COVERAGE) == 56
    absent = []
    for name, covered in COVERAGE.items():
        assert covered.tests, name
        for test in covered.tests:
            file, _, function = test.partition("::")
            path = ROOT / file
            if not path.exists() or (function and function not in _test_names(path)):
                absent.append(f"{name}: {test}")
    assert not absent, absent


def test_the_doc_lists_every_subcommand_and_ours() -> None:
    """docs/mqadmin.md: a row per sub-command, saying whether our mqadmin has it (its command
    table, COMMANDS)."""
    rows = dict(
        re.findall(
            r"^\| `(\w+)` \| .*? \| (yes|no)\b", (ROOT / "docs/mqadmin.md").read_text(), re.M
        )
    )
    assert set(rows) == set(COVERAGE), set(rows) ^ set(COVERAGE)
    wrong = {name: said for name, said in rows.items() if (said == "yes") != (name in COMMANDS)}
    assert not wrong, f"docs/mqadmin.md says otherwise about our mqadmin: {wrong}"
