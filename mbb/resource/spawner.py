"""A fork server inside a window's control group: commands start there without a migration.

Moving a process into a cgroup v1 group waits for an RCU grace period (10-20 ms on a loaded
machine, per command). Instead each group runs one small server (system python3, started once
per group, in the background) that forks every command of the window: the child is born in the
group. The server receives the command's argv and file descriptors (stdin, stdout, stderr and
bwrap's memfds) over a SOCK_SEQPACKET socket, forks, places them, execs, and reports the pid and
later the exit status. `RemoteProcess` is the caller's handle (pid, pipes, wait, kill), shaped
like the parts of `subprocess.Popen` the sandbox uses.

The server runs as the operator (outside every sandbox's namespaces, invisible to them) with a
minimal environment; it dies with the group (killing the group kills it), and a caller whose
server is gone falls back to joining the group on the way in.
"""

from __future__ import annotations

import array
import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence

__all__ = ["RemoteProcess", "Spawner"]

HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}

_SERVER = r"""
import array, fcntl, json, os, select, signal, socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
wr, ww = os.pipe()
os.set_blocking(wr, False)
os.set_blocking(ww, False)
signal.set_wakeup_fd(ww)
signal.signal(signal.SIGCHLD, lambda *a: None)
if os.geteuid() == 0:  # only root can give its commands the normal priority back
    os.nice(10)  # waiting is its job: the command running now goes first
s.send(b'{"ready": 1}')
while True:
    try:
        ready, _, _ = select.select([s, wr], [], [])
    except InterruptedError:
        continue
    if wr in ready:
        with __import__("contextlib").suppress(BlockingIOError):
            os.read(wr, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            s.send(json.dumps({"exit": pid, "code": code}).encode())
    if s in ready:
        msg, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(32 * 4))
        if not msg:
            os._exit(0)
        fds = array.array("i")
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        req = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                targets = [0, 1, 2, *req["fds"]]
                high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 300) for fd in fds]
                for fd, t in zip(high, targets):
                    os.dup2(fd, t)
                keep = set(targets)
                for fd in range(3, 300 + len(high)):
                    if fd not in keep:
                        with __import__("contextlib").suppress(OSError):
                            os.close(fd)
                with __import__("contextlib").suppress(OSError):  # needs root
                    os.setpriority(os.PRIO_PROCESS, 0, 0)
                os.execv(req["argv"][0], req["argv"])
            finally:
                os._exit(127)
        for fd in fds:
            os.close(fd)
        s.send(json.dumps({"pid": pid}).encode())
"""


class RemoteProcess:
    """A command the server forked: pid, our ends of its pipes, its exit status."""

    def __init__(self, stdin: int, stdout: int, stderr: int) -> None:
        self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115 - closed by the sandbox
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self.pid = 0
        self.returncode: int | None = None
        self._done = threading.Event()

    def _finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("sandbox", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.pid and self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


class _Slot:
    def __init__(self, proc: RemoteProcess) -> None:
        self.proc = proc
        self.started = threading.Event()


class Spawner:
    """The client side of one group's fork server."""

    def __init__(self, procs_files: Sequence[str], python: str, join: str) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = ["/bin/sh", "-c", join, "mbb-cgroup", *procs_files, "--"]
        argv += [python, "-S", "-E", "-c", _SERVER, str(child.fileno())]
        try:
            self.server = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(child.fileno(),),  # the same number there: given in argv
                env=HOST_ENV,  # none of the operator's variables
            )
        finally:
            child.close()
        self.sock = parent
        self.ready = threading.Event()
        self.dead = False
        self._lock = threading.Lock()
        self._pending: collections.deque[_Slot] = collections.deque()
        self._procs: dict[int, RemoteProcess] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return self.ready.is_set() and not self.dead

    def spawn(self, argv: Sequence[str], fds: Sequence[tuple[int, int]]) -> RemoteProcess:
        """Fork `argv` in the group with stdio on fresh pipes and each (our fd, its number)
        in place; raises OSError if the server is gone (nothing was started then)."""
        if not self.alive():
            raise OSError("spawner not ready")
        pipes = [os.pipe() for _ in range(3)]
        child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        proc = RemoteProcess(*ours)
        slot = _Slot(proc)
        req = json.dumps({"argv": list(argv), "fds": [t for _, t in fds]}).encode()
        passed = array.array("i", child_ends + [f for f, _ in fds])
        try:
            with self._lock:
                if self.dead:
                    raise OSError("spawner gone")
                self._pending.append(slot)
                try:
                    self.sock.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, passed)])
                except OSError:
                    self._pending.remove(slot)
                    raise
        except OSError:
            for f in (proc.stdin, proc.stdout, proc.stderr):
                f.close()
            raise
        finally:
            for fd in child_ends:
                os.close(fd)
        if not slot.started.wait(10.0) or not proc.pid:
            raise OSError("the spawner did not start the command")
        return proc

    def _read(self) -> None:
        try:
            while True:
                msg = self.sock.recv(1 << 16)
                if not msg:
                    break
                m = json.loads(msg)
                if "ready" in m:
                    self.ready.set()
                elif "pid" in m:
                    with self._lock:
                        slot = self._pending.popleft()
                        slot.proc.pid = m["pid"]
                        self._procs[m["pid"]] = slot.proc
                    slot.started.set()
                elif "exit" in m:
                    with self._lock:
                        proc = self._procs.pop(m["exit"], None)
                    if proc is not None:
                        proc._finish(m["code"])
        except (OSError, ValueError, IndexError):
            pass
        finally:
            self._died()

    def _died(self) -> None:
        """The server is gone (killed with its group): every command it started is over."""
        with self._lock:
            self.dead = True
            procs, self._procs = list(self._procs.values()), {}
            pending, self._pending = list(self._pending), collections.deque()
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(p.pid, signal.SIGKILL)
            p._finish(-signal.SIGKILL)
        for s in pending:
            s.started.set()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(self.server.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.server.wait(timeout=5)
