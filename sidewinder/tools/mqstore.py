"""`mqstore`: look inside a RocketMQ-format store directory without a broker.

    mqstore verify STORE_DIR [-c broker.conf]       # exit 1 and the first bad offset on damage
    mqstore print STORE_DIR [--topic T] [--queue Q] [--from N] [--to N] [--limit N] [--cq]

`print` writes JSON lines: CommitLog records (by physical offset range), or with `--cq` the
ConsumeQueue entries of `--topic`/`--queue` (by queue offset range).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sidewinder.common.log import configure_logging
from sidewinder.common.properties import read_properties
from sidewinder.protocol.record import MessageRecord
from sidewinder.store.config import ConfigError, StoreConfig
from sidewinder.store.consume_queue import read_queue
from sidewinder.store.verify import StoreProblem, iter_records, verify_store


def store_config(root: Path, conf: Path | None) -> StoreConfig:
    values: dict[str, Any] = read_properties(conf) if conf else {}
    values["storePathRootDir"] = str(root)
    # Without a broker.conf, look for the CommitLog inside the given directory.
    values.setdefault("storePathCommitLog", str(root / "commitlog"))
    return StoreConfig.from_properties(values)


def record_json(record: MessageRecord) -> dict[str, Any]:
    return {
        "phyOffset": record.phy_offset,
        "size": record.total_size,
        "topic": record.topic,
        "queueId": record.queue_id,
        "queueOffset": record.queue_offset,
        "sysFlag": record.sys_flag,
        "flag": record.flag,
        "bodyCrc": record.body_crc,
        "bodyLen": len(record.body),
        "bornTimestamp": record.born_timestamp,
        "bornHost": str(record.born_host),
        "storeTimestamp": record.store_timestamp,
        "storeHost": str(record.store_host),
        "reconsumeTimes": record.reconsume_times,
        "preparedTransactionOffset": record.prepared_transaction_offset,
        "properties": record.properties(),
    }


def selected_records(config: StoreConfig, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    for _, record in iter_records(config.store_path_commit_log, check_crc=False):
        if record.phy_offset < args.from_offset:
            continue
        if args.to_offset is not None and record.phy_offset >= args.to_offset:
            return
        if args.topic and record.topic != args.topic:
            continue
        if args.queue is not None and record.queue_id != args.queue:
            continue
        yield record_json(record)


def selected_cq_entries(config: StoreConfig, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    if not args.topic or args.queue is None:
        raise SystemExit("mqstore print --cq needs --topic and --queue")
    queue_dir = config.store_path_root_dir / "consumequeue" / args.topic / str(args.queue)
    if not queue_dir.is_dir():
        raise SystemExit(f"mqstore: no consume queue {queue_dir}")
    for entry in read_queue(queue_dir):
        if entry.queue_offset < args.from_offset:
            continue
        if args.to_offset is not None and entry.queue_offset >= args.to_offset:
            return
        yield {
            "queueOffset": entry.queue_offset,
            "phyOffset": entry.phy_offset,
            "size": entry.size,
            "tagsCode": entry.tags_code,
            "blank": entry.is_blank,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mqstore", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check records, consume queues and index files")
    show = commands.add_parser("print", help="records or consume-queue entries as JSON lines")
    for sub in (verify, show):
        sub.add_argument("store", type=Path, help="the store root (storePathRootDir)")
        sub.add_argument("-c", "--conf", type=Path, help="broker.conf (segment and index sizes)")
    show.add_argument("--cq", action="store_true", help="ConsumeQueue entries, not records")
    show.add_argument("--topic")
    show.add_argument("--queue", type=int)
    show.add_argument("--from", dest="from_offset", type=int, default=0)
    show.add_argument("--to", dest="to_offset", type=int, default=None)
    show.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    configure_logging()
    try:
        config = store_config(args.store, args.conf)
        if args.command == "verify":
            report = verify_store(args.store, config)
            print(json.dumps({"ok": True, **report.__dict__}, sort_keys=True))
            return 0
        rows = selected_cq_entries(config, args) if args.cq else selected_records(config, args)
        for n, row in enumerate(rows):
            if args.limit is not None and n >= args.limit:
                break
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        return 0
    except StoreProblem as exc:
        print(
            json.dumps(
                {"ok": False, "path": str(exc.path), "offset": exc.offset, "problem": str(exc)}
            ),
            flush=True,
        )
        print(f"mqstore: {exc}", file=sys.stderr)
        return 1
    except (ConfigError, OSError, ValueError) as exc:
        print(f"mqstore: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
