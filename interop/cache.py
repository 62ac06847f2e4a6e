"""Where the reference bench keeps what it downloads and builds (never committed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
INTEROP_DIR = REPO_ROOT / "interop"
DRIVERS_DIR = INTEROP_DIR / "drivers"

# Maven Central's newest 4.x artifacts of each role (see interop/maven/pom.xml for why they differ).
ROCKETMQ_SERVER_VERSION = "4.9.7"
ROCKETMQ_CLIENT_VERSION = "4.9.8"
ROCKETMQ_BENCH_VERSION = "4.7.0"
CPP_CLIENT_PACKAGE = "rocketmq==0.4.4"
# The stock RocketMQ 5 Python client (gRPC). Its generated protos register the same descriptor
# names as our own server stubs, so it gets a virtualenv of its own, like the C++ one.
PY5_CLIENT_PACKAGE = "rocketmq-python-client==5.1.2"
# The stock RocketMQ 5 Java client (gRPC): one shaded jar with everything it needs inside.
JAVA5GRPC_CLIENT_ARTIFACT = "org.apache.rocketmq:rocketmq-client-java:5.0.8"
# The stock RocketMQ 5 Rust client (gRPC), pinned in interop/drivers/rust5/Cargo.toml and .lock.
RUST5_CLIENT_CRATE = "rocketmq 5.0.0"

CACHE_ENV = "SIDEWINDER_INTEROP_CACHE"


@dataclass(frozen=True)
class BenchCache:
    """The folders of one bench cache; `python -m interop.install` fills them."""

    root: Path

    @property
    def maven_lib(self) -> Path:
        return self.root / "maven"

    def classpath(self, role: str) -> str:
        """A `java -cp` value for one Maven profile of interop/maven/pom.xml (`server`, say)."""
        return str(self.maven_lib / role / "*")

    def jars(self, role: str) -> str:
        """`classpath(role)` with its jars named one by one, in a fixed order: a class-data
        archive (`-XX:SharedArchiveFile`) holds only for the exact classpath it was made with."""
        return ":".join(str(p) for p in sorted((self.maven_lib / role).glob("*.jar")))

    def server_archive(self, role: str, process: str) -> Path:
        """The class-data archive of one RocketMQ server JVM (`namesrv` or `broker`) on one
        role's classpath, which `python -m interop.install cds` makes (interop/jvm.py)."""
        return self.root / "cds" / f"{role}-{process}.jsa"

    @property
    def java_driver_classes(self) -> Path:
        return self.root / "java-driver"

    @property
    def java5_driver_classes(self) -> Path:
        """The same driver source built against the 5.3.2 remoting client."""
        return self.root / "java5-driver"

    @property
    def cpp_venv(self) -> Path:
        return self.root / "cpp-venv"

    @property
    def cpp_python(self) -> Path:
        return self.cpp_venv / "bin" / "python"

    @property
    def py5_venv(self) -> Path:
        return self.root / "py5-venv"

    @property
    def py5_python(self) -> Path:
        return self.py5_venv / "bin" / "python"

    @property
    def java5grpc_dir(self) -> Path:
        """The 5.x Java gRPC client's jar (`lib/`) and our driver built against it (`classes/`)."""
        return self.root / "java5grpc"

    @property
    def java5grpc_lib(self) -> Path:
        return self.java5grpc_dir / "lib"

    @property
    def java5grpc_classes(self) -> Path:
        return self.java5grpc_dir / "classes"

    @property
    def node_dir(self) -> Path:
        return self.root / "node"

    @property
    def node_modules(self) -> Path:
        return self.node_dir / "node_modules"

    @property
    def node5_dir(self) -> Path:
        """npm `rocketmq-client-nodejs` 1.0.8, the RocketMQ 5 gRPC client for Node."""
        return self.root / "node5"

    @property
    def node5_modules(self) -> Path:
        return self.node5_dir / "node_modules"

    @property
    def go_driver(self) -> Path:
        return self.root / "go" / "go-driver"

    @property
    def go5_driver(self) -> Path:
        """interop/drivers/go5 built: the stock RocketMQ 5 gRPC client for Go."""
        return self.root / "go5" / "go5-driver"

    @property
    def grpcload(self) -> Path:
        """scripts/grpcload built: the lean gRPC load generator of the bench."""
        return self.root / "grpcload" / "grpcload"

    @property
    def rust5_dir(self) -> Path:
        """interop/drivers/rust5 built (`target/` kept, so a rebuild is incremental)."""
        return self.root / "rust5"

    @property
    def rust5_driver(self) -> Path:
        """interop/drivers/rust5 built: the stock RocketMQ 5 gRPC client for Rust."""
        return self.rust5_dir / "rust5-driver"

    @property
    def fixtures(self) -> Path:
        return self.root / "fixtures"

    @property
    def stamps(self) -> Path:
        return self.root / "stamps"


def bench_cache() -> BenchCache:
    """The cache named by $SIDEWINDER_INTEROP_CACHE, else `.cache/interop` in the checkout."""
    configured = os.environ.get(CACHE_ENV)
    root = Path(configured).expanduser() if configured else REPO_ROOT / ".cache" / "interop"
    return BenchCache(root.resolve())
