"""`sidewinder-dev --cluster`, run as a user runs it: two name servers and four brokers (broker-a
and broker-b, each a master and a slave) come up as processes, every broker registers with both
name servers, and SIGTERM stops them all cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from contextlib import closing
from functools import partial
from pathlib import Path

from interop.mqadmin import mqadmin
from interop.ports import lease_port_block
from sidewinder.client.sync import Admin

ROOT = Path(__file__).parents[2]
CONF_SET = ROOT / "conf" / "2m-2s-sync"
DEV = ROOT / ".venv" / "bin" / "sidewinder-dev"
BROKERS = ("broker-a", "broker-a-s", "broker-b", "broker-b-s")


def conf_set_on_leased_ports(dest: Path) -> list[str]:
    """conf/2m-2s-sync copied with every listenPort moved to a leased one (interop/ports.py;
    a test must not take 9876 or 10911); the name servers' addresses."""
    dest.mkdir(parents=True)
    namesrvs = []
    for path in sorted(CONF_SET.glob("*.conf")):
        is_namesrv = path.stem.startswith("namesrv")
        port = lease_port_block() if is_namesrv else lease_port_block((-2, 0, 1))
        if is_namesrv:
            namesrvs.append(f"127.0.0.1:{port}")
        text = re.sub(r"(?m)^listenPort = \d+$", f"listenPort = {port}", path.read_text())
        (dest / path.name).write_text(text)
    return namesrvs


def wait_for(
    what: str, check: object, out: Path, proc: subprocess.Popen[bytes], timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert proc.poll() is None, out.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{what}:\n{out.read_text()[-3000:]}"
        time.sleep(0.3)


def test_dev_cluster_starts_two_groups_on_two_name_servers_and_stops_them(tmp_path: Path) -> None:
    namesrvs = conf_set_on_leased_ports(tmp_path / "conf")
    store = tmp_path / "store"
    out = tmp_path / "dev.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [DEV, "--cluster", tmp_path / "conf", "--store", store, "--no-metrics"],
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for("the boot banner", lambda: b"boot success" in out.read_bytes(), out, proc, 120)
        banner = out.read_text()
        for addr in namesrvs:
            assert addr in banner
        pids = {name: int(pid) for name, pid in re.findall(r"(?m)^  (\S+) .* pid (\d+)", banner)}
        assert set(pids) == {"namesrv-1", "namesrv-2", *BROKERS}, banner
        for addr in namesrvs:
            with closing(Admin(addr)) as admin:
                wait_for(f"all four brokers on {addr}", partial(groups, admin), out, proc, 60)
                clusters = admin.cluster_info()["clusterAddrTable"]
                assert sorted(clusters["DefaultCluster"]) == ["broker-a", "broker-b"]
        # RocketMQ's own mqadmin lists the four: a row per broker, its group and id.
        listed = mqadmin(";".join(namesrvs), "clusterList").stdout
        rows = re.findall(r"(?m)^DefaultCluster\s+(broker-[ab])\s+(\d)\s", listed)
        assert sorted(rows) == [
            ("broker-a", "0"),
            ("broker-a", "1"),
            ("broker-b", "0"),
            ("broker-b", "1"),
        ], listed
        # A master killed (to watch its slave serve): reported, the others run on.
        os.kill(pids["broker-a"], signal.SIGKILL)
        wait_for(
            "the death reported",
            lambda: b"broker-a exited with -9" in out.read_bytes(),
            out,
            proc,
            30,
        )
        with closing(Admin(namesrvs[0])) as admin:
            wait_for(
                "broker-a's master unregistered, its slave still there",
                lambda: groups(admin, {"broker-a": {1}, "broker-b": {0, 1}}),
                out,
                proc,
                30,
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
    log = out.read_text()
    assert code == 0, log[-3000:]
    for name, pid in pids.items():
        assert not _alive(pid), f"{name} (pid {pid}) outlived sidewinder-dev"
    for stem in BROKERS:
        assert (store / stem / "commitlog").is_dir()
        # The abort file stays where a broker was killed, as RocketMQ's: its next start recovers.
        assert (store / stem / "abort").exists() == (stem == "broker-a"), stem
    assert log.count("exited with") == 1, log[-3000:]


def groups(admin: Admin, expected: dict[str, set[int]] | None = None) -> bool:
    """Whether the name server's broker table is `expected` (group -> broker ids; default:
    both groups, master and slave)."""
    table = admin.cluster_info()["brokerAddrTable"]
    ids = {name: set(b["brokerAddrs"]) for name, b in table.items()}
    return ids == (expected or {"broker-a": {0, 1}, "broker-b": {0, 1}})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
