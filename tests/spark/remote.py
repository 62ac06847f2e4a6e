"""Spark processes of our own for the remote tests, started from the pyspark package on
127.0.0.1 and stopped by process group: a standalone master with workers, and a Spark Connect
server (start-connect-server.sh in the foreground)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark

from interop.ports import lease_port_block
from interop.processes import ManagedProcess, can_connect

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def spark_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(workdir / "logs"),
        SPARK_PID_DIR=str(workdir / "pids"),
        SPARK_NO_DAEMONIZE="1",  # start-connect-server.sh stays our child, not a daemon
        PYSPARK_PYTHON=sys.executable,  # this environment has sidewinder installed
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # Every JVM here (master, workers, executors, the connect server) lives for seconds:
        # C1 alone starts them on less CPU (interop/jvm.py says the same of RocketMQ's).
        JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1",
    )
    return env


class StandaloneCluster:
    """`spark-class ...Master` and `workers` x `spark-class ...Worker`, one core each."""

    def __init__(self, workdir: Path, workers: int = 2) -> None:
        self.workdir = workdir
        self.port = lease_port_block()
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        env = spark_env(workdir)
        self.master = ManagedProcess(
            "spark master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(lease_port_block()),
            ],
            workdir / "master.out",
            env=env,
            cwd=workdir,
        )
        self.workers = [
            ManagedProcess(
                f"spark worker {n}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    self.url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(lease_port_block()),
                    "--work-dir",
                    str(workdir / f"w{n}"),
                ],
                workdir / f"worker{n}.out",
                env=env,
                cwd=workdir,
            )
            for n in range(workers)
        ]

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master.start()
        self.master.wait_ready(lambda: can_connect("127.0.0.1", self.port), 90)
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_ready(lambda w=worker: w.output_contains("Successfully registered"), 90)
        return self

    def stop(self) -> None:
        for process in [*self.workers, self.master]:
            process.stop(30)


class ConnectServer:
    """sbin/start-connect-server.sh on a leased port, local[2] behind it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = lease_port_block()
        self.process = ManagedProcess(
            "spark connect server",
            [
                str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
                "--master",
                "local[2]",
                "--conf",
                f"spark.connect.grpc.binding.port={self.port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.driver.host=127.0.0.1",
            ],
            workdir / "connect.out",
            env=spark_env(workdir),
            cwd=workdir,
        )

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        self.process.wait_ready(lambda: can_connect("127.0.0.1", self.port), 120)
        return self

    def stop(self) -> None:
        self.process.stop(30)
