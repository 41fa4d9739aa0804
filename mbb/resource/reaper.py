"""Nothing outlives an mbb process: what it leaves when killed (mounts, control groups,
temporary folders, the processes in those groups) is removed, however it died.

Every such object carries its owner's tag, "<pid>-<start>": the process id and its start time
in clock ticks since boot (/proc/PID/stat, field 22). A pid is reused, the pair is not (within
one pid namespace, until reboot), so a live process's objects are never taken for a dead one's.

- tmpfs mounts (workspaces, evaluation copies, the broker's socket folder, /dev nodes): the
  mount's source is "mbb-<tag>" (mountinfo, after the file system type);
- control groups: "mbb-<tag>-<n>-<hex>", under mbb's own group (mbb.resource.cgroups);
- temporary folders in the system temp dir: "mbb-<tag>-<what>-<random>" (`temp_dir`).

One routine (`reap`) removes one owner's objects: it kills what is left in its groups and
waits until they are empty, removes them, detaches its mounts (lazily: a process still inside
cannot block it) and deletes its temporary folders. Three triggers run it:

1. On the way out. SIGTERM and SIGHUP, when their handler is the default and the first tagged
   object is made in the main thread, reap this process, then let the signal kill it as before.
   `timeout mbb tasks check; rm -rf FOLDER` works: nothing is left when the command is gone.
   Every tagged object is made inside `making()`; the handler takes that gate first and never
   gives it back, so a thread cannot mount into a folder while it is being removed (seen once:
   an evaluation's test threads mounted two workspaces during the handler's `rm -rf`, which
   left the folder and its mounts behind until the reaper's pass). A limit of Python, not
   fixed here: the kernel may hand the signal to any thread, and Python runs the handler in
   the main thread only when that thread next wakes (measured: 10 of 100 SIGTERMs to a process
   whose main thread slept while four threads mounted). mbb's main threads wake often (an
   event loop, futures that finish within an evaluation), so the clean-up is late, not lost;
   trigger 2 covers a process killed before then.
2. After any death, SIGKILL included. With its first tagged object a process starts a reaper
   process (this file, run by the same python with -I -S: no mbb import, ~20 ms once): in a
   session of its own, so signals to mbb's process group (Ctrl-C, `timeout`) miss it, holding
   the read end of a pipe whose write end only this process holds. End of file on it means
   this process is gone, however it died: the reaper reaps its tag and exits.
3. At the next start. A reaper first reaps every tag whose owner is dead (for a reaper that
   was itself killed, e.g. with the whole container).

Why not a private mount namespace that dies with mbb? unshare(CLONE_NEWNS) moves only the
calling thread when the process has threads (measured: the other threads stayed in the old
namespace), and mbb makes its mounts from processes that already run threads (event loop,
evaluation pool, Jupyter kernels); control groups have no such namespace at all. A reaper
process handles both, with the routine the next start uses.

A process pool's workers are processes of their own: killed with SIGKILL, the command that
started them leaves them running. `die_with_parent`, called in a worker, has the kernel send it
SIGTERM when its parent dies, and its SIGTERM handler reaps what it held.

Objects made before tags existed ("mbb-PID-N-HEX" groups, "tmpfs" mounts) are not touched:
without a start time their owner cannot be told from a new process with the same pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "alive",
    "cgroup_parents",
    "die_with_parent",
    "making",
    "own_cgroup",
    "owner_tag",
    "reap",
    "tagged_mounts",
    "temp_dir",
    "temp_directory",
    "watch",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
_MNT_DETACH = 2
_MOUNT_SOURCE = re.compile(r"mbb-(\d+-\d+)")
_GROUP = re.compile(r"mbb-(\d+-\d+)-\d+-[0-9a-f]+")
_FOLDER = re.compile(r"mbb-(\d+-\d+)-.+")
_SETSID = "/usr/bin/setsid"
_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


# --- owners -------------------------------------------------------------------------------------
def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot), None if there is no such process."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(data[data.rindex(b")") + 2 :].split()[19])


_own: tuple[int, str] | None = None


def owner_tag() -> str:
    """This process's tag, "<pid>-<start time>"."""
    global _own
    pid = os.getpid()
    if _own is None or _own[0] != pid:
        _own = (pid, f"{pid}-{start_time(pid)}")
    return _own[1]


def alive(tag: str) -> bool:
    pid, start = (int(x) for x in tag.split("-"))
    return start_time(pid) == start


def own_cgroup(controller: str | None) -> str:
    """This process's group in one hierarchy (cgroup v2: controller None)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if controller is None and ctrls == "":
            return path
        if controller is not None and controller in ctrls.split(","):
            return path
    raise OSError(f"not in a {controller or 'v2'} cgroup")


def cgroup_parents() -> list[Path]:
    """Where this process makes its groups: its own group (v2), or in each controller (v1)."""
    try:
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            return [CGROUP_ROOT / own_cgroup(None).lstrip("/")]
        return [CGROUP_ROOT / c / own_cgroup(c).lstrip("/") for c in V1_CONTROLLERS]
    except OSError:
        return []


def tagged_mounts() -> list[tuple[bytes, str]]:
    """(mount point, owner tag) of every tagged mount of this mount namespace, in mount order."""
    try:
        lines = Path("/proc/self/mountinfo").read_bytes().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        left, _, right = line.partition(b" - ")
        fields = right.split()
        m = _MOUNT_SOURCE.fullmatch(fields[1].decode("ascii", "replace")) if fields[1:] else None
        if m is not None:  # mountinfo escapes space, tab, newline and backslash as \\ooo
            point = re.sub(rb"\\([0-7]{3})", lambda o: bytes([int(o[1], 8)]), left.split()[4])
            out.append((point, m.group(1)))
    return out


# --- the routine --------------------------------------------------------------------------------
def _empty_and_remove(group: Path, deadline: float) -> bool:
    """SIGKILL everything in `group` until it can be removed (v2: cgroup.kill first)."""
    with contextlib.suppress(OSError):
        (group / "cgroup.kill").write_text("1")
    while True:
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:  # EBUSY while its last members are reaped
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def _detach(point: bytes) -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return int(libc.umount2(point, _MNT_DETACH)) == 0


def reap(
    owner: str | None = None, tmp: str | None = None, timeout_s: float = 5.0
) -> dict[str, int]:
    """Remove what `owner` left (whether or not it is alive: its caller knows it is ending),
    or, with owner None, what every dead owner left: groups (and their processes), mounts, and
    temporary folders in `tmp` (default: the system temp dir). Never raises; returns counts."""

    def doomed(tag: str) -> bool:
        return tag == owner if owner is not None else not alive(tag)

    deadline = time.monotonic() + timeout_s
    counts = {"groups": 0, "mounts": 0, "folders": 0}
    for parent in cgroup_parents():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            m = _GROUP.fullmatch(name)
            if m is not None and doomed(m.group(1)) and _empty_and_remove(parent / name, deadline):
                counts["groups"] += 1
    for point, tag in reversed(tagged_mounts()):  # the deepest first
        if doomed(tag) and _detach(point):
            counts["mounts"] += 1
    tmp = tmp or tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            m = _FOLDER.fullmatch(name)
            if m is not None and doomed(m.group(1)):
                subprocess.run(
                    ["rm", "-rf", "--one-file-system", "--", os.path.join(tmp, name)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=_ENV,
                    check=False,
                )
                counts["folders"] += 1
    return counts


# --- the triggers -------------------------------------------------------------------------------
_lock = threading.Lock()
_watched: tuple[int, int] | None = None  # (pid, our end of the reaper's pipe)
_handled = 0  # the pid whose SIGTERM/SIGHUP handlers are in place
_warned = False
_making = threading.RLock()  # held while a tagged object is made; the way-out handler keeps it
_GATE_WAIT_S = 5.0  # how long the handler waits for an object being made (a mount, a mkdir)


@contextlib.contextmanager
def making() -> Iterator[str]:
    """Hold this while making a tagged object (mount, group, temporary folder); yields this
    process's tag. Once SIGTERM/SIGHUP's handler has begun to reap, no thread gets past here:
    it waits until the process is gone, so nothing is made after the reap has looked. Re-entrant
    (the handler runs in the main thread, which may be inside already)."""
    tag = watch()
    with _making:
        yield tag


def watch() -> str:
    """Make sure a reaper process watches this process (started on the first call) and that
    SIGTERM and SIGHUP reap on the way out (when called from the main thread with their
    handlers at the default); returns this process's tag. Never raises: without a reaper, the
    next start still reaps."""
    global _watched, _warned
    tag = owner_tag()
    with _lock:
        if _watched is None or _watched[0] != os.getpid():
            r, w = os.pipe()  # not inheritable: the reaper alone gets the read end
            argv = [_SETSID, "-f", sys.executable, "-I", "-S", __file__, tag]
            try:
                subprocess.run(
                    [*argv, tempfile.gettempdir()],
                    stdin=r,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=_ENV,
                    check=True,
                    timeout=30,
                )
                _watched = (os.getpid(), w)
            except (OSError, subprocess.SubprocessError) as exc:
                os.close(w)
                if not _warned:
                    _warned = True
                    warnings.warn(
                        f"mbb could not start its reaper ({exc}): what a killed mbb leaves "
                        "is removed at the next start only (apt-get install -y util-linux)",
                        RuntimeWarning,
                        stacklevel=2,
                    )
            finally:
                os.close(r)
        _on_the_way_out()
    return tag


def _on_the_way_out() -> None:
    global _handled
    if _handled == os.getpid() or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _reap_and_die)
    _handled = os.getpid()


def _reap_and_die(signum: int, frame: object) -> None:
    # The gate is never released: threads about to make an object wait here until we are gone.
    # Past the wait (an object stuck being made), reap anyway; the reaper process follows up.
    _making.acquire(timeout=_GATE_WAIT_S)
    with contextlib.suppress(Exception):
        reap(owner_tag())
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _forget_in_child() -> None:
    """A forked child is a new owner: it closes its copy of the parent's pipe (the parent's
    reaper must see the parent's end) and starts its own reaper when it needs one."""
    global _watched, _making
    if _watched is not None:
        with contextlib.suppress(OSError):
            os.close(_watched[1])
    _watched = None
    _making = threading.RLock()  # a thread of the parent may have held it at the fork


os.register_at_fork(after_in_child=_forget_in_child)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Have the kernel send SIGTERM to this process when its parent dies: a pool's worker then
    goes with the mbb command that started it, even a SIGKILLed one, and its SIGTERM handler
    (see `watch`) reaps what it held. `parent`: the pid the parent must still have (default:
    the multiprocessing parent's, else the current parent's); if it is gone already, SIGTERM
    now. Call it first thing in the worker (a pool's initializer). The kernel sends it when the
    parent's *thread* that started this process ends: start workers from the main thread."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent is None:
        import multiprocessing

        mp_parent = multiprocessing.parent_process()
        parent = mp_parent.pid if mp_parent is not None and mp_parent.pid else os.getppid()
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _temp_prefix(what: str) -> str:
    """The name start of a temporary folder of this process ("mbb-<tag>-<what>-"): the reaper
    deletes it once this process is gone. Starts the reaper."""
    return f"mbb-{watch()}-{what}-"


def temp_dir(what: str, parent: Path | None = None) -> Path:
    """A fresh folder named `_temp_prefix(what)`... in `parent` (default: the temp dir)."""
    with making():
        return Path(tempfile.mkdtemp(prefix=_temp_prefix(what), dir=parent))


def temp_directory(what: str) -> tempfile.TemporaryDirectory[str]:
    """A `tempfile.TemporaryDirectory` named `_temp_prefix(what)`... (removed at the end of its
    with-block, or by the reaper if this process dies first)."""
    with making():
        return tempfile.TemporaryDirectory(prefix=_temp_prefix(what))


def _main(argv: list[str]) -> None:
    """The reaper process: reap the dead owners, wait for the end of file, reap `argv[1]`."""
    tag, tmp = argv[1], argv[2]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when its process has ended
    reap(None, tmp)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    reap(tag, tmp)


if __name__ == "__main__":
    _main(sys.argv)
