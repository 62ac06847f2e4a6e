"""mqadmin, ours: RocketMQ's sub-command and option names over the Python admin client.

    mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t Orders -r 8 -w 8
    mqadmin topicList -n 127.0.0.1:9876
    mqadmin consumerProgress -n 127.0.0.1:9876 -g billing

Every sub-command is in COMMANDS below, which names the handler that runs it; the handlers live
in modules by concern (topics, cluster, consumers, messages, maintenance, stats, export, latency,
acl) and print what RocketMQ's mqadmin prints.
"""

from __future__ import annotations

import argparse
import sys

import uvloop

from sidewinder.client.route_cache import ClientError
from sidewinder.common.log import configure_logging
from sidewinder.protocol.acl import DEFAULT_CREDENTIALS
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.tls import DEFAULT_CLIENT_TLS
from sidewinder.tools.mqadmin import (
    acl,
    cluster,
    consumers,
    export,
    groups,
    latency,
    maintenance,
    messages,
    stats,
    topics,
)
from sidewinder.tools.mqadmin.access import tool_credentials, tool_tls
from sidewinder.tools.mqadmin.command import Command

COMMANDS: dict[str, Command] = {
    # topics.py: topics, their permissions and the name servers' key-value settings
    "updateTopic": topics.update_topic,
    "deleteTopic": topics.delete_topic,
    "topicList": topics.topic_list,
    "topicRoute": topics.topic_route,
    "topicStatus": topics.topic_status,
    "updateSubGroup": groups.update_sub_group,
    "setConsumeMode": groups.set_consume_mode,
    "topicClusterList": topics.topic_cluster_list,
    "updateTopicPerm": topics.update_topic_perm,
    "wipeWritePerm": topics.wipe_write_perm,
    "addWritePerm": topics.add_write_perm,
    "updateKvConfig": topics.update_kv_config,
    "deleteKvConfig": topics.delete_kv_config,
    "updateOrderConf": topics.update_order_conf,
    "getConsumerConfig": topics.get_consumer_config,
    "producerConnection": topics.producer_connection,
    # cluster.py: the cluster and its brokers
    "clusterList": cluster.cluster_list,
    "brokerStatus": cluster.broker_status,
    "getBrokerConfig": cluster.get_broker_config,
    # consumers.py: consumer groups and their offsets
    "consumerConnection": consumers.consumer_connection_cmd,
    "consumerStatus": consumers.consumer_status,
    "resetOffsetByTime": consumers.reset_offset_by_time,
    "skipAccumulatedMessage": consumers.skip_accumulated_message,
    "cloneGroupOffset": consumers.clone_group_offset,
    "allocateMQ": consumers.allocate_mq,
    "consumerProgress": consumers.consumer_progress,
    # messages.py: reading and sending messages
    "printMsg": messages.print_msg,
    "printMsgByQueue": messages.print_msg_by_queue,
    "queryMsgByUniqueKey": messages.query_msg_by_unique_key,
    "queryMsgTraceById": messages.query_msg_trace_by_id,
    "queryMsgById": messages.query_msg_by_id,
    "queryMsgByOffset": messages.query_msg_by_offset,
    "queryMsgByKey": messages.query_msg_by_key,
    "sendMessage": messages.send_message,
    "consumeMessage": messages.consume_message,
    # maintenance.py: settings and maintenance
    "updateBrokerConfig": maintenance.update_broker_config,
    "updateNamesrvConfig": maintenance.update_namesrv_config,
    "getNamesrvConfig": maintenance.get_namesrv_config,
    "cleanExpiredCQ": maintenance.clean_expired_cq,
    "cleanUnusedTopic": maintenance.clean_unused_topic,
    "deleteExpiredCommitLog": maintenance.delete_expired_commit_log,
    "queryCq": maintenance.query_cq,
    "producer": maintenance.producer,
    "deleteSubGroup": maintenance.delete_sub_group,
    # stats.py: statistics
    "statsAll": stats.stats_all,
    "brokerConsumeStats": stats.broker_consume_stats,
    # export.py: exports to JSON files
    "exportConfigs": export.export_configs,
    "exportMetadata": export.export_metadata,
    "exportMetrics": export.export_metrics,
    # latency.py: send latency and monitoring
    "sendMsgStatus": latency.send_msg_status,
    "checkMsgSendRT": latency.check_msg_send_rt,
    "clusterRT": latency.cluster_rt,
    "startMonitoring": latency.start_monitoring,
    # acl.py: ACL
    "updateAclConfig": acl.update_acl_config,
    "deleteAclConfig": acl.delete_acl_config,
    "clusterAclConfigVersion": acl.cluster_acl_config_version,
    "updateGlobalWhiteAddr": acl.update_global_white_addr,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqadmin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    subcommands = parser.add_subparsers(dest="command", required=True)
    for name, spec in COMMANDS.items():
        sub = subcommands.add_parser(name, help=spec.help_text)
        sub.add_argument("-n", dest="namesrv", default="127.0.0.1:9876", help="ns1:9876;ns2:9876")
        sub.add_argument(
            "--access-key", default=None, help="ACL: sign requests (with --secret-key)"
        )
        sub.add_argument("--secret-key", default=None)
        sub.add_argument(
            "--tls", action="store_true", help="TLS, as RocketMQ's tools with -Dtls.enable=true"
        )
        sub.add_argument(
            "--tls-config",
            metavar="FILE",
            default=None,
            help="TLS with the tls.client.* keys of this tls.config.file (implies --tls)",
        )
        for flag, options in spec.options:
            sub.add_argument(flag, **options)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging()
    except ValueError:  # a bad $SIDEWINDER_LOG_LEVEL or _FORMAT must not stop the tool
        configure_logging("INFO", fmt="console")
    try:
        DEFAULT_CREDENTIALS.set(tool_credentials(args.access_key, args.secret_key))
        DEFAULT_CLIENT_TLS.set(tool_tls(args.tls, args.tls_config))
        return uvloop.run(COMMANDS[args.command].run(args))
    except (ClientError, ValueError) as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    except (TimeoutError, RemotingError, OSError) as exc:
        print(f"mqadmin {args.command}: cannot reach the cluster: {exc}", file=sys.stderr)
        return 1
