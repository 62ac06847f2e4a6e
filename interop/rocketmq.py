"""Start and stop the real Apache RocketMQ name server and broker on free 127.0.0.1 ports.

    with RocketMQCluster(tmp_path, broker_conf={"flushDiskType": "SYNC_FLUSH"}) as cluster:
        cluster.namesrv_addr, cluster.broker_addr, cluster.store_path
        cluster.kill_broker(); cluster.start_broker()      # a crash and a recovery

`python -m interop.rocketmq [--workdir DIR] [KEY=VALUE ...]` runs one in the foreground until
Ctrl-C, SIGTERM or SIGHUP (each stops both JVMs), for poking at it with mqadmin or a driver by hand.
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from interop.cache import BenchCache, bench_cache
from interop.jvm import class_archive_flags, java_command, java_env
from interop.ports import lease_port_block
from interop.processes import ManagedProcess, StartupError, can_connect, start_until_banner
from sidewinder.common.properties import read_properties

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"

# A short delay ladder keeps retry (level 3 + reconsumeTimes) and delay tests to seconds.
TEST_DELAY_LEVELS = " ".join(f"{n}s" for n in range(1, 19))


def test_broker_conf(
    *,
    broker_name: str = "broker-a",
    cluster: str = "DefaultCluster",
    store: Path,
    namesrv_addr: str,
    listen_port: int,
) -> dict[str, str]:
    """broker.conf for a test broker: small segments, store in a temp dir, loopback only."""
    return {
        "brokerClusterName": cluster,
        "brokerName": broker_name,
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "namesrvAddr": namesrv_addr,
        "listenPort": str(listen_port),
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "mappedFileSizeCommitLog": str(8 << 20),
        "mappedFileSizeConsumeQueue": str(3000 * 20),
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        "enablePropertyFilter": "true",
        "flushDiskType": "ASYNC_FLUSH",
        "messageDelayLevel": TEST_DELAY_LEVELS,
        "transactionCheckInterval": "2000",
        "transactionTimeOut": "1000",
        # The test disk may be fuller than a production one; 4.9 refuses puts above this ratio.
        "diskMaxUsedSpaceRatio": "95",
    }


def server_launch(
    cache: BenchCache, role: str, process: str, *, make_archive: bool = False
) -> tuple[str, list[str]]:
    """The classpath and JVM flags of a RocketMQ server JVM (`process`: namesrv or broker):
    its role's jars named in a fixed order, and its class-data archive when there is one (or,
    `make_archive`, the flag that writes it at exit, beside the final name)."""
    archive = cache.server_archive(role, process)
    if make_archive:
        archive.parent.mkdir(parents=True, exist_ok=True)
        return cache.jars(role), class_archive_flags(archive.with_suffix(".new"), make=True)
    return cache.jars(role), class_archive_flags(archive) if archive.exists() else []


def write_properties(path: Path, values: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}={value}" for key, value in values.items() if value is not None]
    path.write_text("\n".join(lines) + "\n")


class RocketMQCluster:
    """One real RocketMQ name server and one master broker, each a JVM we own by pid.
    `system_props` go to both JVMs as -D (RocketMQ's TLS settings are read only from there)."""

    kind = "rocketmq"
    # The Maven role (interop/maven/pom.xml) whose classpath runs the broker; the name server
    # always runs on `server`'s. The broker log's path under the workdir.
    broker_role = "server"
    broker_log = Path("logs") / "broker.log"

    def __init__(
        self,
        workdir: Path,
        *,
        broker_conf: Mapping[str, Any] | None = None,
        cache: BenchCache | None = None,
        broker_heap_mb: int = 512,
        namesrv_heap_mb: int = 256,
        startup_timeout_s: float = 90.0,
        system_props: Mapping[str, str] | None = None,
        make_class_archives: bool = False,
    ) -> None:
        """`make_class_archives`: the JVMs write their class-data archives as they exit
        (`python -m interop.install cds`); a clean stop then moves them into place."""
        self.workdir = Path(workdir)
        self.cache = cache or bench_cache()
        self.startup_timeout_s = startup_timeout_s
        self._check_cache()
        overrides = dict(broker_conf or {})
        self.namesrv_port = lease_port_block()
        # The broker also binds listenPort-2 (fast channel) and listenPort+1 (HA).
        self.broker_port = int(overrides.get("listenPort") or lease_port_block((-2, 0, 1)))
        # An existing store (a golden fixture, say) is opened by naming it in broker_conf.
        self.store_path = Path(overrides.get("storePathRootDir") or self.workdir / "store")
        conf = test_broker_conf(
            store=self.store_path, namesrv_addr=self.namesrv_addr, listen_port=self.broker_port
        )
        conf.update({k: str(v) if v is not None else None for k, v in overrides.items()})
        self.broker_conf: dict[str, str | None] = dict(conf)
        self.broker_name = str(conf["brokerName"])
        self.cluster_name = str(conf["brokerClusterName"])
        write_properties(self.workdir / "namesrv.conf", {"listenPort": self.namesrv_port})
        write_properties(self.workdir / "broker.conf", self.broker_conf)
        logs = self.workdir / "logs"
        self.make_class_archives = make_class_archives
        classpath, flags = server_launch(
            self.cache, "server", "namesrv", make_archive=make_class_archives
        )
        self.namesrv = ManagedProcess(
            "rocketmq name server",
            java_command(
                self.workdir,
                classpath,
                NAMESRV_MAIN,
                ["-c", str(self.workdir / "namesrv.conf")],
                heap_mb=namesrv_heap_mb,
                extra_props=dict(system_props or {}),
                jvm_flags=flags,
            ),
            self.workdir / "namesrv.out",
            env=java_env(self.workdir),
            cwd=self.workdir,
            log_paths=[logs / "namesrv.log"],
        )
        classpath, flags = server_launch(
            self.cache, self.broker_role, "broker", make_archive=make_class_archives
        )
        self.broker = ManagedProcess(
            "rocketmq broker",
            java_command(
                self.workdir,
                classpath,
                BROKER_MAIN,
                ["-c", str(self.workdir / "broker.conf")],
                heap_mb=broker_heap_mb,
                extra_props=dict(system_props or {}),
                jvm_flags=flags,
            ),
            self.workdir / "broker.out",
            env=java_env(self.workdir),
            cwd=self.workdir,
            log_paths=[self.workdir / self.broker_log],
        )

    def _check_cache(self) -> None:
        lib = self.cache.maven_lib
        roles = {"server", self.broker_role}
        if not all(list((lib / role).glob("rocketmq-broker-*.jar")) for role in roles):
            raise StartupError(
                f"RocketMQ jars are missing from {self.cache.maven_lib}: "
                "run `python -m interop.install` (it needs Maven Central once)"
            )

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pids(self) -> dict[str, int | None]:
        return {"namesrv": self.namesrv.pid, "broker": self.broker.pid}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> RocketMQCluster:
        self.start_namesrv()
        try:
            self.start_broker()
        except BaseException:
            self.namesrv.kill()
            raise
        return self

    def start_namesrv(self) -> None:
        self.namesrv.start()
        self.namesrv.wait_ready(
            lambda: (
                self.namesrv.output_contains("boot success")
                and can_connect("127.0.0.1", self.namesrv_port)
            ),
            self.startup_timeout_s,
        )

    def start_broker(self) -> None:
        """Start (or restart, after stop_broker/kill_broker) the broker on the same store."""
        # BrokerStartup prints "boot success" after it has registered with the name server.
        start_until_banner(self.broker, self.broker_port, self.startup_timeout_s)

    def stop_broker(self, timeout_s: float = 60.0) -> int | None:
        return self.broker.stop(timeout_s)

    def kill_broker(self) -> int | None:
        return self.broker.kill()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful stop of both (in parallel: a 4.9 broker takes seconds to shut down)."""
        threads = [
            threading.Thread(target=p.stop, args=(timeout_s,)) for p in (self.broker, self.namesrv)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def kill(self) -> None:
        self.broker.kill()
        self.namesrv.kill()

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> RocketMQCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RocketMQCluster(namesrv={self.namesrv_addr}, broker={self.broker_addr})"


# The JVMs lead their own sessions, so no signal sent to us reaches them: we must stop them.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop_requested(signum: int, frame: FrameType | None) -> None:
    """Unwind to the cluster's stop. Later signals are ignored: one landing inside the stop
    would abandon it and leave the JVMs running."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m interop.rocketmq",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--conf",
        dest="conf_file",
        type=Path,
        default=None,
        help="a broker.conf whose keys override the test defaults",
    )
    parser.add_argument("conf", nargs="*", metavar="KEY=VALUE", help="broker.conf overrides")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rocketmq-"))
    overrides: dict[str, str] = read_properties(args.conf_file) if args.conf_file else {}
    overrides.update(item.split("=", 1) for item in args.conf)
    cluster = RocketMQCluster(workdir, broker_conf=overrides)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop_requested)
    started = time.monotonic()
    try:
        cluster.start()
        print(
            f"namesrv {cluster.namesrv_addr}  broker {cluster.broker_addr}  "
            f"store {cluster.store_path}  (up in {time.monotonic() - started:.1f} s); "
            "Ctrl-C or SIGTERM stops",
            flush=True,
        )
        while cluster.broker.alive() and cluster.namesrv.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()  # also after a signal mid-start: the broker may be up, the name server not
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
