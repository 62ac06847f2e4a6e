"""Golden fixtures written by the real RocketMQ, generated on demand into the bench cache.

    python -m interop.fixtures                 # all three, each skipped when already current
    python -m interop.fixtures store --force   # regenerate one

- `store`: a store directory the real broker wrote with small segments (2 MiB CommitLog, 30-entry
  ConsumeQueue files): several topics and queues, tags, keys, properties, bodies from 0 B to
  1 MiB (plain and compressed), a batch, a delayed message still pending in SCHEDULE_TOPIC_XXXX,
  a transactional half message never resolved, consumer offsets; cleanly shut down.
- `crash`: the same kind of store ended by `kill -9` of the broker mid-load under SYNC_FLUSH,
  with the list of messages the broker acknowledged before it died.
- `wire`: recording-proxy captures (interop/proxy.py) of the four stock clients and mqadmin,
  one file each, exercising every request code they send, with the real responses.

Each fixture folder has a `manifest.json` saying what is in it. Fixtures are never committed;
`ensure_fixture(name)` returns the folder, generating it first if it is missing or was made by
other code (the stamp covers this module, the drivers and the Maven build file).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from interop.cache import (
    INTEROP_DIR,
    ROCKETMQ_CLIENT_VERSION,
    ROCKETMQ_SERVER_VERSION,
    BenchCache,
    bench_cache,
)
from interop.capture import read_capture, request_codes
from interop.drivers import DriverProcess, consume_messages, produce_messages
from interop.mqadmin import create_topic, mqadmin
from interop.offsets import wait_committed
from interop.processes import free_port_block
from interop.proxy import ProxySession
from interop.rocketmq import RocketMQCluster

FIXTURE_NAMES = ("store", "crash", "wire")
MIB = 1 << 20

STORE_CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": 2 * MIB,
    "mappedFileSizeConsumeQueue": 30 * 20,
    # RocketMQ's own delay ladder, so a level-6 (2 min) message is still pending at shutdown.
    "messageDelayLevel": None,
    # Checks would resolve the half message; keep it pending for the life of the fixture.
    "transactionCheckInterval": 3_600_000,
    "transactionTimeOut": 3_600_000,
}


class FixtureError(RuntimeError):
    pass


def _source_digest() -> str:
    h = hashlib.sha256()
    inputs = [INTEROP_DIR / "fixtures.py", INTEROP_DIR / "maven" / "pom.xml"]
    inputs += sorted(p for p in (INTEROP_DIR / "drivers").rglob("*") if p.is_file())
    for path in inputs:
        h.update(path.read_bytes())
    return h.hexdigest()


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def _produce(
    cluster: RocketMQCluster | str, client: str, topic: str, count: int, **options: Any
) -> list[dict[str, Any]]:
    namesrv = cluster if isinstance(cluster, str) else cluster.namesrv_addr
    return produce_messages(
        client,
        namesrv=namesrv,
        topic=topic,
        count=count,
        group=options.pop("group", f"PG_{client}"),
        **options,
    )


def _consume(
    namesrv: str, client: str, topic: str, expect: int, group: str, **options: Any
) -> list[dict[str, Any]]:
    return consume_messages(
        client, namesrv=namesrv, topic=topic, expect=expect, group=group, **options
    ).received()


# -- store ---------------------------------------------------------------------------------------
def generate_store(out: Path) -> dict[str, Any]:
    with RocketMQCluster(out, broker_conf=STORE_CONF) as cluster:
        ns = cluster.namesrv_addr
        sent: dict[str, list[dict[str, Any]]] = {}
        for topic, queues in (
            ("FixtureTags", 4),
            ("FixtureSizes", 2),
            ("FixtureEmpty", 1),
            ("FixtureBatch", 4),
            ("FixtureClients", 4),
            ("FixtureDelay", 4),
        ):
            create_topic(ns, topic, queues=queues)
        sent["FixtureTags"] = _produce(
            cluster,
            "java",
            "FixtureTags",
            300,
            tag="TagA",
            keys_prefix="tags-",
            prop=["color=blue"],
            body_size=100,
        )
        sent["FixtureTags"] += _produce(
            cluster,
            "java",
            "FixtureTags",
            300,
            tag="TagB",
            keys_prefix="tags-",
            prop=["color=red"],
            body_size=100,
            start=300,
        )
        sizes = []
        # Above 4 KiB the Java client compresses unless told otherwise; keep both kinds.
        for n, (size, compress_over) in enumerate(
            [
                (1, 4096),
                (127, 4096),
                (4096, 4096),
                (4097, 4096),
                (65536, 4096),
                (MIB, 4096),
                *[(MIB, 2 * MIB)] * 6,
            ]
        ):
            sizes += _produce(
                cluster,
                "java",
                "FixtureSizes",
                1,
                keys_prefix=f"size{size}-",
                body_size=size,
                compress_over=compress_over,
                start=n,
                tag="Sized",
            )
        sent["FixtureSizes"] = sizes
        # The Java client refuses empty bodies (and its push consumer cannot read them): Go.
        sent["FixtureEmpty"] = _produce(
            cluster, "go", "FixtureEmpty", 2, body_size=0, keys_prefix="empty-"
        )
        sent["FixtureBatch"] = _produce(
            cluster,
            "java",
            "FixtureBatch",
            30,
            mode="batch",
            batch_size=10,
            keys_prefix="batch-",
            tag="TagBatch",
        )
        clients = []
        for client in ("cpp", "node", "go"):
            clients += _produce(
                cluster,
                client,
                "FixtureClients",
                5,
                keys_prefix=f"{client}-",
                tag=f"From{client}",
                prop=[f"via={client}"],
            )
        sent["FixtureClients"] = clients
        sent["FixtureDelay"] = _produce(
            cluster, "java", "FixtureDelay", 3, delay_level=6, keys_prefix="delay-"
        )
        sent["FixtureTx"] = _produce(
            cluster, "java", "FixtureTx", 2, answer="unknown", keys_prefix="half-", group="PG_tx"
        )
        sent["FixtureTx"] += _produce(
            cluster,
            "java",
            "FixtureTx",
            2,
            answer="commit",
            keys_prefix="committed-",
            group="PG_tx",
            start=2,
        )
        consumed = _consume(ns, "java", "FixtureTags", 600, "FixtureConsumerGroup")
        # The consumer's last commit is oneway at its shutdown: stop the broker only once it
        # has it (on a loaded machine it came after the stop, and the fixture had 532 of 600).
        wait_committed(
            cluster.broker_addr, "FixtureConsumerGroup", "FixtureTags", queues=4, total=600
        )
        cluster.stop()
        if (cluster.store_path / "abort").exists():
            raise FixtureError("the broker left its abort file: not a clean shutdown")
        return {
            "shutdown": "clean",
            "broker_conf": cluster.broker_conf,
            "store": str(cluster.store_path.relative_to(out)),
            "sent": sent,
            "consumer_groups": {
                "FixtureConsumerGroup": {"topic": "FixtureTags", "consumed": len(consumed)}
            },
            "pending": {
                "delayed": "FixtureDelay (level 6) in SCHEDULE_TOPIC_XXXX queue 5",
                "half": "FixtureTx keys half-0, half-1 in RMQ_SYS_TRANS_HALF_TOPIC",
            },
        }


# -- crash ---------------------------------------------------------------------------------------
CRASH_ATTEMPTS = 3


def generate_crash(out: Path, *, acked_before_kill: int = 5000) -> dict[str, Any]:
    """A kill -9 that lands while RocketMQ makes a ConsumeQueue file (it creates the file, then
    sizes it) leaves a 0-byte file that RocketMQ 4.9 itself refuses at its next start ("length
    not matched"): such a store is no oracle for recovery, so the kill is taken again."""
    for attempt in range(1, CRASH_ATTEMPTS + 1):
        manifest = _crash_once(out, acked_before_kill)
        empty = [p for p in (out / manifest["store"]).rglob("*") if p.is_file() and _unsized(p)]
        if not empty:
            return manifest
        print(f"crash fixture, attempt {attempt}: the kill left {empty[0]} empty; again")
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    raise FixtureError(f"{CRASH_ATTEMPTS} kills each left an empty store file")


def _unsized(path: Path) -> bool:
    """A store segment (CommitLog or ConsumeQueue) RocketMQ created but had not sized."""
    in_store = path.parent.name == "commitlog" or path.parents[2].name == "consumequeue"
    return path.name.isdigit() and in_store and path.stat().st_size == 0


def _crash_once(out: Path, acked_before_kill: int) -> dict[str, Any]:
    conf = {**STORE_CONF, "flushDiskType": "SYNC_FLUSH"}
    cluster = RocketMQCluster(out, broker_conf=conf)
    cluster.start()
    try:
        create_topic(cluster.namesrv_addr, "CrashTopic", queues=4)
        producer = DriverProcess(
            "java",
            "produce",
            namesrv=cluster.namesrv_addr,
            topic="CrashTopic",
            group="PG_crash",
            count=1_000_000,
            body_size=512,
            tag="TagCrash",
            keys_prefix="crash-",
            timeout_s=120,
            workdir=out / "producer",
        )
        deadline = time.monotonic() + 120
        while sum(e.get("event") == "sent" for e in producer.events_so_far()) < acked_before_kill:
            if producer.proc.poll() is not None or time.monotonic() > deadline:
                raise FixtureError(f"producer stopped early:\n{producer.wait(1).describe()}")
            time.sleep(0.05)
        cluster.kill_broker()
        killed_at = time.time()
        time.sleep(3)  # let in-flight sends fail; they were never acknowledged
        producer.kill()
        run = producer.wait(1)
    finally:
        cluster.kill()
    if not (cluster.store_path / "abort").exists():
        raise FixtureError("a killed broker must leave its abort file")
    acked = [e for e in run.sent() if e.get("status") == "SEND_OK"]
    return {
        "shutdown": "kill -9 of the broker during a SYNC_FLUSH load",
        "killed_at": killed_at,
        "broker_conf": cluster.broker_conf,
        "store": str(cluster.store_path.relative_to(out)),
        "acknowledged": acked,
    }


# -- wire ----------------------------------------------------------------------------------------
def _address_forms(port: int) -> list[bytes]:
    """127.0.0.1:port as clients meet it: text (routes), offsetMsgId hex, STOREHOST bytes."""
    return [
        f"127.0.0.1:{port}".encode(),
        f"7F000001{port:08X}".encode(),
        socket.inet_aton("127.0.0.1") + struct.pack(">i", port),
    ]


def _proxied(session: ProxySession, cluster: RocketMQCluster) -> tuple[str, str]:
    """Proxies for the name server and both broker ports: (namesrv, broker) proxy addresses.

    Clients find the broker in routes, and (mqadmin's queryMsgById, the C++ core's send-back)
    in the store host a message carries; every form is rewritten to the proxy's, same length.
    """
    broker_port = cluster.broker_port
    while True:
        proxy_port = free_port_block((-2, 0))
        if len(str(proxy_port)) == len(str(broker_port)):
            break
    rewrite: dict[bytes, bytes] = {}
    for real, proxy in ((broker_port, proxy_port), (broker_port - 2, proxy_port - 2)):
        rewrite.update(zip(_address_forms(real), _address_forms(proxy), strict=True))
    broker = session.add(
        cluster.broker_addr, label="broker", listen_port=proxy_port, rewrite_to_client=rewrite
    )
    session.add(
        f"127.0.0.1:{broker_port - 2}",
        label="broker-fast",
        listen_port=proxy_port - 2,
        rewrite_to_client=rewrite,
    )
    namesrv = session.add(cluster.namesrv_addr, label="namesrv", rewrite_to_client=rewrite)
    return namesrv.addr, broker.addr


def _java_wire(ns: str, *, serialize: str = "json") -> None:
    opts = {"serialize": serialize}
    if serialize != "json":
        # Its own topic: the captures run side by side.
        create_topic(ns, "WireJavaRmq")
        _produce(ns, "java", "WireJavaRmq", 5, tag="TagA", prop=["a=1"], **opts)
        _consume(ns, "java", "WireJavaRmq", 5, "CG_java_rmq", **opts)
        return
    create_topic(ns, "WireJava")
    _produce(ns, "java", "WireJava", 5, tag="TagA", prop=["a=1"], **opts)
    for mode in ("async", "oneway"):
        _produce(ns, "java", "WireJava", 5, mode=mode, start=100, **opts)
    _produce(ns, "java", "WireJava", 10, mode="batch", batch_size=5, start=200, **opts)
    _produce(ns, "java", "WireJava", 1, delay_level=1, start=300, **opts)
    _consume(ns, "java", "WireJava", 26, "CG_java_push", reconsume_later=1)
    _consume(ns, "java", "WireJava", 26, "CG_java_orderly", mode="orderly")
    _consume(ns, "java", "WireJava", 26, "CG_java_pull", mode="pull")
    _consume(ns, "java", "WireJava", 26, "CG_java_lite", mode="lite-pull", seek=0)
    _consume(ns, "java", "WireJava", 5, "CG_java_sql", sql="a = '1'")
    _consume(ns, "java", "WireJava", 26, "CG_java_bc", model="broadcasting")
    _produce(ns, "java", "WireJavaTx", 2, answer="unknown-commit", group="PG_java_tx")


def _cpp_wire(ns: str) -> None:
    # The C++ core falls back to TBW102 for a topic the name server does not know: auto-create.
    _produce(ns, "cpp", "WireCpp", 5, tag="TagA", prop=["a=1"])
    _produce(ns, "cpp", "WireCpp", 5, mode="oneway", start=100)
    _consume(ns, "cpp", "WireCpp", 10, "CG_cpp_push", reconsume_later=1)
    _consume(ns, "cpp", "WireCpp", 10, "CG_cpp_orderly", mode="orderly")
    _consume(ns, "cpp", "WireCpp", 10, "CG_cpp_pull", mode="pull")


def _node_wire(ns: str) -> None:
    create_topic(ns, "WireNode")
    _produce(ns, "node", "WireNode", 5, tag="TagA", prop=["a=1"])
    _consume(ns, "node", "WireNode", 5, "CG_node_push", reconsume_later=1)
    _consume(ns, "node", "WireNode", 5, "CG_node_sql", sql="a = '1'")


def _go_wire(ns: str) -> None:
    create_topic(ns, "WireGo")
    _produce(ns, "go", "WireGo", 5, tag="TagA", prop=["a=1"])
    _produce(ns, "go", "WireGo", 5, mode="async", start=100)
    _produce(ns, "go", "WireGo", 5, mode="oneway", start=200)
    _produce(ns, "go", "WireGo", 6, mode="batch", batch_size=3, start=300)
    _consume(ns, "go", "WireGo", 21, "CG_go_push", reconsume_later=1)
    _consume(ns, "go", "WireGo", 21, "CG_go_orderly", mode="orderly")
    _consume(ns, "go", "WireGo", 21, "CG_go_pull", mode="pull")
    _produce(ns, "go", "WireGoTx", 2, answer="unknown-commit", group="PG_go_tx")


def _mqadmin_wire(ns: str, broker: str, cluster: RocketMQCluster) -> None:
    create_topic(ns, "WireAdmin", queues=4)
    # Messages to query come from outside the proxy, so this capture holds mqadmin's frames only.
    sent = _produce(cluster, "java", "WireAdmin", 3, keys_prefix="admin-")
    _consume(cluster.namesrv_addr, "java", "WireAdmin", 3, "CG_admin")
    real_hex, proxy_hex = (
        _address_forms(int(a.rsplit(":", 1)[1]))[1].decode() for a in (cluster.broker_addr, broker)
    )
    offset_msg_id = sent[0]["offsetMsgId"].replace(real_hex, proxy_hex)
    commands: list[list[str]] = [
        ["topicList"],
        ["topicRoute", "-t", "WireAdmin"],
        ["topicStatus", "-t", "WireAdmin"],
        ["clusterList"],
        ["brokerStatus", "-b", broker],
        ["getBrokerConfig", "-b", broker],
        ["consumerProgress", "-g", "CG_admin"],
        ["consumerProgress"],
        ["queryMsgById", "-i", offset_msg_id],
        ["queryMsgByKey", "-t", "WireAdmin", "-k", "admin-1"],
        ["queryMsgByUniqueKey", "-t", "WireAdmin", "-i", sent[1]["msgId"]],
        ["queryMsgByOffset", "-t", "WireAdmin", "-b", cluster.broker_name, "-i", "0", "-o", "0"],
        ["updateSubGroup", "-c", cluster.cluster_name, "-g", "CG_admin_new"],
        ["consumerConnection", "-g", "CG_admin"],
        ["producerConnection", "-g", "PG_java", "-t", "WireAdmin"],
        ["updateTopicPerm", "-c", cluster.cluster_name, "-t", "WireAdmin", "-p", "6"],
        ["statsAll"],
        ["deleteSubGroup", "-c", cluster.cluster_name, "-g", "CG_admin_new"],
        ["deleteTopic", "-c", cluster.cluster_name, "-t", "WireAdmin"],
    ]
    for command in commands:
        # Some answer "not found" (no consumer online, say): the request is what we capture.
        mqadmin(ns, *command, check=False)


def generate_wire(out: Path) -> dict[str, Any]:
    captures: dict[str, Callable[[str, str, RocketMQCluster], None]] = {
        "java": lambda ns, _b, _c: _java_wire(ns),
        "java-rocketmq-header": lambda ns, _b, _c: _java_wire(ns, serialize="rocketmq"),
        "cpp": lambda ns, _b, _c: _cpp_wire(ns),
        "node": lambda ns, _b, _c: _node_wire(ns),
        "go": lambda ns, _b, _c: _go_wire(ns),
        "mqadmin": _mqadmin_wire,
    }
    index: dict[str, Any] = {}
    ports_lock = threading.Lock()

    def capture(
        name: str, scenario: Callable[[str, str, RocketMQCluster], None], cluster: RocketMQCluster
    ) -> None:
        path = out / f"{name}.jsonl"
        with ProxySession(path) as session:
            with ports_lock:  # a port is probed free, then bound: one capture at a time
                ns, broker = _proxied(session, cluster)
            scenario(ns, broker, cluster)
        frames = read_capture(path)
        for frame in frames:
            frame.check()
        index[name] = {
            "file": path.name,
            "frames": len(frames),
            "request_codes": sorted(request_codes(frames)),
        }

    # Each capture has its own proxies, topics and groups; most of a capture is waiting for
    # clients to start and rebalance, so three at a time share the cluster.
    with RocketMQCluster(out / "cluster") as cluster, ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(capture, n, s, cluster) for n, s in captures.items()]
        for future in futures:
            future.result()
    shutil.rmtree(out / "cluster", ignore_errors=True)
    return {"captures": index}


GENERATORS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "store": generate_store,
    "crash": generate_crash,
    "wire": generate_wire,
}


_GENERATING = threading.Lock()


def ensure_fixture(name: str, *, force: bool = False, cache: BenchCache | None = None) -> Path:
    """The fixture's folder, generated first if it is missing or stale.

    When one must be generated, every other stale fixture is generated beside it, each on its
    own RocketMQ: the three take about as long together as the longest alone, and a test run
    that needs one soon needs the others.
    """
    cache = cache or bench_cache()
    digest = _source_digest()
    if not force and _is_current(cache, name, digest):
        return cache.fixtures / name
    with _GENERATING, _cross_process_lock(cache):
        if force:
            return _generate(name, cache, digest)
        names = [n for n in FIXTURE_NAMES if not _is_current(cache, n, digest)]
        if name not in names:
            return cache.fixtures / name
        with ThreadPoolExecutor(len(names)) as pool:
            futures = {n: pool.submit(_generate, n, cache, digest) for n in names}
            for other, future in futures.items():
                if other != name and future.exception() is not None:
                    # Not this caller's fixture: it is generated again when it is asked for.
                    print(f"fixture {other} failed beside {name}: {future.exception()!r}")
            return futures[name].result()


@contextlib.contextmanager
def _cross_process_lock(cache: BenchCache) -> Iterator[None]:
    """Test workers share the cache: one generates, the others then find the fixtures current."""
    cache.fixtures.mkdir(parents=True, exist_ok=True)
    with (cache.fixtures / ".generating.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _is_current(cache: BenchCache, name: str, digest: str) -> bool:
    manifest = cache.fixtures / name / "manifest.json"
    return manifest.exists() and json.loads(manifest.read_text()).get("digest") == digest


def _generate(name: str, cache: BenchCache, digest: str) -> Path:
    final = cache.fixtures / name
    cache.fixtures.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache.fixtures))
    started = time.monotonic()
    try:
        info = GENERATORS[name](staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    info.update(
        {
            "fixture": name,
            "digest": digest,
            "generated_at": time.time(),
            "seconds": round(time.monotonic() - started, 1),
            "rocketmq_server": ROCKETMQ_SERVER_VERSION,
            "rocketmq_client": ROCKETMQ_CLIENT_VERSION,
        }
    )
    _write_json(staged / "manifest.json", info)
    if final.exists():
        shutil.rmtree(final)
    staged.replace(final)
    return final


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m interop.fixtures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(FIXTURE_NAMES))
    parser.add_argument("--force", action="store_true", help="regenerate even if current")
    args = parser.parse_args(list(argv) if argv is not None else None)
    unknown = [n for n in args.names if n not in GENERATORS]
    if unknown:
        parser.error(f"unknown fixture(s) {', '.join(unknown)}; choose from {FIXTURE_NAMES}")
    for name in args.names or FIXTURE_NAMES:
        started = time.monotonic()
        path = ensure_fixture(name, force=args.force)
        print(f"interop.fixtures {name:<6} {path} ({time.monotonic() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
