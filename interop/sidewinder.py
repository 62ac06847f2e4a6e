"""Sidewinder's own daemons as bench processes: started on free 127.0.0.1 ports, stopped by pid.

namesrv = SidewinderNamesrv(workdir).start()     # python -m sidewinder.namesrv -c conf
... namesrv.addr ...
namesrv.stop()                                   # SIGTERM, then the exit code
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from interop.ports import lease_port_block
from interop.processes import ManagedProcess, can_connect, start_until_banner
from interop.rocketmq import write_properties

REPO_ROOT = Path(__file__).resolve().parent.parent


def python_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["HOME"] = str(workdir)  # defaults under ~ (kvConfig, store) stay in the test's dir
    env.setdefault("SIDEWINDER_LOG_LEVEL", "INFO")
    return env


class SidewinderNamesrv:
    def __init__(
        self, workdir: Path, conf: dict[str, Any] | None = None, startup_timeout_s: float = 30.0
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = int((conf or {}).get("listenPort") or lease_port_block())
        values = {
            "listenPort": self.port,
            "kvConfigPath": self.workdir / "namesrv" / "kvConfig.json",
            **(conf or {}),
        }
        write_properties(self.workdir / "namesrv.conf", values)
        self.startup_timeout_s = startup_timeout_s
        self.process = ManagedProcess(
            "sidewinder name server",
            [sys.executable, "-m", "sidewinder.namesrv", "-c", str(self.workdir / "namesrv.conf")],
            self.workdir / "namesrv.out",
            env=python_env(self.workdir),
            cwd=self.workdir,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SidewinderNamesrv:
        self.process.start()
        self.process.wait_ready(
            lambda: (
                self.process.output_contains("boot success") and can_connect("127.0.0.1", self.port)
            ),
            self.startup_timeout_s,
        )
        return self

    def stop(self, timeout_s: float = 15.0) -> int | None:
        return self.process.stop(timeout_s)

    def kill(self) -> int | None:
        return self.process.kill()


def sidewinder_broker_conf(
    *, store: Path, namesrv_addr: str, listen_port: int, broker_name: str = "broker-a"
) -> dict[str, Any]:
    """broker.conf for a test broker, the same settings the RocketMQ bench broker gets."""
    from interop.rocketmq import test_broker_conf

    return test_broker_conf(
        broker_name=broker_name, store=store, namesrv_addr=namesrv_addr, listen_port=listen_port
    )


class SidewinderCluster:
    """Our name server and one master broker as real processes, the bench's second target."""

    kind = "sidewinder"

    def __init__(
        self,
        workdir: Path,
        *,
        broker_conf: dict[str, Any] | None = None,
        startup_timeout_s: float = 60.0,
        system_props: dict[str, str] | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        # RocketMQ's system properties that we take (tls.*) are keys of both conf files here.
        props = dict(system_props or {})
        self.namesrv = SidewinderNamesrv(self.workdir / "namesrv", props)
        overrides = dict(broker_conf or {})
        self.broker_port = int(overrides.get("listenPort") or lease_port_block((-2, 0, 1)))
        self.store_path = Path(overrides.get("storePathRootDir") or self.workdir / "store")
        conf = sidewinder_broker_conf(
            store=self.store_path, namesrv_addr=self.namesrv.addr, listen_port=self.broker_port
        )
        conf.update({k: v for k, v in overrides.items() if v is not None})
        conf.update(props)
        self.broker_conf = conf
        self.broker_name = str(conf["brokerName"])
        self.cluster_name = str(conf["brokerClusterName"])
        write_properties(self.workdir / "broker.conf", conf)
        self.startup_timeout_s = startup_timeout_s
        self.broker = ManagedProcess(
            "sidewinder broker",
            [sys.executable, "-m", "sidewinder.broker", "-c", str(self.workdir / "broker.conf")],
            self.workdir / "broker.out",
            env=python_env(self.workdir),
            cwd=self.workdir,
        )

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pids(self) -> dict[str, int | None]:
        return {"namesrv": self.namesrv.process.pid, "broker": self.broker.pid}

    def start(self) -> SidewinderCluster:
        self.namesrv.start()
        try:
            self.start_broker()
        except BaseException:
            self.namesrv.kill()
            raise
        return self

    def start_broker(self) -> None:
        start_until_banner(self.broker, self.broker_port, self.startup_timeout_s)

    def stop_broker(self, timeout_s: float = 30.0) -> int | None:
        return self.broker.stop(timeout_s)

    def kill_broker(self) -> int | None:
        return self.broker.kill()

    def stop(self, timeout_s: float = 30.0) -> None:
        self.broker.stop(timeout_s)
        self.namesrv.stop(timeout_s)

    def kill(self) -> None:
        self.broker.kill()
        self.namesrv.kill()

    def restart(self) -> None:
        self.stop_broker()
        self.start_broker()

    def __repr__(self) -> str:
        return f"SidewinderCluster(namesrv={self.namesrv_addr}, broker={self.broker_addr})"


class MqProxy:
    """Our gRPC front (mqproxy, cluster mode) as a process, in front of any target's name
    server: RocketMQ 5's clients reach that target's brokers through it."""

    def __init__(
        self,
        workdir: Path,
        namesrv_addr: str,
        conf: dict[str, Any] | None = None,
        startup_timeout_s: float = 30.0,
    ) -> None:
        """`conf`: RocketMQ's tls.* keys, written to a properties file mqproxy reads (-c)."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = lease_port_block()
        self.startup_timeout_s = startup_timeout_s
        extra: list[str] = []
        if conf:
            write_properties(self.workdir / "proxy.conf", conf)
            extra = ["-c", str(self.workdir / "proxy.conf")]
        self.process = ManagedProcess(
            "sidewinder mqproxy",
            [
                sys.executable,
                "-m",
                "sidewinder.proxy",
                "-n",
                namesrv_addr,
                "--grpcServerPort",
                str(self.port),
                "--host",
                "127.0.0.1",
                *extra,
            ],
            self.workdir / "mqproxy.out",
            env=python_env(self.workdir),
            cwd=self.workdir,
        )

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> MqProxy:
        start_until_banner(self.process, self.port, self.startup_timeout_s)
        return self

    def stop(self, timeout_s: float = 15.0) -> int | None:
        return self.process.stop(timeout_s)
