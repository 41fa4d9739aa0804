"""One control group per window (and per evaluation): total memory, processes and CPU.

Limits set with rlimits are per process (4 processes x 900 MiB fit under a 1 GiB RLIMIT_AS);
a control group limits the sandbox as a whole, covers the tmpfs pages its processes write, and
lets everything in it be killed at once when the window ends, including the reference calls
the broker ran for that worker.

Two layouts are supported, detected once per process:

- cgroup v2 (`/sys/fs/cgroup/cgroup.controllers`): a child of this process's own group, with
  `memory.max` (+ `memory.swap.max` 0), `pids.max`, `cpu.max`, killed with `cgroup.kill`.
  This needs delegation: the memory, pids and cpu controllers must be enabled for our group's
  children (`cgroup.subtree_control`), which the kernel refuses while our own group holds
  processes unless it is the root. Run mbb in a delegated scope to get it (systemd-run --scope
  -p Delegate=yes ..., or a container whose cgroup is delegated).
- cgroup v1 (`/sys/fs/cgroup/{memory,pids,cpu}`): one child per controller under this
  process's own group there, with `memory.limit_in_bytes` (+ memsw), `pids.max`,
  `cpu.cfs_quota_us`; killed by SIGKILLing the pids group's members until it is empty.

Where neither works (not root, no delegation), `available()` says why and the sandbox falls
back to per-process rlimits only (README: "what is not enforced without cgroup delegation").
`MBB_CGROUPS=off` forces that fallback (tests of it).

Speed: moving a process into a v1 group waits for an RCU grace period (10-20 ms on a loaded
machine), too slow to pay per command. So each group runs a fork server inside it
(mbb.resource.spawner) that starts the group's commands: they are born in the group. Until the
server is up (it starts in the background when the group is made) or if it is gone, a command
joins the group itself on the way in.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mbb.resource import reaper
from mbb.resource.spawner import Spawner

__all__ = ["CgroupLimits", "WindowCgroup", "available", "cgroup_mode"]

_ROOT = Path("/sys/fs/cgroup")
_V1 = ("memory", "pids", "cpu")
_lock = threading.Lock()
_mode: tuple[str | None, str] | None = None
_counter = itertools.count()


_own_path = reaper.own_cgroup  # this process's group in one hierarchy (v2: controller None)


def _probe() -> tuple[str | None, str]:
    if os.environ.get("MBB_CGROUPS", "").lower() in ("off", "0", "no", "false"):
        return None, "disabled by MBB_CGROUPS=off"
    try:
        if (_ROOT / "cgroup.controllers").exists():
            base = _ROOT / _own_path(None).lstrip("/")
            need = {"memory", "pids", "cpu"}
            have = set((base / "cgroup.controllers").read_text().split())
            if not need <= have:
                return None, f"cgroup v2 without the {sorted(need - have)} controller(s)"
            enabled = set((base / "cgroup.subtree_control").read_text().split())
            if not need <= enabled:
                (base / "cgroup.subtree_control").write_text(
                    " ".join(f"+{c}" for c in sorted(need - enabled))
                )
            probe = _mkgroup(base)
            probe.rmdir()
            return "v2", str(base)
        bases = []
        for c in _V1:
            base = _ROOT / c / _own_path(c).lstrip("/")
            probe = _mkgroup(base)
            probe.rmdir()
            bases.append(str(base))
        return "v1", ",".join(bases)
    except OSError as exc:
        return None, f"no usable cgroup delegation ({exc.__class__.__name__}: {exc})"


def _mkgroup(base: Path) -> Path:
    """A new group named after its owner (mbb.resource.reaper removes it if the owner dies)."""
    with reaper.making() as tag:
        p = base / f"mbb-{tag}-{next(_counter)}-{secrets.token_hex(3)}"
        p.mkdir()
    return p


def cgroup_mode() -> tuple[str | None, str]:
    """("v1" | "v2", where) or (None, why not); probed once per process."""
    global _mode
    with _lock:
        if _mode is None:
            _mode = _probe()
        return _mode


def available() -> bool:
    return cgroup_mode()[0] is not None


@dataclass(frozen=True, slots=True)
class CgroupLimits:
    memory_bytes: int = 2 << 30  # all processes of the window together (incl. tmpfs pages)
    processes: int = 256  # processes and threads of the window together
    cpus: float = 1.0  # CPU bandwidth: at most this many CPUs' worth of time per wall second


# joins the control group(s) named before `--`, then execs the rest (one dash, ~1 ms)
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class WindowCgroup:
    """A fresh group (one per controller on v1); `procs_files()` are what a new process writes
    its pid into before exec'ing the sandbox; `close()` kills everything in it and removes it."""

    def __init__(self, limits: CgroupLimits | None = None) -> None:
        mode, where = cgroup_mode()
        if mode is None:
            raise OSError(f"cgroups unavailable: {where}")
        self.mode = mode
        self.limits = limits or CgroupLimits()
        self.dirs: list[Path] = []
        self.closed = False
        self._spawner: Spawner | None = None
        self._spawner_lock = threading.Lock()
        lim = self.limits
        try:
            if mode == "v2":
                d = _mkgroup(Path(where))
                self.dirs.append(d)
                (d / "memory.max").write_text(str(lim.memory_bytes))
                with contextlib.suppress(OSError):
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(lim.processes))
                (d / "cpu.max").write_text(f"{int(lim.cpus * 100_000)} 100000")
            else:
                for base in where.split(","):
                    self.dirs.append(_mkgroup(Path(base)))
                mem, pids, cpu = self.dirs
                (mem / "memory.limit_in_bytes").write_text(str(lim.memory_bytes))
                with contextlib.suppress(OSError):
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(lim.memory_bytes))
                (pids / "pids.max").write_text(str(lim.processes))
                (cpu / "cpu.cfs_period_us").write_text("100000")
                (cpu / "cpu.cfs_quota_us").write_text(str(int(lim.cpus * 100_000)))
        except OSError:
            self.close()
            raise

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def warm(self) -> None:
        """Start the group's fork server in the background (idempotent)."""
        with self._spawner_lock:
            if self.closed or (self._spawner is not None and not self._spawner.dead):
                return
            try:
                self._spawner = Spawner(self.procs_files(), _python(), JOIN)
            except OSError:
                self._spawner = None

    def take(self) -> Spawner | None:
        """The group's fork server if it is up, else None (the caller joins the group itself;
        a dead server is restarted for the next command)."""
        with self._spawner_lock:
            sp = self._spawner
        if sp is None:
            return None
        if sp.dead:
            self.warm()
            return None
        return sp if sp.alive() else None

    def _members(self) -> list[int]:
        if not self.dirs:
            return []
        d = self.dirs[0] if self.mode == "v2" else self.dirs[1]  # v1: the pids group
        try:
            return [int(x) for x in (d / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def pids(self) -> list[int]:
        return self._members()

    def kill(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL every process in the group (its fork server too: `warm()` again to
        keep using the group); True once it is empty."""
        if not self.dirs:
            return True
        with self._spawner_lock:
            sp, self._spawner = self._spawner, None
        if sp is not None:
            sp.close()
        if self.mode == "v2" and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + timeout_s
        while True:
            members = self._members()
            if not members:
                return True
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def memory_peak(self) -> int | None:
        d = self.dirs[0] if self.dirs else None
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            with contextlib.suppress(OSError, ValueError, TypeError):
                return int((d / name).read_text())  # type: ignore[operator]
        return None

    def close(self) -> None:
        """Kill everything left and remove the group (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self.kill()
        for d in reversed(self.dirs):
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while the last members are reaped
                    self.kill(0.5)
                    time.sleep(0.01)
        self.dirs = []


def _python() -> str:
    """The system's python3 for the fork server (started once per group, in the background)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK):
            return p
    import sys

    return sys.executable
