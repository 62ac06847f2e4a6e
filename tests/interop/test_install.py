"""The bench installer: a registry that cannot be reached fails with a message naming it."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from interop import install
from interop.cache import BenchCache, bench_cache
from interop.drivers import DriverError, start_driver
from interop.jvm import gc_and_jit_flags, java_binary
from interop.rocketmq import server_launch


@pytest.fixture
def dead_registry() -> Iterator[str]:
    """A loopback URL where nothing answers: the port is bound but never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def run_step(step: Callable[[BenchCache], str], cache: BenchCache) -> str:
    with pytest.raises(install.InstallError) as excinfo:
        step(cache)
    return str(excinfo.value)


@pytest.mark.parametrize("step", ["node", "node5"])
def test_npm_registry_unreachable(
    step: str, dead_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("npm_config_registry", dead_registry)
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    cache = BenchCache(tmp_path / "cache")
    message = run_step(install.STEPS[step], cache)
    assert "the npm registry" in message
    assert not (tmp_path / "cache" / step).exists() and not (cache.stamps / step).exists()
    assert not [p for p in (tmp_path / "cache").glob(f"{step}-*")]  # no staging left behind


@pytest.mark.parametrize("step", ["cpp", "py5"])
def test_pypi_unreachable(
    step: str, dead_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", f"{dead_registry}/simple")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    cache = BenchCache(tmp_path / "cache")
    message = run_step(install.STEPS[step], cache)
    assert "PyPI" in message and "rocketmq" in message
    assert not (cache.stamps / step).exists()


@pytest.mark.parametrize("step", ["go", "go5"])
def test_go_module_proxy_unreachable(
    step: str, dead_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOPROXY", dead_registry)
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomod"))
    monkeypatch.setenv("GOFLAGS", "-mod=mod")
    cache = BenchCache(tmp_path / "cache")
    message = run_step(install.STEPS[step], cache)
    assert "the Go module proxy" in message
    assert not (cache.stamps / step).exists()


@pytest.mark.parametrize("step", ["maven", "java5grpc"])
def test_maven_central_unreachable(
    step: str, dead_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "settings.xml"
    settings.write_text(
        "<settings><localRepository>" + str(tmp_path / "m2") + "</localRepository>"
        "<mirrors><mirror><id>dead</id><mirrorOf>*</mirrorOf><url>"
        + dead_registry
        + "</url></mirror></mirrors></settings>"
    )
    monkeypatch.setenv("SIDEWINDER_MAVEN_SETTINGS", str(settings))
    cache = BenchCache(tmp_path / "cache")
    message = run_step(install.STEPS[step], cache)
    assert "Maven Central" in message
    assert not cache.maven_lib.exists() and not cache.java5grpc_dir.exists()
    assert not (cache.stamps / step).exists()
    assert not [p for p in cache.root.iterdir() if p.name.startswith(f"{step}-")]


def test_the_rust_crate_registry_unreachable(
    dead_registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty cargo home whose registry is replaced by one where nothing answers.
    cargo_home = tmp_path / "cargo"
    cargo_home.mkdir()
    (cargo_home / "config.toml").write_text(
        '[source.crates-io]\nreplace-with = "dead"\n'
        f'[source.dead]\nregistry = "sparse+{dead_registry}/"\n'
    )
    monkeypatch.setenv("CARGO_HOME", str(cargo_home))
    monkeypatch.setenv("CARGO_NET_RETRY", "0")
    cache = BenchCache(tmp_path / "cache")
    message = run_step(install.install_rust5, cache)
    assert "the Rust crate registry" in message
    assert not cache.rust5_driver.exists() and not (cache.stamps / "rust5").exists()


def test_a_driver_that_was_never_installed_names_its_step(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match=r"interop.install go.*Go module proxy"):
        start_driver(
            "go",
            "produce",
            namesrv="127.0.0.1:9",
            topic="T",
            group="G",
            count=1,
            cache=BenchCache(tmp_path / "empty"),
        )


def test_second_run_is_offline_and_skips_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    # The suite's own cache was filled by the test command; nothing may be fetched again.
    install.install()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(install.STEPS)
    assert all("up to date" in line for line in lines), lines


@pytest.mark.parametrize(("role", "process"), install.SERVER_ARCHIVES)
def test_the_rocketmq_servers_class_archives_map_on_their_classpath(
    role: str, process: str
) -> None:
    """Each RocketMQ server JVM starts from the class-data archive `cds` made; with
    -Xshare:on a JVM refuses to start on an archive it cannot map (another JDK, other jars)."""
    cache = bench_cache()
    archive = cache.server_archive(role, process)
    assert archive.exists(), f"{archive} is missing: run `python -m interop.install cds`"
    classpath, flags = server_launch(cache, role, process)
    assert f"-XX:SharedArchiveFile={archive}" in flags
    for gc in gc_and_jit_flags(), ["-XX:+UseG1GC"]:  # the suite's JVMs and the bench's
        shown = subprocess.run(
            [java_binary(), "-Xshare:on", *flags, *gc, "-cp", classpath, "-version"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert shown.returncode == 0 and "sharing" in shown.stderr, shown.stderr
    # Another classpath: the same archive is refused, so a stale one is never half-used.
    other = subprocess.run(
        [java_binary(), "-Xshare:on", *flags, "-cp", f"{archive.parent}:{classpath}", "-version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert other.returncode != 0, other.stderr
