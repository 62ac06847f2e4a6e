"""Run the stock-client drivers (interop/drivers/PROTOCOL.md) and collect their JSON events.

run = run_driver("go", "produce", namesrv=t.namesrv_addr, topic="T", group="P1", count=1000,
                 tag="TagA", prop=["a=1"])
run.check(); run.sent()
consumer = start_driver("node", "consume", ..., expect=1000)   # runs while we produce
consumer.wait().received()

The RocketMQ 5 gRPC clients (`python5`, `go5`, `java5grpc`) take the gRPC front's address instead
of a name server, with the same actions and options:
run_driver("python5", "produce", endpoints="127.0.0.1:8081", topic="T", count=10)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interop.cache import DRIVERS_DIR, BenchCache, bench_cache
from interop.jvm import JDK17_OPENS, java_binary

CLIENTS = ("java", "cpp", "node", "go")
# The 5.3.2 remoting client, through the Java driver built against it: the 5.x scenarios' client.
JAVA5 = "java5"
JAVA_DRIVER_MAIN = "Driver"
# What `python -m interop.install java` puts beside the compiled driver classes.
DRIVER_JAR = "driver.jar"
DRIVER_ARCHIVE = "driver.jsa"
# The stock RocketMQ 5 gRPC client (PyPI rocketmq-python-client 5.1.2), through
# interop/drivers/python5: its actions and options are its own (PROTOCOL.md, "python5").
PYTHON5 = "python5"
# The stock RocketMQ 5 gRPC client for Go (rocketmq-clients/golang/v5 v5.1.4), through
# interop/drivers/go5: python5's actions, options and events (PROTOCOL.md, "go5").
GO5 = "go5"
# The stock RocketMQ 5 Java gRPC client (Maven rocketmq-client-java 5.0.8), through
# interop/drivers/java5grpc: python5's actions, options and events (PROTOCOL.md, "java5grpc").
JAVA5GRPC = "java5grpc"
JAVA5GRPC_MAIN = "GrpcDriver"
# The stock RocketMQ 5 gRPC client for Rust (the crate rocketmq 5.0.0), through
# interop/drivers/rust5: python5's actions, options and events where its API has them
# (PROTOCOL.md, "rust5"; push-consume is `unsupported`: the crate has no push consumer).
RUST5 = "rust5"
# The stock RocketMQ 5 gRPC client for Node (npm rocketmq-client-nodejs 1.0.8), through
# interop/drivers/node5: python5's actions, options and events (PROTOCOL.md, "node5").
NODE5 = "node5"
# The drivers that take the gRPC front's address (`endpoints`) instead of a name server.
GRPC_CLIENTS = (PYTHON5, GO5, JAVA5GRPC, RUST5, NODE5)


class DriverError(AssertionError):
    """A driver run did not reach its goal; the message has its events and stderr tail."""


def java_driver_class_path(classes: Path, role: str, cache: BenchCache) -> list[str]:
    """The Java driver's `-cp`, and its class-data archive when `python -m interop.install`
    made one (driver.jar and driver.jsa beside the classes): the JVM then maps the classes it
    loads at start instead of reading and verifying them, a third less CPU for a short run.
    JVM warnings (an archive that no longer matches, say) go to stderr, never to the events."""
    jar, archive = classes / DRIVER_JAR, classes / DRIVER_ARCHIVE
    if not jar.exists():
        return ["-cp", f"{classes}:{cache.classpath(role)}"]
    flags = ["-cp", f"{jar}:{cache.jars(role)}", "-Xlog:disable", "-Xlog:all=warning:stderr"]
    if archive.exists():
        flags.append(f"-XX:SharedArchiveFile={archive}")
    return flags


def driver_command(
    client: str,
    workdir: Path,
    cache: BenchCache | None = None,
    jvm_props: dict[str, str] | None = None,
) -> list[str]:
    """`jvm_props`: -D settings for the Java client (tls.enable and the like)."""
    cache = cache or bench_cache()
    if client in ("java", JAVA5):
        classes, role = (
            (cache.java_driver_classes, "client")
            if client == "java"
            else (cache.java5_driver_classes, "client5")
        )
        return [
            java_binary(),
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            *java_driver_class_path(classes, role, cache),
            *JDK17_OPENS,
            f"-Duser.home={workdir}",
            f"-Drocketmq.client.logRoot={workdir / 'logs'}",
            # Rebalance every 5 s, not 20: a consumer learns of a new queue (a %RETRY% topic's,
            # say) at its next rebalance, so a scenario waited up to 20 s for it.
            "-Drocketmq.client.rebalance.waitInterval=5000",
            f"-Ddriver.client={client}",
            *(f"-D{k}={v}" for k, v in (jvm_props or {}).items()),
            JAVA_DRIVER_MAIN,
        ]
    if client == "cpp":
        return [str(cache.cpp_python), str(DRIVERS_DIR / "cpp" / "driver.py")]
    if client == "node":
        return ["node", str(DRIVERS_DIR / "node" / "driver.js")]
    if client == "go":
        return [str(cache.go_driver)]
    if client == PYTHON5:
        return [str(cache.py5_python), str(DRIVERS_DIR / "python5" / "driver.py")]
    if client == GO5:
        return [str(cache.go5_driver)]
    if client == NODE5:
        return ["node", str(DRIVERS_DIR / "node5" / "driver.js")]
    if client == JAVA5GRPC:
        return [
            java_binary(),
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Duser.home={workdir}",
            # The client's log (interop/drivers/java5grpc/src/StaticLoggerBinder.java).
            f"-Drocketmq.log.root={workdir / 'logs'}",
            "-cp",
            f"{cache.java5grpc_classes}:{cache.java5grpc_lib / '*'}",
            JAVA5GRPC_MAIN,
        ]
    if client == RUST5:
        return [str(cache.rust5_driver)]
    raise ValueError(
        f"unknown client {client!r}; one of {', '.join((*CLIENTS, JAVA5, *GRPC_CLIENTS))}"
    )


# What each driver needs from the bench cache, and the registry its install step uses.
DRIVER_ARTIFACTS = {
    "java": (lambda c: c.java_driver_classes, "java", "Maven Central"),
    JAVA5: (lambda c: c.java5_driver_classes, "java", "Maven Central"),
    "cpp": (lambda c: c.cpp_python, "cpp", "PyPI"),
    "node": (lambda c: c.node_modules / "ali-ons", "node", "the npm registry"),
    "go": (lambda c: c.go_driver, "go", "the Go module proxy"),
    PYTHON5: (lambda c: c.py5_python, "py5", "PyPI"),
    GO5: (lambda c: c.go5_driver, "go5", "the Go module proxy"),
    NODE5: (lambda c: c.node5_modules / "rocketmq-client-nodejs", "node5", "the npm registry"),
    JAVA5GRPC: (
        lambda c: c.java5grpc_classes / f"{JAVA5GRPC_MAIN}.class",
        "java5grpc",
        "Maven Central",
    ),
    RUST5: (lambda c: c.rust5_driver, "rust5", "the Rust crate registry"),
}


def check_driver_installed(client: str, cache: BenchCache | None = None) -> None:
    """Fail loudly, naming the install step and its registry, when a driver is not built."""
    cache = cache or bench_cache()
    artifact, step, registry = DRIVER_ARTIFACTS[client]
    if not artifact(cache).exists():
        raise DriverError(
            f"the {client} driver is not installed ({artifact(cache)} is missing): run "
            f"`python -m interop.install {step}` (it needs {registry} once)"
        )


def driver_env(client: str, workdir: Path, cache: BenchCache | None = None) -> dict[str, str]:
    cache = cache or bench_cache()
    # Every client writes logs (and ali-ons broadcast offsets) under $HOME: keep them per run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETMQ")}
    env["HOME"] = str(workdir)
    if client == "node":
        env["NODE_PATH"] = str(cache.node_modules)
    if client == NODE5:
        env["NODE_PATH"] = str(cache.node5_modules)
    if client == PYTHON5:
        # Its own venv alone: none of our modules (nor our generated protos) on its path.
        for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
            env.pop(name, None)
    return env


def option_args(options: dict[str, Any]) -> list[str]:
    """`dict(body_size=10, prop=["a=1", "b=2"])` -> `--body-size 10 --prop a=1 --prop b=2`."""
    args: list[str] = []
    for key, value in options.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            args += [flag, str(item).lower() if isinstance(item, bool) else str(item)]
    return args


def body_for(index: int, *, body_prefix: str = "body-", body_size: int = -1) -> bytes:
    """The body a driver sends as message `index` (PROTOCOL.md), to predict digests."""
    base = f"{body_prefix}{index}".encode()
    if body_size < 0:
        return base
    return (base + b"|" * max(body_size - len(base), 0))[:body_size]


def body_md5(index: int, **kw: Any) -> str:
    return hashlib.md5(body_for(index, **kw)).hexdigest()


@dataclass
class DriverRun:
    client: str
    argv: list[str]
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    seconds: float
    log_tails: str
    junk: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    def sent(self) -> list[dict[str, Any]]:
        return self.of("sent")

    def received(self, *, only_ok: bool = True) -> list[dict[str, Any]]:
        return [e for e in self.of("received") if not only_ok or e.get("action", "ok") == "ok"]

    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")

    def describe(self) -> str:
        counts = {k: len(self.of(k)) for k in ("sent", "received", "error", "done")}
        return (
            f"{self.client} {' '.join(self.argv)} -> exit {self.returncode} in "
            f"{self.seconds:.1f} s, events {counts}\nerrors: {self.errors()[:5]}\n"
            f"non-JSON stdout: {self.junk[:5]}\nstderr tail:\n{self.stderr[-2000:]}\n"
            f"{self.log_tails}"
        )

    def check(self) -> DriverRun:
        """Raise unless the run exited 0 with a `done` event and clean stdout."""
        if self.returncode != 0 or not self.of("done") or self.junk:
            raise DriverError(self.describe())
        return self


class DriverProcess:
    """A driver running in the background; `wait()` collects it into a DriverRun."""

    def __init__(
        self,
        client: str,
        action: str,
        *,
        topic: str,
        namesrv: str | None = None,
        endpoints: str | None = None,
        group: str | None = None,
        timeout_s: float = 60.0,
        workdir: Path | None = None,
        cache: BenchCache | None = None,
        jvm_props: dict[str, str] | None = None,
        **options: Any,
    ) -> None:
        if jvm_props and client not in ("java", JAVA5):
            raise ValueError(f"jvm_props are for the java driver, not {client}")
        # The 4.x drivers find brokers through a name server; the 5.x gRPC clients talk to the
        # gRPC front.
        if client in GRPC_CLIENTS and (endpoints is None or namesrv is not None):
            raise ValueError(f"the {client} driver takes `endpoints` (the gRPC front), no namesrv")
        if client not in GRPC_CLIENTS and (
            namesrv is None or endpoints is not None or group is None
        ):
            raise ValueError(f"the {client} driver takes `namesrv` and `group`, no endpoints")
        self.client = client
        # A directory of our own making goes when the run is collected; a caller's stays.
        self._owns_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"driver-{client}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.argv = [
            action,
            *option_args({"namesrv": namesrv, "endpoints": endpoints}),
            "--topic",
            topic,
            *option_args({"group": group}),
            "--timeout",
            str(timeout_s),
            *option_args(options),
        ]
        check_driver_installed(client, cache)
        cmd = driver_command(client, self.workdir, cache, jvm_props) + self.argv
        self._stdout = open(self.workdir / "driver.stdout", "w+b")  # noqa: SIM115
        self._stderr = open(self.workdir / "driver.stderr", "w+b")  # noqa: SIM115
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._stdout,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=driver_env(client, self.workdir, cache),
        )

    def events_so_far(self) -> list[dict[str, Any]]:
        return _parse(self._read(self.workdir / "driver.stdout"))[0]

    def wait_for(self, kind: str, count: int = 1, timeout_s: float = 60.0) -> None:
        """Block until the driver printed `count` events of `kind` (e.g. "ready")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sum(e.get("event") == kind for e in self.events_so_far()) >= count:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise DriverError(
            f"no {count} {kind!r} event(s) from {self.client}:\n{self.wait(5).describe()}"
        )

    def wait(self, grace_s: float = 30.0) -> DriverRun:
        """Wait up to the driver's own timeout plus a grace, then kill it by pid."""
        remaining = self.timeout_s + grace_s - (time.monotonic() - self.started)
        try:
            self.proc.wait(max(remaining, 0.1))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        seconds = time.monotonic() - self.started
        self._stdout.close()
        self._stderr.close()
        events, junk = _parse(self._read(self.workdir / "driver.stdout"))
        run = DriverRun(
            self.client,
            self.argv,
            self.proc.returncode,
            events,
            self._read(self.workdir / "driver.stderr"),
            seconds,
            _log_tails(self.workdir),
            junk,
        )
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return run

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @staticmethod
    def _read(path: Path) -> str:
        return path.read_bytes().decode("utf-8", errors="replace")


def _log_tails(workdir: Path) -> str:
    return "\n".join(
        f"--- {p}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
        for p in sorted(workdir.rglob("*.log"))[:4]
    )


def _parse(stdout: str) -> tuple[list[dict[str, Any]], list[str]]:
    events, junk = [], []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            junk.append(line)
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
        else:
            junk.append(line)
    return events, junk


def start_driver(client: str, action: str, **kw: Any) -> DriverProcess:
    return DriverProcess(client, action, **kw)


def run_driver(client: str, action: str, **kw: Any) -> DriverRun:
    return DriverProcess(client, action, **kw).wait()


def produce_messages(
    client: str,
    *,
    namesrv: str,
    topic: str,
    count: int,
    group: str,
    timeout_s: float = 120,
    **options: Any,
) -> list[dict[str, Any]]:
    """Send `count` messages (transactionally when `answer` is given); their `sent` events."""
    action = "transact" if "answer" in options else "produce"
    run = run_driver(
        client,
        action,
        namesrv=namesrv,
        topic=topic,
        group=group,
        count=count,
        timeout_s=timeout_s,
        **options,
    ).check()
    sent = run.sent()
    if len(sent) != count:
        raise DriverError(f"{len(sent)} of {count} sent\n{run.describe()}")
    return sent


def consume_messages(
    client: str,
    *,
    namesrv: str,
    topic: str,
    expect: int,
    group: str,
    timeout_s: float = 120,
    **options: Any,
) -> DriverRun:
    """Consume until `expect` messages were acknowledged; the finished run."""
    return run_driver(
        client,
        "consume",
        namesrv=namesrv,
        topic=topic,
        group=group,
        expect=expect,
        timeout_s=timeout_s,
        **options,
    ).check()
