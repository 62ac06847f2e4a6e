"""RocketMQ's mqadmin run one sub-command after another in one JVM (interop/java/MQAdminServer)
answers as a JVM of its own per sub-command does: the same status, the same output, a usage error
that would have ended the process included."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.target import ClusterTarget
from tests.helpers import unique

pytestmark = pytest.mark.interop

UNREACHABLE = "127.0.0.1:1"


@pytest.mark.parametrize(
    "argv",
    [
        ("updateTopic", "--no-such-option"),  # mqadmin's parser calls System.exit(1)
        ("updateTopic", "-t", "T", "-h"),  # help: System.exit(0) after the usage
        ("noSuchCommand",),
    ],
)
def test_a_shared_jvm_answers_as_a_jvm_of_its_own(argv: tuple[str, ...], tmp_path: Path) -> None:
    shared = mqadmin(UNREACHABLE, *argv, check=False)
    own = mqadmin(UNREACHABLE, *argv, check=False, workdir=tmp_path)
    assert (shared.returncode, shared.stdout, shared.stderr) == (
        own.returncode,
        own.stdout,
        own.stderr,
    )
    assert shared.output, "mqadmin printed nothing"


def test_a_sub_command_runs_again_with_a_client_of_its_own(target: ClusterTarget) -> None:
    """sendMessage shuts its producer down when done: the next call must not find it shut."""
    topic = unique("RunnerTopic")
    create_topic(target.namesrv_addr, topic, queues=1)
    for body in ("first", "second"):
        out = mqadmin(target.namesrv_addr, "sendMessage", "-t", topic, "-p", body).stdout
        assert "SEND_OK" in out, out
    status = mqadmin(target.namesrv_addr, "topicStatus", "-t", topic).stdout
    assert any(line.split()[3:4] == ["2"] for line in status.splitlines()), status
