"""The PULL_MESSAGE path in one process, no sockets: request in, encoded frame out.

    .venv/bin/python scripts/bench_pull.py [--messages 200000] [--seconds 3] [--profile]
    .venv/bin/python scripts/bench_pull.py --path lane    # the pull lane (pull_lane.py) instead

A broker's components (BrokerApp, servers not started) over a fresh store holding `--messages`
1 KiB messages spread over 8 queues, written interleaved as the bench's producers write them;
pulls of 32 as the broker-bound bench's generator sends them (subscription "*" in the request)
go through PullProcessor.process and encode_command, queue after queue, for `--seconds`.
Prints µs per pull and per message: the broker's CPU for a pull, without the network's share.
`--profile` prints cProfile's top functions instead of timing. `--path lane` serves each pull
as the connection would, through the pull lane's `take_frames` with the request's frame (the
reply frames written to a sink), instead of PullProcessor.process and encode_command.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.processors.pull_lane import PullLane
from sidewinder.broker.topics import TopicConfig
from sidewinder.common.log import configure_logging
from sidewinder.protocol.codes import RequestCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import PullMessageRequestHeader
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import Host, MessageToStore
from sidewinder.remoting.codec import RawFrame, decode_frame, encode_command, encode_frame
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.config import StoreConfig

TOPIC, GROUP, QUEUES, BATCH = "BenchPull", "BenchPullGroup", 8, 32
HOST = Host(b"\x7f\x00\x00\x01", 10911)


def request_fields(queue: int) -> dict[str, str]:
    """extFields as the broker decodes them from the generator's request."""
    header = PullMessageRequestHeader(
        GROUP, TOPIC, queue, 0, BATCH, 0x4, 0, 0, 0, subscription="*", expression_type="TAG"
    )
    frame = encode_frame(RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()))
    ext = decode_frame(frame).ext_fields
    assert ext is not None
    return ext


def request(fields: dict[str, str], offset: int) -> RemotingCommand:
    ext = dict(fields)
    ext["queueOffset"] = str(offset)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


async def filled_broker(root: Path, messages: int) -> BrokerApp:
    store = StoreConfig(store_path_root_dir=root, store_path_commit_log=root / "commitlog")
    app = BrokerApp(BrokerConfig(store=store))
    await app.store.start()
    app.topics.upsert(TopicConfig(TOPIC, QUEUES, QUEUES, 6))
    body = b"x" * 1024
    for n in range(messages):
        queue = n % QUEUES
        props = encode_properties({"UNIQ_KEY": f"{n:032X}", "WAIT": "false"})
        message = MessageToStore(
            topic=TOPIC.encode(),
            queue_id=queue,
            body=body,
            properties=props,
            born_host=HOST,
            store_host=HOST,
        )
        await app.store.put_message(message)
    for _ in range(3000):
        if all(app.store.max_offset_in_queue(TOPIC, q) * QUEUES >= messages for q in range(QUEUES)):
            break
        await asyncio.sleep(0.01)
    return app


async def pulls(app: BrokerApp, seconds: float) -> tuple[int, int, float]:
    pull = app_pull(app)
    ends = [app.store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
    count = done = 0
    offsets = [0] * QUEUES
    started = time.perf_counter()
    deadline = started + seconds
    fields = [request_fields(q) for q in range(QUEUES)]
    queue = 0
    while time.perf_counter() < deadline:
        if offsets[queue] >= ends[queue]:
            offsets[queue] = 0
        reply = await pull.process(None, request(fields[queue], offsets[queue]))  # type: ignore[arg-type]
        assert reply is not None and reply.code == 0, reply
        frame = encode_command(reply)
        count += len(frame) and int(reply.ext_fields["nextBeginOffset"]) - offsets[queue]
        offsets[queue] = int(reply.ext_fields["nextBeginOffset"])
        done += 1
        queue = (queue + 1) % QUEUES
    return done, count, time.perf_counter() - started


class _Sink:
    """Stands for the connection: keeps the reply frames the lane writes."""

    remote_address = "127.0.0.1:1"

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send_frames(self, frames: list[bytes]) -> None:
        self.frames = frames


_NEXT_BEGIN = re.compile(rb'"nextBeginOffset":"(\d+)"')


async def lane_pulls(app: BrokerApp, seconds: float) -> tuple[int, int, float]:
    (lane,) = [t for t in app.server.table.frame_takers() if isinstance(t, PullLane)]
    sink = _Sink()
    ctx = RequestContext(sink)  # type: ignore[arg-type]
    ends = [app.store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
    # Each queue's request header around its offset, encoded once (as the generator does).
    templates = [
        encode_frame(request(request_fields(q), 987654321))[8:].split(b"987654321")
        for q in range(QUEUES)
    ]
    count = done = 0
    offsets = [0] * QUEUES
    started = time.perf_counter()
    deadline = started + seconds
    queue = 0
    while time.perf_counter() < deadline:
        if offsets[queue] >= ends[queue]:
            offsets[queue] = 0
        head, tail = templates[queue]
        header = b"%s%d%s" % (head, offsets[queue], tail)
        left = lane.take_frames(ctx, [RawFrame(SerializeType.JSON, header, None)])
        assert not left and sink.frames, "the lane left a pull"
        found = _NEXT_BEGIN.search(sink.frames[0])
        assert found is not None and sink.frames[0][8:18] == b'{"code":0,', sink.frames[0][:200]
        next_begin = int(found.group(1))
        count += next_begin - offsets[queue]
        offsets[queue] = next_begin
        done += 1
        queue = (queue + 1) % QUEUES
    return done, count, time.perf_counter() - started


def app_pull(app: BrokerApp) -> Any:
    routes = app.server.table
    return routes._pools[int(RequestCode.PULL_MESSAGE)].processor


async def main_async(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    try:
        app = await filled_broker(root, args.messages)
        run = lane_pulls if args.path == "lane" else pulls
        await run(app, 0.5)  # warm
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await run(app, args.seconds)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        else:
            done, count, elapsed = await run(app, args.seconds)
            print(
                f"{done / elapsed:,.0f} pulls/s, {count / elapsed:,.0f} msg/s, "
                f"{1e6 * elapsed / done:.1f} µs/pull, {1e6 * elapsed / count:.2f} µs/msg"
            )
        await app.store.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--path", choices=["generic", "lane"], default="generic")
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
