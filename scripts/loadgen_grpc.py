"""The gRPC shapes of the lean load generator: scripts/grpcload (Go, raw grpc-go on the v2 stubs
of rocketmq-clients/golang/v5 v5.1.4) run as a subprocess against a gRPC front, its JSON line
read back as a loadgen.Load.

    meter = Meter(lambda: broker_cpu_s)
    load = grpc_send("127.0.0.1:8081", "BenchGrpc1K", 4, 64, seconds=5, meter=meter)
    load = grpc_receive(addr, "BenchGrpc1K", "group", 4, 2, budget=n, seconds=5, meter=meter)

`python -m interop.install grpcload` builds the generator into the interop cache (go build, with
the module versions its go.mod and go.sum pin); `generator()` does it when it is missing or
stale. The generator starts its connections and asks the route, then says it is ready; the
meter starts when it is told to go and stops when it says the load is done, so the broker's CPU
is read over the load alone. The generator's own CPU (getrusage, over the same window) stands in
for the meter's own: this process only waits.

Refusals come back by code: a v2 status code as its number (TOPIC_NOT_FOUND 40402), a call that
got no response as minus its gRPC status code (-4: DEADLINE_EXCEEDED).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from loadgen import Load, Meter

from interop.cache import bench_cache
from interop.install import install

QUEUES = 8  # per_queue's length, as loadgen's rows have it (a v2 send names no queue)
SETUP_TIMEOUT_S = 30.0


class GrpcLoadError(RuntimeError):
    """The generator failed: its exit code and what it printed."""


def generator() -> Path:
    """The built generator, (re)built first when missing or stale (a no-op otherwise)."""
    install(["grpcload"], quiet=True)
    return bench_cache().grpcload


def grpc_send(
    addr: str,
    topic: str,
    connections: int,
    window: int,
    *,
    seconds: float,
    meter: Meter,
    body: int = 1024,
) -> Load:
    """SendMessage of `body` bytes, `connections` × `window` in flight, for `seconds`."""
    args = ["-mode", "send", "-topic", topic, "-body", str(body)]
    return _run(addr, args, connections, window, seconds, meter)


def grpc_receive(
    addr: str,
    topic: str,
    group: str,
    connections: int,
    window: int,
    *,
    budget: int,
    seconds: float,
    meter: Meter,
    batch: int = 32,
) -> Load:
    """`connections` × `window` consumers receiving `batch` and acking each message, for
    `seconds` or until `budget` messages were handed out."""
    if budget <= 0:
        return Load(seconds=0.0, notes=["nothing left to receive"])
    args = ["-mode", "receive", "-topic", topic, "-group", group, "-batch", str(batch)]
    return _run(addr, [*args, "-budget", str(budget)], connections, window, seconds, meter)


def _run(
    addr: str, args: list[str], connections: int, window: int, seconds: float, meter: Meter
) -> Load:
    argv = [
        str(generator()),
        *("-addr", addr, "-conns", str(connections), "-window", str(window)),
        *("-seconds", f"{seconds:g}", "-latencies", "-handshake", *args),
    ]
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _expect(proc, "ready")
            meter.start()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            _expect(proc, "done")
            meter.stop()
            line = proc.stdout.readline()
            proc.wait(SETUP_TIMEOUT_S)
        except BaseException:
            proc.kill()
            raise
        if proc.returncode != 0 or not line:
            raise GrpcLoadError(
                f"{argv[0]} exited {proc.returncode}: {(proc.stderr.read() if proc.stderr else '')}"
            )
    result = json.loads(line)
    meter.own_s = result["cpu_s"]
    return to_load(result)


def _expect(proc: subprocess.Popen[str], event: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line or json.loads(line).get("event") != event:
        err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
        raise GrpcLoadError(f"grpcload: expected {event!r}, got {line!r} {err}")


def to_load(result: dict[str, Any]) -> Load:
    """The generator's JSON line as a Load: refusals keyed by code (gRPC-level ones negative)."""
    failed = {
        (-int(key[5:]) if key.startswith("grpc-") else int(key)): count
        for key, count in result["errors"].items()
    }
    load = Load(
        messages=result["messages"],
        received=result["received"],
        requests=result["requests"],
        answered=result["answered"],
        failed=failed,
        per_queue=[result["messages"] if result["mode"] == "send" else 0] + [0] * (QUEUES - 1),
        latencies_ns=[us * 1000 for us in result.get("latencies_us") or ()],
        seconds=result["seconds"],
    )
    if result["mode"] == "receive":
        load.notes.append(
            f"{result['receives']} receives, round trip p50 {result.get('receive_p50_ms') or 0:.3f}"
            f" ms, {result['empty_receives']} found nothing"
        )
    names = result.get("error_names") or {}
    if names:
        load.notes.append("refused: " + ", ".join(f"{v} ({k})" for k, v in names.items()))
    load.notes.append(f"generator {result['cpu_cores']:.2f} cores")
    return load
