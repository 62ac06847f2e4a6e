"""The gRPC protocol module: made from the published rocketmq-proto 2.0.4, and what it builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sidewinder.proxy import grpc_protocol as v2

ROOT = Path(__file__).resolve().parents[2]

# The RPCs of MessagingService in rocketmq-proto 2.0.4, as the reference lists them.
RPCS = {
    "QueryRoute": (False, False),
    "Heartbeat": (False, False),
    "SendMessage": (False, False),
    "QueryAssignment": (False, False),
    "ReceiveMessage": (False, True),
    "AckMessage": (False, False),
    "ForwardMessageToDeadLetterQueue": (False, False),
    "PullMessage": (False, True),
    "UpdateOffset": (False, False),
    "GetOffset": (False, False),
    "QueryOffset": (False, False),
    "EndTransaction": (False, False),
    "Telemetry": (True, True),
    "NotifyClientTermination": (False, False),
    "ChangeInvisibleDuration": (False, False),
    "RecallMessage": (False, False),
}


def test_the_descriptors_are_what_the_script_makes_from_the_published_jar() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_grpc_protocol.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout


def test_the_service_has_the_rpcs_of_2_0_4() -> None:
    methods = {m.name: (m.client_streaming, m.server_streaming) for m in v2.SERVICE.methods}
    assert methods == RPCS


def test_messages_round_trip_and_enums_have_rocketmqs_numbers() -> None:
    message = v2.Message(
        topic=v2.Resource(name="T"),
        user_properties={"a": "1"},
        system_properties=v2.SystemProperties(message_id="01AB", tag="TagA", keys=["k"]),
        body=b"\x00body",
    )
    message.system_properties.delivery_timestamp.FromMilliseconds(1_700_000_000_123)
    request = v2.SendMessageRequest(messages=[message])
    again = v2.SendMessageRequest.FromString(request.SerializeToString())
    assert again == request
    assert again.messages[0].system_properties.delivery_timestamp.ToMilliseconds() == (
        1_700_000_000_123
    )
    assert v2.Code.Value("OK") == 20000 and v2.Code.Value("MESSAGE_NOT_FOUND") == 40401
    assert v2.ClientType.Value("SIMPLE_CONSUMER") == 3
