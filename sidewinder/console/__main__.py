"""mqconsole -n 127.0.0.1:9876 [--port 8080] [--bind 127.0.0.1] [--users FILE]: serve the web
console. `mqconsole --hash-password NAME ROLE` prints a users-file line (asks the password)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from sidewinder.client.keys import configured_credentials
from sidewinder.console.accounts import ROLES, hash_password, read_users

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
        help="the address to listen on (default: loopback only)",
    )
    parser.add_argument(
        "--users",
        type=Path,
        help="log in with the accounts of this file (name:role:hash a line, role admin or "
        "read-only); without it, anyone who reaches the port may do anything",
    )
    parser.add_argument(
        "--hash-password",
        nargs=2,
        metavar=("NAME", "ROLE"),
        help="print a users-file line for NAME (admin or read-only), asking for the password",
    )
    parser.add_argument("--access-key", help="ACL 1.0 account the console signs requests with")
    parser.add_argument("--secret-key")
    parser.add_argument(
        "--acl-file",
        type=Path,
        help="a YAML file with accessKey and secretKey to sign with (keeps the secret out of "
        "the process list); without keys, $ROCKETMQ_HOME/conf/tools.yml when it exists",
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=10.0,
        help="seconds between the overview chart's TPS samples (an hour is kept)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    if args.hash_password:
        return print_user_line(*args.hash_password)
    try:
        import uvicorn

        from sidewinder.console.web import create_app
    except ImportError as exc:
        print(f"mqconsole: {exc}: install the console extra (pip install 'sidewinder-mq[console]')")
        return 2
    try:
        users = read_users(args.users) if args.users else None
        keys = configured_credentials(args.access_key, args.secret_key, args.acl_file)
    except (OSError, ValueError) as exc:
        print(f"mqconsole: {exc}", file=sys.stderr)
        return 2
    app = create_app(
        args.namesrv,
        access_key=keys.access_key if keys else None,
        secret_key=keys.secret_key if keys else None,
        sample_interval_s=args.sample_interval,
        users=users,
    )
    print(f"mqconsole: http://{args.bind}:{args.port}/ (name server {args.namesrv})", flush=True)
    uvicorn.run(app, host=args.bind, port=args.port, log_level="warning")
    return 0


def print_user_line(name: str, role: str) -> int:
    if role not in ROLES or ":" in name:
        print(f"mqconsole: role one of {', '.join(ROLES)}; no ':' in the name", file=sys.stderr)
        return 2
    password = getpass.getpass(f"password for {name}: ") if sys.stdin.isatty() else input()
    print(f"{name}:{role}:{hash_password(password)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
