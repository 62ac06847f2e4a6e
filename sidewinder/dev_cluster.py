"""sidewinder-dev --cluster: every name server and broker of a conf set as processes on one machine.

    sidewinder-dev --cluster                      # conf/2m-2s-sync: 2 name servers, 2 groups
    sidewinder-dev --cluster DIR --store ./store  # any set: namesrv*.conf, the rest brokers

Each `namesrv*.conf` of the set starts `mqnamesrv -c`, every other `*.conf` `mqbroker -c`, as
child processes in sessions of their own, so Ctrl-C reaches only this process, which then stops
them in order: slaves, masters, name servers (SIGTERM each, SIGKILL after 30 s). The stores go
under one directory (`--store`: `STORE/<file stem>/`), the effective conf files under
`STORE/conf/`, each process's output under `STORE/logs/`. Every broker is told the set's name
servers (`namesrvAddr`), whatever its file says. A child that dies (a master killed to watch its
slave take the reads) is reported and the rest run on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from sidewinder.broker.config import BrokerConfig
from sidewinder.common.properties import read_properties
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.store.config import BrokerRole

DEFAULT_CONF_SET = "2m-2s-sync"
STOP_TIMEOUT_S = 30.0
STARTUP_TIMEOUT_S = 60.0


class ClusterError(RuntimeError):
    """The conf set cannot be read or a process did not come up; the message says which."""


@dataclass
class Member:
    """One process of the set: its file stem, its effective keys, and once started its child."""

    name: str
    kind: str  # "namesrv" or "broker"
    values: dict[str, str]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    reported: bool = field(default=False)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_slave(self) -> bool:
        return self.values.get("brokerRole", "").strip().upper() == BrokerRole.SLAVE.value

    def describe(self) -> str:
        if self.kind == "namesrv":
            return f"{self.name:<12} name server              {self.addr:<16} pid {self.pid()}"
        role = self.values.get("brokerRole", "ASYNC_MASTER").strip()
        group = self.values.get("brokerName", self.name).strip()
        where = f"{self.addr:<16} pid {self.pid()}  store {self.values['storePathRootDir']}"
        return f"{self.name:<12} {group:<12} {role:<12} {where}"

    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


def find_conf_set(name_or_path: str, cwd: Path | None = None) -> Path:
    """A directory as given, else conf/<name> under the working directory, else under the
    source checkout this module runs from."""
    given = Path(name_or_path)
    candidates = [given, (cwd or Path.cwd()) / "conf" / name_or_path]
    candidates.append(Path(__file__).resolve().parents[1] / "conf" / name_or_path)
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise ClusterError(
        f"no conf set {name_or_path!r} (looked in {', '.join(map(str, candidates))})"
    )


def plan(conf_set: Path, store: Path, *, metrics_port: int | None) -> list[Member]:
    """The set's members with the keys they will run with: name servers first, then brokers
    (masters before slaves); stores under `store`; metrics from `metrics_port` on, one port
    each, brokers first (None: no metrics)."""
    files = sorted(conf_set.glob("*.conf"))
    namesrvs = [f for f in files if f.stem.startswith("namesrv")]
    brokers = [f for f in files if not f.stem.startswith("namesrv")]
    if not namesrvs or not brokers:
        raise ClusterError(f"{conf_set} needs namesrv*.conf and broker .conf files")
    members = [_namesrv(f, store) for f in namesrvs]
    namesrv_addr = ";".join(m.addr for m in members)
    broker_members = [_broker(f, store, namesrv_addr) for f in brokers]
    broker_members.sort(key=lambda m: m.is_slave)
    if metrics_port is not None:
        for n, member in enumerate(broker_members + members):
            member.values.update(
                metricsExporterType="PROM",
                metricsPromExporterHost="127.0.0.1",
                metricsPromExporterPort=str(metrics_port + n),
            )
    _check_ports(members + broker_members)
    return members + broker_members


def _namesrv(path: Path, store: Path) -> Member:
    values = read_properties(path)
    home = store / path.stem
    values["kvConfigPath"] = str(home / "kvConfig.json")
    values["configStorePath"] = str(home / "namesrv.properties")
    config = NamesrvConfig.from_properties(values)
    return Member(path.stem, "namesrv", values, config.server.listen_port)


def _broker(path: Path, store: Path, namesrv_addr: str) -> Member:
    values = {"brokerIP1": "127.0.0.1", **read_properties(path)}
    values["storePathRootDir"] = str(store / path.stem)
    values["storePathCommitLog"] = str(store / path.stem / "commitlog")
    values["namesrvAddr"] = namesrv_addr
    config = BrokerConfig.from_properties(values)
    return Member(path.stem, "broker", values, config.server.listen_port)


def _check_ports(members: list[Member]) -> None:
    """A broker takes listenPort, listenPort-2 (VIP channel) and listenPort+1 (HA): no two
    members may share one."""
    owner: dict[int, str] = {}
    for member in members:
        offsets = (0,) if member.kind == "namesrv" else (-2, 0, 1)
        for port in (member.port + off for off in offsets):
            if port in owner:
                raise ClusterError(f"{member.name} and {owner[port]} both need port {port}")
            owner[port] = member.name


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


class ClusterRunner:
    """Starts the members, watches them, stops them in order."""

    def __init__(self, members: list[Member], store: Path) -> None:
        self.members = members
        self.store = store
        self.stopping = threading.Event()

    def start(self) -> None:
        namesrvs = [m for m in self.members if m.kind == "namesrv"]
        brokers = [m for m in self.members if m.kind == "broker"]
        for batch in (namesrvs, brokers):
            for member in batch:
                self._spawn(member)
            for member in batch:
                self._wait_ready(member)

    def _spawn(self, member: Member) -> None:
        conf = self.store / "conf" / f"{member.name}.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text("".join(f"{k}={v}\n" for k, v in member.values.items()))
        member.log_path = self.store / "logs" / f"{member.name}.log"
        member.log_path.parent.mkdir(parents=True, exist_ok=True)
        module = "sidewinder.namesrv" if member.kind == "namesrv" else "sidewinder.broker"
        with open(member.log_path, "ab") as out:
            member.proc = subprocess.Popen(
                [sys.executable, "-m", module, "-c", str(conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _wait_ready(self, member: Member) -> None:
        assert member.proc is not None and member.log_path is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and not self.stopping.is_set():
            if member.proc.poll() is not None:
                raise ClusterError(
                    f"{member.name} exited with {member.proc.returncode} during start-up:\n"
                    + _tail(member.log_path)
                )
            if b"boot success" in member.log_path.read_bytes() and _port_open(member.port):
                return
            time.sleep(0.1)
        if not self.stopping.is_set():
            raise ClusterError(f"{member.name} not up after {STARTUP_TIMEOUT_S:.0f} s")

    def watch(self) -> None:
        """Until a stop is asked for or every member is gone; reports each that dies."""
        while not self.stopping.wait(0.5):
            running = 0
            for member in self.members:
                code = member.proc.poll() if member.proc else 0
                if code is None:
                    running += 1
                elif not member.reported:
                    member.reported = True
                    print(f"sidewinder-dev: {member.name} exited with {code}", flush=True)
            if not running:
                return

    def stop(self) -> int:
        """Slaves, then masters, then name servers; 0 if each exited cleanly or was gone."""
        worst = 0
        slaves = [m for m in self.members if m.kind == "broker" and m.is_slave]
        masters = [m for m in self.members if m.kind == "broker" and not m.is_slave]
        namesrvs = [m for m in self.members if m.kind == "namesrv"]
        for batch in (slaves, masters, namesrvs):
            for member in batch:
                _signal(member, signal.SIGTERM)
            for member in batch:
                code = _reap(member)
                if code not in (None, 0) and not member.reported:
                    worst = 1
        return worst

    def banner(self, conf_set: Path) -> str:
        lines = [f"sidewinder-dev cluster boot success: {conf_set}, store {self.store}"]
        lines += [f"  {m.describe()}" for m in self.members]
        namesrvs = ";".join(m.addr for m in self.members if m.kind == "namesrv")
        lines.append(f'clients: -n "{namesrvs}"; logs in {self.store / "logs"}; Ctrl-C stops all')
        return "\n".join(lines)


def _signal(member: Member, sig: int) -> None:
    if member.proc is not None and member.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(member.proc.pid, sig)


def _reap(member: Member) -> int | None:
    if member.proc is None:
        return None
    try:
        return member.proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _signal(member, signal.SIGKILL)
        member.proc.wait()
        return member.proc.returncode


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_cluster(conf_set_name: str, store: Path, metrics_port: int | None) -> int:
    """sidewinder-dev --cluster: start the set, print where everything is, run until signalled."""
    try:
        conf_set = find_conf_set(conf_set_name)
        members = plan(conf_set, store.resolve(), metrics_port=metrics_port)
    except (ClusterError, OSError, ValueError) as exc:
        print(f"sidewinder-dev: {exc}", file=sys.stderr)
        return 2
    runner = ClusterRunner(members, store.resolve())

    def stop_requested(signum: int, frame: FrameType | None) -> None:
        runner.stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop_requested)
    code = 0
    try:
        runner.start()
        if not runner.stopping.is_set():
            print(runner.banner(conf_set), flush=True)
            runner.watch()
            if not runner.stopping.is_set():
                code = 1  # every process died without being asked to
    except ClusterError as exc:
        print(f"sidewinder-dev: {exc}", file=sys.stderr)
        code = 1
    finally:
        stopped = runner.stop()
    return code or stopped
