"""The pre-encoded PULL_MESSAGE reply header is what encode_json_header writes, byte for byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sidewinder.protocol.codes import RequestCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import PullMessageResponseHeader
from sidewinder.remoting.codec import encode_command, encode_json_header
from sidewinder.remoting.reply_template import pull_reply_header

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@given(
    code=INT32,
    opaque=INT32,
    remark=st.none() | st.sampled_from(["OFFSET_TOO_SMALL", ""]) | st.text(max_size=8),
    numbers=st.tuples(INT64, INT64, INT64, INT64),
)
def test_the_pull_reply_header_is_what_the_json_encoder_writes(
    code: int, opaque: int, remark: str | None, numbers: tuple[int, int, int, int]
) -> None:
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {})
    request.opaque = opaque
    reply = request.reply(
        code, remark, ext_fields=PullMessageResponseHeader(*numbers).to_ext(), body=b"records"
    )
    assert pull_reply_header(reply, *numbers) == encode_json_header(reply)
    plain = encode_command(reply)
    reply.encoded_header = pull_reply_header(reply, *numbers)
    assert encode_command(reply) == plain  # the frame the codec makes of it too


def test_other_header_encodings_are_left_to_the_codec() -> None:
    request = RemotingCommand.request(
        RequestCode.PULL_MESSAGE, {}, serialize_type=SerializeType.ROCKETMQ
    )
    assert pull_reply_header(request.reply(0), 0, 1, 0, 1) is None
