"""fastjson bodies: maps keyed by objects, nested, read back with the keys they were written
with (the broker's ConsumeStatsList, as mqadmin's brokerConsumeStats reads it)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol import body
from sidewinder.protocol.body import ObjectKey
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError

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


def _request(code: int, data: bytes) -> RemotingCommand:
    return RemotingCommand.request(code, {}, data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"clientID":', "HEART_BEAT body is not valid JSON: Expecting value"),
        (b"\xff\xfe", "HEART_BEAT body is not UTF-8"),
        (b"[" * 100_000, "HEART_BEAT body is not valid JSON: nested too deeply"),
        (b"[1]", "HEART_BEAT body is not a JSON object"),
        (b'{"consumerDataSet":5}', "HEART_BEAT body field consumerDataSet is not a JSON array"),
        (
            b'{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"x"}]}]}',
            "HEART_BEAT body field consumerDataSet[0].subscriptionDataSet[0].subVersion "
            "is not an integer: 'x'",
        ),
    ],
)
def test_a_body_that_does_not_decode_is_a_refusal_naming_the_problem(
    data: bytes, problem: str
) -> None:
    shape: body.Shape = {"consumerDataSet": [{"subscriptionDataSet": [{"subVersion": int}]}]}
    with pytest.raises(BodyError) as raised:
        body.request_object(_request(RequestCode.HEART_BEAT, data), shape)
    assert raised.value.remark.startswith(problem), raised.value.remark
    assert raised.value.code == ResponseCode.SYSTEM_ERROR
    assert isinstance(raised.value, ValueError)  # what callers of body.loads caught before


def test_a_body_of_the_shape_decodes_and_absent_or_null_fields_pass() -> None:
    shape: body.Shape = {"mqSet": [{"queueId": int}], "table": {"*": {"n": int}}}
    data = b'{"mqSet":[{"queueId":"3"},{"queueId":null}],"table":{"a":{"n":1},"b":{}},"x":[]}'
    decoded = body.request_object(_request(RequestCode.LOCK_BATCH_MQ, data), shape)
    assert decoded["mqSet"][0]["queueId"] == "3"
    assert body.request_object(RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}), shape) == {}
    with pytest.raises(BodyError, match=r"field table\.b\.n is not an integer"):
        body.check_shape({"table": {"b": {"n": True}}}, shape, "LOCK_BATCH_MQ body")
