"""mqbroker: the broker. `mqbroker [-n "ns1:9876;ns2:9876"] [-c broker.conf] [-p]`.

SIGTERM / SIGINT: unregister from the name servers, stop accepting, answer held pulls, flush,
checkpoint, remove the abort file, exit 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvloop

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.config import BrokerConfig
from sidewinder.common.config import ConfigError
from sidewinder.common.log import configure_logging
from sidewinder.common.properties import read_properties
from sidewinder.common.service import serve_until_signalled
from sidewinder.remoting.tls import TlsError
from sidewinder.store.run_markers import StoreLockedError


def load_config(path: Path | None, namesrv: str | None, *, to_print: bool = False) -> BrokerConfig:
    values = read_properties(path) if path else {}
    if namesrv:
        values["namesrvAddr"] = namesrv
    unknown = sorted(set(values) - BrokerConfig.conf_keys())
    if unknown:
        print(f"mqbroker: ignoring unknown key(s) in {path}: {', '.join(unknown)}", file=sys.stderr)
    return BrokerConfig.from_properties(values)


async def serve(config: BrokerConfig, conf_path: Path | None = None) -> None:
    app = BrokerApp(config, conf_path)
    await serve_until_signalled(
        app.start,
        app.stop,
        lambda: (
            f"The broker[{config.broker_name}, {config.broker_addr}] boot success. "
            f"serializeType=JSON and name server is {config.namesrv_addr}"
        ),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqbroker", description=__doc__)
    parser.add_argument("-c", "--configFile", dest="config", type=Path, help="broker.conf")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv", help="ns1:9876;ns2:9876")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(daemon=True)
    try:
        config = load_config(args.config, args.namesrv, to_print=args.print_config)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"mqbroker: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        for key, value in config.as_properties().items():
            print(f"{key}={value}")
        return 0
    if config.grpc_server_port is not None and not config.namesrv_addrs:
        print(
            "mqbroker: grpcServerPort needs namesrvAddr (the gRPC front's routes)", file=sys.stderr
        )
        return 2
    try:
        uvloop.run(serve(config, args.config))
    except TlsError as exc:  # certificate files, read at start
        print(f"mqbroker: {exc}", file=sys.stderr)
        return 2
    except StoreLockedError as exc:
        print(f"mqbroker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(f"mqbroker: cannot start: {reason} ({exc})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
