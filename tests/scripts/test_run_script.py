"""The README's run command: installs the project and starts a name server and a broker that a
stock client can use at once, and the web console; SIGTERM stops them cleanly."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from interop.drivers import consume_messages, produce_messages
from interop.ports import lease_port_block
from tests.metrics_scrape import scrape

ROOT = Path(__file__).parents[2]


def test_run_script_starts_a_cluster_the_java_client_uses(tmp_path: Path) -> None:
    namesrv_port, broker_port = lease_port_block(), lease_port_block((-2, 0, 1))
    metrics_port = lease_port_block((0, 1))  # the broker's, then the name server's
    grpc_port = lease_port_block()
    out = tmp_path / "run.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [
                "bash",
                "scripts/run.sh",
                "--store",
                str(tmp_path / "store"),
                "--namesrv-port",
                str(namesrv_port),
                "--broker-port",
                str(broker_port),
                "--metrics-port",
                str(metrics_port),
                "--grpc-port",
                str(grpc_port),
            ],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 240
        while b"boot success" not in out.read_bytes():
            assert proc.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)
        # The web console starts beside them (on 8080, or a free port when that is taken).
        assert b", console http://127.0.0.1:" in out.read_bytes()
        namesrv = f"127.0.0.1:{namesrv_port}"
        sent = produce_messages("java", namesrv=namesrv, topic="RunScript", count=20, group="RunPG")
        assert [e["status"] for e in sent] == ["SEND_OK"] * 20
        run = consume_messages("java", namesrv=namesrv, topic="RunScript", expect=20, group="RunCG")
        assert len(run.received()) == 20
        # Metrics are on in sidewinder-dev: the broker's, then the name server's port.
        topic = {"topic": "RunScript", "node_type": "broker"}
        assert scrape(metrics_port).value("rocketmq_messages_in_total", **topic) == 20
        assert scrape(metrics_port + 1).matching("rocketmq_rpc_latency_count")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, out.read_text()[-3000:]
    assert not (tmp_path / "store" / "abort").exists()
