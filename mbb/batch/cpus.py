"""How many worker processes a batch of scripted runs gets: the CPUs this process may really use,
less what other processes keep busy, and one process whenever a pool would not pay.

`os.cpu_count()` counts the machine's CPUs, not this process's: a CPU affinity mask (taskset,
a container's cpuset) or a cgroup CPU quota (docker `--cpus`, Kubernetes limits) can leave
fewer, and other jobs may keep them busy. A pool of two processes on a host whose other core is
busy was 1.3x slower than one process (200 base runs at load 4: 9.8-10.0 s vs 7.6 s): its
workers pay their start-up (imports) on contended cores and the parent merges their results.

The decision is `pool_size`, a pure function of its inputs; `cpu_budget` reads them from this
machine (each reader takes its files as arguments, so tests inject them):

- usable CPUs: the affinity mask's size, capped by the cgroup quota (v2 `cpu.max`, v1
  `cpu.cfs_quota_us` / `cpu.cfs_period_us`, this process's group and its parents);
- busy CPUs: the load of the others, the tasks runnable now (`/proc/loadavg`, a few reads
  averaged; `os.getloadavg` where it is missing), less this process itself;
- a pool only when at least `PARALLEL_FROM` runs remain and two or more CPUs are free
  (`MIN_FREE_PER_PROCESS` each): mbb's choice, measured with `bench/bench_runner.py`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MIN_FREE_PER_PROCESS",
    "PARALLEL_FROM",
    "CpuBudget",
    "affinity_cpus",
    "cgroup_quota",
    "cpu_budget",
    "current_load",
    "pool_size",
]

PARALLEL_FROM = 64  # below this many scripted runs one process is faster (bench/bench_runner.py)
MIN_FREE_PER_PROCESS = 0.9  # a pool's process needs this much of a free CPU to pay its start-up
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CpuBudget:
    """What `pool_size` decides from.

    cpus: CPUs in this process's affinity mask; quota: the cgroup CPU quota in CPUs (None: no
    quota); load: runnable tasks on the machine, this process included."""

    cpus: int
    quota: float | None
    load: float

    @property
    def usable(self) -> float:
        """The CPUs this process may use: the mask, capped by the quota."""
        return float(self.cpus) if self.quota is None else min(float(self.cpus), self.quota)

    @property
    def free(self) -> float:
        """Usable CPUs that other processes do not keep busy."""
        return self.usable - max(0.0, self.load - 1.0)


def pool_size(runs: int, budget: CpuBudget, *, cap: int = 64) -> int:
    """The worker processes for `runs` scripted runs: 1 (no pool) below `PARALLEL_FROM` runs or
    when fewer than two CPUs' worth are free; else one process per free CPU, at most `cap`.

    runs: the runs still to do; budget: the machine's CPUs and load (`cpu_budget`); cap: the
    most processes wanted."""
    if runs < PARALLEL_FROM:
        return 1
    n = math.floor(budget.free / MIN_FREE_PER_PROCESS + 1e-9)
    n = min(n, math.floor(budget.usable + 1e-9), cap)
    return n if n >= 2 else 1


def affinity_cpus() -> int:
    """CPUs in this process's affinity mask (`os.cpu_count()` where the mask is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v2_quota(folder: Path) -> float | None:
    text = _read(folder / "cpu.max")
    if not text:
        return None
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_quota(folder: Path) -> float | None:
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    try:
        q, p = float(quota or "-1"), float(period or "0")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _chain(root: Path, group: str) -> list[Path]:
    """The group's folder under `root` and each parent up to `root` (a limit anywhere binds)."""
    rel = Path(group.lstrip("/"))
    folders = [root / rel]
    while rel != Path(".") and rel.parts:
        rel = rel.parent
        folders.append(root / rel)
    return list(dict.fromkeys(folders))


def cgroup_quota(
    root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
) -> float | None:
    """The CPU quota of this process's control group in CPUs (the tightest of its group and
    its parents), or None without one. cgroup v2 (`cpu.max`) and v1 (`cpu.cfs_quota_us` over
    `cpu.cfs_period_us`, in the `cpu` or `cpu,cpuacct` hierarchy) are both read.

    root: where the control groups are mounted; proc_cgroup: this process's membership file."""
    text = _read(proc_cgroup) or ""
    quotas: list[float] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if controllers == "":  # v2: one unified hierarchy
            quotas += [q for f in _chain(root, group) if (q := _v2_quota(f)) is not None]
        elif "cpu" in controllers.split(","):
            for name in (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"):
                base = root / name
                if base.is_dir():
                    quotas += [q for f in _chain(base, group) if (q := _v1_quota(f)) is not None]
                    break
    return min(quotas) if quotas else None


def _running(text: str) -> float | None:
    """Tasks runnable now, from `/proc/loadavg`'s fourth field ("3/412")."""
    try:
        return float(text.split()[3].split("/")[0])
    except (IndexError, ValueError):
        return None


def current_load(
    loadavg: Path = Path("/proc/loadavg"), samples: int = 5, interval_s: float = 0.005
) -> float:
    """Runnable tasks on the machine now, this process included: the mean of `samples` reads
    of `/proc/loadavg`'s runnable count, `interval_s` apart (bursty jobs average out). Where
    that file cannot be read, the 1-minute `os.getloadavg()`.

    The 1-minute average is not used where the count is there: it lags a minute behind jobs
    that start or stop, and it counts mbb's own previous command (a second `mbb run` right
    after a parallel one would see its own two workers as load and give up the pool).

    loadavg: the kernel's load file (injected by tests); samples, interval_s: how many reads,
    how far apart."""
    counts = []
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval_s)
        n = _running(_read(loadavg) or "")
        if n is not None:
            counts.append(n)
    if counts:
        return sum(counts) / len(counts)
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def cpu_budget(
    root: Path = CGROUP_ROOT,
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    loadavg: Path = Path("/proc/loadavg"),
) -> CpuBudget:
    """This machine's `CpuBudget` now: affinity, cgroup quota and load (~20 ms: the load is
    read a few times).

    root, proc_cgroup, loadavg: the files read (see `cgroup_quota`, `current_load`)."""
    return CpuBudget(
        cpus=affinity_cpus(), quota=cgroup_quota(root, proc_cgroup), load=current_load(loadavg)
    )
