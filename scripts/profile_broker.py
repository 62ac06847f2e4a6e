"""Load one broker with one row of the broker-bound bench, and optionally profile it with py-spy.

    .venv/bin/python scripts/profile_broker.py --row produce --seconds 10
    .venv/bin/python scripts/profile_broker.py --row produce --py-spy /tmp/tools/bin/py-spy

The broker is started fresh (as scripts/bench_broker.py starts it), loaded by the lean generator
for one uncounted warm slice and then `--slices` counted ones; each slice prints msg/s, ack p50
and the broker's CPU-microseconds per message. With `--py-spy`, py-spy samples the broker (and
its threads) during the counted slices, and the top functions by own time and by time
including callees are printed: profile before optimising. The broker's CPU by thread (from
/proc, over the counted slices) is printed too: threads that run no Python (grpcio's own, the
Rust syncer) are invisible to py-spy's Python frames. The gRPC rows (`--row grpc-produce`) load
the broker's own gRPC front. py-spy lives in a tools venv of its
own (`python -m venv /tmp/tools && /tmp/tools/bin/pip install py-spy`), not in the project's.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_broker as bb

_LINE = re.compile(r":\d+\)$")  # py-spy names a frame by its line: count by function


def top_functions(raw: str, limit: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(own, inclusive) shares from py-spy's collapsed stacks, the largest first."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [
            _LINE.sub(")", f)
            for f in stack.split(";")
            if f and not f.startswith(("process ", "thread "))
        ]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return [], []

    def shares(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(name, 100 * n / total) for name, n in counter.most_common(limit)]

    return shares(own), shares(inclusive)


_MODULE = re.compile(r"\((sidewinder/[^:)]+)")


def by_module(raw: str, limit: int) -> list[tuple[str, float]]:
    """Shares by the deepest frame of ours in each sample: which of our modules the time was
    spent under (its callees in libraries included; a process's entry module does not count);
    samples with no frame of ours go by their innermost frame: C code that the event loop runs
    shows as Runner.run, a thread's (grpcio's poller) as Thread.run, the store's executors'
    native calls as _worker."""
    parts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        ours = next(
            (
                m.group(1)
                for f in reversed(frames)
                if (m := _MODULE.search(f)) and not m.group(1).endswith("__main__.py")
            ),
            None,
        )
        parts[ours or "no frame of ours: " + _LINE.sub(")", frames[-1])] += int(count_text)
    total = sum(parts.values())
    return [(name, 100 * n / total) for name, n in parts.most_common(limit)] if total else []


def thread_ticks(pid: int) -> collections.Counter[str]:
    """CPU clock ticks (user + system) of each of a process's threads so far, by name."""
    found: collections.Counter[str] = collections.Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        found[name] += int(fields[11]) + int(fields[12])  # utime, stime
    return found


def start_spy(py_spy: Path, pid: int, raw: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(str(py_spy), "record", "--pid", str(pid), "--threads"),
            *("--nonblocking", "--format", "raw", "--rate", "250", "-o", str(raw)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_spy(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(2)  # py-spy and perf write their files on SIGINT
    spy.wait(30)


def start_perf(perf: str, pid: int, data: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [perf, "record", "-F", "999", "-p", str(pid), "-o", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


_PERF_LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$")


def perf_symbols(perf: str, files: list[Path]) -> collections.Counter[str]:
    """Each symbol's share of the samples (kernel ones marked [k]), averaged over `files`."""
    shares: collections.Counter[str] = collections.Counter()
    for data in files:
        report = subprocess.run(
            [perf, "report", "-i", str(data), "--no-children", "--sort", "dso,sym", "--stdio"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for line in report.splitlines():
            found = _PERF_LINE.match(line)
            if found:
                share, dso, kind, symbol = found.groups()
                shares[f"[{kind}] {symbol} ({Path(dso).name})"] += float(share) / len(files)
    return shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--row", choices=[r.key for r in bb.ROWS], default="produce")
    parser.add_argument("--side", choices=["sidewinder", "rocketmq"], default="sidewinder")
    parser.add_argument("--seconds", type=float, default=5.0, help="per slice")
    parser.add_argument("--slices", type=int, default=2, help="counted slices")
    parser.add_argument("--py-spy", type=Path, default=None, help="path of a py-spy binary")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--perf",
        default=None,
        help="path of perf: the broker's time by native symbol, the kernel's included "
        "(what py-spy cannot see: socket writes, copies, the Rust extension)",
    )
    args = parser.parse_args(argv)
    row = next(r for r in bb.ROWS if r.key == args.row)
    plan = bb.Plan(slice_s=args.seconds, rounds=args.slices, warm_passes=1, sides=(args.side,))
    root = Path(tempfile.mkdtemp(prefix="profile-broker-"))
    side = bb.start_side(args.side, row.flush, root, grpc=row.grpc, proxy=row.proxy)
    threads: collections.Counter[str] = collections.Counter()
    spy: subprocess.Popen[bytes] | None = None
    perf: subprocess.Popen[bytes] | None = None
    symbols: collections.Counter[str] = collections.Counter()
    try:
        feeder = next((r for r in bb.ROWS if r.topic == row.topic and r.kind == "produce"), row)
        passes = 1 + args.slices
        for pass_no in range(passes):
            if row.kind in ("pull", "pop") and feeder is not row:
                bb.run_slice(side, feeder, plan, pass_no)  # something to pull or pop
            if pass_no >= 1 and args.py_spy is not None:
                # Only around the measured row: a pull or pop row's feeding produce stays out.
                spy = start_spy(args.py_spy, side.broker_pid, root / f"py-spy-{pass_no}.txt")
            if pass_no >= 1 and args.perf is not None:
                perf = start_perf(args.perf, side.broker_pid, root / f"perf-{pass_no}.data")
            before = thread_ticks(side.broker_pid)
            done = bb.run_slice(side, row, plan, pass_no)
            if pass_no >= 1:
                threads.update(thread_ticks(side.broker_pid))
                threads.subtract(before)
            if spy is not None:
                stop_spy(spy)
                spy = None
            if perf is not None:
                stop_spy(perf)
                perf = None
            cpu_us = 1e6 * done.broker_cpu_s / done.messages if done.messages else 0.0
            p50 = f"{done.p50_ms:.2f}" if done.p50_ms is not None else "-"
            print(
                f"{'warm ' if done.warm else ''}slice {pass_no}: {done.per_second:,.0f} msg/s, "
                f"p50 {p50} ms, broker {done.broker_cpu_s / done.seconds:.2f} cores, "
                f"{cpu_us:.1f} µs CPU/msg, generator {done.own_cores:.2f} cores, "
                f"failed {done.failed or 0}",
                flush=True,
            )
    finally:
        for running in (spy, perf):
            if running is not None:
                stop_spy(running)
        side.stop()
        if args.perf is not None:
            symbols = perf_symbols(args.perf, sorted(root.glob("perf-*.data")))
        collapsed = "\n".join(p.read_text() for p in sorted(root.glob("py-spy-*.txt")))
        # The stores take gigabytes (1 GiB CommitLog files): a run must not leave them behind.
        shutil.rmtree(root, ignore_errors=True)
    total = sum(threads.values())
    if total > 0:
        print("\nbroker CPU by thread (counted slices):")
        for name, ticks in threads.most_common(args.top):
            cpu_s = ticks / os.sysconf("SC_CLK_TCK")
            print(f"  {100 * ticks / total:5.1f}%  {cpu_s:7.2f} s  {name}")
    if symbols:
        print("\nnative symbols (perf, own time):")
        for name, share in symbols.most_common(args.top):
            print(f"  {share:5.1f}%  {name}")
    if collapsed:
        own, inclusive = top_functions(collapsed, args.top)
        print("\nown time:")
        for name, share in own:
            print(f"  {share:5.1f}%  {name}")
        print("\nincluding callees:")
        for name, share in inclusive:
            print(f"  {share:5.1f}%  {name}")
        print("\nby our innermost module:")
        for name, share in by_module(collapsed, args.top):
            print(f"  {share:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
