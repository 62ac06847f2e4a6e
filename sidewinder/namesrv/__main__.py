"""mqnamesrv: the name server. `mqnamesrv [-c namesrv.conf] [-p]`; stops on SIGTERM / SIGINT."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvloop

from sidewinder.common.config import ConfigError
from sidewinder.common.log import configure_logging
from sidewinder.common.properties import read_properties
from sidewinder.common.service import serve_until_signalled
from sidewinder.namesrv.app import NamesrvApp
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.remoting.tls import TlsError


def load_config(path: Path | None) -> NamesrvConfig:
    values = read_properties(path) if path else {}
    unknown = sorted(set(values) - NamesrvConfig.conf_keys())
    if unknown:
        print(
            f"mqnamesrv: ignoring unknown key(s) in {path}: {', '.join(unknown)}", file=sys.stderr
        )
    return NamesrvConfig.from_properties(values)


async def serve(config: NamesrvConfig) -> None:
    app = NamesrvApp(config)
    await serve_until_signalled(
        app.start,
        app.stop,
        lambda: f"The Name Server boot success. serializeType=JSON, port={app.server.port}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqnamesrv", description=__doc__)
    parser.add_argument("-c", "--configFile", dest="config", type=Path, help="namesrv.conf")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(daemon=True)
    try:
        config = load_config(args.config)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        for key, value in config.as_properties().items():
            print(f"{key}={value}")
        return 0
    try:
        uvloop.run(serve(config))
    except TlsError as exc:  # certificate files, read at start
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(
            f"mqnamesrv: cannot listen on port {config.server.listen_port}: {reason} ({exc})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
