"""TLS on the remoting ports, RocketMQ 4.9's way, on every target.

Each target's name server and broker start with `tls.server.mode` enforcing (certificate files
named by a tls.config.file, test mode off) or permissive (test mode: a self-signed certificate),
given as RocketMQ's system properties (-D on RocketMQ, conf keys on Sidewinder). Then:
a plain connection to the name server, the broker and its fast channel (listenPort-2) is closed
under enforcing and served under permissive, and the stock Java client refused; the stock Java
client with -Dtls.enable=true (verifying the server against our CA under enforcing, trusting it
under test mode) produces and consumes; our Python client with TLS does too, and reads the
Java client's messages; our mqadmin connects with --tls / --tls-config. Certificates are made
at test time in a temp dir.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interop.drivers import consume_messages, produce_messages, run_driver
from interop.rocketmq import write_properties
from interop.target import ClusterTarget, create_target
from sidewinder.client.admin import Admin
from sidewinder.client.consumer import PullConsumer
from sidewinder.client.producer import Message, Producer
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingConnectError
from sidewinder.remoting.tls import DEFAULT_CONFIG_FILE, TlsOption
from tests.helpers import unique
from tests.interop.our_mqadmin import ours_run
from tests.tls_certs import CertSet, enforcing, make_certs, permissive

pytestmark = pytest.mark.interop

JAVA_MESSAGES = 20
OUR_MESSAGES = 5


@dataclass
class TlsCluster:
    target: ClusterTarget
    mode: str
    java_props: dict[str, str]  # the stock Java client's -D settings
    our_tls: TlsOption  # our client's

    @property
    def addresses(self) -> dict[str, str]:
        broker_port = int(self.target.broker_addr.rsplit(":", 1)[1])
        return {
            "namesrv": self.target.namesrv_addr,
            "broker": self.target.broker_addr,
            "fast channel": f"127.0.0.1:{broker_port - 2}",
        }


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("tls-certs"))


@pytest.fixture(scope="module", params=["enforcing", "permissive"])
def tls_cluster(
    request: pytest.FixtureRequest,
    target_kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    certs: CertSet,
) -> Iterator[TlsCluster]:
    """One cluster of each kind and mode for the module's tests: each makes topics and groups of
    its own, and none changes the cluster. Killed at the end: nothing reads its store."""
    mode = str(request.param)
    workdir = tmp_path_factory.mktemp(f"tls-{target_kind}-{mode}")
    server, java, ours = enforcing(workdir, certs) if mode == "enforcing" else permissive()
    target = create_target(target_kind, workdir / "cluster", system_props=server)
    target.start()
    try:
        yield TlsCluster(target, mode, java, ours)
    finally:
        target.kill()


async def probe(address: str, tls: TlsOption) -> int:
    """The answer's code to a request any remoting server answers (a name server's topic list
    from a broker too: REQUEST_CODE_NOT_SUPPORTED or SUCCESS, either proves it was served)."""
    client = RemotingClient(tls=tls)
    try:
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        reply = await client.invoke(address, request, 5)
        return reply.code
    finally:
        await client.close()


async def served_plain(address: str) -> bool:
    try:
        await probe(address, None)
    except RemotingConnectError:
        return False
    return True


def test_plain_refused_under_enforcing_and_served_under_permissive(
    tls_cluster: TlsCluster,
) -> None:
    async def scenario() -> None:
        for name, address in tls_cluster.addresses.items():
            plain = await served_plain(address)
            assert plain is (tls_cluster.mode == "permissive"), (name, address)
            code = await probe(address, tls_cluster.our_tls)
            assert code in (ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED), name

    asyncio.run(scenario())
    if tls_cluster.mode == "enforcing":
        run = run_driver(
            "java",
            "produce",
            namesrv=tls_cluster.target.namesrv_addr,
            topic=unique("TlsPlainTopic"),
            group=unique("TlsPlainProducer"),
            count=1,
            timeout_s=20,
        )
        assert not run.sent() and run.returncode != 0, run.describe()


def test_stock_java_client_and_ours_produce_and_consume_over_tls(
    tls_cluster: TlsCluster,
) -> None:
    target, ns = tls_cluster.target, tls_cluster.target.namesrv_addr
    topic = unique("TlsTopic")

    async def create() -> None:
        admin = Admin(ns, tls=tls_cluster.our_tls)
        try:
            await admin.create_topic(topic, queues=2, cluster=target.cluster_name)
        finally:
            await admin.close()

    asyncio.run(create())
    java = tls_cluster.java_props
    sent = produce_messages(
        "java", namesrv=ns, topic=topic, count=JAVA_MESSAGES, group=unique("TlsP"), jvm_props=java
    )
    received = consume_messages(
        "java",
        namesrv=ns,
        topic=topic,
        expect=JAVA_MESSAGES,
        group=unique("TlsC"),
        jvm_props=java,
    ).received()
    assert sorted(e["bodyMd5"] for e in received) == sorted(e["bodyMd5"] for e in sent)

    async def ours() -> list[bytes]:
        producer = Producer(unique("TlsPyP"), ns, tls=tls_cluster.our_tls)
        consumer = PullConsumer(
            unique("TlsPyC"), ns, consume_from="first", poll_timeout_s=1, tls=tls_cluster.our_tls
        )
        consumer.subscribe(topic)
        try:
            for n in range(OUR_MESSAGES):
                result = await producer.send(Message(topic, f"ours-{n}".encode()))
                assert result.status == "SEND_OK", result
            await consumer.start()
            bodies: list[bytes] = []
            for _ in range(60):
                bodies += [m.body for m in await consumer.poll()]
                if len(bodies) >= JAVA_MESSAGES + OUR_MESSAGES:
                    break
            return bodies
        finally:
            await producer.close()
            await consumer.close()

    bodies = asyncio.run(ours())
    expected = {f"body-{n}".encode() for n in range(JAVA_MESSAGES)}
    expected |= {f"ours-{n}".encode() for n in range(OUR_MESSAGES)}
    assert sorted(bodies) == sorted(expected)


@pytest.mark.parametrize("tls_cluster", ["enforcing"], indirect=True)
def test_our_mqadmin_over_tls(tls_cluster: TlsCluster, tmp_path: Path) -> None:
    """Our mqadmin under enforcing: plain it cannot reach the cluster; with --tls-config (a
    tls.config.file whose tls.client.* keys verify the server against our CA) it creates a
    topic, sends and reads; a file trusting another CA is refused; --tls alone (any server,
    as RocketMQ's tools with -Dtls.enable=true) lists the topic."""
    target = tls_cluster.target
    java = tls_cluster.java_props
    client_keys = {k: v for k, v in java.items() if k not in ("tls.enable", "tls.config.file")}
    verifying, other_ca = tmp_path / "client-tls.properties", tmp_path / "other-ca.properties"
    write_properties(verifying, client_keys)
    other = make_certs(tmp_path / "other-certs")
    write_properties(other_ca, {**client_keys, "tls.client.trustCertPath": str(other.ca_cert)})
    topic = unique("TlsAdminTopic")

    plain = ours_run(target, "clusterList")
    assert plain.returncode == 1 and "no name server answered" in plain.stderr, plain
    refused = ours_run(target, "clusterList", "--tls-config", str(other_ca))
    assert refused.returncode == 1 and "no name server answered" in refused.stderr, refused
    tls = ["--tls-config", str(verifying)]
    cluster = ours_run(target, "clusterList", *tls)
    assert cluster.returncode == 0 and target.broker_addr in cluster.stdout, cluster
    created = ours_run(target, "updateTopic", "-t", topic, "-c", target.cluster_name, *tls)
    assert created.stdout == f"create topic to {target.broker_addr} success.\n", created
    sent = ours_run(target, "sendMessage", "-t", topic, "-p", "over-tls", *tls)
    assert "SEND_OK" in sent.stdout, sent
    read = ours_run(target, "consumeMessage", "-t", topic, "-s", "5", *tls)
    assert "BODY: over-tls" in read.stdout, read
    if not Path(DEFAULT_CONFIG_FILE).exists():  # else --tls takes that file's settings
        listed = ours_run(target, "topicList", "--tls")
        assert topic in listed.stdout.split(), listed
    missing = ours_run(target, "topicList", "--tls-config", str(tmp_path / "absent"))
    assert missing.returncode == 1 and "no such file" in missing.stderr, missing
