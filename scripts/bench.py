"""Sidewinder against RocketMQ and Redis Streams, in one run on this machine: two tables.

    .venv/bin/python scripts/bench.py                                 # both tables, 20 minutes
    .venv/bin/python scripts/bench.py --quick --targets sidewinder    # a smoke run, about 20 s
    .venv/bin/python scripts/bench.py --quick --targets sidewinder rocketmq5 --rows pop
    .venv/bin/python scripts/bench.py --tables broker --scaling 0 0-1 --rows produce consume

`--scaling CPUS...` makes the scaling table instead of the broker-bound one: the same rows with
each broker pinned (every thread, as `taskset -a`) to each CPU list in turn, slices alternating,
so the table shows what a second core buys each broker.

Broker-bound (scripts/bench_broker.py, with the lean generator of scripts/loadgen.py): raw
uvloop protocols sending pre-encoded SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / PULL_MESSAGE /
POP_MESSAGE / ACK_MESSAGE frames (XADD / XREAD to Redis), replies matched by opaque, 4
connections × 64 in flight. The generator prints its own CPU: 0.03-0.14 cores against
Sidewinder, 0.15-0.4 against RocketMQ, so the broker is what is measured.
The sides (`--targets`): Sidewinder, RocketMQ 4.9.7, RocketMQ 5.3.2 (the real 5.x broker, same
broker.conf and heap as 4.9.7) and Redis, side by side, taking turns in short slices. The rows
(`--rows`): produce 1 KiB ASYNC_FLUSH and SYNC_FLUSH, consume (pull 32), the unloaded SYNC_FLUSH
ack (window 1), 128 B and 4 KiB bodies, batch send, and pop (RocketMQ 5's POP consumption: pop
32 from any queue, ack each message; only Sidewinder and RocketMQ 5.3.2 serve it), and the
same two through Sidewinder's own gRPC front (grpc-produce: SendMessage 1 KiB, 4 × 64;
grpc-pop: ReceiveMessage 32 + one AckMessage per message), by scripts/grpcload (Go, built into
the interop cache when missing), on the same broker as the remoting rows; grpc-proxy-produce
sends the same through our mqproxy in front of Sidewinder's and RocketMQ 5.3.2's brokers. Per row:
msg/s, ack p50/p99, broker CPU-seconds per 100,000 messages, broker RSS, and Sidewinder /
RocketMQ 4.9.7 and Sidewinder / RocketMQ 5.3.2. It exits 1 if a send, pop or ack went
unanswered or was refused, if a pull did not read back exactly what was produced, or if a
popped message was not acked.

Client-bound (`--tables client`): for each flush mode and each cluster (RocketMQ 4.9.x, then
Sidewinder), a fresh name server + broker with the same settings runs

  produce-1 / produce-64 / consume   RocketMQ's own benchmark tool (scripts/bench_reference.py)
  py-pipelined   our Python producer, 1 KiB bodies, 128 sends in flight (one connection)
  py-sync-ack    our Python producer, one send at a time: the acknowledgement latency
  py-consume     our lite pull consumer draining what py-pipelined wrote

then Redis Streams (appendfsync always for SYNC, everysec for ASYNC) takes the same load shape
through redis-py. On 2 cores these clients take most of the CPU, and both brokers wait on them:
the table says what a Java or Python client sees, not what the broker can do.

Everything listens on 127.0.0.1; every process started is stopped by pid. `--json PATH` keeps
the raw figures. The Redis peer needs `.venv/bin/pip install -e '.[bench]'` (redis-py, hiredis)
and `apt-get install redis-server`; without redis-server its rows are left out, with a note.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "scripts"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import bench_broker  # noqa: E402
import bench_reference as ref  # noqa: E402
import uvloop  # noqa: E402

from sidewinder.client.consumer import PullConsumer  # noqa: E402
from sidewinder.client.producer import Message, Producer  # noqa: E402

WINDOW = 128
BODY = b"x" * ref.MESSAGE_SIZE
PY_TOPIC = "BenchPython"
MAX_OPS = 20_000_000  # a bound on any one load loop, whatever the clock says
PY_SCENARIOS = {
    "py-pipelined": f"Python producer, 1 KiB, {WINDOW} in flight",
    "py-sync-ack": "Python producer, 1 KiB, one at a time",
    "py-consume": "Python lite consumer draining the topic",
}


@dataclass
class Load:
    ops: int
    seconds: float
    latencies_ms: list[float]

    @property
    def tps(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, p: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def closed_loop(send: Callable[[], Awaitable[Any]], window: int, seconds: float) -> Load:
    """`window` workers, each sending again as soon as its last send is answered."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    per_worker = MAX_OPS // window

    async def worker() -> None:
        for _ in range(per_worker):
            if time.monotonic() >= deadline:
                return
            started = time.perf_counter()
            await send()
            latencies.append((time.perf_counter() - started) * 1000)

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(window)))
    return Load(len(latencies), time.monotonic() - t0, latencies)


def row_of(flush: str, scenario: str, load: Load, resources: dict[str, Any]) -> ref.Row:
    p50, p99 = load.percentile(50), load.percentile(99)
    return ref.Row(
        flush=flush,
        scenario=scenario,
        label=PY_SCENARIOS[scenario],
        tps=load.tps,
        avg_rt_ms="" if p50 is None else f"p50 {p50:.3f} / p99 {p99:.3f}",
        max_rt_ms=f"{max(load.latencies_ms):.1f}" if load.latencies_ms else "",
        failures=0,
        resources=resources,
        steady_lines=1,
    )


# -- our Python client on a running cluster ----------------------------------------------------
def python_rows(flush: str, seconds: float) -> Callable[[Any, Path], list[ref.Row]]:
    def run(cluster: Any, workdir: Path) -> list[ref.Row]:
        ref.create_topic(
            cluster.namesrv_addr, PY_TOPIC, queues=ref.TOPIC_QUEUES, workdir=workdir / "mqadmin"
        )
        pids = {**ref.pids_of(cluster), "producer": os.getpid()}
        rows = []
        for scenario in PY_SCENARIOS:
            ref.log(f"[{flush}] {scenario}: {PY_SCENARIOS[scenario]} for {seconds:.0f} s")
            with ref.ResourceSampler(pids) as sampler:
                load = uvloop.run(_python_load(cluster.namesrv_addr, scenario, seconds))
            rows.append(row_of(flush, scenario, load, sampler.summary()))
            ref.log(f"[{flush}]   TPS {load.tps:,.0f}  {rows[-1].avg_rt_ms}")
        return rows

    return run


async def _python_load(namesrv: str, scenario: str, seconds: float) -> Load:
    if scenario == "py-consume":
        consumer = PullConsumer("bench_py_consumer", namesrv, poll_timeout_s=1)
        try:
            consumer.assign(await consumer.queues(PY_TOPIC))
            got, t0 = 0, time.monotonic()
            empty_polls = 0
            while time.monotonic() - t0 < seconds and empty_polls < 3 and got < MAX_OPS:
                batch = await consumer.poll()
                got += len(batch)
                empty_polls = 0 if batch else empty_polls + 1
            return Load(got, time.monotonic() - t0, [])
        finally:
            await consumer.close()
    producer = Producer("bench_py_producer", namesrv)
    try:
        await producer.send(Message(PY_TOPIC, BODY))  # routes and connection, outside the clock
        window = WINDOW if scenario == "py-pipelined" else 1
        return await closed_loop(lambda: producer.send(Message(PY_TOPIC, BODY)), window, seconds)
    finally:
        await producer.close()


# -- Redis Streams -------------------------------------------------------------------------------
def redis_rows(flush: str, seconds: float, workdir: Path) -> list[ref.Row]:
    if (why := bench_broker.RedisServer.missing()) is not None:
        ref.log(why)
        return []
    try:
        import redis  # noqa: F401
    except ImportError:
        ref.log("the redis library is missing (pip install -e '.[bench]'): no Redis rows")
        return []
    server = bench_broker.RedisServer(workdir, flush).start()
    rows = []
    try:
        for scenario in PY_SCENARIOS:
            ref.log(f"[{flush}] redis {scenario} for {seconds:.0f} s (appendfsync {server.fsync})")
            with ref.ResourceSampler({"broker": server.pid, "producer": os.getpid()}) as sampler:
                load = uvloop.run(_redis_load(server.port, scenario, seconds))
            rows.append(row_of(flush, scenario, load, sampler.summary()))
            ref.log(f"[{flush}]   TPS {load.tps:,.0f}  {rows[-1].avg_rt_ms}")
    finally:
        server.stop()
    return rows


async def _redis_load(port: int, scenario: str, seconds: float) -> Load:
    import redis.asyncio as redis

    client = redis.Redis(host="127.0.0.1", port=port, max_connections=WINDOW + 4)
    try:
        if scenario == "py-consume":
            got, last_id, t0 = 0, "0-0", time.monotonic()
            while time.monotonic() - t0 < seconds and got < MAX_OPS:
                reply = await client.xread({PY_TOPIC: last_id}, count=32)
                if not reply:
                    break
                entries = reply[0][1]
                got += len(entries)
                last_id = entries[-1][0]
            return Load(got, time.monotonic() - t0, [])
        window = WINDOW if scenario == "py-pipelined" else 1
        return await closed_loop(lambda: client.xadd(PY_TOPIC, {"body": BODY}), window, seconds)
    finally:
        await client.aclose()


# -- report ------------------------------------------------------------------------------------
def _cells(row: ref.Row | None) -> tuple[str, str, str, str]:
    if row is None:
        return "", "", "", ""
    res = row.resources
    return (
        ref.fmt(row.tps, 0),
        row.avg_rt_ms,
        ref.fmt(res["cpu_pct"].get("broker")),
        ref.fmt(res["max_rss_mib"].get("broker"), 0),
    )


def render(rows: dict[str, list[ref.Row]], seconds: int) -> str:
    def find(kind: str, flush: str, scenario: str) -> ref.Row | None:
        return next((r for r in rows[kind] if (r.flush, r.scenario) == (flush, scenario)), None)

    header = (
        "| flush | scenario | RocketMQ TPS | Sidewinder TPS | Sidewinder / RocketMQ "
        "| Redis TPS | RT ms RocketMQ | RT ms Sidewinder | RT ms Redis "
        "| broker CPU % R / S / Redis | broker RSS MiB R / S / Redis |"
    )
    out = [f"{seconds} s per tool scenario", "", header]
    out.append("|" + "---|" * header.count(" | ") + "---|")
    keys = list(dict.fromkeys((r.flush, r.scenario) for kind in rows.values() for r in kind))
    for flush, scenario in keys:
        r, s, d = (find(k, flush, scenario) for k in ("rocketmq", "sidewinder", "redis"))
        label = (r or s or d).label  # type: ignore[union-attr]
        rc, sc, dc = _cells(r), _cells(s), _cells(d)
        ratio = f"{s.tps / r.tps:.2f}×" if r and s and r.tps and s.tps is not None else ""
        out.append(
            f"| {ref.FLUSH_MODES[flush]} | {label} | {rc[0]} | {sc[0]} | {ratio} | {dc[0]} "
            f"| {rc[1]} | {sc[1]} | {dc[1]} | {rc[2]} / {sc[2]} / {dc[2]} "
            f"| {rc[3]} / {sc[3]} / {dc[3]} |"
        )
    out += [
        "",
        "Tool rows: TPS and average RT are the medians of its 10 s lines after the first; py rows",
        "and Redis rows: TPS over the whole window, RT percentiles of every send. CPU %: 100 = one",
        "core. RSS includes the mmapped store pages the broker touched. The clients share the two",
        "cores with the broker and take most of them: these figures are bound by the clients.",
    ]
    return "\n".join(out)


def run_client_bound(args: argparse.Namespace, root: Path) -> dict[str, list[ref.Row]]:
    flushes = ["async", "sync"] if args.flush == "both" else [args.flush]
    rows: dict[str, list[ref.Row]] = {"rocketmq": [], "sidewinder": [], "redis": []}
    for flush in flushes:
        for kind in ("rocketmq", "sidewinder"):
            ref.TARGET[0] = kind
            found, _ = ref.run_flush_mode(
                flush,
                args.scenarios,
                args.seconds,
                root / kind,
                extra=python_rows(flush, args.py_seconds),
            )
            rows[kind] += found
        if not args.no_redis:
            rows["redis"] += redis_rows(flush, args.py_seconds, root / "redis" / flush)
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=["broker", "client"],
        default=["broker", "client"],
        help="broker-bound (lean generator) and/or client-bound (stock tools) table",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: broker-bound table only, 1 s slices, 2 rounds, no warm pass",
    )
    parser.add_argument(
        "--targets",
        nargs="+",
        choices=list(bench_broker.SIDES),
        default=list(bench_broker.SIDES),
        help="the sides of the broker-bound table (default: all four)",
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=[row.key for row in bench_broker.ROWS],
        default=[row.key for row in bench_broker.ROWS],
        metavar="ROW",
        help="the rows of the broker-bound table (default: all); consume and pop bring the "
        "produce row that fills their topic. One of: "
        + ", ".join(row.key for row in bench_broker.ROWS),
    )
    parser.add_argument("--slice-seconds", type=float, default=5.0, help="broker-bound slice")
    parser.add_argument("--rounds", type=int, default=3, help="counted slices per row and side")
    parser.add_argument("--warm-passes", type=int, default=1, help="uncounted passes first")
    parser.add_argument("--seconds", type=int, default=20, help="per tool scenario (>= 10)")
    parser.add_argument("--py-seconds", type=float, default=10.0, help="per py/Redis scenario")
    parser.add_argument("--flush", choices=["async", "sync", "both"], default="both")
    parser.add_argument(
        "--scenarios",
        nargs="*",
        choices=list(ref.SCENARIOS),
        default=list(ref.SCENARIOS),
        metavar="NAME",
        help="client-bound tool scenarios (none: only the Python and Redis rows)",
    )
    parser.add_argument(
        "--scaling",
        nargs="+",
        default=None,
        metavar="CPUS",
        help="the scaling table instead of the broker-bound one: each broker pinned to each of "
        "these CPU lists in turn (taskset's form: --scaling 0 0-1)",
    )
    parser.add_argument("--no-redis", action="store_true", help="leave out the Redis peer")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="raw figures")
    args = parser.parse_args(argv)
    if args.quick:
        args.tables, args.slice_seconds, args.rounds, args.warm_passes = ["broker"], 1.0, 2, 0
    if args.no_redis and "redis" in args.targets:
        args.targets.remove("redis")
    if "client" in args.tables and args.seconds < 10:
        parser.error("--seconds must be at least 10 (the tool prints one line per 10 s)")
    for cpus in args.scaling or ():
        try:
            bench_broker.parse_cpu_list(cpus)
        except ValueError:
            parser.error(f"--scaling takes CPU lists such as 0 or 0-1, not {cpus!r}")
    if args.rounds < 1 or args.slice_seconds <= 0:
        parser.error("--rounds must be at least 1 and --slice-seconds above 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    plan = bench_broker.Plan(
        slice_s=args.slice_seconds,
        rounds=args.rounds,
        warm_passes=args.warm_passes,
        sides=tuple(s for s in bench_broker.SIDES if s in args.targets),
        flushes=("async", "sync") if args.flush == "both" else (args.flush,),
        rows=bench_broker.with_sources(args.rows),
        pins=tuple(args.scaling or ()),
    )
    root = Path(tempfile.mkdtemp(prefix="bench-"))
    run: bench_broker.Run | None = None
    client_rows: dict[str, list[ref.Row]] | None = None
    try:
        with ref.sigterm_as_interrupt():
            if "broker" in args.tables:
                run = bench_broker.run_broker_bench(plan, root / "broker")
            if "client" in args.tables:
                client_rows = run_client_bound(args, root / "client")
    except KeyboardInterrupt as exc:
        ref.log(f"interrupted ({exc or 'Ctrl-C'}); every process this run started was stopped")
        return 130
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Command: {command}\n")
    payload: dict[str, Any] = {"command": command}
    if run is not None:
        heading = "Scaling" if plan.pins else "Broker-bound"
        print(f"## {heading}: the lean generator (scripts/loadgen.py)\n")
        print(bench_broker.render(run) + "\n")
        payload["broker_bound"] = bench_broker.to_json(run)
    if client_rows is not None:
        print("## Client-bound: RocketMQ's benchmark tool, our Python client, redis-py\n")
        print(render(client_rows, args.seconds))
        payload["client_bound"] = {
            k: [asdict(r) for r in found] for k, found in client_rows.items()
        }
    if args.json:
        args.json.write_text(ref.json.dumps(payload, default=str) + "\n")
    return 0 if run is None or all(map(bench_broker.check_ok, run.checks.values())) else 1


if __name__ == "__main__":
    sys.exit(main())
