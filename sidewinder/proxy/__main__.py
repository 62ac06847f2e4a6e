"""mqproxy: RocketMQ 5's gRPC front (apache.rocketmq.v2.MessagingService) in cluster mode, for
RocketMQ 5's clients. It finds brokers through the name servers and speaks remoting to them,
Sidewinder's or RocketMQ's alike; several may run. Stops on SIGTERM / SIGINT.

    mqproxy -n 127.0.0.1:9876 [--grpcServerPort 8081] [--host 0.0.0.0]
"""

from __future__ import annotations

import argparse
import os
import sys

import uvloop

from sidewinder.common.log import configure_logging
from sidewinder.common.service import serve_until_signalled
from sidewinder.proxy.grpc_server import GrpcFront
from sidewinder.proxy.messaging import MessagingActivity

DEFAULT_GRPC_PORT = 8081  # RocketMQ's grpcServerPort


async def serve(namesrv: list[str], host: str, port: int) -> None:
    advertised = "127.0.0.1" if host in ("0.0.0.0", "") else host
    activity = MessagingActivity(namesrv, (advertised, port))
    front = GrpcFront(activity, host, port)

    async def stop() -> None:
        await front.stop()
        await activity.close()

    await serve_until_signalled(
        front.start,
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
    args = parser.parse_args(argv)
    namesrv = [a.strip() for a in args.namesrv.split(";") if a.strip()]
    if not namesrv:
        print("mqproxy: no name server: give -n host:port or set NAMESRV_ADDR", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"mqproxy: grpcServerPort {args.port} is not a port", file=sys.stderr)
        return 2
    configure_logging(daemon=True)
    try:
        uvloop.run(serve(namesrv, args.host, args.port))
    except OSError as exc:
        print(f"mqproxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
