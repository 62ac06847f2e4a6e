"""fastjson bodies: maps keyed by objects, nested, read back with the keys they were written
with (the broker's ConsumeStatsList, as mqadmin's brokerConsumeStats reads it)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol import body
from sidewinder.protocol.body import ObjectKey

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_KEYS = (
    st.text(max_size=8)
    | st.integers()
    | st.builds(
        lambda topic, queue: ObjectKey(brokerName="b", queueId=queue, topic=topic),
        st.text(max_size=8),
        st.integers(0, 16),
    )
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(_VALUES)
def test_loads_keyed_reads_back_what_dumps_wrote(value: Any) -> None:
    assert body.loads_keyed(body.dumps(value)) == value


def test_loads_keyed_reads_a_consume_stats_list() -> None:
    text = (
        '{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"g":[{"consumeTps":1.5,'
        '"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,'
        '"consumerOffset":1,"lastTimestamp":0}}}]},{"h":[]}],"totalDiff":2}'
    )
    data = body.loads_keyed(text.encode())
    (stats,) = data["consumeStatsList"][0]["g"]
    key = ObjectKey(brokerName="b", queueId=0, topic="T")
    assert stats["offsetTable"][key]["consumerOffset"] == 1
    assert data["consumeStatsList"][1] == {"h": []}
    assert data["totalDiff"] == 2
