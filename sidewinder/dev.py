"""sidewinder-dev: a name server and a broker in one process, on the default ports, for a laptop.

    sidewinder-dev [--store ./store] [--namesrv-port 9876] [--broker-port 10911] [-c broker.conf]
                   [--metrics-port 5557 | --no-metrics] [--grpc-port 8081 | --no-grpc]
                   [--console-port 8080 | --no-console]
    sidewinder-dev --cluster [2m-2s-sync | CONF_DIR] [--store ./store] [--no-metrics]

The broker registers with the in-process name server (127.0.0.1:9876 unless told otherwise);
clients use `-n 127.0.0.1:9876` as with any RocketMQ cluster. SIGTERM / SIGINT stop both.
Prometheus metrics are on: the broker's at http://127.0.0.1:5557/metrics, the name server's
on the next port (a broker.conf given with -c may set the broker's metrics keys itself).
RocketMQ 5's gRPC clients connect to 127.0.0.1:8081 (the broker's gRPC front, local mode).
The web console (mqconsole) runs beside them as a child process, on 8080 unless that port is
taken (then a free one); its URL is printed once the broker is up.

`--cluster` starts a conf set's name servers and brokers instead, each a process of its own
(conf/2m-2s-sync: two name servers, broker-a and broker-b each a SYNC_MASTER and a SLAVE); see
sidewinder/dev_cluster.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import socket
import sys
from pathlib import Path

import uvloop

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.config import BrokerConfig
from sidewinder.common.config import ConfigError
from sidewinder.common.log import configure_logging
from sidewinder.common.metrics_server import DEFAULT_PORT
from sidewinder.common.properties import read_properties
from sidewinder.common.service import serve_until_signalled
from sidewinder.dev_cluster import DEFAULT_CONF_SET, run_cluster
from sidewinder.namesrv.app import NamesrvApp
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.store.run_markers import StoreLockedError


def configs(args: argparse.Namespace) -> tuple[NamesrvConfig, BrokerConfig]:
    store = args.store.resolve()
    metrics = "DISABLE" if args.no_metrics else "PROM"
    namesrv = NamesrvConfig.from_properties(
        {
            "listenPort": str(args.namesrv_port),
            "kvConfigPath": str(store / "namesrv" / "kvConfig.json"),
            "metricsExporterType": metrics,
            "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": str(args.metrics_port + 1),
        }
    )
    values = read_properties(args.config) if args.config else {}
    values = {
        "brokerName": "broker-a",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "metricsExporterType": metrics,
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": str(args.metrics_port),
        **({} if args.no_grpc else {"grpcServerPort": str(args.grpc_port)}),
        **values,
        "namesrvAddr": f"127.0.0.1:{args.namesrv_port}",
        "listenPort": str(args.broker_port),
    }
    return namesrv, BrokerConfig.from_properties(values)


def console_port(wanted: int) -> int:
    """`wanted` if nothing listens on it, else a free port the kernel picks."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", wanted))
            return wanted
        except OSError:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])


class ConsoleChild:
    """mqconsole in a process of its own: the broker's loop never runs the web stack."""

    def __init__(self, namesrv_port: int, port: int | None) -> None:
        self.namesrv_port = namesrv_port
        self.port = port
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> str | None:
        if self.port is None:
            return None
        if importlib.util.find_spec("starlette") is None:
            print("sidewinder-dev: no console: install the console extra", file=sys.stderr)
            return None
        port = console_port(self.port)
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sidewinder.console",
            "-n",
            f"127.0.0.1:{self.namesrv_port}",
            "--port",
            str(port),
            stdout=asyncio.subprocess.DEVNULL,
        )
        return f"http://127.0.0.1:{port}/"

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()


async def serve(
    namesrv_config: NamesrvConfig, broker_config: BrokerConfig, console: ConsoleChild
) -> None:
    namesrv = NamesrvApp(namesrv_config)
    broker = BrokerApp(broker_config)
    console_url: list[str] = []

    async def start() -> None:
        await namesrv.start("127.0.0.1")
        try:
            await broker.start("127.0.0.1")
        except BaseException:
            await namesrv.stop()
            raise
        url = await console.start()
        if url:
            console_url.append(url)

    async def stop() -> None:
        await console.stop()
        await broker.stop()
        await namesrv.stop()

    await serve_until_signalled(
        start,
        stop,
        lambda: (
            f"sidewinder-dev boot success: name server 127.0.0.1:{namesrv.server.port}, "
            f"broker {broker_config.broker_addr}, store {broker_config.store.store_path_root_dir}"
            + (f", gRPC 127.0.0.1:{broker.grpc.port}" if broker.grpc is not None else "")
            + (f", console {console_url[0]}" if console_url else "")
        ),
    )


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sidewinder-dev", description=__doc__)
    parser.add_argument("--store", type=Path, default=Path("store"))
    parser.add_argument("--namesrv-port", type=int, default=9876)
    parser.add_argument("--broker-port", type=int, default=10911)
    parser.add_argument("-c", "--configFile", dest="config", type=Path, help="broker.conf")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_PORT,
        help="the broker's /metrics port; the name server's is the next one",
    )
    parser.add_argument("--no-metrics", action="store_true", help="serve no /metrics")
    parser.add_argument(
        "--grpc-port", type=int, default=8081, help="RocketMQ 5 clients' port (gRPC front)"
    )
    parser.add_argument("--no-grpc", action="store_true", help="serve no gRPC front")
    parser.add_argument(
        "--console-port", type=int, default=8080, help="the web console's port (taken: any free)"
    )
    parser.add_argument("--no-console", action="store_true", help="start no web console")
    parser.add_argument(
        "--cluster",
        nargs="?",
        const=DEFAULT_CONF_SET,
        metavar="CONF_SET",
        help=(
            "start every name server and broker of a conf set (a directory, or a name under "
            f"conf/; default {DEFAULT_CONF_SET}) as processes; --store holds their stores, "
            "--metrics-port is the first of their metrics ports"
        ),
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    if args.cluster:
        metrics_port = None if args.no_metrics else args.metrics_port
        return run_cluster(args.cluster, args.store, metrics_port)
    configure_logging(daemon=True)
    try:
        namesrv, broker = configs(args)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"sidewinder-dev: {exc}", file=sys.stderr)
        return 2
    try:
        console = ConsoleChild(args.namesrv_port, None if args.no_console else args.console_port)
        uvloop.run(serve(namesrv, broker, console))
    except StoreLockedError as exc:
        print(f"sidewinder-dev: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"sidewinder-dev: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
