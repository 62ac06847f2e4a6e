"""kill -9 soak: a broker killed over and over under load from 4 producers; what was lost.

    .venv/bin/python scripts/soak_kill9.py [--cycles 100] [--flush sync|async|both] [--json PATH]

Each cycle lets 4 producer threads (raw SEND_MESSAGE_V2, one queue each, 1 KiB bodies) send to
a real `mqbroker` process for a random 0.3-1.0 s, then SIGKILLs it and starts it again on the
same store. Producers keep going through the outage (a send that fails is not acknowledged).
At the end every acknowledged message is read back by its offsetMsgId and compared byte for
byte, and `mqstore verify` checks the store (CRCs, ConsumeQueues and index against the
CommitLog).

Lost = acknowledged, but missing or different afterwards. Under SYNC_FLUSH it must be 0. Under
ASYNC_FLUSH a kill -9 loses nothing either: the process dies, the page cache holding the
unflushed tail does not. What ASYNC_FLUSH risks (up to flushIntervalCommitLog of messages) is a
crash of the machine, which a process kill does not produce.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interop.sidewinder import SidewinderCluster
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    SendMessageRequestHeader,
    ViewMessageRequestHeader,
)
from sidewinder.protocol.message import decode_offset_msg_id, encode_properties
from sidewinder.protocol.record import decode_record
from sidewinder.remoting.client import SyncRemotingClient
from sidewinder.store.config import StoreConfig
from sidewinder.store.verify import verify_store

TOPIC = "KillNineSoak"
PRODUCERS = 4


@dataclass
class SoakReport:
    flush: str
    cycles: int
    acknowledged: int
    lost: int
    failed_sends: int
    flush_interval_ms: int
    store_records: int
    seconds: float


def _send(client: SyncRemotingClient, addr: str, queue_id: int, body: bytes) -> str | None:
    """One send; its offsetMsgId when acknowledged, None otherwise."""
    header = SendMessageRequestHeader(
        producer_group="SoakProducers",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=PRODUCERS,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=encode_properties({"WAIT": "true"}).decode(),
    )
    request = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, header.to_ext(names=SEND_V2_NAMES), body
    )
    try:
        reply = client.invoke(addr, request, 3)
    except Exception:
        return None  # the broker is down or restarting
    if reply.code != ResponseCode.SUCCESS:
        return None
    return (reply.ext_fields or {}).get("msgId")


def _stored_body(client: SyncRemotingClient, addr: str, msg_id: str) -> bytes | None:
    _, _, offset = decode_offset_msg_id(msg_id)
    request = RemotingCommand.request(
        RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset).to_ext()
    )
    reply = client.invoke(addr, request, 10)
    if reply.code != ResponseCode.SUCCESS or not reply.body:
        return None
    record = decode_record(memoryview(reply.body), 0)
    return bytes(record.body)  # type: ignore[union-attr]


def run_soak(workdir: Path, flush: str, cycles: int, seed: int = 7) -> SoakReport:
    rng = random.Random(seed)
    cluster = SidewinderCluster(workdir, broker_conf={"flushDiskType": flush}).start()
    acked: list[tuple[str, bytes]] = []
    acked_lock = threading.Lock()
    stop = threading.Event()
    failures = [0] * PRODUCERS

    def produce(queue_id: int) -> None:
        client = SyncRemotingClient()
        seq = 0
        try:
            while not stop.is_set():
                body = f"{queue_id}:{seq:09d}:".encode().ljust(1024, b"x")
                msg_id = _send(client, cluster.broker_addr, queue_id, body)
                if msg_id is None:
                    failures[queue_id] += 1
                    time.sleep(0.02)
                    continue
                with acked_lock:
                    acked.append((msg_id, body))
                seq += 1
        finally:
            client.close()

    started = time.monotonic()
    threads = [threading.Thread(target=produce, args=(q,), daemon=True) for q in range(PRODUCERS)]
    try:
        for thread in threads:
            thread.start()
        for _ in range(cycles):
            time.sleep(rng.uniform(0.3, 1.0))
            cluster.kill_broker()
            cluster.start_broker()
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(30)
        client = SyncRemotingClient()
        try:
            lost = sum(
                1
                for msg_id, body in acked
                if _stored_body(client, cluster.broker_addr, msg_id) != body
            )
        finally:
            client.close()
    finally:
        stop.set()
        cluster.stop()
    verified = verify_store(cluster.store_path)
    return SoakReport(
        flush=flush,
        cycles=cycles,
        acknowledged=len(acked),
        lost=lost,
        failed_sends=sum(failures),
        flush_interval_ms=StoreConfig().flush_interval_commit_log,  # the broker runs with it
        store_records=verified.records,
        seconds=round(time.monotonic() - started, 1),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--flush", choices=["sync", "async", "both"], default="both")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    modes = {
        "sync": ["SYNC_FLUSH"],
        "async": ["ASYNC_FLUSH"],
        "both": ["SYNC_FLUSH", "ASYNC_FLUSH"],
    }
    reports = []
    for flush in modes[args.flush]:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            report = run_soak(Path(tmp), flush, args.cycles)
        reports.append(report)
        print(
            f"{report.flush}: {report.cycles} kill -9 cycles in {report.seconds} s, "
            f"{report.acknowledged} acknowledged, {report.lost} lost, "
            f"{report.failed_sends} sends refused or cut off, "
            f"{report.store_records} records in the store (verified)",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=1))
    return 1 if any(r.lost for r in reports if r.flush == "SYNC_FLUSH") else 0


if __name__ == "__main__":
    raise SystemExit(main())
