"""The Node RocketMQ 5 client (npm rocketmq-client-nodejs 1.0.8, unchanged, in a subprocess)
through our gRPC front, where it differs from the other clients: a nack of 0 ms, and TLS on
the front's one port. Each runs through `mqproxy` in front of Sidewinder's broker (the `front`
fixture of tests/interop/conftest.py, the helpers of grpc_scenarios.py); its other scenarios
are test_grpc_clients.py's, parametrized by `grpc_client`."""

from __future__ import annotations

from typing import Any

import pytest

from interop.drivers import NODE5, DriverRun, run_driver, start_driver
from interop.target import ClusterTarget
from sidewinder.remoting.client import SyncRemotingClient
from tests.interop.grpc_scenarios import consume as _consume
from tests.interop.grpc_scenarios import topic_and_group as _topic_and_group

GRPC_CLIENT = NODE5  # for tests/interop/conftest.py: not a reference client
# The worker (and the RocketMQ 5.3.2 broker) of test_grpc_clients.py.
pytestmark = pytest.mark.xdist_group(name="rocketmq5-grpc")


def _produce(front: str, topic: str, **options: Any) -> DriverRun:
    return run_driver(NODE5, "produce", endpoints=front, topic=topic, **options)


# RocketMQ's proxy takes a ChangeInvisibleDuration of 0 ms (GrpcValidator refuses below 0) and
# RocketMQ 5.3.2's broker revives the message at once; so do the front and Sidewinder's broker.
def test_a_nack_of_0_ms_is_taken(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The Node client keeps no retry policy from a customized backoff (a non-FIFO group's, as
    the front sends it): when its listener fails a delivery, it asks ChangeInvisibleDuration of
    0 ms, the message to come back at once. The server's first answer must be OK."""
    topic, group = _topic_and_group(client, pop_target)
    _produce(front, topic, count=1).check()
    consumer = start_driver(
        NODE5,
        "push-consume",
        endpoints=front,
        topic=topic,
        group=group,
        expect=1,
        reconsume_later=1,
        timeout_s=30,
    )
    try:
        consumer.wait_for("nacked", timeout_s=25)
        nacked = next(e for e in consumer.events_so_far() if e["event"] == "nacked")
        assert nacked["invisibleMs"] == 0
        assert nacked["codeName"] == "OK", nacked
    finally:
        consumer.kill()
        consumer.wait(1)


def test_tls_and_plaintext_clients_share_the_fronts_port(
    pop_target: ClusterTarget, front: str, client: SyncRemotingClient
) -> None:
    """The front takes TLS on its one port (permissive, test mode: a self-signed certificate,
    which the driver trusts as presented): a TLS producer's messages reach a plaintext consumer
    and a TLS one."""
    topic, group = _topic_and_group(client, pop_target)
    produced = _produce(front, topic, count=2, tls=True)
    produced.check()
    over_tls = _consume(front, topic, group, 1, NODE5, tls=True, batch_size=1)
    plain = _consume(front, topic, group, 1, NODE5, batch_size=1)
    got = over_tls.received() + plain.received()
    assert sorted(e["msgId"] for e in got) == sorted(e["msgId"] for e in produced.sent())
