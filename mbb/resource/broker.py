"""Reference broker: the worker's `./reference` runs in a sandbox of its own, outside the worker's.

Why: an execute-only (0111) copy cannot be read with cat/cp/open, but a process can always read
its own memory, so `LD_PRELOAD=./dump.so ./reference` dumps the mapped program. With the broker,
no byte of the reference is ever mapped in a process the worker controls: `./reference` is a
small client that sends its arguments and stdin over a unix socket; the operator side runs the
real program (clean environment, the worker's workspace read-only as its cwd) and relays
stdout, stderr and the exit status. Only non-interactive use is supported (stdin is read to EOF
first), which is all a CLI filter needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import struct
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from mbb.resource.sandbox import SANDBOX_GID, SANDBOX_UID, Bind, SandboxLimits, run_sandboxed

__all__ = ["CLIENT_SOURCE", "SOCKET_IN_SANDBOX", "ReferenceBroker"]

SOCKET_IN_SANDBOX = "/run/mbb-reference.sock"
_REF_IN_BROKER = "/opt/mbb/reference"
_MAX_IN = 64 << 20
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
head = json.dumps({{"args": sys.argv[1:]}}).encode()
s = socket.socket(socket.AF_UNIX)
s.connect("{SOCKET_IN_SANDBOX}")
s.sendall(struct.pack(">Q", len(head)) + head + struct.pack(">Q", len(data)) + data)
out = recv(s, struct.unpack(">Q", recv(s, 8))[0])
err = recv(s, struct.unpack(">Q", recv(s, 8))[0])
code = struct.unpack(">i", recv(s, 4))[0]
sys.stdout.buffer.write(out); sys.stdout.flush()
sys.stderr.buffer.write(err); sys.stderr.flush()
sys.exit(code)
'''


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("client went away")
        buf += chunk
    return buf


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
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        # unix socket paths are limited to ~107 bytes: the socket lives in a short private
        # folder of its own, not under the (possibly deep) run directory
        self._socket_dir = Path(tempfile.mkdtemp(prefix="mbb-ref-"))
        os.chmod(self._socket_dir, 0o711)
        self.socket_path = self._socket_dir / "s"
        self.client_path = directory / "client.py"
        self.client_path.write_text(CLIENT_SOURCE)
        os.chmod(self.client_path, 0o555)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self.reference, self.workspace, self.hide, self.limits = reference, workspace, hide, limits
        self.calls = 0
        broker = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                broker._serve(self.request)

        self._server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        self._server.daemon_threads = True
        os.chmod(self.socket_path, 0o600)
        if os.geteuid() == 0:
            os.chown(self.socket_path, SANDBOX_UID, SANDBOX_GID)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def binds(self) -> list[Bind]:
        """What the worker's sandbox mounts: the client as ./reference, and the socket."""
        return [
            Bind(self.client_path, "/workspace/reference"),
            Bind(self.socket_path, SOCKET_IN_SANDBOX, writable=True),
        ]

    def _serve(self, sock: socket.socket) -> None:
        try:
            n = struct.unpack(">Q", _recv(sock, 8))[0]
            if n > 1 << 20:
                return
            args = json.loads(_recv(sock, n))["args"]
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                return
            m = struct.unpack(">Q", _recv(sock, 8))[0]
            if m > _MAX_IN:
                return
            stdin = _recv(sock, m)
            self.calls += 1
            # shown as ./reference (its name in messages) when the mount point is intact
            ph = self.workspace / "reference"
            inside = "./reference" if ph.is_file() and not ph.is_symlink() else _REF_IN_BROKER
            target = "/workspace/reference" if inside == "./reference" else _REF_IN_BROKER
            r = run_sandboxed(
                [inside, *args],
                workspace=self.workspace,
                workspace_writable=False,
                stdin=stdin,
                binds=[Bind(self.reference, target)],
                hide=self.hide,
                limits=self.limits,
            )
            code = r.exit_code if r.exit_code is not None else 128 + 9
            if r.signal and r.exit_code is not None and r.exit_code < 0:
                code = 128 + r.signal
            sock.sendall(
                struct.pack(">Q", len(r.stdout))
                + r.stdout
                + struct.pack(">Q", len(r.stderr))
                + r.stderr
                + struct.pack(">i", code)
            )
        except (ConnectionError, OSError, ValueError, KeyError, json.JSONDecodeError):
            return

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        with contextlib.suppress(OSError):
            self._socket_dir.rmdir()
