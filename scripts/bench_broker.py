"""The broker-bound benchmark: one lean load generator (loadgen.py) against Sidewinder, RocketMQ
4.9.7, RocketMQ 5.3.2 and Redis Streams, in alternating slices. scripts/bench.py runs it; see its
--help.

    run = run_broker_bench(Plan(slice_s=5, rounds=3, warm_passes=1), root)
    print(render(run))

The sides (SIDES): `sidewinder` (our `mqbroker` + `mqnamesrv`), `rocketmq` (the real 4.9.7
broker from the reference bench), `rocketmq5` (the real 5.3.2 broker, beside a 4.9.7 name
server: interop/rocketmq5.py) and `redis` (redis-server, appendfsync everysec / always). The
three brokers get the same broker.conf (128 MiB CommitLog segments, the flush mode) and the two
JVMs the same heap.

The rows (ROWS), each on the broker of its flush mode: produce 1 KiB ASYNC_FLUSH and SYNC_FLUSH
(4 connections × 64 in flight), consume (PULL_MESSAGE 32 of what the first produced), the
unloaded SYNC_FLUSH ack (1 × 1), produce 128 B and 4 KiB, batch send (16 × 1 KiB), and POP
(RocketMQ 5's consumption: POP_MESSAGE 32 from any queue, then one ACK_MESSAGE per message, of
what the 1 KiB produce row wrote, by a consumer group of its own per side), and the gRPC rows
(grpc-produce: SendMessage 1 KiB, 4 connections × 64 in flight; grpc-pop: ReceiveMessage 32,
then one AckMessage per message, of what grpc-produce wrote) through Sidewinder's own gRPC
front (grpcServerPort: its broker serves it for the whole run when a gRPC row is picked) by
scripts/grpcload (loadgen_grpc.py); and grpc-proxy-produce, the same sends through our mqproxy
(cluster mode) in front of Sidewinder's broker and of RocketMQ 5.3.2's, the mqproxy's CPU
counted with the broker's. Redis has no batch send and no POP; RocketMQ 4.9.7 has no POP;
neither RocketMQ has a gRPC front of its own here (4.9.7 has none, 5.3.2's proxy cannot run):
their cells of those rows stay empty. A row that reads
(consume, pop) brings the produce row that writes its topic along when rows are picked.

For each flush mode, one fresh broker of each kind runs. Then, pass after pass, every row runs
one slice on each side in turn (the sides' order rotates each pass), so that drift on this
shared machine hits every side alike. The first `warm_passes` passes are not counted: the JITs
warm up in them, and every store gets its first segment.

Per slice: messages acknowledged (or pulled) per second, the ack latency of every request (on the
POP row, of every ACK_MESSAGE), the broker's CPU-seconds over the slice (psutil, the broker
process and its children) and its RSS at the end, and the generator's own CPU (this process).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
from array import array
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import bench_reference as ref
import psutil
import uvloop
from loadgen import (
    Load,
    Meter,
    percentile_ms,
    pop,
    pop_templates,
    produce,
    pull,
    pull_templates,
    send_templates,
)

from interop.cache import ROCKETMQ_SERVER_VERSION
from interop.ports import lease_port_block
from interop.processes import ManagedProcess, can_connect
from interop.rocketmq import RocketMQCluster
from interop.rocketmq5 import ROCKETMQ5_VERSION, RocketMQ5Cluster
from interop.sidewinder import MqProxy
from interop.target import create_target
from sidewinder.client.admin import Admin

QUEUES = 8
SIDES = ("sidewinder", "rocketmq", "rocketmq5", "redis")
SIDE_NAMES = {
    "sidewinder": "Sidewinder",
    "rocketmq": f"RocketMQ {ROCKETMQ_SERVER_VERSION}",
    "rocketmq5": f"RocketMQ {ROCKETMQ5_VERSION}",
    "redis": "Redis Streams",
}
POP_SIDES = ("sidewinder", "rocketmq5")  # the brokers that serve POP_MESSAGE
GRPC_SIDES = ("sidewinder",)  # a gRPC front in the broker (grpcServerPort, local mode)
PROXY_SIDES = ("sidewinder", "rocketmq5")  # brokers our mqproxy (cluster mode) fronts here
POP_GROUP = "bench_lean_pop"
REDIS_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RowSpec:
    key: str
    flush: str  # "async" or "sync": which broker of the side it runs on
    label: str
    topic: str
    # or "pull": read back what the produce row on `topic` wrote; or "pop": pop and ack it
    kind: str = "produce"
    body: int = 1024
    batch: int = 1  # messages per request (SEND_BATCH_MESSAGE above 1)
    connections: int = 4
    window: int = 64  # requests in flight per connection (pop: consumers per connection)
    redis: bool = True  # Redis has a form of it (no batch send: XADD is one entry)
    grpc: bool = False  # through the broker's own gRPC front (scripts/grpcload), not remoting
    proxy: bool = False  # gRPC through our mqproxy in front of the broker (its CPU counted)

    def runs_on(self, side: str) -> bool:
        """Whether the side has this row's form: Redis no batch, only 5.x brokers POP, only
        Sidewinder's broker a gRPC front of its own (RocketMQ 5.3.2's proxy cannot run here),
        our mqproxy in front of Sidewinder's broker and RocketMQ 5.3.2's."""
        if self.grpc:
            return side in (PROXY_SIDES if self.proxy else GRPC_SIDES)
        if self.kind == "pop":
            return side in POP_SIDES
        return side != "redis" or self.redis


ROWS = (
    RowSpec("produce", "async", "produce 1 KiB, ASYNC_FLUSH, 4 conns × 64", "BenchLean1K"),
    RowSpec("produce-sync", "sync", "produce 1 KiB, SYNC_FLUSH, 4 conns × 64", "BenchLeanSync"),
    RowSpec("consume", "async", "consume: pull 32, 1 in flight per queue", "BenchLean1K", "pull"),
    RowSpec(
        "sync-ack",
        "sync",
        "unloaded SYNC_FLUSH ack: 1 KiB, 1 conn × 1",
        "BenchLeanProbe",
        connections=1,
        window=1,
    ),
    RowSpec(
        "produce-128", "async", "produce 128 B, ASYNC_FLUSH, 4 conns × 64", "BenchLean128", body=128
    ),
    RowSpec(
        "produce-4k", "async", "produce 4 KiB, ASYNC_FLUSH, 4 conns × 64", "BenchLean4K", body=4096
    ),
    RowSpec(
        "batch",
        "async",
        "batch send 16 × 1 KiB, ASYNC_FLUSH, 4 conns × 16",
        "BenchLeanBatch",
        batch=16,
        window=16,
        redis=False,
    ),
    RowSpec(
        "pop",
        "async",
        "pop 32 + ack, 1 KiB, 4 conns × 2 consumers",
        "BenchLean1K",
        "pop",
        window=2,
        redis=False,
    ),
    RowSpec(
        "grpc-produce",
        "async",
        "gRPC SendMessage 1 KiB, ASYNC_FLUSH, 4 conns × 64",
        "BenchGrpc1K",
        redis=False,
        grpc=True,
    ),
    RowSpec(
        "grpc-pop",
        "async",
        "gRPC receive 32 + ack, 1 KiB, 4 conns × 2 consumers",
        "BenchGrpc1K",
        "pop",
        window=2,
        redis=False,
        grpc=True,
    ),
    RowSpec(
        "grpc-proxy-produce",
        "async",
        "gRPC SendMessage 1 KiB via mqproxy, ASYNC_FLUSH, 4 conns × 64",
        "BenchProxy1K",
        redis=False,
        grpc=True,
        proxy=True,
    ),
)


def with_sources(keys: list[str]) -> tuple[str, ...]:
    """The rows `keys` name, in table order, with the produce row that fills the topic of each
    row that reads one (consume, pop)."""
    chosen = set(keys)
    for row in ROWS:
        if row.key in keys and row.kind != "produce":
            chosen |= {
                w.key
                for w in ROWS
                if w.kind == "produce" and (w.topic, w.flush) == (row.topic, row.flush)
            }
    return tuple(row.key for row in ROWS if row.key in chosen)


@dataclass(frozen=True)
class Plan:
    slice_s: float = 5.0
    rounds: int = 3
    warm_passes: int = 1
    sides: tuple[str, ...] = SIDES
    flushes: tuple[str, ...] = ("async", "sync")
    rows: tuple[str, ...] = tuple(row.key for row in ROWS)  # see with_sources
    # CPU lists ("0", "0-1") each broker is pinned to in turn: the scaling table. Empty: the
    # brokers run where the kernel puts them, and the main table is made.
    pins: tuple[str, ...] = ()

    def rows_of(self, flush: str) -> list[RowSpec]:
        """The picked rows of one flush mode, in table order (none if the mode is not run)."""
        if flush not in self.flushes:
            return []
        return [row for row in ROWS if row.flush == flush and row.key in self.rows]

    @property
    def pull_limit_s(self) -> float:
        """A pull slice drains what was produced; this bounds it."""
        return max(6 * self.slice_s, 10.0)


# -- the sides ------------------------------------------------------------------------------------
class RedisServer:
    """redis-server with an append-only file, fsynced always (SYNC) or every second (ASYNC)."""

    def __init__(self, workdir: Path, flush: str) -> None:
        self.workdir = workdir
        self.port = lease_port_block()
        self.fsync = "always" if flush == "sync" else "everysec"
        binary = shutil.which("redis-server") or "redis-server"
        argv = [
            binary,
            *("--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(workdir)),
            *("--save", "", "--appendonly", "yes", "--appendfsync", self.fsync),
            *("--protected-mode", "no"),
        ]
        self.process = ManagedProcess("redis-server", argv, workdir / "redis.log", cwd=workdir)

    @staticmethod
    def missing() -> str | None:
        """Why there can be no Redis rows here, or None."""
        if shutil.which("redis-server") is None:
            return "redis-server is not installed (apt-get install redis-server): no Redis rows"
        try:
            import hiredis  # noqa: F401
        except ImportError:
            return "hiredis is missing (pip install -e '.[bench]'): no Redis rows"
        return None

    @staticmethod
    def version() -> str:
        out = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False
        ).stdout
        return next((w[2:] for w in out.split() if w.startswith("v=")), "?")

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        self.process.wait_ready(lambda: can_connect("127.0.0.1", self.port), REDIS_START_TIMEOUT_S)
        return self

    def stop(self) -> None:
        self.process.stop(10)

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


@dataclass
class Side:
    """One running broker the slices load, and what has been produced to and pulled from it."""

    kind: str
    addr: tuple[str, int]
    broker_pid: int
    broker_name: str
    stop: Callable[[], None]
    grpc_addr: str | None = None  # the broker's own gRPC front, when a gRPC row runs
    proxy_addr: str | None = None  # our mqproxy in front of it, when a mqproxy row runs
    proxy_pid: int | None = None
    produced: dict[str, list[int]] = field(default_factory=dict)  # topic -> per queue
    pulled: dict[str, list[int]] = field(default_factory=dict)
    popped: dict[str, int] = field(default_factory=dict)  # topic -> messages pops handed out
    # A consumer group of its own per side and run: its first pop starts at each queue's start.
    pop_group: str = field(default_factory=lambda: f"{POP_GROUP}_{os.urandom(4).hex()}")
    last_ids: dict[str, list[bytes]] = field(default_factory=dict)  # Redis stream positions

    def usage(self) -> ref.Usage:
        usage = ref.tree_usage(self.broker_pid)
        if usage is None:
            raise RuntimeError(f"the {self.kind} broker (pid {self.broker_pid}) is gone")
        return usage

    def cpu_s(self, with_proxy: bool = False) -> float:
        """The broker's CPU-seconds so far, and its mqproxy's with `with_proxy`."""
        cpu = self.usage().cpu_s
        if with_proxy and self.proxy_pid is not None:
            proxy = ref.tree_usage(self.proxy_pid)
            if proxy is None:
                raise RuntimeError(f"the mqproxy in front of {self.kind} is gone")
            cpu += proxy.cpu_s
        return cpu


def start_side(
    kind: str, flush: str, workdir: Path, grpc: bool = False, proxy: bool = False
) -> Side:
    """A fresh broker of `kind` with the bench's broker.conf and the rows' topics; with `grpc`,
    Sidewinder's broker also serves its own gRPC front (grpcServerPort, RocketMQ's local
    mode) for the whole run, so the remoting rows measure the same broker; with `proxy`, our
    mqproxy (cluster mode) runs in front of the broker of a side in PROXY_SIDES."""
    if kind == "redis":
        server = RedisServer(workdir, flush).start()
        return Side(kind, ("127.0.0.1", server.port), server.pid, "redis", server.stop)
    conf = ref.bench_broker_conf(ref.FLUSH_MODES[flush])
    grpc_addr = None
    if grpc and kind in GRPC_SIDES:
        port = lease_port_block()
        conf = {**conf, "grpcServerPort": str(port)}
        grpc_addr = f"127.0.0.1:{port}"
    cluster: Any
    if kind == "rocketmq":
        cluster = RocketMQCluster(workdir, broker_conf=conf, broker_heap_mb=ref.BROKER_HEAP_MB)
    elif kind == "rocketmq5":
        cluster = RocketMQ5Cluster(workdir, broker_conf=conf, broker_heap_mb=ref.BROKER_HEAP_MB)
    else:
        cluster = create_target(kind, workdir, conf)
    cluster.start()
    try:
        topics = sorted({row.topic for row in ROWS if row.flush == flush})
        uvloop.run(_create_topics(cluster.namesrv_addr, topics))
    except BaseException:
        cluster.stop()
        raise
    host, port = cluster.broker_addr.rsplit(":", 1)
    side = Side(
        kind, (host, int(port)), cluster.broker.pid, cluster.broker_name, cluster.stop, grpc_addr
    )
    if proxy and kind in PROXY_SIDES:
        try:
            front = MqProxy(workdir / "mqproxy", cluster.namesrv_addr).start()
        except BaseException:
            cluster.stop()
            raise

        def stop() -> None:
            try:
                front.stop()
            finally:
                cluster.stop()

        side.stop, side.proxy_addr, side.proxy_pid = stop, front.endpoints, front.process.pid
    return side


async def _create_topics(namesrv_addr: str, topics: list[str]) -> None:
    admin = Admin(namesrv_addr)
    try:
        for topic in topics:
            await admin.create_topic(topic, queues=QUEUES)
    finally:
        await admin.close()


# -- slices ---------------------------------------------------------------------------------------
@dataclass
class Slice:
    row: str
    side: str
    pass_no: int
    warm: bool
    messages: int
    seconds: float
    requests: int
    answered: int
    received: int  # messages pops handed out (0 on other rows)
    failed: dict[int, int]
    broker_cpu_s: float
    broker_rss_mib: float
    own_cpu_s: float
    notes: list[str]
    p50_ms: float | None
    p99_ms: float | None
    latencies_ns: array[int] = field(repr=False)  # 8 bytes each: a run keeps millions
    cpus: str = ""  # the CPU list the broker was pinned to during the slice ("": not pinned)

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def own_cores(self) -> float:
        return self.own_cpu_s / self.seconds if self.seconds > 0 else 0.0


def parse_cpu_list(text: str) -> set[int]:
    """A CPU list as taskset takes one: "0", "0-1", "0,2-3"."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin(side: Side, cpus: str) -> None:
    """Pin every thread of the side's broker (and its mqproxy) to `cpus`, as `taskset -a -p`
    does; threads started later inherit it. "" gives back every CPU."""
    allowed = parse_cpu_list(cpus) if cpus else set(range(os.cpu_count() or 1))
    for pid in filter(None, (side.broker_pid, side.proxy_pid)):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{proc.pid}/task"):
                    with contextlib.suppress(OSError):
                        os.sched_setaffinity(int(task), allowed)


def run_slice(
    side: Side, row: RowSpec, plan: Plan, pass_no: int, cpus: str = "", share: float = 1.0
) -> Slice:
    """One slice of `row` on `side`; a pull slice reads `share` of what is left to read (the
    scaling table splits a pass's backlog between its CPU lists)."""
    meter = Meter(lambda: side.cpu_s(row.proxy))
    load = (
        _grpc_load(side, row, plan, meter)
        if row.grpc
        else uvloop.run(_load(side, row, plan, meter, share))
    )
    latencies = array("q", sorted(load.latencies_ns))
    if row.kind == "produce":
        produced = side.produced.setdefault(row.topic, [0] * QUEUES)
        for queue, count in enumerate(load.per_queue):
            produced[queue] += count
    elif row.kind == "pop":
        side.popped[row.topic] = side.popped.get(row.topic, 0) + load.received
    return Slice(
        row.key,
        side.kind,
        pass_no,
        pass_no < plan.warm_passes,
        load.messages,
        load.seconds,
        load.requests,
        load.answered,
        load.received,
        load.failed,
        meter.broker_s,
        side.usage().rss / (1 << 20),
        meter.own_s,
        load.notes,
        percentile_ms(latencies, 50),
        percentile_ms(latencies, 99),
        latencies,
        cpus,
    )


def _load(
    side: Side, row: RowSpec, plan: Plan, meter: Meter, share: float = 1.0
) -> Coroutine[Any, Any, Load]:
    from loadgen_redis import redis_produce, redis_read

    body = b"x" * row.body
    limits: dict[str, Any] = {"seconds": plan.slice_s, "meter": meter}
    if row.kind == "produce" and side.kind == "redis":
        return redis_produce(
            side.addr, row.topic, body, QUEUES, row.connections, row.window, **limits
        )
    if row.kind == "produce":
        templates = send_templates(
            row.topic, side.broker_name, queues=QUEUES, body=body, batch=row.batch
        )
        return produce(side.addr, templates, row.connections, row.window, **limits)
    if row.kind == "pop":
        left = sum(side.produced.get(row.topic, [])) - side.popped.get(row.topic, 0)
        pops = pop_templates(row.topic, side.pop_group, side.broker_name)
        return pop(side.addr, pops, left, row.connections, row.window, **limits)
    limits["seconds"] = plan.pull_limit_s
    offsets = side.pulled.setdefault(row.topic, [0] * QUEUES)
    produced = side.produced.get(row.topic, [0] * QUEUES)
    targets = [
        done + int((end - done) * share) for done, end in zip(offsets, produced, strict=True)
    ]
    if side.kind == "redis":
        last_ids = side.last_ids.setdefault(row.topic, [b"0-0"] * QUEUES)
        return redis_read(side.addr, row.topic, last_ids, offsets, targets, **limits)
    pulls = pull_templates(row.topic, queues=QUEUES)
    return pull(side.addr, pulls, offsets, targets, **limits)


def _grpc_load(side: Side, row: RowSpec, plan: Plan, meter: Meter) -> Load:
    """The row through the broker's gRPC front, by scripts/grpcload (loadgen_grpc.py)."""
    from loadgen_grpc import grpc_receive, grpc_send

    addr = side.proxy_addr if row.proxy else side.grpc_addr
    assert addr is not None
    if row.kind == "produce":
        return grpc_send(
            addr,
            row.topic,
            row.connections,
            row.window,
            body=row.body,
            seconds=plan.slice_s,
            meter=meter,
        )
    left = sum(side.produced.get(row.topic, [])) - side.popped.get(row.topic, 0)
    return grpc_receive(
        addr,
        row.topic,
        f"{side.pop_group}_grpc",
        row.connections,
        row.window,
        budget=left,
        seconds=plan.slice_s,
        meter=meter,
    )


@dataclass
class Run:
    """Everything one broker-bound run measured."""

    plan: Plan
    slices: list[Slice] = field(default_factory=list)
    checks: dict[str, dict[str, int]] = field(default_factory=dict)  # side -> counts
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    summaries: dict[tuple[str, str, str], Summary | None] = field(default_factory=dict)


def run_broker_bench(plan: Plan, root: Path) -> Run:
    run = Run(plan, facts=_facts(plan))
    sides = list(plan.sides)
    if "redis" in sides and (why := RedisServer.missing()) is not None:
        ref.log(why)
        run.notes.append(why)
        sides.remove("redis")
    if not sides:
        run.notes.append("no side to measure")
        return run
    grpc_rows = any(row.grpc for flush in plan.flushes for row in plan.rows_of(flush))
    if grpc_rows and (why := _grpc_missing()) is not None:
        ref.log(why)
        run.notes.append(why)
        plan = replace(plan, rows=tuple(k for k in plan.rows if not _row(k).grpc))
        run.plan = plan
    for flush in plan.flushes:
        rows = plan.rows_of(flush)
        if not rows:
            continue
        grpc = any(row.grpc and not row.proxy for row in rows)
        proxy = any(row.proxy for row in rows)
        with _running_sides(sides, flush, root / flush, grpc, proxy) as running:
            for pass_no in range(plan.warm_passes + plan.rounds):
                turn = pass_no % len(running)
                order = running[turn:] + running[:turn]
                for row in rows:
                    pins = plan.pins or ("",)
                    for n, cpus in enumerate(pins):
                        share = 1 / (len(pins) - n)  # of the backlog a pull slice reads
                        for side in order:
                            if not row.runs_on(side.kind):
                                continue
                            if plan.pins:
                                pin(side, cpus)
                            found = run_slice(side, row, plan, pass_no, cpus, share)
                            run.slices.append(found)
                            _log_slice(found)
            _count(run, running, flush)
    run.facts["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return run


def _grpc_missing() -> str | None:
    """Why there can be no gRPC rows here (the generator does not build), or None."""
    from loadgen_grpc import generator

    from interop.install import InstallError

    try:
        generator()
    except InstallError as exc:
        return f"scripts/grpcload does not build ({exc}): no gRPC rows"
    return None


@contextlib.contextmanager
def _running_sides(
    kinds: list[str], flush: str, root: Path, grpc: bool = False, proxy: bool = False
) -> Iterator[list[Side]]:
    running: list[Side] = []
    try:
        for kind in kinds:
            ref.log(f"[{flush}] starting {SIDE_NAMES[kind]} ({ref.FLUSH_MODES[flush]})")
            running.append(start_side(kind, flush, root / kind, grpc, proxy))
        yield running
    finally:
        for side in running:
            with contextlib.suppress(Exception):
                side.stop()


def _log_slice(s: Slice) -> None:
    ref.log(
        f"  {'warm ' if s.warm else ''}pass {s.pass_no} {s.row:<12} {s.side:<10} "
        + (f"cpus {s.cpus:<4} " if s.cpus else "")
        + f"{s.per_second:>10,.0f} msg/s  p50 {s.p50_ms or 0:.3f} ms  broker "
        f"{s.broker_cpu_s / s.seconds if s.seconds else 0:.2f} cores  generator "
        f"{s.own_cores:.2f} cores" + (f"  failed {s.failed}" if s.failed else "")
    )


def _count(run: Run, sides: list[Side], flush: str) -> None:
    """Every request answered and accepted; every produced message pulled back; every popped
    message acked."""
    for side in sides:
        mine = [s for s in run.slices if s.side == side.kind and _row(s.row).flush == flush]
        counts = run.checks.setdefault(side.kind, dict.fromkeys(COUNTS, 0))
        sends = [s for s in mine if _row(s.row).kind == "produce"]
        pops = [s for s in mine if _row(s.row).kind == "pop"]
        counts["requests"] += sum(s.requests for s in sends)
        counts["answered"] += sum(s.answered for s in sends)
        counts["failed"] += sum(sum(s.failed.values()) for s in mine)
        counts["pop_requests"] += sum(s.requests for s in pops)
        counts["pop_answered"] += sum(s.answered for s in pops)
        counts["popped"] += sum(s.received for s in pops)
        counts["acked"] += sum(s.messages for s in pops)
        for row in ROWS:
            if row.flush == flush and row.kind == "pull" and row.key in run.plan.rows:
                counts["produced"] += sum(side.produced.get(row.topic, []))
                counts["pulled"] += sum(side.pulled.get(row.topic, []))


COUNTS = (
    "requests",  # sends
    "answered",
    "failed",  # refused requests of any row
    "produced",  # to the topics the consume row pulls
    "pulled",
    "pop_requests",  # pops and acks
    "pop_answered",
    "popped",  # messages pops handed out
    "acked",
)


def _row(key: str) -> RowSpec:
    return next(row for row in ROWS if row.key == key)


def _facts(plan: Plan) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "plan": asdict(plan),
    }
    if "redis" in plan.sides and RedisServer.missing() is None:
        facts["redis_version"] = RedisServer.version()
    return facts


# -- summary and table ----------------------------------------------------------------------------
@dataclass
class Summary:
    messages: int
    seconds: float
    slice_rates: list[float]
    p50_ms: float | None
    p99_ms: float | None
    cpu_per_100k_s: float | None
    rss_mib: float
    own_cores: float
    own_cores_max: float

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


def summarize(run: Run, row: str, side: str, cpus: str = "") -> Summary | None:
    """The counted slices of `row` on `side` (pinned to `cpus`) taken together (computed once
    per run)."""
    if (row, side, cpus) not in run.summaries:
        run.summaries[row, side, cpus] = _summarize(run, row, side, cpus)
    return run.summaries[row, side, cpus]


def _summarize(run: Run, row: str, side: str, cpus: str) -> Summary | None:
    counted = [
        s for s in run.slices if s.row == row and s.side == side and s.cpus == cpus and not s.warm
    ]
    if not counted:
        return None
    messages = sum(s.messages for s in counted)
    seconds = sum(s.seconds for s in counted)
    merged = array("q")
    for s in counted:
        merged.extend(s.latencies_ns)
    latencies = sorted(merged)
    cpu = sum(s.broker_cpu_s for s in counted)
    return Summary(
        messages,
        seconds,
        [s.per_second for s in counted],
        percentile_ms(latencies, 50),
        percentile_ms(latencies, 99),
        cpu / messages * 100_000 if messages else None,
        max(s.broker_rss_mib for s in counted),
        sum(s.own_cpu_s for s in counted) / seconds if seconds else 0.0,
        max(s.own_cores for s in counted),
    )


def _rate(summary: Summary | None) -> str:
    if summary is None:
        return "–"
    low, high = min(summary.slice_rates), max(summary.slice_rates)
    return f"{summary.per_second:,.0f} ({low:,.0f}–{high:,.0f})"


def _trio(summaries: list[Summary | None], cell: Callable[[Summary], str]) -> str:
    return " · ".join("–" if s is None else cell(s) for s in summaries)


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _get(summary: Summary | None, figure: str) -> float | None:
    return None if summary is None else getattr(summary, figure)


def _ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}×" if ours and theirs else "–"


SHORT = {"sidewinder": "S", "rocketmq": "R", "rocketmq5": "R5", "redis": "Redis"}
PEERS = ("rocketmq", "rocketmq5")  # the brokers Sidewinder's ratios are taken against


def _machine(run: Run) -> str:
    facts = run.facts
    return (
        f"nproc {facts.get('nproc')}, load average {facts.get('loadavg_start')} at start, "
        f"{facts.get('loadavg_end')} at end"
    )


def _table_head(intro: str, header: str) -> list[str]:
    return [intro, "", header, "|" + "---|" * header.count(" | ") + "---|"]


def render_scaling(run: Run) -> str:
    """What more CPUs buy each broker: msg/s, the cores it used and its CPU per message with
    the broker pinned to each CPU list of the plan, in the same run."""
    plan = run.plan
    sides = [s for s in SIDES if any(x.side == s for x in run.slices)]
    pins = plan.pins
    header = (
        "| row | broker | "
        + " | ".join(f"msg/s on CPUs {p}" for p in pins)
        + f" | {pins[-1]} / {pins[0]} msg/s | broker cores used ({' · '.join(pins)}) "
        + f"| broker CPU-s per 100k msgs ({' · '.join(pins)}) |"
    )
    out = _table_head(
        f"Each broker pinned (all its threads, as `taskset -a`) to each CPU list in turn; the "
        f"load generator unpinned. {plan.rounds} rounds of {plan.slice_s:g} s slices per row, "
        f"side and CPU list, alternating, after {plan.warm_passes} warm pass(es); " + _machine(run),
        header,
    )
    for row in ROWS:
        if row not in plan.rows_of(row.flush):
            continue
        for side in sides:
            found = [summarize(run, row.key, side, cpus) for cpus in pins]
            if all(f is None for f in found):
                continue
            cores = _trio(
                found,
                lambda s: f"{(s.cpu_per_100k_s or 0) * s.per_second / 100_000:.2f}",
            )
            out.append(
                "| "
                + " | ".join(
                    [
                        row.label,
                        SIDE_NAMES[side],
                        *(_rate(f) for f in found),
                        _ratio(_get(found[-1], "per_second"), _get(found[0], "per_second")),
                        cores,
                        _trio(found, lambda s: f"{s.cpu_per_100k_s or 0:.2f}"),
                    ]
                )
                + " |"
            )
    return "\n".join([*out, *_check_lines(run)])


def render(run: Run) -> str:
    plan = run.plan
    if plan.pins:
        return render_scaling(run)
    sides = [s for s in SIDES if any(x.side == s for x in run.slices)]
    peers = [p for p in PEERS if p in sides]
    names = dict(SIDE_NAMES)
    if "redis_version" in run.facts:
        names["redis"] = f"Redis {run.facts['redis_version']} Streams"
    trio = " · ".join(SHORT[s] for s in sides)
    header = (
        "| row | "
        + " | ".join(f"{names[s]} msg/s" for s in sides)
        + "".join(f" | S / {SHORT[p]} msg/s" for p in peers)
        + "".join(f" | S / {SHORT[p]} CPU per msg" for p in peers)
        + f" | ack p50 / p99 ms ({trio}) "
        + f"| broker CPU-s per 100k msgs ({trio}) | broker RSS MiB ({trio}) "
        + f"| generator cores ({trio}) |"
    )
    out = _table_head(
        f"{plan.rounds} rounds of {plan.slice_s:g} s slices per row and side, alternating, after "
        f"{plan.warm_passes} uncounted warm pass(es); " + _machine(run),
        header,
    )
    for row in ROWS:
        if row not in plan.rows_of(row.flush):
            continue
        found = [summarize(run, row.key, side) for side in sides]
        by_side = dict(zip(sides, found, strict=True))
        ours = by_side.get("sidewinder")
        theirs = [by_side.get(p) for p in peers]
        out.append(
            "| "
            + " | ".join(
                [
                    row.label,
                    *(_rate(s) for s in found),
                    *(_ratio(_get(ours, "per_second"), _get(t, "per_second")) for t in theirs),
                    *(
                        _ratio(_get(ours, "cpu_per_100k_s"), _get(t, "cpu_per_100k_s"))
                        for t in theirs
                    ),
                    _trio(found, lambda s: f"{_ms(s.p50_ms)} / {_ms(s.p99_ms)}"),
                    _trio(found, lambda s: f"{s.cpu_per_100k_s or 0:.2f}"),
                    _trio(found, lambda s: f"{s.rss_mib:,.0f}"),
                    _trio(found, lambda s: f"{s.own_cores:.2f}"),
                ]
            )
            + " |"
        )
    out += ["", *_legend(run), *_target_lines(run), *_grpc_lines(run), *_check_lines(run)]
    return "\n".join(out)


def _target_lines(run: Run) -> list[str]:
    """The targets against RocketMQ 4.9.7 (faster on every row) and the POP targets against
    RocketMQ 5.3.2, read off the ratios of this run."""

    def both(row: str, peer: str) -> tuple[Summary, Summary] | None:
        ours, theirs = summarize(run, row, "sidewinder"), summarize(run, row, peer)
        return (ours, theirs) if ours and theirs else None

    def faster(row: str, peer: str) -> None:
        if pair := both(row, peer):
            ratio = pair[0].per_second / pair[1].per_second if pair[1].per_second else 0.0
            verdict = "met" if ratio >= 1.0 else "missed"
            name = SIDE_NAMES[peer]
            lines.append(f"- {row} msg/s >= 1.0× {name}: {ratio:.2f}× ({verdict})")

    def quicker_ack(row: str, peer: str, what: str) -> None:
        if (pair := both(row, peer)) and pair[0].p50_ms and pair[1].p50_ms:
            verdict = "met" if pair[0].p50_ms <= pair[1].p50_ms else "missed"
            lines.append(
                f"- {what} p50 <= {SIDE_NAMES[peer]}'s: {_ms(pair[0].p50_ms)} ms against "
                f"{_ms(pair[1].p50_ms)} ms ({verdict})"
            )

    lines = ["", "Targets (Sidewinder against RocketMQ in this run):"]
    for row in ("produce", "produce-sync", "consume"):
        faster(row, "rocketmq")
    quicker_ack("sync-ack", "rocketmq", "unloaded SYNC_FLUSH ack")
    faster("pop", "rocketmq5")
    quicker_ack("pop", "rocketmq5", "pop row's ack")
    for peer in PEERS:
        heavier = [
            row.key
            for row in ROWS
            if (pair := both(row.key, peer))
            and (pair[0].cpu_per_100k_s or 0) > (pair[1].cpu_per_100k_s or 0)
        ]
        if any(both(row.key, peer) for row in ROWS):
            verdict = "met" if not heavier else "missed on " + ", ".join(heavier)
            lines.append(
                f"- broker CPU per message <= {SIDE_NAMES[peer]}'s on every row: {verdict}"
            )
    return lines if len(lines) > 2 else []


GRPC_PAIRS = (("grpc-produce", "produce"), ("grpc-pop", "pop"))  # gRPC row, remoting row


def _grpc_lines(run: Run) -> list[str]:
    """Each gRPC row against the remoting row of the same shape, on the same broker."""
    lines = []
    for grpc, remoting in GRPC_PAIRS:
        ours, theirs = summarize(run, grpc, "sidewinder"), summarize(run, remoting, "sidewinder")
        if ours is None or theirs is None:
            continue
        rate = ours.per_second / theirs.per_second if theirs.per_second else 0.0
        cpu = _ratio(ours.cpu_per_100k_s, theirs.cpu_per_100k_s)
        lines.append(
            f"- {grpc} / {remoting}: {rate:.3f}× the msg/s at {cpu} the broker CPU per message "
            f"({ours.cpu_per_100k_s or 0:.2f} against {theirs.cpu_per_100k_s or 0:.2f} CPU-s "
            "per 100k)"
        )
    return ["", "gRPC against remoting (Sidewinder, the same broker):", *lines] if lines else []


def _legend(run: Run) -> list[str]:
    counted = [s for s in run.slices if not s.warm]
    busiest = max(counted, key=lambda s: s.own_cores, default=None)
    lines = [
        f"S = {SIDE_NAMES['sidewinder']}, R = {SIDE_NAMES['rocketmq']}, "
        f"R5 = {SIDE_NAMES['rocketmq5']}.",
        "msg/s: acknowledged (pulled) messages over the counted slices' time, with the slowest",
        "and fastest slice in brackets. Ack latency: send to reply of every request (pulls: each",
        "PULL_MESSAGE). Broker CPU: user + system seconds of the broker process (and children)",
        "during its slices; RSS at the end of a slice (with the store pages it maps). Generator:",
        "this process's own CPU during the slices, in cores.",
    ]
    if "pop" in run.plan.rows and any(s.row == "pop" for s in run.slices):
        lines += [
            "Pop row: each consumer pops 32 (queueId -1, invisibleTime 60 s) of what the 1 KiB",
            "produce row wrote and acks each message (ACK_MESSAGE) before it pops again; msg/s",
            "counts acked messages, the latencies are the acks' round trips. RocketMQ 4.9.7 and",
            "Redis have no POP: their cells stay empty. The check point and ack records a pop",
            "writes come due 60 s later (timer, then revive service), in later slices of any row.",
        ]
    if any(_row(s.row).grpc for s in run.slices):
        lines += [
            "gRPC rows: through the broker's own gRPC front (grpcServerPort, local mode; the",
            "broker serves it during every row of the run) by scripts/grpcload (Go, raw grpc-go",
            "on the v2 stubs, requests marshalled once, the stock Go client's metadata). Send:",
            "SendMessage, one message per call. Receive: ReceiveMessage (batch 32, long polling",
            "5 s, invisible 60 s), then one AckMessage per message, all at once, as the Java, Go",
            "and Python 5.x clients ack; msg/s counts acked messages, latencies are the acks'.",
            "RocketMQ 4.9.7 has no gRPC and RocketMQ 5.3.2's proxy cannot run here: their cells",
            "stay empty. Generator cores of a gRPC row: the Go process's own (getrusage).",
        ]
    if any(_row(s.row).proxy for s in run.slices):
        lines += [
            "mqproxy row: the same sends through our mqproxy (cluster mode, a process of its",
            "own speaking remoting to the broker) in front of Sidewinder's broker and of RocketMQ",
            "5.3.2's; its broker CPU counts the broker and the mqproxy process (RSS: the broker).",
        ]
    spread = median_spread(run)
    if spread is not None:
        lines.append(
            f"Noise: a row's slowest and fastest slice differ by {spread:.0%} of its rate "
            "(median over rows and sides)."
        )
    if busiest is not None:
        lines.append(
            f"Generator CPU: busiest slice {busiest.own_cores:.2f} cores ({busiest.row} on "
            f"{busiest.side})."
        )
    if "redis_version" in run.facts:
        lines.append(
            f"Redis {run.facts['redis_version']}: appendfsync everysec for ASYNC rows, always "
            "for SYNC; streams topic:queue, XADD pipelined, XREAD COUNT 32; no batch send."
        )
    return lines + [f"Note: {n}" for n in run.notes]


def _check_lines(run: Run) -> list[str]:
    lines = ["", "Counts (warm passes included):"]
    for side, c in run.checks.items():
        verdict = "ok" if check_ok(c) else "MISMATCH"
        pops = (
            f"; {c['pop_requests']:,} pop and ack requests, {c['pop_answered']:,} answered, "
            f"acked {c['acked']:,} of {c['popped']:,} popped"
            if c["pop_requests"]
            else ""
        )
        lines.append(
            f"- {SIDE_NAMES[side]}: {c['requests']:,} send requests, {c['answered']:,} answered, "
            f"{c['failed']:,} refused; pulled {c['pulled']:,} of {c['produced']:,} produced"
            f"{pops} ({verdict})"
        )
    return lines


def check_ok(counts: dict[str, int]) -> bool:
    return (
        counts["requests"] == counts["answered"]
        and counts["failed"] == 0
        and counts["pulled"] == counts["produced"]
        and counts.get("pop_requests", 0) == counts.get("pop_answered", 0)
        and counts.get("popped", 0) == counts.get("acked", 0)
    )


def to_json(run: Run) -> dict[str, Any]:
    """The run without the raw latencies: summaries per row and side, and every slice."""
    summaries = {
        row.key: {
            side: asdict(found) if (found := summarize(run, row.key, side)) else None
            for side in SIDES
        }
        for row in ROWS
    }
    slices = []
    for s in run.slices:
        entry = asdict(s)
        del entry["latencies_ns"]
        slices.append(entry)
    return {
        "facts": run.facts,
        "rows": {row.key: asdict(row) for row in ROWS},
        "summaries": summaries,
        "slices": slices,
        "checks": run.checks,
        "notes": run.notes,
    }


def median_spread(run: Run) -> float | None:
    """The median over rows and sides of (fastest - slowest slice) / mean: how noisy it was."""
    spreads = []
    for row in ROWS:
        for side in SIDES:
            s = summarize(run, row.key, side)
            if s is not None and len(s.slice_rates) > 1 and s.per_second:
                spreads.append((max(s.slice_rates) - min(s.slice_rates)) / s.per_second)
    return statistics.median(spreads) if spreads else None
