"""Java command lines for RocketMQ 4.9.x on JDK 17, and the small home folder it insists on."""

from __future__ import annotations

import os
from pathlib import Path

# 4.9.x reflects into DirectByteBuffer's cleaner and sun.nio.ch; JDK 17 refuses that without these.
JDK17_OPENS = [
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
]

_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${{rocketmq.log.dir}}/{name}.log</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5p [%t] %c{{0}} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""

# RocketMQ's startup classes read conf/logback_<name>.xml under ROCKETMQ_HOME.
_LOGBACK_NAMES = ("namesrv", "broker", "tools")


# SIDEWINDER_JVM_PROFILE=quick (the test suite sets it) trades peak speed for start-up: C1 only
# and the serial collector cut the CPU a RocketMQ name server + broker spend starting by about a
# quarter (6 against 4.5 CPU-s here) and an mqadmin run by a third. Neither changes what the
# daemons do; benchmarks leave it unset and get the server JIT and G1.
_QUICK_START = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def gc_and_jit_flags() -> list[str]:
    if os.environ.get("SIDEWINDER_JVM_PROFILE") == "quick":
        return list(_QUICK_START)
    return ["-XX:+UseG1GC"]


def class_archive_flags(archive: Path, *, make: bool = False) -> list[str]:
    """Start a JVM from a dynamic class-data archive, or (`make`) write one as it exits. Each
    RocketMQ server JVM the suite starts spends about a third of its start-up CPU loading and
    verifying the same few thousand classes; mapped from an archive they cost next to nothing.
    The archive holds only for the exact classpath (the jars named one by one) and JDK it was
    made with; a stale or missing one is no error, the JVM loads the classes itself."""
    if make:
        return [f"-XX:ArchiveClassesAtExit={archive}"]
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def java_binary() -> str:
    """The JDK to run RocketMQ with: $SIDEWINDER_JAVA, else `java` on PATH (JDK 17 here)."""
    return os.environ.get("SIDEWINDER_JAVA", "java")


def make_rocketmq_home(workdir: Path) -> Path:
    """A ROCKETMQ_HOME whose logback files write into `workdir/logs`; returns the home path."""
    home = workdir / "rocketmq-home"
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    for name in _LOGBACK_NAMES:
        (conf / f"logback_{name}.xml").write_text(_LOGBACK.format(name=name))
    return home


def java_command(
    workdir: Path,
    classpath: str,
    main_class: str,
    args: list[str],
    *,
    heap_mb: int = 512,
    extra_props: dict[str, str] | None = None,
    jvm_flags: list[str] | None = None,
) -> list[str]:
    """A `java` command whose logs, home and user.home all live under `workdir`."""
    home = make_rocketmq_home(workdir)
    props = {
        "rocketmq.home.dir": str(home),
        "user.home": str(workdir),
        "rocketmq.log.dir": str(workdir / "logs"),
        "rocketmq.client.logRoot": str(workdir / "logs"),
        **(extra_props or {}),
    }
    return [
        java_binary(),
        f"-Xms{min(heap_mb, 128)}m",
        f"-Xmx{heap_mb}m",
        *gc_and_jit_flags(),
        *(jvm_flags or []),
        *JDK17_OPENS,
        *(f"-D{k}={v}" for k, v in props.items()),
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def java_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ROCKETMQ_HOME"] = str(workdir / "rocketmq-home")
    env["HOME"] = str(workdir)
    return env
