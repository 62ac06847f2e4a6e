"""Request-reply (RPC over MQ): DefaultMQProducer.request() waits for the reply a replier makes
with MessageUtil.createReplyMessage and sends to <cluster>_REPLY_TOPIC; the broker pushes it to
the requester (PUSH_REPLY_MESSAGE_TO_CLIENT). Same outcome on RocketMQ and on Sidewinder.
"""

from __future__ import annotations

import hashlib

import pytest

from interop.drivers import body_for, run_driver
from interop.mqadmin import create_topic, mqadmin
from interop.target import ClusterTarget
from tests.conftest import unique
from tests.interop.scenarios import start_consumer

pytestmark = pytest.mark.interop

REQUESTS = 20


def reply_md5(index: int) -> str:
    """The body the Java replier answers request `index` with: "reply-" + the request's."""
    return hashlib.md5(b"reply-" + body_for(index)).hexdigest()


def test_reply_topic_exists_from_the_start(target: ClusterTarget) -> None:
    listed = mqadmin(target.namesrv_addr, "topicList").output.split()
    assert f"{target.cluster_name}_REPLY_TOPIC" in listed


def test_java_requester_gets_every_reply_from_a_java_replier(target: ClusterTarget) -> None:
    topic = unique("Request")
    create_topic(target.namesrv_addr, topic)
    replier = start_consumer(
        target, "java", topic, REQUESTS, group=unique("CG_replier"), reply=True
    )
    run = run_driver(
        "java",
        "request",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=unique("PG_requester"),
        count=REQUESTS,
        request_timeout=10,
        timeout_s=120,
    ).check()
    replied = run.of("replied")
    assert [e["index"] for e in replied] == list(range(REQUESTS))
    for event in replied:
        assert event["correlationId"] == event["requestCorrelationId"], event
        assert event["bodyMd5"] == reply_md5(event["index"]), event
        assert event["topic"] == f"{target.cluster_name}_REPLY_TOPIC", event
        assert event["msgType"] == "reply", event
    answered = replier.wait().check().of("answered")
    assert len(answered) == REQUESTS
    assert all(a.get("status") == "SEND_OK" for a in answered), answered[:3]
    assert {a["correlationId"] for a in answered} == {e["correlationId"] for e in replied}
