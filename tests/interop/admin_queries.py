"""What the admin tools print and the broker holds, read for the mqadmin scenarios (the stock
tool's and ours).

    status = broker_status_after_warm_up(target)          # brokerStatus, once a 4.9 broker has one
    rows = message_rows(ours_run(target, "printMsg", ...).stdout)
    assert committed(client, target, group, topic, 0) == 2
"""

from __future__ import annotations

import re
import time

from interop.mqadmin import MQAdminError, mqadmin
from interop.target import ClusterTarget
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient


def broker_status_after_warm_up(target: ClusterTarget, timeout_s: float = 60.0) -> str:
    return mqadmin_after_warm_up(
        target.namesrv_addr, "brokerStatus", "-b", target.broker_addr, timeout_s=timeout_s
    )


def mqadmin_after_warm_up(namesrv_addr: str, *argv: str, timeout_s: float = 60.0) -> str:
    """mqadmin's stdout for a command that reads broker runtime stats (brokerStatus,
    clusterList): a 4.9 broker answers them with SYSTEM_ERROR until its first stats sample."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return mqadmin(namesrv_addr, *argv).stdout
        except MQAdminError as exc:
            if "NoSuchElementException" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def route_perm(target: ClusterTarget, topic: str) -> int:
    out = mqadmin(target.namesrv_addr, "topicRoute", "-t", topic).stdout
    return int(re.search(r'"perm"\s*:\s*(\d+)', out).group(1))  # type: ignore[union-attr]


def message_rows(out: str) -> list[dict[str, str]]:
    """printMsg / printMsgByQueue / consumeMessage lines: MSGID, a few MessageExt fields, BODY."""
    rows = []
    for line in out.splitlines():
        if line.startswith("MSGID: "):
            fields = dict(re.findall(r"\b(queueId|queueOffset|storeSize|sysFlag)=(\d+)", line))
            fields["msgId"] = line.split()[1]
            fields["body"] = line.rsplit("BODY: ", 1)[1]
            fields["keys"] = (re.search(r"KEYS=([^,}]*)", line) or [None, ""])[1]  # type: ignore[index]
            rows.append(fields)
    return rows


def committed(
    client: SyncRemotingClient, target: ClusterTarget, group: str, topic: str, queue: int
) -> int:
    header = {"consumerGroup": group, "topic": topic, "queueId": str(queue)}
    reply = client.invoke(
        target.broker_addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header), 10
    )
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return int((reply.ext_fields or {})["offset"])
