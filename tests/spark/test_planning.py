"""Offsets as Spark keeps them in checkpoints, and how ranges are split and rate-limited: pure
functions, no broker or Spark needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.client.route_cache import MessageQueue
from sidewinder.spark.options import OptionError, ReadOptions
from sidewinder.spark.planning import limit_rows, offsets_from_json, offsets_json, split_ranges
from tests.tls_certs import make_certs

queues = st.builds(
    MessageQueue,
    st.sampled_from(["Orders", "Refunds", "T-1"]),
    st.sampled_from(["broker-a", "broker-b", "broker:c"]),
    st.integers(0, 15),
)
offset_tables = st.dictionaries(queues, st.integers(0, 2**62), max_size=20)


@given(offset_tables)
def test_offsets_json_round_trips_through_the_checkpoint_text(offsets) -> None:
    """Spark stores json.dumps(offsets) and hands back json.loads of it: the same dict, the
    same text, and sorted keys whatever order the queues came in."""
    table = offsets_json(offsets)
    text = json.dumps(table)
    assert offsets_from_json(json.loads(text)) == offsets
    assert json.dumps(offsets_json(dict(reversed(list(offsets.items()))))) == text
    for topic, per_queue in table.items():
        assert list(per_queue) == sorted(
            per_queue, key=lambda k: (k.rpartition(":")[0], int(k.rpartition(":")[2]))
        ), topic


def test_split_ranges_cover_each_range_once() -> None:
    a, b = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
    ranges = split_ranges({a: 5, b: 7}, {a: 15, b: 7}, 4)
    assert ranges == [(a, 5, 9), (a, 9, 13), (a, 13, 15)]  # b is empty: no task


@given(
    st.dictionaries(
        st.integers(0, 30).map(lambda n: MessageQueue("T", "b", n)),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        min_size=1,
    ),
    st.integers(1, 500),
)
def test_limit_rows_shares_by_backlog_without_starving_a_queue(table, max_rows) -> None:
    starts = {q: start for q, (start, _) in table.items()}
    latest = {q: start + backlog for q, (start, backlog) in table.items()}
    ends = limit_rows(starts, latest, max_rows)
    assert all(starts[q] <= ends[q] <= latest[q] for q in table)
    waiting = [q for q in table if latest[q] > starts[q]]
    total = sum(latest[q] - starts[q] for q in table)
    taken = sum(ends[q] - starts[q] for q in table)
    if total <= max_rows:
        assert ends == latest
    else:
        assert all(ends[q] > starts[q] for q in waiting)  # nobody starves
        assert taken <= max(max_rows, len(waiting))


def test_option_keys_are_case_insensitive_and_stream_only_checks_wait() -> None:
    parsed = ReadOptions.parse(
        {"NAMESRVADDR": "127.0.0.1:9876", "Subscribe": "A, B", "startingoffsets": "latest"},
        stream=None,
    )
    assert parsed.topics == ("A", "B") and parsed.starting.kind == "latest"
    with pytest.raises(OptionError, match="option startingOffsets"):
        ReadOptions.parse(
            {"namesrvAddr": "x", "subscribe": "A", "startingOffsets": "latest"}, stream=False
        )


def test_tls_options(tmp_path: Path) -> None:
    """tls=true with RocketMQ's client keys, in any case; a key without tls=true, a server
    key or a trust file that is not there fails at analysis, naming it."""
    certs = make_certs(tmp_path / "certs")
    base = {"namesrvAddr": "127.0.0.1:9876", "subscribe": "T"}
    assert ReadOptions.parse({**base, "tls": "false"}, stream=False).tls is None
    no_file = {"tls": "true", "tls.config.file": "/nonexistent/tls.properties"}
    verifying = {
        **base,
        **no_file,
        "tls.test.mode.enable": "false",
        "TLS.CLIENT.AUTHSERVER": "true",
        "tls.client.trustCertPath": str(certs.ca_cert),
    }
    tls = ReadOptions.parse(verifying, stream=False).tls
    assert tls is not None and tls.client_auth_server and not tls.test_mode_enable
    assert tls.client_trust_cert_path == str(certs.ca_cert)
    trusting = ReadOptions.parse({**base, **no_file}, stream=False).tls
    assert trusting is not None and trusting.test_mode_enable
    with pytest.raises(OptionError, match=re.escape("option tls.config.file: needs tls=true")):
        ReadOptions.parse({**verifying, "tls": "false"}, stream=False)
    with pytest.raises(OptionError, match=re.escape("option tls.server.mode: is not a TLS")):
        ReadOptions.parse({**verifying, "tls.server.mode": "enforcing"}, stream=False)
    absent = {**verifying, "tls.client.trustCertPath": str(tmp_path / "absent.pem")}
    with pytest.raises(OptionError, match=re.escape("option tls: tls.client.trustCertPath=")):
        ReadOptions.parse(absent, stream=False)


def test_limit_rows_keeps_to_the_limit_when_small_queues_round_to_nothing() -> None:
    big, small, tiny = (MessageQueue("T", "b", n) for n in range(3))
    starts = {big: 0, small: 0, tiny: 0}
    ends = limit_rows(starts, {big: 100, small: 1, tiny: 1}, 3)
    assert ends == {big: 1, small: 1, tiny: 1}  # all three read, three rows in all
