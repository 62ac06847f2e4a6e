"""RocketMQ's own benchmark tool against the real RocketMQ broker: the figures to beat here.

    .venv/bin/python scripts/bench_reference.py --seconds 30 --flush both

For each flush mode (a fresh name server + broker per mode, 128 MiB commit-log segments) it runs
`org.apache.rocketmq.example.benchmark.Producer` / `Consumer` (rocketmq-example 4.7.0 on the
rocketmq-client 4.9.8 jars) for `--seconds` per scenario:

  produce-1    Producer, 1 KiB bodies, 1 sending thread
  produce-64   Producer, 1 KiB bodies, 64 sending threads
  consume      Consumer draining a topic while a 1 KiB x 64-thread Producer writes to it

Both tools print one stats line every 10 s (a sliding 10 s window); the first line includes JVM
start and warm-up, so TPS and average RT are the median of the lines after it. While a scenario
runs, psutil samples the broker, name server and benchmark JVMs (by pid, with their children) once
a second. CPU % is 100 per busy core. Everything listens on 127.0.0.1 only; every process started
is stopped by pid, on Ctrl-C and errors too. `--json PATH` writes the raw lines and samples.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from interop.cache import (  # noqa: E402
    ROCKETMQ_BENCH_VERSION,
    ROCKETMQ_CLIENT_VERSION,
    ROCKETMQ_SERVER_VERSION,
    bench_cache,
)
from interop.jvm import java_binary, java_command, java_env  # noqa: E402
from interop.mqadmin import create_topic  # noqa: E402
from interop.processes import ManagedProcess, StartupError  # noqa: E402
from interop.rocketmq import RocketMQCluster  # noqa: E402
from interop.target import create_target  # noqa: E402

TARGET = ["rocketmq"]  # the cluster kind this run drives (--target)

PRODUCER_MAIN = "org.apache.rocketmq.example.benchmark.Producer"
CONSUMER_MAIN = "org.apache.rocketmq.example.benchmark.Consumer"

# 4.9 brokers reserve the tool's default topic "BenchmarkTest" as a system topic (no updateTopic).
PRODUCE_TOPIC = "BenchReferenceProduce"
CONSUME_TOPIC = "BenchReferenceConsume"
CONSUME_GROUP = "bench_reference_consumer"
TOPIC_QUEUES = 8
MESSAGE_SIZE = 1024
BROKER_HEAP_MB = 512
CLIENT_HEAP_MB = 512
SEGMENT_BYTES = 128 << 20
# RocketMQ's default consume-queue file (300,000 entries); the test default of 3,000 is too small.
CONSUME_QUEUE_FILE_BYTES = 300_000 * 20

STATS_PERIOD_S = 10.0
SAMPLE_PERIOD_S = 1.0
JVM_START_TIMEOUT_S = 60.0
STATS_GRACE_S = 3.0
CONSUMER_SETTLE_S = 3.0
STOP_TIMEOUT_S = 10.0

FLUSH_MODES = {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"}
SCENARIOS = {
    "produce-1": "produce 1 KiB × 1 thread",
    "produce-64": "produce 1 KiB × 64 threads",
    "consume": "consume (B2C / S2C) during 1 KiB × 64 produce",
}
CONSUME_PRODUCER_LABEL = "└ its producer 1 KiB × 64 threads"

# rocketmq-example 4.7.0, Producer$2 and Consumer$2 (printf formats, read from the class files):
#   Send TPS: %d Max RT: %d Average RT: %7.3f Send Failed: %d Response Failed: %d
#   TPS: %d FAIL: %d AVG(B2C) RT: %7.3f AVG(S2C) RT: %7.3f MAX(B2C) RT: %d MAX(S2C) RT: %d
# Producer: TPS and average RT over the window; Max RT and both failure counts since start.
# Consumer: everything over the window (the max RTs are reset after each line).
PRODUCER_LINE = re.compile(
    r"Send TPS: (?P<tps>\d+) Max RT: (?P<max_rt>\d+) Average RT:\s*(?P<avg_rt>[\d.]+)"
    r" Send Failed: (?P<send_failed>\d+) Response Failed: (?P<response_failed>\d+)"
)
CONSUMER_LINE = re.compile(
    r"^TPS: (?P<tps>\d+) FAIL: (?P<fail>\d+) AVG\(B2C\) RT:\s*(?P<avg_b2c>[\d.]+)"
    r" AVG\(S2C\) RT:\s*(?P<avg_s2c>[\d.]+) MAX\(B2C\) RT: (?P<max_b2c>\d+)"
    r" MAX\(S2C\) RT: (?P<max_s2c>\d+)"
)
PRODUCER_BANNER = "threadCount"
CONSUMER_BANNER = "Consumer Started"


class BenchInterrupted(KeyboardInterrupt):
    """SIGTERM to this script: unwind through every `finally` like Ctrl-C does."""


# -- benchmark JVM output ----------------------------------------------------------------------
@dataclass
class StatsLine:
    at_s: float  # seconds after the tool printed its banner (when its stats timer started)
    text: str
    values: dict[str, float]


class OutputWatcher:
    """Tails one process's output file and timestamps each stats line as it appears."""

    def __init__(self, path: Path, pattern: re.Pattern[str], banner: str) -> None:
        self.path = path
        self.pattern = pattern
        self.banner = banner
        self.lines: list[StatsLine] = []
        self.banner_at: float | None = None
        self._offset = 0
        self._partial = ""

    def poll(self) -> None:
        try:
            with open(self.path, errors="replace") as out:
                out.seek(self._offset)
                chunk = out.read()
                self._offset = out.tell()
        except OSError:
            return
        now = time.monotonic()
        *complete, self._partial = (self._partial + chunk).split("\n")
        for line in complete:
            if self.banner_at is None and self.banner in line:
                self.banner_at = now
            match = self.pattern.search(line)
            if match:
                values = {k: float(v) for k, v in match.groupdict().items()}
                since = now - (self.banner_at or now)
                self.lines.append(StatsLine(round(since, 2), line.strip(), values))


Jvm = tuple[ManagedProcess, OutputWatcher]


def start_bench_jvm(
    workdir: Path, main_class: str, args: list[str], started: list[ManagedProcess]
) -> Jvm:
    """Start one benchmark JVM (registered in `started` before it runs, for cleanup)."""
    workdir.mkdir(parents=True, exist_ok=True)
    name = main_class.rsplit(".", 1)[-1].lower()
    cmd = java_command(
        workdir, bench_cache().classpath("bench"), main_class, args, heap_mb=CLIENT_HEAP_MB
    )
    proc = ManagedProcess(
        f"benchmark {name}", cmd, workdir / f"{name}.out", env=java_env(workdir), cwd=workdir
    )
    started.append(proc)
    proc.start()
    if main_class == CONSUMER_MAIN:
        return proc, OutputWatcher(proc.out_path, CONSUMER_LINE, CONSUMER_BANNER)
    return proc, OutputWatcher(proc.out_path, PRODUCER_LINE, PRODUCER_BANNER)


def wait_for(jvms: list[Jvm], done: Callable[[], bool]) -> None:
    """Poll every output until `done()`; fail fast if a JVM exits or never prints its banner."""
    deadline = time.monotonic() + JVM_START_TIMEOUT_S
    while True:
        for _, watcher in jvms:
            watcher.poll()
        if done():
            return
        for proc, watcher in jvms:
            if not proc.alive():
                raise StartupError(f"{proc.name} exited early\n{proc.diagnostics()}")
            if watcher.banner_at is None and time.monotonic() > deadline:
                raise StartupError(f"{proc.name} printed no banner\n{proc.diagnostics()}")
        time.sleep(0.2)


def wait_banner(jvm: Jvm) -> float:
    """Wait until the tool prints its banner; returns that moment (time.monotonic)."""
    watcher = jvm[1]
    wait_for([jvm], lambda: watcher.banner_at is not None)
    assert watcher.banner_at is not None
    return watcher.banner_at


def run_until_stats(jvms: list[Jvm], seconds: float) -> None:
    """Let the producer (first of `jvms`) run `seconds` after its banner and print the stats line
    due at that mark, polling the others' output meanwhile."""
    producer = jvms[0][1]
    end = wait_banner(jvms[0]) + seconds
    expected = int(seconds // STATS_PERIOD_S)

    def done() -> bool:
        now = time.monotonic()
        enough = len(producer.lines) >= expected
        return now >= end and (enough or now >= end + STATS_GRACE_S)

    wait_for(jvms, done)


def stop_all(procs: list[ManagedProcess]) -> None:
    """In order: SIGTERM, then (after STOP_TIMEOUT_S) SIGKILL, each by its own process group."""
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.stop(STOP_TIMEOUT_S)


# -- resource sampling -------------------------------------------------------------------------
@dataclass
class Usage:
    cpu_s: float  # user + system CPU seconds since the process started (reaped children too)
    rss: int  # resident bytes, including file pages it maps (the broker's mmapped commit log)
    anon_rss: int  # resident bytes not backed by a file: heap, stacks, direct buffers


def tree_usage(pid: int) -> Usage | None:
    """CPU and memory of a process and its children; None once it is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = Usage(0.0, 0, 0)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            times, mem = p.cpu_times(), p.memory_info()
            # A child's CPU moves into its parent's children_* once it is reaped (redis-server's
            # AOF rewrite forks one): counting both keeps the sum from dropping when it exits.
            total.cpu_s += times.user + times.system + times.children_user + times.children_system
            total.rss += mem.rss
            total.anon_rss += mem.rss - getattr(mem, "shared", 0)
    return total


def host_busy_s() -> float:
    """Host CPU seconds spent running anything (guest time is already inside user)."""
    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))


@dataclass
class Sample:
    at_s: float
    host_busy_s: float
    usage: dict[str, Usage]


class ResourceSampler:
    """Samples named pids (and their children) once a second on a background thread."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.samples: list[Sample] = []
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _sample(self) -> None:
        usage = {name: tree_usage(pid) for name, pid in self.pids.items()}
        at = round(time.monotonic() - self._t0, 3)
        alive = {name: u for name, u in usage.items() if u is not None}
        self.samples.append(Sample(at, host_busy_s(), alive))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(SAMPLE_PERIOD_S)

    def __enter__(self) -> ResourceSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()

    def cpu_pct(self, name: str) -> float | None:
        """Average CPU over the window in which the process was seen, 100 = one core busy."""
        seen = [s for s in self.samples if name in s.usage]
        if len(seen) < 2 or seen[-1].at_s <= seen[0].at_s:
            return None
        used = seen[-1].usage[name].cpu_s - seen[0].usage[name].cpu_s
        return 100.0 * used / (seen[-1].at_s - seen[0].at_s)

    def host_cpu_pct(self) -> float | None:
        first, last = self.samples[0], self.samples[-1]
        elapsed = last.at_s - first.at_s
        return 100.0 * (last.host_busy_s - first.host_busy_s) / elapsed if elapsed > 0 else None

    def max_mib(self, name: str, attr: str) -> float:
        values = (getattr(s.usage[name], attr) for s in self.samples if name in s.usage)
        return max(values, default=0) / (1 << 20)

    def summary(self) -> dict[str, Any]:
        names = list(self.pids)
        cpu = {n: self.cpu_pct(n) for n in names}
        host = self.host_cpu_pct()
        ours = sum(v for v in cpu.values() if v is not None)
        return {
            "window_s": self.samples[-1].at_s - self.samples[0].at_s,
            "cpu_pct": cpu,
            "max_rss_mib": {n: self.max_mib(n, "rss") for n in names},
            "max_anon_rss_mib": {n: self.max_mib(n, "anon_rss") for n in names},
            "host_cpu_pct": host,
            "other_cpu_pct": None if host is None else max(0.0, host - ours),
            "samples": [asdict(s) for s in self.samples],
        }


# -- scenarios ---------------------------------------------------------------------------------
@dataclass
class Row:
    flush: str
    scenario: str
    label: str
    tps: float | None
    avg_rt_ms: str
    max_rt_ms: str
    failures: int | None
    resources: dict[str, Any]
    steady_lines: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def steady(lines: list[StatsLine], min_at_s: float = 0.0) -> tuple[list[StatsLine], list[str]]:
    """The stats lines after the warm-up one (and printed at least `min_at_s` in)."""
    chosen = [ln for ln in lines[1:] if ln.at_s >= min_at_s]
    if chosen:
        return chosen, []
    if lines:
        return lines[-1:], ["only a warm-up stats line: run longer than 20 s for steady figures"]
    return [], ["no stats line printed"]


def median(lines: list[StatsLine], key: str) -> float | None:
    return statistics.median(ln.values[key] for ln in lines) if lines else None


def producer_row(
    flush: str, scenario: str, label: str, watcher: OutputWatcher, resources: dict[str, Any]
) -> Row:
    lines, notes = steady(watcher.lines)
    last = watcher.lines[-1].values if watcher.lines else {}
    avg = median(lines, "avg_rt")
    failed = last.get("send_failed", 0) + last.get("response_failed", 0) if last else None
    return Row(
        flush=flush,
        scenario=scenario,
        label=label,
        tps=median(lines, "tps"),
        avg_rt_ms="" if avg is None else f"{avg:.3f}",
        # Max RT is cumulative in 4.7.0 (never reset), so it includes the warm-up window.
        max_rt_ms=f"{last['max_rt']:.0f}" if last else "",
        failures=None if failed is None else int(failed),
        resources=resources,
        steady_lines=len(lines),
        lines=[asdict(ln) for ln in watcher.lines],
        notes=notes,
    )


def consumer_row(
    flush: str, watcher: OutputWatcher, producer_start_s: float, resources: dict[str, Any]
) -> Row:
    # A consumer window counts once the producer had been running for a whole window.
    lines, notes = steady(watcher.lines, producer_start_s + STATS_PERIOD_S)
    b2c, s2c = median(lines, "avg_b2c"), median(lines, "avg_s2c")
    max_b2c = max((ln.values["max_b2c"] for ln in lines), default=None)
    max_s2c = max((ln.values["max_s2c"] for ln in lines), default=None)
    return Row(
        flush=flush,
        scenario="consume",
        label=SCENARIOS["consume"],
        tps=median(lines, "tps"),
        avg_rt_ms="" if b2c is None or s2c is None else f"{b2c:.3f} / {s2c:.3f}",
        max_rt_ms="" if max_b2c is None or max_s2c is None else f"{max_b2c:.0f} / {max_s2c:.0f}",
        failures=int(sum(ln.values["fail"] for ln in watcher.lines)),
        resources=resources,
        steady_lines=len(lines),
        lines=[asdict(ln) for ln in watcher.lines],
        notes=notes,
    )


def producer_args(namesrv: str, topic: str, threads: int) -> list[str]:
    return [
        *("-n", namesrv, "-t", topic),
        *("-w", str(threads), "-s", str(MESSAGE_SIZE), "-k", "false"),
    ]


def run_produce(
    cluster: RocketMQCluster, workdir: Path, flush: str, scenario: str, threads: int, seconds: int
) -> Row:
    started: list[ManagedProcess] = []
    try:
        args = producer_args(cluster.namesrv_addr, PRODUCE_TOPIC, threads)
        producer = start_bench_jvm(workdir, PRODUCER_MAIN, args, started)
        wait_banner(producer)
        with ResourceSampler(pids_of(cluster, producer=producer[0])) as sampler:
            run_until_stats([producer], seconds)
    finally:
        stop_all(started)
    return producer_row(flush, scenario, SCENARIOS[scenario], producer[1], sampler.summary())


def run_consume(cluster: RocketMQCluster, workdir: Path, flush: str, seconds: int) -> list[Row]:
    started: list[ManagedProcess] = []
    namesrv = cluster.namesrv_addr
    try:
        consumer_args = ["-n", namesrv, "-t", CONSUME_TOPIC, "-g", CONSUME_GROUP, "-p", "false"]
        consumer = start_bench_jvm(workdir / "consumer", CONSUMER_MAIN, consumer_args, started)
        consumer_t0 = wait_banner(consumer)
        time.sleep(CONSUMER_SETTLE_S)  # let the first rebalance assign the 8 queues
        args = producer_args(namesrv, CONSUME_TOPIC, 64)
        producer = start_bench_jvm(workdir / "producer", PRODUCER_MAIN, args, started)
        producer_start_s = wait_banner(producer) - consumer_t0
        pids = pids_of(cluster, producer=producer[0], consumer=consumer[0])
        with ResourceSampler(pids) as sampler:
            run_until_stats([producer, consumer], seconds)
    finally:
        stop_all(started)  # the consumer first: none of its windows runs past production
    resources = sampler.summary()
    return [
        consumer_row(flush, consumer[1], producer_start_s, resources),
        producer_row(flush, "consume", CONSUME_PRODUCER_LABEL, producer[1], resources),
    ]


def pids_of(cluster: RocketMQCluster, **clients: ManagedProcess) -> dict[str, int]:
    pids = {name: pid for name, pid in cluster.pids.items() if pid is not None}
    pids.update({name: proc.pid for name, proc in clients.items() if proc.pid is not None})
    return pids


def bench_broker_conf(flush_disk_type: str) -> dict[str, str]:
    return {
        "flushDiskType": flush_disk_type,
        "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
        "mappedFileSizeConsumeQueue": str(CONSUME_QUEUE_FILE_BYTES),
        # RocketMQ's default; the test conf checks half messages every 2 s, which only adds noise.
        "transactionCheckInterval": "60000",
    }


def run_scenario(
    cluster: RocketMQCluster, workdir: Path, flush: str, scenario: str, seconds: int
) -> list[Row]:
    if scenario == "consume":
        return run_consume(cluster, workdir, flush, seconds)
    threads = 1 if scenario == "produce-1" else 64
    return [run_produce(cluster, workdir, flush, scenario, threads, seconds)]


def scan_broker_log(path: Path) -> dict[str, Any]:
    """ERROR / WARN counts in the broker's log (our logback pattern: `HH:mm:ss.SSS LEVEL ...`).

    4.9.7 does not log a SYNC_FLUSH group-commit timeout on its async put path, and the 4.7.0
    Producer ignores SendStatus, so FLUSH_DISK_TIMEOUT replies count as sends there; slow flushes
    do show up as the flush service's "Flush data to disk costs N ms" (over 500 ms).
    """
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"path": str(path), "missing": True}
    levels = [ln.split(maxsplit=2)[1] if len(ln.split()) > 1 else "" for ln in lines]
    errors = [ln for ln, lvl in zip(lines, levels, strict=True) if lvl == "ERROR"]
    return {
        "error_lines": len(errors),
        "warn_lines": levels.count("WARN"),
        "slow_flush_lines": sum("Flush data to disk costs" in ln for ln in lines),
        "flush_timeout_lines": sum(
            "wait for flush failed" in ln or "FLUSH_DISK_TIMEOUT" in ln for ln in lines
        ),
        "first_errors": errors[:5],
    }


def run_flush_mode(
    flush: str,
    scenarios: list[str],
    seconds: int,
    root: Path,
    extra: Callable[[Any, Path], list[Row]] | None = None,
) -> tuple[list[Row], dict[str, Any]]:
    """One fresh cluster for this flush mode; the scenarios run one after another on it, then
    `extra(cluster, workdir)` (scripts/bench.py's own clients) on the same cluster."""
    workdir = root / flush
    cluster: Any
    if TARGET[0] == "rocketmq":
        cluster = RocketMQCluster(
            workdir / "cluster",
            broker_conf=bench_broker_conf(FLUSH_MODES[flush]),
            broker_heap_mb=BROKER_HEAP_MB,
        )
    else:
        cluster = create_target(
            TARGET[0], workdir / "cluster", bench_broker_conf(FLUSH_MODES[flush])
        )
    rows: list[Row] = []
    try:
        name = f"RocketMQ {ROCKETMQ_SERVER_VERSION}" if TARGET[0] == "rocketmq" else TARGET[0]
        log(f"[{flush}] starting {name} ({FLUSH_MODES[flush]})")
        cluster.start()
        for topic in (PRODUCE_TOPIC, CONSUME_TOPIC):
            create_topic(
                cluster.namesrv_addr, topic, queues=TOPIC_QUEUES, workdir=workdir / "mqadmin"
            )
        for scenario in scenarios:
            log(f"[{flush}] {scenario}: {SCENARIOS[scenario]} for {seconds} s")
            new_rows = run_scenario(cluster, workdir / scenario, flush, scenario, seconds)
            for row in new_rows:
                log(f"[{flush}]   {row.label}: TPS {fmt(row.tps, 0)}  failures {row.failures}")
            rows += new_rows
        if extra is not None:
            rows += extra(cluster, workdir)
    finally:
        cluster.stop()
    return rows, scan_broker_log(workdir / "cluster" / "logs" / "broker.log")


# -- report ------------------------------------------------------------------------------------
def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def fmt(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def java_version() -> str:
    proc = subprocess.run(
        [java_binary(), "-version"], capture_output=True, text=True, timeout=30, check=False
    )
    return (proc.stderr or proc.stdout).splitlines()[0].strip()


def machine_facts() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "platform": platform.platform(),
        "java": java_version(),
        "rocketmq_server": ROCKETMQ_SERVER_VERSION,
        "rocketmq_client": ROCKETMQ_CLIENT_VERSION,
        "rocketmq_example": ROCKETMQ_BENCH_VERSION,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


TABLE_HEADER = (
    "| flush | scenario | TPS | avg RT ms | max RT ms | failures | broker CPU % "
    "| broker max RSS MiB | client CPU % | other CPU % |"
)


def table_row(row: Row) -> str:
    res = row.resources
    cells = [
        FLUSH_MODES[row.flush],
        row.label,
        fmt(row.tps, 0),
        row.avg_rt_ms,
        row.max_rt_ms,
        "" if row.failures is None else str(row.failures),
        fmt(res["cpu_pct"].get("broker")),
        fmt(res["max_rss_mib"].get("broker"), 0),
        fmt(sum(v or 0.0 for k, v in res["cpu_pct"].items() if k in ("producer", "consumer"))),
        fmt(res["other_cpu_pct"]),
    ]
    return "| " + " | ".join(cells) + " |"


def render(rows: list[Row], facts: dict[str, Any], command: str, seconds: int) -> str:
    out = [
        f"Machine: nproc {facts['nproc']}, {facts['memory_gib']} GiB, {facts['platform']}; "
        f"{facts['java']}; load average at start {facts['loadavg_start']}",
        f"RocketMQ: broker + name server {facts['rocketmq_server']}, benchmark tool "
        f"rocketmq-example {facts['rocketmq_example']} on rocketmq-client "
        f"{facts['rocketmq_client']}",
        f"Broker: -Xmx{BROKER_HEAP_MB}m, mappedFileSizeCommitLog {SEGMENT_BYTES >> 20} MiB, "
        f"topics with {TOPIC_QUEUES} queues, {MESSAGE_SIZE}-byte bodies, keyEnable false, "
        f"{seconds} s per scenario",
        f"Command: {command}",
        "",
        TABLE_HEADER,
        "|" + "---|" * TABLE_HEADER.count(" | ") + "---|",
        *(table_row(row) for row in rows),
        "",
        "TPS and avg RT: median of the 10 s stats lines after the first (warm-up). Producer max RT",
        "and failures are since start (the tool never resets them); consumer RTs are B2C / S2C",
        "(born→consume / stored→consume), max over the steady windows. CPU %: 100 = one core,",
        "averaged over the scenario; client = benchmark JVMs; other = host busy minus the broker,",
        "name server and clients (other load on the machine). Broker RSS includes the mmapped",
        "commit-log pages it touched (memory not backed by files: max_anon_rss_mib in --json).",
        "",
        *(
            f"Broker log ({FLUSH_MODES[flush]}): {scan.get('error_lines')} ERROR, "
            f"{scan.get('warn_lines')} WARN, {scan.get('slow_flush_lines')} slow-flush, "
            f"{scan.get('flush_timeout_lines')} flush-timeout lines"
            for flush, scan in facts.get("broker_log", {}).items()
        ),
    ]
    notes = [f"- {r.flush} {r.scenario} ({r.label}): {n}" for r in rows for n in r.notes]
    if notes:
        out += ["", "Notes:", *notes]
    return "\n".join(out)


# -- main --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=30, help="per scenario (default 30)")
    parser.add_argument("--flush", choices=["async", "sync", "both"], default="both")
    parser.add_argument(
        "--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS), metavar="NAME"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="raw results")
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs (logs, stores)")
    parser.add_argument(
        "--target",
        choices=["rocketmq", "sidewinder"],
        default="rocketmq",
        help="which cluster the benchmark tool drives (default: RocketMQ itself)",
    )
    args = parser.parse_args(argv)
    if args.seconds < 10:
        parser.error("--seconds must be at least 10 (the tool prints one line per 10 s)")
    return args


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise BenchInterrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_all(args: argparse.Namespace) -> tuple[list[Row], dict[str, Any]]:
    TARGET[0] = args.target
    flushes = ["async", "sync"] if args.flush == "both" else [args.flush]
    scenarios = [s for s in SCENARIOS if s in args.scenarios]
    root = Path(tempfile.mkdtemp(prefix="bench-reference-"))
    rows: list[Row] = []
    try:
        facts = machine_facts()
        facts["broker_log"] = {}
        for flush in flushes:
            flush_rows, facts["broker_log"][flush] = run_flush_mode(
                flush, scenarios, args.seconds, root
            )
            rows += flush_rows
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    facts["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return rows, facts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    try:
        with sigterm_as_interrupt():
            rows, facts = run_all(args)
    except KeyboardInterrupt as exc:
        log(
            f"interrupted ({str(exc) or 'Ctrl-C'}); every process this run started has been stopped"
        )
        return 130
    print(render(rows, facts, command, args.seconds))
    if args.json:
        payload = {"command": command, "facts": facts, "rows": [asdict(r) for r in rows]}
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
