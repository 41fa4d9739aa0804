"""Reference broker: the worker's `./reference` runs in a sandbox of its own, outside the worker's.

Why: an execute-only (0111) copy cannot be read with cat/cp/open, but a process can always read
its own memory, so `LD_PRELOAD=./dump.so ./reference` dumps the mapped program. With the broker,
no byte of the reference is ever mapped in a process the worker controls: `./reference` is a
small client that sends its arguments and stdin over a unix socket; the operator side runs the
real program (clean environment, the worker's workspace read-only as its cwd) and relays
stdout, stderr and the exit status. Only non-interactive use is supported (stdin is read to EOF
first), which is all a CLI filter needs.

Bounds (the operator's process must not be the worker's resource): stdin is streamed to the
program in 64 KiB chunks, never held whole, and refused past `max_stdin` bytes; stdout and
stderr are capped by the sandbox (64 KiB each); at most `max_connections` calls per worker at
once (a further one is answered with an error at once); a caller that stalls mid-request is
cut off after `io_timeout_s`. Calls run only while the worker holds a window: they join the
window's control group, and `end_window()` kills every call still running (with the group, the
processes they spawned), and run as the worker's run's sandbox uid (`uid`), so they count
against that run's per-user kernel accounts and no other's. A malformed request is answered
with an error frame (exit code 125) and never raises on the operator's side.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import socketserver
import struct
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mbb.resource import fs, reaper
from mbb.resource.sandbox import Bind, SandboxLimits, default_uid, run_sandboxed

if TYPE_CHECKING:
    from mbb.resource.cgroups import WindowCgroup

__all__ = ["CLIENT_SOURCE", "SOCKET_IN_SANDBOX", "ReferenceBroker"]

SOCKET_IN_SANDBOX = "/run/mbb-reference.sock"
_REF_IN_BROKER = "/opt/mbb/reference"
MAX_STDIN = 16 << 20  # bytes of stdin one call may send (streamed, never buffered whole)
MAX_HEADER = 256 << 10  # bytes of the JSON header (the arguments)
MAX_CONNECTIONS = 4  # calls of one worker served at once
IO_TIMEOUT_S = 10.0  # a stalled caller is cut off
ERROR_EXIT = 125  # exit code of a call the broker refused
END_WAIT_S = 5.0  # how long ending a window waits for a killed call to exit (SIGKILL: ms)
CLIENT_SOURCE = f'''#!/usr/bin/python3
"""./reference: runs the task's reference program (operator side) on these args and stdin."""
import json, socket, struct, sys
def recv(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("reference: broker closed the connection")
        b += c
    return b
data = sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
head = json.dumps({{"args": sys.argv[1:]}}).encode("utf-8", "surrogateescape")
s = socket.socket(socket.AF_UNIX)
s.connect("{SOCKET_IN_SANDBOX}")
try:
    s.sendall(struct.pack(">Q", len(head)) + head + struct.pack(">Q", len(data)) + data)
except OSError:
    pass  # refused early: the broker's answer says why
out = recv(s, struct.unpack(">Q", recv(s, 8))[0])
err = recv(s, struct.unpack(">Q", recv(s, 8))[0])
code = struct.unpack(">i", recv(s, 4))[0]
sys.stdout.buffer.write(out); sys.stdout.flush()
sys.stderr.buffer.write(err); sys.stderr.flush()
sys.exit(code)
'''


class _Refused(Exception):
    """A request the broker answers with an error frame."""


class _Stdin:
    """The announced stdin, read from the socket on demand (what run_sandboxed streams)."""

    def __init__(self, sock: socket.socket, size: int) -> None:
        self.sock, self.left, self.lock, self.failed = sock, size, threading.Lock(), False

    def read(self, n: int) -> bytes:
        with self.lock:
            if self.left <= 0 or self.failed:
                return b""
            try:
                chunk = self.sock.recv(min(n, self.left, 65536))
            except OSError:
                chunk = b""
            if not chunk:
                self.failed = True
                return b""
            self.left -= len(chunk)
            return chunk

    def drain(self, deadline: float) -> None:
        """Discard what the program did not read, so the client's send completes."""
        while time.monotonic() < deadline and self.read(65536):
            pass


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 16))
        if not chunk:
            raise ConnectionError("client went away")
        buf += chunk
    return bytes(buf)


def _frame(out: bytes, err: bytes, code: int) -> bytes:
    return (
        struct.pack(">Q", len(out))
        + out
        + struct.pack(">Q", len(err))
        + err
        + struct.pack(">i", code)
    )


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # never a traceback on the operator's side (the handler answers what it can)


class ReferenceBroker:
    """Serves one worker's reference on a unix socket until `close()`."""

    def __init__(
        self,
        directory: Path,
        reference: Path,
        workspace: Path,
        *,
        hide: Sequence[str] = (),
        limits: SandboxLimits = SandboxLimits(cpu_s=10, wall_s=10.0),  # noqa: B008
        max_stdin: int = MAX_STDIN,
        max_connections: int = MAX_CONNECTIONS,
        io_timeout_s: float = IO_TIMEOUT_S,
        window_gated: bool = True,
        uid: int | None = None,
    ) -> None:
        self.directory = directory
        self.uid = default_uid() if uid is None else uid  # the worker's run's sandbox uid
        directory.mkdir(parents=True, exist_ok=True)
        # unix socket paths are limited to ~107 bytes: the socket lives in a short private
        # folder of its own, not under the (possibly deep) run directory; on a root host that
        # folder is a tiny tmpfs, so the sandbox's mountinfo shows no host path for it
        self._socket_dir = reaper.temp_dir("ref")
        self._mounted = False
        if fs.tmpfs_available(self._socket_dir.parent):
            with contextlib.suppress(OSError):
                fs.mount_tmpfs(self._socket_dir, 64 << 10, 8)
                self._mounted = True
                weakref.finalize(self, fs.unmount, self._socket_dir)  # also at exit
        os.chmod(self._socket_dir, 0o711)
        self.socket_path = self._socket_dir / "s"
        self.client_path = directory / "client.py"
        self.client_path.write_text(CLIENT_SOURCE)
        os.chmod(self.client_path, 0o555)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self.reference, self.workspace, self.hide, self.limits = reference, workspace, hide, limits
        self.max_stdin, self.io_timeout_s = max_stdin, io_timeout_s
        self.calls = 0
        self.refused = 0
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._window_open = not window_gated
        self._cgroup: WindowCgroup | None = None
        broker = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                broker._handle(self.request)

        self._server = _Server(str(self.socket_path), Handler)
        os.chmod(self.socket_path, 0o600)
        if os.geteuid() == 0:
            os.chown(self.socket_path, self.uid, self.uid)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def binds(self) -> list[Bind]:
        """What the worker's sandbox mounts: the client as ./reference, and the socket."""
        return [
            Bind(self.client_path, "/workspace/reference", copy=True, perms=0o555),
            Bind(self.socket_path, SOCKET_IN_SANDBOX, writable=True),
        ]

    # --- windows --------------------------------------------------------------------------
    def begin_window(self, cgroup: WindowCgroup | None = None) -> None:
        """Serve calls (in `cgroup`, the window's control group) until `end_window`."""
        with self._lock:
            self._window_open, self._cgroup = True, cgroup

    def end_window(self) -> None:
        """Refuse new calls and kill every call still running (with all it spawned); returns
        once the killed calls have exited, so `running()` counts none of them (their reaper
        threads would otherwise drop them a moment later)."""
        with self._lock:
            self._window_open, self._cgroup = False, None
            procs = list(self._procs)
        for p in procs:
            _kill_group(p)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=END_WAIT_S)
        with self._lock:
            self._procs.difference_update(p for p in procs if p.returncode is not None)

    def running(self) -> int:
        with self._lock:
            return len(self._procs)

    # --- one call -------------------------------------------------------------------------
    def _handle(self, sock: socket.socket) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            _answer(sock, f"reference: too many concurrent calls (at most {MAX_CONNECTIONS})")
            return
        try:
            sock.settimeout(self.io_timeout_s)
            self._serve(sock)
        except _Refused as exc:
            self.refused += 1
            _answer(sock, f"reference: {exc}")
        except Exception:
            self.refused += 1
            _answer(sock, "reference: request failed")
        finally:
            self._slots.release()

    def _serve(self, sock: socket.socket) -> None:
        try:
            n = struct.unpack(">Q", _recv(sock, 8))[0]
            if n > MAX_HEADER:
                raise _Refused(f"arguments longer than {MAX_HEADER} bytes")
            head = json.loads(_recv(sock, n).decode("utf-8", "surrogateescape"))
            args = head.get("args") if isinstance(head, dict) else None
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise _Refused("malformed request (args must be a list of strings)")
            if any("\0" in a for a in args):
                raise _Refused("an argument contains a NUL byte")
            m = struct.unpack(">Q", _recv(sock, 8))[0]
        except (ConnectionError, TimeoutError, OSError, ValueError, struct.error) as exc:
            raise _Refused(f"malformed request ({exc.__class__.__name__})") from None
        if m > self.max_stdin:
            raise _Refused(f"stdin larger than {self.max_stdin} bytes")
        with self._lock:
            if not self._window_open:
                raise _Refused("no window is open (calls run only inside your window)")
            cgroup = self._cgroup
        self.calls += 1
        stdin = _Stdin(sock, m)
        # shown as ./reference (its name in messages) when the mount point is intact
        ph = self.workspace / "reference"
        inside = "./reference" if ph.is_file() and not ph.is_symlink() else _REF_IN_BROKER
        target = "/workspace/reference" if inside == "./reference" else _REF_IN_BROKER
        r = run_sandboxed(
            [inside, *args],
            workspace=self.workspace,
            workspace_writable=False,
            stdin=stdin,
            binds=[Bind(self.reference, target, copy=True, perms=0o111)],
            hide=self.hide,
            limits=self.limits,
            cgroup=cgroup,
            started=self._started,
            uid=self.uid,
        )
        stdin.drain(time.monotonic() + self.io_timeout_s)
        if stdin.failed and stdin.left > 0:
            return  # the caller went away mid-stdin: nobody to answer
        code = r.exit_code if r.exit_code is not None else 128 + 9
        if r.signal and r.exit_code is not None and r.exit_code < 0:
            code = 128 + r.signal
        with contextlib.suppress(OSError):
            sock.sendall(_frame(r.stdout, r.stderr, code))

    def _started(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)
            live = self._window_open
        if not live:  # the window ended while it was starting
            _kill_group(proc)
        threading.Thread(target=self._reap, args=(proc,), daemon=True).start()

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(Exception):
            proc.wait()
        with self._lock:
            self._procs.discard(proc)

    def close(self) -> None:
        self.end_window()
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._mounted:
            with contextlib.suppress(OSError):
                fs.unmount(self._socket_dir)
        with contextlib.suppress(OSError):
            self._socket_dir.rmdir()


def _answer(sock: socket.socket, message: str) -> None:
    with contextlib.suppress(OSError):
        sock.settimeout(1.0)
        sock.sendall(_frame(b"", (message + "\n").encode(), ERROR_EXIT))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
