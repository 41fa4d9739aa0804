"""One sandboxed command: bubblewrap, a read-only system, one writable workspace, hard limits.

The sandbox is built from nothing: only /usr (read-only, with the usual /bin, /lib symlinks), a
few files of /etc, a private /proc, /dev and /tmp, and the caller's workspace at `/workspace`;
/dev's devices are read-only nodes of mbb's own (mbb.resource.fs.device_nodes), not the host's.
Everything else on the host (other workspaces, the task cache with hidden tests, the project
sources, /root) simply does not exist inside. There is no network (own, empty net namespace) and
no way back out (own pid namespace, setsid, no capabilities). When the host runs as root, the
command runs as an unprivileged uid so process-count limits apply (the kernel exempts root) and
execute-only files stay unreadable.

What the kernel enforces on top (see README, "Sandbox"): a seccomp filter built by libseccomp
(mbb.resource.seccomp: keyrings, new user namespaces, mount, ptrace, bpf, ...); the caller's
control group (mbb.resource.cgroups: memory, processes and CPU of the whole window), which the
command joins before bwrap starts; rlimits per process. No host path is visible inside: bwrap
reads its mount arguments from a memfd (`--args`), so /proc/1/cmdline shows none, and files
that must not reveal where they live (the reference, the broker's client) are copied into the
sandbox (`--ro-bind-data`), so mountinfo shows none either.

A uid per run. On a root host every ExecutionResource (a run) and every evaluation claims a uid
of its own (`claim_uid`): UID_BASE + (pid << 8) + slot, so no two mbb processes of one pid
namespace, and no two resources of one process, share one. The kernel keeps per-user
accounts that every process of a uid shares, whatever its namespaces: pipe buffer pages
(pipe-user-pages-soft), POSIX message queue bytes (RLIMIT_MSGQUEUE), pending signals
(RLIMIT_SIGPENDING), inotify instances, the process count (RLIMIT_NPROC). With one uid for all
sandboxes, a sender holding 1,100 pipes shrank the next pipe of a concurrent sandbox from 64 KiB
to 8 KiB, and nine message queues made its mq_open fail: channels that need no shared file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from mbb.resource.cgroups import JOIN
from mbb.resource.fs import DEVICES, device_nodes
from mbb.resource.seccomp import seccomp_fd

if TYPE_CHECKING:
    from mbb.resource.cgroups import WindowCgroup
    from mbb.resource.spawner import Spawner

__all__ = [
    "BWRAP_INSTALL",
    "UID_BASE",
    "WORKSPACE",
    "Bind",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "bwrap_path",
    "chown_tree",
    "claim_uid",
    "default_uid",
    "release_uid",
    "run_sandboxed",
    "uid_range",
]

BWRAP_INSTALL = "apt-get install -y bubblewrap"
WORKSPACE = "/workspace"  # where the holder's workspace appears inside the sandbox
UID_BASE = 1 << 24  # sandbox uids: UID_BASE + (pid << 8) + slot (gid the same number)
_UID_SLOTS = 256  # slot 0: this process's default; 1..255: claimed by resources, evaluations
_BWRAP = "/usr/bin/bwrap"
_PRLIMIT = "/usr/bin/prlimit"
_ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
# the environment bwrap itself starts with (its pid-1 reaper keeps it): none of the operator's
# variables (API keys, paths) exist anywhere in the sandbox's processes
HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKSPACE,
    "TMPDIR": "/tmp",
    "LC_ALL": "C",
    "LANG": "C",
    "TERM": "dumb",
}


class SandboxUnavailable(RuntimeError):
    """bubblewrap (or setpriv when running as root) is missing: name the install command."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-command limits; the defaults suit compiling and running small CLI programs."""

    cpu_s: int = 30  # RLIMIT_CPU per process
    memory_bytes: int = 1 << 30  # RLIMIT_AS per process
    processes: int = 64  # RLIMIT_NPROC for the sandbox uid
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file a command may write
    output_bytes: int = 64 << 10  # captured stdout / stderr each; beyond it: truncated, pipe closed
    open_files: int = 4096  # RLIMIT_NOFILE per process
    tmp_bytes: int = 64 << 20  # size of the private /tmp
    wall_s: float = 60.0  # wall-clock cap when the caller gives no tighter one
    # the window's control group (all its processes together; cgroup machines only)
    total_memory_bytes: int = 2 << 30  # memory of all processes, tmpfs pages included
    total_processes: int = 256  # processes and threads
    cpus: float = 1.0  # CPU bandwidth
    # the workspace's own tmpfs (root hosts only)
    workspace_bytes: int = 64 << 20
    workspace_inodes: int = 4096


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True, slots=True)
class Bind:
    """A host path shown inside the sandbox (read-only unless `writable`)."""

    src: Path
    dst: str
    writable: bool = False
    copy: bool = False  # copy the file's bytes in (read-only, `perms`): its host path stays hidden
    perms: int = 0o444


@dataclass(frozen=True, slots=True)
class SandboxResult:
    exit_code: int | None  # None when killed before exiting on its own
    stdout: bytes
    stderr: bytes
    stdout_bytes: int  # bytes produced (before truncation)
    stderr_bytes: int
    truncated: bool
    killed: bool  # hit the wall-clock cut-off and was killed
    wall_s: float
    signal: int | None = None  # terminating signal (negative returncode), if any
    extra: dict[str, object] = field(default_factory=dict)


_uid_lock = threading.Lock()
_uid_claims: tuple[int, set[int]] = (0, set())  # (pid, slots claimed): reset in a forked child


def uid_range(pid: int | None = None) -> range:
    """The sandbox uids of process `pid` (default: this one); with pid_max at most 2**22 they
    stay below 2**31."""
    first = UID_BASE + ((os.getpid() if pid is None else pid) << 8)
    return range(first, first + _UID_SLOTS)


def default_uid() -> int:
    """The uid of a sandbox whose caller claimed none (slot 0 of this process)."""
    return uid_range()[0]


def claim_uid() -> int:
    """A uid no other live resource or evaluation uses; give it back with `release_uid`."""
    global _uid_claims
    with _uid_lock:
        pid, taken = _uid_claims
        if pid != os.getpid():
            _uid_claims = pid, taken = os.getpid(), set()
        for slot in range(1, _UID_SLOTS):
            if slot not in taken:
                taken.add(slot)
                return uid_range()[slot]
    raise RuntimeError(
        f"{_UID_SLOTS - 1} sandbox uids are in use in this process: close resources you no "
        "longer need (ExecutionResource.close)"
    )


def release_uid(uid: int) -> None:
    with _uid_lock:
        pid, taken = _uid_claims
        if pid == os.getpid():
            taken.discard(uid - uid_range()[0])


def bwrap_path() -> str:
    """The bubblewrap binary, or a clear error with the install command."""
    path = shutil.which("bwrap") or (_BWRAP if Path(_BWRAP).exists() else None)
    if path is None:
        raise SandboxUnavailable(
            f"bubblewrap (bwrap) is not installed; the execution resource needs it: {BWRAP_INSTALL}"
        )
    if not Path(_PRLIMIT).exists():
        raise SandboxUnavailable("prlimit is missing: apt-get install -y util-linux")
    if os.geteuid() == 0 and not Path("/usr/bin/setpriv").exists():
        raise SandboxUnavailable(
            "setpriv is missing (needed to drop root inside the sandbox): "
            "apt-get install -y util-linux"
        )
    return path


def chown_tree(path: Path, uid: int) -> None:
    """Give a workspace to sandbox uid `uid` so commands inside may write it (root host only).
    chown(1) walks without recursion limits and never follows links; a top-level `reference`
    (the mount point of the execute-only reference) stays root's."""
    if os.geteuid() != 0:
        return
    subprocess.run(
        ["chown", "-R", "-P", "--no-dereference", f"{uid}:{uid}", "--", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    ph = Path(path) / "reference"
    if ph.is_file() and not ph.is_symlink():
        os.lchown(ph, 0, 0)


def _argv(
    command: Sequence[str],
    workspace: Path | None,
    binds: Sequence[Bind],
    hide: Sequence[str],
    limits: SandboxLimits,
    env: Mapping[str, str] | None,
    workspace_writable: bool = True,
    uid: int | None = None,
) -> tuple[list[str], list[str]]:
    """bwrap's options (passed on a memfd) and the command line after them."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.exists():
            argv += ["--ro-bind", str(host), f"/{name}"]
    argv += ["--perms", "0755", "--dir", "/etc"]  # not the operator's umask: cc's link is there
    for etc in _ETC_FILES:
        if Path(etc).exists():
            argv += ["--ro-bind", etc, etc]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # no pseudo-terminals: every pty opened anywhere counts in the host-wide
    # /proc/sys/kernel/pty/nr, which every sandbox reads (a red team sent a byte a reading
    # between two runs, and a program under evaluation its hidden test's input), and one
    # sandbox could take all the ptys other runs may open. An empty read-only /dev/pts leaves
    # /dev/ptmx dangling: opening it fails (ENOENT), as on a system without ptys
    argv += ["--perms", "0555", "--size", "4096", "--tmpfs", "/dev/pts"]
    devices = device_nodes()  # read-only nodes of our own over the host's (mbb.resource.fs)
    if devices is not None:
        for name, *_ in DEVICES:
            argv += ["--dev-bind", f"{devices}/{name}", f"/dev/{name}"]
    argv += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    if workspace is not None:
        mode = "--bind" if workspace_writable else "--ro-bind"
        argv += [mode, str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    else:
        argv += ["--dir", WORKSPACE, "--chdir", WORKSPACE]
    argv += ["--perms", "0755", "--dir", "/run"]  # for the reference broker's socket
    for b in binds:
        if b.copy:
            argv += ["--perms", f"{b.perms:04o}", "--ro-bind-data", f"@{b.src}", b.dst]
        else:
            argv += ["--bind" if b.writable else "--ro-bind", str(b.src), b.dst]
    for path in hide:  # e.g. the reference's original: an empty, unreadable file in its place
        argv += ["--ro-bind", "/dev/null", path]
    argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    argv += ["--clearenv"]
    for k, v in {**_ENV, **(env or {})}.items():
        argv += ["--setenv", k, v]
    tail = ["--"]
    if os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        tail += ["/usr/bin/setpriv"]
        uid = default_uid() if uid is None else uid
        tail += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        tail += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv, tail + list(command)


def _prlimit(limits: SandboxLimits, grouped: bool) -> list[str]:
    """rlimits via prlimit(1) exec'd in front of bwrap: no preexec_fn, so Popen can vfork.
    RLIMIT_NPROC counts every process of the sandbox uid on the host, i.e. of this run (a uid per
    run): with a control group the window's own `pids.max` is the limit and NPROC only a
    generous backstop."""
    nproc = max(limits.processes, 16 * limits.total_processes) if grouped else limits.processes
    return [
        _PRLIMIT,
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_bytes}",
        f"--nproc={nproc}",
        f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


_JOIN = JOIN  # joins the control group(s) named before `--`, then execs the rest
_FD_BASE = 10  # where the fork server places the descriptors bwrap reads


class _Reader(Protocol):
    def read(self, n: int, /) -> bytes: ...


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def _drain(
    pipe: IO[bytes], cap: int, out: list[bytes], counts: list[int], flags: dict[str, bool]
) -> None:
    """Read a pipe until EOF; past `cap` bytes, close it so a flooding writer dies of SIGPIPE."""
    kept = 0
    try:
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                break
            counts[0] += len(chunk)
            if kept < cap:
                out.append(chunk[: cap - kept])
                kept += min(len(chunk), cap - kept)
            if counts[0] > cap:
                flags["truncated"] = True
                break
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _start(
    command: Sequence[str],
    workspace: Path | None,
    binds: Sequence[Bind],
    hide: Sequence[str],
    limits: SandboxLimits,
    env: Mapping[str, str] | None,
    workspace_writable: bool,
    seccomp: bool,
    cgroup: WindowCgroup | None,
    spawner: Spawner | None,
    uid: int | None,
) -> Any:
    """Start bwrap: through the group's fork server, or joining the group on the way in."""
    argv: list[str] = []
    if cgroup is not None and spawner is None:
        argv += ["/bin/sh", "-c", _JOIN, "mbb-cgroup", *cgroup.procs_files(), "--"]
    argv += _prlimit(limits, cgroup is not None)
    opts, tail = _argv(command, workspace, binds, hide, limits, env, workspace_writable, uid)
    fds: list[int] = []
    slots: list[int] = []  # where in opts an fd number goes, in the order of fds

    def number(i: int) -> str:  # an fd's number where bwrap runs
        return str(_FD_BASE + i if spawner is not None else fds[i])  # fixed under the server

    try:
        for i, a in enumerate(opts):  # copied files: an fd each (the path stays on this side)
            if a.startswith("@") and i > 0 and opts[i - 1] == "--ro-bind-data":
                fds.append(os.open(a[1:], os.O_RDONLY | os.O_CLOEXEC))
                slots.append(i)
        if seccomp:
            fds.append(seccomp_fd())
            opts += ["--seccomp", ""]
            slots.append(len(opts) - 1)
        for k, i in enumerate(slots):
            opts[i] = number(k)
        fds.append(_memfd("mbb-args", b"".join(os.fsencode(a) + b"\0" for a in opts)))
        argv += [bwrap_path(), "--args", number(len(fds) - 1), *tail]
        if spawner is not None:
            return spawner.spawn(argv, [(fd, _FD_BASE + i) for i, fd in enumerate(fds)])
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(fds),
            env=HOST_ENV,
        )
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def run_sandboxed(
    command: Sequence[str],
    *,
    workspace: Path | None = None,
    stdin: bytes | _Reader = b"",
    binds: Sequence[Bind] = (),
    hide: Sequence[str] = (),
    limits: SandboxLimits = DEFAULT_LIMITS,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    workspace_writable: bool = True,
    cgroup: WindowCgroup | None = None,
    started: Callable[[subprocess.Popen[bytes]], Any] | None = None,
    seccomp: bool = True,
    uid: int | None = None,
) -> SandboxResult:
    """Run `command` in a fresh sandbox; kill everything in it at `timeout_s` (wall seconds).

    `stdin` is bytes or a reader (`read(n)`, b"" at the end) streamed in chunks; `cgroup` is
    the window's control group, joined before bwrap starts; `started` gets the process (the
    broker kills its calls at a window's end with it); `uid`: who the command runs as on a root
    host (the caller's `claim_uid()`; default: this process's `default_uid()`), the owner the
    workspace must have. Raises OSError only when the sandbox could not be started at all
    (nothing ran)."""
    grouped = cgroup is not None and not cgroup.closed
    spawner = cgroup.take() if grouped else None  # type: ignore[union-attr]
    timeout = limits.wall_s if timeout_s is None else max(0.0, min(timeout_s, limits.wall_s))
    t0 = time.monotonic()
    try:
        proc = _start(
            command,
            workspace,
            binds,
            hide,
            limits,
            env,
            workspace_writable,
            seccomp,
            cgroup if grouped else None,
            spawner,
            uid,
        )
    except OSError:
        if spawner is None:
            raise
        proc = _start(  # the fork server is gone: join the group on the way in instead
            command,
            workspace,
            binds,
            hide,
            limits,
            env,
            workspace_writable,
            seccomp,
            cgroup,
            None,
            uid,
        )
    if started is not None:
        started(proc)
    outs: list[bytes] = []
    errs: list[bytes] = []
    out_n, err_n = [0], [0]
    flags = {"truncated": False}
    readers = [
        threading.Thread(
            target=_drain, args=(proc.stdout, limits.output_bytes, outs, out_n, flags)
        ),
        threading.Thread(
            target=_drain, args=(proc.stderr, limits.output_bytes, errs, err_n, flags)
        ),
    ]
    for r in readers:
        r.daemon = True
        r.start()

    def feed() -> None:
        pipe = proc.stdin
        assert pipe is not None
        try:
            if isinstance(stdin, bytes | bytearray | memoryview):
                if stdin:
                    pipe.write(stdin)
            else:
                while chunk := stdin.read(65536):
                    pipe.write(chunk)
        except (BrokenPipeError, OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    killed = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = True
        _kill(proc)
    wall = time.monotonic() - t0
    for r in readers:
        r.join(timeout=5)
    writer.join(timeout=1)
    rc = proc.returncode
    sig = -rc if rc is not None and rc < 0 else None
    # bwrap reports the child's death by signal as 128+n; surface it as the signal too
    if rc is not None and rc > 128 and not killed:
        sig = rc - 128
    return SandboxResult(
        exit_code=None if killed else rc,
        stdout=b"".join(outs),
        stderr=b"".join(errs),
        stdout_bytes=out_n[0],
        stderr_bytes=err_n[0],
        truncated=flags["truncated"],
        killed=killed,
        wall_s=wall,
        signal=signal.SIGKILL if killed else sig,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's whole group; --die-with-parent then takes the pid namespace down with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
