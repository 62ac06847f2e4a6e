"""Malformed requests for every code a real broker and name server register: each gets an
answer, none ends as our bug (`remoting.processor_failed` in the logs), both still serve.

    pytest tests/test_malformed_requests.py              # a few thousand requests, seeded
    pytest tests/test_malformed_requests.py -m slow      # ten times as many

The codes come from the processor tables the apps build (`ProcessorTable.codes`), so a code
added to `broker/routes.py` or `namesrv/app.py` is tried without touching this file. Header
fields are every extFields name any request header declares, filled with hostile values; bodies
are random bytes, valid bodies cut short, and JSON of the wrong shape.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.processes import free_port_block
from interop.rocketmq import write_properties
from interop.sidewinder import SidewinderCluster, sidewinder_broker_conf
from sidewinder.broker.__main__ import load_config as load_broker_config
from sidewinder.broker.app import BrokerApp
from sidewinder.namesrv.app import NamesrvApp
from sidewinder.namesrv.config import NamesrvConfig
from sidewinder.protocol import headers
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient

SEED = 20261127
ANSWER_TIMEOUT_S = 30.0
IN_FLIGHT = 16
# END_TRANSACTION with a verdict that is neither commit nor rollback has no reply in RocketMQ
# either (the transaction check asks the producer again later).
MAY_STAY_UNANSWERED = {int(RequestCode.END_TRANSACTION)}

HOSTILE_VALUES = [
    "",
    "-1",
    "0",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1" * 400,
    "1.5",
    "1e400",
    "NaN",
    "true",
    "null",
    "abc",
    " 7 ",
    "0x10",
    "x" * 70_000,
    "\x00",
    "a\x00b",
    "ünïcødé ✓ 😀",
    "%s%n{}",
    "../../etc/passwd",
    "\r\n",
    "*",
    "||",
]

VALID_BODIES = [
    b'{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING",'
    b'"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
    b'"subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}],"unitMode":false}],'
    b'"producerDataSet":[{"groupName":"P"}]}',
    b'{"clientId":"c1","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}',
    b'{"clientId":"c1","group":"G","subscriptionData":{"expressionType":"SQL92",'
    b'"subString":"a > 1","topic":"T"}}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
    b'"topicConfigTable":{"T":{"perm":6,"readQueueNums":4,"topicName":"T",'
    b'"writeQueueNums":4}}},"filterServerList":[]}',
    b'{"counter":1,"timestamp":1}',
    b'{"accessKey":"ak","admin":false,"secretKey":"12345678","topicPerms":["T=PUB"]}',
    b'{"brokerId":0,"consumeEnable":true,"groupName":"G","retryQueueNums":1}',
    b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}',
    b"someUnknownKey=1\nanotherUnknownKey=2\n",
]

WRONG_SHAPES = [
    "[]",
    "1",
    '"s"',
    "null",
    "{}",
    "{0:1}",
    '{"mqSet":5,"consumerGroup":[],"clientId":{}}',
    '{"mqSet":[1,"a",null,[]]}',
    '{"mqSet":[{"queueId":"x","topic":[]}]}',
    '{"mqSet":[{"queueId":1e400}]}',
    '{"consumerDataSet":"x","producerDataSet":7}',
    '{"consumerDataSet":[1,null,{"groupName":[],"subscriptionDataSet":5}]}',
    '{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[1,{"topic":null}]}]}',
    '{"producerDataSet":[{"groupName":{}}],"clientID":5}',
    '{"subscriptionData":5}',
    '{"subscriptionData":{"expressionType":7,"subString":[]}}',
    '{"topicConfigSerializeWrapper":5,"filterServerList":"x"}',
    '{"topicConfigSerializeWrapper":{"topicConfigTable":[1],"dataVersion":"x"}}',
    '{"offsetTable":5}',
    '{"counter":"x","timestamp":[]}',
    '{"accessKey":5,"secretKey":null,"topicPerms":"x","groupPerms":[1]}',
    '{"groupName":[],"retryQueueNums":"x","brokerId":-1}',
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 50_000 + "1" + "}" * 50_000,
]


def header_field_names() -> list[str]:
    """Every extFields name a request header of ours declares."""
    names: set[str] = set()
    for value in vars(headers).values():
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            for item in dataclasses.fields(value):
                wire = item.metadata.get("wire")
                if wire:
                    names.add(wire)
    return sorted(names)


def malformed(code: int, rng: random.Random, names: list[str]) -> RemotingCommand:
    """One hostile request for `code`: a header mode and a body mode, picked at random."""
    mode = rng.randrange(4)
    if mode == 0:
        ext: dict[str, str] = {}
    elif mode == 1:
        value = rng.choice(HOSTILE_VALUES)
        ext = dict.fromkeys(names, value)
    elif mode == 2:
        ext = {name: rng.choice(HOSTILE_VALUES) for name in names}
    else:
        ext = {name: rng.choice(HOSTILE_VALUES) for name in rng.sample(names, rng.randint(1, 8))}
    body_mode = rng.randrange(5)
    body: bytes | None
    if body_mode == 0:
        body = None
    elif body_mode == 1:
        body = rng.randbytes(rng.randrange(1, 512))
    elif body_mode == 2:
        whole = rng.choice(VALID_BODIES)
        body = whole[: rng.randrange(len(whole))] or None
    elif body_mode == 3:
        body = rng.choice(WRONG_SHAPES).encode()
    else:
        valid = json.loads(rng.choice(VALID_BODIES[:7]))
        body = json.dumps(_poisoned(valid, rng), ensure_ascii=False).encode()
    return RemotingCommand.request(code, ext, body)


def _poisoned(value: object, rng: random.Random) -> object:
    """A valid body with some values swapped for hostile ones."""
    if isinstance(value, dict):
        return {k: _poisoned(v, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [_poisoned(v, rng) for v in value]
    if rng.random() < 0.5:
        return rng.choice([*HOSTILE_VALUES[:17], -1, 2**63, [], {}, None, 1.5])
    return value


def registered_codes(tmp_path: Path, conf: Path) -> tuple[list[int], list[int]]:
    """The codes the broker's and name server's tables register, built as the apps build them."""
    config = load_broker_config(conf, None)
    broker = BrokerApp(config)
    namesrv = NamesrvApp(NamesrvConfig.model_validate({"kvConfigPath": tmp_path / "kv.json"}))
    return broker.server.table.codes(), namesrv.server.table.codes()


@pytest.fixture(params=["native", "python"])
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SidewinderCluster]:
    """A name server and a broker as processes; the broker on the Rust extension or not."""
    if request.param == "python":
        monkeypatch.setenv("SIDEWINDER_NATIVE", "0")  # read by the child processes
    # Without long polling a held pull is answered within shortPollingTimeMills (1 s),
    # whatever suspend timeout a hostile header asks for.
    running = SidewinderCluster(tmp_path / "cluster", broker_conf={"longPollingEnable": "false"})
    running.start()
    yield running
    running.stop()


async def _try_all(
    addr: str, codes: list[int], per_code: int, rng: random.Random, names: list[str]
) -> tuple[int, list[str]]:
    """Send every request: how many were answered, and the problems found (a request left
    without an answer)."""
    client = RemotingClient()
    slots = asyncio.Semaphore(IN_FLIGHT)
    problems: list[str] = []
    answered = 0

    async def one(request: RemotingCommand) -> None:
        async with slots:
            nonlocal answered
            try:
                silent_ok = request.code in MAY_STAY_UNANSWERED
                await client.invoke(addr, request, 2.0 if silent_ok else ANSWER_TIMEOUT_S)
                answered += 1
            except TimeoutError:
                if not silent_ok:
                    problems.append(
                        f"code {request.code}: no answer, ext={request.ext_fields!r:.200}"
                    )

    try:
        requests = [malformed(code, rng, names) for code in codes for _ in range(per_code)]
        await asyncio.gather(*(one(request) for request in requests))
    finally:
        await client.close()
    return answered, problems


async def _still_serves(cluster: SidewinderCluster) -> None:
    client = RemotingClient()
    try:
        info = await client.invoke(
            cluster.namesrv_addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 10
        )
        assert info.code == ResponseCode.SUCCESS, info.remark
        offset = await client.invoke(
            cluster.broker_addr,
            RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": "0"}
            ),
            10,
        )
        assert offset.code == ResponseCode.SUCCESS, offset.remark
    finally:
        await client.close()


def _failures(log_path: Path) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line[:2000] for line in lines if "remoting.processor_failed" in line]


def run_malformed(
    cluster: SidewinderCluster, codes_conf: Path, tmp_path: Path, per_code: int
) -> None:
    broker_codes, namesrv_codes = registered_codes(tmp_path, codes_conf)
    assert RequestCode.HEART_BEAT in broker_codes and RequestCode.REGISTER_BROKER in namesrv_codes
    rng = random.Random(SEED)
    names = header_field_names()
    to_namesrv, problems = asyncio.run(
        _try_all(cluster.namesrv_addr, namesrv_codes, per_code, rng, names)
    )
    to_broker, more = asyncio.run(_try_all(cluster.broker_addr, broker_codes, per_code, rng, names))
    asyncio.run(_still_serves(cluster))
    failed = _failures(cluster.namesrv.process.out_path) + _failures(cluster.broker.out_path)
    assert not problems + more, "\n".join((problems + more)[:20])
    silent = per_code * len(MAY_STAY_UNANSWERED & set(broker_codes))
    assert to_namesrv == per_code * len(namesrv_codes)
    assert to_broker >= per_code * len(broker_codes) - silent
    assert not failed, f"{len(failed)} unexpected errors:\n" + "\n".join(failed[:10])


@pytest.fixture
def codes_conf(cluster: SidewinderCluster, tmp_path: Path) -> Path:
    """A broker.conf like the running broker's, with a store of its own (for the codes)."""
    conf = sidewinder_broker_conf(
        store=tmp_path / "codes-store",
        namesrv_addr=cluster.namesrv_addr,
        listen_port=free_port_block((-2, 0, 1)),
    )
    path = cluster.workdir / "codes-broker.conf"
    write_properties(path, conf)
    return path


def test_every_code_answers_malformed_requests_without_an_unexpected_error(
    cluster: SidewinderCluster, codes_conf: Path, tmp_path: Path
) -> None:
    run_malformed(cluster, codes_conf, tmp_path, per_code=50)


@pytest.mark.slow
def test_many_malformed_requests(
    cluster: SidewinderCluster, codes_conf: Path, tmp_path: Path
) -> None:
    run_malformed(cluster, codes_conf, tmp_path, per_code=500)
