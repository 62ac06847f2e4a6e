"""mqproxy: RocketMQ 5's gRPC front (apache.rocketmq.v2.MessagingService) in cluster mode, for
RocketMQ 5's clients. It finds brokers through the name servers and speaks remoting to them,
Sidewinder's or RocketMQ's alike; several may run. Stops on SIGTERM / SIGINT.

    mqproxy -n 127.0.0.1:9876 [--grpcServerPort 8081] [--host 0.0.0.0] [-c proxy.conf]

TLS and plaintext share the port (tls.server.mode permissive, RocketMQ's default, with a
self-signed certificate in tls.test.mode.enable); `-c` takes a properties file with RocketMQ's
tls.* keys (tls.server.mode, tls.test.mode.enable, tls.server.certPath, tls.server.keyPath)
and the broker's ACL keys: with aclEnable=true, calls are checked against the plain ACL files
under rocketmqHome (else $ROCKETMQ_HOME: conf/plain_acl.yml and conf/acl/*.yml, reloaded when
they change), and what the proxy asks of the brokers is signed with the caller's account.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import uvloop

from sidewinder.acl.errors import AclConfigError
from sidewinder.acl.plain import PlainAclFiles
from sidewinder.acl.validator import AclValidator
from sidewinder.common.log import configure_logging
from sidewinder.common.properties import read_properties
from sidewinder.common.service import cancel_and_wait, serve_until_signalled
from sidewinder.proxy.auth import acl_checks
from sidewinder.proxy.grpc_server import GrpcFront
from sidewinder.proxy.messaging import MessagingActivity
from sidewinder.remoting.tls import TlsConfig, TlsError

DEFAULT_GRPC_PORT = 8081  # RocketMQ's grpcServerPort


async def serve(
    namesrv: list[str], host: str, port: int, tls: TlsConfig, acl: AclValidator | None
) -> None:
    advertised = "127.0.0.1" if host in ("0.0.0.0", "") else host
    checks = acl_checks(acl) if acl is not None else (None, None)
    activity = MessagingActivity(namesrv, (advertised, port), *checks)
    front = GrpcFront(activity, host, port, tls=tls)
    watching: list[asyncio.Task[None]] = []

    async def start() -> None:
        await front.start()
        if acl is not None:
            watching.append(asyncio.get_running_loop().create_task(acl.watch()))

    async def stop() -> None:
        await cancel_and_wait(watching)
        await front.stop()
        await activity.close()

    await serve_until_signalled(
        start,
        stop,
        lambda: f"The proxy boot success. gRPC port {front.port}, name server {';'.join(namesrv)}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqproxy", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        default=os.environ.get("NAMESRV_ADDR", ""),
        help="name servers, ns1:9876;ns2:9876 (default: $NAMESRV_ADDR)",
    )
    parser.add_argument("--grpcServerPort", dest="port", type=int, default=DEFAULT_GRPC_PORT)
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "-c", "--configFile", dest="config", type=Path, help="tls.* and ACL properties"
    )
    args = parser.parse_args(argv)
    namesrv = [a.strip() for a in args.namesrv.split(";") if a.strip()]
    if not namesrv:
        print("mqproxy: no name server: give -n host:port or set NAMESRV_ADDR", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"mqproxy: grpcServerPort {args.port} is not a port", file=sys.stderr)
        return 2
    try:
        conf = read_properties(args.config) if args.config else {}
        tls = TlsConfig.load(conf)
    except (OSError, TlsError, ValueError) as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        return 2
    configure_logging(daemon=True)
    acl = None
    if conf.get("aclEnable", "false").strip().lower() == "true":
        home = conf.get("rocketmqHome") or os.environ.get("ROCKETMQ_HOME", "")
        if not home:
            print("mqproxy: aclEnable needs rocketmqHome or ROCKETMQ_HOME", file=sys.stderr)
            return 2
        try:
            acl = AclValidator(PlainAclFiles(Path(home)))
        except AclConfigError as exc:
            print(f"mqproxy: {exc}", file=sys.stderr)
            return 2
    try:
        uvloop.run(serve(namesrv, args.host, args.port, tls, acl))
    except TlsError as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
