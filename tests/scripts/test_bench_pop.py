"""The broker-bound bench's POP row: its pop and ack frames are RocketMQ 5's headers, its handles
are the ones RocketMQ 5's client builds (tests/interop/pop_requests.py), and a quick run of the
row against Sidewinder pops and acks with nothing refused (no speed asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

from interop.cache import REPO_ROOT
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import encode_properties
from sidewinder.protocol.pop import (
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
    format_msg_offsets,
    format_start_offsets,
)
from sidewinder.protocol.record import MessageToStore, encode_record
from sidewinder.remoting.codec import decode_frame, encode_json_header
from tests.interop.pop_requests import popped
from tests.scripts.quick_bench import quick_bench

sys.path.insert(0, str(REPO_ROOT / "scripts"))

from bench_broker import ROWS, with_sources
from loadgen import POP_BATCH, POP_INVISIBLE_MS, pop_templates, popped_handles

POP_ROW = next(row for row in ROWS if row.kind == "pop")


def test_pop_frames_carry_a_fresh_born_time_and_the_opaque() -> None:
    templates = pop_templates("T", "g", "broker-a")
    command = decode_frame(templates.pop.render(b"1764280000123", b"1000000042"))
    assert (command.code, command.opaque) == (PopRequestCode.POP_MESSAGE, 1_000_000_042)
    header = PopMessageRequestHeader.from_ext(command.ext_fields)
    assert (header.topic, header.consumer_group, header.queue_id) == ("T", "g", -1)
    assert (header.max_msg_nums, header.invisible_time) == (POP_BATCH, POP_INVISIBLE_MS)
    assert (header.poll_time, header.born_time, header.init_mode) == (0, 1_764_280_000_123, 0)
    assert (header.exp_type, header.exp, header.broker_name) == ("TAG", "*", "broker-a")


def test_ack_frames_carry_the_handle_queue_and_offset() -> None:
    templates = pop_templates("T", "g", "broker-a")
    handle = "3 1764280000000 60000 1 0 broker-a 5 17"
    frame = templates.ack.render(b"T", b"5", handle.encode(), b"17", b"1000000007")
    command = decode_frame(frame)
    assert (command.code, command.opaque) == (PopRequestCode.ACK_MESSAGE, 1_000_000_007)
    header = AckMessageRequestHeader.from_ext(command.ext_fields)
    assert (header.consumer_group, header.topic, header.queue_id) == ("g", "T", 5)
    assert (header.extra_info, header.offset, header.broker_name) == (handle, 17, "broker-a")


def _pop_reply(topic: str, records: list[tuple[int, int, dict[str, str]]]) -> RemotingCommand:
    """A pop's answer holding (queueId, queue offset, properties) records, its offset lists as
    a broker writes them (check point start = each queue's first offset)."""
    body = bytearray(64 << 10)
    at = 0
    starts: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], list[int]] = {}
    for queue_id, offset, props in records:
        message = MessageToStore(
            topic.encode(), queue_id, b"x" * 100, encode_properties(props, trailing=False)
        )
        at += encode_record(
            message, body, at, queue_offset=offset, phy_offset=at, store_timestamp=1
        )
        starts.setdefault(("0", queue_id), offset)
        offsets.setdefault(("0", queue_id), []).append(offset)
    header = PopMessageResponseHeader(
        pop_time=1_764_280_000_000,
        invisible_time=POP_INVISIBLE_MS,
        revive_qid=3,
        rest_num=0,
        start_offset_info=format_start_offsets(starts),
        msg_offset_info=format_msg_offsets(offsets),
    )
    return RemotingCommand.request(0, header.to_ext(), bytes(body[:at]))


def test_handles_are_the_ones_rocketmq5s_client_builds() -> None:
    revived = ExtraInfo(9, 1_764_279_000_000, 60000, 2, "1", "broker-a", 0, 4).encode()
    reply = _pop_reply("T", [(2, 10, {}), (2, 11, {}), (6, 0, {}), (0, 4, {"POP_CK": revived})])
    got = popped_handles(
        pop_templates("T", "g", "broker-a"), encode_json_header(reply), bytes(reply.body or b"")
    )
    expected = [
        (m.extra.real_topic("T", "g"), m.extra.queue_id, m.handle, m.extra.queue_offset)
        for m in popped(reply, "T", "broker-a")
    ]
    assert got == expected
    assert got[0] == ("T", 2, "10 1764280000000 60000 3 0 broker-a 2 10", 10)
    assert got[3] == ("%RETRY%g_T", 0, revived, 4)


def test_picking_the_pop_row_brings_the_produce_row_that_fills_its_topic() -> None:
    feeder = next(r for r in ROWS if r.kind == "produce" and r.topic == POP_ROW.topic)
    assert with_sources([POP_ROW.key]) == (feeder.key, POP_ROW.key)
    assert not POP_ROW.runs_on("rocketmq") and not POP_ROW.runs_on("redis")
    assert POP_ROW.runs_on("sidewinder") and POP_ROW.runs_on("rocketmq5")


def test_quick_pop_row_against_sidewinder_acks_all_it_popped(tmp_path: Path) -> None:
    run = quick_bench(
        tmp_path, "--targets", "sidewinder", "--rows", "pop", "--json", str(tmp_path / "bench.json")
    )
    assert run.rate(POP_ROW.label) > 0, run.table[POP_ROW.label]
    figures = run.figures
    counts = figures["checks"]["sidewinder"]
    assert counts["failed"] == 0
    assert counts["pop_requests"] == counts["pop_answered"] > 0
    assert counts["acked"] == counts["popped"] > 0
    summary = figures["summaries"][POP_ROW.key]["sidewinder"]
    assert summary["messages"] > 0 and summary["p50_ms"] > 0 and summary["p99_ms"] > 0
    assert summary["cpu_per_100k_s"] > 0
    pops = [s for s in figures["slices"] if s["row"] == POP_ROW.key]
    assert pops and all(s["messages"] == s["received"] > 0 for s in pops)
    assert all(s["failed"] == {} for s in pops)
