"""The broker-bound benchmark: its pre-encoded frames are what the Java producer sends, and its
quick mode runs end to end against Sidewinder with every count adding up (no speed asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from interop.cache import REPO_ROOT
from sidewinder.broker.send.body import decode_batch
from sidewinder.protocol.codes import LanguageCode, RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from sidewinder.protocol.message import decode_properties
from sidewinder.remoting.codec import decode_frame
from tests.scripts.quick_bench import quick_bench

sys.path.insert(0, str(REPO_ROOT / "scripts"))

from bench_broker import ROWS, Side, pin
from loadgen import pull_templates, send_templates


def _uniq_key(command: RemotingCommand) -> str:
    header = SendMessageRequestHeader.from_ext(command.ext_fields, names=SEND_V2_NAMES)
    return decode_properties((header.properties or "").encode())["UNIQ_KEY"]


def test_send_frames_patch_opaque_and_uniq_key_into_a_java_style_header() -> None:
    template = send_templates("T", "broker-a", queues=8, body=b"x" * 1024)[3].for_connection(2)
    first = decode_frame(template.render(b"1000000123"))
    assert (first.code, first.language, first.opaque) == (
        RequestCode.SEND_MESSAGE_V2,
        LanguageCode.JAVA,
        1_000_000_123,
    )
    header = SendMessageRequestHeader.from_ext(first.ext_fields, names=SEND_V2_NAMES)
    assert (header.topic, header.queue_id, header.batch, header.broker_name) == (
        "T",
        3,
        False,
        "broker-a",
    )
    props = decode_properties((header.properties or "").encode())
    assert props["WAIT"] == "true" and props["TAGS"] == "TagA"
    assert re.fullmatch(r"[0-9A-F]{32}", props["UNIQ_KEY"])
    assert props["UNIQ_KEY"].endswith("201000000123")  # connection 2, message 0, the opaque
    second = decode_frame(template.render(b"2000000000"))
    assert second.opaque == 2_000_000_000 and first.body == second.body == b"x" * 1024
    assert _uniq_key(second) == props["UNIQ_KEY"][:20] + "202000000000"


def test_batch_frames_carry_one_uniq_key_per_message() -> None:
    (template,) = send_templates("T", "broker-a", queues=1, body=b"y" * 100, batch=16)
    command = decode_frame(template.for_connection(1).render(b"1000000001"))
    assert command.code == RequestCode.SEND_BATCH_MESSAGE
    assert command.ext_fields is not None and command.ext_fields["m"] == "true"
    entries = decode_batch(command.body or b"")
    keys = [decode_properties(props)["UNIQ_KEY"] for _, _, props in entries]
    assert [k[20:] for k in keys] == [f"1{i:X}1000000001" for i in range(16)]


def test_pull_frames_carry_the_offset_and_opaque() -> None:
    templates = pull_templates("T", queues=8)
    command = decode_frame(templates[5].render(123_456, 1_000_000_007))
    header = PullMessageRequestHeader.from_ext(command.ext_fields)
    assert (command.code, command.opaque) == (RequestCode.PULL_MESSAGE, 1_000_000_007)
    assert (header.queue_id, header.queue_offset, header.max_msg_nums) == (5, 123_456, 32)


def test_quick_run_against_sidewinder_adds_up(tmp_path: Path) -> None:
    run = quick_bench(tmp_path, "--targets", "sidewinder", "--json", str(tmp_path / "bench.json"))
    for row in ROWS:
        assert run.rate(row.label) > 0, (row.label, run.table[row.label])
    figures = run.figures
    counts = figures["checks"]["sidewinder"]
    assert counts["requests"] == counts["answered"] > 0
    assert counts["failed"] == 0
    assert counts["pulled"] == counts["produced"] > 0
    for key, by_side in figures["summaries"].items():
        summary = by_side["sidewinder"]
        assert summary["messages"] > 0 and summary["p50_ms"] > 0, key
        assert summary["cpu_per_100k_s"] > 0 and summary["rss_mib"] > 0, key
    assert all(s["own_cpu_s"] > 0 for s in figures["slices"])


def test_pin_moves_every_thread_of_the_broker_and_gives_them_back() -> None:
    # A stand-in broker process with a second thread (a real broker has several).
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); "
            "print('up', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        side = Side("sidewinder", ("127.0.0.1", 1), child.pid, "b", lambda: None)

        def allowed() -> set[str]:
            tasks = Path(f"/proc/{child.pid}/task")
            return {
                line.split(":")[1].strip()
                for task in tasks.iterdir()
                for line in (task / "status").read_text().splitlines()
                if line.startswith("Cpus_allowed_list")
            }

        assert len(list(Path(f"/proc/{child.pid}/task").iterdir())) == 2
        pin(side, "0")
        assert allowed() == {"0"}
        pin(side, "")
        assert allowed() == {f"0-{os.cpu_count() - 1}" if (os.cpu_count() or 1) > 1 else "0"}
    finally:
        child.kill()
        child.wait()


def test_quick_scaling_run_pins_each_broker_in_turn(tmp_path: Path) -> None:
    run = quick_bench(
        tmp_path,
        *("--targets", "sidewinder", "--rows", "consume", "--flush", "async"),
        *("--scaling", "0", "0-1", "--json", str(tmp_path / "bench.json")),
    )
    assert "## Scaling" in run.proc.stdout
    for key in ("produce", "consume"):  # consume brings the produce row that fills its topic
        (label,) = [row.label for row in ROWS if row.key == key]
        cells = run.table[label]
        assert cells[0] == "Sidewinder"
        assert all(float(cell.split(" ")[0].replace(",", "")) > 0 for cell in cells[1:3]), cells
        pins = [s["cpus"] for s in run.figures["slices"] if s["row"] == key]
        assert pins.count("0") == pins.count("0-1") == 2, pins
    counts = run.figures["checks"]["sidewinder"]
    assert counts["requests"] == counts["answered"] > 0 and counts["failed"] == 0
    assert counts["pulled"] == counts["produced"]
