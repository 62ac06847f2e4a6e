"""mqconsole -n 127.0.0.1:9876 [--port 8080] [--bind 127.0.0.1]: serve the web console."""

from __future__ import annotations

import argparse
import os

DEFAULT_PORT = 8080


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqconsole", description=__doc__)
    parser.add_argument(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="name server address(es), ';'-separated (default $NAMESRV_ADDR or 127.0.0.1:9876)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        help="the address to listen on (default: loopback only; the console has no login yet)",
    )
    parser.add_argument("--access-key", help="ACL 1.0 account the console signs requests with")
    parser.add_argument("--secret-key")
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=10.0,
        help="seconds between the overview chart's TPS samples (an hour is kept)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    try:
        import uvicorn

        from sidewinder.console.web import create_app
    except ImportError as exc:
        print(f"mqconsole: {exc}: install the console extra (pip install 'sidewinder-mq[console]')")
        return 2
    app = create_app(
        args.namesrv,
        access_key=args.access_key,
        secret_key=args.secret_key,
        sample_interval_s=args.sample_interval,
    )
    print(f"mqconsole: http://{args.bind}:{args.port}/ (name server {args.namesrv})", flush=True)
    uvicorn.run(app, host=args.bind, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
