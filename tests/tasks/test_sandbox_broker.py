"""Issue 17, item 2: the reference broker under attack — memory, connections, calls that
outlive the window, malformed requests. The operator's process must stay bounded and quiet."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from mbb.resource.broker import ERROR_EXIT, MAX_CONNECTIONS, MAX_STDIN
from mbb.resource.sandbox import uid_range


@pytest.fixture
def broker(tmp_path, suite):
    from conftest import Env

    e = Env(tmp_path / "b")
    e.resource = type(e.resource)(tmp_path / "b" / "res", emit=e.log.emit, reference_mode="broker")
    e.resource.assign("W1", suite["rev"])
    e.grant("W1")
    yield e
    e.resource.close()
    e.log.close()


def _b(env):
    return env.resource._brokers["W1"]


def _call(path: Path, head: bytes, stdin: bytes | None = b"", announce: int | None = None):
    """One raw request; returns (stdout, stderr, code) or None if the broker just closed."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(str(path))
    try:
        s.sendall(struct.pack(">Q", len(head)) + head)
        if stdin is not None:
            n = len(stdin) if announce is None else announce
            s.sendall(struct.pack(">Q", n) + stdin)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    return _answer(s)


def _answer(s: socket.socket):
    buf = b""
    while True:
        try:
            c = s.recv(65536)
        except OSError:
            break
        if not c:
            break
        buf += c
    s.close()
    if len(buf) < 20:
        return None
    n = struct.unpack(">Q", buf[:8])[0]
    out, rest = buf[8 : 8 + n], buf[8 + n :]
    m = struct.unpack(">Q", rest[:8])[0]
    err, code = rest[8 : 8 + m], struct.unpack(">i", rest[8 + m : 12 + m])[0]
    return out, err, code


def _ok(env) -> None:
    r = env.resource.run("W1", "printf 'abc\\n' | ./reference")
    assert r.ok and r.stdout == "cba\n", r.stderr


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


MALFORMED = {
    "huge_header_length": struct.pack(">Q", 1 << 62),
    "header_not_json": b"\x00\xffnot json",
    "header_not_object": b"[1, 2, 3]",
    "args_not_list": b'{"args": "rev"}',
    "args_not_strings": b'{"args": [1, null]}',
    "no_args_key": b'{"argv": []}',
    "nul_in_args": json.dumps({"args": ["a\x00b"]}).encode(),
    "lone_surrogate": b'{"args": ["\\ud800"]}',
    "deeply_nested": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_request_answered_with_an_error(broker, name, capfd):
    head = MALFORMED[name]
    if name == "huge_header_length":
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(_b(broker).socket_path))
        s.sendall(head)
        s.shutdown(socket.SHUT_WR)
        res = _answer(s)
    else:
        res = _call(_b(broker).socket_path, head)
    assert res is not None
    out, err, code = res
    if name == "lone_surrogate":  # a valid request (JSON escapes): rev gets the raw bytes
        assert code in (0, 1, ERROR_EXIT)
    else:
        assert code == ERROR_EXIT and out == b"" and err.startswith(b"reference:")
    _ok(broker)  # the broker still serves
    assert "Traceback" not in capfd.readouterr().err


def test_truncated_and_abandoned_requests(broker, capfd):
    path = _b(broker).socket_path
    for payload in (b"", b"\x00\x00", struct.pack(">Q", 100) + b'{"ar', b"x" * 7):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(path))
        s.sendall(payload)
        s.close()  # gone mid-request
    head = json.dumps({"args": []}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))
    s.sendall(struct.pack(">Q", len(head)) + head + struct.pack(">Q", 1000) + b"abc")
    s.close()  # gone mid-stdin
    time.sleep(0.5)
    _ok(broker)
    assert "Traceback" not in capfd.readouterr().err


def test_stdin_over_the_cap_refused_before_reading_it(broker):
    head = json.dumps({"args": []}).encode()
    t0 = time.monotonic()
    res = _call(_b(broker).socket_path, head, b"abc", announce=MAX_STDIN + 1)
    assert res is not None and res[2] == ERROR_EXIT and b"stdin larger" in res[1]
    assert time.monotonic() - t0 < 5
    r = broker.resource.run("W1", f"head -c {MAX_STDIN + 10} /dev/zero | ./reference")
    assert not r.ok and "stdin larger" in r.stderr


def test_held_connections_do_not_grow_the_operator(broker):
    """Six connections announce 16 MiB each and send half of it, then hold: streamed to the
    program, never buffered whole, so the operator's memory barely moves."""
    path = _b(broker).socket_path
    head = json.dumps({"args": []}).encode()
    before = _rss()
    socks = []
    for _ in range(6):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(0.5)
        s.connect(str(path))
        # six is over the cap: the broker may refuse and close a connection before its header
        # is sent (a broken pipe, seen once in CI under load); refused is fine here
        with contextlib.suppress(OSError):
            s.sendall(struct.pack(">Q", len(head)) + head + struct.pack(">Q", MAX_STDIN))
        socks.append(s)
    chunk = b"a" * (1 << 20)
    for _ in range(8):
        for s in socks:
            with contextlib.suppress(OSError):  # refused (over the cap) or blocked: both fine
                s.sendall(chunk)
    time.sleep(0.5)
    grown = _rss() - before
    assert grown < 48 << 20, f"operator grew by {grown >> 20} MiB"
    assert _b(broker).running() <= MAX_CONNECTIONS
    for s in socks:
        s.close()


def test_connection_cap_per_worker(broker):
    """More simultaneous calls than the cap: the extra ones are refused at once."""
    ws = broker.resource.workspace("W1")
    r = broker.resource.run(
        "W1",
        "mkfifo f; for i in $(seq 1 8); do (./reference f > out$i 2>&1; echo $? >> codes) & done;"
        " sleep 2; cat codes",
    )
    codes = r.stdout.split()
    assert codes.count(str(ERROR_EXIT)) >= 8 - MAX_CONNECTIONS
    assert any("too many concurrent calls" in (ws / f"out{i}").read_text() for i in range(1, 9))


def _sandbox_procs() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid in uid_range():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_reference_calls_do_not_outlive_the_window(broker, suite):
    """Calls blocked on a FIFO would run on for 10 s after the command; the window's end
    kills them, and the next holder can fork as usual."""
    r = broker.resource.run(
        "W1", "mkfifo f; for i in 1 2 3 4; do ./reference f > /dev/null 2>&1 & done; sleep 1"
    )
    assert _b(broker).running() >= 1  # still running after the command ended
    t0 = time.monotonic()
    broker.resource.close_window("W1")
    assert _b(broker).running() == 0
    for _ in range(50):
        if not _sandbox_procs():
            break
        time.sleep(0.1)
    assert not _sandbox_procs() and time.monotonic() - t0 < 5
    broker.resource.assign("W2", suite["tac"])
    broker.grant("W2")
    r = broker.resource.run("W2", "for i in $(seq 1 40); do sleep 1 & done; wait; echo done")
    assert r.ok and "done" in r.stdout and "fork" not in r.stderr


def test_calls_outside_the_window_are_refused(broker):
    broker.resource.close_window("W1")
    head = json.dumps({"args": []}).encode()
    res = _call(_b(broker).socket_path, head, b"abc\n")
    assert res is not None and res[2] == ERROR_EXIT and b"no window" in res[1]


def test_reference_calls_join_the_window_group(broker):
    group = broker.resource.window_cgroup()
    if group is None:
        pytest.skip("no cgroup delegation here")
    seen: list[int] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(group.pids())
            time.sleep(0.02)

    th = threading.Thread(target=watch)
    th.start()
    broker.resource.run("W1", "mkfifo f; ./reference f & sleep 0.5; kill %1")
    stop.set()
    th.join()
    assert seen  # the broker's sandbox ran inside the window's group


def test_random_bytes_never_break_the_broker(broker, capfd):
    import random

    rng = random.Random(17)
    path = _b(broker).socket_path
    for _ in range(40):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(str(path))
        n = rng.choice([0, 1, 7, 8, 9, 64, 4096])
        with contextlib.suppress(OSError):
            s.sendall(rng.randbytes(n))
            s.shutdown(socket.SHUT_WR)
        _answer(s)
    _ok(broker)
    assert "Traceback" not in capfd.readouterr().err
