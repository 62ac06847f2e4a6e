"""Store benchmark: Sidewinder's MessageStore beside raw loops measured in the same run.

    .venv/bin/python scripts/bench_store.py [--seconds 5] [--recovery-mib 1024] [--json PATH]
    .venv/bin/python scripts/bench_store.py --only dispatch [--dispatch-records 200000]

- put, ASYNC_FLUSH: 64 concurrent putters of 1 KiB messages, puts/s and MB/s, against a raw loop
  that copies the same pre-encoded records into an mmap (the ceiling for an in-process append);
- put, SYNC_FLUSH: the same with group commit, against raw append + fdatasync per 64 records;
- reads: get_messages of 32 at a time over what was written (messages/s);
- recovery: CommitLog.recover (CRC checked) over `--recovery-mib` of 1 KiB records, MB/s;
- dispatch: reput over `--dispatch-records` records shaped like a Java producer's sends (1 KiB
  body; UNIQ_KEY, CLUSTER, TAGS, and KEYS on every fourth), into ConsumeQueues only and into
  ConsumeQueues and the index, in rounds of 4096 and of 64 records: records/s and CPU µs per
  record (the dispatch thread's cost; CPU time, as this machine is shared).

Ratios are what to read: this machine is noisy, so only figures from the same run compare.
Everything runs in a temp dir that is removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidewinder.common.log import configure_logging
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.record import Host, MessageToStore, encode_record
from sidewinder.store.commit_log import CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.consume_queue import ConsumeQueueTable
from sidewinder.store.dispatchers import parse_delay_levels, store_dispatchers
from sidewinder.store.index_service import IndexService
from sidewinder.store.message_store import MessageStore, PutStatus
from sidewinder.store.reput import Reput

HOST = Host(b"\x7f\x00\x00\x01", 10911)
BODY = 1024
PUTTERS = 64
SEGMENT = 1 << 30


def sample(n: int, queue: int) -> MessageToStore:
    props = encode_properties({"KEYS": f"k-{n}", "TAGS": "TagA", "UNIQ_KEY": f"{n:032X}"})
    return MessageToStore(
        topic=b"Bench",
        queue_id=queue,
        body=bytes(BODY),
        properties=props,
        born_host=HOST,
        store_host=HOST,
    )


def encoded_record() -> bytes:
    message = sample(0, 0)
    buf = bytearray(message.size())
    encode_record(message, buf, 0, queue_offset=0, phy_offset=0, store_timestamp=0)
    return bytes(buf)


def raw_append(directory: Path, seconds: float, *, sync_every: int = 0) -> dict[str, float]:
    """Copy one pre-encoded record into an mmap again and again (fdatasync every N if set)."""
    record = encoded_record()
    path = directory / "raw"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, SEGMENT)
    mm = mmap.mmap(fd, SEGMENT)
    count, position = 0, 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline and position + len(record) < SEGMENT:
        mm[position : position + len(record)] = record
        position += len(record)
        count += 1
        if sync_every and count % sync_every == 0:
            os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    mm.close()
    os.close(fd)
    path.unlink()
    return {"ops": count / elapsed, "mb": position / elapsed / 1e6}


def config(root: Path, flush: str, **options: Any) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        store_path_commit_log=root / "commitlog",
        mapped_file_size_commit_log=SEGMENT,
        flush_disk_type=flush,
        max_hash_slot_num=500_000,
        max_index_num=2_000_000,
        **options,
    )


async def store_puts(root: Path, flush: str, seconds: float, **options: Any) -> dict[str, Any]:
    store = MessageStore(config(root, flush, **options), store_host=HOST)
    await store.start()
    # A broker that has run a while has its next segment made (and warmed, if asked) ahead of
    # need; start from there rather than from the very first segment's creation.
    await asyncio.get_running_loop().run_in_executor(None, store._commit_log.files.wait_prepared)
    messages = [sample(n, n % 8) for n in range(PUTTERS)]
    done = failed = 0
    deadline = time.perf_counter() + seconds

    async def putter(message: MessageToStore) -> None:
        nonlocal done, failed
        while time.perf_counter() < deadline:
            result = await store.put_message(message)
            if result.status is PutStatus.PUT_OK:
                done += 1
            else:
                failed += 1

    started = time.perf_counter()
    await asyncio.gather(*(putter(m) for m in messages))
    elapsed = time.perf_counter() - started
    size = messages[0].size()
    flushes = (
        store._group_commit.flushes
        if flush == "SYNC_FLUSH"
        else store._flushes.periodic_flush.flushes
    )
    if store._parts.pool is not None:  # the pool's commits must keep up before reads see the data
        await asyncio.get_running_loop().run_in_executor(None, store._commit_log.commit)
    reads = await store_reads(store, seconds)
    await store.shutdown()
    return {
        "ops": done / elapsed,
        "mb": done * size / elapsed / 1e6,
        "failed": failed,
        "flushes": flushes,
        "reads": reads,
    }


async def store_reads(store: MessageStore, seconds: float) -> float:
    for _ in range(500):  # let dispatch catch up before reading
        if store.dispatch_behind_bytes == 0:
            break
        await asyncio.sleep(0.01)
    read = 0
    started = time.perf_counter()
    deadline = started + seconds
    queue, offset = 0, 0
    while time.perf_counter() < deadline:
        got = store.get_messages("Bench", queue, offset, 32)
        read += len(got.messages)
        offset = got.next_begin_offset
        if offset >= got.max_offset:
            queue, offset = (queue + 1) % 8, 0
    return read / (time.perf_counter() - started)


def recovery(root: Path, mib: int) -> dict[str, float]:
    log = CommitLog(
        root / "recovery", segment_size=SEGMENT, max_message_size=4 << 20, store_host=HOST
    )
    log.load()
    message = sample(0, 0)
    target = mib << 20
    while log.max_offset < target:
        log.put(message)
    log.flush()
    log.close()
    again = CommitLog(
        root / "recovery", segment_size=SEGMENT, max_message_size=4 << 20, store_host=HOST
    )
    again.load()
    started = time.perf_counter()
    end = again.recover(check_crc=True)
    elapsed = time.perf_counter() - started
    again.close()
    return {"mb_per_s": end / elapsed / 1e6, "seconds": elapsed, "bytes": end}


def producer_like(n: int) -> MessageToStore:
    """What a Java producer's send becomes: UNIQ_KEY (32 hex), the broker's CLUSTER, TAGS, and
    KEYS on every fourth message, spread over 4 topics of 8 queues."""
    props = {"UNIQ_KEY": f"7F0000010C5818B4AAC2{n:012X}", "CLUSTER": "DefaultCluster"}
    if n % 4 == 0:
        props["KEYS"] = f"order-{n}"
    props["TAGS"] = ("TagA", "TagB", "TagC")[n % 3]
    return MessageToStore(
        topic=f"BenchTopic{n % 4}".encode(),
        queue_id=n // 4 % 8,
        body=bytes(BODY),
        properties=encode_properties(props, trailing=False),
        born_host=HOST,
        store_host=HOST,
    )


# Records per reput round: as many as DISPATCH_BATCH allows (recovery, a backlog), and about
# what a broker taking ~60k msg/s gathers in one 1 ms dispatch pause.
DISPATCH_ROUNDS = (4096, 64)


def dispatch(root: Path, records: int, attempts: int = 3) -> dict[str, Any]:
    """Reput of `records` records into fresh queues (and index), in rounds of each size of
    DISPATCH_ROUNDS: CPU time (the machine is shared; dispatch is one thread), best of 3."""
    log = CommitLog(
        root / "commitlog", segment_size=SEGMENT, max_message_size=4 << 20, store_host=HOST
    )
    log.load()
    for n in range(records):
        log.put(producer_like(n), now_ms=1_700_000_000_000 + n // 100)
    results: dict[str, Any] = {}
    for round_size in DISPATCH_ROUNDS:
        for label, with_index in (("cq", False), ("cq_index", True)):
            best = float("inf")
            for attempt in range(attempts):
                out = root / f"{label}-{attempt}"
                queues = ConsumeQueueTable(out / "consumequeue", 300_000 * 20)
                index = IndexService(out / "index", 5_000_000, 20_000_000) if with_index else None
                if index is not None:
                    index.load()
                levels = parse_delay_levels("1s 5s 10s")
                reput = Reput(log, store_dispatchers(queues, index, levels))
                started = time.process_time()
                while reput.offset < log.max_offset:
                    reput.dispatch_until(log.max_offset, round_size)
                best = min(best, time.process_time() - started)
                assert reput.dispatched == records
                queues.close()
                if index is not None:
                    index.close()
                shutil.rmtree(out)
            results[f"{label}_{round_size}"] = {
                "records_per_s": records / best,
                "us_per_record": best / records * 1e6,
            }
    log.close()
    return results


def print_dispatch(d: dict[str, Any], records: int) -> None:
    print(f"dispatch (reput) of {records:,} producer-like records, CPU time, best of 3")
    print("| measure | records/s | µs per record |\n|---|---|---|")
    for size in DISPATCH_ROUNDS:
        for key, label in (("cq", "ConsumeQueue only"), ("cq_index", "ConsumeQueue + index")):
            v = d[f"{key}_{size}"]
            print(
                f"| {label}, rounds of {size} | {v['records_per_s']:,.0f} "
                f"| {v['us_per_record']:.2f} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--recovery-mib", type=int, default=256)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", choices=["dispatch"], help="run just this benchmark")
    parser.add_argument("--dispatch-records", type=int, default=200_000)
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    work = Path(tempfile.mkdtemp(prefix="bench-store-"))
    results: dict[str, Any] = {}
    if args.only == "dispatch":
        try:
            results["dispatch"] = dispatch(work, args.dispatch_records)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print_dispatch(results["dispatch"], args.dispatch_records)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        return 0
    try:
        results["raw_append"] = raw_append(work, args.seconds)
        results["raw_append_sync"] = raw_append(work, args.seconds, sync_every=PUTTERS)
        results["async"] = uvloop.run(store_puts(work / "async", "ASYNC_FLUSH", args.seconds))
        results["sync"] = uvloop.run(store_puts(work / "sync", "SYNC_FLUSH", args.seconds))
        results["async_warm"] = uvloop.run(
            store_puts(work / "warm", "ASYNC_FLUSH", args.seconds, warm_maped_file_enable=True)
        )
        results["async_pool"] = uvloop.run(
            store_puts(
                work / "pool",
                "ASYNC_FLUSH",
                args.seconds,
                transient_store_pool_enable=True,
                transient_store_pool_size=2,
            )
        )
        results["recovery"] = recovery(work, args.recovery_mib)
        results["dispatch"] = dispatch(work / "dispatch", args.dispatch_records)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a, s, raw, raw_sync = (
        results["async"],
        results["sync"],
        results["raw_append"],
        results["raw_append_sync"],
    )
    print(f"store benchmark: 1 KiB bodies, {PUTTERS} concurrent putters, {args.seconds:g} s each")
    print("| measure | Sidewinder | raw loop | ratio |\n|---|---|---|---|")
    print(
        f"| ASYNC_FLUSH puts/s | {a['ops']:,.0f} ({a['mb']:.1f} MB/s) | "
        f"{raw['ops']:,.0f} ({raw['mb']:.1f} MB/s) | {a['ops'] / raw['ops']:.1%} |"
    )
    for key, label in (
        ("async_warm", "ASYNC_FLUSH + warmMapedFileEnable"),
        ("async_pool", "ASYNC_FLUSH + transientStorePoolEnable"),
    ):
        v = results[key]
        print(
            f"| {label} puts/s | {v['ops']:,.0f} ({v['mb']:.1f} MB/s) | "
            f"{raw['ops']:,.0f} | {v['ops'] / raw['ops']:.1%} |"
        )
    print(
        f"| SYNC_FLUSH puts/s | {s['ops']:,.0f} ({s['mb']:.1f} MB/s, {s['flushes']} fdatasyncs) "
        f"| {raw_sync['ops']:,.0f} ({raw_sync['mb']:.1f} MB/s) "
        f"| {s['ops'] / raw_sync['ops']:.1%} |"
    )
    print(f"| reads/s (get_messages, 32 a call) | {a['reads']:,.0f} | | |")
    r = results["recovery"]
    print(
        f"| recovery of {r['bytes'] / 2**20:,.0f} MiB | {r['mb_per_s']:,.0f} MB/s "
        f"({r['seconds']:.2f} s) | target 500 MB/s | {r['mb_per_s'] / 500:.1%} |"
    )
    print_dispatch(results["dispatch"], args.dispatch_records)
    if a["failed"] or s["failed"]:
        print(f"failed puts: async {a['failed']}, sync {s['failed']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
