"""The recording proxy: frames split by length prefix only, any chunking, rewrite, raw tails."""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop.capture import CaptureError, read_capture
from interop.proxy import ProxySession


def frame(header: dict[str, object], body: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


class EchoServer:
    """Answers every byte it reads with the same bytes: enough to see both directions."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed early"
        buf += chunk
    return buf


def test_frames_sent_byte_by_byte_are_recorded_whole(echo: EchoServer, tmp_path: Path) -> None:
    frames = [frame({"code": 105, "flag": 0, "opaque": i}, b"x" * i) for i in range(5)]
    cap = tmp_path / "cap.jsonl"
    with ProxySession(cap) as session:
        proxy = session.add(echo.addr, label="echo")
        with socket.create_connection(("127.0.0.1", proxy.listen_port)) as sock:
            for byte in b"".join(frames):
                sock.sendall(bytes([byte]))
            assert recv_exactly(sock, sum(map(len, frames))) == b"".join(frames)
    recorded = read_capture(cap)
    assert [f.raw for f in recorded if f.direction == "c2s"] == frames
    assert [f.raw for f in recorded if f.direction == "s2c"] == frames
    for f in recorded:
        f.check()
        assert f.proxy == "echo"
    assert [f.header()["opaque"] for f in recorded if f.direction == "c2s"] == list(range(5))


def test_rewrite_keeps_lengths_and_applies_to_server_replies_only(
    echo: EchoServer, tmp_path: Path
) -> None:
    cap = tmp_path / "cap.jsonl"
    original = frame({"code": 0, "flag": 1}, b'{"brokerAddrs":{"0":"127.0.0.1:11111"}}')
    with ProxySession(cap) as session:
        proxy = session.add(echo.addr, rewrite_to_client={b"127.0.0.1:11111": b"127.0.0.1:22222"})
        with socket.create_connection(("127.0.0.1", proxy.listen_port)) as sock:
            sock.sendall(original)
            echoed = recv_exactly(sock, len(original))
    assert echoed == original.replace(b"11111", b"22222")
    c2s, s2c = sorted(read_capture(cap), key=lambda f: f.direction)
    assert c2s.raw == original
    assert s2c.raw == echoed
    s2c.check()
    with ProxySession(tmp_path / "x.jsonl") as session, pytest.raises(ValueError, match="lengths"):
        session.add(echo.addr, rewrite_to_client={b"a": b"bb"})


def test_a_torn_tail_is_recorded_as_torn_and_passed_over(echo: EchoServer, tmp_path: Path) -> None:
    """A peer that hangs up mid-frame (a client shutting down while it writes) leaves a torn tail:
    kept in the capture, but no frame, so reading the capture gives the whole frames only."""
    cap = tmp_path / "cap.jsonl"
    whole = frame({"code": 34, "flag": 0})
    with ProxySession(cap) as session:
        proxy = session.add(echo.addr)
        with socket.create_connection(("127.0.0.1", proxy.listen_port)) as sock:
            sock.sendall(whole + whole[:7])
            # Forwarded as it came, torn tail included: the proxy does not hold bytes back.
            assert recv_exactly(sock, len(whole) + 7) == whole + whole[:7]
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(10) == b""
    records = [json.loads(line) for line in cap.read_text().splitlines()]
    torn = [base64.b64decode(r["torn"]) for r in records if "torn" in r]
    assert whole[:7] in torn
    assert not [r for r in records if "raw" in r]
    frames = read_capture(cap)
    assert [f.raw for f in frames] == [whole, whole]  # each direction once, the tail in neither


def test_a_stream_that_is_not_frames_is_recorded_raw_and_flagged(
    echo: EchoServer, tmp_path: Path
) -> None:
    cap = tmp_path / "cap.jsonl"
    garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    with ProxySession(cap) as session:
        proxy = session.add(echo.addr)
        with socket.create_connection(("127.0.0.1", proxy.listen_port)) as sock:
            sock.sendall(garbage)
            assert recv_exactly(sock, len(garbage)) == garbage
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(10) == b""
    records = [json.loads(line) for line in cap.read_text().splitlines()]
    assert garbage in [base64.b64decode(r["raw"]) for r in records if "raw" in r]
    with pytest.raises(CaptureError, match="unframed"):
        read_capture(cap)
