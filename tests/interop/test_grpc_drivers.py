"""What every RocketMQ 5 gRPC driver does alike with no server of ours (interop/drivers/PROTOCOL.md,
"python5" and the sections after it): bad arguments exit 2 with a `usage` event, what the
client's API lacks is `unsupported`, the driver's own --timeout ends a run that hangs, and the
drivers take a front's endpoints, never a name server, and name their install step when it is
missing. Each client's own behaviour (its pinned version, how it fails to connect) is in
test_<client>_driver.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from interop.cache import BenchCache
from interop.drivers import GRPC_CLIENTS, DriverError, run_driver, start_driver

# The install step each driver's error names, and the registry it comes from.
INSTALL_HINTS = {
    "python5": r"interop.install py5.*PyPI",
    "go5": r"interop.install go5.*Go module proxy",
    "java5grpc": r"interop.install java5grpc.*Maven Central",
    "rust5": r"interop.install rust5.*Rust crate registry",
    "node5": r"interop.install node5.*npm registry",
}
# What each client's API lacks, and what the driver says of it.
LACKS = [
    ("python5", "produce", {"mode": "oneway"}, "oneway"),
    ("go5", "produce", {"mode": "batch"}, "batch"),
    ("java5grpc", "produce", {"mode": "oneway"}, "sync, async"),
    ("rust5", "produce", {"mode": "batch"}, "--mode batch"),
    ("rust5", "produce", {"namespace": "NS"}, "--namespace"),
    ("rust5", "push-consume", {"group": "G", "expect": 1}, "no PushConsumer"),
    ("node5", "produce", {"mode": "oneway"}, "oneway"),
    ("node5", "produce", {"mode": "batch"}, "batch"),
]
# Usage errors only some drivers' argument parsers name.
OWN_USAGE_ERRORS = [
    (client, action, options, says)
    for client in ("go5", "rust5", "node5")
    for action, options, says in (
        ("simple-consume", {"group": "G", "expect": 1, "no_ack": "maybe"}, "true or false"),
        ("produce", {"count": 1, "colour": "red"}, "unknown option --colour"),
    )
]


@pytest.fixture(params=GRPC_CLIENTS)
def grpc_client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("action", "options", "says"),
    [
        ("simple-consume", {"expect": 1}, "needs --group"),
        ("push-consume", {"group": "G"}, "needs --expect"),
        ("produce", {"count": 1, "prop": ["a="]}, "--prop needs K=V"),
        ("transact", {"count": 1, "answer": "unknow"}, "transact needs --answer"),
    ],
)
def test_usage_errors_exit_2(
    grpc_client: str, refused: str, action: str, options: dict[str, object], says: str
) -> None:
    run = run_driver(grpc_client, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] == "usage" and says in run.errors()[0]["message"]


@pytest.mark.parametrize(("client", "action", "options", "says"), OWN_USAGE_ERRORS)
def test_usage_errors_of_some_drivers_exit_2(
    client: str, refused: str, action: str, options: dict[str, object], says: str
) -> None:
    run = run_driver(client, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    assert run.errors()[0]["error"] == "usage" and says in run.errors()[0]["message"]


@pytest.mark.parametrize(("client", "action", "options", "says"), LACKS)
def test_what_the_client_lacks_is_unsupported(
    client: str, refused: str, action: str, options: dict[str, object], says: str
) -> None:
    options = {"count": 1, **options} if action == "produce" else options
    run = run_driver(client, action, endpoints=refused, topic="T", timeout_s=30, **options)
    assert run.returncode == 2, run.describe()
    (error,) = run.errors()
    assert error["error"] == "unsupported" and says in error["message"], error


def test_the_drivers_own_timeout_ends_a_run(grpc_client: str, silent: str) -> None:
    run = run_driver(grpc_client, "route", endpoints=silent, topic="T", timeout_s=1)
    assert run.returncode == 3, run.describe()
    assert run.errors()[-1]["error"] == "timeout"


def test_it_takes_endpoints_not_a_name_server(grpc_client: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoints"):
        start_driver(grpc_client, "route", namesrv="127.0.0.1:9876", topic="T")
    with pytest.raises(DriverError, match=INSTALL_HINTS[grpc_client]):
        start_driver(
            grpc_client,
            "route",
            endpoints="127.0.0.1:9",
            topic="T",
            cache=BenchCache(tmp_path / "empty"),
        )


def test_a_4x_driver_takes_a_name_server_not_endpoints() -> None:
    with pytest.raises(ValueError, match="namesrv"):
        start_driver("go", "produce", endpoints="127.0.0.1:8081", topic="T", group="G")
