"""Fetch and build everything the reference bench runs, by package name, into the bench cache.

    python -m interop.install            # every step; a step whose inputs did not change is skipped
    python -m interop.install --force    # redo every step
    python -m interop.install maven java # only these steps

Steps: `maven` (RocketMQ's published jars, one classpath per role), `java` (our Java driver,
compiled against the 4.9.8 client), `cds` (class-data archives that start RocketMQ's servers
faster), `cpp` (PyPI `rocketmq` 0.4.4 in its own virtualenv), `py5`
(PyPI `rocketmq-python-client` 5.1.2, the gRPC client, in another), `java5grpc` (Maven Central
`rocketmq-client-java` 5.0.8, the Java gRPC client, and our driver compiled against it), `node`
(npm `ali-ons` from our lockfile), `node5` (npm `rocketmq-client-nodejs` 1.0.8, the RocketMQ 5
gRPC client for Node, from its lockfile), `go` (rocketmq-client-go from the Go module proxy),
`go5` (the RocketMQ 5 gRPC client for Go, rocketmq-clients/golang/v5 v5.1.4, from the same
proxy), `rust5` (the RocketMQ 5 gRPC client for Rust, the crate `rocketmq` 5.0.0, built by
cargo). Each step
records a stamp of its inputs, so a second run does no network access at all. A failed download
names the registry that could not be reached.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from interop.cache import (
    CPP_CLIENT_PACKAGE,
    DRIVERS_DIR,
    INTEROP_DIR,
    JAVA5GRPC_CLIENT_ARTIFACT,
    PY5_CLIENT_PACKAGE,
    REPO_ROOT,
    RUST5_CLIENT_CRATE,
    BenchCache,
    bench_cache,
)
from interop.dev import dev_cluster
from interop.drivers import DRIVER_ARCHIVE, DRIVER_JAR, JAVA5, driver_command
from interop.jvm import java_binary
from interop.processes import StartupError

MAVEN_ROLES = ("server", "client", "bench", "server5", "client5")
GRPCLOAD_DIR = REPO_ROOT / "scripts" / "grpcload"


class InstallError(RuntimeError):
    """A bench step failed; the message says which registry or tool, and shows its output."""


def _run(
    cmd: list[str],
    registry: str,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 1200,
) -> str:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError as exc:
        raise InstallError(f"{cmd[0]!r} is not installed (needed to reach {registry})") from exc
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"{registry}: {' '.join(cmd)} ran past {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise InstallError(
            f"{registry}: `{' '.join(cmd)}` failed with exit {proc.returncode}; "
            f"is {registry} reachable?\n{tail}"
        )
    return proc.stdout


def _digest(paths: Iterable[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        # Paths under interop/ relative to it (the stamps of earlier steps stay valid).
        base = INTEROP_DIR if path.is_relative_to(INTEROP_DIR) else REPO_ROOT
        h.update(str(path.relative_to(base)).encode())
        h.update(path.read_bytes())
    for item in extra:
        h.update(item.encode())
    return h.hexdigest()


def _fresh(cache: BenchCache, step: str, digest: str, output: Path) -> bool:
    stamp = cache.stamps / step
    return output.exists() and stamp.exists() and stamp.read_text() == digest


def _stamp(cache: BenchCache, step: str, digest: str) -> None:
    cache.stamps.mkdir(parents=True, exist_ok=True)
    tmp = cache.stamps / f".{step}.tmp"
    tmp.write_text(digest)
    os.replace(tmp, cache.stamps / step)


def _replace_dir(staged: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, final)


def install_maven(cache: BenchCache) -> str:
    pom = INTEROP_DIR / "maven" / "pom.xml"
    digest = _digest([pom])
    if _fresh(cache, "maven", digest, cache.maven_lib):
        return "up to date"
    cache.root.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix="maven-", dir=cache.root))
    try:
        _copy_maven_roles(pom, staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    _replace_dir(staged, cache.maven_lib)
    _stamp(cache, "maven", digest)
    jars = sum(1 for _ in cache.maven_lib.rglob("*.jar"))
    return f"{jars} jars in {', '.join(MAVEN_ROLES)}"


def _maven_settings() -> list[str]:
    # A settings file (a mirror, a proxy) for machines that reach Maven Central another way.
    settings = os.environ.get("SIDEWINDER_MAVEN_SETTINGS")
    return ["-s", settings] if settings else []


def _copy_maven_roles(pom: Path, staged: Path) -> None:
    for role in MAVEN_ROLES:
        _run(
            [
                "mvn",
                "-B",
                "-q",
                *_maven_settings(),
                "-f",
                str(pom),
                "-P",
                role,
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staged / role}",
                "-DincludeScope=runtime",
            ],
            "Maven Central",
        )


# Where the 5.3.2 client keeps a class the driver names that 4.9.8 keeps elsewhere.
JAVA5_MOVED_CLASSES = {
    "org.apache.rocketmq.common.protocol.heartbeat.MessageModel": (
        "org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel"
    ),
}


def install_java(cache: BenchCache) -> str:
    # The Java driver, and the bench's Java tools (interop/java), on one classpath; and the driver
    # again against the 5.3.2 client (java5), its imports moved where 5.x keeps those classes.
    sources = sorted(
        [*(DRIVERS_DIR / "java").rglob("*.java"), *(INTEROP_DIR / "java").glob("*.java")]
    )
    if not sources:
        raise InstallError("no Java driver sources under interop/drivers/java")
    digest = _digest(sources, (cache.stamps / "maven").read_text(), repr(JAVA5_MOVED_CLASSES))
    if _fresh(cache, "java", digest, cache.java_driver_classes) and (
        cache.java5_driver_classes.exists()
    ):
        return "up to date"
    cache.root.mkdir(parents=True, exist_ok=True)
    staged = _javac(cache, sources, "client")
    driver5 = [p for p in sources if p.is_relative_to(DRIVERS_DIR)]
    with tempfile.TemporaryDirectory(prefix="java5-src-") as scratch:
        moved = []
        for path in driver5:
            text = path.read_text()
            for old, new in JAVA5_MOVED_CLASSES.items():
                text = text.replace(f"import {old};", f"import {new};")
            (Path(scratch) / path.name).write_text(text)
            moved.append(Path(scratch) / path.name)
        staged5 = _javac(cache, moved, "client5")
    _replace_dir(staged, cache.java_driver_classes)
    _replace_dir(staged5, cache.java5_driver_classes)
    archived = [_archive_java_driver(cache, client) for client in ("java", JAVA5)]
    _stamp(cache, "java", digest)
    return (
        f"{len(sources)} source file(s) compiled, the driver for 4.9.8 and 5.3.2"
        f" ({', '.join(archived)})"
    )


# Driver runs that load what a test's runs load: a send and a consume, against a Sidewinder
# started for the purpose when it can start, else against no server (the runs fail to reach it
# and end, having loaded less).
def _training_runs(namesrv: str) -> list[list[str]]:
    common = ["--namesrv", namesrv, "--topic", "Training", "--timeout", "20"]
    return [
        ["produce", *common, "--group", "TrainingP", "--count", "2"],
        ["consume", *common, "--group", "TrainingC", "--expect", "1"],
    ]


@contextmanager
def _training_server(workdir: Path) -> Iterator[str]:
    """A name server and broker for the training runs ("127.0.0.1:9", where nothing listens,
    when they do not start)."""
    with ExitStack() as stack:
        try:
            namesrv = stack.enter_context(dev_cluster(workdir, within_s=30)).namesrv_addr
        except StartupError:
            namesrv = "127.0.0.1:9"
        yield namesrv


def _archive_java_driver(cache: BenchCache, client: str) -> str:
    """driver.jar of the driver's classes and driver.jsa, a class-data archive of the classes
    its runs load at start (interop.drivers.java_driver_class_path). Only a speed-up: when the
    archive cannot be made the driver runs without it."""
    classes = cache.java_driver_classes if client == "java" else cache.java5_driver_classes
    packed = classes.parent / f".{client}-{DRIVER_JAR}"
    _run(["jar", "cf", str(packed), "-C", str(classes), "."], "jar (JDK 17)")
    os.replace(packed, classes / DRIVER_JAR)
    with tempfile.TemporaryDirectory(prefix="cds-") as scratch:
        workdir = Path(scratch)
        command = driver_command(client, workdir, cache)
        loaded: dict[str, None] = {}
        with _training_server(workdir) as namesrv:
            for n, argv in enumerate(_training_runs(namesrv)):
                listing = workdir / f"loaded-{n}.lst"
                training = [command[0], f"-XX:DumpLoadedClassList={listing}", *command[1:], *argv]
                subprocess.run(
                    training,
                    capture_output=True,
                    timeout=120,
                    cwd=workdir,
                    env={**os.environ, "HOME": scratch},
                    check=False,
                )
                if listing.exists():
                    loaded.update(dict.fromkeys(listing.read_text().splitlines()))
        if not loaded:
            return f"{client}: no class list, no archive"
        classlist = workdir / "classes.lst"
        classlist.write_text("\n".join(loaded) + "\n")
        classpath = command[command.index("-cp") + 1]
        archive = classes / DRIVER_ARCHIVE
        dumped = subprocess.run(
            [
                java_binary(),
                "-Xshare:dump",
                f"-XX:SharedClassListFile={classlist}",
                f"-XX:SharedArchiveFile={archive}",
                "-cp",
                classpath,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if dumped.returncode != 0 or not archive.exists():
        archive.unlink(missing_ok=True)
        return f"{client}: no archive ({dumped.stderr.strip()[-200:]})"
    return f"{client}: class-data archive of {len(loaded)} classes"


def _javac(cache: BenchCache, sources: list[Path], role: str) -> Path:
    staged = Path(tempfile.mkdtemp(prefix="java-", dir=cache.root))
    _run(
        [
            "javac",
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(staged),
            "-cp",
            cache.classpath(role),
            *map(str, sources),
        ],
        "javac (JDK 17)",
    )
    return staged


def install_java5grpc(cache: BenchCache) -> str:
    # The stock RocketMQ 5 Java gRPC client, by its pinned Maven coordinates (one shaded jar, no
    # dependencies), and interop/drivers/java5grpc compiled against it.
    sources = sorted((DRIVERS_DIR / "java5grpc").rglob("*.java"))
    if not sources:
        raise InstallError("no driver sources under interop/drivers/java5grpc")
    digest = _digest(sources, JAVA5GRPC_CLIENT_ARTIFACT)
    if _fresh(cache, "java5grpc", digest, cache.java5grpc_classes) and cache.java5grpc_lib.exists():
        return "up to date"
    cache.root.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix="java5grpc-", dir=cache.root))
    try:
        _run(
            [
                "mvn",
                "-B",
                "-q",
                *_maven_settings(),
                "dependency:copy",
                f"-Dartifact={JAVA5GRPC_CLIENT_ARTIFACT}",
                f"-DoutputDirectory={staged / 'lib'}",
            ],
            "Maven Central",
            cwd=staged,  # no pom.xml here: the artifact alone
        )
        _run(
            [
                "javac",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-d",
                str(staged / "classes"),
                "-cp",
                str(staged / "lib" / "*"),
                *map(str, sources),
            ],
            "javac (JDK 17)",
        )
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    _replace_dir(staged, cache.java5grpc_dir)
    _stamp(cache, "java5grpc", digest)
    return f"{JAVA5GRPC_CLIENT_ARTIFACT} and {len(sources)} driver source file(s) compiled"


def install_cpp(cache: BenchCache) -> str:
    return _install_venv(cache, "cpp", cache.cpp_venv, cache.cpp_python, CPP_CLIENT_PACKAGE)


def install_py5(cache: BenchCache) -> str:
    # The stock RocketMQ 5 gRPC client for interop/drivers/python5. Never in the project's venv:
    # its generated protos and ours register the same descriptor names, which clash in one
    # interpreter (a "duplicate symbol" error at import).
    return _install_venv(cache, "py5", cache.py5_venv, cache.py5_python, PY5_CLIENT_PACKAGE)


def _install_venv(cache: BenchCache, step: str, venv: Path, python: Path, package: str) -> str:
    """A virtualenv of its own with one pinned PyPI package (and what it depends on)."""
    digest = _digest([], package, sys.version)
    if _fresh(cache, step, digest, python):
        return "up to date"
    # Not stamped until pip succeeded, so a half-made venv is redone by the next run.
    (cache.stamps / step).unlink(missing_ok=True)
    if venv.exists():
        shutil.rmtree(venv)
    _run([sys.executable, "-m", "venv", str(venv)], "python venv")
    _run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", package],
        "PyPI",
    )
    _stamp(cache, step, digest)
    return f"{package} in {venv}"


def install_node(cache: BenchCache) -> str:
    outcome = _npm_ci(cache, "node", DRIVERS_DIR / "node", cache.node_dir)
    return outcome or "ali-ons installed from package-lock.json"


def install_node5(cache: BenchCache) -> str:
    # The stock RocketMQ 5 gRPC client for Node (npm rocketmq-client-nodejs, pinned to 1.0.8 in
    # package.json and, with what it depends on, in package-lock.json) for interop/drivers/node5.
    outcome = _npm_ci(cache, "node5", DRIVERS_DIR / "node5", cache.node5_dir)
    return outcome or "rocketmq-client-nodejs installed from package-lock.json"


def _npm_ci(cache: BenchCache, step: str, src: Path, output: Path) -> str | None:
    """`npm ci` a driver's manifests into the cache; "up to date" when they did not change."""
    manifests = [src / "package.json", src / "package-lock.json"]
    digest = _digest(manifests)
    if _fresh(cache, step, digest, output / "node_modules"):
        return "up to date"
    cache.root.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f"{step}-", dir=cache.root))
    for manifest in manifests:
        shutil.copy2(manifest, staged / manifest.name)
    try:
        _run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            "the npm registry",
            cwd=staged,
        )
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    _replace_dir(staged, output)
    _stamp(cache, step, digest)
    return None


def install_go(cache: BenchCache) -> str:
    return _go_build(cache, "go", DRIVERS_DIR / "go", cache.go_driver)


def install_go5(cache: BenchCache) -> str:
    # The stock RocketMQ 5 gRPC client in Go (github.com/apache/rocketmq-clients/golang/v5, the
    # exact version its go.mod and go.sum pin) for interop/drivers/go5. The proxy refuses to list
    # that module's versions: only an exact version resolves.
    return _go_build(cache, "go5", DRIVERS_DIR / "go5", cache.go5_driver)


def install_grpcload(cache: BenchCache) -> str:
    # The bench's lean gRPC load generator: raw grpc-go on the v2 stubs of the module go5 pins.
    return _go_build(cache, "grpcload", GRPCLOAD_DIR, cache.grpcload)


def _go_build(cache: BenchCache, step: str, src: Path, output: Path) -> str:
    """`go build` a driver module into the cache; its go.mod and go.sum pin every module."""
    inputs = [p for p in src.rglob("*") if p.is_file() and p.suffix in {".go", ".mod", ".sum"}]
    digest = _digest(inputs)
    if _fresh(cache, step, digest, output):
        return "up to date"
    output.parent.mkdir(parents=True, exist_ok=True)
    staged = output.with_suffix(".tmp")
    _run(["go", "build", "-o", str(staged), "."], "the Go module proxy", cwd=src)
    os.replace(staged, output)
    _stamp(cache, step, digest)
    return f"built {output}"


def install_rust5(cache: BenchCache) -> str:
    # The stock RocketMQ 5 gRPC client for Rust (the crate `rocketmq` 5.0.0, rocketmq-clients'
    # rust/) for interop/drivers/rust5: its Cargo.toml pins the crate, its Cargo.lock every
    # other (--locked). The target dir stays in the cache: a changed driver rebuilds only itself.
    src = DRIVERS_DIR / "rust5"
    inputs = [src / "Cargo.toml", src / "Cargo.lock", *sorted((src / "src").rglob("*.rs"))]
    digest = _digest(inputs, RUST5_CLIENT_CRATE)
    output = cache.rust5_driver
    if _fresh(cache, "rust5", digest, output):
        return "up to date"
    output.parent.mkdir(parents=True, exist_ok=True)
    target = cache.rust5_dir / "target"
    env = {**os.environ, "CARGO_TARGET_DIR": str(target), "CARGO_TERM_COLOR": "never"}
    _run(
        ["cargo", "build", "--release", "--locked", "--quiet"],
        "the Rust crate registry",
        cwd=src,
        env=env,
        timeout_s=2400,
    )
    staged = output.with_suffix(".tmp")
    shutil.copy2(target / "release" / "rust5-driver", staged)
    os.replace(staged, output)
    _stamp(cache, "rust5", digest)
    return f"built {output} ({RUST5_CLIENT_CRATE})"


# The RocketMQ server JVMs whose class-data archives `cds` makes: (role, process).
SERVER_ARCHIVES = (("server", "namesrv"), ("server", "broker"), ("server5", "broker"))


def install_cds(cache: BenchCache) -> str:
    """Class-data archives of the RocketMQ name server and the 4.9.7 and 5.3.2 brokers
    (interop/jvm.py, class_archive_flags): each cluster starts once writing them, serves the
    Java driver's send and consume, and stops. Only a speed-up: an archive that cannot be
    made is left out and its JVM starts without one."""
    from interop.rocketmq import RocketMQCluster
    from interop.rocketmq5 import RocketMQ5Cluster

    java = subprocess.run(
        [java_binary(), "-version"], capture_output=True, text=True, check=False
    ).stderr
    java_stamp = cache.stamps / "java"
    if not java_stamp.exists():
        raise InstallError("cds trains on the Java driver: run the `maven` and `java` steps first")
    digest = _digest([INTEROP_DIR / "jvm.py"], java_stamp.read_text(), java)
    archives = [cache.server_archive(role, process) for role, process in SERVER_ARCHIVES]
    if _fresh(cache, "cds", digest, archives[0]) and all(a.exists() for a in archives):
        return "up to date"
    for archive in archives:
        archive.unlink(missing_ok=True)
    for kind in (RocketMQCluster, RocketMQ5Cluster):
        with tempfile.TemporaryDirectory(prefix="cds-") as scratch:
            command = driver_command("java", Path(scratch), cache)
            cluster = kind(Path(scratch), cache=cache, make_class_archives=True)
            try:
                cluster.start()
                for argv in _training_runs(cluster.namesrv_addr):
                    subprocess.run(
                        [*command, *argv],
                        capture_output=True,
                        timeout=120,
                        cwd=scratch,
                        env={**os.environ, "HOME": scratch},
                        check=False,
                    )
            except StartupError:
                pass
            finally:
                cluster.stop()
            for role, process in (("server", "namesrv"), (kind.broker_role, "broker")):
                made = cache.server_archive(role, process).with_suffix(".new")
                if made.exists():
                    os.replace(made, cache.server_archive(role, process))
    present = [a.name for a in archives if a.exists()]
    _stamp(cache, "cds", digest)
    return f"class-data archives: {', '.join(present) or 'none'}"


STEPS: dict[str, Callable[[BenchCache], str]] = {
    "maven": install_maven,
    "java": install_java,
    "cds": install_cds,
    "cpp": install_cpp,
    "py5": install_py5,
    "java5grpc": install_java5grpc,
    "node": install_node,
    "node5": install_node5,
    "go": install_go,
    "go5": install_go5,
    "grpcload": install_grpcload,
    "rust5": install_rust5,
}


def install(
    steps: Iterable[str] = STEPS,
    *,
    force: bool = False,
    cache: BenchCache | None = None,
    quiet: bool = False,
) -> None:
    cache = cache or bench_cache()
    steps = list(steps)
    for name in steps if force else ():
        (cache.stamps / name).unlink(missing_ok=True)
    for name in steps:
        started = time.monotonic()
        outcome = STEPS[name](cache)
        if quiet and outcome == "up to date":
            continue
        print(
            f"interop.install {name:<6} {outcome} ({time.monotonic() - started:.1f} s)", flush=True
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m interop.install",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "steps", nargs="*", metavar="STEP", help=f"some of: {', '.join(STEPS)} (default: all)"
    )
    parser.add_argument("--force", action="store_true", help="redo every step")
    args = parser.parse_args(argv)
    unknown = [step for step in args.steps if step not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    try:
        install(args.steps or list(STEPS), force=args.force)
    except InstallError as exc:
        print(f"interop.install: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
